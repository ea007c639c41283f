"""The newest-first search (rare-token candidates verified exactly, latch.store.fts_search) returns the same rows
as the one FTS5 query it replaces: on generated stores (path phrases over dense tokens, AND and OR, the bounded
scan's fallback) and on every session of the corpus."""

from __future__ import annotations

import json
import random

import pytest
from corpus_support import corpus_available, import_item, importable_corpus_items

from latch.engine.recall import query_terms
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.store import EventStore, fts_search
from latch.store.fts import build_match_query

_WORDS = [f"word{i}" for i in range(400)] + ["parse", "cache", "token", "store", "index", "route"]


@pytest.fixture(autouse=True)
def candidates_on_any_log(monkeypatch):
    """The generated and corpus stores here are short: plan them by candidates as a long log is."""
    monkeypatch.setattr(fts_search, "SMALL_LOG", 0)


def _exact(
    store: EventStore,
    query: str,
    mode: str,
    *,
    session_id: str | None = None,
    before_seq: int | None = None,
    until_seq: int | None = None,
    limit: int = 20,
) -> list[int]:
    """The rows of the one FTS5 query (the plan the candidate search replaces), newest first."""
    match = build_match_query(query, mode=mode)
    if match is None:
        return []
    sql = "SELECT f.rowid FROM events_fts f JOIN events e ON e.seq = f.rowid WHERE events_fts MATCH ?"
    args: list = [match]
    for clause, value in (
        (" AND e.session_id = ?", session_id),
        (" AND f.rowid < ?", before_seq),
        (" AND f.rowid <= ?", until_seq),
    ):
        if value is not None:
            sql += clause
            args.append(value)
    return [r[0] for r in store._db.execute(sql + " ORDER BY f.rowid DESC LIMIT ?", (*args, limit))]


def _generated(path, turns: int, seed: int = 3) -> tuple[EventStore, str]:
    store = EventStore(path)
    sid = store.create_session(external_key=f"gen:{seed}")
    other = store.create_session(external_key=f"gen-other:{seed}")
    rng = random.Random(seed)
    batch = []
    for i in range(turns):
        words = " ".join(rng.choice(_WORDS) for _ in range(8))
        p = f"src/pkg{rng.randrange(30)}/mod{rng.randrange(8)}.py"
        batch += [
            UserMessage(f"step {i}: fix {words} in {p}"),
            AssistantMessage(f"Looking at {p}.", (ToolCall(f"c{i}", "Bash", json.dumps({"command": f"pytest {p}"})),)),
            ToolResult(f"c{i}", f"{' '.join(rng.choice(_WORDS) for _ in range(20))}\n1 failed", is_error=True),
        ]
    store.append(sid, batch)
    store.append(other, batch[: len(batch) // 3])
    return store, sid


def _queries(rng: random.Random) -> list[str]:
    qs = [
        "src/pkg3/mod1.py word7",
        "src/pkg3/mod1.py",
        "pytest src/pkg1/mod2.py",
        "src py",
        "1 failed",
        "step 10",
        "parse cache word3",
        '"src/pkg4" AND mod3.py',
        "fix word1 in",
        "nothing-like-this zzz",
    ]
    qs += [f"src/pkg{rng.randrange(30)}/mod{rng.randrange(8)}.py word{rng.randrange(400)}" for _ in range(12)]
    qs += [  # two phrases with candidates: the second runs above the rows the first one found
        f"src/pkg{rng.randrange(30)}/mod{rng.randrange(8)}.py src/pkg{rng.randrange(30)}/mod{rng.randrange(8)}.py"
        for _ in range(6)
    ]
    return qs


def _word_pairs(store: EventStore, rng: random.Random) -> list[str]:
    """Phrases of two rare tokens cut from the stored turns (``word12-word7``), alone and with a path: an OR of
    them goes through the candidate search (an OR whose phrases hold one rare token each is FTS5's own)."""
    texts = [e.event.text for e in store.events() if isinstance(e.event, UserMessage)]
    out = []
    for t in rng.sample(texts, 8):
        words = [w for w in t.split() if w.startswith("word")]
        i = rng.randrange(len(words) - 1)
        out.append(f"{words[i]}-{words[i + 1]}")
    return out + [f"{q} src/pkg{rng.randrange(30)}/mod{rng.randrange(8)}.py" for q in out[:4]]


@pytest.mark.parametrize("mode", ["and", "or"])
def test_generated_store_same_rows(tmp_path, mode):
    store, sid = _generated(tmp_path / "g.db", 1_500)
    rng = random.Random(9)
    top = store.max_seq()
    planned = 0
    for q in _queries(rng) + _word_pairs(store, rng):
        planned += store._candidates.plan(store._db, q, mode) is not None
        for kw in (
            {},
            {"session_id": sid},
            {"session_id": sid, "before_seq": rng.randrange(2, top)},
            {"before_seq": top - 50, "until_seq": top - 400},
            {"limit": 3},
            {"limit": 1},
            {"session_id": sid, "limit": 7},
        ):
            got = [s.seq for s in store.search(q, mode=mode, **kw)]
            assert got == _exact(store, q, mode, **kw), (q, mode, kw)
    assert planned >= 10, "most path queries go through the candidate search"
    store.close()


def test_candidates_are_decided_by_their_text(tmp_path):
    """A chunk of candidates is decided by its rows' text (the exact query on an in-memory table of the chunk,
    O(the chunk)), never by the exact query on the index, which FTS5 does not stop at the chunk's span; the rows
    are the exact query's."""
    store, sid = _generated(tmp_path / "g.db", 1_500)
    decided: list[int] = []
    verify = store._candidates.verify

    def counted(match, texts, phrases=None):
        decided.append(len(texts))
        return verify(match, texts, phrases)

    store._candidates.verify = counted
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    for path_query in ("src/pkg3/mod1.py word7", "pytest src/pkg1/mod2.py", "src/pkg2/mod5.py src/pkg4/mod1.py"):
        for mode in ("and", "or"):
            # (an OR whose phrases hold one rare token each is FTS5's own: the OR gets a phrase of two rare tokens)
            q = path_query if mode == "and" else f"{path_query} word3-word4"
            assert store._candidates.plan(store._db, q, mode) is not None
            match = build_match_query(q, mode=mode)
            statements.clear()
            got = [s.seq for s in store.search(q, mode=mode, session_id=sid, limit=5)]
            asked = [x for x in statements if match.replace("'", "''") in x]
            assert got == _exact(store, q, mode, session_id=sid, limit=5), (q, mode)
            assert not asked, (q, mode)
    assert decided and max(decided) <= fts_search.CHUNK
    store.close()


def test_bounded_scan_falls_back_to_the_exact_query(tmp_path, monkeypatch):
    """Past MAX_CANDIDATES candidates without enough matches, the older rows come from the exact query."""
    store, sid = _generated(tmp_path / "g.db", 1_500)
    monkeypatch.setattr(fts_search, "CHUNK", 4)
    monkeypatch.setattr(fts_search, "MAX_CANDIDATES", 8)
    monkeypatch.setattr(fts_search, "DENSE_SPAN", 1)  # every token counts as rare: many candidates, few matches
    monkeypatch.setattr(fts_search, "AND_DENSE_SPAN", 1)
    store._candidates = fts_search.CandidateSearch()
    for q in ("src/pkg3/mod1.py word7", "fix word3 in src/pkg2", "src/pkg2/mod5.py"):
        for mode in ("and", "or"):
            assert store._candidates.plan(store._db, q, mode) is not None
            got = [s.seq for s in store.search(q, mode=mode, session_id=sid)]
            assert got == _exact(store, q, mode, session_id=sid), (q, mode)
    store.close()


def test_plan_keeps_single_tokens_and_dense_phrases_on_fts5(tmp_path):
    store, _ = _generated(tmp_path / "g.db", 600)
    assert store._candidates.plan(store._db, "word3 word4", "or") is None  # single tokens: FTS5 stops early
    assert store._candidates.plan(store._db, "src/py", "or") is None  # dense tokens only
    # phrases of one rare token each: the candidates would be the token's rows, the ones FTS5 walks itself
    assert store._candidates.plan(store._db, "src/pkg3/py src/word7", "or") is None
    assert store._candidates.plan(store._db, "src/pkg3/py src/word7", "and") is not None
    exact, candidates = store._candidates.plan(store._db, "src/pkg3/mod1.py word7", "or")
    assert exact == ['"word7"'] and candidates == ['"pkg3" AND "mod1"']
    store.close()


def test_a_short_log_is_searched_by_the_exact_query(tmp_path, monkeypatch):
    store, sid = _generated(tmp_path / "g.db", 600)
    rows = store._db.execute("SELECT count(*) FROM events").fetchone()[0]
    queries = ["src/pkg3/mod1.py word7", "fix word3 in src/pkg2", "src/pkg3/py src/word7"]
    assert all(store._candidates.plan(store._db, q, "and") is not None for q in queries)  # (SMALL_LOG = 0 here)
    monkeypatch.setattr(fts_search, "SMALL_LOG", rows)
    for q in queries:
        for mode in ("and", "or"):
            assert store._candidates.plan(store._db, q, mode) is None
            got = [s.seq for s in store.search(q, mode=mode, session_id=sid)]
            assert got == _exact(store, q, mode, session_id=sid), (q, mode)
    monkeypatch.setattr(fts_search, "SMALL_LOG", rows - 1)  # one row more than the bound: candidates again
    assert store._candidates.plan(store._db, queries[0], "and") is not None
    store.close()


@pytest.mark.slow
@pytest.mark.skipif(not corpus_available(), reason="the corpus is absent")
def test_corpus_same_rows(tmp_path):
    """Every corpus session in one store; queries made of each session's own terms (paths, identifiers, words,
    recall's query terms), AND and OR, over the whole store and below a cut."""
    store = EventStore(tmp_path / "corpus.db")
    sids = [import_item(store, item) for item in importable_corpus_items()]
    assert sids
    rng = random.Random(17)
    checked = 0
    for sid in sids:
        texts = [s.event.searchable_text() for s in store.events(sid)]
        texts = [t for t in texts if t]
        if not texts:
            continue
        top = store.max_seq(sid)
        for text in rng.sample(texts, min(4, len(texts))):
            terms = query_terms([text])
            for q in (" ".join(terms[:3]), " ".join(terms[:1]), " ".join(rng.sample(terms, min(2, len(terms))))):
                if not q:
                    continue
                for mode in ("and", "or"):
                    for kw in ({"session_id": sid}, {"session_id": sid, "before_seq": rng.randrange(1, top + 1)}, {}):
                        got = [s.seq for s in store.search(q, mode=mode, **kw)]
                        assert got == _exact(store, q, mode, **kw), (sid, q, mode, kw)
                        checked += 1
    assert checked > 500
    store.close()


def _pages(store: EventStore, q: str, mode: str, sizes: list[int], **kw) -> list[int]:
    """Rows of ``q`` read page after page, each page continuing below the last row of the one before."""
    rows: list[int] = []
    below = kw.pop("before_seq", None)
    for n in sizes:
        page = [s.seq for s in store.search(q, mode=mode, limit=n, before_seq=below, **kw)]
        rows += page
        if len(page) < n:
            break
        below = page[-1]
    return rows


@pytest.mark.parametrize("small", [False, True])
def test_pages_continued_below_the_last_row_list_the_exact_rows(tmp_path, monkeypatch, small):
    """A search continued below its last row (the next page, as recall reads it) starts from the matches the page
    before verified beyond its limit: the pages list the exact query's rows, in small and large pages, with other
    searches and appends in between, and with the bounded scan's fallback."""
    store, sid = _generated(tmp_path / "g.db", 1_500)
    if small:
        monkeypatch.setattr(fts_search, "CHUNK", 4)
        monkeypatch.setattr(fts_search, "MAX_CANDIDATES", 8)
        monkeypatch.setattr(fts_search, "DENSE_SPAN", 1)
        monkeypatch.setattr(fts_search, "AND_DENSE_SPAN", 1)
        store._candidates = fts_search.CandidateSearch()
    rng = random.Random(5)
    top = store.max_seq()
    resumed = 0
    real_resume = store._candidates.resume

    def counting(key, before):
        nonlocal resumed
        got = real_resume(key, before)
        resumed += got is not None
        return got

    monkeypatch.setattr(store._candidates, "resume", counting)
    for q in _queries(rng):
        for mode in ("and", "or"):
            for sizes, kw in (
                ([4, 16, 16, 16], {}),
                ([1, 1, 2, 3, 5, 8], {"session_id": sid}),
                ([2, 40], {"before_seq": top - 300, "session_id": sid}),
            ):
                got = _pages(store, q, mode, sizes, **kw)
                store.search("word5 src/pkg1/mod1.py", mode="or", limit=3)  # another search in between
                assert got == _exact(store, q, mode, limit=sum(sizes), **kw)[: len(got)], (q, mode, sizes, kw)
                assert len(got) == min(sum(sizes), len(_exact(store, q, mode, limit=10**6, **kw))), (q, mode)
    store.append(sid, [UserMessage("src/pkg3/mod1.py word7 appended above every bound")])
    assert _pages(store, "src/pkg3/mod1.py", "or", [4, 16], before_seq=top) == _exact(
        store, "src/pkg3/mod1.py", "or", limit=20, before_seq=top
    )
    assert resumed > 20, "pages continued from the matches kept by the page before"
    store.close()


@pytest.mark.parametrize("and_span", [64, 512, 4096])
def test_scenario_recall_searches_same_rows(tmp_path, monkeypatch, and_span):
    """The searches a view's recall makes on the stress scenario's history (its query terms joined by AND, the first
    eight of them, and each term alone, newest 4 and 16 below the view's epoch) list the exact query's rows, with an
    AND's candidate tokens chosen at several density bounds."""
    from itertools import islice

    from latch.bench.scenario import ScenarioModel

    monkeypatch.setattr(fts_search, "DENSE_SPAN", 1024)
    monkeypatch.setattr(fts_search, "AND_DENSE_SPAN", and_span)
    store = EventStore(tmp_path / "s.db")
    sid = store.create_session(workspace="/work/shop", format="claude-code")
    events = list(islice(ScenarioModel(0, workspace="/work/shop").events(), 6_000))
    store.append(sid, events)
    planned = short = 0
    for until in range(2_000, 6_000, 400):
        recent = events[until - 200 : until]
        texts = [e.text for e in recent if isinstance(e, UserMessage)][-1:]
        texts += [e.searchable_text()[:2_000] for e in recent if isinstance(e, AssistantMessage)][-3:]
        texts += [e.content[:2_000] for e in recent if isinstance(e, ToolResult) and e.is_error][-4:]
        terms = query_terms(texts)
        searches = [(" ".join(terms), "and"), (" ".join(terms[:8]), "and")] + [(t, "or") for t in terms]
        for q, mode in searches:
            for limit in (4, 16):
                got = [s.seq for s in store.search(q, mode=mode, session_id=sid, before_seq=until - 1_000, limit=limit)]
                assert got == _exact(store, q, mode, session_id=sid, before_seq=until - 1_000, limit=limit), (q, mode)
                if store._candidates.plan(store._db, q, mode) is not None:
                    planned += 1
                    short += mode == "and" and len(got) < limit
    assert planned > 50 and short > 5
    store.close()
