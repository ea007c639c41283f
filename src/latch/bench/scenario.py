"""Scenario model: the shape of real agent sessions, measured, and a seeded generator of sessions of that shape.

:func:`measure_shape` reduces transcripts to a :class:`ScenarioShape`: how often the model calls
tools, how many calls a turn makes, how often the user speaks, how large texts and tool results
are per kind of call, and how often each kind fails. The kind of a call is what the kernel's
derivation rules (:mod:`latch.kernel.derive`) make of it, so every transcript format is classified
the same way:

* ``read``  a file observation (Read, ``cat``, ``sed -n``, an editor ``view``...);
* ``edit``  a workspace mutation (Edit, Write, ``apply_patch``, ``sed -i``...);
* ``test``  validation evidence (pytest, cargo test, npm test...);
* ``other`` anything else (git, search, planning tools, inline scripts...).

A call *fails* when its result is an error or its validation evidence failed.

:data:`CORPUS_SHAPE` holds the figures measured on the project's corpus (``../shared/corpus``: its
43 sessions in formats with an importer; the two Aider files hold 3 and 19 runs); ``python -m latch.bench.scenario [CORPUS_DIR]`` recomputes them and
``tests/bench/test_stress.py`` pins that the constants equal a fresh measurement of the files they were measured on
(:data:`CORPUS_SHAPE_FILES`, by path and hash), so a corpus that grows leaves them valid.

:class:`ScenarioModel` generates an endless, deterministic (seeded) session of that shape in Claude
Code's tool vocabulary (Read, Edit, Bash), so the kernel derives file observations, mutations and
validation evidence from it exactly as from an imported Claude Code transcript. Text comes from
seeded pools (English prose, code, logs, CJK prose); sizes are drawn from a log-normal fitted to
each measured (median, p90). Two inputs the corpus cannot measure are stated assumptions:
:data:`SCREENSHOT_SHARE` (one pasted image in the corpus is too few to measure) and CJK as the stand-in for every non-Latin
script the corpus shows (Cyrillic).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from ..events import (
    AssistantMessage,
    Event,
    MediaRef,
    SystemNote,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    canonical_arguments,
)
from ..importers import TranscriptError, detect, parse_all_file
from ..kernel.derive import DerivationContext, SessionDeriver
from ..kernel.events import FileObservation, Mutation, ValidationEvidence
from ..records import dataclass

__all__ = [
    "KINDS",
    "Spread",
    "CallKind",
    "ScenarioShape",
    "CORPUS_SHAPE",
    "CORPUS_SHAPE_FILES",
    "SCREENSHOT_SHARE",
    "measure_shape",
    "measure_files",
    "ScenarioModel",
    "png_bytes",
]

KINDS = ("read", "edit", "test", "other")
SCREENSHOT_SHARE = 0.02
"""Share of user turns carrying a screenshot: an assumption (the corpus holds no image)."""
_Z90 = 1.2815515655446004  # standard normal quantile of 0.9


@dataclass(frozen=True, slots=True)
class Spread:
    """A size distribution in characters: median, 90th percentile and maximum seen."""

    median: int
    p90: int
    max: int

    def sample(self, rng: random.Random) -> int:
        """A log-normal draw with this median and p90, clamped to ``1..max`` characters."""
        if self.median <= 0:
            return 0
        sigma = math.log(max(self.p90, self.median) / self.median) / _Z90
        return max(1, min(self.max, int(rng.lognormvariate(math.log(self.median), sigma))))


@dataclass(frozen=True, slots=True)
class CallKind:
    """One kind of tool call: its ``share`` of all calls, ``error_rate``, argument and result sizes."""

    share: float
    error_rate: float
    args_chars: Spread
    result_chars: Spread


@dataclass(frozen=True, slots=True)
class ScenarioShape:
    """Measured shape of agent sessions (see the module docstring). Rates are per model request
    (one :class:`~latch.events.AssistantMessage`); sizes are characters."""

    sessions: int
    requests: int
    text_only_share: float
    """Share of requests answered with text and no tool call."""
    calls_per_tool_turn: float
    """Mean tool calls of a request that calls tools."""
    tool_turn_text_share: float
    """Share of tool-calling requests whose answer also carries visible text."""
    assistant_text_chars: Spread
    user_turns_per_request: float
    """Real (non-meta) user messages per request."""
    user_text_chars: Spread
    non_latin_user_share: float
    """Share of user turns mostly in a non-Latin script."""
    usage_per_request: float
    notes_per_request: float
    kinds: Mapping[str, CallKind] = field(default_factory=dict)


# Measured on ../shared/corpus (18 files, 43 sessions: one per Aider run) by measure_files(); recompute with
# `python -m latch.bench.scenario`; tests/bench/test_stress.py pins these against a fresh measurement.
CORPUS_SHAPE_FILES: dict[str, str] = {
    "aider/monochromatic.aider.chat.history.md": "571585b48cd62817",
    "aider/mozgoslav.aider.chat.history.md": "18d3b80eb36d196e",
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": "1d923022ceceb625",
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-a7be2f0.jsonl": "3a0c9b1a58d91671",
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl": "23507182dc6c8c03",
    "claude-code/bastion_claude-session.jsonl": "dc71a1dbfed1fd70",
    "claude-code/claude-reliability_python-to-rust-port.jsonl": "f53fdd58b32b0a38",
    "claude-code/entire-image_session.jsonl": "8b2f68bcac2f30f9",
    "codex/edgerunner_codex-session.jsonl": "511efedad3b79df4",
    "copilot-cli/lantern_events.jsonl": "698b1847a63eb18b",
    "gemini-cli/entire_session.json": "bcf14460aa6d1952",
    "gemini-cli/vibecodingtracker_session.json": "6efb5f421497c27a",
    "gemini-cli/vibecodingtracker_session.jsonl": "fca5ede37ea55ad1",
    "goose/lantern_sessions.db": "e73ebe63aa9e6e21",
    "opencode/lantern_opencode.db": "402e40a2b806ad1c",
    "openhands/basic_gui_mode.json": "2132fbda813f75ac",
    "swe-agent/ctf_i_got_id_demo.traj": "5a668a9739472528",
    "swe-agent/marshmallow-1867_function_calling.traj": "cb042a1bd789bfd6",
}
"""The corpus files :data:`CORPUS_SHAPE` was measured on (path under the corpus → sha256[:16] of its bytes): the
constants stay what they are when the corpus grows; ``python -m latch.bench.scenario`` measures them again."""

CORPUS_SHAPE = ScenarioShape(
    sessions=43,
    requests=596,
    text_only_share=0.112,
    calls_per_tool_turn=1.138,
    tool_turn_text_share=0.469,
    assistant_text_chars=Spread(median=183, p90=960, max=11619),
    user_turns_per_request=0.156,
    user_text_chars=Spread(median=77, p90=306, max=45979),
    non_latin_user_share=0.108,
    usage_per_request=0.921,
    notes_per_request=0.263,
    kinds={
        "read": CallKind(
            share=0.165,
            error_rate=0.0,
            args_chars=Spread(median=105, p90=244, max=792),
            result_chars=Spread(median=4457, p90=21011, max=45496),
        ),
        "edit": CallKind(
            share=0.258,
            error_rate=0.0,
            args_chars=Spread(median=1243, p90=6637, max=33969),
            result_chars=Spread(median=64, p90=374, max=16511),
        ),
        "test": CallKind(
            share=0.083,
            error_rate=0.42,
            args_chars=Spread(median=143, p90=283, max=407),
            result_chars=Spread(median=894, p90=10039, max=16962),
        ),
        "other": CallKind(
            share=0.494,
            error_rate=0.104,
            args_chars=Spread(median=139, p90=809, max=28053),
            result_chars=Spread(median=202, p90=2976, max=40153),
        ),
    },
)


# ------------------------------------------------------------------------------------------ measuring
def _spread(values: Sequence[int]) -> Spread:
    if not values:
        return Spread(0, 0, 0)
    v = sorted(values)
    n = len(v)
    return Spread(median=v[(n - 1) // 2], p90=v[min(n - 1, int(0.9 * n))], max=v[-1])


def _non_latin(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(ord(c) > 0x24F for c in letters) * 2 > len(letters)


def _kind_of(facts: Sequence[Any]) -> tuple[str, bool]:
    """``(kind, evidence failed)`` of one result from the kernel facts derived from it."""
    evidence = [f for f in facts if isinstance(f, ValidationEvidence)]
    if evidence:
        return "test", any(f.status == "failed" for f in evidence)
    if any(isinstance(f, Mutation) for f in facts):
        return "edit", False
    if any(isinstance(f, FileObservation) for f in facts):
        return "read", False
    return "other", False


def measure_shape(sessions: Iterable[tuple[str | None, str | None, Iterable[Event]]]) -> ScenarioShape:
    """The :class:`ScenarioShape` of ``sessions``: ``(format, workspace, events)`` each, events in log order.

    Calls are classified by the kernel's derivation rules; an aborted call's placeholder result
    (``missing``) and results without a call are not counted.
    """
    n_sessions = requests = text_only = tool_turns = calls = tool_text = users = non_latin = usage = notes = 0
    assistant_chars: list[int] = []
    user_chars: list[int] = []
    per_kind: dict[str, dict[str, list[int]]] = {k: {"args": [], "result": [], "errors": []} for k in KINDS}
    for fmt, workspace, events in sessions:
        n_sessions += 1
        deriver = SessionDeriver(DerivationContext("measure", fmt, workspace))
        pending: dict[str, ToolCall] = {}
        for ev in events:
            facts = deriver.feed(ev)
            if isinstance(ev, AssistantMessage):
                requests += 1
                if ev.text.strip():
                    assistant_chars.append(len(ev.text))
                if ev.tool_calls:
                    tool_turns += 1
                    calls += len(ev.tool_calls)
                    tool_text += bool(ev.text.strip())
                    pending.update((c.id, c) for c in ev.tool_calls)
                else:
                    text_only += 1
            elif isinstance(ev, UserMessage) and not ev.is_meta:
                users += 1
                user_chars.append(len(ev.text))
                non_latin += _non_latin(ev.text)
            elif isinstance(ev, ToolResult):
                call = pending.pop(ev.call_id, None)
                if call is None or ev.missing:
                    continue
                kind, failed = _kind_of(facts)
                per_kind[kind]["args"].append(len(call.arguments))
                per_kind[kind]["result"].append(len(ev.content))
                per_kind[kind]["errors"].append(int(ev.is_error or failed))
            elif isinstance(ev, Usage):
                usage += 1
            elif isinstance(ev, SystemNote):
                notes += 1
    n_calls = sum(len(k["result"]) for k in per_kind.values())

    def rate(a: int, b: int) -> float:
        return round(a / b, 3) if b else 0.0

    kinds = {
        k: CallKind(
            share=rate(len(v["result"]), n_calls),
            error_rate=round(statistics.fmean(v["errors"]), 3) if v["errors"] else 0.0,
            args_chars=_spread(v["args"]),
            result_chars=_spread(v["result"]),
        )
        for k, v in per_kind.items()
    }
    return ScenarioShape(
        sessions=n_sessions,
        requests=requests,
        text_only_share=rate(text_only, requests),
        calls_per_tool_turn=rate(calls, tool_turns),
        tool_turn_text_share=rate(tool_text, tool_turns),
        assistant_text_chars=_spread(assistant_chars),
        user_turns_per_request=rate(users, requests),
        user_text_chars=_spread(user_chars),
        non_latin_user_share=rate(non_latin, users),
        usage_per_request=rate(usage, requests),
        notes_per_request=rate(notes, requests),
        kinds=kinds,
    )


def measure_files(paths: Iterable[str | Path]) -> ScenarioShape:
    """:func:`measure_shape` of transcript files, parsed by Latch's built-in importers (formats auto-detected);
    every session of a file that holds several (a Goose database) counts."""

    def sessions() -> Iterator[tuple[str | None, str | None, list[Event]]]:
        for p in paths:
            for parsed in parse_all_file(p):
                yield parsed.format, parsed.workspace, [pe.event for pe in parsed.events]

    return measure_shape(sessions())


# ------------------------------------------------------------------------------------------ generating
_WORDS = """the a to of and in is for that this it with on as be by not are we should can will from if
when then value error test cache request response token budget session event context window state
function module class method return config parse handle retry timeout buffer stream queue worker
server client index query record field schema migration user account invoice payment order total
rounding currency amount decimal line item tax discount report export import file path directory
build release deploy version branch commit merge review patch change fix bug issue regression
check assert expected actual mismatch failing passes works broken slow fast memory leak thread lock
""".split()
_IDENTS = """handler parser loader writer reader client manager service registry factory adapter
resolver builder encoder decoder validator scheduler dispatcher tracker monitor""".split()
_CJK_PHRASES = """请检查这个函数的返回值 测试又失败了 数据库连接超时 修复缓存的问题 这个字段不能为空 金额的四舍五入不对
请不要修改公共接口 先运行单元测试 日志里有一个错误 配置文件在哪里 这个补丁可以合并吗 性能比以前慢了很多
ファイルを読み込めません テストが通りました 設定を確認してください 변경 사항을 검토해 주세요""".split()
_ERRORS = (
    "fatal: not a git repository (or any of the parent directories): .git",
    "bash: line 1: jq: command not found",
    "Error: connect ECONNREFUSED 127.0.0.1:5432",
    "ModuleNotFoundError: No module named 'yaml'",
    "error: pathspec 'feature/rounding' did not match any file(s) known to git",
    "PermissionError: [Errno 13] Permission denied: '/var/log/app.log'",
    "TimeoutError: request to http://localhost:8080/health timed out after 30s",
    "Traceback (most recent call last):\n  File \"scripts/seed.py\", line 41, in <module>\nKeyError: 'currency'",
)
_OTHER_COMMANDS = (
    "git status --short",
    "git log --oneline -8",
    "git diff --stat",
    "git branch --show-current",
    "python -m pip list --format=freeze",
    "docker compose ps",
    "env | sort",
    "which python3",
)
_MODULES = tuple(
    f"{pkg}/{name}"
    for pkg in ("billing", "core", "api", "storage", "reports", "auth")
    for name in (
        "models",
        "service",
        "views",
        "utils",
        "rounding",
        "tax",
        "export",
        "cache",
        "client",
        "parser",
        "schema",
        "tasks",
    )
)


def _pool(draw: Callable[[], str], size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        s = draw()
        parts.append(s)
        total += len(s)
    return "".join(parts)


# The pools' lines. Each draws from ``rng`` exactly what ``rng.choice``/``rng.randrange``/``rng.random`` would, in the
# same order (``choice(seq)`` is ``seq[_randbelow(len(seq))]``, ``randrange(a, b)`` is ``a + _randbelow(b - a)``),
# and formats only the text it keeps: the same pools, drawn faster (tests/bench pins them against those calls).
def _prose_line(rng: random.Random) -> Callable[[], str]:
    below, rand, words, nw = rng._randbelow, rng.random, _WORDS, len(_WORDS)  # type: ignore[attr-defined]

    def line() -> str:
        n = 6 + below(16)
        text = " ".join([words[below(nw)] for _ in range(n)]).capitalize()
        return text + (". \n" if rand() < 0.2 else ". ")

    return line


def _code_line(rng: random.Random) -> Callable[[], str]:
    below, words, idents, nw, ni = rng._randbelow, _WORDS, _IDENTS, len(_WORDS), len(_IDENTS)  # type: ignore[attr-defined]

    def line() -> str:
        w, v, i = words[below(nw)], words[below(nw)], idents[below(ni)]
        a, b, c, d = below(9), below(1000), below(100), below(100)
        k = below(8)
        if k == 0:
            return f"def {w}_{i}(self, {v}_{a}):\n"
        if k == 1:
            return f"    return self.{i}.{w}({v}, {b})\n"
        if k == 2:
            return f'    if {v} is None:\n        raise ValueError("{w} {v} missing")\n'
        if k == 3:
            return f"class {i.capitalize()}{w.capitalize()}:\n"
        if k == 4:
            return f'    {v}_{w} = Decimal("{c}.{d:02d}")\n'
        if k == 5:
            return f"# {w} {v} {i}\n"
        if k == 6:
            return f"from .{w} import {i}_{v}\n"
        return "\n"

    return line


_LEVELS = ("INFO", "DEBUG", "WARN")


def _log_line(rng: random.Random) -> Callable[[], str]:
    below, words, idents, nw, ni = rng._randbelow, _WORDS, _IDENTS, len(_WORDS), len(_IDENTS)  # type: ignore[attr-defined]

    def line() -> str:
        day, minute, second = 1 + below(28), below(60), below(60)
        level, ident, w, v = _LEVELS[below(3)], idents[below(ni)], words[below(nw)], words[below(nw)]
        return f"2025-03-{day:02d} 10:{minute:02d}:{second:02d} {level} {ident}: {w} {v} in {below(999)}ms\n"

    return line


def _cjk_line(rng: random.Random) -> Callable[[], str]:
    below, phrases, n = rng._randbelow, _CJK_PHRASES, len(_CJK_PHRASES)  # type: ignore[attr-defined]

    def line() -> str:
        return "，".join([phrases[below(n)] for _ in range(2 + below(4))]) + "。"

    return line


@functools.lru_cache(maxsize=2)
def scenario_pools(seed: int, chars: int) -> tuple[str, str, str, str]:
    """The text pools of :class:`ScenarioModel` of ``seed`` (prose and code of ``chars`` characters, logs of a
    quarter, CJK prose of an eighth: about 2.6 MB at the default size), made once per process and seed (they are the
    same every time; the last two seeds' are kept)."""
    pools = random.Random(f"pools:{seed}")
    prose = _pool(_prose_line(pools), chars)
    code = _pool(_code_line(pools), chars)
    logs = _pool(_log_line(pools), chars // 4)
    cjk = _pool(_cjk_line(pools), chars // 8)
    return prose, code, logs, cjk


def png_bytes(width: int, height: int, rgb: tuple[int, int, int] = (40, 90, 160)) -> bytes:
    """A valid single-colour PNG of ``width`` x ``height`` pixels (a few kilobytes at screen sizes)."""
    import struct
    import zlib

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height, 9)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


class ScenarioModel:
    """A seeded, endless session of ``shape`` (default :data:`CORPUS_SHAPE`) in Claude Code's vocabulary.

    ``workspace`` prefixes file paths (sessions are imported with that workspace); ``images`` are
    :class:`~latch.events.MediaRef` s of artifacts already in the store, attached to
    :data:`SCREENSHOT_SHARE` of the user turns (none when empty). The same seed gives the same events.
    """

    POOL_CHARS = 1 << 20

    def __init__(
        self,
        seed: int,
        *,
        shape: ScenarioShape = CORPUS_SHAPE,
        workspace: str = "/work/shop",
        images: Sequence[MediaRef] = (),
    ):
        self.shape = shape
        self.workspace = workspace.rstrip("/")
        self.images = tuple(images)
        self._rng = random.Random(seed)
        # rng.randrange(a, b) is a + below(b - a) and rng.choice(seq) is seq[below(len(seq))]: the same draws as
        # those calls (as the pools' lines draw them), without their argument checks on every event
        self._below = self._rng._randbelow  # type: ignore[attr-defined]
        self._prose, self._code, self._logs, self._cjk = scenario_pools(seed, self.POOL_CHARS)
        self._kinds = list(shape.kinds)
        self._weights = list(itertools.accumulate(shape.kinds[k].share for k in self._kinds))
        self._ids = itertools.count(1)

    def _slice(self, pool: str, n: int) -> str:
        n = min(n, len(pool) - 1)
        start = self._below(len(pool) - n)
        return pool[start : start + n]

    def _path(self) -> str:
        return f"src/{_MODULES[self._below(len(_MODULES))]}.py"

    def events(self) -> Iterator[Event]:
        """The endless event stream (one model request after another)."""
        while True:
            yield from self.request()

    def request(self) -> list[Event]:
        """One model request: maybe a user turn, the assistant answer, its usage, its results, maybe a note."""
        rng, shape = self._rng, self.shape
        out: list[Event] = []
        cjk = False
        if rng.random() < shape.user_turns_per_request:
            cjk = rng.random() < shape.non_latin_user_share
            n = shape.user_text_chars.sample(rng)
            text = self._slice(self._cjk, max(4, n // 2)) if cjk else self._slice(self._prose, n)
            media = (
                (self.images[self._below(len(self.images))],) if self.images and rng.random() < SCREENSHOT_SHARE else ()
            )
            out.append(UserMessage(text=text, media=media))
        pool = self._cjk if cjk else self._prose
        if rng.random() < shape.text_only_share:
            out.append(
                AssistantMessage(
                    text=self._slice(pool, shape.assistant_text_chars.sample(rng)), model="claude-sonnet-4-5"
                )
            )
            return self._tail(out, [])
        n_calls = 1
        extra = shape.calls_per_tool_turn - 1
        while extra > 0 and rng.random() < extra / (1 + extra):
            n_calls += 1
        calls = [self._call(self._kind()) for _ in range(n_calls)]
        text = (
            self._slice(pool, shape.assistant_text_chars.sample(rng))
            if rng.random() < shape.tool_turn_text_share
            else ""
        )
        out.append(AssistantMessage(text=text, tool_calls=tuple(c for c, _ in calls), model="claude-sonnet-4-5"))
        return self._tail(out, calls)

    def _tail(self, out: list[Event], calls: list[tuple[ToolCall, ToolResult]]) -> list[Event]:
        rng, below = self._rng, self._below
        if rng.random() < self.shape.usage_per_request:
            cached = 2_000 + below(88_000)
            out.append(
                Usage(
                    input_tokens=50 + below(3_950),
                    output_tokens=20 + below(1_480),
                    cache_read_tokens=cached,
                    cache_write_tokens=below(3_000),
                    model="claude-sonnet-4-5",
                )
            )
        out.extend(r for _, r in calls)
        if rng.random() < self.shape.notes_per_request:
            out.append(
                SystemNote(text=f"Tokens: {2 + below(88)}k sent, {(1 + below(29)) / 10}k received.", subtype="cost")
            )
        return out

    def _kind(self) -> str:
        x = self._rng.random() * self._weights[-1]
        for k, w in zip(self._kinds, self._weights, strict=False):
            if x < w:
                return k
        return self._kinds[-1]

    def _call(self, kind: str) -> tuple[ToolCall, ToolResult]:
        rng, shape = self._rng, self.shape.kinds[kind]
        cid = f"toolu_{next(self._ids):08d}"
        fails = rng.random() < shape.error_rate
        size = shape.result_chars.sample(rng)
        path = self._path()
        if kind == "read":
            args = {"file_path": f"{self.workspace}/{path}"}
            call, result = (
                ToolCall(cid, "Read", canonical_arguments(args)),
                ToolResult(cid, self._slice(self._code, size), name="Read"),
            )
        elif kind == "edit":
            n = shape.args_chars.sample(rng)
            args = {
                "file_path": f"{self.workspace}/{path}",
                "old_string": self._slice(self._code, n // 2),
                "new_string": self._slice(self._code, n - n // 2),
            }
            head = f"The file {self.workspace}/{path} has been updated."
            body = head if size <= len(head) else head + "\n" + self._slice(self._code, size - len(head) - 1)
            call, result = ToolCall(cid, "Edit", canonical_arguments(args)), ToolResult(cid, body, name="Edit")
        elif kind == "test":
            test = path.replace("src/", "tests/test_").replace("/", "_", 1)
            cmd = f"python -m pytest -q {test}"
            if fails:
                tail = (
                    f"FAILED {test}::test_{rng.choice(_WORDS)}_{rng.choice(_IDENTS)} - AssertionError: "
                    f"assert Decimal('{rng.randrange(100)}.{rng.randrange(100):02d}') == Decimal('0.05')\n"
                    f"1 failed, {rng.randrange(3, 80)} passed in {rng.randrange(10, 900) / 100}s"
                )
            else:
                tail = f"{rng.randrange(3, 80)} passed in {rng.randrange(10, 900) / 100}s"
            body = self._slice(self._logs, max(0, size - len(tail) - 1)) + "\n" + tail
            call = ToolCall(cid, "Bash", canonical_arguments({"command": cmd, "description": "Run the tests"}))
            result = ToolResult(cid, body, is_error=fails, name="Bash", exit_code=1 if fails else 0)
        else:
            n = shape.args_chars.sample(rng)
            cmd = rng.choice(_OTHER_COMMANDS)
            if n > 120:
                cmd = f"python3 - <<'EOF'\n{self._slice(self._code, n - 30)}\nEOF"
            body = self._slice(self._logs, size)
            if fails:  # the error first (its signature names the failure), then the rest of the output
                error = rng.choice(_ERRORS)
                body = error if size <= len(error) else error + "\n" + self._slice(self._logs, size - len(error) - 1)
            call = ToolCall(cid, "Bash", canonical_arguments({"command": cmd}))
            result = ToolResult(cid, body, is_error=fails, name="Bash", exit_code=1 if fails else 0)
        return call, result


def _main(argv: Sequence[str]) -> None:
    """Print the shape of the transcripts under a folder (default: the corpus beside the repository)."""
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[3].parent / "shared" / "corpus"

    files = []
    for p in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in ("README.md", "FORMATS.md")):
        try:
            detect(p, p.read_bytes())
        except TranscriptError as exc:  # a format no importer reads yet: not part of the shape
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        files.append(p)
    if not files:
        raise SystemExit(f"no transcripts under {root}")
    print(measure_files(files))
    print("CORPUS_SHAPE_FILES = {")
    for p in files:
        print(f'    "{p.relative_to(root).as_posix()}": "{hashlib.sha256(p.read_bytes()).hexdigest()[:16]}",')
    print("}")


if __name__ == "__main__":  # pragma: no cover
    _main(sys.argv[1:])
