"""The request loop and the engine segment the same stored events into the same units once.

Before each view the request loop (the history's units and tokens) and the engine (its epoch's units) each run a
unit builder over the same decoded events. Builders sharing the units of one estimator
(:func:`latch.engine.shared_units.shared_units`) hand back one :class:`~latch.engine.units.Unit` per unit, built and
priced once; views must come out byte for byte as with every builder on its own."""

from __future__ import annotations

import itertools

from store_backends import reopen

from latch.bench.scenario import ScenarioModel
from latch.engine import shared_units as shared_mod
from latch.engine.shared_units import SharedUnits, shared_units
from latch.engine.units import UnitBuilder
from latch.estimators import estimator_for_model
from latch.events import UserMessage
from latch.host.loop import RequestLoop, build_engine
from latch.port import ContextBudget, SessionContext
from latch.store.event_store import StoredEvent

WORKSPACE = "/work/shop"
BUDGET = ContextBudget(context_window_tokens=24_000, reserve_tokens=2_000, recent_tokens=6_000)


class _Counting:
    """The model's estimator, counting the texts it is asked to estimate."""

    def __init__(self) -> None:
        self.inner = estimator_for_model("claude-sonnet-4-5")
        self.calls = 0

    def estimate(self, text: str) -> int:
        self.calls += 1
        return int(self.inner.estimate(text))

    def image_tokens(self, width: int, height: int) -> int:
        return int(self.inner.image_tokens(width, height))


def _session(store, events: int):
    sid = store.create_session(workspace=WORKSPACE, format="claude-code")
    store.append(sid, [UserMessage("Fix the invoice rounding; totals must match the ledger to the cent.")])
    store.append(sid, list(itertools.islice(ScenarioModel(5, workspace=WORKSPACE).events(), events)))
    return sid


def test_builders_sharing_units_hand_back_one_unit_per_unit_of_the_same_events(store):
    sid = _session(store, 600)
    stored = list(store.events(sid))
    memo: SharedUnits = SharedUnits()
    first, second, alone = UnitBuilder(memo), UnitBuilder(memo), UnitBuilder()
    a, b, c = first.feed_all(stored), second.feed_all(stored), alone.feed_all(stored)
    assert len(a) == len(b) == len(c) > 100
    assert all(x is y for x, y in zip(a, b, strict=True))  # the second builder built none of its own
    assert [(u.first_seq, u.close_seq, u.seqs, u.messages, u.user_turn) for u in a] == [
        (u.first_seq, u.close_seq, u.seqs, u.messages, u.user_turn) for u in c
    ]
    # equal events that are other objects (another store's rows, the same seqs): units of their own, equal ones
    copies = [StoredEvent(s.seq, s.session_id, s.kind, s.event, s.source_ref, s.ts) for s in stored]
    d = UnitBuilder(memo).feed_all(copies)
    assert not any(x is y for x, y in zip(a, d, strict=True))
    assert [u.messages for u in d] == [u.messages for u in a]
    assert len(memo) <= memo.capacity


def test_shared_units_are_bounded_and_kept_per_estimator():
    memo: SharedUnits = SharedUnits(capacity=3)
    events = [object() for _ in range(5)]
    made = [memo.unit(e, (e,), lambda e=e: ("unit", id(e))) for e in events]
    assert len(memo) == 3
    assert memo.unit(events[-1], (events[-1],), lambda: "again") is made[-1]
    assert memo.unit(events[0], (events[0],), lambda: "again") == "again"  # dropped: made anew
    one, two = _Counting(), _Counting()
    assert shared_units(one) is shared_units(one) and shared_units(one) is not shared_units(two)


def _views(store, sid, estimator, name):
    setup = build_engine(
        store, sid, stream=f"continuity:{name}", engine="continuity", model="claude-sonnet-4-5", estimator=estimator
    )
    loop = RequestLoop(store, sid, setup, BUDGET, session_context=SessionContext(workspace=WORKSPACE))
    out = []
    for a in list(store.events(sid, kinds=("assistant_message",)))[40::40]:
        res = loop.run(a.seq - 1)
        assert res.view is not None and res.violations == []
        out.append((res.lines, res.line_tokens, res.view.tokens, res.view.metrics, res.history_tokens))
    return out


def test_loop_and_engine_price_each_unit_once_and_views_are_unchanged(store, monkeypatch):
    sid = _session(store, 1_500)
    shared = _Counting()
    with_sharing = _views(store, sid, shared, "shared")
    # every builder on its own: a fresh memo for each (nothing shared), a fresh store object (nothing decoded)
    monkeypatch.setattr(shared_mod, "shared_units", lambda estimator: SharedUnits())
    import latch.engine.continuity as continuity
    import latch.host.loop as loop_mod

    monkeypatch.setattr(continuity, "shared_units", lambda estimator: SharedUnits())
    monkeypatch.setattr(loop_mod, "shared_units", lambda estimator: SharedUnits())
    plain = reopen(store)
    alone = _Counting()
    without = _views(plain, sid, alone, "alone")
    assert len(with_sharing) >= 8
    assert with_sharing == without
    # the conversation's texts are estimated by the loop or the engine, not by both
    assert shared.calls < alone.calls * 0.75
    plain.close()
