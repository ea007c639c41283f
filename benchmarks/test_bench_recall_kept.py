"""Recall across the requests of a long session, one engine's recall cache kept throughout (as ``latch stress``'s
viewer runs it), with the kept searches as they run (``plan="as_read"``: after the archive's bound moved up, a
search's rows between the old and the new bound fetched as recall reads them, and an AND's term check reading a
term's first page; the store's candidate check deciding an ASCII text whose phrases cannot match from the text,
unprepared) against the plan before (``plan="at_once"``: up to ``SEARCH_ROWS`` of those rows fetched when the search
is first read at the new bound, the term check reading one row, every candidate text prepared), in one run.

The store holds the events of :class:`latch.bench.scenario.ScenarioModel` (the ``latch stress`` producer's model).
Every :data:`EVERY` events a burst of :data:`BURST` requests recalls from the archival region below the burst's epoch
start, each with the query a continuity view builds from its newest user turn, the agent's newest work and the errors
seen lately (``query_terms`` of those texts), within a shrinking token budget, leaving out what the epoch recalled
already (the stress viewer's recorded calls have this shape). Both plans recall the same events (asserted).
The plans alternate, :data:`ROUNDS` rounds each, in one test. ``extra_info``: ``view_ms_*`` (a request's
recall, median round), ``fetches_*`` (store searches per request), ``ratio_to_at_once`` (as_read over at_once).

On this 2-core box shared with other work (load 1.6; one run, ``LATCH_BENCH_FULL=1``): a request's recall
10.4 -> 7.3 ms at 3x10^4 events (ratio 0.70; store searches per request 24.4 -> 18.7), 16.5 -> 13.0 ms at 10^5
(0.79; 26.3 -> 18.7). The stress viewer's recorded recall calls replayed on its store, both plans alternating:
71 calls at 10^5 events 2.48 -> 1.50 s (0.61), 220 calls at 3x10^5 8.56 -> 6.12 s (0.72).

Run: ``python -m pytest benchmarks/test_bench_recall_kept.py --benchmark-only`` (``LATCH_BENCH_FULL=1`` adds 10^5)
"""

from __future__ import annotations

import os
import statistics
import time

import pytest
from scenario_stores import scenario_histories, viewer_recalls, viewer_requests

from latch import hotpaths
from latch.engine import recall_search
from latch.engine.recall import RecallCache
from latch.engine.units import TokenCounter, resolve_estimator
from latch.host.session import StoreSessionReader
from latch.store import EventStore, fts_search

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
SIZES = [30_000, 100_000] if FULL else [30_000]
EVERY = 2_500
BURST = 4
ROUNDS = 3


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    yield from scenario_histories(tmp_path_factory, "recall-kept", _requests)


def _requests(store: EventStore, sid: str) -> list[tuple[list[str], int, int, int]]:
    """``(terms, before_seq, until_seq, limit_tokens)`` of every request, bursts in order."""
    return viewer_requests(store, sid, EVERY, BURST)


def _run(store: EventStore, sid: str, requests, counter) -> tuple[list[list[int]], int]:
    reader = StoreSessionReader(store, sid)
    cache = RecallCache(counter)
    got = viewer_recalls(reader, cache, requests)
    assert cache.searches is not None
    return got, cache.searches.fetches


def _set_plan(plan: str) -> None:
    new = plan == "as_read"
    recall_search.GAP_AS_READ = new
    recall_search.CHECK_ROWS = recall_search.SEARCH_ROWS if new else 1
    fts_search.TEXT_FIRST = new


@pytest.mark.parametrize("n", SIZES)
def test_recall_across_requests(benchmark, histories, n, monkeypatch):
    """The two plans alternate, :data:`ROUNDS` rounds each (the same load on both); the benchmark's row times
    the plan as it runs."""
    store, sid, requests = histories(n)
    counter = TokenCounter(resolve_estimator("claude-sonnet-4-5", None))
    monkeypatch.setattr(recall_search, "GAP_AS_READ", recall_search.GAP_AS_READ)
    monkeypatch.setattr(recall_search, "CHECK_ROWS", recall_search.CHECK_ROWS)
    monkeypatch.setattr(fts_search, "TEXT_FIRST", fts_search.TEXT_FIRST)
    seconds: dict[str, list[float]] = {"at_once": [], "as_read": []}
    fetches: dict[str, int] = {}
    results: dict[str, list[list[int]]] = {}
    for _ in range(ROUNDS):
        for plan in seconds:
            _set_plan(plan)
            t = time.perf_counter()
            results[plan], fetches[plan] = _run(store, sid, requests, counter)
            seconds[plan].append(time.perf_counter() - t)
    assert results["as_read"] == results["at_once"] and any(results["as_read"])
    _set_plan("as_read")
    benchmark.pedantic(_run, args=(store, sid, requests, counter), rounds=1, iterations=1)
    ms = {plan: round(statistics.median(s) / len(requests) * 1e3, 3) for plan, s in seconds.items()}
    benchmark.extra_info.update(
        events=n,
        backend=hotpaths.BACKEND,
        requests=len(requests),
        view_ms_at_once=ms["at_once"],
        view_ms_as_read=ms["as_read"],
        fetches_at_once=round(fetches["at_once"] / len(requests), 2),
        fetches_as_read=round(fetches["as_read"] / len(requests), 2),
        ratio_to_at_once=round(statistics.median(seconds["as_read"]) / statistics.median(seconds["at_once"]), 3),
    )
