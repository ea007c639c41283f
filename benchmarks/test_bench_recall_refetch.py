"""Recall's store searches across the stress viewer's bursts: how much of their work lists rows listed before.

The log is append-only, so a search's rows below a bound never change: a store search that lists a row an earlier
search of the same query and mode already listed repeats work. One engine's recall cache is kept across every
request (as ``latch stress``'s viewer keeps it); every :data:`EVERY` events a burst of :data:`BURST` requests
recalls from below the burst's epoch start (:func:`scenario_stores.viewer_requests`). A reader counts each store
search (``fetches``), the rows it lists, and the rows and searches that repeat an earlier listing
(``known_row_share``: listed rows an earlier search of the same query listed; ``known_fetch_share``: searches
listing only such rows). The same requests with no kept searches (each recall searches the store afresh) alternate
with the kept ones, :data:`ROUNDS` rounds each, CPU time (``process_time``); both recall the same events (asserted).
``extra_info``: ``view_ms_kept``/``view_ms_fresh`` (CPU per request, median round), ``ratio_kept_to_fresh``, the
shares, ``fetches_per_request``, ``rows_per_fetch``.

Measured on this 2-core box shared with other work (one run each): 3x10^4 scenario events, 44 requests: 10.4 ms of
CPU per request kept, 24.2 fresh (ratio 0.43), 18.6 store searches per request, 6.0 rows each, known rows 0.06%, known
searches 0. A copy of a ``latch stress --events 1000000`` store (``LATCH_BENCH_RECALL_STORE``), 796 requests: 33.1 ms
kept, 81.2 fresh (0.41), 19.1 searches per request, 6.5 rows each, known rows 0.02%, known searches 0.03%. The kept
searches list only rows above the last bound; what a burst pays is each term's FTS5 statement at the new bound.

Run: ``python -m pytest benchmarks/test_bench_recall_refetch.py --benchmark-only`` (``LATCH_BENCH_FULL=1`` adds
10^5; ``LATCH_BENCH_RECALL_STORE=<copy of a stress store>`` replaces the sizes with that store, bursts every 5,000
events)
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import pytest
from scenario_stores import scenario_histories, viewer_recalls, viewer_requests

from latch import hotpaths
from latch.engine.recall import RecallCache
from latch.engine.units import TokenCounter, resolve_estimator
from latch.host.session import StoreSessionReader
from latch.store import EventStore

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
STORE = os.environ.get("LATCH_BENCH_RECALL_STORE", "")
SIZES: list[int] = [0] if STORE else [30_000, 100_000] if FULL else [30_000]
EVERY = 2_500
STORE_EVERY = 5_000
BURST = 4
ROUNDS = 3


class _Counting(StoreSessionReader):
    """A session reader that counts store searches, the rows they list, and the rows (and searches) an earlier search
    of the same query and mode listed already."""

    def __init__(self, store: EventStore, sid: str):
        super().__init__(store, sid)
        self.seen: dict[tuple[str, str], set[int]] = {}
        self.fetches = self.rows = self.known_rows = self.known_fetches = 0

    def search(self, query: str, **kw: Any) -> Any:
        out = super().search(query, **kw)
        seen = self.seen.setdefault((query, kw.get("mode", "or")), set())
        known = sum(e.seq in seen for e in out)
        self.fetches += 1
        self.rows += len(out)
        self.known_rows += known
        self.known_fetches += bool(out) and known == len(out)
        seen.update(e.seq for e in out)
        return out


def _run(reader: StoreSessionReader, requests, counter, keep: bool) -> tuple[list[list[int]], float]:
    cache = RecallCache(counter, keep_searches=keep)
    t = time.process_time()
    got = viewer_recalls(reader, cache, requests)
    return got, time.process_time() - t


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    if STORE:
        store = EventStore(STORE)
        sid = store.sessions()[0].id
        yield lambda n: (store, sid, viewer_requests(store, sid, STORE_EVERY, BURST))
        store.close()
        return
    yield from scenario_histories(
        tmp_path_factory, "recall-refetch", lambda s, sid: viewer_requests(s, sid, EVERY, BURST)
    )


@pytest.mark.parametrize("n", SIZES)
def test_recall_store_work_across_bursts(benchmark, histories, n):
    """Kept and fresh searches alternate, :data:`ROUNDS` rounds each; the counts are of the first kept round (a
    fresh reader); the benchmark's row times the kept searches."""
    store, sid, requests = histories(n)
    counter = TokenCounter(resolve_estimator("claude-sonnet-4-5", None))
    seconds: dict[str, list[float]] = {"kept": [], "fresh": []}
    results: dict[str, list[list[int]]] = {}
    counted: _Counting | None = None
    for _ in range(ROUNDS):
        for plan in seconds:
            reader = _Counting(store, sid)
            results[plan], s = _run(reader, requests, counter, plan == "kept")
            seconds[plan].append(s)
            if plan == "kept" and counted is None:
                counted = reader
    assert counted is not None and counted.fetches > 0
    assert results["kept"] == results["fresh"] and any(results["kept"])
    benchmark.pedantic(_run, args=(StoreSessionReader(store, sid), requests, counter, True), rounds=1, iterations=1)
    ms = {plan: round(statistics.median(s) / len(requests) * 1e3, 3) for plan, s in seconds.items()}
    benchmark.extra_info.update(
        events=store.max_seq(sid),
        backend=hotpaths.BACKEND,
        requests=len(requests),
        view_ms_kept=ms["kept"],
        view_ms_fresh=ms["fresh"],
        ratio_kept_to_fresh=round(statistics.median(seconds["kept"]) / statistics.median(seconds["fresh"]), 3),
        fetches_per_request=round(counted.fetches / len(requests), 2),
        rows_per_fetch=round(counted.rows / counted.fetches, 2),
        known_row_share=round(counted.known_rows / max(1, counted.rows), 4),
        known_fetch_share=round(counted.known_fetches / counted.fetches, 4),
    )
