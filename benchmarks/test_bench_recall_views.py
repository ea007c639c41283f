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

Where a store search's cost grows with the log (``test_view_recall_searches_by_fill`` and
``test_view_recall_searches_by_segments``; ``latch stress --events 400000`` with every ``EventStore.search`` of its
viewer timed, by the search's bound): a search took 0.58 ms of CPU below 10^5 events and 0.97 ms at 3-4 x 10^5
(about 2,100 searches per 10^5 events at every size). Of the 0.39 ms it gained, 0.21 ms is the FTS statement of the
exact query, 0.06 ms the candidate queries, 0.04 ms the rows read, 0.1 ms Python outside the SQL (candidate
checks, decoding); the plan with its density probes stays at 0.06-0.08 ms. Two parts of the FTS statement grow:

* the searches that fill their ``limit`` (98% of them): 0.25 -> 0.43 ms per statement. FTS5 opens every token of the
  query in every segment of its index, and a newest-first scan below a bound walks a segment lying wholly above the
  bound entry by entry: the index holds 4 segments at 3 x 10^4 events, 11 at 3 x 10^5. The same statements (the
  FTS part alone, bounds near the top of a 3 x 10^5 store) took 0.255 ms with its 11 segments and 0.060 ms after
  ``optimize`` (one segment), 0.127 ms on a 3 x 10^4 store; with bounds 2-2.6 x 10^4 (far below the top) 0.379 ms
  and 0.093 ms. Here (one run, loaded box): 0.117 -> 0.228 ms from 2 x 10^4 to 10^5 events as appended (5 -> 10
  segments), 0.083 -> 0.134 ms merged (ratio to appended 0.71, 0.59);
* the searches that do not (fewer than ``limit`` matches below the bound: a view's new terms joined by AND, phrases
  of dense tokens only such as ``"n" + "is" + "n" + "n"``): each proves that no other match lies below its bound by
  walking its tokens' doclists to the start of the log, O(the history): 0.43 ms per statement below 10^5 events,
  7.5 ms at 3-4 x 10^5 (the slowest 25-40 ms). About 1.5% of the statements, 20% of their time at 3-4 x 10^5.

Run: ``python -m pytest benchmarks/test_bench_recall_views.py --benchmark-only``
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from contextlib import closing
from pathlib import Path
from typing import Any

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


_SPLIT: dict[int, dict[str, float]] = {}


@pytest.mark.parametrize("n", SIZES)
def test_view_recall_searches_by_fill(benchmark, histories, n, monkeypatch):
    """The store searches of the views' recall, split by whether a search fills its ``limit`` (``full``: it stops
    at its newest ``limit`` matches) or not (``short``: it proves that no other match lies below its bound, walking
    its tokens' doclists down to the start of the log). ``extra_info``: per kind, ``<kind>_searches`` and
    ``<kind>_ms`` (a search's mean time, the last round), ``short_share`` (of the searches' time) and, on the larger
    size, ``<kind>_ratio_to_smaller``."""
    store, sid, views = histories(n)
    counter = TokenCounter(resolve_estimator("claude-sonnet-4-5", None))
    took: dict[str, list[float]] = {"full": [], "short": []}
    search = EventStore.search

    def timed(self: EventStore, query: str, **kw: Any) -> list[Any]:
        t = time.perf_counter()
        got = search(self, query, **kw)
        took["full" if len(got) >= kw.get("limit", 20) else "short"].append(time.perf_counter() - t)
        return got

    def one_round() -> list[list[int]]:
        for v in took.values():
            v.clear()
        return _round(store, sid, views, counter)

    monkeypatch.setattr(EventStore, "search", timed)
    got = benchmark.pedantic(one_round, rounds=3, iterations=1, warmup_rounds=1)
    assert any(got) and took["full"]
    split = {k: statistics.mean(v) * 1e3 if v else 0.0 for k, v in took.items()}
    total = sum(map(sum, took.values()))
    benchmark.extra_info.update(events=n, short_share=round(sum(took["short"]) / total, 3) if total else None)
    for k, v in took.items():
        benchmark.extra_info[f"{k}_searches"] = len(v)
        benchmark.extra_info[f"{k}_ms"] = round(split[k], 3)
        if n != SIZES[0] and n in SIZES and SIZES[0] in _SPLIT and _SPLIT[SIZES[0]][k]:
            benchmark.extra_info[f"{k}_ratio_to_smaller"] = round(split[k] / _SPLIT[SIZES[0]][k], 3)
    _SPLIT[n] = split


def _segments(path: Path) -> int:
    with closing(sqlite3.connect(path)) as db:
        return int(db.execute("SELECT count(DISTINCT segid) FROM events_fts_idx").fetchone()[0])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("index", ["appended", "merged"])
def test_view_recall_searches_by_segments(benchmark, histories, tmp_path, index, n, monkeypatch):
    """The store searches the views' recall issues, replayed on a fresh connection to the store as appended (its
    FTS5 index in the segments incremental merging left) and to a copy whose index is merged into one segment
    (``optimize``), in one run. FTS5 opens every query token in every segment, and a newest-first scan below a
    bound walks a segment that lies wholly above the bound entry by entry. Both find the same rows (asserted).
    ``extra_info``: ``segments``, ``search_ms`` (mean per search) and, on ``merged``, ``ratio_to_appended``."""
    store, sid, views = histories(n)
    counter = TokenCounter(resolve_estimator("claude-sonnet-4-5", None))
    calls: list[tuple[str, dict[str, Any]]] = []
    search = EventStore.search

    def record(self: EventStore, query: str, **kw: Any) -> list[Any]:
        calls.append((query, kw))
        return search(self, query, **kw)

    statements: list[tuple[str, list[Any]]] = []
    rows = EventStore._rows

    def record_sql(self: EventStore, sql: str, args: Any = ()) -> list[Any]:
        if "events_fts MATCH" in sql:
            statements.append((sql, list(args)))
        return rows(self, sql, args)

    with monkeypatch.context() as m:
        m.setattr(EventStore, "search", record)
        m.setattr(EventStore, "_rows", record_sql)
        _round(store, sid, views, counter)
    path = store.path
    if index == "merged":
        path = tmp_path / "merged.db"
        with closing(sqlite3.connect(store.path)) as src, closing(sqlite3.connect(path)) as dst:
            src.backup(dst)
            dst.execute("INSERT INTO events_fts(events_fts) VALUES ('optimize')")
            dst.commit()
    fresh = EventStore(str(path))
    try:
        got = benchmark.pedantic(
            lambda: [[e.seq for e in fresh.search(q, **kw)] for q, kw in calls], rounds=3, iterations=1
        )
    finally:
        fresh.close()
    assert got == [[e.seq for e in search(store, q, **kw)] for q, kw in calls] and any(got)
    benchmark.extra_info.update(events=n, index=index, segments=_segments(path), searches=len(calls))
    with closing(sqlite3.connect(path)) as db:  # the FTS statements alone, warm, best of three
        for sql, args in statements:
            db.execute(sql, args).fetchall()
        took = []
        for _ in range(3):
            t = time.perf_counter()
            for sql, args in statements:
                db.execute(sql, args).fetchall()
            took.append((time.perf_counter() - t) / len(statements) * 1e3)
    _STATEMENT_MS[index, n] = min(took)
    benchmark.extra_info.update(statements=len(statements), statement_ms=round(min(took), 4))
    if index == "merged" and ("appended", n) in _STATEMENT_MS:
        benchmark.extra_info["statement_ratio_to_appended"] = round(min(took) / _STATEMENT_MS["appended", n], 3)
    if benchmark.stats is not None:
        _SEARCH_MS[index, n] = statistics.median(benchmark.stats.stats.data) / len(calls) * 1e3
        benchmark.extra_info["search_ms"] = round(_SEARCH_MS[index, n], 4)
        if index == "merged" and ("appended", n) in _SEARCH_MS:
            benchmark.extra_info["ratio_to_appended"] = round(_SEARCH_MS[index, n] / _SEARCH_MS["appended", n], 3)


_SEARCH_MS: dict[tuple[str, int], float] = {}
_STATEMENT_MS: dict[tuple[str, int], float] = {}
