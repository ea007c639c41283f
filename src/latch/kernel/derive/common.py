"""Helpers the rules share: arguments, error signatures, shell outcomes, patches."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ...events import RawArguments, ToolCall
from ...lazyre import lazy_compile
from ...records import dataclass
from ..events import FileObservation, Mutation, ProcessExited, ValidationEvidence
from ..shell import classify_command, command_text
from .facts import ToolFailure, ToolSuccess
from .rules import DerivationContext


# ------------------------------------------------------------------------------------- helpers
def call_arguments(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as a dict (:meth:`ToolCall.args`; shared, do not mutate): empty text is ``{}``,
    a non-object or non-JSON string becomes ``{"input": value}`` (a fresh dict)."""
    if not call.arguments:
        return {}
    value = call.args()
    return value if isinstance(value, dict) else {"input": str(value) if isinstance(value, RawArguments) else value}


_HEADER_RE = lazy_compile(
    r"^(Script (completed|failed)|Wall time [\d.]+ seconds|Output:|Script error:|Chunk ID: \S+|"
    r"Process exited with code -?\d+|Original token count: \d+|Total output lines: \d+)$"
)
_ERRORISH = (
    r"error|fail|exception|not found|denied|invalid|cannot|can't|unable|refused|\btimed out\b|"
    r"no such|panic|fatal|abort|reject|does not exist|unexpected"
)
_ERRORISH_RE = lazy_compile(_ERRORISH, re.I)


_ANSI_RE = lazy_compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[()][A-Za-z0-9]|[@-Z\\-_])")
_LEADING_ERROR_RE = lazy_compile(
    r"^(?:error|fatal|panic|exception|failed|fail\b|npm err|[\w.]*(?:Error|Exception)\b)", re.I
)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colors, cursor moves)."""
    return _ANSI_RE.sub("", text) if "\x1b" in text else text


def _meaningful_lines(text: str) -> list[str]:
    return [s for s in (line.strip() for line in strip_ansi(text).splitlines()) if s and not _HEADER_RE.match(s)]


def _error_line(lines: list[str]) -> str:
    """The line that best names the error: one starting like an error, else a test/build failure
    marker, else one mentioning an error, else the first.

    ``lines`` hold no ``\n`` (:func:`_meaningful_lines`) and neither search pattern matches across one, so
    each searches the lines joined by ``\n`` once: its first match lies in the first line it matches
    (``\b`` and multi-line ``^`` see ``\n`` as they see a text's edge)."""
    line = next((s for s in lines if _LEADING_ERROR_RE.match(s)), None)
    if line is not None or not lines:
        return line or ""
    return _marked_line(lines)


_LEADING_ERROR_LINE_RE = lazy_compile(
    r"\n[ \t\x1f]*(?:error|fatal|panic|exception|failed|fail\b|npm err|[\w.]*(?:Error|Exception)\b)", re.I
)
r""":data:`_LEADING_ERROR_RE` at the start of a line after its leading whitespace, led by the ``\n`` before the line
(the regex looks for that newline in C, then tries the alternatives there only): in ASCII text whose only line break
is ``\n`` (:func:`_newline_lines`), a line's leading whitespace is made of spaces, tabs and ``\x1f``, and what follows
a stripped line (whitespace, a newline, the text's end) ends ``[\w.]*`` and makes ``\b`` as the line's end does."""
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")
r"""The characters besides ``\n`` that :meth:`str.splitlines` breaks ASCII text at."""


def _newline_lines(text: str) -> bool:
    r"""Whether ``text`` is ASCII with ``\n`` as its only line break (each ``in`` test a ``memchr``)."""
    if not text.isascii():
        return False
    for c in _OTHER_BREAKS:
        if c in text:
            return False
    return True


def _text_error_line(text: str) -> str | None:
    r"""``_error_line(_meaningful_lines(text))``, ``None`` when ``text`` has no meaningful line: the first line
    that starts like an error is found by :data:`_LEADING_ERROR_LINE_RE` (ASCII text broken at ``\n`` only), else
    the lines are taken one at a time and the first that starts like an error ends the reading."""
    text = strip_ansi(text)
    if _newline_lines(text):
        found = _LEADING_ERROR_LINE_RE.search("\n" + text)
        if found is not None:  # found.start() in the text is where the line starts
            end = text.find("\n", found.start())
            s = text[found.start() : end if end >= 0 else len(text)].strip()
            if not _HEADER_RE.match(s) and _LEADING_ERROR_RE.match(s):
                return s
        else:
            kept = [s for s in (raw.strip() for raw in text.splitlines()) if s and not _HEADER_RE.match(s)]
            return _marked_line(kept) if kept else None
    lines: list[str] = []
    for raw in text.splitlines():
        s = raw.strip()
        if s and not _HEADER_RE.match(s):
            if _LEADING_ERROR_RE.match(s):
                return s
            lines.append(s)
    return _marked_line(lines) if lines else None


def _marked_line(lines: list[str]) -> str:
    """:func:`_error_line` of ``lines`` (not empty) where no line starts like an error."""
    joined = "\n".join(lines)
    for search in (_fail_search, _errorish_search):
        m = search(joined)
        if m is not None:
            return lines[joined.count("\n", 0, m.start())]
    return lines[0]


def error_signature(text: str) -> str:
    """A normalized one-line signature of an error text (same failure → same signature).

    The first line that looks like an error (else the first line), with quoted
    strings, paths, hex and numbers replaced by placeholders, at most 160 characters.
    """
    line = _text_error_line(text)
    return _line_signature(line) if line is not None else "(no output)"


_QUOTED_RE = lazy_compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_PATH_RE = lazy_compile(r"(?:[A-Za-z]:)?(?:[\w.\-~]*/)+[\w.\-]*")
_HEX_RE = lazy_compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b")
_DIGITS_RE = lazy_compile(r"\d+")
_SPACES_RE = lazy_compile(r"\s+")


SIGNED_LINES = 1024
"""Error lines whose signature is kept (the newest used, each at most :data:`SIGNED_LINE_CHARS` characters): a
failing command fails again with the same line."""
SIGNED_LINE_CHARS = 1000
"""The longest error line whose signature is kept (:data:`SIGNED_LINES`)."""


def _line_signature(line: str) -> str:
    """The signature of one error line (see :func:`error_signature`), kept for a short line."""
    return _kept_line_signature(line) if len(line) <= SIGNED_LINE_CHARS else _signed(line)


@functools.lru_cache(maxsize=SIGNED_LINES)
def _kept_line_signature(line: str) -> str:
    return _signed(line)


def _signed(line: str) -> str:
    """:func:`_line_signature`, worked out."""
    sig = _QUOTED_RE.sub("<q>", line) if "'" in line or '"' in line or "`" in line else line
    if "/" in sig:  # every path holds one
        sig = _PATH_RE.sub("<path>", sig)
    sig = _HEX_RE.sub("<hex>", sig)
    sig = _DIGITS_RE.sub("<n>", sig)
    sig = _SPACES_RE.sub(" ", sig).strip()
    return sig[:160]


def _excerpt(text: str, width: int = 200) -> str:
    return _cut(_text_error_line(text) or "", width)


def _signature_and_excerpt(text: str) -> tuple[str, str]:
    """``(error_signature(text), _excerpt(text))``, the text's lines read once."""
    line = _text_error_line(text)
    return (_line_signature(line) if line is not None else "(no output)"), _cut(line or "")


def _cut(line: str, width: int = 200) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def _action(call: ToolCall, args: dict[str, Any]) -> tuple[str, ...]:
    for key in ("command", "cmd", "file_path", "notebook_path", "path", "filename", "cell_id", "session_id"):
        value = args.get(key)
        if value is not None:
            text = command_text(value) if key in ("command", "cmd") else str(value)
            if text:
                return (_one_line(text),)
    return (call.arguments[:300],)


ONE_LINE_CHARS = 300
"""The most characters of a command or path a failure lineage's action keeps (whitespace runs made one space)."""


def _one_line(text: str) -> str:
    """``" ".join(text.split())[:ONE_LINE_CHARS]``, from a prefix of ``text`` when that gives as many characters:
    collapsing whitespace maps a prefix of a text to a prefix of the text's collapsed form."""
    for reach in (2 * ONE_LINE_CHARS, 4 * ONE_LINE_CHARS):
        if len(text) <= reach:
            break
        head = " ".join(text[:reach].split())
        if len(head) >= ONE_LINE_CHARS:
            return head[:ONE_LINE_CHARS]
    return " ".join(text.split())[:ONE_LINE_CHARS]


_EXIT_RES = (
    lazy_compile(
        r"^(?:Process exited with code|Command exited with code|Exit code:?|exit code:?|Exit Code:|"
        r"Exit status:?|exit status:?)\s*(-?\d+)\b",
        re.M,
    ),
    lazy_compile(r"executed with exit code (-?\d+)"),
    lazy_compile(r"<exit_code>(-?\d+)</exit_code>"),
    lazy_compile(r"<exited with exit code (-?\d+)>\s*$"),
)
_FAIL_RE = lazy_compile(
    r"test result: FAILED|^FAILED\b|\b[1-9]\d* (?:failed|failing|errors?)\b|^error(?:\[E\d+\])?:|^ERROR\b|"
    r"Traceback \(most recent call last\)|npm ERR!|^npm error\b|BUILD FAILURE|BUILD FAILED|^FAIL\b|^--- FAIL|make: \*\*\*|"
    r"panicked at|Segmentation fault|^Diff in \S+|\berror TS\d+:",
    re.M,
)
_FAIL_WORD_RE = lazy_compile(r"FAIL|fail|error|ERR|Traceback|make: \*\*\*|panicked at|Segmentation fault|Diff in ")
"""A literal that each alternative of :data:`_FAIL_RE` holds (a match holds one, on its own line)."""
_ERRORISH_LOWER_RE = lazy_compile(_ERRORISH)
""":data:`_ERRORISH_RE` for lower-cased ASCII text (there ``re.I`` matches exactly the lower-cased letters)."""


def _fail_search(text: str) -> re.Match[str] | None:
    """``_FAIL_RE.search(text)``, the same match, searched only in the lines that hold one of its literals
    (:data:`_FAIL_WORD_RE`). No alternative matches across a ``\n``, so the first match lies in such a line;
    searched between that line's edges, ``^`` and ``\b`` see what they see in the whole text (a ``\n`` or
    the text's edge). The regex tries every alternative at every position; the literals are found in C."""
    pos = 0
    while (word := _FAIL_WORD_RE.search(text, pos)) is not None:
        start = text.rfind("\n", 0, word.start()) + 1
        end = text.find("\n", word.end())
        if end < 0:
            end = len(text)
        found = _FAIL_RE.search(text, start, end)
        if found is not None:
            return found
        pos = end + 1
    return None


def _errorish_search(text: str) -> re.Match[str] | None:
    """``_ERRORISH_RE.search(text)`` (same span): on ASCII text, the case-sensitive form over the lower-cased copy."""
    return _ERRORISH_LOWER_RE.search(text.lower()) if text.isascii() else _ERRORISH_RE.search(text)


_PASS_RE = lazy_compile(
    r"test result: ok|\b\d+ passed\b|^OK\b|^PASS\b|BUILD SUCCESS|All tests passed|no issues found|"
    r"Compiled successfully|^\s*Finished\b|^ok\s|\bbuilt in [\d.]+m?s\b",
    re.M,
)


@dataclass(frozen=True, slots=True)
class Run:
    """What a command run produced: output text and what the harness said about its exit."""

    output: str
    exit_code: int | None = None
    is_error: bool = False
    missing: bool = False


def _exit_code(output: str) -> int | None:
    if "xit" not in output:  # in every alternative of every pattern
        return None
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
    if validation and _fail_search(output):
        return "failed", None
    if run.is_error:
        return "failed", None
    if validation and _PASS_RE.search(output):
        return "passed", None
    if ctx.error_flag_reliable:
        return "passed", None
    return "unknown", None


def _summary(output: str) -> str:
    """The last meaningful line (:func:`_meaningful_lines`) marked as a failure or a pass, else the last one
    (``""`` when none), cut to 200 characters: the lines are read from the end, up to the first marked one."""
    last = None
    for raw in reversed(strip_ansi(output).splitlines()):
        s = raw.strip()
        if not s or _HEADER_RE.match(s):
            continue
        if _fail_search(s) or _PASS_RE.search(s):
            return _cut(s)
        if last is None:
            last = s
    return _cut(last or "")


def shell_facts(
    tool: str, script: str, run: Run, ctx: DerivationContext, *, process_id: str | None = None
) -> list[Any]:
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
                facts.append(
                    ValidationEvidence(
                        command=script,
                        status=status,
                        requirements=validations,
                        exit_code=code,
                        summary=_summary(run.output),
                    )
                )
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
        facts.append(
            ValidationEvidence(
                command=command, status=status, requirements=validations, exit_code=code, summary=_summary(run.output)
            )
        )
        facts.append(_outcome(tool, command, validations, status, run.output))
    return facts


def _outcome(tool: str, script: str, validations: tuple[str, ...], status: str, output: str) -> Any:
    """The failure or success of a command: its text and validation segments are the lineage actions;
    a passing validation of a program (cargo, npm, pytest...) also closes that program's validation failures."""
    if validations:
        families = tuple(dict.fromkeys(f"validation:{v.split()[0]}" for v in validations))
        actions = tuple(dict.fromkeys((_one_line(script),) + validations))
    else:
        families, actions = (), (_one_line(script),)
    if status == "failed":
        signature, excerpt = _signature_and_excerpt(output)
        return ToolFailure(tool, signature, actions + families, excerpt)
    return ToolSuccess(tool, actions + (families if status == "passed" else ()))


_PATCH_FILE_RE = lazy_compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)


def patch_paths(patch: str) -> tuple[str, ...]:
    """Files named by an ``*** Begin Patch`` text (Add/Update/Delete File, Move to), in order."""
    if "*** Begin Patch\n" not in patch:  # a patch inside a JavaScript string literal: newlines escaped
        patch = patch.replace("\\n", "\n")
    seen: dict[str, None] = {}
    for m in _PATCH_FILE_RE.finditer(patch):
        seen[m.group(1) or m.group(2)] = None
    return tuple(seen)


def _unwrap_output(content: str) -> tuple[str, int | None]:
    """``(output, exit code or None)`` of a shell result: Codex ``shell`` results are JSON ``{"output", "metadata":
    {"exit_code"}}``; unwrap them (any other text is the output itself)."""
    if content.startswith("{") and '"metadata"' in content:
        try:
            obj = json.loads(content)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply
            return content, None
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            meta = obj.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return obj["output"], code if isinstance(code, int) else None
    return content, None
