"""Kernel event kinds: durable facts the kernel owns (spec: "Sessions & continuity").

Conversation events (:mod:`latch.events`) say what was said; these say what the
kernel knows. Each is appended to the log of the session it belongs to, so it
has a global ``seq`` and survives resume:

* :class:`StateUpdate`        one kernel tool call (``set_goal``, ``record_decision``,
  ``record_disproof``...) with its validated arguments
* :class:`FileObservation`    a bounded read of a file (SHA-256 and size when the
  whole file is at most 64 KiB)
* :class:`Mutation`           a change to the workspace: advances the workspace generation
* :class:`ExternalChange`     a guarded write found different bytes on disk than expected
* :class:`ValidationEvidence` a proving command, its exact requirements and its outcome
* :class:`ProcessStarted` / :class:`ProcessExited`  a managed (background) process
* :class:`WriterBlocker`      the writer reported it cannot finish; repeats are supervised
* :class:`Tombstone`          the session's history was deleted from normal selectors

The derivation rules (:mod:`latch.kernel.derive`) produce the same records from
imported conversations; derived ones are never written back to the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..events import Event, register_kind

__all__ = [
    "StateUpdate",
    "FileObservation",
    "Mutation",
    "ExternalChange",
    "ValidationEvidence",
    "ProcessStarted",
    "ProcessExited",
    "WriterBlocker",
    "Tombstone",
    "EVIDENCE_STATUSES",
]

EVIDENCE_STATUSES = ("passed", "failed", "unknown")
"""``passed`` / ``failed`` from an exit status or unambiguous output; ``unknown`` otherwise."""


@register_kind
@dataclass(frozen=True, slots=True)
class StateUpdate(Event):
    """One kernel tool call: ``tool`` (a name in ``KERNEL_TOOLS``) and its validated ``arguments``.

    The text FTS indexes is ``"<tool>: <the argument values>"``, so decisions,
    constraints and disproofs are found by exact recall.
    """

    KIND: ClassVar[str] = "state_update"
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def searchable_text(self) -> str:
        parts: list[str] = []
        for key in sorted(self.arguments):
            value = self.arguments[key]
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, (list, tuple)):
                parts.extend(str(v) for v in value)
        return f"{self.tool}: " + " | ".join(parts)


@register_kind
@dataclass(frozen=True, slots=True)
class FileObservation(Event):
    """A read of ``path`` (workspace-relative when inside the workspace).

    ``sha256``/``size`` (bytes) describe the whole file and are set only when it
    is at most 64 KiB; larger files are read in pages (``offset``/``length`` in
    bytes) with no whole-file hash.
    """

    KIND: ClassVar[str] = "file_observation"
    path: str
    sha256: str | None = None
    size: int | None = None
    offset: int = 0
    length: int | None = None


@register_kind
@dataclass(frozen=True, slots=True)
class Mutation(Event):
    """A change to the workspace; every mutation advances the workspace generation by one.

    ``paths`` empty means the changed files are unknown (a formatter run over
    the tree): it stales everything a file-scoped record relies on.
    ``sha256_before``/``sha256_after`` are set by guarded writes of one file.
    """

    KIND: ClassVar[str] = "mutation"
    paths: tuple[str, ...] = ()
    tool: str = ""
    sha256_before: str | None = None
    sha256_after: str | None = None

    def searchable_text(self) -> str:
        return "mutation " + " ".join(self.paths) if self.paths else ""


@register_kind
@dataclass(frozen=True, slots=True)
class ExternalChange(Event):
    """``path`` changed outside the agent: its bytes no longer hash to ``expected_sha256``.

    ``actual_sha256`` is ``None`` when the file is gone. The model must re-read it.
    """

    KIND: ClassVar[str] = "external_change"
    path: str
    expected_sha256: str | None = None
    actual_sha256: str | None = None

    def searchable_text(self) -> str:
        return f"external change {self.path}"


@register_kind
@dataclass(frozen=True, slots=True)
class ValidationEvidence(Event):
    """The outcome of one proving ``command`` for its exact ``requirements`` (a validation set).

    ``status`` is one of :data:`EVIDENCE_STATUSES`. The workspace generation it
    checked is the generation at this event's ``seq`` (computed by replay, never
    trusted from the payload). ``requirements`` empty means the command itself.
    """

    KIND: ClassVar[str] = "validation_evidence"
    command: str
    status: str
    requirements: tuple[str, ...] = ()
    exit_code: int | None = None
    summary: str = ""

    def searchable_text(self) -> str:
        return f"validation {self.status}: {self.command}\n{self.summary}".rstrip()


@register_kind
@dataclass(frozen=True, slots=True)
class ProcessStarted(Event):
    """A managed process ``process_id`` started running ``command``; it blocks certification until it exits."""

    KIND: ClassVar[str] = "process_started"
    process_id: str
    command: str = ""

    def searchable_text(self) -> str:
        return f"process {self.process_id} started: {self.command}"


@register_kind
@dataclass(frozen=True, slots=True)
class ProcessExited(Event):
    """Managed process ``process_id`` exited (``exit_code`` ``None`` when killed or unknown)."""

    KIND: ClassVar[str] = "process_exited"
    process_id: str
    exit_code: int | None = None


@register_kind
@dataclass(frozen=True, slots=True)
class WriterBlocker(Event):
    """The writer reported ``blocker`` instead of finishing.

    Repeats of the same blocker with no workspace change in between are failed
    certification attempts, whatever ``command`` and ``command_passed`` say.
    """

    KIND: ClassVar[str] = "writer_blocker"
    blocker: str
    command: str | None = None
    command_passed: bool | None = None

    def searchable_text(self) -> str:
        return f"writer blocker: {self.blocker}"


@register_kind
@dataclass(frozen=True, slots=True)
class Tombstone(Event):
    """The session's history was deleted: normal history and resume selectors omit it.

    Raw events, child sessions, artifacts, mutations and the generation are untouched.
    """

    KIND: ClassVar[str] = "tombstone"
    reason: str = ""

