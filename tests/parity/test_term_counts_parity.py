"""Parity: the episode index's term counter (``latch._native.TermCounts``) gives exactly the reference's
answers (``latch.hotpaths._py.TermCounts``), and both give what the plain Python counting gave before it
existed (a ``Counter`` per episode, a dict of ids in first-sighting order, the topic's terms then the most
frequent): the same term ids, the same chosen terms, on ASCII, accented, CJK and lone-surrogate text.

Skips when the native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import hotpaths
from latch.engine import episodes
from latch.engine.episodes import RESULT_TERM_CHARS, SCAN_CHARS, TERMS_PER_EPISODE, EpisodeIndex, extract_terms
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.hotpaths import _py
from latch.store import StoredEvent

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

# Words that repeat (so counts and ties matter), stop words, accented, CJK, Hangul and lone surrogates.
_WORDS = st.sampled_from(
    [
        "parser",
        "Parser",
        "cache",
        "token",
        "the",
        "fix_bug",
        "a" * 32,
        "b" * 33,
        "x1",
        "café",
        "naïve",
        "straße",
        "Ωmega",
        "漢字",
        "漢字テスト",
        "한국어",
        "\ud800abc",
        "abc\udfff",
        "\udc80\udc81",
        "emoji\U0001f600word",
    ]
)
_SEPS = st.sampled_from([" ", "\n", ", ", "/", ".", "-", "\t", "é ", "漢 "])
TEXTS = st.one_of(
    st.lists(st.tuples(_WORDS, _SEPS).map("".join), max_size=30).map("".join),
    st.text(alphabet=st.characters(blacklist_categories=()), max_size=80),
    st.text(alphabet="abc xyz_09", max_size=60),
)
LIMITS = st.sampled_from([0, 5, 40, SCAN_CHARS])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), TEXTS, LIMITS),
        st.tuples(st.just("new"), st.just(""), st.just(0)),
        st.tuples(st.just("chosen"), TEXTS, st.sampled_from([0, 1, 3, TERMS_PER_EPISODE])),
    ),
    max_size=25,
)


class _PlainCounting:
    """The plain Python counting the engine did before TermCounts: each text's ``extract_terms`` counted in a
    ``Counter`` per episode, ids given in first-sighting order, the topic's terms then the most frequent."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.counts: Counter[str] = Counter()

    def add(self, terms: list[str]) -> None:
        for t in terms:
            self.counts[t] += 1
            self.ids.setdefault(t, len(self.ids))

    def chosen(self, topic: list[str], k: int) -> list[int]:
        terms = list(dict.fromkeys(topic))[:k]
        if len(terms) < k:
            ranked = sorted(self.counts, key=self.counts.__getitem__, reverse=True)
            terms.extend([t for t in ranked if t not in terms][: k - len(terms)])
        return [self.ids[t] for t in terms]


def _add_text(tc: Any, text: str, limit: int) -> None:
    """What the episode index does with a text: the native pass when ASCII, else the extracted terms."""
    if not tc.add_text(text, limit):
        tc.add(extract_terms(text[:limit]))


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_term_counts_same_on_both_backends_and_as_plain_counting(ops):
    nat, ref, plain = native.TermCounts(), _py.TermCounts(), _PlainCounting()
    for op, text, n in ops:
        if op == "text":
            _add_text(nat, text, n)
            _add_text(ref, text, n)
            plain.add(extract_terms(text[:n]))
        elif op == "new":
            nat.new_episode()
            ref.new_episode()
            plain.counts = Counter()
        else:  # a topic: an intent's terms, counted in the episode it opens
            topic = extract_terms(text)
            for tc in (nat, ref):
                tc.add(topic)
            plain.add(topic)
            got = nat.chosen(topic, n)
            assert got == ref.chosen(topic, n) == plain.chosen(topic, n)
            assert len(got) == min(n, len(plain.counts))
        assert len(nat) == len(ref) == len(plain.ids)
    assert nat.ids() == ref.ids() == plain.ids
    assert list(nat.ids()) == list(plain.ids)  # first-sighting order
    for term in [*plain.ids, "never-seen", "\ud800"]:
        assert nat.term_id(term) == ref.term_id(term) == plain.ids.get(term)


def test_equal_strs_of_any_storage_are_one_term():
    """A term scanned from ASCII text, the equal str made elsewhere, and non-ASCII terms (2- and 4-byte
    storage, lone surrogates) each get one id."""
    for tc in (native.TermCounts(), _py.TermCounts()):
        assert tc.add_text("Parser parser PARSER cache", SCAN_CHARS) is True
        tc.add(["".join(["par", "ser"]), "漢字", "\ud800abc", "emoji\U0001f600"])
        assert tc.add_text("漢字 parser", SCAN_CHARS) is False  # not ASCII: nothing counted
        tc.add(["漢字", "\ud800abc", "cache"])
        assert tc.ids() == {"parser": 0, "cache": 1, "漢字": 2, "\ud800abc": 3, "emoji\U0001f600": 4}
        assert tc.chosen([], 3) == [0, 1, 2]  # parser 4, then cache and 漢字 (2 each, cache seen first)
        assert tc.chosen(["\ud800abc", "漢字", "\ud800abc"], 3) == [3, 2, 0]
        tc.new_episode()
        tc.add_text("fresh cache", 3)  # "fre": the limit cuts the word to 3 characters
        assert tc.chosen([], 8) == [5]
        assert tc.term_id("fre") == 5 and tc.term_id("fresh") is None


@pytest.mark.parametrize("make", [native.TermCounts, _py.TermCounts], ids=["native", "reference"])
def test_term_counts_errors(make):
    tc = make()
    tc.add(["parser"])
    with pytest.raises(ValueError, match=r"topic term 1 \(of 2\) was not counted in this episode"):
        tc.chosen(["parser", "secret words"], 4)
    tc.new_episode()
    with pytest.raises(ValueError, match=r"topic term 0 \(of 1\) was not counted"):
        tc.chosen(["parser"], 4)  # known, but not counted in this episode
    with pytest.raises(ValueError, match="k must be >= 0"):
        tc.chosen([], -1)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        tc.add_text("abc", -1)
    with pytest.raises(TypeError, match="TermCounts.add_text: text must be str, not bytes"):
        tc.add_text(b"abc", 10)


def test_native_add_rejects_a_term_that_is_not_a_str():
    with pytest.raises(TypeError, match="TermCounts.add: term 1 must be str, not int"):
        native.TermCounts().add(["abc", 7])


# --------------------------------------------------------------------------- the engine, end to end
_EVENT = st.one_of(
    st.builds(UserMessage, TEXTS),
    st.builds(
        lambda text, name, arg, n: AssistantMessage(
            text, tuple(ToolCall(f"c{i}", name, json.dumps({"command": arg})) for i in range(n))
        ),
        TEXTS,
        st.sampled_from(["Bash", "Read", "漢字ツール"]),
        TEXTS,
        st.integers(0, 2),
    ),
    st.builds(lambda text: ToolResult("c0", text), TEXTS),
)


def _stored(events):
    return [
        StoredEvent(seq=i, session_id="s", kind=e.KIND, event=e, source_ref=None, ts=None)
        for i, e in enumerate(events, 1)
    ]


def _plain_term_ids(events, idx: EpisodeIndex) -> list[tuple[int, ...]]:
    """Each episode's term ids as the plain Python counting chose them over its events' terms."""
    plain = _PlainCounting()
    out = []
    for ep in idx.episodes:
        plain.counts = Counter()
        topic: list[str] = []
        for e in events[ep.first_seq - 1 : ep.last_seq]:
            if isinstance(e, UserMessage):
                topic = extract_terms(e.text)
                plain.add(topic)
            elif isinstance(e, AssistantMessage):
                plain.add(extract_terms(e.text))
                for c in e.tool_calls:
                    plain.add(extract_terms(f"{c.name} {episodes._argument_text(c)}"))
            elif isinstance(e, ToolResult):
                plain.add(extract_terms(e.content[:RESULT_TERM_CHARS]))
        out.append(tuple(plain.chosen(topic if ep.part == 1 else [], TERMS_PER_EPISODE)))
    return out


@settings(max_examples=150, deadline=None)
@given(events=st.lists(_EVENT, max_size=30))
def test_episode_terms_same_on_both_backends_and_as_plain_counting(events):
    stored = _stored(events)
    built = EpisodeIndex()
    built.extend(stored)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(hotpaths, "TermCounts", _py.TermCounts)
        reference = EpisodeIndex()
        reference.extend(stored)
    assert [dataclasses.astuple(e) for e in built.episodes] == [dataclasses.astuple(e) for e in reference.episodes]
    assert built._term_counts.ids() == reference._term_counts.ids()
    assert [e.term_ids for e in built.episodes] == _plain_term_ids(events, built)


def test_native_terms_scanned_from_text_are_the_strs_ascii_terms_gives():
    """One str object per ASCII term, whichever way it was read (the dictionary holds no copies)."""
    tc = native.TermCounts()
    tc.add_text("Parser cache", SCAN_CHARS)
    assert [t is u for t, u in zip(tc.ids(), native.ascii_terms("parser cache"), strict=True)] == [True, True]
