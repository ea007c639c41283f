"""What the FTS5 index's segment count costs recall's store searches, and what merging the segments costs.

The store holds the first ``n`` events of the stress scenario (:func:`scenario_stores.scenario_store`: batches of
5,000, one transaction and one new level-0 segment each; FTS5 merges them in the append transaction at its default
``automerge`` of 4). The searches are every store search :func:`latch.engine.recall.recall` runs for :data:`VIEWS`
views near the end of the history (fresh recall caches, the archival region ending :data:`WINDOW` events below each
view), recorded once. One run replays them three ways, each on a copy of the store and a fresh connection:

* ``appended``: the index as the appends left it (``segments_appended`` segments);
* ``usermerge2``: after FTS5's incremental ``merge`` with ``usermerge`` 2, run to completion (every level with two
  segments or more merged: the segments a store would keep if it merged after every commit, with FTS5's own command,
  outside the append transaction);
* ``optimized``: after ``optimize`` (one segment).

Every way returns the same events (asserted). ``extra_info``: ``segments_<way>``, ``search_ms_<way>`` (a search,
process CPU, best of :data:`ROUNDS`), ``ratio_<way>`` (to ``appended``), ``merge_cpu_s_<way>`` (the merge command's
process CPU) and ``merge_per_saved_<way>``: the merge's CPU over the search CPU it saves per replay of the searches
(how many replays it takes to pay for itself).

Measured on the loaded 2-core box (load average about 10) with whole ``latch stress --events 300000`` runs' own
searches replayed on their final store (6,456 searches): 11 segments 6.1-7.7 s of CPU, 1 segment 3.4-4.1 s; the
searches that fill their limit, 97% of them, cost about 35 us per search per segment. Rebuilding that run's index
batch by batch: the default (automerge 4) 15.8 s of CPU, 7.2 segments on average and 11 at the end; ``usermerge`` 2
merged after every commit 21.4 s (+5.6 s), 3.0 on average and 5 at the end; ``automerge`` 2 19.7 s, 5.3 and 5. The
run's searches took 6.5 s of the viewer's 38 s of CPU, so the segments the merge removes save about 1 s of viewer CPU
for 5.6 s more of the producer's: merging does not pay at this batch size. Whole ``latch stress --events 300000`` runs
with the producer running ``merge`` (``usermerge`` 2, 100 pages a step) while it waits for the viewer, alternated
with plain runs: searches 6.18 / 6.70 s of CPU plain against 6.28 / 6.67 s merged (11 segments at the end against
6), viewer 36.4 / 37.9 s against 38.5 / 41.3 s, producer 26.1 / 27.4 s against 32.1 / 36.2 s.

This run's ``extra_info`` at 10^5 events (506 searches): 10 segments 0.77 ms a search; ``usermerge2`` 2 segments
0.54 ms (0.70), its merge 0.48 s of CPU (4.2 replays of the searches to pay for itself); ``optimized`` 0.46 ms (0.59),
0.71 s (4.5 replays).

Run: ``python -m pytest benchmarks/test_bench_fts_segments.py --benchmark-only`` (``LATCH_BENCH_FULL=1``: 3x10^5
events; else 10^5; with ``--benchmark-disable``, as CI runs it, 10^4).
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from scenario_stores import recorded_searches, scenario_store

from latch.store import EventStore

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
EVENTS, FULL_EVENTS, SMOKE_EVENTS = 100_000, 300_000, 10_000
VIEWS = 16
WINDOW = 3_000
"""Events of a view's epoch (the archival region ends this far below the view)."""
ROUNDS = 3


def _searches(store: EventStore, sid: str) -> list[tuple[str, dict[str, Any]]]:
    """Every store search of :data:`VIEWS` views' recall over the newest 4,000 events."""
    return recorded_searches(store, sid, 4_000, VIEWS, WINDOW)


def _segments(store: EventStore) -> int:
    """The FTS5 index's segments (each has its rows in the index's ``_idx`` table)."""
    return int(store._rows("SELECT count(DISTINCT segid) FROM events_fts_idx")[0][0])


def _replay(path: str, searches: list[tuple[str, dict[str, Any]]]) -> tuple[float, list[list[int]]]:
    """``(best process CPU of a replay of the searches, their events' seqs)``, each round on a fresh connection."""
    best, hits = float("inf"), []
    for _ in range(ROUNDS):
        store = EventStore(path)
        try:
            t = time.process_time()
            hits = [[e.seq for e in store.search(q, **kw)] for q, kw in searches]
            best = min(best, time.process_time() - t)
        finally:
            store.close()
    return best, hits


def _merge(path: str, commands: list[tuple[str, int | None]]) -> float:
    """Process CPU of FTS5 ``commands`` (``(command, rank)``) on the store at ``path``; ``merge`` repeats until it
    finds no more work (``total_changes`` moves by less than 2: FTS5's own sign)."""
    store = EventStore(path)
    try:
        db = store._db
        t = time.process_time()
        for command, rank in commands:
            while True:
                before = db.total_changes
                if rank is None:
                    db.execute("INSERT INTO events_fts(events_fts) VALUES (?)", (command,))
                else:
                    db.execute("INSERT INTO events_fts(events_fts, rank) VALUES (?, ?)", (command, rank))
                if command != "merge" or db.total_changes - before < 2:
                    break
        return time.process_time() - t
    finally:
        store.close()


def _measure(tmp_path: Any, events: int) -> dict[str, Any]:
    path = str(tmp_path / "s.db")
    store, sid = scenario_store(tmp_path / "s.db", events)
    try:
        searches = _searches(store, sid)
        segments = {"appended": _segments(store)}
    finally:
        store.close()
    out: dict[str, Any] = {"events": events, "searches": len(searches)}
    cpu, want = _replay(path, searches)
    ways = {"appended": (cpu, 0.0)}
    for way, commands in (
        ("usermerge2", [("usermerge", 2), ("merge", 500)]),
        ("optimized", [("optimize", None)]),
    ):
        copy = str(tmp_path / f"{way}.db")
        shutil.copyfile(path, copy)  # (closed: its WAL is checkpointed into it)
        merge_cpu = _merge(copy, commands)
        with EventStore(copy) as s:
            segments[way] = _segments(s)
        cpu, got = _replay(copy, searches)
        assert got == want  # the same events whatever the segments
        ways[way] = (cpu, merge_cpu)
    assert any(want)
    base = ways["appended"][0]
    for way, (cpu, merge_cpu) in ways.items():
        out[f"segments_{way}"] = segments[way]
        out[f"search_ms_{way}"] = round(1e3 * cpu / len(searches), 4)
        if way != "appended":
            out[f"ratio_{way}"] = round(cpu / base, 3) if base else None
            out[f"merge_cpu_s_{way}"] = round(merge_cpu, 3)
            saved = base - cpu
            out[f"merge_per_saved_{way}"] = round(merge_cpu / saved, 2) if saved > 0 else None
    return out


def test_fts_segments_cost(benchmark, tmp_path):
    events = FULL_EVENTS if FULL else SMOKE_EVENTS if benchmark.disabled else EVENTS
    got = benchmark.pedantic(_measure, args=(tmp_path, events), rounds=1, iterations=1)
    assert got["searches"] > 0
    assert got["segments_optimized"] == 1 <= got["segments_usermerge2"] <= got["segments_appended"]
    benchmark.extra_info.update(got)
