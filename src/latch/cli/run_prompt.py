"""The interactive prompt of ``latch run`` on a terminal (``latch>``): tasks and slash commands.

:func:`prompt_loop` runs an optional first task, then reads lines until ``/quit``, ``/exit`` or end of input
(Ctrl-D). A line is a task for the agent (one :func:`run_task`) or a slash command (:data:`SLASH_COMMANDS`).
``/context`` prints what ``latch context SESSION`` prints (the same command, invoked); ``/state`` and ``/evidence``
likewise. Nothing is sent to the provider but for a task or ``/continue``. At the end the run's totals are
printed (:meth:`latch.cli.run_console.RunTotals.line`) with the command that continues the session.
"""

from __future__ import annotations

from typing import Any

import click

from ..agent.observer import AgentError
from ..providers import ProviderError
from ..store import LeaseLost
from ..textsafe import error, markup, plural, safe
from .line_input import read_line
from .run_console import RunInfo, RunPrinter

__all__ = ["prompt_loop", "run_task", "exit_summary", "SLASH_COMMANDS"]

SLASH_COMMANDS: dict[str, str] = {
    "/help": "this list",
    "/context": "the next request's context by component (as latch context prints it)",
    "/compact": "start a new cache epoch at the next request (nothing is deleted)",
    "/state": "the session's canonical state",
    "/evidence": "the session's validation evidence",
    "/search QUERY": "full-text search over this session",
    "/model": "the provider, model, engine and budget of this run",
    "/tools": "the tools offered and which ask before they run",
    "/cost": "requests, tokens and dollars of this run so far",
    "/continue": "let the agent go on where the last run stopped (no new message)",
    "/quit": "end the run (also /exit or Ctrl-D)",
}


def run_task(con: Any, loop: Any, max_turns: int, ended: dict[str, str] | None = None) -> int:
    """Run the loop to its end; ``ended`` receives the run outcome and a one-line detail (for ``run_ended``).
    Returns the exit code: 0 done or stopped, 1 an error (printed as one line), 3 after ``max_turns`` requests."""
    ended = ended if ended is not None else {}
    try:
        outcome = loop.run(max_turns)
    except (AgentError, ProviderError, LeaseLost) as exc:
        error(str(exc))
        ended.update(outcome="error", detail=str(exc))
        return 1
    ended.update(outcome=outcome.stopped, detail="")
    if outcome.stopped == "stopped":
        con.print("[yellow]stopped by a stop command at a safe boundary[/yellow]")
        return 0
    if outcome.stopped == "max_turns":
        con.print(
            f"[yellow]stopped after {plural(max_turns, 'request')} (--max-turns); continue with "
            f"latch run --resume {loop.session_id}[/yellow]"
        )
        return 3
    return 0


def exit_summary(con: Any, printer: RunPrinter, session_id: str) -> None:
    """The run's totals and how to continue: ``this run: 2 requests · ... · $0.002542 · continue with latch run
    --resume ID``."""
    con.print(
        f"[dim]this run: {markup(printer.totals.line())} · continue with latch run --resume {session_id}[/dim]",
        highlight=False,
    )


def _tools(con: Any, loop: Any, info: RunInfo, approve: Any) -> None:
    always: set[str] = getattr(approve, "always", set())
    for tool in loop.tools:
        name = tool.NAME
        decision = loop.policy.decide(name, "{}")
        asks = decision.action == "ask" and getattr(tool, "MUTATES", True) and not loop.assume_yes
        how = (
            "always allowed this session"
            if name in always
            else "asks first"
            if asks
            else "denied"
            if decision.action == "deny"
            else "allowed"
        )
        con.print(f"  {markup(name)} · {how}", highlight=False)
    con.print(f"[dim]{plural(len(loop.tools), 'tool')} · permission mode {markup(info.mode)}[/dim]", highlight=False)


def _builtin(cli: click.Group, ctx: click.Context, name: str) -> click.Command:
    """The built-in command ``name`` (a slash command runs it)."""
    command = cli.get_command(ctx, name)
    assert command is not None, f"no built-in command {name!r}"
    return command


def _slash(
    con: Any,
    loop: Any,
    text: str,
    cli: click.Group,
    info: RunInfo,
    printer: RunPrinter,
    approve: Any,
    max_turns: int,
    ended: dict[str, str],
) -> None:
    cmd, _, arg = text.partition(" ")
    session_id, store = loop.session_id, loop.store
    ctx = click.get_current_context()
    if cmd == "/help":
        for name, what in SLASH_COMMANDS.items():
            con.print(f"  {name:<14} {what}", highlight=False, markup=False)
    elif cmd == "/compact":
        loop.compact("manual")
        con.print("[dim]compacted: the next request starts a new cache epoch (nothing is deleted)[/dim]")
    elif cmd == "/context":
        ctx.invoke(
            _builtin(cli, ctx, "context"),
            session=session_id,
            engine=info.engine,
            model=info.model,
            estimator=info.estimator,
        )
    elif cmd in ("/state", "/evidence"):
        ctx.invoke(_builtin(cli, ctx, cmd[1:]), session=session_id)
    elif cmd == "/search":
        if not arg.strip():
            con.print("usage: /search QUERY")
            return
        for hit in reversed(store.search(arg, session_id=session_id, limit=10, mode="or")):
            line = " ".join(hit.event.searchable_text().split())
            con.print(safe(f"seq {hit.seq} {hit.event.KIND}: {line[:200]}"), markup=False)
    elif cmd == "/model":
        con.print(
            f"provider {markup(info.provider)} · model {markup(info.model)} · engine {markup(info.engine)} · "
            f"window {info.window:,} · reserve {info.reserve:,} tokens (another model: latch run --resume "
            f"{session_id} --model NAME)",
            highlight=False,
        )
    elif cmd == "/tools":
        _tools(con, loop, info, approve)
    elif cmd == "/cost":
        con.print(f"this run: {markup(printer.totals.line())}", highlight=False)
    elif cmd == "/continue":
        run_task(con, loop, max_turns, ended)
    else:
        con.print(f"unknown command {markup(cmd)}; /help lists them", highlight=False)


def prompt_loop(
    con: Any,
    loop: Any,
    max_turns: int,
    cli: click.Group,
    info: RunInfo,
    printer: RunPrinter,
    approve: Any,
    ended: dict[str, str],
    *,
    task: str | None = None,
    resumed: bool = False,
    waiting: bool = True,
) -> int:
    """The interactive prompt (see the module docstring). ``task`` runs first; ``resumed`` with ``waiting``
    False says that the last run stopped before the agent finished (``/continue`` goes on). Returns the exit
    code: 0, or 1 when another run took the session over. Ctrl-C propagates (``KeyboardInterrupt``)."""
    if task is not None:
        loop.say(task)
        run_task(con, loop, max_turns, ended)
        if ended.get("outcome") == "stopped":
            return 0
    elif resumed:
        con.print(
            f"[dim]resumed after {plural(loop.turns, 'request')}; nothing is sent until you type a task"
            + ("" if waiting else " (the last run stopped before the agent finished: /continue goes on)")
            + "[/dim]",
            highlight=False,
        )
    con.print("[dim]type a task, /help for the commands, /quit to end[/dim]")
    code = 0
    while True:
        if loop.guard is not None and loop.guard.lost:  # another run took the session over
            code = 1
            break
        try:
            line = read_line("latch> ")  # Ctrl-C ends the read whenever it comes
        except EOFError:
            con.print()
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        if text.startswith("/"):
            _slash(con, loop, text, cli, info, printer, approve, max_turns, ended)
        else:
            loop.say(text)
            run_task(con, loop, max_turns, ended)
        if ended.get("outcome") == "stopped":
            break
    exit_summary(con, printer, loop.session_id)
    return code
