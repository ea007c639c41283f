"""L2 episodic index: scored, bounded entries over user-intent event ranges (spec: "Episodes").

An :class:`Episode` covers a contiguous range of one session's events
(``first_seq``..``last_seq``, inclusive) and carries its topic, file entities,
tool names, structural markers and lexical term ids. Episodes are indexes, not
truth: every rendered line points at its raw seq range, and exact recall stays
with FTS (spec: "Summaries are indexes, not truth").

Segmentation
    A non-meta :class:`~latch.events.UserMessage` (a new user intent) closes the
    open episode and starts a new one whose topic is that message. Events before
    the first user prompt form an episode with the topic ``"(session start)"``.
    A volume cap splits long intents: before accepting an event that can start
    a unit (anything except a ``ToolResult`` or ``Usage``), the open episode is
    closed when it already holds :data:`MAX_EPISODE_EVENTS` events or
    :data:`MAX_EPISODE_CHARS` characters of event text; the continuation keeps
    the topic and counts ``part`` up. The cap is in characters (≈ 4 per token
    for ASCII text), not estimated tokens, so segmentation never depends on the
    configured estimator and a ``set_estimator`` never moves episode boundaries.

Markers (a bitmask over :data:`latch.hotpaths.MARKER_BITS`)
    * ``validation_passed`` / ``validation_failed``: the result of a test-like
      command (pytest, cargo test/check/clippy, go test, npm test, tox, make
      check, mypy, ruff, tsc, ...): ``exit_code == 0`` passes, a non-zero exit
      code or ``is_error`` fails (an aborted call's ``missing`` placeholder is no
      validation). A Copilot CLI ``bash`` with ``mode: "async"`` only started: its class waits for the
      first ``read_bash`` of its ``shellId`` whose result has an exit code.
    * ``mutation``: a successful result of an edit/write/patch call (tool names
      such as Edit, Write, apply_patch, str_replace_editor create/str_replace/
      insert, or a command carrying ``*** Begin Patch``, ``apply_patch``,
      ``sed -i``, ``git apply``).
    * ``evidence``: a successful result of a read/search call (Read, Grep, Glob,
      open, find_file, str_replace_editor view, or a ``cat``/``sed -n``/``rg``/
      ``grep``/``ls``/``find`` command) or an event kind naming evidence.
    * ``failure``: an ``is_error`` tool result or an ``api_error`` note.
    * ``reground``: a foreign :class:`~latch.events.CompactionMarker`, a
      ``reground``/``compact_boundary``/``manual_compact`` note, or an event
      kind naming a compaction or re-ground.

Terms and files
    Terms are lower-cased words of 3 to 32 characters starting with a letter
    (Unicode-aware, minus a small English stop list); runs of CJK characters
    contribute their character bigrams, so CJK terms of two or more characters
    match. Each text field is scanned up to :data:`SCAN_CHARS` characters; tool
    results and notes contribute terms from their first :data:`RESULT_TERM_CHARS`
    characters only (output is noisier than intent). An
    episode keeps at most :data:`TERMS_PER_EPISODE` terms: those of its opening
    prompt first, then the most frequent (ties: first seen). File entities are
    paths found in tool call arguments (kept first; working-directory arguments
    such as ``workdir`` are skipped), results and text, at most
    :data:`FILES_PER_EPISODE`. Term and file ids come from dictionaries owned by
    the index, assigned in order of first sighting, so an incremental build and
    a full rebuild assign identical ids.

Incremental building
    :class:`EpisodeIndex` keeps the closed episodes, the open trailing segment
    and a seq watermark. :meth:`EpisodeIndex.extend` accepts events past the
    watermark; :meth:`EpisodeIndex.rebuild` is the deterministic full rebuild.
    Both run the same accumulation code, so ``extend`` at any prefix equals a
    rebuild of that prefix (pinned by tests over the corpus).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from itertools import filterfalse
from typing import Any

from .. import hotpaths
from ..events import (
    ATTACHMENT_NOTE,
    AssistantMessage,
    CompactionMarker,
    Event,
    EventClassTable,
    RawArguments,
    SubagentMarker,
    SystemNote,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    parse_arguments,
)
from ..lazyre import lazy_compile
from ..records import dataclass

__all__ = [
    "Episode",
    "EpisodeIndex",
    "MAX_EPISODE_EVENTS",
    "MAX_EPISODE_CHARS",
    "TERMS_PER_EPISODE",
    "FILES_PER_EPISODE",
    "SCAN_CHARS",
    "RESULT_TERM_CHARS",
    "TOPIC_CHARS",
    "extract_terms",
    "normalize_path",
]

MAX_EPISODE_EVENTS = 128
"""Volume cap: an episode holding this many events is split at the next unit start."""
MAX_EPISODE_CHARS = 64_000
"""Volume cap in characters of event text (≈ 16,000 tokens of ASCII text)."""
TERMS_PER_EPISODE = 64
FILES_PER_EPISODE = 24
SCAN_CHARS = 16_384
"""Characters of each text field scanned for terms and paths."""
RESULT_TERM_CHARS = 2_048
"""Characters of a tool result or note scanned for terms."""
TOPIC_CHARS = 96
"""Topic bound in characters (the opening prompt's first words, whitespace collapsed)."""

_BIT = {name: 1 << i for i, name in enumerate(hotpaths.MARKER_BITS)}
VALIDATION_PASSED = _BIT["validation_passed"]
VALIDATION_FAILED = _BIT["validation_failed"]
REGROUND = _BIT["reground"]
MUTATION = _BIT["mutation"]
EVIDENCE = _BIT["evidence"]
FAILURE = _BIT["failure"]


@dataclass(frozen=True, slots=True)
class Episode:
    """One episode: a contiguous raw event range and what it is about.

    ``number`` is its 1-based position in the index; ``part`` counts volume-cap
    continuations of one intent (1 = the segment the prompt opened). ``events``
    is the number of events in ``first_seq..last_seq``. ``files`` and ``tools``
    are in order of first mention; ``markers`` is a bitmask over
    :data:`latch.hotpaths.MARKER_BITS`; ``term_ids`` index the owning
    :class:`EpisodeIndex`'s term dictionary. ``closed`` is ``False`` only for
    the open trailing segment, which later events may still extend.
    """

    number: int
    part: int
    first_seq: int
    last_seq: int
    events: int
    topic: str
    files: tuple[str, ...]
    tools: tuple[str, ...]
    markers: int
    term_ids: tuple[int, ...]
    closed: bool

    @property
    def marker_names(self) -> tuple[str, ...]:
        """The set markers' names, in :data:`latch.hotpaths.MARKER_BITS` order."""
        return tuple(name for name, bit in _BIT.items() if self.markers & bit)


# --------------------------------------------------------------------------- text features
_STOP = hotpaths.STOP_WORDS
_CJK_RE = lazy_compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_EXTS = "|".join(hotpaths.PATH_EXTENSIONS)
_PATH = (
    r"(?<![\w:/.\\@-])"
    r"((?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"
    r"|[\w+-][\w.@+-]*\.(?:" + _EXTS + r"))"
    r"(?![\w/])"
)
_EXT_RE = lazy_compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
_ASCII_LETTER = re.compile("[A-Za-z]").search
"""On ASCII text, whether a name holds a letter (``str.isalpha`` holds for exactly these ASCII characters)."""


def _trie(words: Iterable[str]) -> str:
    """A regex matching exactly ``words``, as a trie of literals (the engine tries alternatives one by one)."""
    rest: dict[str, list[str]] = {}
    for w in sorted(set(words)):
        if w:
            rest.setdefault(w[0], []).append(w[1:])
    alts = [re.escape(c) + _trie(tails) for c, tails in rest.items()]
    if not alts:
        return ""
    body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return "(?:" + body + ")?" if "" in words else body


_EXT_TRIE = _trie(_EXTS.split("|"))


def extract_terms(text: str) -> list[str]:
    """The lexical terms of ``text``, duplicates kept: CJK terms, then words, each in text order.

    CJK runs yield their character bigrams (a lone CJK character yields
    itself); the rest yields lower-cased words of 3-32 characters starting
    with a letter, minus stop words (longer words are skipped). Only the first
    :data:`SCAN_CHARS` characters are read.
    """
    text = text[:SCAN_CHARS]
    if text.isascii():
        return hotpaths.ascii_terms(text)  # the ASCII scanner's words, minus stop words, in one native pass
    text = text.lower()
    out: list[str] = []
    if not text.isascii() and _CJK_RE.search(text):
        for run in _CJK_RE.findall(text):
            out.extend(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
        text = _CJK_RE.sub(" ", text)
    out.extend(filterfalse(_STOP.__contains__, _scanner(text).word.findall(text)))
    return out


def normalize_path(path: str) -> str:
    """A file entity as stored: quotes, ``./`` and trailing punctuation stripped."""
    p = path.strip().strip("'\"`").rstrip(".,:;)")
    while p.startswith("./"):
        p = p[2:]
    return p


def _hints(sc: _Scanner, text: str) -> Iterator[re.Match[str]]:
    """``sc.hint.finditer(text)``, found faster.

    A hint starts at a ``/`` or at a ``.`` that ``sc.ext_hint`` matches, so ``hint.match`` tried at the
    next of those, in text order, going on after each match's end, yields the same matches. The regex
    engine scans for a literal first character far faster than for a set of two (``str.find`` finds
    ``/``), and ``ext_hint`` rules most ``.`` out in C, so Python steps only from hint to hint. On ASCII
    text ``ext_hint`` reads the lower-cased copy (same positions; IGNORECASE costs about 2x there).
    """
    n = len(text)
    pos = 0
    slash = text.find("/")
    dots = text.lower() if sc.ascii else text  # the ASCII ext_hint matches lower case only (faster)
    m = sc.ext_hint.search(dots)
    dot = m.start() if m else n
    while True:
        if slash < 0:
            slash = n
        at = slash if slash < dot else dot
        if at >= n:
            return
        hint = sc.hint.match(text, at)
        if hint is None:  # unreachable: a hint matches at every `/` and at every `.` ext_hint matches
            pos = at + 1
        else:
            yield hint
            pos = hint.end()
        if slash < pos:
            slash = text.find("/", pos)
        if dot < pos:
            m = sc.ext_hint.search(dots, pos)
            dot = m.start() if m else n


_RUN_WINDOW = 64
"""Characters before a hint reversed to find where its run starts (a longer run reverses up to the hint)."""
_WINDOWED_HINTS = 16
"""Hints of one text whose run is found in a window; past them the whole text is reversed once."""


RUN_PATHS_KEPT = 4096
"""Runs whose file entities are kept (cleared when full): agents name the same files again and again."""
RUN_KEPT_CHARS = 256
"""Longest run kept (a longer one is scanned each time), so the kept runs hold at most about 1 MB."""
_RUN_PATHS: dict[tuple[bool, bool, str], tuple[str, ...]] = {}
"""The file entities of a run, by ``(scanner is ASCII, run at the text's start, the character before the run and
the run)``: the path pattern reads nothing else (its look-behind is one character wide, and the run's end is the
search's end), so a run met again gives the same entities without the pattern and the checks."""


def _paths(text: str) -> list[str]:
    text = text[:SCAN_CHARS]
    if text.isascii():  # the runs that hold a hint, found in one native pass
        runs = hotpaths.ascii_path_runs(text)
        if not runs:
            return []
        found: list[str] = []
        for i in range(0, len(runs), 2):
            found.extend(_kept_run_paths(_ASCII, text, runs[i], runs[i + 1]))
        return found
    if "/" not in text and "." not in text:  # every hint starts at one of them (_hints)
        return []
    sc = _UNICODE
    found = []
    backwards = ""  # the text reversed, to find where the run around a hint starts (once many hints need it)
    for n, hint in enumerate(_hints(sc, text)):
        at = hint.start()
        if n < _WINDOWED_HINTS:  # the run read backwards in a short reversed window, then in full if it fills it
            w0 = at - _RUN_WINDOW if at > _RUN_WINDOW else 0
            run = sc.run.match(text[w0 : at + 1][::-1])
            back = run.end() if run else 0
            if w0 and back == at + 1 - w0:
                run = sc.run.match(text[: at + 1][::-1])
                back = run.end() if run else 0
        else:
            if not backwards:
                backwards = text[::-1]
            j = len(text) - 1 - at  # the hint's first character, counted from the end
            run = sc.run.match(backwards, j)
            back = (run.end() if run else j) - j
        found.extend(_kept_run_paths(sc, text, at + 1 - back, hint.end()))
    return found


def _kept_run_paths(sc: _Scanner, text: str, start: int, end: int) -> tuple[str, ...]:
    """The file entities of the run ``text[start:end]``, kept in :data:`_RUN_PATHS` (unless longer than
    :data:`RUN_KEPT_CHARS`)."""
    if end - start > RUN_KEPT_CHARS:
        return _run_paths(sc, text, start, end)
    key = (sc.ascii, start == 0, text[start - 1 if start else 0 : end])
    known = _RUN_PATHS.get(key)
    if known is None:
        known = _run_paths(sc, text, start, end)
        if len(_RUN_PATHS) >= RUN_PATHS_KEPT:
            _RUN_PATHS.clear()
        _RUN_PATHS[key] = known
    return known


def _run_paths(sc: _Scanner, text: str, start: int, end: int) -> tuple[str, ...]:
    """The file entities of one run, ``text[start:end]`` (the hint ends where the run does)."""
    found: list[str] = []
    for m in sc.path.finditer(text, start, end):
        p = normalize_path(m.group(1))
        if not p or len(p) > 240 or "//" in p:
            continue
        name = p.rsplit("/", 1)[-1]
        if "/" in p and not _EXT_RE.search(name) and not p.startswith(("/", "~/", "../")):
            continue  # "and/or", "input/output": a relative path needs an extension
        if not (_ASCII_LETTER(name) if sc.ascii else any(ch.isalpha() for ch in name)):
            continue
        found.append(p)
    return tuple(found)


# Call classes, by precedence: a mutating call, a validation (test-like) command, a read/search.
_MUTATE, _VALIDATE, _READ, _OTHER = 1, 2, 3, 0
_MUTATING_TOOLS = frozenset(
    """edit multiedit write write_file edit_file create create_file insert apply_patch patch
str_replace replace delete_file notebookedit notebook_edit""".split()
)
_READ_TOOLS = frozenset(
    """read read_file view open cat grep glob search search_file search_dir find find_file ls
list list_files list_dir webfetch web_fetch websearch web_search""".split()
)
_MUTATING_CMDS = hotpaths.MUTATING_COMMANDS
"""Literals of :data:`_MUTATING_CMD_RE`, one in each alternative: a substring test rules most calls out."""
_MUTATING_CMD_RE = lazy_compile(
    "|".join(re.escape(w) if w.startswith("*") else rf"\b{re.escape(w)}\b" for w in _MUTATING_CMDS)
)
"""A mutating command: ``*** Begin Patch`` anywhere, the other :data:`latch.hotpaths.MUTATING_COMMANDS` between
word boundaries."""
_EDITOR_CMD_RE = lazy_compile(r'"command"\s*:\s*"(create|str_replace|insert|undo_edit|write|view)"')
_TEST_WORDS = hotpaths.TEST_COMMANDS
_READ_WORDS = hotpaths.READ_COMMANDS
_TEST_CMD = r"\b(?:" + "|".join(map(re.escape, _TEST_WORDS)) + r")\b"
"""A test-like command: one of :data:`latch.hotpaths.TEST_COMMANDS` between word boundaries (the plain pattern;
:meth:`_Scanner.test_cmd` gives its verdicts faster)."""
_READ_CMD = r'(?:^|["\s;&|(])(?:' + "|".join(map(re.escape, _READ_WORDS)) + r")[\s]"
"""A read command: one of :data:`latch.hotpaths.READ_COMMANDS` at the start or after ``"``, whitespace, ``;``,
``&``, ``|`` or ``(``, followed by whitespace (the plain pattern; :meth:`_Scanner.read_cmd` gives its verdicts
faster)."""
_TEST_TRIE = _trie(_TEST_WORDS)
_READ_TRIE = _trie(_READ_WORDS)
_ASCII_SPACE = r"\t-\r\x1c-\x20"
"""The ASCII characters Unicode whitespace holds (``re.ASCII`` whitespace leaves out 0x1C-0x1F)."""


class _Scanner:
    """The text regexes, compiled once with Unicode semantics and once with ``re.ASCII``.

    On text that :meth:`str.isascii` accepts both compilations match exactly the same spans (Unicode
    word, digit and boundary classes and case folding agree with their ASCII forms on ASCII
    characters; the ASCII ``read_cmd`` spells whitespace out as :data:`_ASCII_SPACE`), and the
    ASCII one runs about twice as fast, so :func:`_scanner` picks it for such text.

    ``path`` is the file-entity pattern. Every character a path can hold is in ``run`` (word
    characters and ``~ . / @ + -``), so every path match lies inside one maximal run of them, and
    the pattern's one-character look-behind and look-ahead see the same verdict at a run's edges
    whether the run is scanned alone or inside the whole text. A match needs a ``/`` or a known
    extension ending a name (``.py`` followed by neither a word character nor ``/``): ``hint``
    finds those (and runs on to the run's end) far faster than ``path`` tries every position, and
    ``path`` then scans only the runs ``hint`` found. ``test_cmd`` and ``read_cmd`` classify tool
    calls (:func:`_classify_call`).
    """

    __slots__ = (
        "word",
        "path",
        "run",
        "hint",
        "ext_hint",
        "ascii",
        "test_start",
        "test_inner",
        "read_start",
        "read_inner",
    )

    def __init__(self, flags: int):
        # each pattern compiles at its first use (latch.lazyre): a process uses few of the twenty (the native
        # backend finds ASCII words itself; only a non-ASCII text needs the Unicode scanner)
        self.word = lazy_compile(r"\b[^\W\d_]\w{2,31}\b", flags)
        self.path = lazy_compile(_PATH, flags | re.IGNORECASE)
        self.run = lazy_compile(r"[\w.@+~/-]+", flags | re.IGNORECASE)
        self.hint = lazy_compile(r"(?:/|\.(?:" + _EXT_TRIE + r")(?![\w/]))[\w.@+~/-]*", flags | re.IGNORECASE)
        self.ascii = bool(flags & re.ASCII)
        # The dot and extension of a hint; ASCII text is lower-cased first (exactly IGNORECASE there).
        self.ext_hint = lazy_compile(r"\.(?:" + _EXT_TRIE + r")(?![\w/])", flags | (0 if self.ascii else re.IGNORECASE))
        # _TEST_CMD and _READ_CMD as two searches each: a command word at the text's start (match), or one
        # after a character that can precede it. That second form starts with a character class, so the regex
        # engine skips to those characters in C instead of trying the alternation at every position, and the
        # alternation is a trie of literals. Same verdicts (tests pin it); about twice as fast on commands.
        space = _ASCII_SPACE if flags & re.ASCII else r"\s"
        self.test_start = lazy_compile(_TEST_TRIE + r"\b", flags)
        self.test_inner = lazy_compile(r"\W" + _TEST_TRIE + r"\b", flags)
        self.read_start = lazy_compile(_READ_TRIE + f"[{space}]", flags)
        self.read_inner = lazy_compile(f'["{space};&|(]' + _READ_TRIE + f"[{space}]", flags)

    def test_cmd(self, text: str) -> bool:
        """Whether :data:`_TEST_CMD` finds a match in ``text``."""
        return bool(self.test_start.match(text) or self.test_inner.search(text))

    def read_cmd(self, text: str) -> bool:
        """Whether :data:`_READ_CMD` finds a match in ``text``."""
        return bool(self.read_start.match(text) or self.read_inner.search(text))


_UNICODE = _Scanner(0)
_ASCII = _Scanner(re.ASCII)


def _scanner(text: str) -> _Scanner:
    return _ASCII if text.isascii() else _UNICODE


def _classify_call(name: str, arguments: str, parsed: Callable[[], Any] | None = None) -> int:
    """The call class of a tool call (``_MUTATE``, ``_VALIDATE``, ``_READ`` or ``_OTHER``). ``parsed`` returns
    the parsed arguments (``ToolCall.args``, parsed once per call); it is asked only when a command word
    appears in the raw text, and at most once."""
    lname = name.lower()
    args = arguments[:SCAN_CHARS]
    if lname in _MUTATING_TOOLS:
        return _MUTATE
    editor = _EDITOR_CMD_RE.search(args) if "editor" in lname or lname in ("str_replace_based_edit_tool",) else None
    if editor:
        return _READ if editor.group(1) == "view" else _MUTATE
    command: list[str] = []

    def command_text() -> str:
        if not command:
            value = parsed() if parsed is not None else parse_arguments(arguments)
            command.append(_command_text(arguments, value)[:SCAN_CHARS])
        return command[0]

    sc = _scanner(args)
    found = _command_classes(sc, args)
    if found & (_COMMAND_MUTATING | _COMMAND_TEST) or (found and lname not in _READ_TOOLS):
        found &= _command_classes(sc, command_text())  # a command word counts when a command holds it
        if found & _COMMAND_MUTATING:
            return _MUTATE
        if found & _COMMAND_TEST:
            return _VALIDATE
        if found & _COMMAND_READ:
            return _READ
    return _READ if lname in _READ_TOOLS else _OTHER


_COMMAND_MUTATING, _COMMAND_TEST, _COMMAND_READ = 1, 2, 4
"""The bits of :func:`latch.hotpaths.ascii_command_classes`."""


def _command_classes(sc: _Scanner, text: str) -> int:
    """The command words ``text`` holds as :func:`latch.hotpaths.ascii_command_classes` bits: a mutating command
    (:data:`_MUTATING_CMD_RE`), a test (``sc.test_cmd``), a read (``sc.read_cmd``). ``sc`` is the scanner the
    call's raw arguments picked; under the ASCII one an ASCII text is read in one native pass (same verdicts)."""
    if sc.ascii and text.isascii():
        return hotpaths.ascii_command_classes(text)
    return (
        (_COMMAND_MUTATING if any(cmd in text for cmd in _MUTATING_CMDS) and _MUTATING_CMD_RE.search(text) else 0)
        | (_COMMAND_TEST if sc.test_cmd(text) else 0)
        | (_COMMAND_READ if sc.read_cmd(text) else 0)
    )


_COMMAND_KEYS = frozenset({"command", "cmd", "script", "code", "input", "argv"})
"""The argument keys whose values run something (a shell tool's ``command``/``cmd``, Codex ``exec``'s
``input`` code, SWE-agent's action line); a test command named anywhere else (a todo, a sub-agent's brief, a
file's content) is not a command the agent ran."""


def _command_text(arguments: str, value: Any) -> str:
    """The text of a call's ``arguments`` (``value``: them parsed) that can run a command: every string under a
    :data:`_COMMAND_KEYS` key of a JSON object, at any depth (an argv list joined by spaces), one per line; the
    whole text when the arguments are not a JSON object (a legacy action line, a bare command string). Called
    only after the regex found a command word in the raw text, so most calls never parse here."""
    if not isinstance(value, dict):
        return arguments
    found: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                if key in _COMMAND_KEYS:
                    if isinstance(sub, str):
                        found.append(sub)
                    elif isinstance(sub, list) and all(isinstance(x, str) for x in sub):
                        found.append(" ".join(sub))
                    else:
                        stack.append(sub)
                elif isinstance(sub, (dict, list)):
                    stack.append(sub)
        elif isinstance(item, list):
            stack.extend(x for x in item if isinstance(x, (dict, list)))
    return "\n".join(found)


def _shell_link(call: ToolCall) -> tuple[str, str] | None:
    """``("start", shellId)`` for a Copilot CLI ``bash`` call with ``mode: "async"`` (its result only says it
    started), ``("poll", shellId)`` for a ``read_bash``/``stop_bash`` of that shell (a read whose result has
    the exit code is the command's outcome); ``None`` otherwise (a substring test rules most calls out)."""
    if '"shellId"' not in call.arguments:
        return None
    args = call.args()
    shell = args.get("shellId") if isinstance(args, dict) else None
    if not isinstance(shell, str):
        return None
    if call.name == "bash" and args.get("mode") == "async":
        return ("start", shell)
    if call.name in ("read_bash", "stop_bash"):
        return ("poll", shell)
    return None


def _topic(text: str) -> str:
    words = " ".join(text.split())
    if not words:
        return "(empty prompt)"
    if len(words) <= TOPIC_CHARS:
        return words
    cut = words[: TOPIC_CHARS - 1]
    space = cut.rfind(" ")
    if space >= TOPIC_CHARS // 2:
        cut = cut[:space]
    return cut + "…"


_LOCATION_KEYS = frozenset(("workdir", "cwd", "working_dir", "working_directory"))


def _argument_text(call: ToolCall) -> str:
    """Tool call arguments as text: JSON string values joined (unescaped; the working-directory
    keys every call repeats are left out), else the raw string."""
    value = call.args()
    if isinstance(value, RawArguments):
        return call.arguments[:SCAN_CHARS]
    if isinstance(value, dict):
        try:  # an object of strings only (most calls): what walk gives, without the walk
            return "\n".join([x for key, x in value.items() if key not in _LOCATION_KEYS])[:SCAN_CHARS]
        except TypeError:  # a value that is not a str: walk it
            pass
    parts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, dict):
            for key, x in v.items():
                if key not in _LOCATION_KEYS:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return "\n".join(parts)[:SCAN_CHARS]


# --------------------------------------------------------------------------- accumulation
class _Open:
    """The open trailing segment being accumulated."""

    __slots__ = (
        "number",
        "part",
        "topic",
        "first_seq",
        "last_seq",
        "events",
        "chars",
        "topic_terms",
        "call_files",
        "text_files",
        "tools",
        "markers",
    )

    def __init__(self, number: int, part: int, topic: str, seq: int):
        self.number = number
        self.part = part
        self.topic = topic
        self.first_seq = seq
        self.last_seq = seq
        self.events = 0
        self.chars = 0
        self.topic_terms: Sequence[str] = ()
        self.call_files: dict[int, None] = {}
        self.text_files: dict[int, None] = {}
        self.tools: dict[str, None] = {}
        self.markers = 0

    def full(self) -> bool:
        return self.events >= MAX_EPISODE_EVENTS or self.chars >= MAX_EPISODE_CHARS


class _Growable:
    """An int64 array (``array("q")``) with amortized O(1) append (capacity doubling): ``data`` holds the
    committed entries, then spare room (:meth:`stage` writes there)."""

    __slots__ = ("data", "size")

    def __init__(self, initial: Sequence[int] = ()):
        self.data = array("q", initial)
        self.data.extend(array("q", bytes(8 * (max(16, 2 * len(initial)) - len(initial)))))
        self.size = len(initial)

    def reserve(self, extra: int) -> None:
        need = self.size + extra
        if need > len(self.data):
            self.data.extend(array("q", bytes(8 * (max(need, 2 * len(self.data)) - len(self.data)))))

    def extend(self, values: Sequence[int]) -> None:
        self.stage(values)
        self.size += len(values)

    def append(self, value: int) -> None:
        if self.size == len(self.data):
            self.reserve(1)
        self.data[self.size] = value
        self.size += 1

    def stage(self, values: Sequence[int]) -> None:
        """Write ``values`` right after the committed entries without committing them."""
        self.reserve(len(values))
        self.data[self.size : self.size + len(values)] = array("q", values)

    def head(self, n: int) -> memoryview:
        """The first ``n`` entries (committed and staged), read in place: a view to drop before the next write
        that grows ``data`` (an array cannot resize while a view of it exists)."""
        return memoryview(self.data)[:n]


class EpisodeIndex:
    """The incremental episode builder and selector of one session.

    State: the open trailing segment, the seq watermark (the last accepted
    seq), term and file dictionaries (string → id, first sighting order) and the
    closed episodes as columns: CSR arrays (``array("q")``, int64) of their term and file
    ids, markers and last seqs for :func:`latch.hotpaths.score_episodes`, plus
    first seqs, parts, event counts, topics and tool lists. A closed
    :class:`Episode` is made from them when read (:attr:`episodes`, a
    :meth:`select` pick), so each term id is held once, 8 bytes, whatever the
    history's length.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.session_id: str | None = None
        self.watermark = 0
        self._closed = 0  # closed episodes: columns below (an Episode is made only when one is read)
        self._open: _Open | None = None
        self._term_counts = hotpaths.TermCounts()  # the term dictionary and the open segment's term counts
        self._files: dict[str, int] = {}
        self._file_names: list[str] = []
        self._by_basename: dict[str, list[int]] = {}
        self._pending: dict[str, int] = {}  # call id -> call class, until its result arrives
        self._links: dict[str, tuple[str, str]] = {}  # call id -> _shell_link, until its result arrives
        self._shells: dict[str, int] = {}  # Copilot CLI async shellId -> its command's class, until it exits
        self._term_indptr = _Growable([0])
        self._term_ids = _Growable()
        self._file_indptr = _Growable([0])
        self._file_ids = _Growable()
        self._markers = _Growable()
        self._last_seq = _Growable()
        self._first_seq = array("q")
        self._parts = array("q")
        self._event_counts = array("q")
        self._topics: list[str] = []  # the parts of one intent share its topic str
        self._tools: list[tuple[str, ...]] = []
        self._tool_lists: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple per distinct tool list

    # ------------------------------------------------------------ building
    def extend(self, stored_events: Iterable[Any]) -> int:
        """Accept events with ``seq`` above the watermark, in seq order.

        ``stored_events`` are :class:`latch.store.StoredEvent` (anything with
        ``seq``, ``session_id`` and ``event``). Events at or below the
        watermark are skipped, so overlapping feeds are harmless. Returns the
        number of events accepted. Raises ``ValueError`` for an event of
        another session (a session change needs :meth:`rebuild`).
        """
        accepted = 0
        readers = _READERS
        for stored in stored_events:
            seq = stored.seq
            if seq <= self.watermark:
                continue
            if self.session_id is None:
                self.session_id = stored.session_id
            elif stored.session_id != self.session_id:
                raise ValueError(
                    f"episode index of session {self.session_id} got event seq {seq} of session "
                    f"{stored.session_id}; a session change needs rebuild()"
                )
            event = stored.event
            readers[type(event)](self, seq, event)
            self.watermark = seq
            accepted += 1
        return accepted

    def rebuild(self, stored_events: Iterable[Any]) -> int:
        """Discard everything and build from ``stored_events`` (the whole log, in seq order).

        Deterministic: the same events always give the same episodes, term ids
        and file ids. Returns the number of events accepted.
        """
        self._reset()
        return self.extend(stored_events)

    # Each _read_* method accepts one event of its kind (_READERS picks it by the event's class): the segment it
    # joins (_segment, or a new one for an intent), its text volume, terms, files, tools, calls and markers.
    def _segment(self, seq: int, unit_start: bool) -> _Open:
        """The open segment event ``seq`` (not a new intent) joins, counted in: a first segment when none is
        open, a continuation when ``unit_start`` and the open one is full (the volume cap)."""
        op = self._open
        if op is None:
            op = self._start(_Open(self._closed + 1, 1, "(session start)", seq))
        elif unit_start and op.full():
            self._close()
            op = self._start(_Open(self._closed + 1, op.part + 1, op.topic, seq))
        op.last_seq = seq
        op.events += 1
        return op

    def _read_nothing(self, seq: int, event: Any) -> None:
        """Usage, an attachment note: the event joins the segment, nothing more."""
        self._segment(seq, False)

    def _read_user(self, seq: int, event: UserMessage) -> None:
        text = event.text
        if event.is_meta:
            self._segment(seq, True).chars += len(text)
            return
        topic = _topic(text if text.strip() or not event.media else "(image)")
        terms = extract_terms(text)
        files = _paths(text)
        if self._open is not None:
            self._close()
        op = self._start(_Open(self._closed + 1, 1, topic, seq))
        op.last_seq = seq
        op.events += 1
        op.chars += len(text)
        op.topic_terms = terms  # the list as made: nothing changes it later
        self._term_counts.add(terms)
        self._text_files(op, files)

    def _read_assistant(self, seq: int, event: AssistantMessage) -> None:
        op = self._segment(seq, True)
        counts = self._term_counts
        text = event.text
        chars = len(text)
        if not counts.add_text(text, SCAN_CHARS):  # an ASCII text's terms: counted in one native pass
            counts.add(extract_terms(text[:SCAN_CHARS]))
        if event.tool_calls:
            call_files = op.call_files
            file_id = self._file_id
            for c in event.tool_calls:
                chars += len(c.arguments)
                args = _argument_text(c)
                call_text = f"{c.name} {args}"
                if not counts.add_text(call_text, SCAN_CHARS):
                    counts.add(extract_terms(call_text[:SCAN_CHARS]))
                for p in _paths(args):
                    call_files[file_id(p)] = None
                op.tools[c.name] = None
                self._pending[c.id] = _classify_call(c.name, c.arguments, c.args)
                link = _shell_link(c)
                if link is not None:
                    self._links[c.id] = link
        op.chars += chars
        files = _paths(text)  # after the calls' files: those take their ids first
        if files:
            self._text_files(op, files)

    def _read_result(self, seq: int, event: ToolResult) -> None:
        op = self._segment(seq, False)
        content = event.content
        op.chars += len(content)
        if not self._term_counts.add_text(content, RESULT_TERM_CHARS):
            self._term_counts.add(extract_terms(content[:RESULT_TERM_CHARS]))
        files = _paths(content)
        if files:
            self._text_files(op, files)
        is_error, exit_code, missing = event.is_error, event.exit_code, event.missing
        markers = FAILURE if is_error else 0
        cls = self._pending.pop(event.call_id, _OTHER)
        link = self._links.pop(event.call_id, None) if self._links else None
        if link is not None and link[0] == "start" and not is_error and not missing and exit_code is None:
            self._shells[link[1]] = cls  # started detached: its outcome comes with a later read_bash
            cls = _OTHER
        elif (
            link is not None and link[0] == "poll" and link[1] in self._shells and not missing and exit_code is not None
        ):
            cls = self._shells.pop(link[1])  # the async command's exit: the outcome of its class
        if cls == _VALIDATE and not missing:
            ok = exit_code == 0 if exit_code is not None else not is_error
            markers |= VALIDATION_PASSED if ok else VALIDATION_FAILED
        elif cls == _MUTATE and not is_error:
            markers |= MUTATION
        elif cls == _READ and not is_error:
            markers |= EVIDENCE
        if markers:
            op.markers |= markers

    def _read_note(self, seq: int, event: SystemNote) -> None:
        if event.subtype.startswith(ATTACHMENT_NOTE):
            self._segment(seq, False)  # searchable by people, no index terms: the views stay as they were
            return
        sub = event.subtype.lower()
        markers = (FAILURE if "error" in sub else 0) | (
            REGROUND if sub in ("reground", "compact_boundary", "manual_compact") else 0
        )
        self._read_text(seq, event.text, RESULT_TERM_CHARS, markers)

    def _read_compaction(self, seq: int, event: CompactionMarker) -> None:
        self._read_text(seq, event.summary, SCAN_CHARS, REGROUND)

    def _read_subagent(self, seq: int, event: SubagentMarker) -> None:
        self._read_text(seq, event.description, SCAN_CHARS, 0)

    def _read_other(self, seq: int, event: Event) -> None:
        kind = event.KIND.lower()
        markers = (REGROUND if ("compact" in kind or "reground" in kind) else 0) | (
            EVIDENCE if "evidence" in kind else 0
        )
        self._read_text(seq, event.searchable_text(), SCAN_CHARS, markers)

    def _read_text(self, seq: int, text: str, term_chars: int, markers: int) -> None:
        """An event that can start a unit and contributes one text (its first ``term_chars`` characters read for
        terms) and ``markers``."""
        op = self._segment(seq, True)
        op.chars += len(text)
        self._count_terms(text, term_chars)
        self._text_files(op, _paths(text))
        op.markers |= markers

    def _count_terms(self, text: str, term_chars: int) -> None:
        """Count the terms of ``text[:term_chars]`` (an ASCII text's in one native pass, never made into a list)."""
        if not self._term_counts.add_text(text, term_chars):
            self._term_counts.add(extract_terms(text[:term_chars]))

    def _text_files(self, op: _Open, paths: list[str] | tuple[str, ...]) -> None:
        for p in paths:
            op.text_files[self._file_id(p)] = None

    def _start(self, op: _Open) -> _Open:
        """Open the segment ``op`` (the previous one is closed): its terms count from zero."""
        self._term_counts.new_episode()
        self._open = op
        return op

    def _file_id(self, path: str) -> int:
        fid = self._files.get(path)
        if fid is None:
            fid = self._files[path] = len(self._files)
            self._file_names.append(path)
            self._by_basename.setdefault(path.rsplit("/", 1)[-1], []).append(fid)
        return fid

    def _chosen(self, op: _Open) -> tuple[list[int], list[int]]:
        """The term ids and file ids the open segment ``op`` keeps (see "Terms and files" above)."""
        terms = self._term_counts.chosen(op.topic_terms, TERMS_PER_EPISODE)
        files = list(op.call_files)[:FILES_PER_EPISODE]
        if len(files) < FILES_PER_EPISODE:
            seen = set(files)
            files.extend([x for x in op.text_files if x not in seen][: FILES_PER_EPISODE - len(files)])
        return terms, files

    def _snapshot(self, op: _Open) -> Episode:
        """The open segment as an :class:`Episode` (``closed=False``)."""
        term_ids, files = self._chosen(op)
        return Episode(
            number=op.number,
            part=op.part,
            first_seq=op.first_seq,
            last_seq=op.last_seq,
            events=op.events,
            topic=op.topic,
            files=tuple(self._file_names[i] for i in files),
            tools=tuple(op.tools),
            markers=op.markers,
            term_ids=tuple(term_ids),
            closed=False,
        )

    def _close(self) -> None:
        op = self._open
        assert op is not None
        term_ids, file_ids = self._chosen(op)
        self._open = None
        self._closed += 1
        self._term_ids.extend(term_ids)
        self._term_indptr.append(self._term_ids.size)
        self._file_ids.extend(file_ids)
        self._file_indptr.append(self._file_ids.size)
        self._markers.append(op.markers)
        self._last_seq.append(op.last_seq)
        self._first_seq.append(op.first_seq)
        self._parts.append(op.part)
        self._event_counts.append(op.events)
        self._topics.append(op.topic)
        tools = tuple(op.tools)
        self._tools.append(self._tool_lists.setdefault(tools, tools))

    def _closed_episode(self, i: int) -> Episode:
        """Closed episode ``i`` (0-based) as an :class:`Episode`, made from the columns."""
        t0, t1 = self._term_indptr.data[i : i + 2].tolist()
        f0, f1 = self._file_indptr.data[i : i + 2].tolist()
        return Episode(
            number=i + 1,
            part=self._parts[i],
            first_seq=self._first_seq[i],
            last_seq=int(self._last_seq.data[i]),
            events=self._event_counts[i],
            topic=self._topics[i],
            files=tuple(self._file_names[f] for f in self._file_ids.data[f0:f1].tolist()),
            tools=self._tools[i],
            markers=int(self._markers.data[i]),
            term_ids=tuple(self._term_ids.data[t0:t1].tolist()),
            closed=True,
        )

    # ------------------------------------------------------------ reading
    @property
    def episodes(self) -> list[Episode]:
        """Closed episodes then the open trailing segment (if any), in seq order."""
        closed = [self._closed_episode(i) for i in range(self._closed)]
        return closed if self._open is None else [*closed, self._snapshot(self._open)]

    def __len__(self) -> int:
        return self._closed + (self._open is not None)

    def term_id(self, term: str) -> int | None:
        """The dictionary id of ``term`` (``None`` when no episode has seen it)."""
        return self._term_counts.term_id(term)

    def _current_file_ids(self, current_files: Sequence[str]) -> list[int]:
        """Ids of known files naming the same file as ``current_files`` (equal, or one a path
        suffix of the other at a ``/`` boundary: ``src/a.py`` matches ``/repo/src/a.py``)."""
        out: dict[int, None] = {}
        for raw in current_files:
            path = normalize_path(raw)
            for fid in self._by_basename.get(path.rsplit("/", 1)[-1], ()):
                known = self._file_names[fid]
                if known == path or known.endswith("/" + path) or path.endswith("/" + known):
                    out[fid] = None
        return list(out)

    def select(
        self, query_text: str, current_files: Sequence[str], now_seq: int, k: int = 16, before_seq: int | None = None
    ) -> list[Episode]:
        """The ``k`` best episodes for a request, best first.

        Scores with :func:`latch.hotpaths.score_episodes` (lexical overlap of
        ``query_text``'s terms, overlap with ``current_files``, marker weights,
        recency relative to ``now_seq``; ties by later ``last_seq``). With
        ``before_seq``, only episodes that start in the archival region
        (``first_seq < before_seq``) are candidates, and the one that runs on past
        it is returned cut at ``before_seq - 1`` (its archived part: a long intent
        the epoch start split still has an entry). The open segment competes like
        a closed one.
        """
        if k <= 0:
            return []
        n = self._closed if before_seq is None else bisect_left(self._last_seq.data, before_seq, 0, self._last_seq.size)
        if before_seq is not None and n < self._closed and self._first_seq[n] < before_seq:
            n += 1  # the closed episode the epoch start cut
        op = self._open
        snap = None
        if op is not None and n == self._closed and (before_seq is None or op.first_seq < before_seq):
            snap = self._snapshot(op)
        if n == 0 and snap is None:
            return []
        arrays = (self._term_indptr, self._term_ids, self._file_indptr, self._file_ids, self._markers, self._last_seq)
        lengths = [n + 1, int(self._term_indptr.data[n]), n + 1, int(self._file_indptr.data[n]), n, n]
        if snap is not None:
            # scored as episode n; then every closed episode is a candidate, so n == self._closed
            # and staging past each array's committed size appends without committing
            file_ids = [self._files[p] for p in snap.files]
            staged = (
                [lengths[1] + len(snap.term_ids)],
                snap.term_ids,
                [lengths[3] + len(file_ids)],
                file_ids,
                [snap.markers],
                [snap.last_seq],
            )
            for i, (arr, values) in enumerate(zip(arrays, staged, strict=False)):
                arr.stage(values)
                lengths[i] += len(values)
        term_id = self._term_counts.term_id
        query_terms = sorted({tid for t in extract_terms(query_text) if (tid := term_id(t)) is not None})
        a_terms_at, a_terms, a_files_at, a_files, a_markers, a_last = (
            arr.head(m) for arr, m in zip(arrays, lengths, strict=False)
        )
        try:
            picked = hotpaths.score_episodes(
                a_terms_at,
                a_terms,
                a_files_at,
                a_files,
                a_markers,
                a_last,
                array("q", query_terms),
                array("q", self._current_file_ids(current_files)),
                int(now_seq),
                int(k),
            )
        finally:
            for view in (a_terms_at, a_terms, a_files_at, a_files, a_markers, a_last):
                view.release()  # the arrays may grow again
        found = [snap if (snap is not None and i == n) else self._closed_episode(i) for i in map(int, picked)]
        if before_seq is None:
            return found
        return [e if e.last_seq < before_seq else replace(e, last_seq=before_seq - 1) for e in found]

    # ------------------------------------------------------------ rendering
    @staticmethod
    def render(entries: Sequence[Episode], estimate: Callable[[str], int], budget_tokens: int) -> str:
        """The episode index section: one line per entry, never above ``budget_tokens``.

        ``entries`` are in priority order (as :meth:`select` returns them);
        ``estimate(text) -> tokens`` is the request's estimator. Entries are
        taken best first while the text fits, then printed in seq order::

            archival episodes (raw events by seq range; recall finds exact text):
            episode #3 seq 120–188: fix the parser crash · files src/p.py · tools Bash, Edit · mutation

        Returns ``""`` when not even one entry fits.
        """
        header = "archival episodes (raw events by seq range; recall finds exact text):"
        if budget_tokens <= 0 or not entries:
            return ""
        used = estimate(header + "\n")
        chosen: list[tuple[Episode, str]] = []
        for ep in entries:
            line = _render_line(ep)
            cost = estimate(line + "\n")
            if used + cost <= budget_tokens:
                chosen.append((ep, line))
                used += cost
        while chosen:
            ordered = sorted(chosen, key=lambda e: e[0].first_seq)
            text = "\n".join([header, *(line for _, line in ordered)])
            if estimate(text) <= budget_tokens:
                return text
            chosen.pop()  # a non-additive estimator: drop the lowest-priority entry and re-check
        return ""


_READERS: EventClassTable[Callable[[EpisodeIndex, int, Any], None]] = EventClassTable(
    (
        (UserMessage, EpisodeIndex._read_user),
        (AssistantMessage, EpisodeIndex._read_assistant),
        (ToolResult, EpisodeIndex._read_result),
        (Usage, EpisodeIndex._read_nothing),
        (SystemNote, EpisodeIndex._read_note),
        (CompactionMarker, EpisodeIndex._read_compaction),
        (SubagentMarker, EpisodeIndex._read_subagent),
    ),
    EpisodeIndex._read_other,
)
"""The :class:`EpisodeIndex` method that accepts an event of each class (a subclass is read as its event class)."""


def _render_line(ep: Episode) -> str:
    topic = ep.topic if ep.part == 1 else f"{ep.topic} (part {ep.part})"
    parts = [f"episode #{ep.number} seq {ep.first_seq}–{ep.last_seq}: {topic}"]
    if ep.files:
        shown = ", ".join(ep.files[:4])
        parts.append(f"files {shown}" + (f" +{len(ep.files) - 4}" if len(ep.files) > 4 else ""))
    if ep.tools:
        shown = ", ".join(ep.tools[:6])
        parts.append(f"tools {shown}" + (f" +{len(ep.tools) - 6}" if len(ep.tools) > 6 else ""))
    if ep.markers:
        parts.append(", ".join(ep.marker_names))
    return " · ".join(parts)
