"""RequestLoop.advance: a host reads and segments a session's events ahead of its next view (while it waits for the
session to grow) and the views come out the same; the loop's running totals equal an independent segmentation."""

from __future__ import annotations

import itertools

import pytest

from latch.bench.scenario import ScenarioModel
from latch.engine.units import UnitBuilder
from latch.host.loop import RequestLoop, build_engine
from latch.kernel.derive import instruction_text
from latch.port import ContextBudget
from latch.store import EventStore

BUDGET = ContextBudget(60_000, 8_000, 20_000)


@pytest.fixture
def session(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    sid = store.create_session(workspace="/work/shop", source="test", format="latch")
    events = list(itertools.islice(ScenarioModel(7, workspace="/work/shop").events(), 2_400))
    for k in range(0, len(events), 400):
        store.append(sid, events[k : k + 400])
    yield store, sid
    store.close()


def _loop(store: EventStore, sid: str, stream: str) -> RequestLoop:
    setup = build_engine(store, sid, stream=stream, engine="continuity", model="claude-sonnet-4-5")
    return RequestLoop(store, sid, setup, BUDGET, system_prompt="You are a careful coding agent.")


def _seen(res):
    return (
        res.until_seq,
        res.events,
        res.history_tokens,
        res.recounted_tokens,
        res.line_tokens,
        res.lines,
        res.common_prefix_lines,
        res.rotated,
        res.violations,
        res.instruction_violations,
    )


def test_views_after_reading_ahead_equal_views_read_on_demand(session):
    store, sid = session
    direct, ahead = _loop(store, sid, "continuity:direct"), _loop(store, sid, "continuity:ahead")
    assert ahead.fed_seq == 0
    for until in (500, 1_100, 1_101, 1_750, 2_400):
        for step in range(ahead.fed_seq + 97, until, 97):  # many small reads while "waiting"
            ahead.advance(step)
        ahead.advance(until)
        assert ahead.fed_seq == until
        ahead.advance(until - 50)  # at or before what was read: nothing happens
        assert ahead.fed_seq == until
        a, b = direct.run(until), ahead.run(until)
        assert a.view is not None and b.view is not None
        assert _seen(a) == _seen(b)
        assert (direct.latest_instruction, list(direct.units)) == (ahead.latest_instruction, list(ahead.units))


def test_running_totals_equal_an_independent_segmentation(session):
    store, sid = session
    loop = _loop(store, sid, "continuity:main")
    for until in (333, 1_200, 2_400):
        res = loop.run(until)
        evs = list(store.events(sid, until_seq=until))
        units = UnitBuilder().feed_all(evs)
        assert res.events == len(evs) == until
        assert res.history_tokens == sum(u.cost(loop.counter) for u in units) > 0
        assert list(loop.units) == [s for u in units if len(u.seqs) > 1 for s in u.seqs]
        found = [(e.seq, f[0]) for e in evs if (f := instruction_text(e.event)) is not None]
        assert loop.latest_instruction == found[-1]
