"""Episode selection latency at 10^3 / 10^4 (/ 10^5, marked stress) episodes, and the native kernel's
speed-up over the pure-Python reference on the same index; the incremental builder's cost per event.

Run: ``python -m pytest benchmarks/test_bench_episodes.py --benchmark-only`` (add ``-m ''`` for 10^5).
The native/reference ratio is in ``extra_info["ratio_to_reference"]`` of the 10^4 row.

``test_extend_stress_events`` builds the index over 5,000 events of the stress scenario
(:class:`latch.bench.scenario.ScenarioModel`, seed 1: corpus-shaped sizes, code, logs, CJK).
``extra_info["us_per_event"]`` is the build time per event and ``extra_info["ratio_to_word_scan"]``
that time over one plain ``\\w+`` tokenization of the texts the index reads terms from (a
machine-independent yardstick); ``ratio_to_word_scan_cpu`` the same ratio in CPU time, which a loaded machine
moves far less. The goal is a ratio <= 2.0. ASCII text gets its terms from one native pass
(:func:`latch.hotpaths.ascii_terms`, which hands back the same str for a term met again), command
classes from class-led searches over tries, and a closed episode is kept as columns (measured
side by side on the loaded 2-core machine: CPU ratio 2.53-2.78 -> 1.32-1.52, best 40 -> 18 µs per event).
An ASCII text's path runs (:func:`latch.hotpaths.ascii_path_runs`) and a call's command words
(:func:`latch.hotpaths.ascii_command_classes`) are each found in one native pass: CPU ratio 1.09, 0.95 -> 0.65,
0.63 (before, after, after, before), and the stress viewer's ``episodes`` part at 10^5 events
(``test_bench_stress_viewer_parts.py``) 24.1, 22.7 -> 17.1, 16.3 µs of CPU per event (its viewing CPU 11.1, 10.8
-> 9.9, 9.7 s), on the 2-core machine at load average 5 to 6. Each event read straight into the open segment by a
reader chosen once per event type (no features tuple made and unpacked per event): the ``episodes`` part 16.7, 21.7 ->
15.6, 19.6 and 18.9, 19.1 -> 16.4, 16.9 µs of CPU per event (two rounds of before, after, after, before; load
average 6 to 7), ``ratio_to_word_scan_cpu`` 0.80, 0.67 -> 0.62, 0.58 and 0.75, 0.69 -> 0.64, 0.59.

``test_extend_term_counts_native_vs_lists`` builds the same index with the native term counter
(:class:`latch.hotpaths.TermCounts`: an ASCII text's terms counted in one pass, no list of terms made) and
with the counting in plain Python (each text's terms as a list, a ``Counter`` per episode), interleaved;
``extra_info["ratio_lists_to_native_cpu"]`` is the plain build's CPU time over the native one's.

``test_paths_kept_runs_vs_plain`` finds the file entities of 20,000 stress-scenario events' texts with the runs
kept (a run met again: its entities looked up) and as before (every run's matches found by the path pattern and
checked again), interleaved, each timing from an empty store of runs: ``ratio_paths_cpu`` (the entities of every
text) and ``ratio_build_cpu`` (the whole index build), each the old CPU time over the new (> 1: the new is
faster).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import time

import pytest

from latch import hotpaths
from latch.bench.scenario import ScenarioModel
from latch.engine import episodes as E
from latch.engine.episodes import RESULT_TERM_CHARS, EpisodeIndex
from latch.events import AssistantMessage, SystemNote, ToolCall, ToolResult, UserMessage
from latch.hotpaths import _py
from latch.store import StoredEvent

QUERY = "why does the parser cache token store fail"
FILES = ["/repo/src/pkg7/mod3.py"]


def _events(n_episodes: int):
    """Three events per episode (prompt, test call, result) over a 5,100-word vocabulary."""
    rng = random.Random(7)
    stems = ("parse", "cache", "token", "store", "index", "route", "query", "build", "merge", "split")
    vocab = [s + t for s in stems for t in ("r", "er", "ing", "ed", "or", "al", "ion", "ment", "ness", "ity")]
    vocab += [f"word{i}" for i in range(5000)]
    seq = 0
    for e in range(n_episodes):
        words = " ".join(rng.choice(vocab) for _ in range(12))
        path = f"src/pkg{rng.randrange(300)}/mod{rng.randrange(50)}.py"
        for ev in (
            UserMessage(f"fix {words} in {path}"),
            AssistantMessage(
                f"Looking at {path}: {words}", (ToolCall(f"c{e}", "Bash", json.dumps({"command": f"pytest {path}"})),)
            ),
            ToolResult(
                f"c{e}", f"{rng.choice(vocab)} failed", is_error=rng.random() < 0.3, exit_code=rng.choice((0, 1))
            ),
        ):
            seq += 1
            yield StoredEvent(seq=seq, session_id="bench", kind=ev.KIND, event=ev, source_ref=None, ts=None)


_INDEXES: dict[int, EpisodeIndex] = {}


def _index(n: int) -> EpisodeIndex:
    if n not in _INDEXES:
        idx = EpisodeIndex()
        idx.extend(_events(n))
        _INDEXES[n] = idx
    return _INDEXES[n]


def _select(idx: EpisodeIndex):
    now = idx.watermark
    return idx.select(QUERY, FILES, now_seq=now, k=16, before_seq=now - 30)


@pytest.mark.parametrize("n", [1_000, 10_000, pytest.param(100_000, marks=pytest.mark.stress)])
def test_select_latency(benchmark, n, monkeypatch):
    idx = _index(n)
    benchmark.extra_info.update(episodes=n, backend=hotpaths.BACKEND)
    if n == 10_000 and hotpaths.BACKEND == "native":

        def p50(fn) -> float:
            times = []
            for _ in range(7):
                t = time.perf_counter()
                fn(idx)
                times.append(time.perf_counter() - t)
            return sorted(times)[3]

        native, native_picks = p50(_select), [e.number for e in _select(idx)]
        with monkeypatch.context() as m:
            m.setattr(hotpaths, "score_episodes", _py.score_episodes)
            reference, reference_picks = p50(_select), [e.number for e in _select(idx)]
        assert native_picks == reference_picks
        benchmark.extra_info["ratio_to_reference"] = round(native / reference, 4)
    picked = benchmark(_select, idx)
    assert len(picked) == 16


def test_extend_per_event(benchmark):
    events = list(_events(2_000))

    def build():
        EpisodeIndex().extend(events)

    benchmark.extra_info.update(events=len(events))
    benchmark(build)


def _term_texts(events) -> list[str]:
    """The texts the index reads terms from (results and notes: their first RESULT_TERM_CHARS characters;
    tool calls: name and raw JSON arguments)."""
    out: list[str] = []
    for stored in events:
        e = stored.event
        if isinstance(e, (ToolResult, SystemNote)):
            out.append((e.content if isinstance(e, ToolResult) else e.text)[:RESULT_TERM_CHARS])
        elif isinstance(e, (UserMessage, AssistantMessage)):
            out.append(e.text)
            out.extend(f"{c.name} {c.arguments}" for c in getattr(e, "tool_calls", ()))
    return out


def test_extend_stress_events(benchmark):
    events = [
        StoredEvent(seq=i, session_id="stress", kind=e.KIND, event=e, source_ref=None, ts=None)
        for i, e in enumerate(itertools.islice(ScenarioModel(1).events(), 5_000), 1)
    ]
    texts = _term_texts(events)

    def build():
        EpisodeIndex().extend(events)

    words = re.compile(r"\w+")

    def scan():
        for t in texts:
            words.findall(t)

    builds, scans, build_cpu, scan_cpu = [], [], [], []
    for _ in range(3):  # interleaved, so both see the same machine state
        for fn, times, cpu in ((build, builds, build_cpu), (scan, scans, scan_cpu)):
            c, t = time.process_time(), time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    per_event = min(builds) / len(events)
    benchmark.extra_info.update(
        events=len(events),
        us_per_event=round(per_event * 1e6, 1),
        ratio_to_word_scan=round(min(builds) / min(scans), 2),
        ratio_to_word_scan_cpu=round(min(build_cpu) / min(scan_cpu), 2),  # steadier than wall time under load
    )
    benchmark.pedantic(build, rounds=3, iterations=1)


class _ListCounts(_py.TermCounts):
    """The term counting as plain Python: every text's terms made into a list (``extract_terms``), counted in a
    ``Counter`` per episode, ids in a dict (the reference counter, never taking a text in one pass)."""

    __slots__ = ()

    def add_text(self, text: str, limit: int) -> bool:
        return False


def test_extend_term_counts_native_vs_lists(benchmark, monkeypatch):
    """The index built over 5,000 stress-scenario events with the native term counter (each ASCII text's terms
    counted in one pass, no list of terms made) and with the same counting in plain Python, interleaved.
    ``extra_info["ratio_lists_to_native_cpu"]`` is the plain build's CPU time over the native one's (> 1: the
    native counter is faster); ``us_per_event_native`` / ``us_per_event_lists`` the best wall times."""
    events = [
        StoredEvent(seq=i, session_id="stress", kind=e.KIND, event=e, source_ref=None, ts=None)
        for i, e in enumerate(itertools.islice(ScenarioModel(1).events(), 5_000), 1)
    ]
    native_counts = hotpaths.TermCounts

    def build(counts) -> EpisodeIndex:
        monkeypatch.setattr(hotpaths, "TermCounts", counts)
        idx = EpisodeIndex()
        idx.extend(events)
        idx.episodes  # noqa: B018 (the open segment's terms chosen too)
        return idx

    walls: dict[str, list[float]] = {"native": [], "lists": []}
    cpus: dict[str, list[float]] = {"native": [], "lists": []}
    for _ in range(3):  # interleaved, so both see the same machine state
        for name, counts in (("native", native_counts), ("lists", _ListCounts)):
            c, t = time.process_time(), time.perf_counter()
            build(counts)
            walls[name].append(time.perf_counter() - t)
            cpus[name].append(time.process_time() - c)
    assert build(native_counts).episodes == build(_ListCounts).episodes
    benchmark.extra_info.update(
        events=len(events),
        backend=hotpaths.BACKEND,
        us_per_event_native=round(min(walls["native"]) / len(events) * 1e6, 2),
        us_per_event_lists=round(min(walls["lists"]) / len(events) * 1e6, 2),
        ratio_lists_to_native_cpu=round(min(cpus["lists"]) / min(cpus["native"]), 2),
    )
    benchmark.pedantic(build, args=(native_counts,), rounds=3, iterations=1)


def test_paths_kept_runs_vs_plain(benchmark, monkeypatch):
    events = [
        StoredEvent(seq=i, session_id="stress", kind=e.KIND, event=e, source_ref=None, ts=None)
        for i, e in enumerate(itertools.islice(ScenarioModel(1).events(), 20_000), 1)
    ]
    texts: list[str] = []
    for stored in events:
        e = stored.event
        if isinstance(e, AssistantMessage):
            texts.append(e.text)
            texts.extend(E._argument_text(c) for c in e.tool_calls)
        elif isinstance(e, ToolResult):
            texts.append(e.content)
        elif isinstance(e, (UserMessage, SystemNote)):
            texts.append(e.text)
    kept_chars = {"new": E.RUN_KEPT_CHARS, "old": -1}  # old: no run kept, each found by the path pattern

    def use(name: str) -> None:
        E._RUN_PATHS.clear()  # each timing starts with no kept run, as a fresh process does
        monkeypatch.setattr(E, "RUN_KEPT_CHARS", kept_chars[name])

    def scan_paths(name: str):
        return [E._paths(t) for t in texts]

    def build(name: str):
        idx = EpisodeIndex()
        idx.extend(events)
        return idx.episodes

    cpu: dict[tuple[str, str], list[float]] = {}
    results: dict[tuple[str, str], object] = {}
    for _ in range(3):  # interleaved, so old and new see the same machine state
        for fn in (scan_paths, build):
            for name in ("old", "new"):
                use(name)
                c = time.process_time()
                results[fn.__name__, name] = fn(name)
                cpu.setdefault((fn.__name__, name), []).append(time.process_time() - c)
    for fn in (scan_paths, build):
        assert results[fn.__name__, "old"] == results[fn.__name__, "new"]

    def ratio(fn: str) -> float:
        return round(min(cpu[fn, "old"]) / min(cpu[fn, "new"]), 3)

    benchmark.extra_info.update(
        events=len(events),
        texts=len(texts),
        ratio_paths_cpu=ratio("scan_paths"),
        ratio_build_cpu=ratio("build"),
        us_per_event_build_old=round(min(cpu["build", "old"]) / len(events) * 1e6, 2),
        us_per_event_build_new=round(min(cpu["build", "new"]) / len(events) * 1e6, 2),
    )
    use("new")
    benchmark.pedantic(build, args=("new",), rounds=3, iterations=1)
