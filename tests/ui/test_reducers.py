"""The shared UI reducers (latch.host.reducers) over a real store's events."""

from __future__ import annotations

import pytest

from latch.events import (
    AssistantMessage,
    CompactionMarker,
    SystemNote,
    ToolCall,
    ToolResult,
    ToolStarted,
    Usage,
    UserMessage,
    ValidationEvidence,
)
from latch.host import reducers as R
from latch.kernel import canonical_state
from latch.store import EventStore


@pytest.fixture
def store(tmp_path):
    s = EventStore(tmp_path / "db.sqlite")
    yield s
    s.close()


def _session(store, events):
    sid = store.create_session(format="test")
    store.append(sid, events)
    return sid, list(store.events(sid))


def test_transcript_items_and_non_conversation_events(store):
    sid, evs = _session(
        store,
        [
            SystemNote(text="sys", subtype="system_prompt"),
            UserMessage(text="hi <b>"),
            AssistantMessage(
                text="ok",
                tool_calls=(ToolCall(id="c1", name="bash", arguments="{}"),),
                reasoning_reported=True,
                model="m",
            ),
            ToolStarted(call_id="c1", name="bash"),
            ToolResult(call_id="c1", content="out", name="bash", is_error=True),
            Usage(input_tokens=10, output_tokens=2),
            CompactionMarker(summary="sum", pre_tokens=100, post_tokens=10),
        ],
    )
    items = R.transcript(evs)
    assert [i["role"] for i in items] == ["system", "user", "assistant", "tool", "compaction"]
    assert [i["seq"] for i in items] == [evs[0].seq, evs[1].seq, evs[2].seq, evs[4].seq, evs[6].seq]
    assert items[1]["text"] == "hi <b>"
    assert items[2]["tool_calls"] == [{"id": "c1", "name": "bash", "summary": "bash"}]
    assert items[2]["reasoning_reported"] is True and items[2]["model"] == "m"
    assert items[3] == {
        "seq": evs[4].seq,
        "role": "tool",
        "text": "out",
        "call_id": "c1",
        "name": "bash",
        "is_error": True,
        "line": "ERROR: out",
    }
    assert items[4]["pre_tokens"] == 100 and items[4]["text"] == "sum"
    assert R.transcript_item(evs[3]) is None and R.transcript_item(evs[5]) is None


def test_usage_per_request_and_totals_keep_unknown_apart_from_zero(store):
    sid, evs = _session(
        store,
        [
            Usage(input_tokens=100, cache_read_tokens=900, cache_write_tokens=50, output_tokens=20, request_id="r1"),
            UserMessage(text="x"),
            Usage(input_tokens=5, output_tokens=None, model="m2"),
            Usage(input_tokens=None, output_tokens=7),
        ],
    )
    reqs = R.usage_requests(evs)
    assert [r["prompt_tokens"] for r in reqs] == [1050, 5, None]
    assert reqs[0]["request_id"] == "r1" and reqs[1]["model"] == "m2" and reqs[0]["seq"] == evs[0].seq
    totals = R.usage_totals(evs)
    assert totals == {
        "requests": 3,
        "input_tokens": 105,
        "cache_read_tokens": 900,
        "cache_write_tokens": 50,
        "output_tokens": 27,
        "max_prompt_tokens": 1050,
    }
    assert R.usage_totals([]) == {
        "requests": 0,
        "input_tokens": None,
        "cache_read_tokens": None,
        "cache_write_tokens": None,
        "output_tokens": None,
        "max_prompt_tokens": None,
    }


def test_activity_running_only_when_live_else_interrupted_never_completed(store):
    sid, evs = _session(
        store,
        [
            AssistantMessage(
                text="",
                tool_calls=(
                    ToolCall(id="a", name="bash", arguments="{}"),
                    ToolCall(id="b", name="read", arguments="{}"),
                ),
                reasoning_reported=True,
            ),
            ToolStarted(call_id="a", name="bash"),
            ToolResult(call_id="a", content="done"),
            ToolStarted(call_id="b", name="read"),
        ],
    )
    live = R.activity(evs, live=True)
    assert live["reasoning_reported"] is True
    assert live["tools"] == [{"call_id": "b", "name": "read", "seq": evs[3].seq, "status": "running"}]
    assert (live["running"], live["interrupted"]) == (1, 0)
    dead = R.activity(evs, live=False)
    assert [t["status"] for t in dead["tools"]] == ["interrupted"]
    assert (dead["running"], dead["interrupted"]) == (0, 1)
    # the tool finished: nothing running, nothing interrupted; a later plain message clears reasoning
    store.append(sid, [ToolResult(call_id="b", content="x"), AssistantMessage(text="fin")])
    after = R.activity(list(store.events(sid)), live=False)
    assert after == {"reasoning_reported": False, "tools": [], "running": 0, "interrupted": 0}


def test_evidence_and_state_summary(store):
    sid, evs = _session(
        store,
        [
            ValidationEvidence(
                command="pytest -q", status="passed", requirements=("tests",), exit_code=0, summary="3 passed"
            ),
        ],
    )
    assert R.evidence(evs) == [
        {
            "seq": evs[0].seq,
            "command": "pytest -q",
            "status": "passed",
            "requirements": ["tests"],
            "exit_code": 0,
            "summary": "3 passed",
        }
    ]
    summary = R.state_summary(canonical_state(store, sid))
    assert summary["validation_runs"] == 1 and summary["requirements"] == 1
    assert summary["requirements_current"] == 1 and summary["tombstoned"] is False
    assert summary["files"] == 0 and summary["failures_active"] == 0
