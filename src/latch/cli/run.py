"""``latch run``: an agent session in the current workspace, on a real model provider.

``latch run "TASK" --provider openai|openai-responses|anthropic|openai-compatible --model M`` creates a session in the
workspace's store (built by :func:`latch.agent.session.open_session`; a :class:`~latch.agent.session.SessionError`
becomes a one-line usage error), appends TASK as the first user message and runs :class:`latch.agent.loop.AgentLoop`
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

import signal
import sys
from pathlib import Path
from typing import Any

import click

from ..agent.sandbox import MODES as SANDBOX_MODES
from ..agent.session import (
    DEFAULT_MAX_TURNS,
    AgentSession,
    Repairs,
    RunOptions,
    SessionError,
    Terminated,
    check_options,
    end_on_signals,
    open_session,
    worker_name,
)
from ..agent.supervisor import ChildPolicyError
from ..agent.worker import DEFAULT_LEASE_SECONDS
from ..config import MAX_TOKENS
from ..textsafe import console, error, markup, warn
from .main import AppContext, pass_app
from .run_console import Approver, RunInfo, RunPrinter, call_line, fit_parts, result_summary
from .run_prompt import exit_summary, prompt_loop, run_task

__all__ = ["register"]

DEFAULT_RESPONSE_TIMEOUT = 600.0  # latch.providers._sdk.DEFAULT_RESPONSE_TIMEOUT (not imported at CLI start)
DEFAULT_IDLE_TIMEOUT = 120.0  # latch.providers._sdk.DEFAULT_IDLE_TIMEOUT


def register(cli: click.Group) -> None:
    @cli.command("run")
    @click.argument("task", required=False)
    @click.option(
        "--provider",
        "provider_name",
        default=None,
        help="Provider plugin: openai, openai-responses, anthropic, openai-compatible (default: [provider] name).",
    )
    @click.option("--model", default=None, help="Model id (default: [provider] model).")
    @click.option(
        "--base-url",
        default=None,
        help="Provider base URL (openai-compatible servers: llama.cpp, Ollama, vLLM, LM Studio).",
    )
    @click.option(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="Environment variable holding the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY).",
    )
    @click.option(
        "--max-turns",
        type=click.IntRange(1, 10_000),
        default=None,
        help=f"Most model requests of this run (default: [provider] max_turns, else {DEFAULT_MAX_TURNS}).",
    )
    @click.option(
        "--once",
        is_flag=True,
        help="End when TASK is answered, even on a terminal (where the prompt stays open otherwise).",
    )
    @click.option(
        "--yes", "assume_yes", is_flag=True, help="Allow calls that ask for approval (hard denies still refuse)."
    )
    @click.option(
        "--mode",
        type=click.Choice(["default", "accept_edits", "bypass", "read_only"]),
        default=None,
        help="Permission mode (default: default).",
    )
    @click.option("--resume", "resume", default=None, metavar="SESSION", help="Continue SESSION (id or prefix).")
    @click.option(
        "--engine", "engine", default=None, help="Context engine plugin (default: [engine] name, else continuity)."
    )
    @click.option(
        "--child-engine",
        "child_engine",
        default=None,
        help="Engine plugin for child agents (spawn_agent); required when --engine is not the default.",
    )
    @click.option("--estimator", "estimator", default=None, help="Estimator plugin by name.")
    @click.option(
        "--window", type=click.IntRange(min=1, max=MAX_TOKENS), default=None, help="context_window_tokens override."
    )
    @click.option(
        "--reserve",
        type=click.IntRange(min=0, max=MAX_TOKENS),
        default=None,
        help="reserve_tokens override (the model's output cap).",
    )
    @click.option("--recent", type=click.IntRange(min=1, max=MAX_TOKENS), default=None, help="recent_tokens override.")
    @click.option(
        "--tool-choice",
        default=None,
        metavar="auto|required|TOOL",
        help="Ask the provider to force tool calls (required, or one TOOL by name) or leave it to the model (auto).",
    )
    @click.option(
        "--no-stream",
        "no_stream",
        is_flag=True,
        help="Ask for whole answers instead of a stream (llama.cpp's server reports token usage only then).",
    )
    @click.option(
        "--tools",
        "tool_names",
        default=None,
        metavar="NAME,...",
        help="Offer only these built-in tools (comma-separated; default: all).",
    )
    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config TOML (default: $LATCH_HOME/config.toml or the user config folder).",
    )
    @click.option(
        "--group",
        "group_name",
        default=None,
        metavar="NAME",
        help="With TASK: start the lead of a new agent group NAME (it gets create_task, claim_task, "
        "complete_task, send_message). With --worker: the group to work for (its name or root "
        "session id).",
    )
    @click.option(
        "--worker",
        is_flag=True,
        help="Join --group as a worker: claim ready tasks one at a time, run "
        "each as a child agent, exit when nothing is claimable.",
    )
    @click.option(
        "--lease",
        "lease_seconds",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help=f"Seconds a worker's claim outlives its last heartbeat before another worker may reclaim "
        f"it (default {DEFAULT_LEASE_SECONDS:g}).",
    )
    @click.option(
        "--wait",
        is_flag=True,
        help="With --worker: while the group has open tasks but none is claimable, wait for its tasks to "
        "change (LISTEN/NOTIFY on a PostgreSQL store, polling on SQLite) instead of exiting; exit once every "
        "task is done.",
    )
    @click.option(
        "--sandbox",
        "sandbox_mode",
        type=click.Choice(SANDBOX_MODES),
        default=None,
        help="Where shell commands run: workspace-write (a bubblewrap sandbox: read-only system, writable "
        "workspace and private /tmp, no network), read-only (only /tmp writable) or off (default: "
        "workspace-write where bubblewrap works, else off with a warning).",
    )
    @click.option("--network", is_flag=True, help="Let sandboxed shell commands use the network.")
    @click.option(
        "--response-timeout",
        "response_timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help=f"Deadline of one model response, retries and stream included (default: [provider] "
        f"response_timeout, else {DEFAULT_RESPONSE_TIMEOUT:g}).",
    )
    @click.option(
        "--idle-timeout",
        "idle_timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help=f"Seconds a model response may send nothing before it fails (default: [provider] "
        f"idle_timeout, else {DEFAULT_IDLE_TIMEOUT:g}).",
    )
    @pass_app
    def run_cmd(
        app: AppContext,
        task: str | None,
        provider_name: str | None,
        model: str | None,
        base_url: str | None,
        api_key_env: str | None,
        max_turns: int | None,
        assume_yes: bool,
        mode: str | None,
        resume: str | None,
        engine: str | None,
        child_engine: str | None,
        estimator: str | None,
        window: int | None,
        reserve: int | None,
        recent: int | None,
        tool_choice: str | None,
        no_stream: bool,
        tool_names: str | None,
        config_path: str | None,
        group_name: str | None,
        worker: bool,
        lease_seconds: float | None,
        wait: bool,
        sandbox_mode: str | None,
        network: bool,
        response_timeout: float | None,
        idle_timeout: float | None,
        once: bool,
    ) -> None:
        """Run an agent on TASK in the current workspace (or continue one with --resume, or work for an agent
        group with --group NAME --worker)."""
        options = RunOptions(
            task=task,
            provider_name=provider_name,
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            max_turns=max_turns,
            assume_yes=assume_yes,
            mode=mode,
            resume=resume,
            engine=engine,
            child_engine=child_engine,
            estimator=estimator,
            window=window,
            reserve=reserve,
            recent=recent,
            tool_choice=tool_choice,
            no_stream=no_stream,
            tool_names=tool_names,
            group_name=group_name,
            worker=worker,
            lease_seconds=lease_seconds,
            wait=wait,
            sandbox_mode=sandbox_mode,
            network=network,
            response_timeout=response_timeout,
            idle_timeout=idle_timeout,
            once=once,
        )
        on_terminal = sys.stdin.isatty() and sys.stdout.isatty()
        con = console(highlight=False)
        try:
            check_options(options)
            session = open_session(
                options,
                app.config(config_path),
                open_store=app.store,
                on_terminal=on_terminal,
                store_files=lambda: _store_files(app),
                warn=warn,
                defer=click.get_current_context().call_on_close,
                observer=lambda name, model, setup: RunPrinter(con, model, name, setup.counter.exact),
                approve=lambda workspace: Approver(con, workspace) if on_terminal else None,
                arm=end_on_signals,
            )  # SIGTERM and SIGHUP end the run like Ctrl-C: recorded, processes stopped
        except SessionError as exc:
            raise (click.UsageError if exc.usage else click.ClickException)(str(exc)) from None
        if worker:
            sys.exit(_work_session(con, session))
        sys.exit(_drive(con, session, cli, prompt=on_terminal and not once))


def _work_session(con: Any, session: AgentSession) -> int:
    """``latch run --group NAME --worker`` on its built session (:meth:`AgentSession.work`), a line per task claimed
    and done; its exit code (0 when nothing is left claimable)."""
    agent = worker_name()
    con.print(
        f"[dim]worker {agent} joined the group rooted in {session.session_id} · lease {session.lease_seconds:g} s[/dim]",
        highlight=False,
    )

    def claimed(task: Any) -> None:
        how = f"reclaimed (attempt {task.attempt})" if task.attempt else "claimed"
        con.print(f"[cyan]{how} task {markup(task.task_id)}: {markup(task.title)}[/cyan]", highlight=False)

    def done(run: Any) -> None:
        if run.report is None:  # the lease was taken over while the task ran: nothing more was written for it
            con.print(
                f"[yellow]the lease of task {markup(run.task_id)} was taken over by another worker: stopped, "
                f"nothing more written for it · child session {run.session_id}[/yellow]",
                highlight=False,
            )
            return
        what = run.report.status if run.completed else f"{run.report.status}, but another worker owns it now"
        con.print(
            f"[green]task {markup(run.task_id)}: {markup(what)} · child session {run.session_id}[/green]",
            highlight=False,
        )

    try:
        runs = session.work(agent, on_task=claimed, on_done=done)
    except Terminated as exc:
        return _terminated(exc.signum, session.session_id)
    except ChildPolicyError as exc:
        error(str(exc))
        return 1
    con.print(
        f"[dim]{'every task is done' if session.options.wait else 'nothing claimable'}: {len(runs)} task{'s' if len(runs) != 1 else ''} run by {agent}[/dim]",
        highlight=False,
    )
    return 0


def _resume_notes(con: Any, repairs: Repairs) -> None:
    """What resuming repaired (:meth:`AgentSession.repair`), a line each."""
    for res in repairs.children:  # children a killed run left mid-way: rebuilt, finished
        con.print(
            f"[yellow]resumed child agent: {markup(result_summary(res.content, res.is_error))}[/yellow]",
            highlight=False,
        )
    for call in repairs.interrupted:
        con.print(f"[yellow]interrupted: {markup(call_line(call))} (no result was recorded)[/yellow]")
    for gone in repairs.processes:  # background processes whose watcher died with the last run
        what = "killed" if gone.running else "already ended"
        con.print(
            f"[yellow]background process {gone.process_id} of the last run: {what}, exit code "
            f"unknown: {markup(' '.join(gone.command.split())[:100])}[/yellow]",
            highlight=False,
        )


def _drive(con: Any, session: AgentSession, cli: click.Group, *, prompt: bool) -> int:
    """Run the session (:meth:`AgentSession.run`, recorded from start to end): its task in a pipe
    (:func:`run_task`), else the interactive prompt (:func:`prompt_loop`); returns the exit code."""
    o, loop, budget, session_id = session.options, session.loop, session.budget, session.session_id
    model, mode, max_turns = o.model, o.mode, o.max_turns
    assert model is not None and mode is not None and max_turns is not None  # open_session resolved them
    printer = loop.observer
    assert isinstance(printer, RunPrinter)  # run_cmd's observer
    if session.resumed:
        _resume_notes(con, session.repair())
    sandbox = session.sandbox.describe()
    header = fit_parts(
        [
            (f"session {session_id}", 9),
            (f"{session.name} {o.model}", 8),
            (f"engine {session.setup.engine_name}", 5),
            (f"window {budget.context_window_tokens:,}", 6),
            (f"reserve {budget.reserve_tokens:,}", 4),
            (sandbox, 7, sandbox.split(" (")[0]),
        ],
        con.width,
    )
    con.print(f"[dim]{markup(header)}[/dim]", highlight=False)

    def body(ended: dict[str, str]) -> int:
        if prompt:
            info = RunInfo(
                session.name,
                model,
                session.setup.engine_name,
                budget.context_window_tokens,
                budget.reserve_tokens,
                mode,
                [t.NAME for t in loop.tools],
                o.estimator,
            )
            return prompt_loop(
                con,
                loop,
                max_turns,
                cli,
                info,
                printer,
                loop.approve,
                ended,
                task=o.task,
                resumed=session.resumed,
                waiting=session.waiting,
            )
        if o.task is not None:
            loop.say(o.task)
        return run_task(con, loop, max_turns, ended)

    end = session.run(body)
    if end.signum is not None:
        return _terminated(end.signum, session_id)
    if end.code == 130:  # Ctrl-C: how to go on, not click's bare "Aborted!"
        con.print()
        if prompt:
            exit_summary(con, printer, session_id)
        warn(
            f"interrupted (Ctrl-C): the run ended; its processes were stopped (continue with latch run "
            f"--resume {session_id})"
        )
    return end.code


def _terminated(signum: int, session_id: str) -> int:
    name = signal.Signals(signum).name
    warn(f"{name}: the run ended; its processes were stopped (continue with latch run --resume {session_id})")
    return 128 + signum


def _store_files(app: AppContext) -> list[Path]:
    """The store's database and its WAL and shared-memory files (kept read-only inside the sandbox when they lie
    in the workspace: a tool command cannot rewrite the session's history)."""
    if getattr(app, "db", None) == ":memory:":
        return []
    db = Path(app.db_path())
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
