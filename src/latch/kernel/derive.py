"""Derivation rules: kernel facts read from the conversation of every imported format.

A :class:`DerivationRule` is small and named: ``matches(call) -> bool`` picks
the tool calls it understands and ``derive(call, result, ctx) -> list[facts]``
turns one call and its :class:`~latch.events.ToolResult` into facts. Facts are
kernel records (:class:`~latch.kernel.events.FileObservation`,
:class:`~latch.kernel.events.Mutation`, :class:`~latch.kernel.events.ValidationEvidence`,
:class:`~latch.kernel.events.ProcessStarted`/``Exited``) or the derived-only
:class:`ToolFailure`, :class:`ToolSuccess`, :class:`ActionsReplaced` and :class:`ActionChanged`.
Derivation reads conversation events and never writes them: derived facts exist
only inside the reduction (:mod:`latch.kernel.ledger`).

Rules are tried in order and the first match derives. A plugin adds rules for
another harness's tool names through the ``latch_register_derivation_rules``
hook (:mod:`latch.hookspecs`); the host (:func:`latch.host.kernel.kernel_cache`) tries
third-party rules first, so they can also override the built-ins, then
:data:`BUILTIN_RULES`, which the built-in plugin registers through the same hook.
The kernel itself never asks the plugin manager: it derives with the rules its
caller passes (:class:`latch.kernel.ledger.KernelCache`), else with the built-ins. When a rule reports neither a
failure nor a success, the call's ``is_error`` decides (spec: "Episodes",
failure supervision: same tool + same error signature form one lineage).

Built-in rules cover Claude Code (Read, Edit, MultiEdit, Write, NotebookEdit,
Bash with background shells, BashOutput/KillShell/KillBash and 2.1.x TaskOutput/TaskStop, TodoWrite and
2.1.x TaskCreate/TaskUpdate), Codex
(exec_command/shell with ``cmd``/``command`` arrays, write_stdin, apply_patch,
update_plan and the ``exec`` JavaScript cell calling ``tools.*``, ``wait``),
SWE-agent (str_replace_editor view/create/str_replace/insert/undo_edit, open,
create, edit, insert, bash), OpenHands (execute_bash, str_replace_editor, edit,
read, write, run), Aider (synthesized ``edit`` calls with a ``path``), Gemini CLI (read_file, write_file,
replace, run_shell_command with its ``Exit Code: N`` report, write_todos), GitHub Copilot CLI (view, edit,
create, bash with its ``<exited with exit code N>`` trailer, update_todo) and Goose (developer ``shell``,
``write``, ``edit`` and ``developer__shell``/``developer__text_editor``, ``todo__todo_write``).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, ClassVar

from ..events import AssistantMessage, Event, RawArguments, ToolCall, ToolResult, UserMessage, argument_paths
from .events import (ExternalChange, FileObservation, Mutation, ProcessExited, ProcessStarted, StateUpdate, Tombstone,
                     ValidationEvidence, WriterBlocker)
from .shell import classify_command, command_text

__all__ = [
    "ToolFailure",
    "ToolSuccess",
    "ActionsReplaced",
    "ActionChanged",
    "UserInstruction",
    "instruction_text",
    "INSTRUCTION_CHARS",
    "DerivationContext",
    "DerivationRule",
    "BUILTIN_RULES",
    "builtin_rules",
    "check_rules",
    "SessionDeriver",
    "call_arguments",
    "error_signature",
    "patch_paths",
    "checklist_items",
    "process_id_text",
    "TASK_SOURCE",
    "AGENT_FORMAT",
    "AGENT_EXPLICIT_TOOLS",
]


# ----------------------------------------------------------------------------- derived-only facts
@dataclass(frozen=True, slots=True)
class ToolFailure:
    """A failed tool call: lineage key ``(tool, signature)``; ``actions`` name what was attempted
    (the command, its validation segments, or the file)."""

    tool: str
    signature: str
    actions: tuple[str, ...]
    excerpt: str = ""


@dataclass(frozen=True, slots=True)
class ToolSuccess:
    """A successful call of ``tool`` on ``actions``: closes lineages that failed on one of them."""

    tool: str
    actions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ActionsReplaced:
    """A plan/todo tool replaced the action list: ``items`` are ``(text, status)`` pairs."""

    items: tuple[tuple[str, str], ...]
    source: str


@dataclass(frozen=True, slots=True)
class ActionChanged:
    """A task tool created, updated or deleted one action of ``source``'s list (Claude Code 2.1.x
    ``TaskCreate``/``TaskUpdate``), keyed by the harness's task id ``key`` (``"1"`` for ``Task #1``).

    ``created`` starts a new action (``text`` set, ``status`` ``pending`` unless given; it replaces
    an earlier action of the same key). Otherwise it updates the action of ``key``: ``text`` and
    ``status`` are ``None`` when unchanged; ``status == "deleted"`` removes it. An update of an
    unknown key changes nothing. Statuses are the action statuses (``pending``, ``in_progress``,
    ``done``, ``cancelled``) or ``deleted``.
    """

    source: str
    key: str
    text: str | None = None
    status: str | None = None
    created: bool = False


@dataclass(frozen=True, slots=True)
class UserInstruction:
    """A real instruction of the user (:func:`instruction_text` of a :class:`~latch.events.UserMessage`):
    the first one of a session is its derived goal, a later one a goal revision (:mod:`latch.kernel.state`).
    ``text`` is whitespace-collapsed and at most :data:`INSTRUCTION_CHARS` characters (``truncated`` then)."""

    text: str
    truncated: bool = False


INSTRUCTION_CHARS = 600
"""The most characters of one user instruction the canonical state keeps (a longer one ends in ``…``)."""

_HARNESS_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                     "<INSTRUCTIONS>", "<skills_instructions>", "<permissions instructions>", "<turn_aborted>",
                     "<user_shell_command>", "<task-notification>", "<local-command-stdout>",
                     "<local-command-stderr>", "Caveat: The messages below were generated by the user")
"""Harness-injected user turns an importer may not have marked ``is_meta`` (a leading
``<system-reminder>`` block is cut out instead: real text may follow it)."""
_REMINDER_RE = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.S)
_COMMAND_RE = re.compile(r"<command-(name|args|message)>(.*?)</command-\1>", re.S)
_ACKS = frozenset({"hi", "hello", "hey", "thanks", "thank you", "thx", "ok", "okay", "k", "yes", "y", "no", "n",
                   "sure", "great", "nice", "good", "continue", "please continue", "go on", "go ahead", "proceed",
                   "keep going", "carry on", "done", "yep", "yeah"})


def instruction_text(event: Any) -> tuple[str, bool] | None:
    """``(text, truncated)`` of the user's own instruction in ``event``, else ``None``.

    Only a :class:`~latch.events.UserMessage` that is not ``is_meta`` counts; text the harness injects
    (``<system-reminder>`` blocks, Codex environment/AGENTS.md/permission blocks, Claude Code task
    notifications and local-command output) does not; a slash command counts as its name and arguments.
    Whitespace is collapsed; an empty message or a bare acknowledgement (``ok``, ``continue``, ``thanks``:
    no change of task) is ``None``. At most :data:`INSTRUCTION_CHARS` characters (``truncated`` then,
    the text ends in ``…``). Deterministic; O(len(text)).
    """
    if not isinstance(event, UserMessage) or event.is_meta or event.KIND != UserMessage.KIND:
        return None  # subclasses (a child agent's delivered report) are not the user's instruction
    text = event.text.lstrip()
    if text.startswith(_HARNESS_PREFIXES):
        return None
    if "<system-reminder>" in text:
        text = _REMINDER_RE.sub(" ", text)
    if "<command-" in text:
        parts = {k: v.strip() for k, v in _COMMAND_RE.findall(text)}
        if "name" in parts:
            rest = _COMMAND_RE.sub(" ", text)
            text = " ".join(x for x in (parts["name"], parts.get("args", ""), rest) if x.strip())
    text = " ".join(text.split())
    if not text or text.lower().rstrip(".!") in _ACKS:
        return None
    if len(text) > INSTRUCTION_CHARS:
        return text[: INSTRUCTION_CHARS - 1] + "…", True
    return text, False


AGENT_FORMAT = "latch"
"""The session format of Latch's own agent (``latch run``). Its built-in tools write their kernel facts
explicitly when they happen (:mod:`latch.agent.tools`), so derivation never adds a second copy:
see :data:`AGENT_EXPLICIT_TOOLS` and :class:`ShellRule` (``background: true``)."""

AGENT_EXPLICIT_TOOLS = frozenset({"read_file", "write_file", "edit_file"})
"""Tools of :data:`AGENT_FORMAT` sessions that append their own FileObservation/Mutation/ExternalChange
(:func:`latch.kernel.files.read_file`, :func:`latch.kernel.files.guarded_write`): derivation keeps only the
derived-only facts (failure/success) of their calls."""

ERROR_FLAG_FORMATS = frozenset({"claude-code", "goose"})
"""Formats whose tool results set ``is_error`` for every non-zero exit, so a clean result means exit 0
(Goose's developer shell returns an MCP error exactly when the exit code is non-zero or the command timed out)."""


class DerivationContext:
    """What rules may know about the session being derived, and update as they go.

    ``workspace``/``cwd`` make paths workspace-relative; ``open_file`` is
    SWE-agent's current file; ``foreground`` is OpenHands' still-running shell
    command; ``running`` maps a managed process id to ``(tool, command,
    validation requirements waiting for its exit)``.
    """

    def __init__(self, session_id: str, format: str | None, workspace: str | None):
        self.session_id = session_id
        self.format = format
        self.workspace = workspace.rstrip("/") if workspace else None
        self.cwd = self.workspace
        self.open_file: str | None = None
        self.running: dict[str, tuple[str, str, tuple[str, ...]]] = {}
        self.foreground: str | None = None  # OpenHands: the command still holding the shell

    @property
    def error_flag_reliable(self) -> bool:
        return self.format in ERROR_FLAG_FORMATS

    def path(self, raw: str) -> str:
        """``raw`` normalized: workspace-relative when inside the workspace (or SWE-agent's cwd)."""
        p = raw.strip()
        if not p:
            return p
        base = self.workspace or self.cwd
        if base and p.startswith(base + "/"):
            p = p[len(base) + 1:]
        elif base and p == base:
            return "."
        return posixpath.normpath(p)


class DerivationRule:
    """One named rule, registered through the ``latch_register_derivation_rules`` hook (a class).

    Subclasses set ``PLUGIN_NAME`` (unique among all rules) and ``tools`` (or override
    :meth:`matches`), have a no-argument constructor, and implement :meth:`derive`.
    """

    PLUGIN_NAME: ClassVar[str] = ""
    tools: ClassVar[frozenset[str]] = frozenset()

    @property
    def name(self) -> str:
        """The rule's ``PLUGIN_NAME``."""
        return type(self).PLUGIN_NAME

    def matches(self, call: ToolCall) -> bool:
        """Whether this rule derives ``call`` (default: ``call.name`` is in ``tools``)."""
        return call.name in self.tools

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:  # pragma: no cover
        """The facts of ``call`` and its ``result`` (kernel records or derived-only facts; may be empty)."""
        raise NotImplementedError

    def may_mutate(self, call: ToolCall, ctx: DerivationContext) -> bool:
        """Whether ``call`` may change the workspace before its result is known (spec: possible external
        mutations commit before execution): while the call has no result, the current workspace generation
        counts it once (:meth:`latch.kernel.ledger.Workspace.pending`). Default: :meth:`derive` with a
        missing result, on a scratch copy of ``ctx``, yields a :class:`Mutation`."""
        scratch = DerivationContext(ctx.session_id, ctx.format, ctx.workspace)
        scratch.cwd, scratch.open_file, scratch.foreground = ctx.cwd, ctx.open_file, ctx.foreground
        scratch.running = dict(ctx.running)
        facts = self.derive(call, ToolResult(call.id, "", missing=True), scratch)
        return any(isinstance(f, Mutation) for f in facts)


def check_rules(rules: Sequence[DerivationRule]) -> tuple[DerivationRule, ...]:
    """``rules`` as a tuple, after checking each has a non-empty name and no name repeats.

    Raises ``ValueError`` naming the offending rule(s).
    """
    seen: dict[str, DerivationRule] = {}
    for rule in rules:
        if not isinstance(rule.name, str) or not rule.name:
            raise ValueError(f"derivation rule {type(rule).__qualname__} has no PLUGIN_NAME")
        prior = seen.get(rule.name)
        if prior is not None:
            raise ValueError(f"derivation rule name {rule.name!r} is used twice: {type(prior).__qualname__} and "
                             f"{type(rule).__qualname__}")
        seen[rule.name] = rule
    return tuple(rules)


def _removed(name: str):
    def removed(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"latch.kernel.derive.{name}() was removed: derivation rules are registered by a plugin "
                           "through the latch_register_derivation_rules hook (docs/plugins.md)")
    removed.__name__ = removed.__qualname__ = name
    removed.__doc__ = "Removed: raises ``RuntimeError`` (use the ``latch_register_derivation_rules`` hook)."
    return removed


register_rule = _removed("register_rule")
unregister_rule = _removed("unregister_rule")


# ------------------------------------------------------------------------------------- helpers
def call_arguments(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as a dict (:meth:`ToolCall.args`; shared, do not mutate): empty text is ``{}``,
    a non-object or non-JSON string becomes ``{"input": value}`` (a fresh dict)."""
    if not call.arguments:
        return {}
    value = call.args()
    return value if isinstance(value, dict) else {"input": str(value) if isinstance(value, RawArguments) else value}


_HEADER_RE = re.compile(r"^(Script (completed|failed)|Wall time [\d.]+ seconds|Output:|Script error:|Chunk ID: \S+|"
                        r"Process exited with code -?\d+|Original token count: \d+|Total output lines: \d+)$")
_ERRORISH_RE = re.compile(r"error|fail|exception|not found|denied|invalid|cannot|can't|unable|refused|\btimed out\b|"
                          r"no such|panic|fatal|abort|reject|does not exist|unexpected", re.I)


_ANSI_RE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[()][A-Za-z0-9]|[@-Z\\-_])")
_LEADING_ERROR_RE = re.compile(r"^(?:error|fatal|panic|exception|failed|fail\b|npm err|[\w.]*(?:Error|Exception)\b)",
                               re.I)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colors, cursor moves)."""
    return _ANSI_RE.sub("", text) if "\x1b" in text else text


def _meaningful_lines(text: str) -> list[str]:
    return [s for s in (line.strip() for line in strip_ansi(text).splitlines()) if s and not _HEADER_RE.match(s)]


def _error_line(lines: list[str]) -> str:
    """The line that best names the error: one starting like an error, else a test/build failure
    marker, else one mentioning an error, else the first."""
    for pick in (_LEADING_ERROR_RE.match, _FAIL_RE.search, _ERRORISH_RE.search):
        line = next((s for s in lines if pick(s)), None)
        if line is not None:
            return line
    return lines[0] if lines else ""


def error_signature(text: str) -> str:
    """A normalized one-line signature of an error text (same failure → same signature).

    The first line that looks like an error (else the first line), with quoted
    strings, paths, hex and numbers replaced by placeholders, at most 160 characters.
    """
    lines = _meaningful_lines(text)
    if not lines:
        return "(no output)"
    line = _error_line(lines)
    sig = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "<q>", line)
    sig = re.sub(r"(?:[A-Za-z]:)?(?:[\w.\-~]*/)+[\w.\-]*", "<path>", sig)
    sig = re.sub(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b", "<hex>", sig)
    sig = re.sub(r"\d+", "<n>", sig)
    sig = re.sub(r"\s+", " ", sig).strip()
    return sig[:160]


def _excerpt(text: str, width: int = 200) -> str:
    line = _error_line(_meaningful_lines(text))
    return line if len(line) <= width else line[: width - 1] + "…"


def _action(call: ToolCall, args: dict[str, Any]) -> tuple[str, ...]:
    for key in ("command", "cmd", "file_path", "notebook_path", "path", "filename", "cell_id", "session_id"):
        value = args.get(key)
        if value is not None:
            text = command_text(value) if key in ("command", "cmd") else str(value)
            if text:
                return (_one_line(text),)
    return (call.arguments[:300],)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


_EXIT_RES = (
    re.compile(r"^(?:Process exited with code|Command exited with code|Exit code:?|exit code:?|Exit Code:|"
               r"Exit status:?|exit status:?)\s*(-?\d+)\b", re.M),
    re.compile(r"executed with exit code (-?\d+)"),
    re.compile(r"<exit_code>(-?\d+)</exit_code>"),
    re.compile(r"<exited with exit code (-?\d+)>\s*$"),
)
_FAIL_RE = re.compile(
    r"test result: FAILED|^FAILED\b|\b[1-9]\d* (?:failed|failing|errors?)\b|^error(?:\[E\d+\])?:|^ERROR\b|"
    r"Traceback \(most recent call last\)|npm ERR!|^npm error\b|BUILD FAILURE|BUILD FAILED|^FAIL\b|^--- FAIL|make: \*\*\*|"
    r"panicked at|Segmentation fault|^Diff in \S+|\berror TS\d+:", re.M)
_PASS_RE = re.compile(
    r"test result: ok|\b\d+ passed\b|^OK\b|^PASS\b|BUILD SUCCESS|All tests passed|no issues found|"
    r"Compiled successfully|^\s*Finished\b|^ok\s|\bbuilt in [\d.]+m?s\b", re.M)


@dataclass(frozen=True, slots=True)
class Run:
    """What a command run produced: output text and what the harness said about its exit."""

    output: str
    exit_code: int | None = None
    is_error: bool = False
    missing: bool = False


def _exit_code(output: str) -> int | None:
    for rx in _EXIT_RES:
        m = rx.search(output)
        if m:
            return int(m.group(1))
    return None


def _status(run: Run, ctx: DerivationContext, validation: bool) -> tuple[str, int | None]:
    """``(passed|failed|unknown, exit_code)`` of a run."""
    if run.missing:
        return "unknown", None
    output = strip_ansi(run.output)
    code = run.exit_code if run.exit_code is not None else _exit_code(output)
    if code is not None:
        return ("passed" if code == 0 else "failed"), code
    if validation and _FAIL_RE.search(output):
        return "failed", None
    if run.is_error:
        return "failed", None
    if validation and _PASS_RE.search(output):
        return "passed", None
    if ctx.error_flag_reliable:
        return "passed", None
    return "unknown", None


def _summary(output: str) -> str:
    lines = _meaningful_lines(output)
    marked = [s for s in lines if _FAIL_RE.search(s) or _PASS_RE.search(s)]
    line = (marked or lines or [""])[-1]
    return line if len(line) <= 200 else line[:199] + "…"


def shell_facts(tool: str, script: str, run: Run, ctx: DerivationContext, *, process_id: str | None = None) -> list[Any]:
    """Facts of one shell command: mutations (in order around the validation set), the
    validation set (deferred to the exit when ``process_id`` is still running), reads,
    and the call's failure or success.
    """
    segments = classify_command(script)
    validations = tuple(s.text for s in segments if s.kind == "validate")
    status, code = _status(run, ctx, bool(validations))
    facts: list[Any] = []
    placed = False
    for seg in segments:
        if seg.kind == "mutate":
            paths = tuple(ctx.path(p) for p in seg.paths)
            if facts and isinstance(facts[-1], Mutation) and facts[-1].paths and paths:
                facts[-1] = Mutation(paths=tuple(dict.fromkeys(facts[-1].paths + paths)), tool=tool)
            else:
                facts.append(Mutation(paths=paths, tool=tool))
        elif seg.kind == "validate" and not placed:
            placed = True
            if process_id is not None:
                ctx.running[process_id] = (tool, script, validations)
            else:
                facts.append(ValidationEvidence(command=script, status=status, requirements=validations,
                                                exit_code=code, summary=_summary(run.output)))
        elif seg.kind == "read" and status != "failed" and not run.missing and process_id is None:
            facts.extend(FileObservation(path=ctx.path(p)) for p in seg.paths)
    if run.missing or process_id is not None:
        return facts
    facts.append(_outcome(tool, script, validations, status, run.output))
    return facts


def process_exit_facts(process_id: str, run: Run, ctx: DerivationContext) -> list[Any]:
    """``ProcessExited`` plus the validation set that waited for this exit, with its failure or success."""
    tool, command, validations = ctx.running.pop(process_id, ("", "", ()))
    status, code = _status(run, ctx, bool(validations))
    facts: list[Any] = [ProcessExited(process_id=process_id, exit_code=code)]
    if validations:
        facts.append(ValidationEvidence(command=command, status=status, requirements=validations, exit_code=code,
                                        summary=_summary(run.output)))
        facts.append(_outcome(tool, command, validations, status, run.output))
    return facts


def _outcome(tool: str, script: str, validations: tuple[str, ...], status: str, output: str) -> Any:
    """The failure or success of a command: its text and validation segments are the lineage actions;
    a passing validation of a program (cargo, npm, pytest...) also closes that program's validation failures."""
    families = tuple(dict.fromkeys(f"validation:{v.split()[0]}" for v in validations))
    actions = tuple(dict.fromkeys((_one_line(script),) + validations))
    if status == "failed":
        return ToolFailure(tool, error_signature(output), actions + families, _excerpt(output))
    return ToolSuccess(tool, actions + (families if status == "passed" else ()))


_PATCH_FILE_RE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)


def patch_paths(patch: str) -> tuple[str, ...]:
    """Files named by an ``*** Begin Patch`` text (Add/Update/Delete File, Move to), in order."""
    if "*** Begin Patch\n" not in patch:  # a patch inside a JavaScript string literal: newlines escaped
        patch = patch.replace("\\n", "\n")
    seen: dict[str, None] = {}
    for m in _PATCH_FILE_RE.finditer(patch):
        seen[m.group(1) or m.group(2)] = None
    return tuple(seen)


def _unwrap_output(content: str) -> Run:
    """Codex ``shell`` results are JSON ``{"output", "metadata": {"exit_code"}}``; unwrap them."""
    if content.startswith("{") and '"metadata"' in content:
        try:
            obj = json.loads(content)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply
            return Run(content)
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            meta = obj.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return Run(obj["output"], code if isinstance(code, int) else None)
    return Run(content)


# --------------------------------------------------------------------------------------- rules
_KEYS = {"", "C-c", "C-d", "C-z"}
_KILL_TOOLS = frozenset({"KillShell", "KillBash", "TaskStop"})
_ENDED_STATUSES = frozenset({"completed", "failed"})
_STOPPED_STATUSES = frozenset({"killed", "stopped", "cancelled", "canceled"})  # ended with an unknown outcome
_BACKGROUND_RE = re.compile(r"Command running in background with ID: (\S+)|Process running with session ID (\d+)")
_ID_PUNCTUATION = ".,;:!?)]}>'\"`"
_EXITED_RE = re.compile(r"<exited with exit code (-?\d+)>\s*$")  # Copilot CLI: a shell's command ended


def process_id_text(raw: str) -> str:
    """A managed-process id as a harness printed it or an agent passed it back: surrounding whitespace
    and trailing punctuation dropped (``"be613ab."`` of "...with ID: be613ab. Output is..." → ``"be613ab"``).
    """
    return raw.strip().rstrip(_ID_PUNCTUATION)

_STILL_RUNNING_RE = re.compile(r"The command has no new output after \d+ seconds|command is still running")


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
    tools = frozenset({"Bash", "bash", "shell", "exec_command", "execute_bash", "run", "run_command",
                       "execute_command", "terminal", "local_shell", "run_shell_command", "developer__shell"})

    def may_mutate(self, call, ctx):
        args = call_arguments(call)
        script = command_text(args.get("command", args.get("cmd")))
        return script is not None and any(s.kind == "mutate" for s in classify_command(script))

    def derive(self, call, result, ctx):
        args = call_arguments(call)
        script = command_text(args.get("command", args.get("cmd")))
        if script is None:
            return []
        if ctx.format == AGENT_FORMAT and args.get("background") is True:
            # Latch's own managed process: its ProcessStarted, ProcessExited and validation evidence are
            # appended by latch.agent.tools.processes when they happen; only its possible mutations derive here
            return [f for f in shell_facts(call.name, script, Run("", missing=True), ctx) if isinstance(f, Mutation)]
        run = _unwrap_output(result.content)
        run = Run(run.output, result.exit_code if result.exit_code is not None else run.exit_code,
                  result.is_error, result.missing)
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
        started = _BACKGROUND_RE.search(run.output)
        if started and not result.is_error:
            process_id = (process_id_text(started.group(1)) or call.id if started.group(1) is not None
                          else f"session:{started.group(2)}")
        elif args.get("run_in_background") is True and not result.is_error and not result.missing:
            process_id = call.id
        elif args.get("mode") == "async" and not result.is_error and not result.missing and (
                _EXITED_RE.search(run.output) is None):
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

    def derive(self, call, result, ctx):
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
    return process_exit_facts(pid, Run(result.content[:m.start()], int(m.group(1))), ctx)


def _tag_body(content: str, tag: str) -> str | None:
    """The text of ``<tag>...</tag>`` (to the last closing tag, or to the end when it was cut off)."""
    start = content.find(f"<{tag}>")
    if start < 0:
        return None
    start += len(tag) + 2
    end = content.rfind(f"</{tag}>")
    return content[start:end if end >= start else len(content)].strip("\n")


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
    return process_exit_facts(pid, Run(output, int(code.group(1)) if code else result.exit_code,
                                       status == "failed"), ctx)


def _cell_poll(pid: str, content: str, ctx: DerivationContext) -> list[Any]:
    if content.startswith("Script running") or pid not in ctx.running:
        return []
    body = content.split("Output:\n", 1)[1] if "Output:\n" in content else content
    command = ctx.running[pid][1]
    return (process_exit_facts(pid, Run(body, None, content.startswith("Script failed")), ctx)
            + _session_ids(body, command, ctx))


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


class CodexExecRule(DerivationRule):
    """Codex's ``exec`` JavaScript cell: each ``tools.NAME(...)`` it calls is derived in order.

    The cell's result starts ``Script completed``, ``Script failed`` or
    ``Script running with cell ID N`` (a managed process until a ``wait`` says it ended).
    """

    PLUGIN_NAME = "codex_exec"
    tools = frozenset({"exec"})

    def derive(self, call, result, ctx):
        code = str(call_arguments(call).get("input", call.arguments))
        content = result.content
        failed = content.startswith("Script failed") or (result.is_error and not result.missing)
        running = re.match(r"Script running with cell ID (\d+)", content)
        pid = f"cell:{running.group(1)}" if running else None
        body = content.split("Output:\n", 1)[1] if "Output:\n" in content else content
        run = Run(body, None, failed, result.missing)
        command = _cell_command(code)
        facts: list[Any] = [ProcessStarted(process_id=pid, command=command)] if pid else []
        for fn, arg in _nested_calls(code):
            if fn == "exec_command" and isinstance(arg, dict):
                script = command_text(arg.get("cmd", arg.get("command")))
                if script is not None:
                    facts += shell_facts("exec_command", script, run, ctx, process_id=pid)
            elif fn == "apply_patch":
                facts += _patch_facts(arg if isinstance(arg, str) else code, body, failed, result.missing, ctx)
            elif fn == "update_plan" and isinstance(arg, dict) and not failed:
                facts += _plan_facts(arg.get("plan"), "update_plan")
            elif fn == "write_stdin" and isinstance(arg, dict) and "session_id" in arg and not pid:
                facts += _stdin_facts(arg, body, code, ctx)
        if pid:
            ctx.running.setdefault(pid, ("exec", command, ()))
        else:
            facts += _session_ids(body, command, ctx)
        if not result.missing and not pid and not any(isinstance(f, (ToolFailure, ToolSuccess)) for f in facts):
            actions = (_one_line(code),)
            facts.append(ToolFailure("exec", error_signature(body), actions, _excerpt(body)) if failed
                         else ToolSuccess("exec", actions))
        return facts


_NESTED_RE = re.compile(r"tools\.(\w+)\(\s*")
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
                return code[start:i + 1]
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


_STATUS_WORDS = {"completed": "done", "complete": "done", "done": "done", "in_progress": "in_progress",
                 "pending": "pending", "cancelled": "cancelled", "canceled": "cancelled"}


_CHECKLIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX~>-])\]\s+(.+?)\s*$", re.M)
_CHECK_MARKS = {" ": "pending", "x": "done", "X": "done", "-": "in_progress", "~": "in_progress", ">": "in_progress"}


def checklist_items(text: str) -> list[dict[str, str]]:
    """The items of a markdown checklist (``- [ ] task``, ``- [x] done``, ``- [-]``/``[~]``/``[>]`` in
    progress; nested items included, other lines ignored) as ``{"content", "status"}`` dicts, in order."""
    return [{"content": m.group(2), "status": _CHECK_MARKS[m.group(1)]} for m in _CHECKLIST_RE.finditer(text)]


def _plan_facts(items: Any, source: str) -> list[Any]:
    if isinstance(items, str):  # a markdown checklist (Goose todo_write, Copilot CLI update_todo)
        items = checklist_items(items)
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        if isinstance(item, dict):
            text = item.get("content") or item.get("step") or item.get("text") or item.get("description")
            if isinstance(text, str) and text.strip():
                out.append((" ".join(text.split()), _STATUS_WORDS.get(str(item.get("status", "pending")), "pending")))
    return [ActionsReplaced(items=tuple(out), source=source)]


class PlanRule(DerivationRule):
    """Plan/todo tools: Claude Code ``TodoWrite``, Codex ``update_plan``, Gemini CLI ``write_todos``
    (``{"todos": [{"description", "status"}]}``), Goose ``todo__todo_write`` (``{"content": checklist}``)
    and Copilot CLI ``update_todo`` (``{"todos": checklist}``, a markdown checklist: :func:`checklist_items`)
    replace their action list (:class:`ActionsReplaced`); Claude Code 2.1.x tasks change one action at a
    time (:class:`ActionChanged`).

    ``TaskCreate`` (``{"subject", "description", "activeForm"}``) adds an action with the ``subject``
    text, keyed by the id its result names (``Task #1 created successfully: ...``); ``TaskUpdate``
    (``{"taskId", "status": "pending"|"in_progress"|"completed"|"deleted", "subject"?}``) updates that
    action's status (``completed`` → ``done``) or text, and ``deleted`` removes it. Failed calls and
    calls without a result change nothing.
    """

    PLUGIN_NAME = "plan"
    tools = frozenset({"TodoWrite", "update_plan", "TaskCreate", "TaskUpdate", "write_todos", "todo__todo_write",
                       "update_todo"})

    def derive(self, call, result, ctx):
        if result.is_error or result.missing:
            return []
        args = call_arguments(call)
        if call.name == "TaskCreate":
            return _task_created(call, args, result.content)
        if call.name == "TaskUpdate":
            return _task_updated(args)
        return _plan_facts(args.get("todos", args.get("plan", args.get("content"))), call.name)


TASK_SOURCE = "TaskCreate"
"""The ``source`` of the actions Claude Code's ``TaskCreate``/``TaskUpdate`` maintain."""
_TASK_CREATED_RE = re.compile(r"\bTask #?([A-Za-z0-9][\w-]*) created\b")


def _task_key(value: Any) -> str:
    return process_id_text(str(value)).lstrip("#") if isinstance(value, (str, int)) else ""


def _task_created(call: ToolCall, args: dict[str, Any], content: str) -> list[Any]:
    text = args.get("subject") or args.get("description")
    if not isinstance(text, str) or not text.strip():
        return []
    m = _TASK_CREATED_RE.search(content)
    key = m.group(1) if m else f"call:{call.id}"  # no id in the result: the action cannot be updated
    status = _STATUS_WORDS.get(str(args.get("status", "pending")), "pending")
    return [ActionChanged(TASK_SOURCE, key, " ".join(text.split()), status, created=True)]


def _task_updated(args: dict[str, Any]) -> list[Any]:
    key = _task_key(args.get("taskId", args.get("task_id", args.get("id"))))
    if not key:
        return []
    raw = args.get("status")
    status = "deleted" if raw == "deleted" else _STATUS_WORDS.get(str(raw)) if raw is not None else None
    subject = args.get("subject")
    text = " ".join(subject.split()) if isinstance(subject, str) and subject.strip() else None
    if status is None and text is None:
        return []
    return [ActionChanged(TASK_SOURCE, key, text, status)]


class ApplyPatchRule(DerivationRule):
    """Codex ``apply_patch`` (function or custom tool): the files its patch names."""

    PLUGIN_NAME = "apply_patch"
    tools = frozenset({"apply_patch"})

    def may_mutate(self, call, ctx):
        return True

    def derive(self, call, result, ctx):
        args = call_arguments(call)
        patch = args.get("input", args.get("patch", ""))
        return _patch_facts(patch if isinstance(patch, str) else "", result.content, result.is_error, result.missing,
                            ctx)


_PATCH_REJECTED_RE = re.compile(r"verification failed|Invalid patch", re.I)
_PATCH_TARGET_RE = re.compile(r"Failed to find expected lines in (\S+?):?$", re.M)


def _patch_facts(patch: str, output: str, failed: bool, missing: bool, ctx: DerivationContext) -> list[Any]:
    """A patch that applied (or may have: no result) is one Mutation of its files; a rejected
    one is an ``apply_patch`` failure on the file it names, and a success closes such failures."""
    paths = tuple(ctx.path(p) for p in patch_paths(patch))
    rejected = _PATCH_REJECTED_RE.search(output)
    if missing or not (failed or rejected):
        return [Mutation(paths=paths, tool="apply_patch")] + ([] if missing else [ToolSuccess("apply_patch", paths)])
    if rejected:
        target = _PATCH_TARGET_RE.search(output)
        target = target.group(1) if target else None
        return [ToolFailure("apply_patch", error_signature(output), (ctx.path(target),) if target else paths,
                            _excerpt(output))]
    return [Mutation(paths=paths, tool="apply_patch")]


_EDIT_REJECTED_RE = re.compile(r"^(?:No replacement was performed|ERROR:|Error:|Invalid `path`|The path \S+ does not exist|"
                               r"Your proposed edit has introduced new syntax error)", re.M)


def _path_arg(args: dict[str, Any]) -> str | None:
    """The first file path the arguments name (:data:`latch.events.PATH_KEYS` order)."""
    return next(iter(argument_paths(args)), None)


def _swe_trailer(content: str, ctx: DerivationContext) -> str | None:
    """SWE-agent appends ``(Open file: X)`` and ``(Current directory: D)``; update ``ctx``."""
    cwd = re.findall(r"\(Current directory: ([^)\n]+)\)", content)
    if cwd and ctx.workspace is None:
        ctx.cwd = cwd[-1].strip().rstrip("/")
    opened = re.findall(r"\(Open file: ([^)\n]+)\)", content)
    if opened and opened[-1].strip() not in ("n/a", ""):
        ctx.open_file = opened[-1].strip()
    return ctx.open_file


def _legacy_path(call: ToolCall, args: dict[str, Any]) -> str | None:
    """SWE-agent legacy actions keep the whole command line (``{"command": "create x.py"}``)."""
    command = args.get("command")
    if isinstance(command, str):
        words = command.split("\n", 1)[0].split()
        if len(words) >= 2 and words[0] == call.name:
            return words[1]
    return None


class FileToolRule(DerivationRule):
    """File tools of every format: reads → observations, edits/writes/creates → mutations.

    ``str_replace_editor`` and Goose's ``developer__text_editor`` decide by their ``command`` (``view``
    reads; ``create``, ``write``, ``str_replace``, ``insert``, ``undo_edit`` write). Gemini CLI's
    ``read_file``/``write_file``/``replace``, Copilot CLI's ``view``/``edit``/``create`` and Goose's
    ``write``/``edit`` name their file in ``file_path`` or ``path``. SWE-agent's ``edit``/``insert``
    have no path: they act on the open file. A mutation counts when the call
    succeeded or its result never came (it may have happened).
    """

    PLUGIN_NAME = "file_tools"
    READS = frozenset({"Read", "read", "read_file", "view_file", "open", "View", "view"})
    WRITES = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit", "write", "write_file", "write_to_file", "create",
                        "create_file", "edit", "edit_file", "insert", "replace_in_file", "apply_diff", "replace"})
    EDITORS = frozenset({"str_replace_editor", "developer__text_editor"})
    EDITOR_COMMANDS = frozenset({"view", "create", "write", "str_replace", "insert", "undo_edit"})
    tools = READS | WRITES | EDITORS

    def may_mutate(self, call, ctx):
        if call.name in self.EDITORS:
            command = call_arguments(call).get("command")
            return command in self.EDITOR_COMMANDS and command != "view"
        return call.name in self.WRITES

    def derive(self, call, result, ctx):
        facts = self._derive(call, result, ctx)
        if ctx.format == AGENT_FORMAT and call.name in AGENT_EXPLICIT_TOOLS:
            return [f for f in facts if not isinstance(f, KERNEL_RECORDS)]  # the tool appended them itself
        return facts

    def _derive(self, call, result, ctx):
        args = call_arguments(call)
        open_file = _swe_trailer(result.content, ctx)
        raw = _path_arg(args)
        writes = call.name in self.WRITES
        if call.name in self.EDITORS:
            command = args.get("command")
            if command not in self.EDITOR_COMMANDS:
                return []
            writes = command != "view"
        elif raw is None:
            raw = _legacy_path(call, args) if call.name in ("open", "create") else None
            if raw is None and call.name in ("edit", "insert", "create", "open"):
                raw = open_file
        rejected = result.is_error or bool(_EDIT_REJECTED_RE.search(result.content[:500]))
        if not writes:
            if result.missing or raw is None or result.content.startswith("Here's the files and directories"):
                return []
            if rejected:
                return [ToolFailure(call.name, error_signature(result.content), (ctx.path(raw),),
                                    _excerpt(result.content))]
            if call.name == "open":
                ctx.open_file = raw
            return [FileObservation(path=ctx.path(raw)), ToolSuccess(call.name, (ctx.path(raw),))]
        if call.name == "create" and raw and not rejected:
            ctx.open_file = raw
        if result.missing:
            return [Mutation(paths=(ctx.path(raw),) if raw else (), tool=call.name)]
        actions = (ctx.path(raw) if raw else call.name,)
        if rejected:
            return [ToolFailure(call.name, error_signature(result.content), actions, _excerpt(result.content))]
        return [Mutation(paths=(ctx.path(raw),) if raw else (), tool=call.name), ToolSuccess(call.name, actions)]


BUILTIN_RULES: tuple[type[DerivationRule], ...] = (FileToolRule, ApplyPatchRule, PlanRule, CodexExecRule,
                                                   ProcessPollRule, ShellRule)
"""The built-in rule classes in the order they are tried (registered by :mod:`latch.default_plugins.derivation`)."""


def builtin_rules() -> tuple[DerivationRule, ...]:
    """New instances of :data:`BUILTIN_RULES`, in order: the rules used when the caller passes none."""
    return tuple(cls() for cls in BUILTIN_RULES)


# ------------------------------------------------------------------------------------ deriver
KERNEL_RECORDS = (StateUpdate, FileObservation, Mutation, ExternalChange, ValidationEvidence, ProcessStarted,
                  ProcessExited, WriterBlocker, Tombstone)


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
