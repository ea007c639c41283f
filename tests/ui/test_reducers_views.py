"""The shared reducers' views added for the TUI, the report and the web page: cache epochs and breaks,
context breakdown, costs, session_view."""

from __future__ import annotations

import pytest

from latch.accounting.pricing import price_usage
from latch.events import AssistantMessage, CompactionMarker, ToolResult, Usage, UserMessage
from latch.host import reducers as R
from latch.host.kernel import kernel_cache
from latch.host.state_text import evidence_status, summary_line
from latch.kernel import canonical_state
from latch.store import EventStore

M = "claude-sonnet-4-5"


@pytest.fixture
def events():
    with EventStore(":memory:") as store:
        sid = store.create_session(format="test")
        store.append(
            sid,
            [
                UserMessage(text="hello"),  # 5 user chars
                Usage(input_tokens=10, cache_read_tokens=0, cache_write_tokens=1000, output_tokens=4, model=M),
                AssistantMessage(text="abc", model=M),
                ToolResult(call_id="c", content="0123456789"),
                Usage(input_tokens=5, cache_read_tokens=1000, cache_write_tokens=200, output_tokens=4, model=M),
                Usage(
                    input_tokens=5, cache_read_tokens=100, cache_write_tokens=1100, output_tokens=4, model=M
                ),  # broken
                Usage(input_tokens=7, output_tokens=1, model="no-such-model"),  # no cache counts
                CompactionMarker(summary="sum", pre_tokens=1200, post_tokens=50),
                Usage(
                    input_tokens=50, cache_read_tokens=0, cache_write_tokens=0, output_tokens=2, model=M
                ),  # compaction
            ],
        )
        yield list(store.events(sid))


def test_cache_epochs_and_breaks(events):
    c = R.cache_epochs(events)
    assert [(r["request"], r["epoch"], r["cache"], r["reason"]) for r in c["requests"]] == [
        (1, 1, "first", None),
        (2, 1, "kept", None),
        (3, 2, "broken", "prefix changed"),
        (4, 2, "unknown", None),
        (5, 3, "broken", "compaction"),
    ]
    assert [
        (
            e["epoch"],
            e["first_request"],
            e["last_request"],
            e["requests"],
            e["cache_read_tokens"],
            e["cache_write_tokens"],
        )
        for e in c["epochs"]
    ] == [(1, 1, 2, 2, 1000, 1200), (2, 3, 4, 2, 100, 1100), (3, 5, 5, 1, 0, 0)]
    assert [(b["request"], b["cache_read_tokens"], b["previous_cached_tokens"]) for b in c["breaks"]] == [
        (3, 100, 1200),
        (5, 0, 1200),
    ]
    assert R.cache_epochs([]) == {"requests": [], "epochs": [], "breaks": []}


def test_context_breakdown(events):
    ctx = R.context_breakdown(events)
    assert [r["request"] for r in ctx] == [1, 2, 3, 4, 5]
    assert ctx[0]["chars"] == {"user": 5, "assistant": 0, "tool": 0, "system": 0} and ctx[0]["items"] == 1
    assert ctx[1]["chars"] == {"user": 5, "assistant": 3, "tool": 10, "system": 0} and ctx[1]["items"] == 3
    assert (ctx[1]["prompt_tokens"], ctx[1]["cache_read_tokens"], ctx[1]["uncached_tokens"]) == (1205, 1000, 5)
    assert ctx[3]["cache_read_tokens"] is None and ctx[3]["prompt_tokens"] == 7
    compaction_seq = next(e.seq for e in events if e.kind == "compaction_marker")
    assert ctx[4]["chars"] == dict.fromkeys(("user", "assistant", "tool", "system"), 0)
    assert ctx[4]["since_compaction_seq"] == compaction_seq and ctx[3]["since_compaction_seq"] is None


def test_request_costs(events):
    costs = R.request_costs(events)
    usages = [e.event for e in events if e.kind == "usage"]
    expected = [price_usage(u) for u in usages]
    assert expected[0] is not None and expected[3] is None  # an unknown model is unpriced, not $0
    assert [r["usd"] for r in costs["requests"]] == [float(c.usd) if c else None for c in expected]
    t = costs["totals"]
    assert (t["requests"], t["priced_requests"], t["unpriced_requests"]) == (5, 4, 1)
    assert t["usd"] == pytest.approx(sum(float(c.usd) for c in expected if c))


def test_session_view_keys_and_state_summary_of_json(events):
    with EventStore(":memory:") as store:
        sid = store.create_session(format="test")
        store.append(sid, [e.event for e in events])
        state = canonical_state(store, sid, cache=kernel_cache())
        view = R.session_view(store.events(sid), state)
    assert set(view) == {
        "last_seq",
        "live",
        "transcript",
        "evidence",
        "requests",
        "usage",
        "activity",
        "state",
        "costs",
        "context",
        "cache",
        "canonical",
    }
    assert view["canonical"]["lines"][:2] == [f"session {sid} · revision {state.revision:,}", summary_line(state)]
    assert view["canonical"]["evidence"] == evidence_status(state)
    assert R.state_summary(state.to_json()) == R.state_summary(state) == view["state"]
    assert view["usage"]["requests"] == len(view["context"]) == 5
