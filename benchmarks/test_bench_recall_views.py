"""A view's recall on the stress scenario's history, at two history sizes, with the candidate check of the store's
newest-first search done by FTS5 alone (``check="fts5"``: every candidate chunk indexed in an in-memory FTS5 table)
against the check as it runs (``check="pattern"``: a candidate whose text is ASCII decided by a phrase pattern,
:func:`latch.store.fts_search.plain_matches`; the others by FTS5), in one run.

The store holds the events of :class:`latch.bench.scenario.ScenarioModel` (the ``latch stress`` producer's model).
A round recalls for :data:`VIEWS` views near the end of the history, each with the query a continuity view builds
from its newest user turn, the agent's newest work and the errors seen lately (``query_terms`` of those texts), from
the archival region (``seq`` below the view's epoch start, :data:`WINDOW` events back), on a fresh recall cache:
the cost of a view whose terms are new (about half of a stress view's 24 terms are). Both checks recall the same
events (asserted). ``extra_info``: ``view_ms`` (a view's recall, median round over :data:`VIEWS`),
``ratio_to_fts5`` on the ``pattern`` rows, ``ratio_to_smaller`` on the larger size.

On a quiet 2-core box (one run): a view's recall 18.6 ms (FTS5 check) -> 14.7 ms (pattern) at 2x10^4 events
(ratio 0.79), 42.8 -> 30.1 ms at 10^5 (0.70); growth from 2x10^4 to 10^5 2.31 -> 2.04. The stress viewer's
recorded recall calls replayed on its 3x10^5-event store: 220 calls 12.5 s -> 10.4 s, a candidate chunk's check
4.5 -> 1.9 ms.

Run: ``python -m pytest benchmarks/test_bench_recall_views.py --benchmark-only``
"""

from __future__ import annotations

import statistics

import pytest
from scenario_stores import scenario_histories

from latch import hotpaths
from latch.engine.recall import RecallCache, query_terms, recall
from latch.engine.units import TokenCounter, resolve_estimator
from latch.events import AssistantMessage, ToolResult, UserMessage
from latch.host.session import StoreSessionReader
from latch.store import EventStore, fts_search

SIZES = [20_000, 100_000]
VIEWS = 8
WINDOW = 3_000
"""Events of a view's epoch (the archival region ends this far below the view)."""
_MEDIAN: dict[tuple[str, int], float] = {}


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    yield from scenario_histories(tmp_path_factory, "recall-views", _views)


def _views(store: EventStore, sid: str) -> list[tuple[list[str], int]]:
    """``(terms, before_seq)`` of :data:`VIEWS` views in the newest 2,000 events."""
    top = store.max_seq(sid)
    out = []
    for until in range(top - 2_000, top, 2_000 // VIEWS):
        recent = list(store.events(sid, after_seq=until - 200, until_seq=until))
        user = [e.event.text for e in recent if isinstance(e.event, UserMessage)][-1:]
        work = [e.event.searchable_text()[:2_000] for e in recent if isinstance(e.event, AssistantMessage)][-3:]
        errors = [e.event.content[:2_000] for e in recent if isinstance(e.event, ToolResult) and e.event.is_error]
        out.append((query_terms([*user, *work, *errors[-4:]]), until - WINDOW))
    return out


def _round(store: EventStore, sid: str, views, counter) -> list[list[int]]:
    reader = StoreSessionReader(store, sid)
    cache = RecallCache(counter)
    return [[r.seq for r in recall(reader, cache, t, before_seq=b, limit_tokens=8_000)] for t, b in views]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("check", ["fts5", "pattern"])
def test_view_recall(benchmark, histories, check, n, monkeypatch):
    store, sid, views = histories(n)
    counter = TokenCounter(resolve_estimator("claude-sonnet-4-5", None))
    want = _round(store, sid, views, counter)
    if check == "fts5":
        verify = fts_search.CandidateSearch.verify
        monkeypatch.setattr(
            fts_search.CandidateSearch, "verify", lambda self, match, texts, phrases=None: verify(self, match, texts)
        )
    got = benchmark.pedantic(_round, args=(store, sid, views, counter), rounds=5, iterations=1, warmup_rounds=1)
    assert got == want and any(got)
    benchmark.extra_info.update(events=n, check=check, backend=hotpaths.BACKEND, recalled=sum(map(len, got)))
    if benchmark.stats is not None:
        _MEDIAN[check, n] = statistics.median(benchmark.stats.stats.data) / len(views)
        benchmark.extra_info["view_ms"] = round(_MEDIAN[check, n] * 1e3, 3)
        if check == "pattern" and ("fts5", n) in _MEDIAN:
            benchmark.extra_info["ratio_to_fts5"] = round(_MEDIAN[check, n] / _MEDIAN["fts5", n], 3)
        if n != SIZES[0] and (check, SIZES[0]) in _MEDIAN:
            benchmark.extra_info["ratio_to_smaller"] = round(_MEDIAN[check, n] / _MEDIAN[check, SIZES[0]], 3)
