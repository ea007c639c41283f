"""An agent session built from a run's options and the session's stored profile: what ``latch run`` starts
(spec: "Sessions & continuity", "Agent Skills and MCP").

:func:`open_session` checks every choice before a new session is stored (a rejected run leaves nothing behind),
then creates or resumes the session, takes its run lease (:class:`latch.host.runs.RunRecord`), builds its engine
(:func:`latch.host.loop.build_engine`), budget, provider, tools (built-in, Agent Skills, MCP, group), sandbox and
processes, and returns an :class:`AgentSession` around its :class:`latch.agent.loop.AgentLoop`. Options left
unset come from the session's profile (a resume needs no flags), then from the config's ``[provider]`` table. The
profile (provider, model, engine, estimator, base URL, mode; never a key) is stored in the session's metadata.
A mistake raises :class:`SessionError` (one line); nothing here prints or exits.

:meth:`AgentSession.run` drives a run from ``run_started`` to ``run_ended`` (SIGTERM and SIGHUP end it as Ctrl-C
does, once :func:`end_on_signals` armed them), :meth:`AgentSession.repair` what a killed run left for a resume, and
:meth:`AgentSession.work` a group worker; the front end renders what they return.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import Any, cast

from .. import plugins
from ..config import budget_for_model
from ..events import ToolCall, ToolResult
from ..host.loop import EngineSetup, HostError, build_engine
from ..host.runs import RunLeaseHeld, RunRecord
from ..kernel.tombstones import tombstoned_sessions
from ..port import ContextBudget
from ..providers import ProviderError
from ..records import dataclass
from ..store import EventLog
from .context import SYSTEM_PROMPT, session_context
from .environment import tool_environment
from .group import Group, GroupTask, resolve_group
from .interrupted import repair_interrupted
from .loop import AgentLoop
from .mcp import McpHub, mcp_servers, mcp_tools, session_mcp_tools
from .observer import Observer
from .permissions import PermissionPolicy
from .sandbox import Sandbox, SandboxError
from .sandbox import choose as choose_sandbox
from .skills import discover_skills, session_skills, skill_tools
from .steering import awaiting_user
from .supervisor import Supervisor
from .tools import ToolContext, agent_tools
from .tools.group import GROUP_TOOLS
from .tools.processes import ProcessManager, Reconciled, remove_stale_log_dirs
from .worker import DEFAULT_LEASE_SECONDS, TaskRun, run_worker

__all__ = [
    "DEFAULT_MAX_TURNS",
    "AgentSession",
    "Repairs",
    "RunEnd",
    "RunOptions",
    "SessionError",
    "Terminated",
    "check_options",
    "end_on_signals",
    "open_session",
    "worker_name",
]

DEFAULT_MAX_TURNS = 50
"""Most model requests of a run when neither ``--max-turns`` nor ``[provider] max_turns`` says."""


class SessionError(Exception):
    """The session cannot be started as asked (one line, never a traceback). ``usage`` is ``True`` for a mistake in
    the options (a front end shows it as a usage error), ``False`` when the options are fine but the store refuses
    (an unknown, forgotten or imported session, a provider that cannot be set up)."""

    def __init__(self, message: str, *, usage: bool = True):
        super().__init__(message)
        self.usage = usage


@dataclass
class RunOptions:
    """What ``latch run`` was asked for (each ``None`` / ``False`` when not given; see ``latch run --help``):
    token counts in tokens, timeouts and the lease in seconds."""

    task: str | None = None
    provider_name: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_turns: int | None = None
    assume_yes: bool = False
    mode: str | None = None
    resume: str | None = None
    engine: str | None = None
    child_engine: str | None = None
    estimator: str | None = None
    window: int | None = None
    reserve: int | None = None
    recent: int | None = None
    tool_choice: str | None = None
    no_stream: bool = False
    tool_names: str | None = None
    group_name: str | None = None
    worker: bool = False
    lease_seconds: float | None = None
    wait: bool = False
    sandbox_mode: str | None = None
    network: bool = False
    response_timeout: float | None = None
    idle_timeout: float | None = None
    once: bool = False


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived (``signum``): the run ends as on Ctrl-C (every ``KeyboardInterrupt`` cleanup
    runs), then exits ``128 + signum``."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: Any) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):  # the run is ending: a second signal must not cut the cleanup
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated(signum)


def end_on_signals() -> None:
    """SIGTERM and SIGHUP raise :class:`Terminated` in the main thread (where a run runs): ``open_session``'s
    ``arm``."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def worker_name() -> str:
    """A fresh group member's name: ``worker-<pid>-<hex>``."""
    return f"worker-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Repairs:
    """What resuming a session repaired, in this order: the ``children`` a killed run left mid-way (rebuilt and
    finished: their results), its ``interrupted`` calls left without a result (closed), and its background
    ``processes`` whose watcher died with it (killed or already ended)."""

    children: list[ToolResult]
    interrupted: list[ToolCall]
    processes: list[Reconciled]


@dataclass(frozen=True)
class RunEnd:
    """How a run ended: its exit ``code`` and, when SIGTERM or SIGHUP ended it, that ``signum``."""

    code: int
    signum: int | None = None


@dataclass
class AgentSession:
    """A started session: its ``loop`` (with its ``store``, fenced by the run lease unless a worker), the run
    ``record``, the ``processes`` and MCP ``hub`` its tools use, and what the front end shows: the resolved
    ``options`` (provider ``name``, model, mode, ...), ``setup`` and ``budget``, the ``sandbox``, ``resumed`` and
    ``waiting`` (the conversation waits for the user: a resumed one whose last answer is complete)."""

    options: RunOptions
    name: str
    store: EventLog
    session_id: str
    workspace: Path
    record: RunRecord
    setup: EngineSetup
    budget: ContextBudget
    sandbox: Sandbox
    processes: ProcessManager
    hub: McpHub | None
    loop: AgentLoop
    resumed: bool = False
    waiting: bool = True
    profile: dict[str, Any] = field(default_factory=dict)

    def start(self) -> None:
        """Start the run: the loop works under the lease's guard (taken over: no further request or tool call,
        processes stopped), its ``run_started`` is recorded and request numbers continue the session's."""
        loop, record = self.loop, self.record
        loop.guard = record.guard
        record.guard.on_lost(self.processes.close)
        loop.run_id = record.start().run_id
        loop.turns = sum(1 for _ in self.store.events(self.session_id, kinds=["assistant_message"]))

    def end(self, outcome: str, code: int, detail: str) -> None:
        """End the run: its processes first (their exits are the run's writes), the MCP servers, then its
        ``run_ended`` (``outcome``, exit ``code``, ``detail``) unless it ended already."""
        self.processes.close()
        if self.hub is not None:
            self.hub.close()
        if not self.record.ended:
            self.record.end(outcome, code, detail)

    def close(self) -> None:
        """Stop the MCP servers and the processes (a worker's end: its runs are the tasks' child sessions)."""
        if self.hub is not None:
            self.hub.close()
        self.processes.close()

    def repair(self) -> Repairs:
        """A resumed session: finish the children a killed run left mid-way, close its calls left without a result
        and its background processes (see :class:`Repairs`)."""
        children = self.loop.resume_children()
        interrupted = repair_interrupted(self.store, self.session_id)
        return Repairs(children, interrupted, self.processes.reconcile())

    def run(self, body: Callable[[dict[str, str]], int]) -> RunEnd:
        """The run from start to end: :meth:`start`, then ``body(ended)`` (the exit code; it may set ``ended``'s
        ``"outcome"`` and ``"detail"``), then :meth:`end` with the outcome whatever happened. :class:`Terminated`
        ends it ``interrupted`` with code ``128 + signum``, Ctrl-C ``interrupted`` with 130; any other exception
        ends it ``error`` (code 1) and propagates."""
        code = 0
        signum = None
        self.start()  # the lease taken over: no further request or tool call, processes stopped
        ended: dict[str, str] = {"outcome": "done", "detail": ""}
        try:
            code = body(ended)
        except Terminated as exc:
            ended.update(outcome="interrupted", detail=f"terminated by {signal.Signals(exc.signum).name}")
            code, signum = 128 + exc.signum, exc.signum
        except KeyboardInterrupt:
            code = 130
            ended.update(outcome="interrupted", detail="keyboard interrupt")
        except Exception as exc:  # an unexpected failure still ends the run durably, then propagates
            code = 1
            ended.update(outcome="error", detail=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.end(ended["outcome"], code, ended["detail"])  # processes first, then run_ended releases the lease
        return RunEnd(code, signum)

    def work(
        self,
        agent: str,
        *,
        on_task: Callable[[GroupTask], None],
        on_done: Callable[[TaskRun], None],
    ) -> list[TaskRun]:
        """``latch run --group NAME --worker``: :func:`latch.agent.worker.run_worker` as member ``agent`` of the
        group rooted in this session, under :attr:`lease_seconds`, until nothing is claimable (with ``--wait``: until
        every task is done); then :meth:`close` (also when it raises: :class:`Terminated`,
        :class:`~latch.agent.supervisor.ChildPolicyError`)."""
        try:
            return run_worker(
                Group(self.store, self.session_id),
                agent,
                self.loop,
                lease_seconds=self.lease_seconds,
                on_task=on_task,
                on_done=on_done,
                wait=self.options.wait,
            )
        finally:
            self.close()

    @property
    def lease_seconds(self) -> float:
        """A worker's task lease in seconds: ``--lease-seconds``, else the default."""
        return self.options.lease_seconds or DEFAULT_LEASE_SECONDS


def check_options(o: RunOptions) -> None:
    """The options that contradict each other, before anything is read: :class:`SessionError`."""
    if o.worker and o.group_name is None:
        raise SessionError("--worker needs --group NAME")
    if o.worker and (o.task is not None or o.resume is not None):
        raise SessionError("--worker takes no TASK and no --resume (it runs the group's tasks)")
    if o.lease_seconds is not None and not o.worker:
        raise SessionError("--lease applies to --worker only")
    if o.wait and not o.worker:
        raise SessionError("--wait applies to --worker only")
    if o.group_name is not None and not o.worker and (o.task is None or o.resume is not None):
        raise SessionError("--group NAME without --worker starts a group's lead: give a TASK (no --resume)")
    if o.group_name is not None and not o.group_name.strip():
        raise SessionError("--group: the name is empty")
    if o.window is not None and o.reserve is not None and o.reserve >= o.window:
        raise SessionError(f"--reserve ({o.reserve}) must be below --window ({o.window})")
    if o.task is not None and not o.task.strip():
        raise SessionError("TASK is empty")
    if o.once and o.task is None and o.resume is None:
        raise SessionError("--once needs a TASK (or --resume SESSION)")


def _chosen_tools(o: RunOptions) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """``(every built-in tool by name, the ones --tools offers, in the fixed order)``; checks ``--tool-choice``."""
    known = {t.NAME: t for t in agent_tools()}
    chosen = tuple(known.values())
    if o.tool_names is not None:
        wanted = [n.strip() for n in o.tool_names.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in known]
        if unknown or not wanted:
            raise SessionError(
                f"--tools: unknown tool {unknown[0]!r} (known: {', '.join(known)})"
                if unknown
                else "--tools: give at least one tool name"
            )
        chosen = tuple(t for t in known.values() if t.NAME in wanted)  # the fixed order, always
    if o.tool_choice is not None and o.tool_choice not in ("auto", "required", "none"):
        if o.tool_choice not in {t.NAME for t in chosen}:
            raise SessionError(
                f"--tool-choice {o.tool_choice!r}: not auto, required, none or an offered tool "
                f"({', '.join(t.NAME for t in chosen)})"
            )
    return known, chosen


@dataclass
class _Resumed:
    session_id: str
    workspace: Path
    profile: dict[str, Any]
    waiting: bool
    lead: bool


def _resume(o: RunOptions, store: EventLog, prompt: bool) -> _Resumed:
    """The session ``--resume`` (or a worker's group) names, checked: it exists, is not forgotten, was started by
    ``latch run`` and has a task; a pipe's resume refuses a session waiting for the user."""
    resume = o.resume
    if o.worker:
        try:
            resume = resolve_group(store, cast(str, o.group_name))  # a worker names its group (checked)
        except KeyError as exc:
            raise SessionError(str(exc.args[0]), usage=False) from None
    assert resume is not None  # called for a resume or a worker
    try:
        info = store.session(resume)
    except KeyError as exc:
        raise SessionError(str(exc.args[0]), usage=False) from None
    if info.id in tombstoned_sessions(store):
        raise SessionError(f"session {info.id} was forgotten (latch forget); it cannot be resumed", usage=False)
    profile = dict((info.meta or {}).get("agent") or {})
    if not profile and not o.worker:
        raise SessionError(f"session {info.id} was imported, not run by latch run; it cannot be resumed", usage=False)
    if not o.worker and not any(True for _ in store.events(info.id, kinds=["user_message"])):
        raise SessionError(f"session {info.id} has no task (it never started); start a new run", usage=False)
    # a group's lead may have its workers' messages to read: its resume sends them
    waiting = not o.worker and not (info.meta or {}).get("group") and awaiting_user(store, info.id)
    if o.task is None and not prompt and waiting:  # nothing to send: a resent answer is a wasted request
        raise SessionError(
            f"session {info.id} waits for the user (the agent's last answer is complete): give a "
            "TASK, or resume on a terminal for the prompt"
        )
    return _Resumed(
        info.id,
        Path(info.workspace or os.getcwd()),
        profile,
        waiting,
        not o.worker and bool((info.meta or {}).get("group")),
    )  # a group's lead stays its lead


def _with_profile(o: RunOptions, profile: Mapping[str, Any], section: Mapping[str, Any]) -> RunOptions:
    """``o`` with each option left unset taken from the session's ``profile``, then the ``[provider]``
    ``section`` (flags win; a resumed session keeps its budget and sandbox choice unless a flag changes them)."""
    return replace(
        o,
        provider_name=o.provider_name or profile.get("provider") or section.get("name"),
        model=o.model or profile.get("model") or section.get("model"),
        base_url=o.base_url or profile.get("base_url") or section.get("base_url"),
        api_key_env=o.api_key_env or profile.get("api_key_env") or section.get("api_key_env"),
        mode=o.mode or profile.get("mode") or "default",
        engine=o.engine or profile.get("engine"),
        child_engine=o.child_engine or profile.get("child_engine"),
        estimator=o.estimator or profile.get("estimator"),
        window=o.window or profile.get("window"),
        reserve=o.reserve if o.reserve is not None else profile.get("reserve"),
        recent=o.recent or profile.get("recent"),
        tool_choice=o.tool_choice or profile.get("tool_choice"),
        no_stream=o.no_stream or bool(profile.get("no_stream")),
        sandbox_mode=o.sandbox_mode or profile.get("sandbox"),
        network=o.network or bool(profile.get("network")),
        max_turns=o.max_turns or section.get("max_turns") or DEFAULT_MAX_TURNS,
    )


def _provider(o: RunOptions, section: Mapping[str, Any]) -> Any:
    """The provider plugin ``o`` names, set up (model, base URL, key variable, response limits, streaming)."""
    name, model = o.provider_name, o.model
    if not name:
        raise SessionError(
            "no provider: pass --provider openai|openai-responses|anthropic|openai-compatible "
            "(or set [provider] name in the config)"
        )
    if not model:
        raise SessionError("no model: pass --model (or set [provider] model in the config)")
    try:
        provider_cls: Any = plugins.get_provider(name)  # a provider class: classmethod from_options
    except plugins.PluginError as exc:
        raise SessionError(str(exc)) from None
    try:
        provider = provider_cls.from_options(model, base_url=o.base_url, api_key_env=o.api_key_env)
    except ProviderError as exc:
        raise SessionError(str(exc), usage=False) from None
    limits = getattr(provider, "limits", None)  # the SDK providers' deadline and idle timeout
    for key, flag, value in (
        ("response_timeout", "--response-timeout", o.response_timeout),
        ("idle_timeout", "--idle-timeout", o.idle_timeout),
    ):
        value = value if value is not None else section.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise SessionError(f"[provider] {key}: must be a positive number of seconds, got {value!r}")
        if limits is None:
            raise SessionError(f"{flag}: provider {name} does not take response limits")
        setattr(limits, "deadline_seconds" if key == "response_timeout" else "idle_seconds", float(value))
    if o.no_stream:
        if not hasattr(provider, "stream"):
            raise SessionError(f"--no-stream: provider {name} always streams")
        provider.stream = False
    return provider


def _check_choices(
    o: RunOptions, config: Mapping[str, Any], workspace: Path, store_files: Callable[[], Sequence[Path]]
) -> tuple[Sandbox, str | None]:
    """The engine, child engine and estimator plugins exist, the sandbox can run and the planned budget leaves
    the window above the reserve; returns ``(sandbox, its warning or None)``."""
    try:
        plugins.get_engine_factory(plugins.engine_name(o.engine, config))
        if o.child_engine:
            plugins.get_engine_factory(o.child_engine)
        if o.estimator:
            plugins.get_estimator(o.estimator)
    except plugins.PluginError as exc:
        raise SessionError(str(exc)) from None
    if o.network and o.sandbox_mode == "off":
        raise SessionError("--network applies to a sandbox; with --sandbox off commands use the network")
    try:
        sandbox, warning = choose_sandbox(o.sandbox_mode, workspace, network=o.network, protected=store_files())
    except SandboxError as exc:
        raise SessionError(str(exc)) from None
    planned = budget_for_model(config, o.model)
    window = o.window if o.window is not None else planned.context_window_tokens
    reserve = o.reserve if o.reserve is not None else planned.reserve_tokens
    if reserve >= window:
        raise SessionError(
            f"the reserve ({reserve:,}) must be below the window ({window:,}); pass --window or --reserve"
        )
    return sandbox, warning


def _create(o: RunOptions, store: EventLog, chosen: Sequence[Any]) -> tuple[str, Path]:
    """A new session in the current workspace, its profile in its metadata (a group's lead: the group's name)."""
    if o.group_name is not None:
        try:
            resolve_group(store, o.group_name, by_id=False)
        except KeyError:
            pass
        else:
            raise SessionError(
                f"--group: a group named {o.group_name!r} exists already; join it with --worker or pick another name"
            )
    workspace = Path(os.getcwd()).resolve()
    profile = {
        "provider": o.provider_name,
        "model": o.model,
        "base_url": o.base_url,
        "api_key_env": o.api_key_env,
        "mode": o.mode,
        "engine": o.engine,
        "child_engine": o.child_engine,
        "estimator": o.estimator,
        "tools": [t.NAME for t in chosen] if o.tool_names is not None else None,
        "window": o.window,
        "reserve": o.reserve,
        "recent": o.recent,
        "tool_choice": o.tool_choice,
        "no_stream": o.no_stream or None,
        "sandbox": o.sandbox_mode,
        "network": o.network or None,
    }
    meta: dict[str, Any] = {"agent": {k: v for k, v in profile.items() if v is not None}}
    if o.group_name is not None:
        meta["group"] = o.group_name
    session_id = store.create_session(workspace=str(workspace), source="latch run", format="latch", meta=meta)
    return session_id, workspace


def _budget(o: RunOptions, setup: EngineSetup) -> ContextBudget:
    """The engine's default budget with ``--window``, ``--reserve`` and ``--recent`` applied."""
    budget: ContextBudget = setup.engine.default_budget()
    overrides = {
        k: v
        for k, v in (("context_window_tokens", o.window), ("reserve_tokens", o.reserve), ("recent_tokens", o.recent))
        if v is not None
    }
    merged = {
        "context_window_tokens": budget.context_window_tokens,
        "reserve_tokens": budget.reserve_tokens,
        **overrides,
    }
    if merged["reserve_tokens"] >= merged["context_window_tokens"]:
        raise SessionError(
            f"the reserve ({merged['reserve_tokens']:,}) must be below the window "
            f"({merged['context_window_tokens']:,}); pass --window or --reserve"
        )
    return replace(budget, **overrides)


def open_session(
    o: RunOptions,
    config: Mapping[str, Any],
    *,
    open_store: Callable[..., EventLog],
    on_terminal: bool,
    store_files: Callable[[], Sequence[Path]],
    warn: Callable[[str], None],
    defer: Callable[[Callable[[], Any]], Any],
    observer: Callable[[str, str, EngineSetup], Observer],
    approve: Callable[[Path], Any],
    arm: Callable[[], None] = lambda: None,
) -> AgentSession:
    """Build the session ``o`` asks for (see the module docstring; call :func:`check_options` first).

    ``open_store(create=...)`` opens the workspace's store (not created for a resume or a worker);
    ``on_terminal``: stdin and stdout are a terminal (the interactive prompt stays open unless ``o.once`` or
    ``o.worker``); ``store_files()`` the store's files a sandbox keeps read-only; ``warn(line)`` is told each
    warning (skills, sandbox, MCP) as it comes; ``defer(release)`` is given the run lease's release, to call when the
    run's command ends (a run that fails before it starts); ``observer(provider name, model, setup)`` and
    ``approve(workspace)`` make the loop's :class:`~latch.agent.observer.Observer` and its approval callback (or
    ``None``); ``arm()`` is called once the engine is built, before any process or MCP server starts (a front end
    installs its signal handlers there). Raises :class:`SessionError`; a rejected new run stores nothing."""
    prompt = on_terminal and not o.once and not o.worker  # the interactive prompt stays open after a task
    known, chosen = _chosen_tools(o)
    section = config.get("provider", {}) or {}
    # a new run opens the store once checked
    store = open_store(create=False) if o.resume is not None or o.worker else None
    resumed = _resume(o, store, prompt) if store is not None else None
    profile = resumed.profile if resumed is not None else {}
    if o.tool_names is None and profile.get("tools"):  # a resumed session keeps its tools, byte for byte
        chosen = tuple(t for t in known.values() if t.NAME in profile["tools"])
    o = _with_profile(o, profile, section)
    provider = _provider(o, section)
    if o.task is None and resumed is None and not on_terminal:
        raise SessionError("no TASK: give one, or run on a terminal for the interactive prompt")
    # every choice is checked before a new session is stored (a rejected run leaves nothing behind)
    sandbox, sandbox_warning = _check_choices(
        o, config, resumed.workspace if resumed is not None else Path(os.getcwd()), store_files
    )
    if store is None or resumed is None:  # a new session (a resume has both)
        store = open_store()
        session_id, workspace = _create(o, store, chosen)
    else:
        session_id, workspace = resumed.session_id, resumed.workspace
    record = RunRecord(store, session_id)
    if not o.worker:  # one live run per session: the lease comes before anything this run appends
        try:
            record.acquire()
        except RunLeaseHeld as exc:
            raise SessionError(str(exc)) from None
        defer(record.release)  # a run that fails before it starts
        store = store.fenced(record.fence)  # every write of this run: refused once another run took over

    # the session's skills and MCP tools are fixed when it starts (stored events; resume reads them back)
    skills, warnings = session_skills(store, session_id, lambda: discover_skills(workspace))
    ctx_obj, more = session_context(workspace, cast(str, o.mode), skills)  # _with_profile set it
    warnings += more
    if sandbox_warning:
        warnings.append(sandbox_warning)
    for w in warnings:
        warn(w)
    try:
        setup = build_engine(
            store,
            session_id,
            stream=lambda n: f"{n}:main",
            engine=o.engine,
            model=o.model,
            estimator=o.estimator,
            config=config,
        )
    except HostError as exc:
        raise SessionError(str(exc)) from None
    budget = _budget(o, setup)
    try:  # the root engine is the one build_engine made; children go through the child policy
        supervisor = Supervisor(
            plugins.get_engine_factory(setup.engine_name),
            plugins.get_engine_factory(o.child_engine) if o.child_engine else None,
        )
    except plugins.PluginError as exc:
        raise SessionError(str(exc)) from None
    key_names = [o.api_key_env] if o.api_key_env else []  # a custom key variable is a secret whatever its name
    arm()
    remove_stale_log_dirs()  # what runs killed before they could clean up left in the temporary folder
    processes = ProcessManager(store, session_id, workspace, env=tool_environment(also=key_names), sandbox=sandbox)
    servers = mcp_servers(config)
    hub = McpHub(servers, cwd=workspace, log_dir=processes.log_dir / "mcp") if servers else None
    try:
        entries, warnings = session_mcp_tools(store, session_id, hub)
    except BaseException:
        if hub is not None:
            hub.close()
        processes.close()
        raise
    for w in warnings:
        warn(w)
    tools = (*chosen, *(skill_tools() if skills else ()), *mcp_tools(entries, hub))
    lead = not o.worker and (o.group_name is not None or (resumed is not None and resumed.lead))
    if lead:
        tools = (*tools, *GROUP_TOOLS)
    tool_ctx = ToolContext(
        workspace=workspace, store=store, session_id=session_id, processes=processes, estimate=setup.counter.text
    )
    assert o.provider_name is not None and o.model is not None
    loop = AgentLoop(
        store,
        session_id,
        provider,
        setup=setup,
        budget=budget,
        tools=tools,
        tool_context=tool_ctx,
        session_context=ctx_obj,
        policy=PermissionPolicy(mode=cast(str, o.mode)),
        approve=approve(workspace),
        assume_yes=o.assume_yes,
        system_prompt=SYSTEM_PROMPT,
        observer=observer(o.provider_name, o.model, setup),
        tool_choice=o.tool_choice,
        max_output_tokens=budget.reserve_tokens,
        supervisor=supervisor,
        group=Group(store, session_id) if lead else None,
        group_agent="lead" if lead else None,
        defer_tools=o.tool_names is None and not profile.get("tools"),
        secret_names=key_names,
    )
    return AgentSession(
        o,
        o.provider_name,
        store,
        session_id,
        workspace,
        record,
        setup,
        budget,
        sandbox,
        processes,
        hub,
        loop,
        resumed=resumed is not None,
        waiting=resumed.waiting if resumed else True,
        profile=profile,
    )
