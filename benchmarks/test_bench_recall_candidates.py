"""The store searches a view's recall runs on the stress scenario's history, at two history sizes, three ways in one
run: the exact FTS5 query alone (``fts5``: the reference), the newest-first candidate search with every candidate
decoded and decided by its text (``text``: :meth:`latch.store.fts_search.CandidateSearch.verify`), and the candidate
search as it runs (``payload``: a candidate whose stored payload shows that its text cannot match,
:class:`latch.store.fts_search.PayloadCheck`, is never decoded, and an OR whose phrases hold one rare token each runs
as the exact query, :data:`latch.store.fts_search.ONE_RARE_ON_FTS5`; ``text`` plans those by candidates too).

The store holds the events of :class:`latch.bench.scenario.ScenarioModel` (the ``latch stress`` producer's model).
The searches are the ones :func:`latch.engine.recall.recall` runs for :data:`VIEWS` views near the end of the history
(each with the query a continuity view builds from its newest turns, on a fresh recall cache, the archival region
ending :data:`WINDOW` events below the view), recorded once; the rounds replay those the store answers with a
candidate search in either plan (an AND of several terms, or an OR holding a phrase of several tokens). All three return the same events (asserted). ``extra_info``: ``search_ms`` (a search, median round),
``ratio_to_fts5`` and ``ratio_to_text``, ``ratio_to_smaller`` on the larger size.

Under load on the 2-core box (one run, five jobs sharing it): a search at 10^5 events 2.42 ms (``fts5``), 7.77 ms
(``text``), 0.40 ms (``payload``): 0.17 of the FTS5 query, 0.052 of the text check; at 2x10^4 1.60, 3.65, 0.18 ms.
(``text`` shares the phrase patterns compiled once; the commit before compiled them on every chunk.) The recall
searches of a real ``latch stress --events 200000`` (the store's ``search`` timed in process CPU, the commit before
and this one back to back, three pairs): 4.62, 5.08, 5.01 s -> 3.63, 3.73, 3.77 s; a search's p99 9.5, 9.4, 9.1 ms
-> 5.4, 5.6, 5.5 ms; the slowest (wall) 154, 255, 407 ms -> 79, 69, 86 ms.

The store searches of a whole ``latch stress --events 1000000`` viewer (21,907, recorded with their bounds and hits,
replayed on that run's kept store in process CPU, loaded box, one run each): 66.8 s with every phrase pattern of an
AND compiled up front and its candidates the AND of tokens in fewer than 1 row of 64, 47.4 s with a pattern compiled
only for a row holding its tokens (:class:`latch.store.fts_search.PhrasePattern`) and an AND's candidate tokens taken
below 1 row of 16 (:data:`latch.store.fts_search.AND_DENSE_SPAN`); the same hits for every search. Their 701 AND
searches alone: 19.9 -> 12.5 s (the bound alone, 1 of 16 against 1 of 64 with the patterns compiled late: 12.2-13.6
against 16.7-22.3 s over two pairs; 1 of 32 gave 13.1 s; on the 3 x 10^5 run's 182 ANDs 1 of 8, 1 of 4 and every token
were 1.8-4x slower than 1 of 16: a dense token's doclist is moved at every candidate).

Run: ``python -m pytest benchmarks/test_bench_recall_candidates.py --benchmark-only``
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from scenario_stores import recorded_searches, scenario_histories

from latch import hotpaths
from latch.store import EventStore, fts_search

SIZES = [20_000, 100_000]
VIEWS = 8
WINDOW = 3_000
"""Events of a view's epoch (the archival region ends this far below the view)."""
_MEDIAN: dict[tuple[str, int], float] = {}


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    yield from scenario_histories(tmp_path_factory, "recall-candidates", _searches)


def _searches(store: EventStore, sid: str) -> list[tuple[str, dict[str, Any]]]:
    """The candidate searches of :data:`VIEWS` views' recall in the newest 2,000 events."""
    calls = recorded_searches(store, sid, 2_000, VIEWS, WINDOW)
    plan, one_rare = fts_search.CandidateSearch(), fts_search.ONE_RARE_ON_FTS5
    fts_search.ONE_RARE_ON_FTS5 = False  # (the searches either plan answers by candidates)
    try:
        return [(q, kw) for q, kw in calls if plan.plan(store._db, q, kw["mode"]) is not None]
    finally:
        fts_search.ONE_RARE_ON_FTS5 = one_rare


def _round(store: EventStore, searches) -> list[list[int]]:
    store._candidates._resumes.clear()  # (each round searches afresh)
    return [[e.seq for e in store.search(q, **kw)] for q, kw in searches]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("path", ["fts5", "text", "payload"])
def test_recall_candidate_searches(benchmark, histories, path, n, monkeypatch):
    store, _, searches = histories(n)
    assert searches
    monkeypatch.setattr(fts_search.CandidateSearch, "plan", lambda self, db, query, mode: None)
    want = _round(store, searches)  # the exact FTS5 query's events
    monkeypatch.undo()
    if path == "fts5":
        monkeypatch.setattr(fts_search.CandidateSearch, "plan", lambda self, db, query, mode: None)
    elif path == "text":
        monkeypatch.setattr(fts_search.PayloadCheck, "may_match", lambda self, kind, payload: True)
        monkeypatch.setattr(fts_search, "ONE_RARE_ON_FTS5", False)
    got = benchmark.pedantic(_round, args=(store, searches), rounds=5, iterations=1, warmup_rounds=1)
    assert got == want and any(got)
    benchmark.extra_info.update(events=n, path=path, backend=hotpaths.BACKEND, searches=len(searches))
    if benchmark.stats is not None:
        _MEDIAN[path, n] = statistics.median(benchmark.stats.stats.data) / len(searches)
        benchmark.extra_info["search_ms"] = round(_MEDIAN[path, n] * 1e3, 3)
        for ref in ("fts5", "text"):
            if path != ref and (ref, n) in _MEDIAN:
                benchmark.extra_info[f"ratio_to_{ref}"] = round(_MEDIAN[path, n] / _MEDIAN[ref, n], 3)
        if n != SIZES[0] and (path, SIZES[0]) in _MEDIAN:
            benchmark.extra_info["ratio_to_smaller"] = round(_MEDIAN[path, n] / _MEDIAN[path, SIZES[0]], 3)
