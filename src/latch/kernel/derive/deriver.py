"""The built-in rules in order, and SessionDeriver."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...events import AssistantMessage, Event, ToolCall, ToolResult, UserMessage
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


class SessionDeriver:
    """Feeds one session's events in ``seq`` order and returns the facts each produces.

    Kernel records (explicit :mod:`latch.kernel.events`) pass through unchanged;
    an :class:`~latch.events.AssistantMessage` registers its calls; a
    :class:`~latch.events.ToolResult` runs the first matching rule of ``rules`` (a sequence of
    :class:`DerivationRule` instances, tried in order; default :func:`builtin_rules`) on its call; a
    :class:`~latch.events.UserMessage` holding a real instruction is a :class:`UserInstruction`.
    """

    def __init__(self, ctx: DerivationContext, rules: Sequence[DerivationRule] | None = None):
        self.ctx = ctx
        self.rules = builtin_rules() if rules is None else tuple(rules)
        self._pending: dict[str, ToolCall] = {}
        self._possible: set[str] = set()  # pending calls that may mutate (rule.may_mutate)
        self.opened = 0  # of the last feed: calls that may mutate and have no result yet
        self.closed = 0  # of the last feed: such calls whose result came

    def _rule(self, call: ToolCall) -> DerivationRule | None:
        return next((rule for rule in self.rules if rule.matches(call)), None)

    def feed(self, event: Event) -> list[Any]:
        """The facts of ``event``; afterwards :attr:`opened`/:attr:`closed` count the possibly-mutating calls
        it registered (no result yet) and resolved."""
        self.opened = self.closed = 0
        if isinstance(event, AssistantMessage):
            for call in event.tool_calls:
                self._pending[call.id] = call
                if call.id in self._possible:
                    continue  # a repeated call id still pending: counted once
                rule = self._rule(call)
                if rule is not None and rule.may_mutate(call, self.ctx):
                    self._possible.add(call.id)
                    self.opened += 1
            return []
        if isinstance(event, ToolResult):
            return self._result(event)
        if isinstance(event, UserMessage):
            found = instruction_text(event)
            return [UserInstruction(*found)] if found else []
        if isinstance(event, KERNEL_RECORDS):
            return [event]
        return []

    def _result(self, result: ToolResult) -> list[Any]:
        if result.eof_placeholder:
            return []  # a legacy "no result yet": the call stays pending for its real result
        call = self._pending.pop(result.call_id, None)
        if call is not None and call.id in self._possible:
            self._possible.discard(call.id)
            self.closed += 1
        if call is None:
            if result.is_error and not result.missing:
                tool = result.name or "unknown"
                return [ToolFailure(tool, error_signature(result.content), (tool,), _excerpt(result.content))]
            return []
        facts: list[Any] = []
        for rule in self.rules:
            if rule.matches(call):
                facts = list(rule.derive(call, result, self.ctx))
                break
        if result.missing or any(isinstance(f, (ToolFailure, ToolSuccess)) for f in facts):
            return facts
        if any(isinstance(f, ProcessStarted) for f in facts):
            return facts
        actions = _action(call, call_arguments(call))
        if result.is_error:
            facts.append(ToolFailure(call.name, error_signature(result.content), actions, _excerpt(result.content)))
        else:
            facts.append(ToolSuccess(call.name, actions))
        return facts
