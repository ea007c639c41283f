"""``latch run``: an agent session in the current workspace, on a real model provider.

``latch run "TASK" --provider openai|openai-responses|anthropic|openai-compatible --model M`` creates a session in the
workspace's store, appends TASK as the first user message and runs :class:`latch.agent.loop.AgentLoop`
until the model answers without a tool call or ``--max-turns`` requests were made. It prints the
assistant's text as it streams, each tool call and a one-line result summary, and a status line per
request (context use, tokens, cache read, and the request's cost in dollars where genai-prices prices the model,
"unpriced" otherwise; :mod:`latch.accounting.pricing`). ``--resume SESSION`` continues a session (a forgotten one
refuses); calls a killed run left without a result are closed as interrupted first. On a terminal (stdin and
stdout) the interactive prompt stays open after TASK (:mod:`latch.cli.run_prompt`: tasks and slash commands,
a summary of tokens and dollars at the end; ``--once`` ends after TASK); ``--resume`` without TASK opens it and
sends nothing by itself. In a pipe a run ends when TASK is answered; there ``--resume`` without TASK continues a
run that stopped mid-turn and refuses (nothing sent) a session whose agent already answered. Request numbers
continue across resumes. Ctrl-C ends the run (exit 130) with the command that continues it.

Each run is recorded durably (:mod:`latch.host.runs`): a ``run_started`` event (run id, pid, host, start time)
before the first request and a ``run_ended`` event with its outcome (``done``, ``max_turns``, ``stopped``,
``error``, ``interrupted``) and exit code at the end, so a UI tells a running run from a killed one. Between
requests (at safe boundaries) the run applies the commands a UI queued in the session (``latch web``: steer,
stop, compact): a steering message is delivered before the next request, ``compact`` rotates the next request,
``stop`` ends the run with exit code 0.

Defaults come from the ``[provider]`` table of the config (``name``, ``model``, ``base_url``,
``api_key_env``, ``max_turns``, ``response_timeout``, ``idle_timeout``); flags win. A model response has a deadline
(``--response-timeout``, 600 s) and an idle timeout (``--idle-timeout``, 120 s without a byte): a stream that
never ends fails the run with one line. SIGTERM and SIGHUP end a run as Ctrl-C does (``run_ended`` with outcome
``interrupted``, its processes stopped, exit code 128 + the signal); a resumed run first reconciles the background
processes a killed run left (:meth:`latch.agent.tools.processes.ProcessManager.reconcile`). The session's profile (provider, model, engine, estimator,
base URL, mode; never a key) is stored in the session's metadata, so ``--resume`` needs no flags.
The session's Agent Skills (listed in its session context; ``load_skill`` / ``read_skill_resource``) and the
tools of the config's ``[mcp.servers.NAME]`` servers (``mcp__NAME__TOOL``) are fixed when it starts and
stored, so a resumed session offers the same ones byte for byte (``latch.agent.skills``, ``latch.agent.mcp``).
API keys are read from the environment only (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` or
``--api-key-env NAME``) and are never written to the store, the output or an error.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from .. import plugins
from ..agent.context import SYSTEM_PROMPT, session_context
from ..agent.environment import tool_environment
from ..agent.group import Group, resolve_group
from ..agent.interrupted import repair_interrupted
from ..agent.loop import AgentLoop
from ..agent.mcp import McpHub, mcp_servers, mcp_tools, session_mcp_tools
from ..agent.permissions import PermissionPolicy
from ..agent.sandbox import MODES as SANDBOX_MODES
from ..agent.sandbox import SandboxError
from ..agent.sandbox import choose as choose_sandbox
from ..agent.skills import discover_skills, session_skills, skill_tools
from ..agent.steering import awaiting_user
from ..agent.supervisor import ChildPolicyError, Supervisor
from ..agent.tools import ToolContext, agent_tools
from ..agent.tools.group import GROUP_TOOLS
from ..agent.tools.processes import ProcessManager, remove_stale_log_dirs
from ..agent.worker import run_worker
from ..config import MAX_TOKENS, budget_for_model
from ..host.loop import HostError, build_engine
from ..host.runs import RunLeaseHeld, RunRecord
from ..kernel.tombstones import tombstoned_sessions
from ..providers import ProviderError
from ..textsafe import console, error, markup, warn
from .main import pass_app
from .run_console import Approver, RunInfo, RunPrinter, call_line, fit_parts, result_summary
from .run_prompt import exit_summary, prompt_loop, run_task

__all__ = ["register"]

DEFAULT_MAX_TURNS = 50
DEFAULT_RESPONSE_TIMEOUT = 600.0  # latch.providers._sdk.DEFAULT_RESPONSE_TIMEOUT (not imported at CLI start)
DEFAULT_IDLE_TIMEOUT = 120.0  # latch.providers._sdk.DEFAULT_IDLE_TIMEOUT
DEFAULT_LEASE_SECONDS = 300.0  # latch.agent.worker.DEFAULT_LEASE_SECONDS (not imported at CLI start)


def register(cli: click.Group) -> None:
    @cli.command("run")
    @click.argument("task", required=False)
    @click.option("--provider", "provider_name", default=None,
                  help="Provider plugin: openai, openai-responses, anthropic, openai-compatible (default: [provider] name).")
    @click.option("--model", default=None, help="Model id (default: [provider] model).")
    @click.option("--base-url", default=None, help="Provider base URL (openai-compatible servers: llama.cpp, "
                                                   "Ollama, vLLM, LM Studio).")
    @click.option("--api-key-env", default=None, metavar="NAME",
                  help="Environment variable holding the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY).")
    @click.option("--max-turns", type=click.IntRange(1, 10_000), default=None,
                  help=f"Most model requests of this run (default: [provider] max_turns, else {DEFAULT_MAX_TURNS}).")
    @click.option("--once", is_flag=True, help="End when TASK is answered, even on a terminal (where the prompt "
                                               "stays open otherwise).")
    @click.option("--yes", "assume_yes", is_flag=True, help="Allow calls that ask for approval (hard denies still "
                                                            "refuse).")
    @click.option("--mode", type=click.Choice(["default", "accept_edits", "bypass", "read_only"]), default=None,
                  help="Permission mode (default: default).")
    @click.option("--resume", "resume", default=None, metavar="SESSION", help="Continue SESSION (id or prefix).")
    @click.option("--engine", "engine", default=None, help="Context engine plugin (default: [engine] name, "
                                                            "else continuity).")
    @click.option("--child-engine", "child_engine", default=None,
                  help="Engine plugin for child agents (spawn_agent); required when --engine is not the default.")
    @click.option("--estimator", "estimator", default=None, help="Estimator plugin by name.")
    @click.option("--window", type=click.IntRange(min=1, max=MAX_TOKENS), default=None,
                  help="context_window_tokens override.")
    @click.option("--reserve", type=click.IntRange(min=0, max=MAX_TOKENS), default=None,
                  help="reserve_tokens override (the model's output cap).")
    @click.option("--recent", type=click.IntRange(min=1, max=MAX_TOKENS), default=None,
                  help="recent_tokens override.")
    @click.option("--tool-choice", default=None, metavar="auto|required|TOOL",
                  help="Ask the provider to force tool calls (required, or one TOOL by name) or leave it to the "
                       "model (auto).")
    @click.option("--no-stream", "no_stream", is_flag=True,
                  help="Ask for whole answers instead of a stream (llama.cpp's server reports token usage only "
                       "then).")
    @click.option("--tools", "tool_names", default=None, metavar="NAME,...",
                  help="Offer only these built-in tools (comma-separated; default: all).")
    @click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                  help="Config TOML (default: $LATCH_HOME/config.toml or the user config folder).")
    @click.option("--group", "group_name", default=None, metavar="NAME",
                  help="With TASK: start the lead of a new agent group NAME (it gets create_task, claim_task, "
                       "complete_task, send_message). With --worker: the group to work for (its name or root "
                       "session id).")
    @click.option("--worker", is_flag=True, help="Join --group as a worker: claim ready tasks one at a time, run "
                                                 "each as a child agent, exit when nothing is claimable.")
    @click.option("--lease", "lease_seconds", type=click.FloatRange(min=0, min_open=True), default=None,
                  help=f"Seconds a worker's claim outlives its last heartbeat before another worker may reclaim "
                       f"it (default {DEFAULT_LEASE_SECONDS:g}).")
    @click.option("--sandbox", "sandbox_mode", type=click.Choice(SANDBOX_MODES), default=None,
                  help="Where shell commands run: workspace-write (a bubblewrap sandbox: read-only system, writable "
                       "workspace and private /tmp, no network), read-only (only /tmp writable) or off (default: "
                       "workspace-write where bubblewrap works, else off with a warning).")
    @click.option("--network", is_flag=True, help="Let sandboxed shell commands use the network.")
    @click.option("--response-timeout", "response_timeout", type=click.FloatRange(min=0, min_open=True),
                  default=None, metavar="SECONDS",
                  help=f"Deadline of one model response, retries and stream included (default: [provider] "
                       f"response_timeout, else {DEFAULT_RESPONSE_TIMEOUT:g}).")
    @click.option("--idle-timeout", "idle_timeout", type=click.FloatRange(min=0, min_open=True), default=None,
                  metavar="SECONDS",
                  help=f"Seconds a model response may send nothing before it fails (default: [provider] "
                       f"idle_timeout, else {DEFAULT_IDLE_TIMEOUT:g}).")
    @pass_app
    def run_cmd(app, task, provider_name, model, base_url, api_key_env, max_turns, assume_yes, mode, resume,
                engine, child_engine, estimator, window, reserve, recent, tool_choice, no_stream, tool_names,
                config_path, group_name, worker, lease_seconds, sandbox_mode, network, response_timeout,
                idle_timeout, once):
        """Run an agent on TASK in the current workspace (or continue one with --resume, or work for an agent
        group with --group NAME --worker)."""
        if worker and group_name is None:
            raise click.UsageError("--worker needs --group NAME")
        if worker and (task is not None or resume is not None):
            raise click.UsageError("--worker takes no TASK and no --resume (it runs the group's tasks)")
        if lease_seconds is not None and not worker:
            raise click.UsageError("--lease applies to --worker only")
        if group_name is not None and not worker and (task is None or resume is not None):
            raise click.UsageError("--group NAME without --worker starts a group's lead: give a TASK (no --resume)")
        if group_name is not None and not group_name.strip():
            raise click.UsageError("--group: the name is empty")
        if window is not None and reserve is not None and reserve >= window:
            raise click.UsageError(f"--reserve ({reserve}) must be below --window ({window})")
        if task is not None and not task.strip():
            raise click.UsageError("TASK is empty")
        if once and task is None and resume is None:
            raise click.UsageError("--once needs a TASK (or --resume SESSION)")
        on_terminal = sys.stdin.isatty() and sys.stdout.isatty()
        prompt = on_terminal and not once and not worker  # the interactive prompt stays open after a task
        config = app.config(config_path)

        known = {t.NAME: t for t in agent_tools()}
        chosen_tools = tuple(known.values())
        if tool_names is not None:
            wanted = [n.strip() for n in tool_names.split(",") if n.strip()]
            unknown = [n for n in wanted if n not in known]
            if unknown or not wanted:
                raise click.UsageError(f"--tools: unknown tool {unknown[0]!r} (known: {', '.join(known)})" if unknown
                                       else "--tools: give at least one tool name")
            chosen_tools = tuple(t for t in known.values() if t.NAME in wanted)  # the fixed order, always
        if tool_choice is not None and tool_choice not in ("auto", "required", "none"):
            if tool_choice not in {t.NAME for t in chosen_tools}:
                raise click.UsageError(f"--tool-choice {tool_choice!r}: not auto, required, none or an offered tool "
                                       f"({', '.join(t.NAME for t in chosen_tools)})")
        section = config.get("provider", {}) or {}

        store = app.store(create=False) if resume is not None or worker else None  # a new run opens it once checked
        profile: dict[str, Any] = {}
        resumed_lead = False
        waiting = True  # the conversation waits for the user (a resumed one: its last answer is complete)
        if worker:
            assert store is not None
            try:
                resume = resolve_group(store, group_name)
            except KeyError as exc:
                raise click.ClickException(str(exc.args[0])) from None
        if resume is not None:
            assert store is not None
            try:
                info = store.session(resume)
            except KeyError as exc:
                raise click.ClickException(str(exc.args[0])) from None
            if info.id in tombstoned_sessions(store):
                raise click.ClickException(f"session {info.id} was forgotten (latch forget); it cannot be resumed")
            profile = dict((info.meta or {}).get("agent") or {})
            if not profile and not worker:
                raise click.ClickException(f"session {info.id} was imported, not run by latch run; it cannot be "
                                           "resumed")
            if not worker and not any(True for _ in store.events(info.id, kinds=["user_message"])):
                raise click.ClickException(f"session {info.id} has no task (it never started); start a new run")
            session_id, workspace = info.id, Path(info.workspace or os.getcwd())
            # a group's lead may have its workers' messages to read: its resume sends them
            waiting = not worker and not (info.meta or {}).get("group") and awaiting_user(store, info.id)
            if task is None and not prompt and waiting:  # nothing to send: a resent answer is a wasted request
                raise click.UsageError(f"session {info.id} waits for the user (the agent's last answer is complete): "
                                       "give a TASK, or resume on a terminal for the prompt")
            resumed_lead = not worker and bool((info.meta or {}).get("group"))  # a group's lead stays its lead
        if tool_names is None and profile.get("tools"):  # a resumed session keeps its tools, byte for byte
            chosen_tools = tuple(t for t in known.values() if t.NAME in profile["tools"])
        name = provider_name or profile.get("provider") or section.get("name")
        model = model or profile.get("model") or section.get("model")
        base_url = base_url or profile.get("base_url") or section.get("base_url")
        api_key_env = api_key_env or profile.get("api_key_env") or section.get("api_key_env")
        mode = mode or profile.get("mode") or "default"
        engine = engine or profile.get("engine")
        child_engine = child_engine or profile.get("child_engine")
        estimator = estimator or profile.get("estimator")
        window = window or profile.get("window")  # a resumed session keeps its budget unless a flag changes it
        reserve = reserve if reserve is not None else profile.get("reserve")
        recent = recent or profile.get("recent")
        tool_choice = tool_choice or profile.get("tool_choice")
        no_stream = no_stream or bool(profile.get("no_stream"))
        sandbox_mode = sandbox_mode or profile.get("sandbox")  # a resumed session keeps an explicit choice
        network = network or bool(profile.get("network"))
        max_turns = max_turns or section.get("max_turns") or DEFAULT_MAX_TURNS
        if not name:
            raise click.UsageError("no provider: pass --provider openai|openai-responses|anthropic|openai-compatible "
                                   "(or set [provider] name in the config)")
        if not model:
            raise click.UsageError("no model: pass --model (or set [provider] model in the config)")
        try:
            provider_cls = plugins.get_provider(name)
        except plugins.PluginError as exc:
            raise click.UsageError(str(exc)) from None
        try:
            provider = provider_cls.from_options(model, base_url=base_url, api_key_env=api_key_env)
        except ProviderError as exc:
            raise click.ClickException(str(exc)) from None
        limits = getattr(provider, "limits", None)  # the SDK providers' deadline and idle timeout
        for key, flag, value in (("response_timeout", "--response-timeout", response_timeout),
                                 ("idle_timeout", "--idle-timeout", idle_timeout)):
            value = value if value is not None else section.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise click.UsageError(f"[provider] {key}: must be a positive number of seconds, got {value!r}")
            if limits is None:
                raise click.UsageError(f"{flag}: provider {name} does not take response limits")
            setattr(limits, "deadline_seconds" if key == "response_timeout" else "idle_seconds", float(value))
        if no_stream:
            if not hasattr(provider, "stream"):
                raise click.UsageError(f"--no-stream: provider {name} always streams")
            provider.stream = False
        if task is None and resume is None and not on_terminal:
            raise click.UsageError("no TASK: give one, or run on a terminal for the interactive prompt")
        try:  # every choice is checked before a new session is stored (a rejected run leaves nothing behind)
            plugins.get_engine_factory(plugins.engine_name(engine, config))
            if child_engine:
                plugins.get_engine_factory(child_engine)
            if estimator:
                plugins.get_estimator(estimator)
        except plugins.PluginError as exc:
            raise click.UsageError(str(exc)) from None
        if network and sandbox_mode == "off":
            raise click.UsageError("--network applies to a sandbox; with --sandbox off commands use the network")
        try:
            sandbox, sandbox_warning = choose_sandbox(
                sandbox_mode, workspace if resume is not None else Path(os.getcwd()), network=network,
                protected=_store_files(app))
        except SandboxError as exc:
            raise click.UsageError(str(exc)) from None

        planned = budget_for_model(config, model)
        planned_window = window if window is not None else planned.context_window_tokens
        planned_reserve = reserve if reserve is not None else planned.reserve_tokens
        if planned_reserve >= planned_window:
            raise click.UsageError(f"the reserve ({planned_reserve:,}) must be below the window "
                                   f"({planned_window:,}); pass --window or --reserve")
        if resume is None:
            store = app.store()
            if group_name is not None:
                try:
                    resolve_group(store, group_name, by_id=False)
                except KeyError:
                    pass
                else:
                    raise click.UsageError(f"--group: a group named {group_name!r} exists already; join it with "
                                           "--worker or pick another name")
            workspace = Path(os.getcwd()).resolve()
            profile = {"provider": name, "model": model, "base_url": base_url, "api_key_env": api_key_env,
                       "mode": mode, "engine": engine, "child_engine": child_engine, "estimator": estimator,
                       "tools": [t.NAME for t in chosen_tools] if tool_names is not None else None,
                       "window": window, "reserve": reserve, "recent": recent, "tool_choice": tool_choice,
                       "no_stream": no_stream or None, "sandbox": sandbox_mode, "network": network or None}
            meta: dict[str, Any] = {"agent": {k: v for k, v in profile.items() if v is not None}}
            if group_name is not None:
                meta["group"] = group_name
            session_id = store.create_session(workspace=str(workspace), source="latch run", format="latch",
                                              meta=meta)
        record = RunRecord(store, session_id)
        if not worker:  # one live run per session: the lease comes before anything this run appends
            try:
                record.acquire()
            except RunLeaseHeld as exc:
                raise click.UsageError(str(exc)) from None
            click.get_current_context().call_on_close(record.release)  # a run that fails before it starts
            store = store.fenced(record.fence)  # every write of this run: refused once another run took over
        con = console(highlight=False)

        # the session's skills and MCP tools are fixed when it starts (stored events; resume reads them back)
        skills, warnings = session_skills(store, session_id, lambda: discover_skills(workspace))
        ctx_obj, more = session_context(workspace, mode, skills)
        warnings += more
        if sandbox_warning:
            warnings.append(sandbox_warning)
        for w in warnings:
            warn(w)
        try:
            setup = build_engine(store, session_id, stream=lambda n: f"{n}:main", engine=engine, model=model,
                                 estimator=estimator, config=config)
        except HostError as exc:
            raise click.UsageError(str(exc)) from None
        budget = setup.engine.default_budget()
        overrides = {k: v for k, v in (("context_window_tokens", window), ("reserve_tokens", reserve),
                                        ("recent_tokens", recent)) if v is not None}
        merged = {"context_window_tokens": budget.context_window_tokens, "reserve_tokens": budget.reserve_tokens,
                  **overrides}
        if merged["reserve_tokens"] >= merged["context_window_tokens"]:
            raise click.UsageError(f"the reserve ({merged['reserve_tokens']:,}) must be below the window "
                                   f"({merged['context_window_tokens']:,}); pass --window or --reserve")
        budget = replace(budget, **overrides)

        try:  # the root engine is the one build_engine made; children go through the child policy
            supervisor = Supervisor(plugins.get_engine_factory(setup.engine_name),
                                    plugins.get_engine_factory(child_engine) if child_engine else None)
        except plugins.PluginError as exc:
            raise click.UsageError(str(exc)) from None
        key_names = [api_key_env] if api_key_env else []  # a custom key variable is a secret whatever its name
        _end_on_signals()  # SIGTERM and SIGHUP end the run like Ctrl-C: recorded, processes stopped
        remove_stale_log_dirs()  # what runs killed before they could clean up left in the temporary folder
        processes = ProcessManager(store, session_id, workspace, env=tool_environment(also=key_names),
                                   sandbox=sandbox)
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
        tools = (*chosen_tools, *(skill_tools() if skills else ()), *mcp_tools(entries, hub))
        lead = not worker and (group_name is not None or resumed_lead)
        if lead:
            tools = (*tools, *GROUP_TOOLS)
        tool_ctx = ToolContext(workspace=workspace, store=store, session_id=session_id, processes=processes,
                               estimate=setup.counter.text)
        approver = Approver(con, workspace) if on_terminal else None
        printer = RunPrinter(con, model, name, setup.counter.exact)
        loop = AgentLoop(store, session_id, provider, setup=setup, budget=budget, tools=tools, tool_context=tool_ctx,
                         session_context=ctx_obj, policy=PermissionPolicy(mode=mode), approve=approver,
                         assume_yes=assume_yes, system_prompt=SYSTEM_PROMPT,
                         observer=printer,
                         tool_choice=tool_choice, max_output_tokens=budget.reserve_tokens, supervisor=supervisor,
                         group=Group(store, session_id) if lead else None, group_agent="lead" if lead else None,
                         defer_tools=tool_names is None and not profile.get("tools"), secret_names=key_names)
        if worker:
            try:
                code = _work(con, loop, store, session_id, lease_seconds or DEFAULT_LEASE_SECONDS)
            except _Terminated as exc:
                code = _terminated(exc, session_id)
            finally:
                if hub is not None:
                    hub.close()
                processes.close()
            sys.exit(code)
        if resume is not None:
            for res in loop.resume_children():  # children a killed run left mid-way: rebuilt, finished
                con.print(f"[yellow]resumed child agent: {markup(result_summary(res.content, res.is_error))}[/yellow]",
                          highlight=False)
            for call in repair_interrupted(store, session_id):
                con.print(f"[yellow]interrupted: {markup(call_line(call))} (no result was recorded)[/yellow]")
            for gone in processes.reconcile():  # background processes whose watcher died with the last run
                what = "killed" if gone.running else "already ended"
                con.print(f"[yellow]background process {gone.process_id} of the last run: {what}, exit code "
                          f"unknown: {markup(' '.join(gone.command.split())[:100])}[/yellow]", highlight=False)
        header = fit_parts([(f"session {session_id}", 9), (f"{name} {model}", 8), (f"engine {setup.engine_name}", 5),
                            (f"window {budget.context_window_tokens:,}", 6), (f"reserve {budget.reserve_tokens:,}", 4),
                            (sandbox.describe(), 7, sandbox.describe().split(" (")[0])],
                           con.width)
        con.print(f"[dim]{markup(header)}[/dim]", highlight=False)
        code = 0
        loop.guard = record.guard  # the lease taken over: no further request or tool call, processes stopped
        record.guard.on_lost(processes.close)
        loop.run_id = record.start().run_id
        loop.turns = sum(1 for _ in store.events(session_id, kinds=["assistant_message"]))  # numbers continue
        ended: dict[str, str] = {"outcome": "done", "detail": ""}
        try:
            if prompt:
                info = RunInfo(name, model, setup.engine_name, budget.context_window_tokens, budget.reserve_tokens,
                               mode, [t.NAME for t in loop.tools], estimator)
                code = prompt_loop(con, loop, max_turns, cli, info, printer, approver, ended, task=task,
                                   resumed=resume is not None, waiting=resume is None or waiting)
            else:
                if task is not None:
                    loop.say(task)
                code = run_task(con, loop, max_turns, ended)
        except _Terminated as exc:
            ended.update(outcome="interrupted", detail=f"terminated by {signal.Signals(exc.signum).name}")
            code = _terminated(exc, session_id)
        except KeyboardInterrupt:
            code = 130
            ended.update(outcome="interrupted", detail="keyboard interrupt")
        except Exception as exc:  # an unexpected failure still ends the run durably, then propagates
            code = 1
            ended.update(outcome="error", detail=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            # the processes first: their exits are the run's writes, recorded before run_ended releases the lease
            processes.close()
            if hub is not None:
                hub.close()
            if not record.ended:
                record.end(ended["outcome"], code, ended["detail"])
        if code == 130:  # Ctrl-C: how to go on, not click's bare "Aborted!"
            con.print()
            if prompt:
                exit_summary(con, printer, session_id)
            warn(f"interrupted (Ctrl-C): the run ended; its processes were stopped (continue with latch run "
                 f"--resume {session_id})")
        sys.exit(code)


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived (``signum``): the run ends as on Ctrl-C (every ``KeyboardInterrupt`` cleanup
    runs), then exits ``128 + signum``."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: Any) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):  # the run is ending: a second signal must not cut the cleanup
        signal.signal(sig, signal.SIG_IGN)
    raise _Terminated(signum)


def _end_on_signals() -> None:
    """SIGTERM and SIGHUP raise :class:`_Terminated` in the main thread (where ``latch run`` runs)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def _terminated(exc: _Terminated, session_id: str) -> int:
    name = signal.Signals(exc.signum).name
    warn(f"{name}: the run ended; its processes were stopped (continue with latch run --resume {session_id})")
    return 128 + exc.signum


def _store_files(app: Any) -> list[Path]:
    """The store's database and its WAL and shared-memory files (kept read-only inside the sandbox when they lie
    in the workspace: a tool command cannot rewrite the session's history)."""
    if getattr(app, "db", None) == ":memory:":
        return []
    db = Path(app.db_path())
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


def _work(con: Any, loop: Any, store: Any, root: str, lease_seconds: float) -> int:
    """The worker of ``latch run --group NAME --worker``: :func:`latch.agent.worker.run_worker` as a fresh
    member (``worker-<pid>-<hex>``), a line per task claimed and done; exit 0 when nothing is claimable."""
    agent = f"worker-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    con.print(f"[dim]worker {agent} joined the group rooted in {root} · lease {lease_seconds:g} s[/dim]",
              highlight=False)

    def claimed(task: Any) -> None:
        how = f"reclaimed (attempt {task.attempt})" if task.attempt else "claimed"
        con.print(f"[cyan]{how} task {markup(task.task_id)}: {markup(task.title)}[/cyan]", highlight=False)

    def done(run: Any) -> None:
        if run.report is None:  # the lease was taken over while the task ran: nothing more was written for it
            con.print(f"[yellow]the lease of task {markup(run.task_id)} was taken over by another worker: stopped, "
                      f"nothing more written for it · child session {run.session_id}[/yellow]", highlight=False)
            return
        what = run.report.status if run.completed else f"{run.report.status}, but another worker owns it now"
        con.print(f"[green]task {markup(run.task_id)}: {markup(what)} · child session {run.session_id}[/green]",
                  highlight=False)

    try:
        runs = run_worker(Group(store, root), agent, loop, lease_seconds=lease_seconds, on_task=claimed, on_done=done)
    except ChildPolicyError as exc:
        error(str(exc))
        return 1
    con.print(f"[dim]nothing claimable: {len(runs)} task{'s' if len(runs) != 1 else ''} run by {agent}[/dim]",
              highlight=False)
    return 0
