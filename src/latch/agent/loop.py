"""The agent loop: model requests through the host's one request loop, tools committed before they run
(spec: "Port boundary", "Sessions & continuity", "Agent Skills and MCP": commit before execution).

One :meth:`AgentLoop.turn`:

1. delivers queued steering messages (the session is at a safe boundary between turns), runs background children
   and delivers their notifications (:mod:`latch.agent.handoff`) and the session's group messages;
2. materializes the view through :class:`latch.host.loop.RequestLoop` (the loop ``latch replay``,
   ``bench`` and ``stress`` use), which recounts and checks it: a view over the hard budget, with an
   orphaned call or a split unit is never sent (:class:`~latch.agent.observer.AgentError`);
3. renders exactly that view in the provider's wire format and sends it (``provider.complete``,
   streaming text to the observer, :class:`~latch.agent.observer.Observer`);
4. appends the assistant message and its usage durably, in one transaction, before anything runs;
5. runs each tool call, in call order, through :class:`latch.agent.tool_calls.ToolCalls` (the permission decision,
   a durable :class:`~latch.events.ToolStarted`, the tool, its :class:`~latch.events.ToolResult`).

The request budget follows the provider's usage (:class:`latch.agent.usage.RequestBudget`): a request the provider
refuses as too long is re-materialized under a corrected budget up to :data:`OVERFLOW_RETRIES` times. The schemas
offered are :class:`latch.agent.tool_offer.ToolOffer`'s; calls a killed process left without a result are closed by
:func:`latch.agent.interrupted.repair_interrupted` on resume. Units: tokens everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ..events import Event, HarnessPrompt, ToolCall, ToolResult, UserMessage, canonical_json
from ..host.loop import EngineSetup, RequestLoop, RequestResult
from ..host.runs import RunCommands
from ..port import ContextBudget, ContextView, SessionContext
from ..providers import ProviderError, ProviderOverflow
from ..providers.parse import parse_response
from ..providers.render import WIRE_FORMATS, render_request
from ..store import EventLog
from .context import SYSTEM_PROMPT
from .handoff import ChildAgents, from_supervisor
from .observer import AgentError, Observer, RunOutcome, Step
from .permissions import Decision, PermissionPolicy
from .steering import SteeringInbox, pending_tool_calls
from .supervisor import Supervisor
from .tool_calls import ToolCalls, loop_tool_context, result_room
from .tool_offer import ToolOffer
from .tools import Tool, ToolContext, ToolOutcome
from .tools.compact import Compact
from .usage import RequestBudget, overflow_fix

__all__ = ["AgentLoop", "OVERFLOW_RETRIES"]

OVERFLOW_RETRIES = 2
"""How many times one turn is re-materialized under a corrected budget after the provider refused it as too long."""


class AgentLoop:
    """The loop of one session (see the module docstring).

    ``setup`` is the engine the host built (:func:`latch.host.loop.build_engine`); ``budget`` the request
    budget; ``provider`` follows :class:`latch.providers.Provider` (``wire``, ``complete``); ``tools`` the
    tools offered (their schemas go into every request, in this order); ``approve(call, decision) -> bool``
    answers ``ask`` decisions (a terminal prompt), ``assume_yes`` allows them (``--yes``; a hard deny still
    refuses). ``group`` (a :class:`latch.agent.group.Group`) and ``group_agent`` make the session a group
    member: its pending group messages are delivered before each request. ``tool_choice`` (``"auto"``, ``"required"``, or a tool name to force that tool) is passed to the provider
    when set. ``max_output_tokens``
    defaults to the budget's reserve.
    """

    def __init__(
        self,
        store: EventLog,
        session_id: str,
        provider: Any,
        *,
        setup: EngineSetup,
        budget: ContextBudget,
        tools: Sequence[Tool | Mapping[str, Any]],
        tool_context: ToolContext | None,
        session_context: SessionContext,
        policy: PermissionPolicy | None = None,
        approve: Callable[[ToolCall, Decision], bool] | None = None,
        assume_yes: bool = False,
        system_prompt: str = SYSTEM_PROMPT,
        observer: Observer | None = None,
        tool_choice: str | None = None,
        max_output_tokens: int | None = None,
        tool_runner: Callable[[ToolCall], ToolResult] | None = None,
        wire: str | None = None,
        supervisor: Supervisor | None = None,
        group: Any = None,
        group_agent: str | None = None,
        defer_tools: bool = False,
        secret_names: Sequence[str] = (),
    ):
        wire = wire or getattr(provider, "wire", None)
        if wire not in WIRE_FORMATS:
            raise ValueError(
                f"provider {getattr(provider, 'name', provider)!r} speaks an unknown wire format "
                f"{wire!r} (known: {', '.join(WIRE_FORMATS)})"
            )
        self.store, self.session_id, self.provider, self.wire = store, session_id, provider, wire
        self.setup = setup
        self.request_budget = RequestBudget(store, session_id, budget, lambda ev: self.observer.on_correction(ev))
        self.tools = tuple(t for t in tools if not isinstance(t, Mapping))
        if group is not None and not group_agent:
            raise ValueError("a group member needs its agent name (group_agent)")
        self.group, self.group_agent = group, group_agent
        self._room: int | None = None  # tokens one tool result may take in the next view (from the latest view)
        self.tool_context = loop_tool_context(
            tool_context,
            spawner=self.spawn_agent,
            group=(group, cast(str, group_agent)) if group is not None else None,  # checked above
            room=lambda: self._room,
        )
        self.tool_runner, self.supervisor = tool_runner, supervisor
        self.system_prompt = system_prompt
        self.policy = policy or PermissionPolicy()
        self.approve, self.assume_yes = approve, assume_yes
        self.observer = observer or Observer()
        self.tool_choice, self.max_output_tokens = tool_choice, max_output_tokens
        self.inbox = SteeringInbox(store, session_id)
        self.commands = RunCommands(store, session_id)
        self.run_id = ""  # the RunStarted of the process driving this loop (latch.host.runs.RunRecord), if any
        self.guard: Any = None  # a latch.host.lease.LeaseGuard this loop works under: checked before each request
        self.offer = ToolOffer(
            store,
            session_id,
            [t if isinstance(t, Mapping) else t.SCHEMA for t in tools],
            defer=defer_tools,
            counter=setup.counter,
            hard_limit_tokens=self.budget().hard_limit_tokens,
            keep=[tool_choice] if tool_choice else [],
            on_load=self._tools_loaded,
        )
        if self.offer.loader is not None:
            self.tools = (*self.tools, cast(Tool, self.offer.loader))  # its SCHEMA is per instance
        self.calls = ToolCalls(self, secret_names)
        self.children = ChildAgents(self)
        self.requests = RequestLoop(
            store,
            session_id,
            setup,
            self.budget(),
            session_context=session_context,
            system_prompt=system_prompt,
            tools=self.offer.offered(),
        )
        self.turns = 0
        self._harness_recorded = False

    @classmethod
    def from_supervisor(
        cls,
        store: EventLog,
        session_id: str,
        supervisor: Supervisor,
        provider: Any,
        *,
        model: str | None = None,
        config: Mapping[str, Any] | None = None,
        estimator: Any = None,
        session_context: SessionContext | None = None,
        system_prompt: str = "",
        tools: Sequence[Tool | Mapping[str, Any]] = (),
        _spawn: bool = False,
        **options: Any,
    ) -> AgentLoop:
        """The loop of a session whose engine the supervisor builds (spec: "Port boundary", child sessions):
        the root through its root factory, a child (the session has a parent) through the child policy,
        spawned (``_spawn``) or resumed, from the session's profile; there is no fallback to the default
        engine (:class:`~latch.agent.supervisor.ChildPolicyError`). ``estimator`` ``None`` is the
        ``latch_select_estimator`` choice for ``model``. ``options`` are :class:`AgentLoop`'s (``wire``,
        ``tool_runner``, ``policy``, ``assume_yes``, ...); the budget is the engine's default unless given
        (:func:`latch.agent.handoff.from_supervisor`)."""
        loop: AgentLoop = from_supervisor(
            cls,
            store,
            session_id,
            supervisor,
            provider,
            model=model,
            config=config,
            estimator=estimator,
            session_context=session_context,
            system_prompt=system_prompt,
            tools=tools,
            _spawn=_spawn,
            **options,
        )
        return loop

    @property
    def engine(self) -> Any:
        """The session's context engine (built once, by the host or the supervisor)."""
        return self.setup.engine

    @property
    def base_budget(self) -> ContextBudget:
        """The budget this loop was given, before any correction (:attr:`RequestBudget.base`)."""
        return self.request_budget.base

    @property
    def forecast(self) -> Any:
        """This process's requests: the provider's rate (:class:`latch.accounting.forecast.ProviderForecast`)."""
        return self.request_budget.forecast

    # ------------------------------------------------------------------ child agents (latch.agent.handoff)
    def spawn_child(self, brief: str, provider: Any, **options: Any) -> AgentLoop:
        """A child session (same workspace) that starts from ``brief`` only, with an engine from the
        supervisor's child policy (:class:`~latch.agent.supervisor.ChildPolicyError` when there is none).
        ``options`` override this loop's (``model``, ``tools``, ``system_prompt``, ...)."""
        child: AgentLoop = self.children.spawn_child(brief, provider, **options)
        return child

    def spawn_agent(self, call_id: str, args: Mapping[str, Any]) -> ToolOutcome:
        """Run the child agent of this session's ``spawn_agent`` call ``call_id`` to its end and return its
        rendered :class:`~latch.events.AgentReport` (the only thing transferred back; bounded).

        ``args``: ``brief`` (text), optional ``tools`` (names among this loop's tools; never
        ``spawn_agent``), optional ``model``. The child is created once per call
        (:func:`~latch.agent.children.create_child`: profile and brief in one transaction); a child that already
        exists (a resumed or retried call) is rebuilt from its durable profile and its log and continued, or, when
        it already reported, its report is returned as is. The engine comes from the supervisor's child policy;
        with none, or without a supervisor, the outcome is a one-line error and nothing is stored."""
        return self.children.spawn_agent(call_id, args)

    def child_loop(self, child_id: str, *, spawn: bool = False, store: EventLog | None = None) -> AgentLoop:
        """The loop of child ``child_id``, built from its durable profile through the supervisor (spawn:
        ``spawn=True``; worker reconstruction and resume: the same call with ``spawn=False``). It shares
        this loop's provider, wire, permission policy and approvals; its session context holds the workspace
        and its repository instructions only; its tools are the profile's, taken from this loop's. ``store``
        (default: this loop's) is the store the child, its engine, tools and processes write through (a group
        worker passes one fenced by its claim, :meth:`latch.store.EventStore.fenced`).
        :class:`~latch.agent.supervisor.ChildPolicyError` without a child policy or when the profile's
        engine is not the one the policy builds."""
        child: AgentLoop = self.children.child_loop(child_id, spawn=spawn, store=store)
        return child

    def background_children(self) -> list[tuple[str, Any, bool]]:
        """``(child_id, report or None, delivered)`` of every background child of this session, in spawn
        order, from the log alone (so a restart sees exactly what was finished and delivered)."""
        return self.children.background()

    def advance_children(self) -> list[str]:
        """Run every unfinished background child to its report (each rebuilt from its profile and log; the
        children run here, between the parent's requests, on the same provider), buffering the finished
        ones in :attr:`Supervisor.reports`. Returns the children finished now."""
        return self.children.advance()

    def deliver_notifications(self) -> list[int]:
        """At a safe model boundary (every earlier tool call has a terminal result), append one
        :class:`~latch.events.AgentNotificationDelivered` per finished, undelivered background child, in
        one transaction; returns their seqs (``[]`` when none is due or a call is still open). The event is
        the dedupe marker: a restart delivers each report exactly once."""
        return self.children.deliver_notifications()

    def resume_children(self) -> list[ToolResult]:
        """Finish every ``spawn_agent`` call a killed process left open
        (:func:`~latch.agent.handoff.open_spawn_calls`): each child is rebuilt from its profile and log and
        continued to its report, which becomes the call's result. Returns the results appended, in call order. Run
        on resume, before :func:`~latch.agent.interrupted.repair_interrupted`.
        :class:`~latch.agent.supervisor.ChildPolicyError` (nothing appended) when a child cannot be rebuilt through
        this supervisor's child policy (none, or another engine)."""
        return self.children.resume()

    # ------------------------------------------------------------------ budget
    def budget(self) -> ContextBudget:
        """The request budget (:meth:`latch.agent.usage.RequestBudget.current`): from the provider's rate once
        this loop has seen its counts for two requests, before that the base budget after the session's
        corrections."""
        return self.request_budget.current()

    def result_cap_tokens(self) -> int:
        """The most tokens one tool result may hold (:meth:`latch.agent.tool_calls.ToolCalls.cap_tokens`)."""
        return self.calls.cap_tokens()

    # ------------------------------------------------------------------ one request
    def view(self) -> RequestResult:
        """Materialize and check the next view (nothing is sent). Raises :class:`AgentError` when the engine
        refuses or the view would break the budget or the tool-call protocol."""
        budget = self.budget()
        self.requests.set_budget(budget)
        res = self.requests.run(None, where=f"request {self.turns + 1}")
        if res.view is None:
            fix = overflow_fix(budget, self.setup.counter, self.requests.tools)
            raise AgentError(f"the context cannot hold the next request: {res.overflow}; {fix}")
        self._room = result_room(res.view)
        bad = res.budget_violations + res.protocol_violations
        if bad:
            raise AgentError(f"refusing to send an invalid view: {bad[0]}")
        return res

    def render(self, view: ContextView) -> dict[str, Any]:
        """The wire body of ``view`` (images inlined from the store's artifacts), with the output cap and
        ``tool_choice`` when set (:func:`latch.providers.render.render_request`)."""

        def loader(sha256: str) -> bytes:
            data: bytes = self.store.get_artifact(sha256)[1]
            return data

        return render_request(
            view,
            self.wire or "openai-chat",
            loader,
            model=self.setup.model or getattr(self.provider, "model", None),
            max_output_tokens=self.max_output_tokens,
            tool_choice=self.tool_choice,
        )

    def _boundary(self) -> None:
        """What happens at the safe boundary before a request: steering messages delivered, background children
        advanced and their notifications delivered, the session's group messages delivered (FIFO)."""
        delivered = self.inbox.deliver_messages()
        if delivered:
            self.observer.on_steering([text for _, text in delivered])
        self.advance_children()  # a safe boundary: background children run and their reports are delivered
        self.deliver_notifications()
        if self.group is not None:  # group messages: information, delivered FIFO at this safe boundary
            self.group.deliver(self.group_agent, self.session_id)

    def _send(self, number: int) -> tuple[RequestResult, dict[str, Any], Any]:
        """Materialize, render and send request ``number``: ``(result, body, raw response)``. A refusal as too
        long corrects the budget and tries again, :data:`OVERFLOW_RETRIES` times at most (then
        :class:`AgentError`)."""
        for attempt in range(OVERFLOW_RETRIES + 1):
            res = self.view()
            assert res.view is not None
            body = self.render(res.view)
            self.observer.on_request(number, res)
            try:
                return res, body, self.provider.complete(body, on_text=self.observer.on_text)
            except ProviderOverflow as exc:
                self.request_budget.on_overflow(res, exc.prompt_tokens)
                if attempt == OVERFLOW_RETRIES:
                    raise AgentError(
                        f"the provider refused the request as too long {OVERFLOW_RETRIES + 1} times ({exc})"
                    ) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def turn(self) -> Step:
        """One model request and its tool calls (see the module docstring). Raises :class:`AgentError` (view
        refused, provider refused after corrections) or :class:`latch.providers.ProviderError`."""
        if self.guard is not None:  # a lease lost (taken over): no further request
            self.guard.check()
        self._boundary()
        number = self.turns + 1
        res, body, response = self._send(number)
        view = res.view
        assert view is not None
        try:
            message, usage = parse_response(self.wire, response)
        except ValueError as exc:
            raise ProviderError(f"{getattr(self.provider, 'name', 'provider')}: {exc}") from None
        message = self.calls.bound_arguments(message)
        events: list[Event] = (
            [message] + ([usage] if usage is not None else []) + cast("list[Event]", self._harness_prompt())
        )
        turn_seq = self.store.append(self.session_id, events)[0]  # committed before any tool runs
        self._harness_recorded = True
        self.turns = number
        self.observer.on_response(number, message, usage, view)
        self.request_budget.on_usage(res, usage)
        results = tuple(self.calls.call(c, turn_seq) for c in message.tool_calls)
        if any(c.name == Compact.NAME and not r.is_error for c, r in zip(message.tool_calls, results, strict=False)):
            self.compact("model")  # the model asked for it: every call has its result, a safe boundary
        return Step(number, res, body, message, usage, results)

    def harness_prompt(self) -> HarnessPrompt:
        """The :class:`~latch.events.HarnessPrompt` of this loop's requests: its system prompt, tool schemas and
        session context, exactly as every request renders them."""
        r = self.requests
        ctx = r.session_context
        return HarnessPrompt(
            system_prompt=r.system_prompt,
            tools=canonical_json([dict(t) for t in r.tools]),
            workspace=ctx.workspace,
            repository_instructions=ctx.repository_instructions,
            mode=ctx.mode,
        )

    def _harness_prompt(self) -> list[HarnessPrompt]:
        """``[the HarnessPrompt]`` when the session has not recorded this one as its latest (the first request of a
        session, or a resumed run that sends another prompt), else ``[]``; read from the store once per loop."""
        if self._harness_recorded:
            return []
        latest = None
        for s in self.store.events(self.session_id, kinds=[HarnessPrompt.KIND]):
            latest = s.event
        mine = self.harness_prompt()
        return [] if latest == mine else [mine]

    def _tools_loaded(self) -> None:
        """``load_tools`` changed the schemas offered: the next request carries them and records its prompt."""
        self.requests.tools = tuple(self.offer.offered())
        self._harness_recorded = False  # the next request records the new tool list

    # ------------------------------------------------------------------ the session
    def say(self, text: str) -> int:
        """Append a user turn now (between turns the session is at a safe boundary); returns its seq."""
        seq: int
        (seq,) = self.store.append(self.session_id, [UserMessage(text)])
        return seq

    def step(self) -> Step:
        """:meth:`turn` (the name the port-pin tests and earlier callers use)."""
        return self.turn()

    def poll_commands(self) -> bool:
        """Apply the pending run commands (:class:`latch.host.runs.RunCommands`) at a safe boundary (every
        tool call has its result; else nothing is applied): ``compact`` rotates at the next request
        (:meth:`compact`), ``stop`` is recorded as applied. Each gets its
        :class:`~latch.events.RunCommandApplied` (with :attr:`run_id`). Returns whether a stop was applied
        (the caller ends the run before its next request). Steering is delivered by :meth:`turn`."""
        if pending_tool_calls(self.store, self.session_id):
            return False
        stop = False
        for command in self.commands.pending():
            if command.command == "compact":
                self.compact("command")
            stop = stop or command.command == "stop"
            self.commands.applied(command, self.run_id)
        return stop

    def run(self, max_turns: int) -> RunOutcome:
        """Turns until the assistant answers without a tool call and no steering message is pending
        (``"done"``), a ``stop`` command is applied before a request (``"stopped"``, :meth:`poll_commands`) or
        ``max_turns`` requests were made (``"max_turns"``)."""
        out = RunOutcome("max_turns")
        for _ in range(max_turns):
            if self.poll_commands():
                out.stopped = "stopped"
                break
            step = self.turn()
            out.steps.append(step)
            if not step.message.tool_calls and not self.children.outstanding():
                if self.inbox.pending():  # the user steered while the answer was coming: answer that too
                    continue
                out.stopped = "done"
                break
        return out

    def compact(self, reason: str = "manual") -> None:
        """``/compact`` (R26): the next request starts a fresh cache epoch without earlier conversation;
        nothing is deleted (state and recall keep it)."""
        self.setup.engine.manual_compact(reason)
