"""RequestLoop.set_budget: the one way a host changes the budget of the later views (the checked hard limit moves
with it; anything but a ContextBudget is refused)."""

from __future__ import annotations

import pytest

from latch.events import UserMessage
from latch.host.loop import RequestLoop, build_engine
from latch.port import ContextBudget
from latch.store import EventStore


@pytest.fixture
def loop(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    sid = store.create_session(workspace=str(tmp_path), source="test", format="latch")
    store.append(sid, [UserMessage("fix the failing test in parser.py " * 40)])
    setup = build_engine(store, sid, stream="continuity:main", model="gpt-4.1")
    yield RequestLoop(store, sid, setup, ContextBudget(64_000, 4_000, 16_000))
    store.close()


def test_set_budget_moves_the_checked_limit_with_the_budget(loop):
    assert loop.hard == 60_000
    loop.set_budget(ContextBudget(2_000, 1_000, 500))
    assert (loop.budget, loop.hard) == (ContextBudget(2_000, 1_000, 500), 1_000)
    res = loop.run(None)
    assert res.view is not None and res.view.budget == ContextBudget(2_000, 1_000, 500)
    assert res.view.tokens.total_tokens <= 1_000


def test_set_budget_refuses_anything_but_a_budget(loop):
    with pytest.raises(TypeError, match="RequestLoop.set_budget: a ContextBudget, got dict"):
        loop.set_budget({"context_window_tokens": 1_000})
    assert loop.hard == 60_000
