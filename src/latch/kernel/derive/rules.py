"""The rule contract: DerivationContext and DerivationRule."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ...events import ToolCall, ToolResult
from ..events import (
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
from .facts import ERROR_FLAG_FORMATS

PATHS_KEPT = 4096
"""Normalized paths a :class:`DerivationContext` keeps (the same files are read and edited again and again)."""


class DerivationContext:
    """What rules may know about the session being derived, and update as they go.

    ``workspace``/``cwd`` make paths workspace-relative; ``open_file`` is
    SWE-agent's current file; ``foreground`` is OpenHands' still-running shell
    command; ``running`` maps a managed process id to ``(tool, command,
    validation requirements waiting for its exit)``.
    """

    def __init__(self, session_id: str, format: str | None, workspace: str | None):
        self.session_id = session_id
        self.format = format
        self.workspace = workspace.rstrip("/") if workspace else None
        self.cwd = self.workspace
        self.open_file: str | None = None
        self.running: dict[str, tuple[str, str, tuple[str, ...]]] = {}
        self.foreground: str | None = None  # OpenHands: the command still holding the shell
        self._paths: dict[str, str] = {}  # raw -> path, while the folders below are the ones it was made with
        self._paths_base: tuple[str | None, str | None] = (self.workspace, self.cwd)

    @property
    def error_flag_reliable(self) -> bool:
        return self.format in ERROR_FLAG_FORMATS

    def path(self, raw: str) -> str:
        """``raw`` normalized: workspace-relative when inside the workspace (or SWE-agent's cwd)."""
        base = (self.workspace, self.cwd)
        if base != self._paths_base:
            self._paths, self._paths_base = {}, base
        p = self._paths.get(raw)
        if p is None:
            if len(self._paths) >= PATHS_KEPT:
                self._paths.clear()
            p = self._paths[raw] = self._normalized(raw)
        return p

    def _normalized(self, raw: str) -> str:
        p = raw.strip()
        if not p:
            return p
        base = self.workspace or self.cwd
        if base and p.startswith(base + "/"):
            p = p[len(base) + 1 :]
        elif base and p == base:
            return "."
        return posixpath.normpath(p)


class DerivationRule:
    """One named rule, registered through the ``latch_register_derivation_rules`` hook (a class).

    Subclasses set ``PLUGIN_NAME`` (unique among all rules) and ``tools`` (or override
    :meth:`matches`), have a no-argument constructor, and implement :meth:`derive`.
    """

    PLUGIN_NAME: ClassVar[str] = ""
    tools: ClassVar[frozenset[str]] = frozenset()

    @property
    def name(self) -> str:
        """The rule's ``PLUGIN_NAME``."""
        return type(self).PLUGIN_NAME

    def matches(self, call: ToolCall) -> bool:
        """Whether this rule derives ``call`` (default: ``call.name`` is in ``tools``): a function of the call, asked
        once per call, when the call is registered (:class:`~latch.kernel.derive.SessionDeriver`)."""
        return call.name in self.tools

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:  # pragma: no cover
        """The facts of ``call`` and its ``result`` (kernel records or derived-only facts; may be empty)."""
        raise NotImplementedError

    def may_mutate(self, call: ToolCall, ctx: DerivationContext) -> bool:
        """Whether ``call`` may change the workspace before its result is known (spec: possible external
        mutations commit before execution): while the call has no result, the current workspace generation
        counts it once (:meth:`latch.kernel.ledger.Workspace.pending`). Default: :meth:`derive` with a
        missing result, on a scratch copy of ``ctx``, yields a :class:`Mutation`."""
        scratch = DerivationContext(ctx.session_id, ctx.format, ctx.workspace)
        scratch.cwd, scratch.open_file, scratch.foreground = ctx.cwd, ctx.open_file, ctx.foreground
        scratch.running = dict(ctx.running)
        facts = self.derive(call, ToolResult(call.id, "", missing=True), scratch)
        return any(isinstance(f, Mutation) for f in facts)


def check_rules(rules: Sequence[DerivationRule]) -> tuple[DerivationRule, ...]:
    """``rules`` as a tuple, after checking each has a non-empty name and no name repeats.

    Raises ``ValueError`` naming the offending rule(s).
    """
    seen: dict[str, DerivationRule] = {}
    for rule in rules:
        if not isinstance(rule.name, str) or not rule.name:
            raise ValueError(f"derivation rule {type(rule).__qualname__} has no PLUGIN_NAME")
        prior = seen.get(rule.name)
        if prior is not None:
            raise ValueError(
                f"derivation rule name {rule.name!r} is used twice: {type(prior).__qualname__} and "
                f"{type(rule).__qualname__}"
            )
        seen[rule.name] = rule
    return tuple(rules)


def _removed(name: str) -> Callable[..., Any]:
    def removed(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"latch.kernel.derive.{name}() was removed: derivation rules are registered by a plugin "
            "through the latch_register_derivation_rules hook (docs/plugins.md)"
        )

    removed.__name__ = removed.__qualname__ = name
    removed.__doc__ = "Removed: raises ``RuntimeError`` (use the ``latch_register_derivation_rules`` hook)."
    return removed


register_rule = _removed("register_rule")
unregister_rule = _removed("unregister_rule")


KERNEL_RECORDS = (
    StateUpdate,
    FileObservation,
    Mutation,
    ExternalChange,
    ValidationEvidence,
    ProcessStarted,
    ProcessExited,
    WriterBlocker,
    Tombstone,
)
