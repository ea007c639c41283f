"""Child agents of a running session: ``spawn_agent`` calls, background children and their notifications, and the
children a killed process left mid-way (spec: "Port boundary", child sessions).

A child is created once per call (:func:`latch.agent.children.create_child`: profile and brief in one
transaction), built through the supervisor's child policy (never the default engine), and runs on the parent's
provider, permission policy and approvals; only its :class:`~latch.events.AgentReport` comes back (bounded). The
durable records (profiles, reports, lifecycle) live in :mod:`latch.agent.children`; this module drives them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ..events import (
    AgentLifecycle,
    AgentNotificationDelivered,
    AgentProfile,
    AssistantMessage,
    ToolCall,
    ToolResult,
    ToolStarted,
)
from ..host.loop import build_engine
from ..port import SessionContext
from ..providers import ProviderError
from ..store import EventLog
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
from .context import session_context
from .interrupted import repair_interrupted
from .observer import AgentError
from .steering import pending_tool_calls
from .supervisor import ChildPolicyError, Supervisor
from .tools import Tool, ToolContext, ToolOutcome
from .tools.processes import ProcessManager

__all__ = ["ChildAgents", "engine_name", "engine_stream", "from_supervisor", "open_spawn_calls"]


def engine_stream(factory: Callable[..., Any]) -> str:
    """The kernel-record stream of a session's live engine: ``"<PLUGIN_NAME>:main"``."""
    owner = getattr(factory, "__self__", None)
    name = getattr(owner, "PLUGIN_NAME", None) or getattr(factory, "__qualname__", "engine")
    return f"{name}:main"


def engine_name(factory: Callable[..., Any]) -> str:
    """The engine name a factory builds (:func:`engine_stream` without ``":main"``): what a child's
    :class:`~latch.events.AgentProfile` records as its ``engine``."""
    return engine_stream(factory).rsplit(":", 1)[0]


def open_spawn_calls(store: EventLog, session_id: str) -> list[ToolCall]:
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


def _same_child_policy(durable: AgentProfile | None, factory: Callable[..., Any], child: str) -> None:
    """:class:`~latch.agent.supervisor.ChildPolicyError` when child session ``child`` was built with another engine
    than ``factory`` builds."""
    built_by = engine_name(factory)
    if durable is not None and durable.engine and durable.engine != built_by:
        raise ChildPolicyError(
            f"child session {child} was built with engine {durable.engine!r}, but the "
            f"supervisor's child policy builds {built_by!r}; resume it with the same child "
            f"policy"
        )


def from_supervisor(
    cls: Any,
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
) -> Any:
    """:meth:`latch.agent.loop.AgentLoop.from_supervisor` (``cls``: the loop class): the loop of a session whose
    engine the supervisor builds, the root through its root factory, a child through the child policy."""
    info = store.session(session_id)
    factory = supervisor.root_factory if info.parent_id is None else supervisor.child_factory
    durable = child_profile(store, session_id) if info.parent_id is not None else None
    if durable is not None:  # a child agent: its durable profile decides, on spawn and resume alike
        model = model if model is not None else durable.model
        config = config if config is not None else durable.config
        _same_child_policy(durable, supervisor.require_child_factory(f"child session {session_id!r}"), session_id)
    build = supervisor.build_root if info.parent_id is None else supervisor.spawn_child if _spawn else supervisor.resume
    setup = build_engine(
        store,
        session_id,
        stream=engine_stream(factory) if factory is not None else "engine:main",
        model=model,
        estimator=estimator,
        config=config,
        build=build,
        parent_session_id=info.parent_id,
    )
    budget = options.pop("budget", None) or setup.engine.default_budget()
    loop = cls(
        store,
        session_id,
        provider,
        setup=setup,
        budget=budget,
        tools=tools,
        tool_context=options.pop("tool_context", None),
        session_context=session_context or SessionContext(workspace=info.workspace),
        system_prompt=system_prompt,
        supervisor=supervisor,
        **options,
    )
    loop._child_options = dict(
        model=model,
        config=config,
        estimator=estimator,
        session_context=session_context,
        system_prompt=system_prompt,
        tools=tools,
        **options,
    )
    return loop


class ChildAgents:
    """The child agents of ``loop``'s session (a :class:`latch.agent.loop.AgentLoop`: its store, supervisor, tools,
    provider and permissions, read as they are when a child is built)."""

    def __init__(self, loop: Any):
        self.loop = loop
        self.spawned: set[str] = set()  # children this process created (a background one runs as spawned)

    def spawn_child(self, brief: str, provider: Any, **options: Any) -> Any:
        """:meth:`latch.agent.loop.AgentLoop.spawn_child`."""
        loop = self.loop
        if loop.supervisor is None:
            raise ValueError("spawn_child needs a loop built with AgentLoop.from_supervisor")
        factory = loop.supervisor.require_child_factory("a child of session " + repr(loop.session_id))
        kwargs = {**getattr(loop, "_child_options", {}), **options}
        kwargs.pop("session_context", None)  # the child's own workspace context, never the parent's
        tools = kwargs.get("tools") or ()
        profile = AgentProfile(
            parent_session_id=loop.session_id,
            call_id="direct-" + uuid.uuid4().hex[:12],
            brief=brief,
            model=kwargs.get("model"),
            engine=engine_name(factory),
            config=dict(kwargs.get("config") or {}),
            tools=tuple(t["name"] if isinstance(t, Mapping) else t.NAME for t in tools),
        )
        child = create_child(loop.store, loop.session_id, profile)
        return type(loop).from_supervisor(loop.store, child, loop.supervisor, provider, _spawn=True, **kwargs)

    def spawn_agent(self, call_id: str, args: Mapping[str, Any]) -> ToolOutcome:
        """:meth:`latch.agent.loop.AgentLoop.spawn_agent`."""
        loop = self.loop
        if loop.supervisor is None:
            return ToolOutcome(
                "spawn_agent: this session has no supervisor, so it cannot build a child engine", is_error=True
            )
        existing = find_child(loop.store, loop.session_id, call_id)
        try:
            factory = loop.supervisor.require_child_factory(f"a child agent for call {call_id!r}")
            if existing is None:
                tools = child_tools(loop.tools, args.get("tools"))
                model = args.get("model") or loop.setup.model
                profile = AgentProfile(
                    parent_session_id=loop.session_id,
                    call_id=call_id,
                    brief=str(args["brief"]),
                    model=model,
                    engine=engine_name(factory),
                    config=dict(loop.setup.config),
                    tools=tuple(t.NAME for t in tools),
                    background=bool(args.get("background")),
                )
                existing, spawned = create_child(loop.store, loop.session_id, profile), True
                loop.store.append(loop.session_id, [AgentLifecycle(existing, call_id, "spawned")])
                self.spawned.add(existing)
            else:
                spawned = False
        except (ChildPolicyError, ValueError, KeyError) as exc:
            return ToolOutcome(" ".join(str(exc.args[0] if exc.args else exc).split()), is_error=True)
        durable = child_profile(loop.store, existing)
        if durable is not None and durable.background:
            return ToolOutcome(
                f"[agent started in the background: child session {existing}; its report is "
                "delivered to you as a notification when it ends]"
            )
        report = child_report(loop.store, existing)
        if report is None:
            try:
                report = self.run_child(existing, spawned)
            except ChildPolicyError as exc:
                return ToolOutcome(" ".join(str(exc).split()), is_error=True)
        return ToolOutcome(render_report(report, existing), is_error=report.status == "failed")

    def child_loop(self, child_id: str, *, spawn: bool = False, store: EventLog | None = None) -> Any:
        """:meth:`latch.agent.loop.AgentLoop.child_loop`."""
        parent = self.loop
        assert parent.supervisor is not None
        store = parent.store if store is None else store
        profile = child_profile(store, child_id)
        if profile is None:
            raise ValueError(f"session {child_id} is not a child agent (it has no agent profile)")
        tools = tuple(t for t in parent.tools if t.NAME in profile.tools)
        workspace = store.session(child_id).workspace
        sc = session_context(workspace, parent.policy.mode)[0] if workspace else SessionContext()
        same_model = profile.model == parent.setup.model
        loop = type(parent).from_supervisor(
            store,
            child_id,
            parent.supervisor,
            parent.provider,
            model=profile.model,
            config=profile.config,
            session_context=sc,
            system_prompt=parent.system_prompt,
            tools=tools,
            _spawn=spawn,
            wire=parent.wire,
            policy=parent.policy,
            approve=parent.approve,
            assume_yes=parent.assume_yes,
            observer=parent.observer.child(child_id),
            max_output_tokens=parent.max_output_tokens if same_model else None,
            tool_runner=parent.tool_runner,
            budget=parent.base_budget if same_model else None,
        )
        ctx = parent.tool_context
        if ctx is not None:
            processes = ProcessManager(
                store, child_id, ctx.workspace, env=ctx.processes.env, sandbox=ctx.processes.sandbox
            )  # a child is no freer
            loop.tool_context = ToolContext(
                workspace=ctx.workspace,
                store=store,
                session_id=child_id,
                processes=processes,
                estimate=loop.setup.counter.text,
                room=lambda: loop._room,
            )
        return loop

    def run_child(self, child_id: str, spawned: bool, *, store: EventLog | None = None, guard: Any = None) -> Any:
        """Run child ``child_id`` to its report (appended to it, with the ``completed`` lifecycle in this session)
        and return the report. ``store`` (default: this loop's) is what every write for the child goes through
        and ``guard`` (a :class:`latch.host.lease.LeaseGuard`) the lease it runs under: once lost, the child's
        processes are killed and it makes no further request or tool call (:class:`~latch.store.LeaseLost`
        propagates; a fenced ``store`` refuses any later write the same way)."""
        store = self.loop.store if store is None else store
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
        store.append(
            self.loop.session_id,
            [
                AgentLifecycle(
                    child_id, cast(AgentProfile, child_profile(store, child_id)).call_id, "completed", report.status
                )
            ],
        )
        return report

    def background(self) -> list[tuple[str, Any, bool]]:
        """:meth:`latch.agent.loop.AgentLoop.background_children`."""
        store, session_id = self.loop.store, self.loop.session_id
        delivered = {
            s.event.child_session_id for s in store.events(session_id, kinds=[AgentNotificationDelivered.KIND])
        }
        out = []
        for info in store.children(session_id):
            profile = child_profile(store, info.id)
            if profile is not None and profile.background:
                out.append((info.id, child_report(store, info.id), info.id in delivered))
        return out

    def advance(self) -> list[str]:
        """:meth:`latch.agent.loop.AgentLoop.advance_children`."""
        supervisor, done = self.loop.supervisor, []
        for child_id, report, _ in self.background():
            if report is None and supervisor is not None:
                try:
                    self.run_child(child_id, child_id in self.spawned)
                except ChildPolicyError as exc:
                    failed = build_report(self.loop.store, child_id, "failed", error=" ".join(str(exc).split()))
                    self.loop.store.append(child_id, [failed])
                supervisor.reports.append(child_id)
                done.append(child_id)
        return done

    def deliver_notifications(self) -> list[int]:
        """:meth:`latch.agent.loop.AgentLoop.deliver_notifications`."""
        store, session_id = self.loop.store, self.loop.session_id
        if pending_tool_calls(store, session_id):
            return []
        due = [(c, r) for c, r, delivered in self.background() if r is not None and not delivered]
        if self.loop.supervisor is not None:
            self.loop.supervisor.reports.clear()
        if not due:
            return []
        events = [
            AgentNotificationDelivered(
                "[agent notification] " + render_report(r, c),
                child_session_id=c,
                call_id=cast(AgentProfile, child_profile(store, c)).call_id,
            )
            for c, r in due
        ]
        seqs: list[int] = store.append(session_id, events)
        return seqs

    def outstanding(self) -> bool:
        """Whether a background child has not reported yet, or its report was not delivered."""
        return any(r is None or not d for _, r, d in self.background())

    def resume(self) -> list[ToolResult]:
        """:meth:`latch.agent.loop.AgentLoop.resume_children`."""
        loop, out = self.loop, []
        calls = open_spawn_calls(loop.store, loop.session_id)
        for call in calls:  # every child must be rebuildable before any of them runs
            child = find_child(loop.store, loop.session_id, call.id)
            if child is not None and child_report(loop.store, child) is None:
                assert loop.supervisor is not None
                factory = loop.supervisor.require_child_factory(f"child session {child!r}")
                _same_child_policy(child_profile(loop.store, child), factory, child)
        for call in calls:
            args = call.args()
            outcome = self.spawn_agent(call.id, args if isinstance(args, dict) else {"brief": str(args)})
            result = ToolResult(call.id, loop.calls.bound(outcome.content), is_error=outcome.is_error, name=call.name)
            loop.store.append(loop.session_id, [result])
            out.append(result)
        return out
