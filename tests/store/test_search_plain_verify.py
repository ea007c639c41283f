"""Candidates of an ASCII text are decided by a pattern (latch.store.fts_search.plain_matches) with the same answer
as FTS5 on an in-memory table of the same tokenizer: on the stress scenario's texts with phrases cut from them,
on generated texts of every character the preparation looks at, and on glued and dotted terms."""

from __future__ import annotations

import itertools
import random
import string

from fts_reference import PIECES
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.bench.scenario import ScenarioModel
from latch.engine.recall import query_terms
from latch.store.fts import GLUE, build_match_query, match_phrases, prepare_text
from latch.store.fts_search import _PLAIN_TOKEN, CandidateSearch


def _both(check: CandidateSearch, query: str, mode: str, texts: list[tuple[int, str]]) -> tuple[set[int], set[int]]:
    """(rows decided with the phrases given, rows decided by FTS5 alone)."""
    match = build_match_query(query, mode=mode)
    assert match is not None
    return check.verify(match, texts, (mode, match_phrases(query))), check.verify(match, texts)


def _scenario_texts(n: int) -> list[tuple[int, str]]:
    events = itertools.islice(ScenarioModel(5, workspace="/work/shop").events(), n)
    return [(i + 1, e.searchable_text()) for i, e in enumerate(events)]


def test_prepared_ascii_text_holds_ascii_and_glue_only():
    """The premise of the pattern: preparing an ASCII text adds only the glue characters."""
    rng = random.Random(1)
    ascii_pieces = [p for p in PIECES if p.isascii()]
    for _ in range(2_000):
        text = "".join(rng.choice(ascii_pieces) for _ in range(rng.randrange(1, 40)))
        assert all(c.isascii() or c in GLUE.values() for c in prepare_text(text)), text


def test_scenario_texts_same_rows_as_fts5():
    texts = _scenario_texts(1_500)
    assert sum(t.isascii() for _, t in texts) > 1_000
    check = CandidateSearch()
    rng = random.Random(7)
    queries = set(query_terms(t for _, t in texts[-40:]))
    for _, t in rng.sample(texts, 120):  # phrases cut from the texts (most match their own row, few others)
        words = t.split()
        if words:
            i = rng.randrange(len(words))
            queries.add(" ".join(words[i : i + rng.randrange(1, 4)]))
    planned = matched = 0
    for q in sorted(queries):
        for mode in ("and", "or"):
            if build_match_query(q, mode=mode) is None:
                continue
            for i in range(0, len(texts), 250):
                fast, exact = _both(check, q, mode, texts[i : i + 250])
                assert fast == exact, (q, mode, i)
                matched += len(exact)
            planned += all(_PLAIN_TOKEN.fullmatch(t) for p in match_phrases(q) for t in p)
    assert planned > 100 and matched > 1_000
    check.close()


_TEXT_PIECES = [p for p in PIECES if p.isascii()] + [*string.printable, "\x00", "\x7f", "Src", "src", "py", "tax"]
_TEXT_PIECES += ["C++", "node.js", "a#", "_x"]


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(_TEXT_PIECES), max_size=30).map("".join), min_size=1, max_size=8),
    query=st.lists(st.sampled_from(_TEXT_PIECES + [" "]), min_size=1, max_size=12).map("".join),
    mode=st.sampled_from(["and", "or"]),
)
def test_generated_texts_same_rows_as_fts5(texts, query, mode):
    if build_match_query(query, mode=mode) is None:
        return
    check = CandidateSearch()
    rows = list(enumerate(texts, start=1))
    fast, exact = _both(check, query, mode, rows)
    assert fast == exact
    check.close()


def test_glued_and_dotted_terms():
    rows = list(
        enumerate(
            [
                "use C++ here",
                "use c here",
                "see node.js docs",
                "node js",
                "C# and .NET",
                "x.y.z",
                "src/billing/tax.py:12",
                "src/billing/tax.pyc",
                "asrc/billing/tax.py",
                "SRC  billing\n\ttax__py",
            ],
            start=1,
        )
    )
    check = CandidateSearch()
    for q in ("C++", "c", "node.js", "node js", "C#", ".NET", "x.y.z", "y", "src/billing/tax.py", "tax py", "c here"):
        for mode in ("and", "or"):
            fast, exact = _both(check, q, mode, rows)
            assert fast == exact, (q, mode)
    check.close()
