"""What a RequestLoop keeps between views is bounded by the view, not the session: RequestLoop.units holds the units of
several events only (the whole-unit check and the request changes read it exactly as they read the map of every
unit), and the lines and tokens it caches are the last view's."""

from __future__ import annotations

from pathlib import Path

from latch.engine.units import UnitBuilder, UnitSpan, view_violations
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.changes import request_changes
from latch.host.ingest import import_file
from latch.host.loop import RequestLoop, build_engine, model_requests
from latch.port import ContextBudget
from latch.store import EventStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"


def _every_unit(store: EventStore, sid: str) -> dict[int, UnitSpan]:
    units: dict[int, UnitSpan] = {}
    for u in UnitBuilder().feed_all(store.events(sid)):
        span = UnitSpan(u)
        for s in u.seqs:
            units[s] = span
    return units


def test_units_of_one_event_are_left_out_and_the_line_cache_is_the_last_view(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    try:
        sid = import_file(store, EXAMPLE, final=True)[0]
        setup = build_engine(store, sid, stream="continuity:units-test", model="claude-sonnet-4-5")
        loop = RequestLoop(store, sid, setup, ContextBudget(16_000, 2_000, 3_000))
        requests = model_requests(list(store.events(sid, kinds=["assistant_message", "usage"])))
        results = []
        for r in [*requests, None]:
            results.append(loop.run(None if r is None else r.seq - 1))
            view = results[-1].view
            if view is not None:
                assert len(loop._seen) <= len(view.messages) and len(loop._collapsed) <= len(view.messages)
        assert sum(r.rotated for r in results) >= 2  # the cache held across rotations too
        every = _every_unit(store, sid)
        assert loop.units and set(loop.units) == {s for s, u in every.items() if len(u.seqs) > 1}
        assert len(loop.units) < len(every)  # the example's user and plain assistant messages are not kept
        sent = [r for r in results if r.view is not None]
        assert len(sent) > 10
        prev = None
        for r in sent:
            assert view_violations(r.view.messages, loop.units) == view_violations(r.view.messages, every) == []
            assert request_changes(prev, r, loop.units) == request_changes(prev, r, every)
            prev = r
    finally:
        store.close()


def test_a_split_unit_is_still_named(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    try:
        sid = store.create_session(workspace=str(tmp_path), source="test", format="latch")
        seqs = store.append(
            sid,
            [
                UserMessage("run the tests"),
                AssistantMessage(text="", tool_calls=(ToolCall("c1", "bash", '{"command": "pytest"}'),)),
                ToolResult(call_id="c1", content="1 passed"),
                AssistantMessage(text="All green."),
            ],
        )
        setup = build_engine(store, sid, stream="continuity:units-test", model="gpt-4.1")
        loop = RequestLoop(store, sid, setup, ContextBudget(64_000, 4_000, 16_000))
        view = loop.run(None).view
        assert view is not None
        assert set(loop.units) == {seqs[1], seqs[2]}
        kept = [m for m in view.messages if m.seq != seqs[2] or m.kind != "conversation"]
        assert any(f"unit seq {seqs[1]}.." in v and "is split" in v for v in view_violations(kept, loop.units))
    finally:
        store.close()
