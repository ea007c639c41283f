"""The agent loop: model requests through the host's one request loop, tools committed before they run
(spec: "Port boundary", "Sessions & continuity", "Agent Skills and MCP": commit before execution).

One :meth:`AgentLoop.turn`:

1. delivers queued steering messages (the session is at a safe boundary between turns);
2. materializes the view through :class:`latch.host.loop.RequestLoop` (the loop ``latch replay``,
   ``bench`` and ``stress`` use), which recounts and checks it: a view over the hard budget, with an
   orphaned call or a split unit is never sent (:class:`AgentError`);
3. renders exactly that view in the provider's wire format and sends it (``provider.complete``,
   streaming text to the observer);
4. appends the assistant message and its usage durably, in one transaction, before anything runs;
5. for each tool call, in call order: the permission decision (hard-deny always refuses; ``ask`` asks the
   ``approve`` callback on a terminal, is allowed by ``assume_yes``, and otherwise refuses with a result
   telling the model why) -> a durable :class:`~latch.events.ToolStarted` -> the tool runs -> its
   :class:`~latch.events.ToolResult` is appended as soon as it completes.

A process killed mid-tool leaves a call with a ``ToolStarted`` and no result. :func:`repair_interrupted`
(run when a session resumes) appends, for each call without a result, a marked placeholder result
(``missing=True``, ``is_error=True``) that says the outcome is unknown: never an invented outcome.

Provider usage is authoritative, in both directions: when the provider counts more prompt tokens than the view's
estimate, or refuses a request as too long, an :class:`~latch.events.EstimateCorrection` is appended and the
budget of every later view is shrunk by the largest ratio seen (:func:`correction_ratio`), so the same
shape of text never overflows twice. Once this process has seen the provider's counts for
:data:`~latch.host.corrections.RATE_MIN_REQUESTS` requests, the budget follows the provider's own rate instead
(:func:`~latch.host.corrections.rate_budget`: a conservative estimator no longer leaves half the window unused),
capped by the largest overflow refusal; an overflow refusal still corrects and retries. Units: tokens everywhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..accounting.forecast import ProviderForecast
from ..events import (
    AgentLifecycle,
    AgentNotificationDelivered,
    AgentProfile,
    AssistantMessage,
    EstimateCorrection,
    Event,
    HarnessPrompt,
    ToolCall,
    ToolResult,
    ToolStarted,
    Usage,
    UserMessage,
    canonical_json,
)
from ..host.corrections import raises_ratio, rate_budget
from ..host.kernel import kernel_cache
from ..host.loop import EngineSetup, RequestLoop, RequestResult, build_engine
from ..host.runs import RunCommands
from ..kernel.state import workspace_generation
from ..port import ContextBudget, ContextView, SessionContext
from ..providers import ProviderError, ProviderOverflow
from ..providers.wire import WIRE_FORMATS, parse_response, render_request
from .blockers import BlockerWatch
from .children import (
    CHILD_MAX_TURNS,
    build_report,
    child_profile,
    child_report,
    child_tools,
    create_child,
    find_child,
    render_report,
)
from .context import SYSTEM_PROMPT, session_context
from .environment import redact, secret_values
from .permissions import Decision, PermissionPolicy
from .steering import SteeringInbox, pending_tool_calls
from .supervisor import ChildPolicyError, Supervisor
from .tools import Tool, ToolContext, ToolOutcome, run_tool
from .tools.base import OUTCOME_LIMIT_BYTES, spill
from .tools.compact import Compact
from .tools.load_tools import LOAD_TOOLS, LoadTools
from .tools.processes import ProcessManager

__all__ = ["AgentError", "AgentLoop", "Observer", "Step", "RunOutcome", "repair_interrupted", "correction_ratio",
           "provider_prompt_tokens", "engine_stream", "engine_name",
           "open_spawn_calls"]

OVERFLOW_RETRIES = 2
"""How many times one turn is re-materialized under a corrected budget after the provider refused it as too long."""


class AgentError(Exception):
    """The turn cannot be sent: the view is over budget or invalid, or the provider refused it (one line)."""


def engine_stream(factory: Callable[..., Any]) -> str:
    """The kernel-record stream of a session's live engine: ``"<PLUGIN_NAME>:main"``."""
    owner = getattr(factory, "__self__", None)
    name = getattr(owner, "PLUGIN_NAME", None) or getattr(factory, "__qualname__", "engine")
    return f"{name}:main"


def engine_name(factory: Callable[..., Any]) -> str:
    """The engine name a factory builds (:func:`engine_stream` without ``":main"``): what a child's
    :class:`~latch.events.AgentProfile` records as its ``engine``."""
    return engine_stream(factory).rsplit(":", 1)[0]


def open_spawn_calls(store: Any, session_id: str) -> list[ToolCall]:
    """The session's ``spawn_agent`` calls that started (a :class:`~latch.events.ToolStarted`) and have no
    result yet, in call order: children a killed process left running, which resume finishes."""
    calls: dict[str, ToolCall] = {}
    started: set[str] = set()
    for s in store.events(session_id, kinds=["assistant_message", "tool_result", ToolStarted.KIND]):
        e = s.event
        if isinstance(e, AssistantMessage):
            calls.update((c.id, c) for c in e.tool_calls if c.name == "spawn_agent")
        elif isinstance(e, ToolStarted):
            started.add(e.call_id)
        elif isinstance(e, ToolResult):
            calls.pop(e.call_id, None)
    return [c for c in calls.values() if c.id in started]


def provider_prompt_tokens(usage: Usage | None) -> int | None:
    """The whole prompt the provider counted: uncached input + cache read + cache write (``None`` if unknown)."""
    if usage is None or usage.input_tokens is None:
        return None
    return usage.input_tokens + (usage.cache_read_tokens or 0) + (usage.cache_write_tokens or 0)


def correction_ratio(store: Any, session_id: str, source: str | None = None) -> tuple[int, int] | None:
    """The largest ``(provider_tokens, estimated_tokens)`` ratio of the session's
    :class:`~latch.events.EstimateCorrection` events (of ``source`` only, ``"usage"`` or ``"overflow"``, when
    given), or ``None`` when there is none above 1."""
    best: tuple[int, int] | None = None
    for s in store.events(session_id, kinds=[EstimateCorrection.KIND]):
        e = s.event
        if source is not None and e.source != source:
            continue
        if e.estimated_tokens > 0 and e.provider_tokens > e.estimated_tokens and (
                best is None or e.provider_tokens * best[1] > best[0] * e.estimated_tokens):
            best = (e.provider_tokens, e.estimated_tokens)
    return best


def repair_interrupted(store: Any, session_id: str) -> list[ToolCall]:
    """Close every tool call of the session that has no result: append a marked placeholder result per call
    (``missing=True``, ``is_error=True``; the text says whether the call had started and that its outcome is
    unknown). Returns the calls repaired, in order (empty when nothing was interrupted)."""
    calls: dict[str, ToolCall] = {}
    started: set[str] = set()
    for s in store.events(session_id, kinds=["assistant_message", "tool_result", ToolStarted.KIND]):
        e = s.event
        if isinstance(e, AssistantMessage):
            for c in e.tool_calls:
                calls[c.id] = c
        elif isinstance(e, ToolStarted):
            started.add(e.call_id)
        elif isinstance(e, ToolResult) and not e.eof_placeholder:
            calls.pop(e.call_id, None)
    if not calls:
        return []
    out = []
    for c in calls.values():
        what = ("the agent stopped while this call was running; its outcome is unknown (it may have partly run)"
                if c.id in started else "the agent stopped before running this call; it did not run")
        out.append(ToolResult(c.id, f"[interrupted: {what}]", is_error=True, name=c.name, missing=True))
    store.append(session_id, out)
    return list(calls.values())


class Observer:
    """What a front end sees of a turn (all methods optional no-ops; never called with raw provider bytes)."""

    def on_request(self, number: int, result: RequestResult) -> None:
        """The view of request ``number`` was materialized and checked; it is about to be sent."""

    def on_text(self, delta: str) -> None:
        """A streamed piece of the assistant's text."""

    def on_response(self, number: int, message: AssistantMessage, usage: Usage | None, view: ContextView) -> None:
        """The assistant message of request ``number`` was committed."""

    def on_tool_call(self, call: ToolCall, decision: Decision, allowed: bool) -> None:
        """A call was decided (``allowed``: it is about to run)."""

    def on_tool_result(self, call: ToolCall, outcome: ToolOutcome) -> None:
        """A call finished and its result was committed."""

    def on_correction(self, correction: EstimateCorrection) -> None:
        """The provider counted more than the estimate; later views are budgeted smaller."""

    def on_steering(self, texts: list[str]) -> None:
        """Steering messages (queued by any front end) were delivered as user turns, in order."""

    def child(self, session_id: str) -> Observer:
        """The observer of child agent ``session_id`` (default: this one)."""
        return self


@dataclass(frozen=True)
class Step:
    """One request: its number, the checked ``result`` (view and recount), the wire ``body`` sent, the
    committed ``message`` and ``usage``, and the tool ``results`` appended, in call order."""

    number: int
    result: RequestResult
    body: Mapping[str, Any]
    message: AssistantMessage
    usage: Usage | None
    results: tuple[ToolResult, ...] = ()

    @property
    def view(self) -> ContextView:
        assert self.result.view is not None
        return self.result.view


@dataclass
class RunOutcome:
    """How :meth:`AgentLoop.run` ended: ``stopped`` is ``"done"`` (an answer without tool calls),
    ``"max_turns"``, or ``"stopped"`` (a ``stop`` command applied at a safe boundary); ``steps`` are the turns
    taken."""

    stopped: str
    steps: list[Step] = field(default_factory=list)


DEFER_SHARE = 4
"""When every tool's schema together takes more than 1/DEFER_SHARE of the hard limit, ``latch run`` offers the
:data:`CORE_TOOLS` and ``load_tools`` for the rest (:mod:`latch.agent.tools.load_tools`)."""
CORE_TOOLS = ("read_file", "write_file", "edit_file", "shell", "process_output", "search_history", "compact",
              "read_artifact", "load_skill", "read_skill_resource", "spawn_agent")
"""The tools always offered."""
MIN_RESULT_TOKENS = 256
"""The smallest page a tool result is cut to, however small the window."""


def result_room(view: ContextView) -> int:
    """Tokens one tool result may take so that its unit (the call and the result) fits the conversation of
    the next view: three quarters of the engine's effective recent limit (``metrics["recent_limit_tokens"]``,
    what the hard budget leaves the conversation), else of half of what the instructions, tools, state and
    extension leave of the hard limit; at least :data:`MIN_RESULT_TOKENS`."""
    recent = (view.metrics or {}).get("recent_limit_tokens")
    if not isinstance(recent, int) or recent <= 0:
        t = view.tokens
        hard = view.budget.hard_limit_tokens if view.budget is not None else t.total_tokens
        recent = (hard - t.instructions_tokens - t.tools_tokens - t.state_tokens - t.extension_tokens
                  - t.harness_tokens) // 2
    return max(MIN_RESULT_TOKENS, recent * 3 // 4)


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

    def __init__(self, store: Any, session_id: str, provider: Any, *, setup: EngineSetup, budget: ContextBudget,
                 tools: Sequence[Tool | Mapping[str, Any]], tool_context: ToolContext | None,
                 session_context: SessionContext, policy: PermissionPolicy | None = None,
                 approve: Callable[[ToolCall, Decision], bool] | None = None, assume_yes: bool = False,
                 system_prompt: str = SYSTEM_PROMPT, observer: Observer | None = None, tool_choice: str | None = None,
                 max_output_tokens: int | None = None, tool_runner: Callable[[ToolCall], ToolResult] | None = None,
                 wire: str | None = None, supervisor: Supervisor | None = None, group: Any = None,
                 group_agent: str | None = None, defer_tools: bool = False, secret_names: Sequence[str] = ()):
        wire = wire or getattr(provider, "wire", None)
        if wire not in WIRE_FORMATS:
            raise ValueError(f"provider {getattr(provider, 'name', provider)!r} speaks an unknown wire format "
                             f"{wire!r} (known: {', '.join(WIRE_FORMATS)})")
        self.store, self.session_id, self.provider, self.wire = store, session_id, provider, wire
        self.setup, self.base_budget = setup, budget
        self.forecast = ProviderForecast()  # this process's requests: the provider's rate (accounting.forecast)
        self.tools = tuple(t for t in tools if not isinstance(t, Mapping))
        if tool_context is not None and tool_context.spawner is None:
            tool_context = replace(tool_context, spawner=self.spawn_agent)
        if group is not None and not group_agent:
            raise ValueError("a group member needs its agent name (group_agent)")
        self.group, self.group_agent = group, group_agent
        if tool_context is not None and group is not None:
            tool_context = replace(tool_context, group=(group, group_agent))
        self._room: int | None = None  # tokens one tool result may take in the next view (from the latest view)
        if tool_context is not None and tool_context.room is None:
            tool_context = replace(tool_context, room=lambda: self._room)
        if tool_context is not None and not tool_context.keep_whole:
            tool_context = replace(tool_context, keep_whole=True)  # _bound cuts each result, after redaction
        self.tool_context, self.tool_runner, self.supervisor = tool_context, tool_runner, supervisor
        self._secrets = secret_values(also=secret_names)  # this process's secret values: redacted from tool results
        self.system_prompt = system_prompt
        self._spawned: set[str] = set()
        self.policy = policy or PermissionPolicy()
        self.approve, self.assume_yes = approve, assume_yes
        self.observer = observer or Observer()
        self.tool_choice, self.max_output_tokens = tool_choice, max_output_tokens
        self.inbox = SteeringInbox(store, session_id)
        self.blockers = BlockerWatch(store, session_id, lambda until: workspace_generation(
            store, session_id, until, cache=kernel_cache()))
        self.commands = RunCommands(store, session_id)
        self.run_id = ""  # the RunStarted of the process driving this loop (latch.host.runs.RunRecord), if any
        self.guard: Any = None  # a latch.host.lease.LeaseGuard this loop works under: checked before each request
        schemas = [dict(t) if isinstance(t, Mapping) else dict(t.SCHEMA) for t in tools]
        self._schemas = schemas
        self._deferred: dict[str, str] = {}  # tool name -> description, of tools offered only on demand
        self._loaded: set[str] = set()
        self._loader: LoadTools | None = None
        if defer_tools and setup.counter.tools(schemas) * DEFER_SHARE > self.budget().hard_limit_tokens:
            keep = {*CORE_TOOLS, *([tool_choice] if tool_choice else [])}
            self._deferred = {str(sc["name"]): str(sc.get("description") or "") for sc in schemas
                              if sc.get("name") not in keep}
            if self._deferred:
                self._loader = LoadTools(self._deferred, self._load_tools)
                self.tools = (*self.tools, self._loader)
                self._loaded = self._loaded_before()
        self._by_name = {t.NAME: t for t in self.tools}
        self.requests = RequestLoop(store, session_id, setup, self.budget(), session_context=session_context,
                                    system_prompt=system_prompt, tools=self._offered())
        self.turns = 0
        self._harness_recorded = False
        self._oversized: dict[str, str] = {}  # call id -> the error result of a call whose arguments were cut

    @classmethod
    def from_supervisor(cls, store: Any, session_id: str, supervisor: Supervisor, provider: Any, *,
                        model: str | None = None, config: Mapping[str, Any] | None = None, estimator: Any = None,
                        session_context: SessionContext | None = None, system_prompt: str = "",
                        tools: Sequence[Tool | Mapping[str, Any]] = (), _spawn: bool = False,
                        **options: Any) -> AgentLoop:
        """The loop of a session whose engine the supervisor builds (spec: "Port boundary", child sessions):
        the root through its root factory, a child (the session has a parent) through the child policy,
        spawned (``_spawn``) or resumed, from the session's profile; there is no fallback to the default
        engine (:class:`~latch.agent.supervisor.ChildPolicyError`). ``estimator`` ``None`` is the
        ``latch_select_estimator`` choice for ``model``. ``options`` are :class:`AgentLoop`'s (``wire``,
        ``tool_runner``, ``policy``, ``assume_yes``, ...); the budget is the engine's default unless given."""
        info = store.session(session_id)
        factory = supervisor.root_factory if info.parent_id is None else supervisor.child_factory
        durable = child_profile(store, session_id) if info.parent_id is not None else None
        if durable is not None:  # a child agent: its durable profile decides, on spawn and resume alike
            model = model if model is not None else durable.model
            config = config if config is not None else durable.config
            built_by = engine_name(supervisor.require_child_factory(f"child session {session_id!r}"))
            if durable.engine and durable.engine != built_by:
                raise ChildPolicyError(f"child session {session_id} was built with engine {durable.engine!r}, but "
                                       f"the supervisor's child policy builds {built_by!r}; resume it with the "
                                       f"same child policy")
        build = (supervisor.build_root if info.parent_id is None
                 else supervisor.spawn_child if _spawn else supervisor.resume)
        setup = build_engine(store, session_id, stream=engine_stream(factory) if factory is not None else "engine:main",
                             model=model, estimator=estimator, config=config, build=build,
                             parent_session_id=info.parent_id)
        engine = setup.engine
        budget = options.pop("budget", None) or engine.default_budget()
        loop = cls(store, session_id, provider, setup=setup, budget=budget, tools=tools,
                   tool_context=options.pop("tool_context", None),
                   session_context=session_context or SessionContext(workspace=info.workspace),
                   system_prompt=system_prompt, supervisor=supervisor, **options)
        loop._child_options = dict(model=model, config=config, estimator=estimator, session_context=session_context,
                                   system_prompt=system_prompt, tools=tools, **options)
        return loop

    @property
    def engine(self) -> Any:
        """The session's context engine (built once, by the host or the supervisor)."""
        return self.setup.engine

    def spawn_child(self, brief: str, provider: Any, **options: Any) -> AgentLoop:
        """A child session (same workspace) that starts from ``brief`` only, with an engine from the
        supervisor's child policy (:class:`~latch.agent.supervisor.ChildPolicyError` when there is none).
        ``options`` override this loop's (``model``, ``tools``, ``system_prompt``, ...)."""
        if self.supervisor is None:
            raise ValueError("spawn_child needs a loop built with AgentLoop.from_supervisor")
        factory = self.supervisor.require_child_factory("a child of session " + repr(self.session_id))
        kwargs = {**getattr(self, "_child_options", {}), **options}
        kwargs.pop("session_context", None)  # the child's own workspace context, never the parent's
        tools = kwargs.get("tools") or ()
        profile = AgentProfile(parent_session_id=self.session_id, call_id="direct-" + uuid.uuid4().hex[:12],
                               brief=brief, model=kwargs.get("model"), engine=engine_name(factory),
                               config=dict(kwargs.get("config") or {}),
                               tools=tuple(t["name"] if isinstance(t, Mapping) else t.NAME for t in tools))
        child = create_child(self.store, self.session_id, profile)
        return AgentLoop.from_supervisor(self.store, child, self.supervisor, provider, _spawn=True, **kwargs)

    # ------------------------------------------------------------------ child agents (spawn_agent)
    def spawn_agent(self, call_id: str, args: Mapping[str, Any]) -> ToolOutcome:
        """Run the child agent of this session's ``spawn_agent`` call ``call_id`` to its end and return its
        rendered :class:`~latch.events.AgentReport` (the only thing transferred back; bounded).

        ``args``: ``brief`` (text), optional ``tools`` (names among this loop's tools; never
        ``spawn_agent``), optional ``model``. The child is created once per call (:func:`create_child`:
        profile and brief in one transaction); a child that already exists (a resumed or retried call)
        is rebuilt from its durable profile and its log and continued, or, when it already reported, its
        report is returned as is. The engine comes from the supervisor's child policy; with none, or
        without a supervisor, the outcome is a one-line error and nothing is stored."""
        if self.supervisor is None:
            return ToolOutcome("spawn_agent: this session has no supervisor, so it cannot build a child engine",
                               is_error=True)
        existing = find_child(self.store, self.session_id, call_id)
        try:
            factory = self.supervisor.require_child_factory(f"a child agent for call {call_id!r}")
            if existing is None:
                tools = child_tools(self.tools, args.get("tools"))
                model = args.get("model") or self.setup.model
                profile = AgentProfile(parent_session_id=self.session_id, call_id=call_id, brief=str(args["brief"]),
                                       model=model, engine=engine_name(factory), config=dict(self.setup.config),
                                       tools=tuple(t.NAME for t in tools), background=bool(args.get("background")))
                existing, spawned = create_child(self.store, self.session_id, profile), True
                self.store.append(self.session_id, [AgentLifecycle(existing, call_id, "spawned")])
                self._spawned.add(existing)
            else:
                spawned = False
        except (ChildPolicyError, ValueError, KeyError) as exc:
            return ToolOutcome(" ".join(str(exc.args[0] if exc.args else exc).split()), is_error=True)
        durable = child_profile(self.store, existing)
        if durable is not None and durable.background:
            return ToolOutcome(f"[agent started in the background: child session {existing}; its report is "
                               "delivered to you as a notification when it ends]")
        report = child_report(self.store, existing)
        if report is None:
            try:
                report = self._run_child(existing, spawned)
            except ChildPolicyError as exc:
                return ToolOutcome(" ".join(str(exc).split()), is_error=True)
        return ToolOutcome(render_report(report, existing), is_error=report.status == "failed")

    def child_loop(self, child_id: str, *, spawn: bool = False, store: Any = None) -> AgentLoop:
        """The loop of child ``child_id``, built from its durable profile through the supervisor (spawn:
        ``spawn=True``; worker reconstruction and resume: the same call with ``spawn=False``). It shares
        this loop's provider, wire, permission policy and approvals; its session context holds the workspace
        and its repository instructions only; its tools are the profile's, taken from this loop's. ``store``
        (default: this loop's) is the store the child, its engine, tools and processes write through (a group
        worker passes one fenced by its claim, :meth:`latch.store.EventStore.fenced`).
        :class:`~latch.agent.supervisor.ChildPolicyError` without a child policy or when the profile's
        engine is not the one the policy builds."""
        assert self.supervisor is not None
        store = self.store if store is None else store
        profile = child_profile(store, child_id)
        if profile is None:
            raise ValueError(f"session {child_id} is not a child agent (it has no agent profile)")
        tools = tuple(t for t in self.tools if t.NAME in profile.tools)
        workspace = store.session(child_id).workspace
        sc = session_context(workspace, self.policy.mode)[0] if workspace else SessionContext()
        same_model = profile.model == self.setup.model
        loop = AgentLoop.from_supervisor(
            store, child_id, self.supervisor, self.provider, model=profile.model, config=profile.config,
            session_context=sc, system_prompt=self.system_prompt, tools=tools, _spawn=spawn, wire=self.wire,
            policy=self.policy, approve=self.approve, assume_yes=self.assume_yes, observer=self.observer.child(child_id),
            max_output_tokens=self.max_output_tokens if same_model else None, tool_runner=self.tool_runner,
            budget=self.base_budget if same_model else None)
        if self.tool_context is not None:
            processes = ProcessManager(store, child_id, self.tool_context.workspace,
                                       env=self.tool_context.processes.env,
                                       sandbox=self.tool_context.processes.sandbox)  # a child is no freer
            loop.tool_context = ToolContext(workspace=self.tool_context.workspace, store=store,
                                            session_id=child_id, processes=processes,
                                            estimate=loop.setup.counter.text, room=lambda: loop._room)
        return loop

    def _run_child(self, child_id: str, spawned: bool, *, store: Any = None, guard: Any = None) -> Any:
        """Run child ``child_id`` to its report (appended to it, with the ``completed`` lifecycle in this session)
        and return the report. ``store`` (default: this loop's) is what every write for the child goes through
        and ``guard`` (a :class:`latch.host.lease.LeaseGuard`) the lease it runs under: once lost, the child's
        processes are killed and it makes no further request or tool call (:class:`~latch.store.LeaseLost`
        propagates; a fenced ``store`` refuses any later write the same way)."""
        store = self.store if store is None else store
        child = self.child_loop(child_id, spawn=spawned, store=store)  # ChildPolicyError: the caller says why
        child.guard = guard
        if guard is not None and child.tool_context is not None:
            guard.on_lost(child.tool_context.processes.close)  # a running command is stopped, not waited for
        repair_interrupted(store, child_id)  # a killed worker's calls: marked, never invented
        if child.tool_context is not None:  # and its background processes: killed, their exits marked unknown
            child.tool_context.processes.reconcile()
        done = sum(1 for _ in store.events(child_id, kinds=[AssistantMessage.KIND]))
        status, error = "max_turns", None
        try:
            if done < CHILD_MAX_TURNS and child.run(CHILD_MAX_TURNS - done).stopped == "done":
                status = "completed"
        except (AgentError, ProviderError) as exc:
            status, error = "failed", f"the child stopped on an error: {exc}"
        finally:
            if child.tool_context is not None:
                child.tool_context.processes.close()
        report = build_report(store, child_id, status, error=error)
        store.append(child_id, [report])
        store.append(self.session_id, [AgentLifecycle(child_id, child_profile(store, child_id).call_id,
                                                      "completed", report.status)])
        return report

    # ------------------------------------------------------------------ background children, notifications
    def background_children(self) -> list[tuple[str, Any, bool]]:
        """``(child_id, report or None, delivered)`` of every background child of this session, in spawn
        order, from the log alone (so a restart sees exactly what was finished and delivered)."""
        delivered = {s.event.child_session_id
                     for s in self.store.events(self.session_id, kinds=[AgentNotificationDelivered.KIND])}
        out = []
        for info in self.store.children(self.session_id):
            profile = child_profile(self.store, info.id)
            if profile is not None and profile.background:
                out.append((info.id, child_report(self.store, info.id), info.id in delivered))
        return out

    def advance_children(self) -> list[str]:
        """Run every unfinished background child to its report (each rebuilt from its profile and log; the
        children run here, between the parent's requests, on the same provider), buffering the finished
        ones in :attr:`Supervisor.reports`. Returns the children finished now."""
        done = []
        for child_id, report, _ in self.background_children():
            if report is None and self.supervisor is not None:
                try:
                    self._run_child(child_id, child_id in self._spawned)
                except ChildPolicyError as exc:
                    failed = build_report(self.store, child_id, "failed", error=" ".join(str(exc).split()))
                    self.store.append(child_id, [failed])
                self.supervisor.reports.append(child_id)
                done.append(child_id)
        return done

    def deliver_notifications(self) -> list[int]:
        """At a safe model boundary (every earlier tool call has a terminal result), append one
        :class:`~latch.events.AgentNotificationDelivered` per finished, undelivered background child, in
        one transaction; returns their seqs (``[]`` when none is due or a call is still open). The event is
        the dedupe marker: a restart delivers each report exactly once."""
        if pending_tool_calls(self.store, self.session_id):
            return []
        due = [(c, r) for c, r, delivered in self.background_children() if r is not None and not delivered]
        if self.supervisor is not None:
            self.supervisor.reports.clear()
        if not due:
            return []
        events = [AgentNotificationDelivered("[agent notification] " + render_report(r, c), child_session_id=c,
                                             call_id=child_profile(self.store, c).call_id) for c, r in due]
        return self.store.append(self.session_id, events)

    def _outstanding_children(self) -> bool:
        return any(r is None or not d for _, r, d in self.background_children())

    def resume_children(self) -> list[ToolResult]:
        """Finish every ``spawn_agent`` call a killed process left open (:func:`open_spawn_calls`): each
        child is rebuilt from its profile and log and continued to its report, which becomes the call's
        result. Returns the results appended, in call order. Run on resume, before
        :func:`repair_interrupted`. :class:`~latch.agent.supervisor.ChildPolicyError` (nothing appended) when
        a child cannot be rebuilt through this supervisor's child policy (none, or another engine)."""
        out = []
        calls = open_spawn_calls(self.store, self.session_id)
        for call in calls:  # every child must be rebuildable before any of them runs
            child = find_child(self.store, self.session_id, call.id)
            if child is not None and child_report(self.store, child) is None:
                assert self.supervisor is not None
                factory = self.supervisor.require_child_factory(f"child session {child!r}")
                durable = child_profile(self.store, child)
                if durable is not None and durable.engine and durable.engine != engine_name(factory):
                    raise ChildPolicyError(f"child session {child} was built with engine {durable.engine!r}, but "
                                           f"the supervisor's child policy builds {engine_name(factory)!r}; resume "
                                           f"it with the same child policy")
        for call in calls:
            args = call.args()
            outcome = self.spawn_agent(call.id, args if isinstance(args, dict) else {"brief": str(args)})
            result = ToolResult(call.id, self._bound(outcome.content), is_error=outcome.is_error, name=call.name)
            self.store.append(self.session_id, [result])
            out.append(result)
        return out

    # ------------------------------------------------------------------ budget
    def _ratio(self, source: str | None = None) -> tuple[int, int] | None:
        """The session's largest correction (:func:`correction_ratio`; of ``source`` only when given), read from
        the store once per loop and then kept current by :meth:`_correct` (this loop is the session's only writer
        of corrections)."""
        if not hasattr(self, "_ratio_cache"):
            self._ratio_cache = {None: correction_ratio(self.store, self.session_id),
                                 "overflow": correction_ratio(self.store, self.session_id, "overflow")}
        return self._ratio_cache[source]

    def budget(self) -> ContextBudget:
        """The request budget: from the provider's rate once this loop has seen its counts for two requests
        (:func:`~latch.host.corrections.rate_budget`, capped by the largest overflow refusal), before that the
        base budget after the session's corrections (:func:`corrected_budget`)."""
        return rate_budget(self.base_budget, self.forecast, self._ratio(), self._ratio("overflow"))

    def _correct(self, provider_tokens: int, estimated: int, source: str) -> None:
        if not raises_ratio(self._ratio(), provider_tokens, estimated) and not (
                source == "overflow" and raises_ratio(self._ratio("overflow"), provider_tokens, estimated)):
            return
        ev = EstimateCorrection(provider_tokens, estimated, source)
        self.store.append(self.session_id, [ev])
        cache = self._ratio_cache
        for key in ([None, "overflow"] if source == "overflow" else [None]):
            if raises_ratio(cache[key], provider_tokens, estimated):
                cache[key] = (provider_tokens, estimated)
        self.observer.on_correction(ev)

    # ------------------------------------------------------------------ one request
    def view(self) -> RequestResult:
        """Materialize and check the next view (nothing is sent). Raises :class:`AgentError` when the engine
        refuses or the view would break the budget or the tool-call protocol."""
        budget = self.budget()
        self.requests.set_budget(budget)
        res = self.requests.run(None, where=f"request {self.turns + 1}")
        if res.view is None:
            raise AgentError(f"the context cannot hold the next request: {res.overflow}; {self._overflow_fix(budget)}")
        self._room = result_room(res.view)
        bad = res.budget_violations + res.protocol_violations
        if bad:
            raise AgentError(f"refusing to send an invalid view: {bad[0]}")
        return res

    def render(self, view: ContextView) -> dict[str, Any]:
        """The wire body of ``view`` (images inlined from the store's artifacts), with the output cap and
        ``tool_choice`` when set (:func:`latch.providers.wire.render_request`)."""
        def loader(sha256: str) -> bytes:
            return self.store.get_artifact(sha256)[1]

        return render_request(view, self.wire or "openai-chat", loader,
                              model=self.setup.model or getattr(self.provider, "model", None),
                              max_output_tokens=self.max_output_tokens, tool_choice=self.tool_choice)

    def turn(self) -> Step:
        """One model request and its tool calls (see the module docstring). Raises :class:`AgentError` (view
        refused, provider refused after corrections) or :class:`latch.providers.ProviderError`."""
        if self.guard is not None:  # a lease lost (taken over): no further request
            self.guard.check()
        delivered = self.inbox.deliver_messages()
        if delivered:
            self.observer.on_steering([text for _, text in delivered])
        self.advance_children()  # a safe boundary: background children run and their reports are delivered
        self.deliver_notifications()
        if self.group is not None:  # group messages: information, delivered FIFO at this safe boundary
            self.group.deliver(self.group_agent, self.session_id)
        number = self.turns + 1
        for attempt in range(OVERFLOW_RETRIES + 1):
            res = self.view()
            view = res.view
            assert view is not None
            body = self.render(view)
            self.observer.on_request(number, res)
            try:
                response = self.provider.complete(body, on_text=self.observer.on_text)
                break
            except ProviderOverflow as exc:
                estimate = max(view.tokens.total_tokens, res.recounted_tokens or 0)
                if exc.prompt_tokens:
                    self.forecast.observe(estimate, exc.prompt_tokens)  # the provider's own count of this view
                counted = exc.prompt_tokens if exc.prompt_tokens else estimate + estimate // 4 + 1
                self._correct(max(counted, estimate + 1), estimate, "overflow")
                if attempt == OVERFLOW_RETRIES:
                    raise AgentError(f"the provider refused the request as too long {OVERFLOW_RETRIES + 1} times "
                                     f"({exc})") from None
        try:
            message, usage = parse_response(self.wire, response)
        except ValueError as exc:
            raise ProviderError(f"{getattr(self.provider, 'name', 'provider')}: {exc}") from None
        message = self._bound_arguments(message)
        events: list[Event] = [message] + ([usage] if usage is not None else []) + self._harness_prompt()
        turn_seq = self.store.append(self.session_id, events)[0]  # committed before any tool runs
        self._harness_recorded = True
        self.turns = number
        self.observer.on_response(number, message, usage, view)
        counted = provider_prompt_tokens(usage)
        if counted is not None:
            sent = max(view.tokens.total_tokens, res.recounted_tokens or 0)
            self.forecast.observe(sent, counted)
            self._correct(counted, sent, "usage")
        results = tuple(self._call(c, turn_seq) for c in message.tool_calls)
        if any(c.name == Compact.NAME and not r.is_error for c, r in zip(message.tool_calls, results, strict=False)):
            self.compact("model")  # the model asked for it: every call has its result, a safe boundary
        return Step(number, res, body, message, usage, results)

    def harness_prompt(self) -> HarnessPrompt:
        """The :class:`~latch.events.HarnessPrompt` of this loop's requests: its system prompt, tool schemas and
        session context, exactly as every request renders them."""
        r = self.requests
        ctx = r.session_context
        return HarnessPrompt(system_prompt=r.system_prompt, tools=canonical_json([dict(t) for t in r.tools]),
                             workspace=ctx.workspace, repository_instructions=ctx.repository_instructions,
                             mode=ctx.mode)

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

    def _decide(self, call: ToolCall) -> tuple[Decision, bool, str]:
        decision = self.policy.decide(call.name, call.arguments)
        tool = self._by_name.get(call.name)
        if decision.action == "ask" and tool is not None and not getattr(tool, "MUTATES", True):
            decision = Decision("allow", "does not change the workspace")
        if decision.action == "allow":
            return decision, True, ""
        if decision.action == "deny":
            return decision, False, f"[denied: {decision.reason}]"
        if self.assume_yes:
            return decision, True, ""
        if self.approve is not None:
            if self.approve(call, decision):
                return decision, True, ""
            return decision, False, "[not run: the user declined this call]"
        return decision, False, ("[not run: this call needs the user's approval and the session is not "
                                 "interactive; the user can allow such calls with --yes]")

    def _bound_arguments(self, message: AssistantMessage) -> AssistantMessage:
        """``message`` with the arguments of every call over :meth:`result_cap_tokens` replaced by
        ``{"oversized_arguments": {"bytes": N, "sha256": S}}`` (the original is stored whole as artifact ``S``):
        the stored call stays small enough for every later view, and the call is answered with an error, never
        run (:meth:`_call`). A call within the cap is kept byte for byte."""
        cap = self.result_cap_tokens()
        calls, changed = [], False
        for c in message.tool_calls:
            if len(c.arguments) > cap and self.setup.counter.text(c.arguments) > cap:
                data = c.arguments.encode("utf-8", "surrogatepass")
                sha = self.store.put_artifact(data, "application/json").sha256
                self._oversized[c.id] = (f"[not run: the arguments of this call are {len(data):,} bytes, over the "
                                         f"{cap:,}-token limit of one call; they are stored whole as artifact "
                                         f"{sha} (read_artifact). Do the work in smaller calls, e.g. write a large "
                                         f"file in parts]")
                c = replace(c, arguments=canonical_json({"oversized_arguments": {"bytes": len(data),
                                                                                 "sha256": sha}}))
                changed = True
            calls.append(c)
        return replace(message, tool_calls=tuple(calls)) if changed else message

    def _call(self, call: ToolCall, turn_seq: int) -> ToolResult:
        if self.guard is not None:  # a lease lost (taken over): no further tool call
            self.guard.check()
        oversized = self._oversized.pop(call.id, None)
        if oversized is not None:
            decision, allowed, refusal = Decision("deny", "oversized arguments"), False, oversized
        else:
            decision, allowed, refusal = self._decide(call)
        self.observer.on_tool_call(call, decision, allowed)
        if not allowed:
            outcome = ToolOutcome(refusal, is_error=True)
        else:
            self.store.append(self.session_id, [ToolStarted(call.id, call.name, decision.action)])
            try:
                if call.name not in self._by_name and self.tool_runner is not None:
                    ran = self.tool_runner(call)
                    outcome = ToolOutcome(ran.content, is_error=ran.is_error, exit_code=ran.exit_code)
                elif self.tool_context is None:
                    outcome = ToolOutcome(f"[not run: no tool {call.name!r} is available]", is_error=True)
                else:
                    outcome = run_tool(self.tools, call, self.tool_context)
            except Exception as exc:  # a tool's own bug must not lose the turn: the model sees it as an error
                outcome = ToolOutcome(f"[tool {call.name} failed: {type(exc).__name__}: {exc}]", is_error=True)
        content = redact(outcome.content, self._secrets)  # a key a tool printed never reaches the store or model
        result = ToolResult(call.id, self._bound(content), is_error=outcome.is_error, name=call.name,
                            exit_code=outcome.exit_code)
        (seq,) = self.store.append(self.session_id, [result])
        blocker = self.blockers.observe(call, result, seq, turn_seq)  # a refused write repeated, workspace unchanged
        if blocker is not None:
            self.store.append(self.session_id, [blocker])
        self.observer.on_tool_result(call, outcome)
        return result

    def result_cap_tokens(self) -> int:
        """The most tokens one tool result may hold: a quarter of the (corrected) hard limit, so a result
        always fits beside the state and the turn that asked for it (``read_file`` pages are 8,000 tokens at
        most anyway)."""
        return max(64, self.budget().hard_limit_tokens // 4)

    def _bound(self, content: str) -> str:
        """``content`` (already redacted) when it fits :meth:`result_cap_tokens` and
        :data:`~latch.agent.tools.base.OUTCOME_LIMIT_BYTES`; else the whole output is stored as an artifact and the
        result is its head and tail with a pointer for ``read_artifact``, within both
        (:func:`~latch.agent.tools.base.spill`; the run never ends because one output is large)."""
        cap = self.result_cap_tokens()
        estimate = self.setup.counter.text

        def fits(text: str) -> bool:
            return len(text.encode("utf-8", "surrogatepass")) <= OUTCOME_LIMIT_BYTES and estimate(text) <= cap

        return content if fits(content) else spill(content, self.store, fits)

    # ------------------------------------------------------------------ the session
    def say(self, text: str) -> int:
        """Append a user turn now (between turns the session is at a safe boundary); returns its seq."""
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
            if not step.message.tool_calls and not self._outstanding_children():
                if self.inbox.pending():  # the user steered while the answer was coming: answer that too
                    continue
                out.stopped = "done"
                break
        return out

    # ------------------------------------------------------------------ tools on demand
    def _offered(self) -> list[dict[str, Any]]:
        """The schemas a request carries: every tool's in the fixed order, less the deferred ones not loaded,
        then ``load_tools`` while any remain deferred."""
        shown = [sc for sc in self._schemas if sc.get("name") not in self._deferred or sc.get("name") in self._loaded]
        if self._loader is not None and set(self._deferred) - self._loaded:
            shown.append(dict(self._loader.SCHEMA))
        return shown

    def _loaded_before(self) -> set[str]:
        """The deferred tools earlier ``load_tools`` calls of this session loaded (a resumed run offers them)."""
        ok = {s.event.call_id for s in self.store.events(self.session_id, kinds=["tool_result"])
              if not s.event.is_error}
        found: set[str] = set()
        for s in self.store.events(self.session_id, kinds=["assistant_message"]):
            for c in s.event.tool_calls:
                args = c.args() if c.name == LOAD_TOOLS and c.id in ok else None
                if isinstance(args, dict) and isinstance(args.get("names"), list):
                    found.update(n for n in args["names"] if n in self._deferred)
        return found

    def _load_tools(self, names: Sequence[str]) -> str:
        unknown = [n for n in names if n not in self._deferred]
        if unknown:
            return f"not loaded: {', '.join(unknown)} (not among the tools offered on demand)"
        new = [n for n in names if n not in self._loaded]
        self._loaded.update(new)
        self.requests.tools = tuple(self._offered())
        self._harness_recorded = False  # the next request records the new tool list
        if not new:
            return f"already offered: {', '.join(names)}"
        return f"loaded: {', '.join(new)}: offered from the next request on"

    def _overflow_fix(self, budget: ContextBudget) -> str:
        """What would make the next request fit: a larger window or smaller reserve, and fewer tool schemas when
        they take a third of the hard limit or more."""
        hard = budget.hard_limit_tokens
        fix = (f"to fix it: a larger --window or a smaller --reserve (now {budget.context_window_tokens:,} and "
               f"{budget.reserve_tokens:,} tokens)")
        schemas = self.setup.counter.tools(self.requests.tools)
        if schemas * 3 >= hard:
            fix += (f", or fewer tools with --tools NAME,... (the {len(self.requests.tools)} tool schemas take "
                    f"{schemas:,} of the {hard:,}-token hard limit)")
        return fix

    def compact(self, reason: str = "manual") -> None:
        """``/compact`` (R26): the next request starts a fresh cache epoch without earlier conversation;
        nothing is deleted (state and recall keep it)."""
        self.setup.engine.manual_compact(reason)
