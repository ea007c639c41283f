"""The baseline engines on a small hand-written session: what each keeps, drops, masks and summarizes."""

from __future__ import annotations

import pytest
from latch_baselines import (
    ObservationMaskingEngine,
    RawHistoryEngine,
    SlidingWindowEngine,
    SummaryEngine,
    extractive_summary,
)
from latch_baselines.summary import edited_files, first_sentence

from latch.engine.port import ContextBudget, ContextOverflow, ContextRequest, EngineProfile
from latch.engine.units import TokenCounter, view_violations
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.session import StoreKernelWriter, StoreSessionReader
from latch.store import EventStore

READ_OUTPUT = "\n".join(f"{i:3d}  def line_{i}(): return round(x, 2)" for i in range(1, 41))  # 40 lines
EVENTS = [
    UserMessage("Fix the rounding bug in invoice.py. It fails for 0.5 and I need it today."),  # seq 1
    AssistantMessage("Let me look.", (ToolCall("c1", "Read", '{"file_path": "invoice.py"}'),)),  # seq 2
    ToolResult("c1", READ_OUTPUT),  # seq 3
    AssistantMessage("", (ToolCall("c2", "Edit", '{"file_path": "invoice.py", "old": "a", "new": "b"}'),)),
    ToolResult("c2", "ok"),  # seq 5
    AssistantMessage("", (ToolCall("c3", "Bash", '{"command": "pytest -q"}'),)),  # seq 6
    ToolResult("c3", "collected 3 items\nF..\nAssertionError: 0.5 rounds to 0", is_error=True),  # seq 7
    UserMessage("Now also add a test for negative amounts."),  # seq 8
    AssistantMessage("Done: tests/test_invoice.py covers -0.5."),  # seq 9
]


class QuarterEstimator:
    """One token per 4 characters, rounded up: the tests pin engine logic, not estimator calibration."""

    def estimate(self, text: str) -> int:
        return (len(text) + 3) // 4

    def image_tokens(self, width, height) -> int:
        return 1000


ESTIMATOR = QuarterEstimator()
COUNTER = TokenCounter(ESTIMATOR)


@pytest.fixture
def session(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    sid = store.create_session(source="test")
    seqs = store.append(sid, EVENTS)
    assert seqs == list(range(1, 10))
    yield store, sid
    store.close()


def engine(cls, session, **options):
    store, sid = session
    config = {"engines": {cls.PLUGIN_NAME: options}} if options else {}
    profile = EngineProfile(
        session_id=sid,
        model="gpt-4o",
        reader=StoreSessionReader(store, sid),
        writer=StoreKernelWriter(store, sid, f"{cls.PLUGIN_NAME}:test"),
        config=config,
        estimator=ESTIMATOR,
    )
    return cls.factory(profile)


def view(eng, hard_limit, until_seq=None, recent=64_000):
    budget = ContextBudget(context_window_tokens=hard_limit + 100, reserve_tokens=100, recent_tokens=recent)
    v = eng.materialize(
        ContextRequest(
            session_id=eng.profile.session_id, system_prompt="You fix bugs.", until_seq=until_seq, budget=budget
        )
    )
    recount = COUNTER.system(v.system) + COUNTER.tools(v.tools) + sum(COUNTER.message(m) for m in v.messages)
    assert v.tokens.total_tokens == recount <= hard_limit
    assert view_violations(v.messages) == []
    return v


def conversation_seqs(v):
    return [m.seq for m in v.messages if m.kind == "conversation"]


def unit_cost(*seqs, messages=None):
    """Tokens of the view messages with these seqs, as the engines price them."""
    return sum(COUNTER.message(m) for m in messages if m.seq in seqs)


# ---------------------------------------------------------------- sliding-window


def test_sliding_window_keeps_everything_that_fits(session):
    v = view(engine(SlidingWindowEngine, session), 100_000)
    assert [m.kind for m in v.messages[:1]] == ["session_context"]
    assert conversation_seqs(v) == list(range(1, 10))
    assert v.first_retained_seq == 1
    assert v.metrics["units_total"] == 6 and v.metrics["units_dropped"] == 0


def test_sliding_window_drops_oldest_whole_units(session):
    full = view(engine(SlidingWindowEngine, session), 100_000)
    fixed = full.tokens.instructions_tokens
    last_three = unit_cost(6, 7, 8, 9, messages=full.messages)  # units: turn c3 (6,7), user 8, assistant 9
    v = view(engine(SlidingWindowEngine, session), fixed + last_three + 5)  # 5 short of the c2 turn
    assert conversation_seqs(v) == [6, 7, 8, 9]
    assert v.first_retained_seq == 6
    assert v.metrics["units_dropped"] == 3
    assert v.tokens.recent_tokens == last_three


def test_sliding_window_max_tokens_caps_the_conversation(session):
    full = view(engine(SlidingWindowEngine, session), 100_000)
    last_two = unit_cost(8, 9, messages=full.messages)
    v = view(engine(SlidingWindowEngine, session, max_tokens=last_two), 100_000)
    assert conversation_seqs(v) == [8, 9]


def test_the_newest_unit_that_cannot_fit_overflows(session):
    full = view(engine(SlidingWindowEngine, session), 100_000)
    too_small = full.tokens.instructions_tokens + unit_cost(9, messages=full.messages) - 1
    for cls in (SlidingWindowEngine, ObservationMaskingEngine, SummaryEngine):
        with pytest.raises(ContextOverflow, match=r"the newest unit cannot fit the hard budget \(.*newest_unit_tokens"):
            view(engine(cls, session), too_small)


def test_until_seq_materializes_the_past(session):
    v = view(engine(SlidingWindowEngine, session), 100_000, until_seq=3)
    assert conversation_seqs(v) == [1, 2, 3]
    v = view(engine(SlidingWindowEngine, session), 100_000, until_seq=2)  # the c1 turn waits for its result
    assert conversation_seqs(v) == [1]


def test_manual_compact_drops_history_up_to_that_point(session):
    eng = engine(SlidingWindowEngine, session)
    eng.manual_compact("user asked")
    store, sid = session
    store.append(sid, [UserMessage("What changed?")])
    v = view(eng, 100_000)
    assert conversation_seqs(v) == [10]
    assert v.metrics["manual_compact_seq"] == 9
    assert conversation_seqs(view(eng, 100_000, until_seq=8)) == list(range(1, 9))  # a view from before it


def test_unknown_and_bad_options_are_named(session):
    with pytest.raises(
        ValueError, match=r"\[engines.sliding-window\]: unknown option\(s\) keep_turns; known: max_tokens"
    ):
        engine(SlidingWindowEngine, session, keep_turns=3)
    with pytest.raises(
        ValueError, match=r"\[engines.observation-masking\] keep_turns must be a positive integer, got 0"
    ):
        engine(ObservationMaskingEngine, session, keep_turns=0)


def test_recall_finds_old_events(session):
    eng = engine(SlidingWindowEngine, session)
    hits = eng.recall("AssertionError")
    assert [h.seq for h in hits] == [7]
    assert hits[0].text.endswith("AssertionError: 0.5 rounds to 0")
    assert eng.recall("AssertionError", limit_tokens=1) == []


# ---------------------------------------------------------------- observation-masking


def test_observation_masking_replaces_old_tool_outputs(session):
    v = view(engine(ObservationMaskingEngine, session, keep_turns=1), 100_000)
    tools = {m.tool_call_id: m for m in v.messages if m.role == "tool"}
    assert tools["c1"].content == "[tool output omitted: 40 lines]"
    assert tools["c2"].content == "ok"  # shorter than its placeholder: kept
    assert tools["c3"].content.endswith("AssertionError: 0.5 rounds to 0")  # the newest turn is intact
    assert tools["c3"].is_error
    assert [m.content for m in v.messages if m.role == "assistant"][0] == "Let me look."  # actions stay
    assert v.metrics["masked_turns"] == 2
    assert conversation_seqs(v) == list(range(1, 10))


def test_observation_masking_default_keeps_the_last_ten_turns(session):
    v = view(engine(ObservationMaskingEngine, session), 100_000)
    assert v.metrics["keep_turns"] == 10 and v.metrics["masked_turns"] == 0
    assert [m.content for m in v.messages if m.role == "tool"][0] == READ_OUTPUT


def test_observation_masking_then_drops_oldest_when_still_over(session):
    masked = view(engine(ObservationMaskingEngine, session, keep_turns=1), 100_000)
    fixed = masked.tokens.instructions_tokens
    v = view(engine(ObservationMaskingEngine, session, keep_turns=1), fixed + masked.tokens.recent_tokens - 1)
    assert conversation_seqs(v) == list(range(2, 10))  # the first user message went
    assert v.messages[1].tool_calls[0].id == "c1" and v.messages[2].content == "[tool output omitted: 40 lines]"


# ---------------------------------------------------------------- summary


def test_summary_below_the_threshold_sends_everything(session):
    v = view(engine(SummaryEngine, session), 100_000)
    assert conversation_seqs(v) == list(range(1, 10))
    assert v.metrics["summarized_units"] == 0 and v.tokens.state_tokens == 0


def test_summary_folds_history_beyond_the_threshold(session):
    full = view(engine(SummaryEngine, session), 100_000)
    tail = unit_cost(8, 9, messages=full.messages)
    eng = engine(SummaryEngine, session, threshold_tokens=tail + 1, keep_tokens=tail)
    v = view(eng, 100_000)
    assert conversation_seqs(v) == [8, 9]
    summary = v.messages[1]
    assert summary.kind == "summary" and summary.role == "user"
    assert summary.content == (
        "[Summary of the earlier conversation: 4 units, seq 1-7, replaced by this summary; the originals stay "
        "in the session log.]\n"
        "User requests:\n- Fix the rounding bug in invoice.py.\n"
        "Files edited: invoice.py\n"
        "Last errors:\n- AssertionError: 0.5 rounds to 0"
    )
    assert v.tokens.state_tokens == COUNTER.message(summary)
    assert v.metrics["summarized_units"] == 4


def test_summary_boundary_has_hysteresis(session):
    # Unit costs (a quarter of the characters, plus 4 per message and 8 + id per call or result):
    # (1) 23, (2,3) 425, (4,5) 41, (6,7) 47, (8) 15, (9) 14 tokens.
    # threshold 100, keep 50: crossing 100 shrinks the tail to <= 50 (the newest unit always stays).
    eng = engine(SummaryEngine, session, threshold_tokens=100, keep_tokens=50)
    firsts = [view(eng, 100_000, until_seq=until).first_retained_seq for until in (1, 3, 5, 7, 8, 9)]
    assert firsts == [1, 2, 4, 4, 8, 8]  # at seq 7 the tail (41 + 47 = 88) is under the threshold: no move
    fresh = engine(SummaryEngine, session, threshold_tokens=100, keep_tokens=50)
    assert view(fresh, 100_000).first_retained_seq == 8  # the same boundary from the log alone


def test_summary_manual_compact_summarizes_instead_of_dropping(session):
    eng = engine(SummaryEngine, session)
    eng.manual_compact()
    store, sid = session
    store.append(sid, [UserMessage("What changed?")])
    v = view(eng, 100_000)
    assert conversation_seqs(v) == [10]
    assert "Fix the rounding bug in invoice.py." in v.messages[1].content
    assert "Now also add a test for negative amounts." in v.messages[1].content


def budget_summarizer(units, max_tokens, count):
    return f"{len(units)} units, at most {max_tokens} tokens"


def test_pluggable_summarizer_by_name_and_a_runaway_one_is_cut(session):
    eng = engine(
        SummaryEngine,
        session,
        threshold_tokens=50,
        keep_tokens=40,
        summary_tokens=300,
        summarizer=f"{__name__}:budget_summarizer",
    )
    v = view(eng, 100_000)
    body = v.messages[1].content.split("\n", 1)[1]
    assert body.startswith("4 units, at most ") and body.endswith(" tokens")

    runaway = engine(
        SummaryEngine,
        session,
        threshold_tokens=50,
        keep_tokens=40,
        summary_tokens=300,
        summarizer=lambda units, max_tokens, count: "word " * 5000,
    )
    v = view(runaway, 100_000)
    assert COUNTER.message(v.messages[1]) <= 300
    with pytest.raises(ValueError, match=r"summarizer 'nowhere:nothing' cannot be loaded"):
        engine(SummaryEngine, session, summarizer="nowhere:nothing")


def test_extractive_summary_is_bounded():
    assert first_sentence("  Fix it now! Then more.") == "Fix it now!"
    assert first_sentence("line one\nline two") == "line one"
    assert len(first_sentence("x" * 500)) == 160
    assert edited_files("apply_patch", '{"input": "*** Begin Patch\\n*** Update File: src/a.py\\n"}') == ["src/a.py"]
    assert edited_files("str_replace_editor", '{"command": "view", "path": "a.py"}') == []
    assert edited_files("str_replace_editor", '{"command": "create", "path": "a.py"}') == ["a.py"]
    assert extractive_summary([], 100, COUNTER.text) == ""


# ---------------------------------------------------------------- raw-history


def test_raw_history_sends_the_whole_conversation_and_only_grows(session):
    eng = engine(RawHistoryEngine, session)
    views = [view(eng, 100_000, until_seq=n) for n in (3, 5, 7, 9)]
    assert [conversation_seqs(v) for v in views] == [list(range(1, n + 1)) for n in (3, 5, 7, 9)]
    assert {v.epoch for v in views} == {1} and {v.metrics["rotation_reason"] for v in views} == {None}
    assert {v.first_retained_seq for v in views} == {1} and views[-1].metrics["units_dropped"] == 0


def test_raw_history_refuses_once_the_conversation_outgrows_the_budget(session):
    full = view(engine(RawHistoryEngine, session), 100_000)
    exact = full.tokens.total_tokens
    assert view(engine(RawHistoryEngine, session), exact).tokens.total_tokens == exact  # fits to the token
    with pytest.raises(ContextOverflow, match="raw-history: the whole conversation no longer fits") as err:
        view(engine(RawHistoryEngine, session), exact - 1)  # one token short: refused, nothing dropped
    assert err.value.breakdown["conversation_tokens"] == full.tokens.recent_tokens
    assert err.value.breakdown["hard_limit_tokens"] == exact - 1
