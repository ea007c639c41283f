"""Recall's call ↔ result links (spec: "Summaries are indexes, not truth": a recalled call brings its results and
a recalled result its call): looking a partner up in the few seqs next to its event first finds the same
partners as reading the whole window, on generated sessions with parallel calls, late, missing, repeated and
orphan results, and events in between."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latch.engine import recall as recall_mod
from latch.engine.recall import RecallCache
from latch.engine.units import TokenCounter
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.session import StoreSessionReader
from latch.store import EventStore


class CharEstimator:
    def estimate(self, text: str) -> int:
        return len(text)

    def image_tokens(self, width, height) -> int:
        return 1000


# one step: ("call", number of calls), ("result", which open call, orphan), ("user", -)
_step = st.one_of(
    st.tuples(st.just("call"), st.integers(1, 4), st.booleans()),
    st.tuples(st.just("result"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("user"), st.integers(0, 0), st.booleans()),
)


def _events(steps) -> list:
    out: list = []
    calls: list[str] = []
    for n, (what, k, flag) in enumerate(steps):
        if what == "call":
            ids = [f"c{n}-{j}" for j in range(k)]
            calls += ids
            out.append(AssistantMessage(f"step {n}", tuple(ToolCall(i, "Bash", "{}") for i in ids)))
        elif what == "result" and calls:
            out.append(ToolResult(calls[-1 - k % len(calls)], f"result {n}", orphan=flag and k % 3 == 0))
        else:
            out.append(UserMessage(f"user {n}"))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=1, max_size=80), cut=st.integers(0, 80))
def test_partners_found_near_first_are_the_partners_of_the_whole_window(steps, cut):
    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(Path(tmp) / "latch.db")
        try:
            sid = store.create_session()
            store.append(sid, _events(steps))
            reader = StoreSessionReader(store, sid)
            top = store.max_seq()
            before = max(2, top + 1 - cut)
            counter = TokenCounter(CharEstimator())
            for stored in store.events(sid, until_seq=before - 1):
                recall_mod.PROBE = True
                near = [s.seq for s in RecallCache(counter).partners(reader, stored, before)]
                recall_mod.PROBE = False
                whole = [s.seq for s in RecallCache(counter).partners(reader, stored, before)]
                assert near == whole, (stored.seq, stored.event)
        finally:
            recall_mod.PROBE = True
            store.close()


def test_a_partner_beyond_the_short_window_is_found_within_the_partner_window(tmp_path):
    """A call 40 seqs before its result (and a result 40 seqs after its call) is still its partner: the short
    window misses it, the PARTNER_WINDOW lookup finds it."""
    store = EventStore(tmp_path / "latch.db")
    try:
        sid = store.create_session()
        gap = [UserMessage(f"user {n}") for n in range(40)]
        call_seq, *_, result_seq, after = store.append(
            sid,
            [
                AssistantMessage("run it", (ToolCall("far", "Bash", "{}"),)),
                *gap,
                ToolResult("far", "done"),
                UserMessage("next"),
            ],
        )
        reader = StoreSessionReader(store, sid)
        cache = RecallCache(TokenCounter(CharEstimator()))
        assert [s.seq for s in cache.partners(reader, store.get(result_seq), after + 1)] == [call_seq]
        assert [s.seq for s in cache.partners(reader, store.get(call_seq), after + 1)] == [result_seq]
    finally:
        store.close()
