"""A candidate whose stored payload shows that its text cannot match is decided without being decoded
(latch.store.fts_search.PayloadCheck): the check never turns away a row FTS5 matches (on generated texts of every
character the preparation and JSON escaping look at, and on the stress scenario's events with phrases cut from them),
it turns away most rows that do not match, and the store's search returns the exact query's rows with it."""

from __future__ import annotations

import itertools
import random
import string

from fts_reference import PIECES
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.bench.scenario import ScenarioModel
from latch.engine.recall import query_terms
from latch.events import AssistantMessage, Event, SystemNote, ToolCall, ToolResult, UserMessage, canonical_payload
from latch.store import EventStore
from latch.store.fts import build_match_query, match_phrases
from latch.store.fts_search import CandidateSearch, PayloadCheck

_PIECES = [*PIECES, *string.printable, "\x00", "\x1b[0m", "\x7f", '"', "\\", "\\n", "\\u00e9", "\\\\u", "\ud800"]
_PIECES += ["C++", "node.js", "a#", ".NET", "x.y.z", "_x", "Src", "src", "py", "tax", "n", "nclass", "u00e9"]


def _events(text: str) -> list[Event]:
    """``text`` as the searchable text of each kind the check decides, and of one it leaves to the text."""
    return [
        ToolResult("c1", text),
        UserMessage(text),
        SystemNote(text),
        AssistantMessage(text),
        AssistantMessage(text, (ToolCall("c2", "Bash", '{"command": "ls"}'),)),
    ]


def _disagreements(texts: list[str], query: str, mode: str) -> tuple[list[tuple[str, str]], int, int]:
    """(rows FTS5 matches that the check turns away, rows matched, rows turned away)."""
    match = build_match_query(query, mode=mode)
    assert match is not None
    check, fts = PayloadCheck(mode, match_phrases(query)), CandidateSearch()
    events = [e for t in texts for e in _events(t)]
    matched = fts.verify(match, list(enumerate((e.searchable_text() for e in events), start=1)))
    fts.close()
    kept = {i for i, e in enumerate(events, start=1) if check.may_match(e.KIND, canonical_payload(e))}
    wrong = [(events[i - 1].KIND, events[i - 1].searchable_text()) for i in sorted(matched - kept)]
    return wrong, len(matched), len(events) - len(kept)


@settings(max_examples=400, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join), min_size=1, max_size=6),
    query=st.lists(st.sampled_from(_PIECES + [" "] * 4), min_size=1, max_size=12).map("".join),
    mode=st.sampled_from(["and", "or"]),
)
def test_generated_texts_never_turned_away(texts, query, mode):
    if build_match_query(query, mode=mode) is None:
        return
    wrong, _, _ = _disagreements(texts, query, mode)
    assert not wrong


_WORDS = ["ab", "n", "nab", "t", "u00e9", "cafe", "café", "x1", "C"]
_SEPS = [" ", "\n", "\t", "\\", '"', "\x07", "/", ":", "\\n", "++", ".", "#", "é", "\r\n"]


@settings(max_examples=400, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_SEPS)), max_size=12).map(
            lambda ws: "".join(w + sep for w, sep in ws)
        ),
        min_size=1,
        max_size=6,
    ),
    query=st.lists(
        st.tuples(st.sampled_from(_WORDS), st.sampled_from(["/", "-", ":", " ", "."])), min_size=1, max_size=5
    ).map(lambda ws: "".join(w + sep for w, sep in ws)),
    mode=st.sampled_from(["and", "or"]),
)
def test_generated_phrases_never_turned_away(texts, query, mode):
    """Phrases of a few words, in texts whose separators JSON escapes."""
    if build_match_query(query, mode=mode) is None:
        return
    wrong, _, _ = _disagreements(texts, query, mode)
    assert not wrong


def test_phrases_across_escapes_and_glue():
    """Phrases (tokens joined by punctuation in a query chunk) whose separators in the text are escaped in JSON."""
    texts = ["WriterLine:\\nclass", "WriterLine:\nclass", 'say "hi"\tthere\\now', "C++ and .NET", "os.path.join(a)"]
    texts += ["tab\there", "bell\x07ring", "src/billing/tax.py:12", "x\\\\ny", 'quote"d', "cr\r\nlf"]
    texts += ["Café au lait", "STRASSE straße", "naïve/Naive", "e\u0301t\u00e9"]
    chunks = ["WriterLine:\\nclass", "WriterLine/nclass", "WriterLine/class", "hi/there", "there/now", "hi:there"]
    chunks += ["C++", ".NET", "net/and", "os.path", "path.join", "tab/here", "tab/there", "bell/ring", "quote/d"]
    chunks += ["billing/tax.py", "x/ny", "x\\ny", "cr/lf", "cr/nlf", "say/hi/there", "cafe/au", "naive/naive", "ete"]
    for q in chunks:
        for q2 in ("", *chunks):
            for mode in ("and", "or"):
                wrong, _, _ = _disagreements(texts, f"{q} {q2}", mode)
                assert not wrong, (q, q2, mode)


def test_scenario_rows_mostly_turned_away_never_wrongly():
    events = list(itertools.islice(ScenarioModel(5, workspace="/work/shop").events(), 1_500))
    texts = [e.searchable_text() for e in events if isinstance(e, (ToolResult, UserMessage))][:300]
    rng = random.Random(3)
    queries = set(query_terms(texts[-30:]))
    for t in rng.sample(texts, 40):
        words = t.split()
        if words:
            i = rng.randrange(len(words))
            queries.add(" ".join(words[i : i + rng.randrange(1, 4)]))
    matched = turned = total = 0
    for q in sorted(queries):
        for mode in ("and", "or"):
            if build_match_query(q, mode=mode) is None:
                continue
            wrong, m, away = _disagreements(texts, q, mode)
            assert not wrong, (q, mode, wrong[:1])
            matched, turned, total = matched + m, turned + away, total + 5 * len(texts)
    # (a fifth of the rows are assistant messages with a tool call: never decided from their payload)
    assert matched > 500 and turned > 0.6 * (total - matched), (matched, turned, total)


def test_store_search_same_rows_as_the_exact_query(tmp_path):
    """Searches whose candidates are mostly turned away by their payloads return the exact query's rows."""
    store = EventStore(str(tmp_path / "s.db"))
    sid = store.create_session(workspace="/work/shop", format="claude-code")
    gen = iter(ScenarioModel(1, workspace="/work/shop").events())
    for _ in range(4):
        store.append(sid, list(itertools.islice(gen, 2_500)))
    recent = [e.event.searchable_text() for e in store.events(sid, after_seq=store.max_seq() - 300)]
    terms = query_terms(recent)
    decided: list[int] = []
    may_match = PayloadCheck.may_match

    def counted(self, kind, payload):
        ok = may_match(self, kind, payload)
        decided.append(ok)
        return ok

    PayloadCheck.may_match = counted  # type: ignore[method-assign]
    try:
        for i in range(0, len(terms), 3):
            q = " ".join(terms[i : i + 6])
            for mode in ("and", "or"):
                for before in (None, store.max_seq() - 2_000):
                    got = [e.seq for e in store.search(q, mode=mode, before_seq=before, limit=8)]
                    match = build_match_query(q, mode=mode)
                    sql = "SELECT rowid FROM events_fts WHERE events_fts MATCH ?" + (
                        " AND rowid < ?" * (before is not None)
                    )
                    args = [match, *([before] if before is not None else []), 8]
                    want = [r[0] for r in store._db.execute(sql + " ORDER BY rowid DESC LIMIT ?", args)]
                    assert got == want, (q, mode, before)
    finally:
        PayloadCheck.may_match = may_match  # type: ignore[method-assign]
        store.close()
    assert decided.count(False) > 100


def test_tokens_inside_longer_tokens_turned_away():
    """A phrase's first and last tokens are whole tokens: ``05:28`` is not in ``105:289`` nor ``src/tax.py`` in
    ``xsrc/tax.pyc``, while an escape (``\\n``) right before the first token is a separator."""
    cases = [
        ("05:28", "at 105:289 and 05:281", False),
        ("05:28", "at 10:05:28.", True),
        ("src/tax.py", "see xsrc/tax.py and src/tax.pyc", False),
        ("src/tax.py", "line\nsrc/tax.py:12", True),
        ("src/tax.py", "tab\tsrc\\tax.py", True),
        ("ms 2025", "took 12ms 2025x and 2025ms", False),
    ]
    for query, text, want in cases:
        for mode in ("and", "or"):
            check = PayloadCheck(mode, match_phrases(query))
            for event in _events(text)[:4]:  # (the kinds decided from their payload)
                assert check.may_match(event.KIND, canonical_payload(event)) is want, (query, text, mode)
            wrong, matched, _ = _disagreements([text], query, mode)
            assert not wrong and bool(matched) is want, (query, text, mode)
