"""The tool calls of one assistant message, each committed before it runs (spec: "Port boundary": commit before
execution; "Agent Skills and MCP").

For each call, in call order: the permission decision (hard-deny always refuses; ``ask`` asks the ``approve``
callback on a terminal, is allowed by ``assume_yes``, and otherwise refuses with a result telling the model why) ->
a durable :class:`~latch.events.ToolStarted` -> the tool runs -> its :class:`~latch.events.ToolResult` (secrets
redacted, cut to :meth:`ToolCalls.cap_tokens`) is appended as soon as it completes. A call whose arguments are over
the cap is stored whole as an artifact and answered with an error, never run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..events import AssistantMessage, ToolCall, ToolResult, ToolStarted, canonical_json
from ..host.kernel import kernel_cache
from ..kernel.state import workspace_generation
from ..port import ContextView
from .blockers import BlockerWatch
from .environment import redact, secret_values
from .permissions import Decision
from .tools import ToolContext, ToolOutcome, run_tool
from .tools.base import OUTCOME_LIMIT_BYTES, spill

__all__ = ["MIN_RESULT_TOKENS", "ToolCalls", "loop_tool_context", "result_room"]

MIN_RESULT_TOKENS = 256
"""The smallest page a tool result is cut to, however small the window."""


def loop_tool_context(
    ctx: ToolContext | None,
    *,
    spawner: Callable[[str, Mapping[str, Any]], ToolOutcome],
    group: tuple[Any, str] | None,
    room: Callable[[], int | None],
) -> ToolContext | None:
    """``ctx`` as an agent loop's tools use it (``None`` stays ``None``): the loop's ``spawner`` and ``room`` unless
    ``ctx`` has its own, the loop's ``group`` membership (``(Group, agent name)``) when it has one, and
    ``keep_whole`` (:meth:`ToolCalls.bound` cuts each result, after redaction)."""
    if ctx is None:
        return None
    if ctx.spawner is None:
        ctx = replace(ctx, spawner=spawner)
    if group is not None:
        ctx = replace(ctx, group=group)
    if ctx.room is None:
        ctx = replace(ctx, room=room)
    if not ctx.keep_whole:
        ctx = replace(ctx, keep_whole=True)
    return ctx


def result_room(view: ContextView) -> int:
    """Tokens one tool result may take so that its unit (the call and the result) fits the conversation of
    the next view: three quarters of the engine's effective recent limit (``metrics["recent_limit_tokens"]``,
    what the hard budget leaves the conversation), else of half of what the instructions, tools, state and
    extension leave of the hard limit; at least :data:`MIN_RESULT_TOKENS`."""
    recent = (view.metrics or {}).get("recent_limit_tokens")
    if not isinstance(recent, int) or recent <= 0:
        t = view.tokens
        hard = view.budget.hard_limit_tokens if view.budget is not None else t.total_tokens
        recent = (
            hard - t.instructions_tokens - t.tools_tokens - t.state_tokens - t.extension_tokens - t.harness_tokens
        ) // 2
    return max(MIN_RESULT_TOKENS, recent * 3 // 4)


class ToolCalls:
    """Decides, runs and records the tool calls of ``loop``'s session (a :class:`latch.agent.loop.AgentLoop`:
    its store, tools, permission policy, ``approve`` / ``assume_yes``, ``tool_runner``, ``tool_context``,
    observer and lease guard, read as they are at each call, so a front end may change them between turns).
    ``secret_names`` are environment variables whose values are redacted from every result, besides the usual
    secret names (:func:`latch.agent.environment.secret_values`)."""

    def __init__(self, loop: Any, secret_names: Any = ()):
        self.loop = loop
        self.secrets = secret_values(also=secret_names)  # this process's secret values: redacted from tool results
        store, session_id = loop.store, loop.session_id
        self.blockers = BlockerWatch(
            store, session_id, lambda until: workspace_generation(store, session_id, until, cache=kernel_cache())
        )
        self.by_name = {t.NAME: t for t in loop.tools}
        self.oversized: dict[str, str] = {}  # call id -> the error result of a call whose arguments were cut

    def decide(self, call: ToolCall) -> tuple[Decision, bool, str]:
        """``(decision, allowed, refusal text)`` of ``call`` (see the module docstring); a tool that does not
        change the workspace needs no approval."""
        loop = self.loop
        decision = loop.policy.decide(call.name, call.arguments)
        tool = self.by_name.get(call.name)
        if decision.action == "ask" and tool is not None and not getattr(tool, "MUTATES", True):
            decision = Decision("allow", "does not change the workspace")
        if decision.action == "allow":
            return decision, True, ""
        if decision.action == "deny":
            return decision, False, f"[denied: {decision.reason}]"
        if loop.assume_yes:
            return decision, True, ""
        if loop.approve is not None:
            if loop.approve(call, decision):
                return decision, True, ""
            return decision, False, "[not run: the user declined this call]"
        return (
            decision,
            False,
            (
                "[not run: this call needs the user's approval and the session is not "
                "interactive; the user can allow such calls with --yes]"
            ),
        )

    def bound_arguments(self, message: AssistantMessage) -> AssistantMessage:
        """``message`` with the arguments of every call over :meth:`cap_tokens` replaced by
        ``{"oversized_arguments": {"bytes": N, "sha256": S}}`` (the original is stored whole as artifact ``S``):
        the stored call stays small enough for every later view, and the call is answered with an error, never
        run (:meth:`call`). A call within the cap is kept byte for byte."""
        cap = self.cap_tokens()
        calls, changed = [], False
        for c in message.tool_calls:
            if len(c.arguments) > cap and self.loop.setup.counter.text(c.arguments) > cap:
                data = c.arguments.encode("utf-8", "surrogatepass")
                sha = self.loop.store.put_artifact(data, "application/json").sha256
                self.oversized[c.id] = (
                    f"[not run: the arguments of this call are {len(data):,} bytes, over the "
                    f"{cap:,}-token limit of one call; they are stored whole as artifact "
                    f"{sha} (read_artifact). Do the work in smaller calls, e.g. write a large "
                    f"file in parts]"
                )
                c = replace(c, arguments=canonical_json({"oversized_arguments": {"bytes": len(data), "sha256": sha}}))
                changed = True
            calls.append(c)
        return replace(message, tool_calls=tuple(calls)) if changed else message

    def call(self, call: ToolCall, turn_seq: int) -> ToolResult:
        """Decide, run and record ``call`` of the assistant message at ``turn_seq``; returns its committed
        result. A tool's own exception becomes an error result (the turn goes on)."""
        loop = self.loop
        if loop.guard is not None:  # a lease lost (taken over): no further tool call
            loop.guard.check()
        oversized = self.oversized.pop(call.id, None)
        if oversized is not None:
            decision, allowed, refusal = Decision("deny", "oversized arguments"), False, oversized
        else:
            decision, allowed, refusal = self.decide(call)
        loop.observer.on_tool_call(call, decision, allowed)
        outcome = self._run(call, decision) if allowed else ToolOutcome(refusal, is_error=True)
        content = redact(outcome.content, self.secrets)  # a key a tool printed never reaches the store or model
        result = ToolResult(
            call.id, self.bound(content), is_error=outcome.is_error, name=call.name, exit_code=outcome.exit_code
        )
        (seq,) = loop.store.append(loop.session_id, [result])
        blocker = self.blockers.observe(call, result, seq, turn_seq)  # a refused write repeated, workspace unchanged
        if blocker is not None:
            loop.store.append(loop.session_id, [blocker])
        loop.observer.on_tool_result(call, outcome)
        return result

    def _run(self, call: ToolCall, decision: Decision) -> ToolOutcome:
        loop = self.loop
        loop.store.append(loop.session_id, [ToolStarted(call.id, call.name, decision.action)])
        try:
            if call.name not in self.by_name and loop.tool_runner is not None:
                ran = loop.tool_runner(call)
                return ToolOutcome(ran.content, is_error=ran.is_error, exit_code=ran.exit_code)
            if loop.tool_context is None:
                return ToolOutcome(f"[not run: no tool {call.name!r} is available]", is_error=True)
            return run_tool(loop.tools, call, loop.tool_context)
        except Exception as exc:  # a tool's own bug must not lose the turn: the model sees it as an error
            return ToolOutcome(f"[tool {call.name} failed: {type(exc).__name__}: {exc}]", is_error=True)

    def cap_tokens(self) -> int:
        """The most tokens one tool result may hold: a quarter of the (corrected) hard limit, so a result
        always fits beside the state and the turn that asked for it (``read_file`` pages are 8,000 tokens at
        most anyway)."""
        cap: int = max(64, self.loop.budget().hard_limit_tokens // 4)
        return cap

    def bound(self, content: str) -> str:
        """``content`` (already redacted) when it fits :meth:`cap_tokens` and
        :data:`~latch.agent.tools.base.OUTCOME_LIMIT_BYTES`; else the whole output is stored as an artifact and the
        result is its head and tail with a pointer for ``read_artifact``, within both
        (:func:`~latch.agent.tools.base.spill`; the run never ends because one output is large)."""
        cap = self.cap_tokens()
        estimate = self.loop.setup.counter.text

        def fits(text: str) -> bool:
            return len(text.encode("utf-8", "surrogatepass")) <= OUTCOME_LIMIT_BYTES and estimate(text) <= cap

        return content if fits(content) else spill(content, self.loop.store, fits)
