"""The engine SDK: a policy engine in a few lines, O(new events) per request, never over budget."""

from __future__ import annotations

import pytest

from latch.engine.sdk import PolicyEngine, Selection
from latch.engine.units import render_session_context, view_violations
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.session import StoreKernelWriter, StoreSessionReader
from latch.port import ContextBudget, ContextOverflow, ContextRequest, EngineProfile, SessionContext


class KeepLast(PolicyEngine):
    PLUGIN_NAME = "keep-last"
    DEFAULTS = {"units": 2}

    def select(self, units, room):
        return self.fit(units[-self.options["units"] :], room)


class CountingReader(StoreSessionReader):
    """Counts every event the engine reads."""

    read = 0

    def events(self, **kw):
        for stored in super().events(**kw):
            self.read += 1
            yield stored


def _turn(i: int):
    return [
        UserMessage(f"step {i}"),
        AssistantMessage("", (ToolCall(f"c{i}", "Bash", '{"command": "ls"}'),)),
        ToolResult(f"c{i}", f"file{i}.py"),
        AssistantMessage(f"done {i}"),
    ]


def _engine(store, sid, cls=KeepLast, **config):
    reader = CountingReader(store, sid)
    return cls(
        EngineProfile(
            session_id=sid,
            model="gpt-4o",
            reader=reader,
            writer=StoreKernelWriter(store, sid, "sdk:test"),
            config={"engines": {cls.PLUGIN_NAME: config}} if config else {},
        )
    ), reader


def test_every_event_is_read_once_across_requests(store):
    sid = store.create_session()
    engine, reader = _engine(store, sid)
    request = ContextRequest(
        session_id=sid, session_context=SessionContext(workspace="/w"), budget=ContextBudget(32_000, 4_000, 8_000)
    )
    views = []
    for i in range(30):
        store.append(sid, _turn(i))
        views.append(engine.materialize(request))
    assert reader.read == 30 * 4  # each request read only the 4 new events, not the whole log
    last = views[-1]
    assert last.messages[0] == render_session_context(request.session_context)
    # units: [user] [call + result] [answer] per turn; the newest 2 are kept whole
    assert [m.seq for m in last.messages[1:]] == [118, 119, 120]
    assert view_violations(last.messages) == []
    assert last.metrics["units_total"] == 90 and last.metrics["units_kept"] == 2
    assert last.tokens.total_tokens <= 28_000 and last.epoch > 1
    # an earlier request starts over (and still gives the view as of then)
    earlier = engine.materialize(ContextRequest(session_id=sid, until_seq=4, budget=request.budget))
    assert [m.seq for m in earlier.messages[1:]] == [2, 3, 4]


def test_a_policy_that_overspends_never_reaches_a_provider(store):
    class Greedy(KeepLast):
        PLUGIN_NAME = "greedy"

        def select(self, units, room):
            return Selection(units, metrics={"greedy": True})

    sid = store.create_session()
    store.append(sid, [e for i in range(40) for e in _turn(i)])
    engine, _ = _engine(store, sid, Greedy)
    with pytest.raises(AssertionError, match="greedy selected"):
        engine.materialize(ContextRequest(session_id=sid, budget=ContextBudget(1_200, 200, 800)))
    with pytest.raises(ContextOverflow, match="newest unit cannot fit"):
        engine.materialize(ContextRequest(session_id=sid, budget=ContextBudget(40, 10, 20)))


def test_options_are_checked_by_name(store):
    sid = store.create_session()
    with pytest.raises(ValueError, match=r"\[engines.keep-last\]: unknown option\(s\) unit; known: units"):
        _engine(store, sid, unit=3)
    engine, _ = _engine(store, sid, units=5)
    assert engine.config == {"units": 5}
