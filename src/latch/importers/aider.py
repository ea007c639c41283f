"""Aider ``.aider.chat.history.md`` importer (FORMATS.md §8, §13).

One aider run → ONE Latch session. Aider appends every run to the same file,
each after a ``# aider chat started at <local time>`` header, and a new run
does not send the earlier runs' chat to the model (``--restore-chat-history``
is off by default): its ``Tokens: N sent`` figures count that run only. So the
file is a container (:meth:`AiderImporter.parse_all`: one ``ParsedSession``
per run, in file order; :meth:`AiderImporter.parse` returns the last run, the
one aider may still be writing). Each run's first event is its header as
``SystemNote(subtype="session_start")`` (``ts`` = the header's time, the only
timestamp in the format); lines before the first header (a file that does not
start with one) are run 0. Per-run state starts afresh at each header: the
model (``Model:``), the workspace, open calls.

The file has no ids and grows with every run, so a run's identity is what never
changes once written: ``external_key`` is ``"aider:sha256:<hash of the file's
first non-blank line>:run-<n>:<sha256[:16] of the run's header line>"`` (the
first part is :func:`~latch.importers._common.head_key`, the first run's header
with its start time to the second; run 0 has no header part). ``meta`` holds
``run`` (``n``, 1-based for headed runs), ``started`` (the header's time) and
``title`` (the header line). A grown file re-imports as: the runs before the
last are settled and add nothing, the last run appends its new events, each new
header starts a new session. Aider writes a turn's output lines (usage, edit
results, commits) after the reply, some only after the user answers a
confirmation, so the last run's last turn, or a user block the file ends with,
is the open tail (``ParsedSession.settled``) until the next block starts; a new
header closes the run before it (``settled`` ``None``).

How aider writes the file (``aider/io.py``) drives the parse, line by line
(``source_ref`` ``"line:<n>"``, 1-based):

* ``#### <text>  ``: user input, one prefixed line per input line. Consecutive
  ``####`` lines are ONE ``UserMessage`` (slash commands such as ``/add``,
  ``/run``, ``/undo`` included: the user typed them).
* ``> <text>  ``: aider/tool output. A multi-line message is prefixed on its first
  line only and ends at the line carrying the two trailing spaces (e.g. the
  "SEARCH/REPLACE block failed to match" report).
* everything else is assistant text; each block between user/output lines is ONE
  ``AssistantMessage`` (architect and editor replies are separate blocks).
  ``<thinking-content-…>`` … ``</thinking-content-…>`` sets
  ``reasoning_reported`` and its text is dropped.

Output lines are classified:

* ``Tokens: 9.7k sent[, 1.2k cache write][, 5k cache hit], 85 received. …`` →
  the ``Usage`` of the preceding response (a line with no response text before
  it gets an empty ``AssistantMessage``: it still was a model request). The
  values are aider's rounded display (``9.7k`` = 9,650–9,749; ``12k`` =
  11,500–12,499; under 1,000 exact). "sent" is the whole prompt (aider adds the
  cache writes to LiteLLM's ``prompt_tokens``, which holds the cache reads), so
  ``input_tokens = sent - cache hit - cache write`` (floored at 0: rounding).
  ``model`` is ``None`` and ``meta["usage_rounded"]`` is true: the figures are
  approximate (±5% at most) and, when the provider returned no usage, aider's
  own token count.
* ``Applied edit to <path>`` and the edit-failure report answer the preceding
  response's edits. Every SEARCH/REPLACE block whose outcome aider reported
  becomes ``ToolCall(name="edit", arguments={path, search, replace})`` (id
  ``"edit-L<n>"``, ``n`` = the ``<<<<<<< SEARCH`` line); its result is the
  ``Applied edit to …`` line, or the failure report (``is_error=True``) for a
  block that failed to match. Blocks that passed in a partly failed batch are
  applied by aider but only mentioned in the report: their result reads
  ``Applied edit to <path>``. An applied file with no SEARCH/REPLACE block
  (``whole`` format) gets ``arguments={path, content}`` from the fenced block
  aider took it from (``{path}`` alone when that block cannot be found). The
  blocks that became calls are cut from the assistant text (the call carries
  them); blocks with no reported outcome (ask mode, declined, interrupted) stay
  text.
* ``litellm.…Error: …`` → ``SystemNote(subtype="api_error")``.
* "Add file to the chat?" answered yes (``y``/``a``) after a reply's ``Tokens:`` line, its file named on the
  line before: the reply mentioned files, and aider sends the next request with its ``added_files`` reflection
  ("I added these files to the chat: …", ``aider/prompts.py``) as the user turn, which the file does not
  record → ``UserMessage(is_meta=True)`` with that text before the next reply (``source_ref``
  ``"line:<n>#reflection"``, ``n`` the last answer's line).
* anything else → ``SystemNote(subtype="aider_output")`` (consecutive lines
  joined). ``/run`` output is not in the file (aider prints it only to the
  terminal), so ``/run`` and its "Add … tokens of command output to the chat?"
  confirmation stay a user message and an ``aider_output`` note: no model
  request issued that command, so no tool call is invented.

``workspace`` is the run's first ``Cur working dir:`` (else ``Git working dir:``,
else ``None``); ``AssistantMessage.model`` is the run's ``Model:``/``Main model:``.
Malformed input: an empty file, binary junk, invalid UTF-8, or text with
neither a session header nor a ``####`` line raises ``TranscriptError``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import field
from pathlib import Path

from ..events import SystemNote, ToolCall, Usage, UserMessage, canonical_arguments
from ..records import dataclass
from ._common import JSONObject, SessionBuilder, head_key, head_text
from .base import Importer, ParsedSession, TranscriptError, decode_text

__all__ = ["AiderImporter", "IMPORTERS"]

_HEADER = "# aider chat started at "
_THINK_OPEN = re.compile(r"^\s*<thinking-content-([0-9a-f]+)>")
_TOKENS = re.compile(
    r"^Tokens: (?P<sent>[\d.]+[kM]?) sent"
    r"(?:, (?P<write>[\d.]+[kM]?) cache write)?(?:, (?P<hit>[\d.]+[kM]?) cache hit)?"
    r", (?P<received>[\d.]+[kM]?) received\."
)
_APPLIED = "Applied edit to "
_FAILED = re.compile(r"^# \d+ SEARCH/REPLACE blocks? failed to match!")
_NO_MATCH = re.compile(r"^## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (.+)$")
_API_ERROR = re.compile(r"^litellm\.\w*(Error|Exception)\b")
_MODEL = re.compile(r"^(?:Main model|Model): (\S+) with ")
_SEARCH = re.compile(r"^<{5,9} SEARCH\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
_REPLACE = re.compile(r"^>{5,9} REPLACE\s*$")
_FENCE = ("```", "````")
_ADD_FILE = re.compile(r"^Add file to the chat\? .*\]: ?(\S*)\s*$")
_WATCH_PROMPT = "Processing your request..."
# aider/prompts.py ``added_files``: the user turn aider sends after a reply that named files the user then added
_ADDED_FILES = "I added these files to the chat: {fnames}\nLet me know if there are others we should add."


@dataclass
class _Item:
    """One block of the file: ``kind`` is header, user, output or assistant; lines are 0-based, inclusive."""

    kind: str
    start: int
    end: int
    text: str
    reasoning: bool = False
    rows: list[tuple[int, str]] = field(default_factory=list)  # assistant: (file line index, text), thinking cut


@dataclass
class _Block:
    """One edit block in an assistant reply (lines relative to the reply's text)."""

    path: str
    args: JSONObject
    first: int
    last: int
    line_no: int  # 1-based file line of the block's marker (call id)


@dataclass
class _Turn:
    """A response and the output lines that follow it, until the next user/assistant/header block."""

    reply: _Item | None
    outputs: list[_Item] = field(default_factory=list)


def _is_user(line: str) -> bool:
    return line.startswith("####") and (len(line) == 4 or line[4] == " ") and line.endswith("  ")


def _is_output(line: str) -> bool:
    return line.startswith("> ") or line.rstrip() == ">"


def _boundary(line: str) -> bool:
    """A line that ends an assistant block: a session header, user input or (single-line-terminated) output."""
    return line.startswith(_HEADER) or _is_user(line) or (_is_output(line) and line.endswith("  "))


def _tokens(value: str) -> int:
    scale = {"k": 1_000, "M": 1_000_000}.get(value[-1], 1)
    return round(float(value.rstrip("kM")) * scale)


def _norm(path: str) -> str:
    p = path.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def _same_file(a: str, b: str) -> bool:
    """Paths equal, or one is a suffix of the other on a path boundary (cwd vs repo-root relative)."""
    a, b = _norm(a), _norm(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _clean_name(line: str) -> str:
    """A file name line as aider reads it (``strip_filename``: markdown decoration removed)."""
    name = line.strip()
    for fence in _FENCE[::-1]:
        if name.startswith(fence):
            name = name[len(fence) :]
            break
    return name.rstrip(":").lstrip("#").strip().strip("`").strip("*").strip()


def _scan(path: Path, lines: list[str]) -> list[_Item]:
    """Split the file into header, user, output and assistant blocks."""
    items: list[_Item] = []
    n, i = len(lines), 0
    while i < n:
        line = lines[i]
        if line.startswith(_HEADER):
            items.append(_Item("header", i, i, line[2:].strip()))
            i += 1
        elif _is_user(line):
            start = i
            while i < n and _is_user(lines[i]):
                i += 1
            items.append(_Item("user", start, i - 1, "\n".join(u[5:].rstrip() for u in lines[start:i])))
        elif _is_output(line) and (
            line.endswith("  ") or (items and items[-1].kind == "output" and items[-1].end == i - 1)
        ):
            start, body = i, [line[2:]]
            while not lines[i].endswith("  ") and i + 1 < n and not lines[i + 1].startswith(_HEADER):
                i += 1
                body.append(lines[i])
            items.append(_Item("output", start, i, "\n".join(body).strip()))
            i += 1
        else:
            start, rows, reasoning = None, [], False  # start: the first line holding text or thinking
            while i < n and not _boundary(lines[i]):
                if start is None and lines[i].strip():
                    start = i
                m = _THINK_OPEN.match(lines[i])
                if m:  # skip to the closing tag, or to the block's end when the reply was interrupted
                    close, reasoning = f"</thinking-content-{m.group(1)}>", True
                    while i < n and not _boundary(lines[i]) and close not in lines[i]:
                        i += 1
                    i += i < n and close in lines[i]
                    continue
                rows.append((i, lines[i]))
                i += 1
            while rows and not rows[-1][1].strip():
                rows.pop()
            while rows and not rows[0][1].strip():
                rows.pop(0)
            if start is not None:
                items.append(_Item("assistant", start, i - 1, "\n".join(t for _, t in rows), reasoning, rows))
    if not any(it.kind in ("header", "user") for it in items):
        raise TranscriptError(
            path, "line 1", "not an aider chat history: no '# aider chat started at' header and no '#### ' user lines"
        )
    return items


def _search_replace_blocks(rows: list[tuple[int, str]]) -> list[_Block]:
    """SEARCH/REPLACE blocks of a reply's rows (aider's ``find_original_update_blocks`` reading)."""
    lines = [t for _, t in rows]
    blocks: list[_Block] = []
    i, last_path = 0, None
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            i += 1
            continue
        div = next((j for j in range(i + 1, len(lines)) if _DIVIDER.match(lines[j])), None)
        end = None if div is None else next((j for j in range(div + 1, len(lines)) if _REPLACE.match(lines[j])), None)
        if div is None or end is None:
            break
        first, name = i, None
        for back in (1, 2):
            if i - back < 0:
                break
            prev = lines[i - back]
            if prev.startswith(_FENCE):
                first = i - back
                continue
            if prev.strip():
                name, first = _clean_name(prev), i - back
                if i - back - 1 >= 0 and lines[i - back - 1].startswith(_FENCE) and back == 1:
                    first = i - back - 1
            break
        name = name or last_path
        last = end + 1 if end + 1 < len(lines) and lines[end + 1].startswith(_FENCE) else end
        if name:
            search, replace = "\n".join(lines[i + 1 : div]), "\n".join(lines[div + 1 : end])
            blocks.append(
                _Block(name, {"path": name, "search": search, "replace": replace}, first, last, rows[i][0] + 1)
            )
            last_path = name
        i = end + 1
    return blocks


def _whole_file_blocks(rows: list[tuple[int, str]]) -> list[_Block]:
    """Fenced blocks preceded by a file name line (aider's ``whole`` edit format: fences toggle)."""
    lines = [t for _, t in rows]
    blocks: list[_Block] = []
    opened: tuple[str, int] | None = None
    for i, line in enumerate(lines):
        if not line.startswith(_FENCE):
            continue
        if opened is not None:
            name, start = opened
            blocks.append(
                _Block(
                    name, {"path": name, "content": "\n".join(lines[start + 2 : i])}, start, i, rows[start + 1][0] + 1
                )
            )
            opened = None
        elif i > 0 and (name := _clean_name(lines[i - 1])):
            opened = (name, i - 1)
    return blocks


def _failed_blocks(report: str) -> list[tuple[str, str]]:
    """``(path, search text)`` of each block an edit-failure report names."""
    out, lines = [], report.split("\n")
    for i, line in enumerate(lines):
        m = _NO_MATCH.match(line)
        if m and i + 1 < len(lines) and _SEARCH.match(lines[i + 1]):
            end = next((j for j in range(i + 2, len(lines)) if _DIVIDER.match(lines[j])), len(lines))
            out.append((m.group(1).strip(), "\n".join(lines[i + 2 : end])))
    return out


def _fenced_lines(lines: list[str]) -> set[int]:
    """Indexes of the lines inside (or opening/closing) a fenced code block (```` ``` ```` or ``~~~``)."""
    out: set[int] = set()
    fence: str | None = None
    for i, line in enumerate(lines):
        mark = line.lstrip()[:3]
        if fence is None and mark in ("```", "~~~"):
            fence = mark
            out.add(i)
        elif fence is not None:
            out.add(i)
            if mark == fence:
                fence = None
    return out


class AiderImporter(Importer):
    """Aider chat history markdown (``.aider.chat.history.md``)."""

    PLUGIN_NAME = "aider"
    DESCRIPTION = "Aider chat history markdown (.aider.chat.history.md), one session per aider run"

    def sniff(self, path: Path, head: bytes) -> int:
        text = head_text(head)
        if text.lstrip("\n").startswith(_HEADER) or path.name.endswith(".aider.chat.history.md"):
            return 95
        lines = text.split("\n")
        fenced = _fenced_lines(lines)  # a header quoted in a code block (docs about aider) is no header
        if any(line.startswith(_HEADER) and i not in fenced for i, line in enumerate(lines)):
            return 80
        if path.suffix in (".md", ".markdown", ".txt") and not fenced and any(_is_user(u) for u in lines):
            return 60
        return 0

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """The file's last run (the one aider may still be writing); see :meth:`parse_all`."""
        return self.parse_all(path, data)[-1]

    def parse_all(self, path: Path, data: bytes) -> list[ParsedSession]:
        """One :class:`ParsedSession` per aider run of the file, in file order (at least one).

        Raises :class:`TranscriptError` for the whole file (see the module docstring)."""
        text = decode_text(path, data).replace("\r\n", "\n")
        items = _scan(path, text.split("\n"))
        file_key = head_key(self.PLUGIN_NAME, text)
        runs: list[list[_Item]] = []
        for item in items:
            if item.kind == "header" or not runs:
                runs.append([])
            runs[-1].append(item)
        first = 1 if runs[0][0].kind == "header" else 0  # lines before the first header: run 0
        return [self._run(path, file_key, n, run, last=run is runs[-1]) for n, run in enumerate(runs, first)]

    def _run(self, path: Path, file_key: str, n: int, items: list[_Item], *, last: bool) -> ParsedSession:
        """One run's session: ``items`` from its header (none for run 0) up to the next header."""
        b = SessionBuilder(path, self.PLUGIN_NAME)
        model: str | None = None
        workspace: dict[str, str] = {}
        turn: _Turn | None = None
        header = items[0] if items[0].kind == "header" else None
        for item in items:
            ref = f"line:{item.start + 1}"
            if item.kind == "output":
                m = _MODEL.match(item.text)
                if m:
                    model = m.group(1)
                for key in ("Cur working dir: ", "Git working dir: "):
                    if item.text.startswith(key):
                        workspace.setdefault(key, item.text[len(key) :].strip())
                if turn is None:
                    turn = _Turn(None)
                turn.outputs.append(item)
                continue
            self._flush(b, turn, model)
            if item.kind == "assistant" and (added := _added_files(turn)) is not None:
                b.add(
                    UserMessage(text=_ADDED_FILES.format(fnames=", ".join(sorted(added[1]))), is_meta=True),
                    f"line:{added[0] + 1}#reflection",
                    None,
                )
            turn = None
            if item.kind == "assistant":
                turn = _Turn(item)
            elif item.kind == "user":
                b.close_open("the next user message arrived first")
                if last and item is items[-1]:
                    b.open_here()  # more lines of the prompt may follow
                b.add(UserMessage(text=item.text), ref, None)
            else:
                b.add(
                    SystemNote(text=item.text, subtype="session_start"),
                    ref,
                    item.text.removeprefix(_HEADER[2:]).strip(),
                )
        if last:
            b.open_here()  # the last turn: its output lines may still follow
        self._flush(b, turn, model)
        if not last:
            b.close_open("aider restarted before the result")  # the next header: this run is over
        ws = workspace.get("Cur working dir: ") or workspace.get("Git working dir: ")
        meta: dict[str, object] = {"run": n, "usage_rounded": True}
        key = f"{file_key}:run-{n}"
        if header is not None:
            meta["started"] = header.text.removeprefix(_HEADER[2:]).strip()
            meta["title"] = header.text
            key += ":" + hashlib.sha256(header.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return b.finish(external_key=key, workspace=ws, meta=meta, growing=True)

    def _flush(self, b: SessionBuilder, turn: _Turn | None, model: str | None) -> None:
        """Emit one turn: the response (with its edit calls), its usage, edit results, then notes."""
        if turn is None:
            return
        reply, outputs = turn.reply, turn.outputs
        usage_lines = [o for o in outputs if _TOKENS.match(o.text)]
        used: set[int] = set()
        slot = None
        if reply is not None or usage_lines:
            text = reply.text if reply else ""
            calls: list[ToolCall] = []
            results: list[tuple[str, str, bool, str]] = []
            if reply is not None:
                text, calls, results, used = _edits(reply, outputs)
            b.close_open("the next model request started first")
            slot = b.assistant(
                f"line:{(reply or usage_lines[0]).start + 1}",
                None,
                text=text,
                calls=calls,
                reasoning=bool(reply and reply.reasoning),
                model=model,
            )
            for call_id, content, is_error, ref in results:
                b.result(call_id, content, ref, None, is_error=is_error)
        notes: list[_Item] = []

        def flush_notes() -> None:
            if notes:
                b.add(
                    SystemNote(text="\n".join(o.text for o in notes), subtype="aider_output"),
                    f"line:{notes[0].start + 1}",
                    None,
                )
                notes.clear()

        for o in outputs:
            m = _TOKENS.match(o.text)
            if m:
                sent, received = _tokens(m["sent"]), _tokens(m["received"])
                hit = _tokens(m["hit"]) if m["hit"] else None
                write = _tokens(m["write"]) if m["write"] else None
                usage = Usage(
                    input_tokens=max(sent - (hit or 0) - (write or 0), 0),
                    output_tokens=received,
                    cache_read_tokens=hit,
                    cache_write_tokens=write,
                )
                if slot is None or slot.usage is not None:  # a further request with no reply text
                    flush_notes()
                    b.close_open("the next model request started first")
                    slot = b.assistant(f"line:{o.start + 1}#request", None, model=model)
                b.set_usage(slot, usage, f"line:{o.start + 1}", None)
            elif id(o) in used:
                continue
            elif _API_ERROR.match(o.text):
                flush_notes()
                b.add(SystemNote(text=o.text, subtype="api_error"), f"line:{o.start + 1}", None)
            else:
                notes.append(o)
        flush_notes()


def _added_files(turn: _Turn | None) -> tuple[int, list[str]] | None:
    """``(line of the last answer, files)`` when ``turn``'s reply named files the user then agreed to add: the
    "Add file to the chat?" answers after the reply's ``Tokens:`` line (``base_coder.check_for_file_mentions``),
    which aider answers with the ``added_files`` reflection as the next request's user turn; else ``None``. A
    watch-mode request (``Processing your request...``) asks about its own prompt's mentions, no reflection."""
    if turn is None or (turn.reply is None and not any(_TOKENS.match(o.text) for o in turn.outputs)):
        return None
    files: list[str] = []
    subject: str | None = None
    at = -1
    after_usage = turn.reply is not None and not any(_TOKENS.match(o.text) for o in turn.outputs)
    for o in turn.outputs:
        if _TOKENS.match(o.text):
            after_usage, files, subject = True, [], None
        elif o.text.startswith(_WATCH_PROMPT):
            after_usage = False
        elif after_usage and (m := _ADD_FILE.match(o.text)):
            if subject is not None and m.group(1)[:1].lower() in ("y", "a"):
                files.append(subject)
                at = o.end
            subject = None
        else:
            subject = o.text.strip() if "\n" not in o.text else None
    return (at, files) if files else None


def _edits(
    reply: _Item, outputs: list[_Item]
) -> tuple[str, list[ToolCall], list[tuple[str, str, bool, str]], set[int]]:
    """Edit calls of ``reply`` whose outcome ``outputs`` report.

    Returns the reply text without the blocks that became calls, the calls,
    their results ``(call id, content, is_error, source_ref)`` and the ``id()``
    of the output items consumed as results.
    """
    applied = [o for o in outputs if o.text.startswith(_APPLIED)]
    failure = next((o for o in outputs if _FAILED.match(o.text)), None)
    if not applied and failure is None:
        return reply.text, [], [], set()
    blocks = _search_replace_blocks(reply.rows)
    failed = _failed_blocks(failure.text) if failure else []
    chosen: list[tuple[_Block, _Item, bool, str]] = []  # block, outcome line, is_error, result content
    for blk in blocks:
        hit = next((o for o in applied if _same_file(o.text[len(_APPLIED) :], blk.path)), None)
        if failure is not None and (
            not failed
            or any(_same_file(p, blk.path) and srch.strip() == blk.args["search"].strip() for p, srch in failed)
        ):
            chosen.append((blk, failure, True, failure.text))
        elif hit is not None:
            chosen.append((blk, hit, False, hit.text))
        elif failure is not None:  # passed in a partly failed batch: applied, reported only in the failure
            chosen.append((blk, failure, False, f"{_APPLIED}{blk.path}"))
    whole = _whole_file_blocks(reply.rows)
    for o in applied:
        target = o.text[len(_APPLIED) :]
        if any(_same_file(target, blk.path) for blk in blocks):
            continue
        written = next((w for w in whole if _same_file(w.path, target)), None)
        chosen.append((written or _Block(target, {"path": target}, -1, -2, o.start + 1), o, False, o.text))
    chosen.sort(key=lambda c: c[0].line_no)
    drop = {i for blk, *_ in chosen for i in range(blk.first, blk.last + 1)}
    kept = "\n".join(t for i, (_, t) in enumerate(reply.rows) if i not in drop)
    calls, results = [], []
    for blk, outcome, is_error, content in chosen:
        call = ToolCall(id=f"edit-L{blk.line_no}", name="edit", arguments=canonical_arguments(blk.args))
        calls.append(call)
        results.append((call.id, content, is_error, f"line:{outcome.start + 1}"))
    used = {id(o) for _, o, _, _ in chosen}
    return re.sub(r"\n{3,}", "\n\n", kept).strip("\n"), calls, results, used


IMPORTERS = [AiderImporter]
