"""Recall's searches kept across requests (latch.engine.recall_search) list the same rows as searching the store
afresh, and recall takes the same originals (spec: "Summaries are indexes, not truth": deterministic, the newest
matching rows first, presented chronologically): on generated histories that grow between recalls, with the
archive's bound moving forward and back, ``until_seq`` below it, AND and OR searches, terms without a token, terms
with no row and terms in most rows."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latch.engine.recall import RecallCache, query_terms, recall
from latch.engine.recall_search import SearchCache, newest_hits
from latch.engine.units import TokenCounter
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.session import StoreSessionReader
from latch.store import EventStore

_VOCAB = [
    "src/pkg1/mod1.py",
    "src/pkg2/mod1.py",
    "src/pkg1/mod2.py",
    "ValueError",
    "E0425",
    "1043.36",
    "node.js",
    "C++",
    "ROUND_HALF_EVEN",
    "invoice",
    "ledger",
    "rounding",
    "totals",
    "pytest",
    "failed",
    "请求失败",
    "___",
    "src",
    "py",
]


class CharEstimator:
    def estimate(self, text: str) -> int:
        return len(text)

    def image_tokens(self, width, height) -> int:
        return 1000


def _events(picks: list[list[int]], start: int) -> list:
    out: list = []
    for n, pick in enumerate(picks, start):
        text = " ".join(_VOCAB[i] for i in pick)
        if n % 3 == 0:
            out.append(UserMessage(f"turn {n}: {text}"))
        elif n % 3 == 1:
            out.append(
                AssistantMessage(f"checking {text}", (ToolCall(f"c{n}", "Bash", json.dumps({"command": text})),))
            )
        else:
            out.append(ToolResult(f"c{n - 1}", f"{text}\n1 failed", is_error=True))
    return out


_batch = st.lists(st.lists(st.integers(0, len(_VOCAB) - 1), min_size=1, max_size=5), min_size=1, max_size=40)
_query = st.lists(st.integers(0, len(_VOCAB) - 1), min_size=1, max_size=6)
_step = st.tuples(_batch, _query, st.integers(0, 60), st.booleans(), st.integers(0, 40))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=1, max_size=8))
def test_kept_searches_list_the_same_rows_and_recall_the_same_originals(steps):
    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(Path(tmp) / "latch.db")
        try:
            sid = store.create_session()
            other = store.create_session()
            reader = StoreSessionReader(store, sid)
            counter = TokenCounter(CharEstimator())
            kept = RecallCache(counter)  # one cache across every request, as an engine keeps it
            searches = SearchCache()
            appended = 0
            for batch, query, back, cap, limit_k in steps:
                store.append(sid, _events(batch, appended))
                store.append(other, _events(batch[:3], appended))  # another session's rows interleave
                appended += len(batch)
                top = store.max_seq(sid)
                before = max(1, top + 1 - back)  # usually forward, sometimes back
                until = max(0, before - 1 - back // 2) if cap else None
                terms = query_terms([" ".join(_VOCAB[i] for i in query)])
                for mode in ("and", "or"):
                    got = [s.seq for s in searches.newest(reader, terms, mode, before, until)]
                    want = [s.seq for s in newest_hits(reader, " ".join(terms), mode, before, until)]
                    assert got == want, (terms, mode, before, until)
                limit = 50 + 40 * limit_k
                fresh = RecallCache(counter, keep_searches=False)
                want_items = recall(reader, fresh, terms, before_seq=before, limit_tokens=limit, until_seq=until)
                got_items = recall(reader, kept, terms, before_seq=before, limit_tokens=limit, until_seq=until)
                assert [r.seq for r in got_items] == [r.seq for r in want_items], (terms, before, until)
                assert [r.text for r in got_items] == [r.text for r in want_items]
        finally:
            store.close()


class _Logged(StoreSessionReader):
    def __init__(self, store, sid):
        super().__init__(store, sid)
        self.queries: list[str] = []

    def search(self, query, **kw):
        self.queries.append(query)
        return super().search(query, **kw)


def test_a_new_term_searches_that_term_alone(store):
    """A request whose query gains one term (a new path) searches the store for that term only; the same query
    again searches nothing."""
    sid = store.create_session()
    store.append(sid, _events([[0, 9], [3, 10], [1, 11], [2, 12]] * 40, 0))
    reader = _Logged(store, sid)
    searches = SearchCache()
    before = store.max_seq(sid) + 1
    first = ["src/pkg1/mod1.py", "ValueError", "invoice"]
    rows = [s.seq for s in searches.newest(reader, first, "or", before, None)]
    assert len(rows) == 64 and set(reader.queries) == set(first)
    reader.queries.clear()
    assert [s.seq for s in searches.newest(reader, first, "or", before, None)] == rows
    assert reader.queries == []  # the same query again: no store search
    again = [s.seq for s in searches.newest(reader, [*first, "src/pkg2/mod1.py"], "or", before, None)]
    assert set(reader.queries) == {"src/pkg2/mod1.py"} and again != rows
    assert again == [s.seq for s in newest_hits(reader, " ".join([*first, "src/pkg2/mod1.py"]), "or", before, None)]


def test_an_and_whose_terms_share_no_row_is_answered_from_their_rows(store):
    """An AND whose terms each have every row below the bound fetched (few rows) and no row in common lists nothing
    without its own store search; terms with a row in common are searched, and find it."""
    sid = store.create_session()
    # E0425 in rows 1-2, node.js in rows 3-4, both in row 5; invoice and ledger everywhere else
    store.append(sid, _events([[4], [4], [6], [6], [4, 6]] + [[9, 10]] * 20, 0))
    reader = _Logged(store, sid)
    searches = SearchCache()
    apart = ["E0425", "node.js"]
    assert [s.seq for s in searches.newest(reader, apart, "and", 5, None)] == []  # below row 5: no row holds both
    assert sorted(reader.queries) == sorted(apart)  # each term's first page, no AND search
    assert [s.seq for s in newest_hits(reader, " ".join(apart), "and", 5, None)] == []
    reader.queries.clear()
    together = [s.seq for s in searches.newest(reader, apart, "and", store.max_seq(sid) + 1, None)]
    assert together == [5] == [s.seq for s in newest_hits(reader, " ".join(apart), "and", store.max_seq(sid) + 1, None)]
    assert "E0425 node.js" in reader.queries


_partial_step = st.tuples(_batch, _query, st.integers(0, 60), st.booleans(), st.integers(0, 70))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_partial_step, min_size=2, max_size=10))
def test_searches_read_in_part_list_the_same_rows_as_the_store(steps):
    """Searches read only in part (as a recall that is done early reads them) while the archive's bound moves
    forward and back keep listing the rows of the plain newest-first FTS5 query: the rows between an old bound and
    a new one are fetched as they are read, and the rows kept below the old bound continue them."""
    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(Path(tmp) / "latch.db")
        try:
            sid = store.create_session()
            reader = StoreSessionReader(store, sid)
            searches = SearchCache()
            appended = 0
            for batch, query, back, cap, read in steps:
                store.append(sid, _events(batch * 3, appended))
                appended += 3 * len(batch)
                before = max(1, store.max_seq(sid) + 1 - back)
                until = max(0, before - 1 - back // 2) if cap else None
                terms = query_terms([" ".join(_VOCAB[i] for i in query)])
                for mode in ("and", "or"):
                    want = [s.seq for s in newest_hits(reader, " ".join(terms), mode, before, until)]
                    got = [s.seq for s in itertools.islice(searches.newest(reader, terms, mode, before, until), read)]
                    assert got == want[:read], (terms, mode, before, until, read)
        finally:
            store.close()


_writer_step = st.tuples(_batch, _query, st.integers(0, 60), st.booleans(), st.integers(0, 70), _batch)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_writer_step, min_size=2, max_size=8))
def test_kept_searches_stay_exact_while_another_connection_appends(steps):
    """A reader's kept searches (its own store connection, as the stress viewer's) while a writer's connection
    appends between requests and in the middle of a search being read: every search lists the rows of the same
    search on a connection opened afresh (no kept rows), and recall takes the same originals as without kept
    searches. The archive's bound moves up with the appended rows and sometimes back."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "latch.db"
        writer = EventStore(path)
        reader_store = EventStore(path)
        try:
            sid = writer.create_session()
            reader = StoreSessionReader(reader_store, sid)
            counter = TokenCounter(CharEstimator())
            kept = RecallCache(counter)
            searches = SearchCache()
            appended = 0
            for batch, query, back, cap, read, during in steps:
                writer.append(sid, _events(batch * 3, appended))
                appended += 3 * len(batch)
                top = reader_store.max_seq(sid)
                before = max(1, top + 1 - back)
                until = max(0, before - 1 - back // 2) if cap else None
                terms = query_terms([" ".join(_VOCAB[i] for i in query)])
                for mode in ("and", "or"):
                    listed = searches.newest(reader, terms, mode, before, until)
                    got = [s.seq for s in itertools.islice(listed, read // 2)]
                    writer.append(sid, _events(during, appended))  # (above the bound: no row of this search)
                    appended += len(during)
                    got += [s.seq for s in itertools.islice(listed, read - read // 2)]
                    fresh = EventStore(path)
                    try:
                        want = [
                            s.seq
                            for s in newest_hits(StoreSessionReader(fresh, sid), " ".join(terms), mode, before, until)
                        ]
                    finally:
                        fresh.close()
                    assert got == want[:read], (terms, mode, before, until, read)
                limit = 60 + 30 * (read % 5)
                want_items = recall(
                    reader,
                    RecallCache(counter, keep_searches=False),
                    terms,
                    before_seq=before,
                    limit_tokens=limit,
                    until_seq=until,
                )
                got_items = recall(reader, kept, terms, before_seq=before, limit_tokens=limit, until_seq=until)
                assert [(r.seq, r.text) for r in got_items] == [(r.seq, r.text) for r in want_items], (terms, before)
        finally:
            reader_store.close()
            writer.close()
