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

The classes are declared in :mod:`latch.events` (its explicit :data:`~latch.events.BUILTIN_KINDS`
table), so a process that never imports the kernel still decodes them from a store; this module
is their kernel-side name and the same class objects.
"""

from __future__ import annotations

from ..events import (
    EVIDENCE_STATUSES,
    ExternalChange,
    FileObservation,
    Mutation,
    ProcessExited,
    ProcessStarted,
    StateUpdate,
    Tombstone,
    ValidationEvidence,
    WriterBlocker,
)

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
