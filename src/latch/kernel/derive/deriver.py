"""The built-in rules in order, and SessionDeriver."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...events import AssistantMessage, Event, EventClassTable, ToolCall, ToolResult, UserMessage
from ..events import ProcessStarted
from .codex_exec import CodexExecRule
from .common import _action, _excerpt, call_arguments, error_signature
from .facts import ToolFailure, ToolSuccess, UserInstruction, instruction_text
from .files import ApplyPatchRule, FileToolRule
from .plans import PlanRule
from .rules import KERNEL_RECORDS, DerivationContext, DerivationRule
from .shell_rules import ProcessPollRule, ShellRule

BUILTIN_RULES: tuple[type[DerivationRule], ...] = (
    FileToolRule,
    ApplyPatchRule,
    PlanRule,
    CodexExecRule,
    ProcessPollRule,
    ShellRule,
)
"""The built-in rule classes in the order they are tried (registered by :mod:`latch.default_plugins.derivation`)."""


def builtin_rules() -> tuple[DerivationRule, ...]:
    """New instances of :data:`BUILTIN_RULES`, in order: the rules used when the caller passes none."""
    return tuple(cls() for cls in BUILTIN_RULES)


_CALLS, _RESULT, _USER, _RECORD, _NOTHING = range(5)
_BRANCHES = EventClassTable(
    ((AssistantMessage, _CALLS), (ToolResult, _RESULT), (UserMessage, _USER), (KERNEL_RECORDS, _RECORD)), _NOTHING
)
"""What :meth:`SessionDeriver.feed` does with an event, by its class: the first of its ``isinstance`` tests that holds,
in their order."""


def derives_nothing(kind: type) -> bool:
    """Whether :meth:`SessionDeriver.feed` of an event of type ``kind`` returns ``[]`` and counts no call opened or
    closed, whatever the event holds and whatever came before (usage, notes and other kinds no rule reads)."""
    return _BRANCHES[kind] == _NOTHING


def _rules_by_name(rules: Sequence[DerivationRule]) -> dict[str, DerivationRule] | None:
    """``{tool name: the first of rules whose tools hold it}`` when every rule keeps the default
    :meth:`DerivationRule.matches` (``call.name in tools``): the rule :meth:`SessionDeriver._rule` finds by trying
    them in order. ``None`` when one decides otherwise (then they are tried in order)."""
    by_name: dict[str, DerivationRule] = {}
    for rule in rules:
        own = getattr(rule, "__dict__", {})
        if (
            type(rule).matches is not DerivationRule.matches
            or "matches" in own
            or not isinstance(rule.tools, frozenset)
        ):
            return None
        for name in rule.tools:
            by_name.setdefault(name, rule)
    return by_name


class SessionDeriver:
    """Feeds one session's events in ``seq`` order and returns the facts each produces.

    Kernel records (explicit :mod:`latch.kernel.events`) pass through unchanged;
    an :class:`~latch.events.AssistantMessage` registers its calls; a
    :class:`~latch.events.ToolResult` runs the first matching rule of ``rules`` (a sequence of
    :class:`DerivationRule` instances, tried in order; default :func:`builtin_rules`) on its call; a
    :class:`~latch.events.UserMessage` holding a real instruction is a :class:`UserInstruction`.
    A rule's :meth:`~DerivationRule.matches` is asked once per call, when the call is registered (it is a
    function of the call); when every rule keeps the default one (the call's name in its ``tools``), the call's
    rule is looked up by its name instead (the same rule).
    """

    def __init__(self, ctx: DerivationContext, rules: Sequence[DerivationRule] | None = None):
        self.ctx = ctx
        self.rules = builtin_rules() if rules is None else tuple(rules)
        self._by_name = _rules_by_name(self.rules)  # call name -> its rule, when every rule matches by name
        self._pending: dict[str, tuple[ToolCall, DerivationRule | None]] = {}  # call id -> (call, its rule)
        self._possible: set[str] = set()  # pending calls that may mutate (rule.may_mutate)
        self.opened = 0  # of the last feed: calls that may mutate and have no result yet
        self.closed = 0  # of the last feed: such calls whose result came

    def _rule(self, call: ToolCall) -> DerivationRule | None:
        if self._by_name is not None:
            return self._by_name.get(call.name)
        for rule in self.rules:
            if rule.matches(call):
                return rule
        return None

    def feed(self, event: Event) -> list[Any]:
        """The facts of ``event``; afterwards :attr:`opened`/:attr:`closed` count the possibly-mutating calls
        it registered (no result yet) and resolved."""
        self.opened = self.closed = 0
        branch = _BRANCHES[type(event)]
        if branch == _NOTHING:
            return []
        if branch == _CALLS:
            by_name = self._by_name
            for call in event.tool_calls:  # type: ignore[attr-defined]
                rule = by_name.get(call.name) if by_name is not None else self._rule(call)
                self._pending[call.id] = (call, rule)
                if call.id in self._possible:
                    continue  # a repeated call id still pending: counted once
                if rule is not None and rule.may_mutate(call, self.ctx):
                    self._possible.add(call.id)
                    self.opened += 1
            return []
        if branch == _RESULT:
            return self._result(event)  # type: ignore[arg-type]
        if branch == _USER:
            found = instruction_text(event)
            return [UserInstruction(*found)] if found else []
        return [event]

    def _result(self, result: ToolResult) -> list[Any]:
        if result.missing and result.eof_placeholder:
            return []  # a legacy "no result yet": the call stays pending for its real result
        pending = self._pending.pop(result.call_id, None)
        if pending is None:
            if result.is_error and not result.missing:
                tool = result.name or "unknown"
                return [ToolFailure(tool, error_signature(result.content), (tool,), _excerpt(result.content))]
            return []
        call, rule = pending
        if call.id in self._possible:
            self._possible.discard(call.id)
            self.closed += 1
        facts: list[Any] = [] if rule is None else list(rule.derive(call, result, self.ctx))
        if result.missing:
            return facts
        for f in facts:
            if isinstance(f, (ToolFailure, ToolSuccess, ProcessStarted)):
                return facts
        actions = _action(call, call_arguments(call))
        if result.is_error:
            facts.append(ToolFailure(call.name, error_signature(result.content), actions, _excerpt(result.content)))
        else:
            facts.append(ToolSuccess(call.name, actions))
        return facts
