"""ContinuityEngine on concrete event sequences: budgets, cache epochs, rotation, overflow, recall,
compaction, deltas, metrics and resume equivalence (spec: "Bounded materialization", "Cache epochs
and working memory", "Context metrics", "Summaries are indexes, not truth")."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.engine import ContinuityEngine, continuity_context_engine_factory
from latch.engine.port import ContextBudget, ContextOverflow, ContextRequest, EngineProfile
from latch.engine.units import MESSAGE_OVERHEAD_TOKENS, TokenCounter, request_lines
from latch.events import AssistantMessage, MediaRef, ToolCall, ToolResult, Usage, UserMessage
from latch.host.session import EmptyState, StoreKernelWriter, StoreSessionReader

NO_RECALL = {"context": {"recall_tokens": 0}}
FILL = "." * 96  # a 100-token user unit under CharEstimator, with no search terms


class CharEstimator:
    """One token per character (exactly additive, so hand-computed totals are exact)."""

    def estimate(self, text: str) -> int:
        return len(text)

    def image_tokens(self, width, height) -> int:
        return 1000 if width is None or height is None else width * height // 1000


@dataclass
class FakeState:
    revision: int
    text: str

    @property
    def is_empty(self) -> bool:
        return not self.text

    def render(self, budget_tokens, estimate) -> str:
        return self.text


class Reader(StoreSessionReader):
    """The store reader with a scripted canonical state (the kernel is tested on its own)."""

    state = EmptyState()

    def canonical_state(self, until_seq=None):
        return self.state


class Session:
    def __init__(self, store):
        self.store = store
        self.sid = store.create_session(external_key=f"test:{id(self)}")
        self.reader = Reader(store, self.sid)

    def add(self, *events) -> list[int]:
        return self.store.append(self.sid, events)

    def engine(self, stream="continuity:test", config=None) -> ContinuityEngine:
        return ContinuityEngine.for_model(
            None, reader=self.reader, writer=self.writer(stream), config=config, estimator=CharEstimator()
        )

    def writer(self, stream="continuity:test") -> StoreKernelWriter:
        return StoreKernelWriter(self.store, self.sid, stream)

    def request(self, until, budget, **kw) -> ContextRequest:
        return ContextRequest(session_id=self.sid, until_seq=until, budget=budget, **kw)


@pytest.fixture
def sess(store):
    return Session(store)


def as_bytes(view) -> bytes:
    return b"\n".join(request_lines(view)) + b"\n"


def conversation(view):
    return [m for m in view.messages if m.kind == "conversation"]


def test_first_view_shape_and_exact_component_sums(sess):
    s1, s2 = sess.add(UserMessage("hello"), AssistantMessage("hi"))
    eng = sess.engine()
    v = eng.materialize(sess.request(s2, ContextBudget(100_000, 1_000, 10_000), system_prompt="SYS"))
    assert [m.kind for m in v.messages] == ["session_context", "kernel_context", "conversation", "conversation"]
    assert v.messages[0].content == "<session-context>\nworkspace: (unknown)\nmode: default\n</session-context>"
    assert '<kernel-context type="snapshot" generation="1" revision="1"' in v.messages[1].content
    assert v.system == "SYS" and v.epoch == 1 and v.first_retained_seq == s1 and v.status == "new_epoch"
    assert v.tokens.recent_tokens == (MESSAGE_OVERHEAD_TOKENS + 5) + (MESSAGE_OVERHEAD_TOKENS + 2)
    assert v.tokens.instructions_tokens == (3 + MESSAGE_OVERHEAD_TOKENS) + MESSAGE_OVERHEAD_TOKENS + 71
    c = TokenCounter(CharEstimator())
    assert v.tokens.total_tokens == 3 + MESSAGE_OVERHEAD_TOKENS + sum(c.message(m) for m in v.messages)
    assert v.metrics["span_user_turns"] == 1 and v.metrics["events"] == 2


def test_append_only_within_an_epoch(sess):
    eng = sess.engine()
    budget = ContextBudget(100_000, 0, 10_000)
    prev = None
    for i in range(6):
        sess.add(UserMessage(f"step {i}"))
        ids = sess.add(
            AssistantMessage("", (ToolCall(f"c{i}", "Read", '{"path": "a.py"}'),)),
            ToolResult(f"c{i}", f"out {i}"),
            AssistantMessage(f"done {i}"),
        )
        v = eng.materialize(sess.request(ids[1], budget))
        if prev is not None:
            assert v.epoch == prev.epoch
            assert as_bytes(v).startswith(as_bytes(prev))
            assert v.metrics["common_prefix_tokens"] == prev.tokens.total_tokens
        prev = v
    assert prev.metrics["span_user_turns"] == 6


def test_rotation_is_hysteretic(sess):
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(100_000, 0, 1_000)
    seqs, views = [], []
    for _ in range(40):
        seqs += sess.add(UserMessage(FILL))  # 100 tokens each
        views.append(eng.materialize(sess.request(seqs[-1], budget)))
    epochs = [v.epoch for v in views]
    rotations = [i + 1 for i in range(1, 40) if epochs[i] != epochs[i - 1]]
    # 10 units fill recent_tokens; the 11th rotates keeping 7 (700 <= 750); then 4 more fit each time
    assert rotations == [11, 15, 19, 23, 27, 31, 35, 39]
    r = views[10]
    assert r.first_retained_seq == seqs[4] and r.tokens.recent_tokens == 700
    assert r.metrics["rotation_reason"] == "recent_tokens" and r.metrics["retained_tokens"] == 700
    assert r.metrics["left_tokens"] == views[9].tokens.state_tokens + 1_000 - 600
    assert len(rotations) <= 4_000 / (0.25 * 1_000) + 1
    assert all(v.tokens.recent_tokens <= 1_000 for v in views)


def test_hard_budget_lowers_recent_and_reserves_tools_first(sess):
    tools = ({"name": "t", "description": "x" * 1_500},)
    seqs = [sess.add(UserMessage(FILL))[0] for _ in range(5)]
    eng = sess.engine(config=NO_RECALL)
    v = eng.materialize(sess.request(seqs[-1], ContextBudget(2_500, 0, 64_000), tools=tools))
    fixed = v.tokens.instructions_tokens + v.tokens.tools_tokens
    state_reserve = (2_500 - fixed) // 4  # the state may render into a quarter of what is left
    assert state_reserve == 223
    assert v.metrics["recent_limit_tokens"] == 2_500 - fixed - v.tokens.state_tokens - state_reserve == 304
    assert v.tokens.recent_tokens == 200 and v.tokens.total_tokens == 2_173  # 2 units <= 3/4 of 304
    assert v.tokens.tools_tokens == len('[{"description":"' + "x" * 1_500 + '","name":"t"}]')


def test_unit_larger_than_the_hard_budget_overflows_without_writing(sess):
    big = sess.add(UserMessage("x" * 5_000))[0]
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(3_000, 0, 1_000)
    before = len(sess.writer().records())
    with pytest.raises(ContextOverflow) as exc:
        eng.materialize(sess.request(big, budget))
    assert exc.value.breakdown["unit_tokens"] == 5_004
    assert exc.value.breakdown["hard_limit_tokens"] == 3_000
    assert len(sess.writer().records()) == before
    small = sess.add(UserMessage(FILL))[0]
    v = eng.materialize(sess.request(small, budget))
    assert v.first_retained_seq == small and v.tokens.total_tokens <= 3_000


def test_fixed_parts_over_the_hard_budget_overflow(sess):
    s = sess.add(UserMessage("hi"))[0]
    with pytest.raises(ContextOverflow, match="alone exceed the hard budget"):
        sess.engine().materialize(sess.request(s, ContextBudget(500, 0, 100), system_prompt="s" * 600))


def test_oversized_unit_is_kept_whole_and_does_not_rotate_every_turn(sess):
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(10_000, 0, 1_000)
    big = sess.add(UserMessage("y" * 3_000))[0]
    v = eng.materialize(sess.request(big, budget))
    assert v.status == "oversized_unit" and v.tokens.recent_tokens == 3_004
    epochs = []
    for _ in range(6):
        s = sess.add(UserMessage(FILL))[0]
        epochs.append(eng.materialize(sess.request(s, budget)).epoch)
    assert epochs == [2, 2, 2, 2, 2, 2]  # one rotation drops the big unit, then 600 tokens fit


def test_recall_reaches_only_the_archival_region_and_follows_call_result_links(sess):
    eng = sess.engine(config={"context": {"recall_tokens": 2_000}})
    budget = ContextBudget(100_000, 0, 1_000)
    fact = sess.add(
        UserMessage("deploy the relay"),
        AssistantMessage("", (ToolCall("k1", "Bash", '{"command": "cat relay.conf"}'),)),
        ToolResult("k1", "listen 0.0.0.0:8472 # ZX-4471 staging relay"),
    )
    sess.add(AssistantMessage("ok"))  # the agent's latest work names nothing to search for
    v = eng.materialize(sess.request(fact[-1], budget))
    assert eng.recall("ZX-4471") == []  # still in the epoch: nothing archival yet
    while not (v.status == "new_epoch" and v.metrics["epoch_start_seq"] > fact[-1]):
        s = sess.add(UserMessage(FILL))[0]
        v = eng.materialize(sess.request(s, budget))
    assert v.metrics["recalled_events"] == 0
    got = eng.recall("which port did ZX-4471 use?")
    assert [r.seq for r in got] == [fact[1], fact[2]]  # the result pulls its call, chronological
    assert got[1].text.startswith(f"[seq {fact[2]} · tool result k1] listen 0.0.0.0:8472")
    ask = sess.add(UserMessage("which port did ZX-4471 use?"))[0]
    v = eng.materialize(sess.request(ask, budget))
    delta = v.messages[-1]
    assert delta.kind == "kernel_context" and 'type="delta"' in delta.content
    assert "listen 0.0.0.0:8472 # ZX-4471 staging relay" in delta.content
    assert v.tokens.recall_tokens > 0 and v.metrics["recalled_events"] == 2


def test_a_snapshot_recalls_what_the_agents_latest_work_names(sess):
    """Recall follows the work: the identifiers of the latest assistant turn and its tool results query the
    archive at a rotation, as the user's latest turn does."""
    eng = sess.engine(config={"context": {"recall_tokens": 2_000}})
    budget = ContextBudget(100_000, 0, 1_000)
    old = sess.add(
        AssistantMessage("", (ToolCall("k1", "Bash", '{"command": "grep -n QX-1188 billing/tax.py"}'),)),
        ToolResult("k1", "41: RATE_QX_1188 = Decimal('0.19')  # QX-1188 reduced rate"),
    )
    for _ in range(12):
        sess.add(UserMessage(FILL))
    work = sess.add(
        AssistantMessage(
            "",
            (
                ToolCall(
                    "k2", "Edit", '{"file_path": "billing/tax.py", "old_string": "QX-1188", "new_string": "QX-1188-b"}'
                ),
            ),
        ),
        ToolResult("k2", "ok"),
    )
    v = eng.materialize(sess.request(work[-1], budget))
    assert v.metrics["rotated"] or v.epoch == 1
    while not (v.status == "new_epoch" and v.metrics["epoch_start_seq"] > old[-1]):
        v = eng.materialize(sess.request(sess.add(UserMessage(FILL))[0], budget))
    snap = v.messages[1].content
    assert "41: RATE_QX_1188 = Decimal('0.19')  # QX-1188 reduced rate" in snap  # recalled for the Edit's QX-1188


def test_recall_takes_newest_matches_first_and_presents_them_chronologically(sess):
    old = sess.add(UserMessage("setting quorum_size = 3 for the cluster"))[0]
    new = sess.add(UserMessage("correction: quorum_size = 5 for the cluster"))[0]
    for _ in range(12):
        sess.add(UserMessage(FILL))
    eng = sess.engine(config={"context": {"recall_tokens": 2_000}})
    eng.materialize(sess.request(sess.reader.max_seq(), ContextBudget(100_000, 0, 1_000)))
    one = eng.recall("quorum_size", limit_tokens=60)
    assert [r.seq for r in one] == [new]
    assert [r.seq for r in eng.recall("quorum_size", limit_tokens=2_000)] == [old, new]


def test_manual_compact_starts_an_empty_epoch(sess):
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(100_000, 0, 10_000)
    s = sess.add(UserMessage("a"), AssistantMessage("b"))
    v1 = eng.materialize(sess.request(s[-1], budget))
    eng.manual_compact("user asked")
    new = sess.add(UserMessage("fresh start"))[0]
    v2 = eng.materialize(sess.request(new, budget))
    assert v2.epoch == v1.epoch + 1 and v2.metrics["rotation_reason"] == "manual_compact"
    assert [m.seq for m in conversation(v2)] == [new]
    kinds = [r[1] for r in sess.writer().records()]
    assert kinds.count("manual_compact") == 1 and kinds.count("epoch") == 2


def test_changed_instructions_start_a_new_epoch(sess):
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(100_000, 0, 10_000)
    s = sess.add(UserMessage("a"))[0]
    v1 = eng.materialize(sess.request(s, budget, system_prompt="one"))
    s = sess.add(UserMessage("b"))[0]
    v2 = eng.materialize(sess.request(s, budget, system_prompt="two"))
    assert v2.epoch == v1.epoch + 1 and v2.metrics["rotation_reason"] == "instructions_changed"
    assert len(conversation(v2)) == 2 and v2.metrics["common_prefix_tokens"] == 0


def test_extension_changes_append_a_delta(sess):
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(100_000, 0, 10_000)
    views = []
    for ext in ("alpha", "alpha", "beta"):
        s = sess.add(UserMessage("q"))[0]
        views.append(eng.materialize(sess.request(s, budget, extension=ext)))
    assert [v.metrics["kernel_messages"] for v in views] == [1, 1, 2]
    assert views[2].messages[-1].content.count("<extension>\nbeta\n</extension>") == 1
    section = len("<extension>\nalpha\n</extension>\n")
    assert views[0].tokens.extension_tokens == section
    assert views[2].tokens.extension_tokens == section + len("<extension>\nbeta\n</extension>\n")


def test_a_higher_state_revision_appends_the_full_state(sess):
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(100_000, 0, 10_000)
    sess.reader.state = FakeState(1, "Goal: ship v1")
    s = sess.add(UserMessage("start"))[0]
    v1 = eng.materialize(sess.request(s, budget))
    assert '<canonical-state revision="1">\nGoal: ship v1\n</canonical-state>' in v1.messages[1].content
    sess.reader.state = FakeState(2, "Goal: ship v1")  # a higher revision, same text: nothing to send
    s = sess.add(AssistantMessage("noted"))[0]
    v2 = eng.materialize(sess.request(s, budget))
    assert v2.metrics["kernel_messages"] == 1
    sess.reader.state = FakeState(3, "Goal: ship v1\nDecision: use sqlite")
    s = sess.add(AssistantMessage("decided"))[0]
    v3 = eng.materialize(sess.request(s, budget))
    assert v3.messages[-1].content.count('<canonical-state revision="3">\nGoal: ship v1\nDecision: use sqlite') == 1
    section = len('<canonical-state revision="3">\nGoal: ship v1\nDecision: use sqlite\n</canonical-state>\n')
    assert (
        v3.tokens.state_tokens - v2.tokens.state_tokens
        == section
        + len(f'<kernel-context type="delta" generation="1" revision="2" at-seq="{s}">\n')
        + len("</kernel-context>")
        + 4
    )
    assert as_bytes(v3).startswith(as_bytes(v2))


def test_provider_usage_metrics_unknown_stays_none(sess):
    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(100_000, 0, 10_000)
    s = sess.add(UserMessage("one"))[0]
    eng.materialize(sess.request(s, budget))
    s = sess.add(AssistantMessage("r1"), Usage(input_tokens=20, cache_read_tokens=80), UserMessage("two"))
    v2 = eng.materialize(sess.request(s[-1], budget))
    p = v2.metrics["provider"]
    assert p["usage_seq"] == s[1] and p["cache_hit_rate"] == 0.8
    assert p["prefix_utilization"] is None  # the first request had no common prefix: unknown, never 0
    s = sess.add(
        AssistantMessage("r2"),
        Usage(input_tokens=10, cache_read_tokens=150, cache_write_tokens=40),
        UserMessage("three"),
    )
    v3 = eng.materialize(sess.request(s[-1], budget))
    p = v3.metrics["provider"]
    assert p["cache_hit_rate"] == 0.75
    assert p["prefix_utilization"] == 150 / v2.metrics["common_prefix_tokens"]
    s = sess.add(AssistantMessage("r3"), Usage(input_tokens=10), UserMessage("four"))
    assert eng.materialize(sess.request(s[-1], budget)).metrics["provider"]["cache_hit_rate"] is None


def test_images_are_counted_inside_recent_tokens(sess):
    ref = MediaRef("cd" * 32, "image/png", 100, width=1_000, height=2_000)
    s = sess.add(
        UserMessage("look", media=(ref,)), UserMessage("and this", media=(MediaRef("ef" * 32, "image/png", 50),))
    )
    v = sess.engine().materialize(sess.request(s[-1], ContextBudget(100_000, 0, 10_000)))
    assert (v.metrics["image_count"], v.metrics["image_tokens"]) == (2, 2_000 + 1_000)
    assert v.tokens.recent_tokens == (4 + 4 + 2_000) + (4 + 8 + 1_000)


def test_materialization_records_are_durable(sess):
    eng = sess.engine(config=NO_RECALL)
    s = sess.add(UserMessage("a"), UserMessage("b"))
    v = eng.materialize(sess.request(s[-1], ContextBudget(100_000, 0, 10_000)))
    recs = sess.writer().records(kinds=["materialization"])
    assert len(recs) == 1
    _, _, at, p = recs[0]
    assert at == s[-1]
    assert (p["generation"], p["span_user_turns"], p["rotation_reason"], p["request_tokens"]) == (
        1,
        2,
        "initial",
        v.tokens.total_tokens,
    )
    assert p["cacheability"] == 0.0 and p["provider"] is None


def test_stream_only_moves_forward_and_belongs_to_one_session(sess):
    s = sess.add(UserMessage("a"), UserMessage("b"))
    eng = sess.engine()
    eng.materialize(sess.request(s[1], ContextBudget(100_000, 0, 10_000)))
    with pytest.raises(ValueError, match="only moves forward"):
        eng.materialize(sess.request(s[0], ContextBudget(100_000, 0, 10_000)))
    with pytest.raises(ValueError, match="sent to the engine of session"):
        eng.materialize(ContextRequest(session_id="other"))


def _script(sess):
    """A session with tool turns, a planted fact, filler and repeated questions."""
    seqs = list(
        sess.add(
            UserMessage("the build key is QX-99817 for the staging mirror"),
            UserMessage("note: the mirror listens on port PX-4410"),
        )
    )
    for i in range(30):
        seqs += sess.add(
            UserMessage(f"task {i}: " + FILL[:60]),
            AssistantMessage("", (ToolCall(f"r{i}", "Read", f'{{"path": "src/m{i}.py"}}'),)),
            ToolResult(f"r{i}", f"def f{i}(): pass  # " + "." * 80),
            AssistantMessage(f"read m{i}"),
        )
        if i % 7 == 6:
            seqs += sess.add(UserMessage("remind me of the QX-99817 build key"))
        if i == 24:
            seqs += sess.add(UserMessage("which port was it, PX-4410?"))
    return seqs


def test_resume_is_byte_identical(store):
    budget = ContextBudget(100_000, 0, 800)
    config = {"context": {"recall_tokens": 800}}
    ref = Session(store)
    seqs = _script(ref)
    eng = ref.engine("continuity:a", config)
    reference = {}
    for k, s in enumerate(seqs):
        ref.reader.state = FakeState(k // 10, f"rev {k // 10}" if k >= 10 else "")
        reference[s] = eng.materialize(ref.request(s, budget, extension="ext" if k % 17 else "x"))
    assert max(v.epoch for v in reference.values()) >= 5  # rotations happened
    assert any(
        'type="delta"' in m.content and "listens on port PX-4410" in m.content
        for v in reference.values()
        for m in v.messages
    )  # a recall delta happened
    for cut in (3, 40, 77, 118):
        eng_b = ref.engine(f"continuity:b{cut}", config)
        for k, s in enumerate(seqs[:cut]):
            ref.reader.state = FakeState(k // 10, f"rev {k // 10}" if k >= 10 else "")
            eng_b.materialize(ref.request(s, budget, extension="ext" if k % 17 else "x"))
        resumed = ref.engine(f"continuity:b{cut}", config)
        for k in range(cut, min(cut + 3, len(seqs))):
            ref.reader.state = FakeState(k // 10, f"rev {k // 10}" if k >= 10 else "")
            v = resumed.materialize(ref.request(seqs[k], budget, extension="ext" if k % 17 else "x"))
            assert v == reference[seqs[k]], f"resume after request {cut} diverged at request {k}"


def test_default_factory_is_for_model(sess):
    s = sess.add(UserMessage("a"), AssistantMessage("b"))[-1]
    est = CharEstimator()
    profile = EngineProfile(
        session_id=sess.sid,
        model="m",
        reader=sess.reader,
        writer=sess.writer("continuity:f"),
        config=NO_RECALL,
        estimator=est,
    )
    via_factory = continuity_context_engine_factory(profile)
    direct = ContinuityEngine.for_model(
        "m", reader=sess.reader, writer=sess.writer("continuity:d"), config=NO_RECALL, estimator=est
    )
    assert type(via_factory) is ContinuityEngine and via_factory.config == direct.config
    req = sess.request(s, None)
    assert via_factory.materialize(req) == direct.materialize(req)
    assert direct.default_budget() == ContextBudget(256_000, 32_000, 64_000)


def test_cold_start_on_a_long_history_keeps_three_quarters(sess):
    seqs = [s for _ in range(300) for s in sess.add(UserMessage(FILL))]
    v = sess.engine(config=NO_RECALL).materialize(sess.request(seqs[-1], ContextBudget(100_000, 0, 1_000)))
    assert v.first_retained_seq == seqs[-7] and v.tokens.recent_tokens == 700
    assert v.metrics["rotation_reason"] == "initial" and v.metrics["events"] == 300


def test_set_estimator_reestimates_from_durable_records(sess):
    class Double(CharEstimator):
        def estimate(self, text):
            return 2 * len(text)

    eng = sess.engine(config=NO_RECALL)
    budget = ContextBudget(100_000, 0, 10_000)
    s = sess.add(UserMessage("abcd"))[0]
    assert eng.materialize(sess.request(s, budget)).tokens.recent_tokens == 4 + 4
    eng.set_estimator(Double())
    s = sess.add(UserMessage("efgh"))[0]
    v = eng.materialize(sess.request(s, budget))
    assert v.epoch == 1 and v.tokens.recent_tokens == 2 * (4 + 8)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.lists(st.sampled_from(["a.py", "b.py", "src/c.py", "d.md", "e/f.rs", "g.txt", "h.go"]), max_size=3)
        ),
        max_size=12,
    ),
    st.integers(1, 9),
    st.integers(0, 4),
)
def test_recent_paths_read_lazily_equal_the_paths_moved_to_the_end_as_each_call_arrives(turns, n, wait):
    import json
    from collections import deque

    from latch.engine import continuity

    recent, eager = continuity._RecentPaths(n, wait), deque(maxlen=n)
    for k, turn in enumerate(turns):
        keys = ("file_path", "path", "target_file")  # a call naming up to three paths
        calls = [
            ToolCall(f"c{k}.{i}", "Edit", json.dumps(dict(zip(keys, ps, strict=False)))) for i, ps in enumerate(turn)
        ]
        recent.add(calls)
        for c in calls:
            for p in c.paths():
                if p in eager:
                    eager.remove(p)
                eager.append(p)
        if k % 3 == 1:  # read now and then, as requests do
            assert recent.paths() == list(eager)
    assert recent.paths() == list(eager)
    assert eager or not any(any(turn) for turn in turns)
