"""Shell and process rules (Claude Code Bash and background shells, Codex exec_command, write_stdin and exec cells, Copilot CLI, Gemini CLI, Goose, OpenHands)."""

from __future__ import annotations

import json
import re
from typing import Any

from ...events import ToolCall, ToolResult
from ...lazyre import lazy_compile
from ..events import Mutation, ProcessStarted
from ..shell import classify_command, command_text
from .common import Run, _one_line, _unwrap_output, call_arguments, process_exit_facts, shell_facts
from .facts import AGENT_FORMAT
from .rules import DerivationContext, DerivationRule

# --------------------------------------------------------------------------------------- rules
_KEYS = {"", "C-c", "C-d", "C-z"}
_KILL_TOOLS = frozenset({"KillShell", "KillBash", "TaskStop"})
_ENDED_STATUSES = frozenset({"completed", "failed"})
_STOPPED_STATUSES = frozenset({"killed", "stopped", "cancelled", "canceled"})  # ended with an unknown outcome
_BACKGROUND_RE = lazy_compile(r"Command running in background with ID: (\S+)|Process running with session ID (\d+)")
_ID_PUNCTUATION = ".,;:!?)]}>'\"`"
_EXITED_RE = lazy_compile(r"<exited with exit code (-?\d+)>\s*$")  # Copilot CLI: a shell's command ended


def process_id_text(raw: str) -> str:
    """A managed-process id as a harness printed it or an agent passed it back: surrounding whitespace
    and trailing punctuation dropped (``"be613ab."`` of "...with ID: be613ab. Output is..." → ``"be613ab"``).
    """
    return raw.strip().rstrip(_ID_PUNCTUATION)


_STILL_RUNNING_RE = lazy_compile(r"The command has no new output after \d+ seconds|command is still running")


class ShellRule(DerivationRule):
    """Shell tools: validation sets, possible mutations, reads, background processes.

    A command still running when its result came (Claude Code ``run_in_background``, Copilot CLI
    ``mode: "async"`` keyed by its ``shellId``,
    Codex ``Process running with session ID N``, OpenHands exit code -1 with "no new
    output") is a managed process; OpenHands' next command with a real exit code
    means it ended, and empty/``C-c`` input goes to it. Gemini CLI ``run_shell_command``, Copilot CLI
    ``bash`` and Goose ``shell``/``developer__shell`` take ``command`` like the others; their exit codes
    come from the result (``Exit Code: N``, ``<exited with exit code N>``, ``Command exited with code N``).
    """

    PLUGIN_NAME = "shell"
    tools = frozenset(
        {
            "Bash",
            "bash",
            "shell",
            "exec_command",
            "execute_bash",
            "run",
            "run_command",
            "execute_command",
            "terminal",
            "local_shell",
            "run_shell_command",
            "developer__shell",
        }
    )

    def may_mutate(self, call: ToolCall, ctx: DerivationContext) -> bool:
        args = call_arguments(call)
        script = command_text(args.get("command", args.get("cmd")))
        return script is not None and any(s.kind == "mutate" for s in classify_command(script))

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:
        args = call_arguments(call)
        script = command_text(args.get("command", args.get("cmd")))
        if script is None:
            return []
        if ctx.format == AGENT_FORMAT and args.get("background") is True:
            # Latch's own managed process: its ProcessStarted, ProcessExited and validation evidence are
            # appended by latch.agent.tools.processes when they happen; only its possible mutations derive here
            return [f for f in shell_facts(call.name, script, Run("", missing=True), ctx) if isinstance(f, Mutation)]
        output, code = _unwrap_output(result.content)
        run = Run(output, result.exit_code if result.exit_code is not None else code, result.is_error, result.missing)
        facts: list[Any] = []
        if ctx.foreground is not None:
            ended = result.exit_code not in (None, -1)
            if script.strip() in _KEYS or args.get("is_input"):  # input to the still-running command
                if ended:
                    facts = process_exit_facts(ctx.foreground, Run(run.output, result.exit_code), ctx)
                    ctx.foreground = None
                return facts
            if ended:  # a new command ran, so the previous one had ended (its outcome unseen)
                facts = process_exit_facts(ctx.foreground, Run("", missing=True), ctx)
                ctx.foreground = None
        process_id = None
        started = _BACKGROUND_RE.search(run.output) if "running" in run.output else None  # both forms say it
        if started and not result.is_error:
            process_id = (
                process_id_text(started.group(1)) or call.id
                if started.group(1) is not None
                else f"session:{started.group(2)}"
            )
        elif args.get("run_in_background") is True and not result.is_error and not result.missing:
            process_id = call.id
        elif (
            args.get("mode") == "async"
            and not result.is_error
            and not result.missing
            and (_EXITED_RE.search(run.output) is None)
        ):
            # Copilot CLI bash mode "async": started detached; read_bash/stop_bash name it by shellId
            shell = args.get("shellId")
            process_id = process_id_text(shell) if isinstance(shell, str) and shell.strip() else call.id
        elif result.exit_code == -1 and _STILL_RUNNING_RE.search(run.output):
            process_id = ctx.foreground = call.id
        if process_id is not None:
            facts.append(ProcessStarted(process_id=process_id, command=script))
            ctx.running[process_id] = (call.name, script, ())
        return facts + shell_facts(call.name, script, run, ctx, process_id=process_id)


class ProcessPollRule(DerivationRule):
    """Polls of managed processes: Codex ``wait``/``write_stdin``; Claude Code ``BashOutput`` (``bash_id``),
    ``KillShell``/``KillBash`` (``shell_id``) and, from 2.1.x, ``TaskOutput``/``TaskStop`` (``task_id``); Copilot
    CLI ``read_bash``/``stop_bash`` (``shellId``, :func:`_copilot_poll`).

    A Claude Code poll result tells ``<status>running|completed|failed|killed</status>`` and, once the
    process ended, ``<exit_code>N</exit_code>`` before its ``<output>`` (``TaskOutput``) or
    ``<stdout>``/``<stderr>`` (``BashOutput``). ``completed``/``failed`` close the process with that exit
    code and land the validation set that waited for it; ``killed`` and a kill call close it with an
    unknown outcome; ``running`` (a ``TaskOutput`` that timed out) changes nothing.
    """

    PLUGIN_NAME = "process_poll"
    tools = frozenset({"wait", "write_stdin", "BashOutput", "TaskOutput", "read_bash", "stop_bash", *_KILL_TOOLS})

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:
        args = call_arguments(call)
        if call.name in ("read_bash", "stop_bash") and not result.missing:
            return _copilot_poll(call.name, args, result, ctx)
        if result.missing or result.is_error:
            return []
        if call.name == "wait" and "cell_id" in args:
            return _cell_poll(f"cell:{args['cell_id']}", result.content, ctx)
        if call.name == "write_stdin" and "session_id" in args:
            return _stdin_facts(args, result.content, call.arguments, ctx)
        pid = process_id_text(str(args.get("task_id") or args.get("bash_id") or args.get("shell_id") or ""))
        if pid not in ctx.running:
            return []
        if call.name in _KILL_TOOLS:
            return process_exit_facts(pid, Run(result.content, missing=True), ctx)  # killed: outcome unknown
        return _poll_facts(pid, result, ctx)


def _copilot_poll(name: str, args: dict[str, Any], result: ToolResult, ctx: DerivationContext) -> list[Any]:
    """Copilot CLI ``read_bash``/``stop_bash`` ``{shellId}`` of a ``bash`` started with ``mode: "async"``: a
    read whose output ends ``<exited with exit code N>`` is that command's exit (its validation lands with
    N, even when the importer flagged the non-zero result an error); a read without it (still running)
    changes nothing; ``stop_bash`` ends it with an unknown outcome."""
    shell = args.get("shellId")
    pid = process_id_text(shell) if isinstance(shell, str) else ""
    if pid not in ctx.running:
        return []
    if name == "stop_bash":
        return process_exit_facts(pid, Run(result.content, missing=True), ctx)
    m = _EXITED_RE.search(result.content)
    if m is None:
        return []
    return process_exit_facts(pid, Run(result.content[: m.start()], int(m.group(1))), ctx)


def _tag_body(content: str, tag: str) -> str | None:
    """The text of ``<tag>...</tag>`` (to the last closing tag, or to the end when it was cut off)."""
    start = content.find(f"<{tag}>")
    if start < 0:
        return None
    start += len(tag) + 2
    end = content.rfind(f"</{tag}>")
    return content[start : end if end >= start else len(content)].strip("\n")


def _poll_facts(pid: str, result: ToolResult, ctx: DerivationContext) -> list[Any]:
    """A Claude Code ``BashOutput``/``TaskOutput`` result: the exit of ``pid`` once its status ended."""
    content = result.content
    m = re.search(r"<status>(\w+)</status>", content)
    status = m.group(1) if m else None
    if status in _STOPPED_STATUSES:
        return process_exit_facts(pid, Run(content, missing=True), ctx)
    if status not in _ENDED_STATUSES:
        return []
    code = re.search(r"<exit_code>(-?\d+)</exit_code>", content)
    parts = [body for body in (_tag_body(content, t) for t in ("output", "stdout", "stderr")) if body is not None]
    output = "\n".join(parts) if parts else content
    return process_exit_facts(
        pid, Run(output, int(code.group(1)) if code else result.exit_code, status == "failed"), ctx
    )


def _cell_poll(pid: str, content: str, ctx: DerivationContext) -> list[Any]:
    if content.startswith("Script running") or pid not in ctx.running:
        return []
    body = content.split("Output:\n", 1)[1] if "Output:\n" in content else content
    command = ctx.running[pid][1]
    return process_exit_facts(pid, Run(body, None, content.startswith("Script failed")), ctx) + _session_ids(
        body, command, ctx
    )


def _session_ids(body: str, command: str, ctx: DerivationContext) -> list[Any]:
    """Codex cells print ``SESSION_ID=N`` for an exec session still running after the yield."""
    facts = []
    for sid in dict.fromkeys(re.findall(r"SESSION_ID=(\d+)\s*$", body, re.M)):
        pid = f"session:{sid}"
        if pid not in ctx.running:
            ctx.running[pid] = ("exec_command", command, ())
            facts.append(ProcessStarted(process_id=pid, command=command))
    return facts


def _cell_command(code: str) -> str:
    """The first ``exec_command`` script of a cell (what a session it started runs), else the code."""
    for fn, arg in _nested_calls(code):
        if fn == "exec_command" and isinstance(arg, dict):
            script = command_text(arg.get("cmd", arg.get("command")))
            if script:
                return script
    return _one_line(code)


def _stdin_facts(args: dict[str, Any], body: str, code: str, ctx: DerivationContext) -> list[Any]:
    pid = f"session:{args['session_id']}"
    if pid not in ctx.running:
        return []
    m = re.search(r"Process exited with code (-?\d+)", body)
    still = f"SESSION_ID={args['session_id']}" in body or "Process running with session ID" in body
    if m:
        return process_exit_facts(pid, Run(body, int(m.group(1))), ctx)
    if not still and ("\x03" in str(args.get("chars", "")) or "SESSION_ID=" in code):
        return process_exit_facts(pid, Run(body, missing=True), ctx)  # interrupted or gone: outcome unknown
    return []


_NESTED_RE = lazy_compile(r"tools\.(\w+)\(\s*")
_CONST_RE = r"(?:const|let|var)\s+{}\s*=\s*(\"(?:[^\"\\]|\\.)*\")"


def _balanced_object(code: str, start: int) -> str | None:
    depth, i, quote = 0, start, None
    while i < len(code):
        ch = code[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return code[start : i + 1]
        i += 1
    return None


def _nested_calls(code: str) -> list[tuple[str, Any]]:
    """``(tool name, argument)`` of each ``tools.NAME(ARG)`` in a JavaScript cell, in order.

    ARG is a dict (a JSON object literal), a str (a string literal or a ``const``
    string it names) or ``None`` when it cannot be read statically.
    """
    out: list[tuple[str, Any]] = []
    for m in _NESTED_RE.finditer(code):
        start = m.end()
        arg: Any = None
        if start < len(code) and code[start] == "{":
            text = _balanced_object(code, start)
            try:
                arg = json.loads(text) if text else None
            except (ValueError, RecursionError):
                arg = None
        elif start < len(code) and code[start] == '"':
            lit = re.match(r"\"(?:[^\"\\]|\\.)*\"", code[start:])
            try:
                arg = json.loads(lit.group()) if lit else None
            except ValueError:  # a JS escape JSON does not know (e.g. "\x41")
                arg = None
        else:
            ident = re.match(r"[A-Za-z_$][\w$]*", code[start:])
            const = re.search(_CONST_RE.format(re.escape(ident.group())), code) if ident else None
            if const:
                try:
                    arg = json.loads(const.group(1))
                except (ValueError, RecursionError):
                    arg = None
        out.append((m.group(1), arg))
    return out
