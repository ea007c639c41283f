"""The ledger derives a view's events only through the view's seq, holds only the facts its reducers have not
applied yet, and what it derives in steps equals a derivation in one pass (spec: "Bounded materialization")."""

from __future__ import annotations

import itertools

import pytest

from latch.bench.scenario import ScenarioModel
from latch.kernel import canonical_state
from latch.kernel import ledger as ledger_mod
from latch.kernel.ledger import KernelCache
from latch.store import EventStore


def _scenario_store(tmp_path, events: int) -> tuple[EventStore, str]:
    store = EventStore(tmp_path / "ledger.db")
    sid = store.create_session(workspace="/work/shop", format="claude-code")
    store.append(sid, list(itertools.islice(ScenarioModel(7, workspace="/work/shop").events(), events)))
    return store, sid


def test_a_view_derives_only_through_its_seq(tmp_path):
    store, sid = _scenario_store(tmp_path, 600)
    top = store.max_seq()
    cache = KernelCache()
    canonical_state(store, sid, 200, cache=cache)
    ledger = cache.ledger(store, 0)  # no further refresh
    assert ledger.watermark == 200
    assert all(pos[0] <= 200 for facts in ledger.facts.values() for pos, _ in facts)
    canonical_state(store, sid, top + 50, cache=cache)  # beyond the log: through its newest event
    assert ledger.watermark == top
    store.close()


def test_views_in_steps_equal_views_derived_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_mod, "APPLIED_HELD", 64)  # let applied facts go often
    store, sid = _scenario_store(tmp_path, 1_500)
    top = store.max_seq()
    stepped = KernelCache()
    for until in (*range(37, top, 113), top):
        got = canonical_state(store, sid, until, cache=stepped).to_json()
        want = canonical_state(store, sid, until, cache=KernelCache()).to_json()
        assert got == want, until
    assert (
        canonical_state(store, sid, cache=stepped).to_json()
        == canonical_state(store, sid, cache=KernelCache()).to_json()
    )
    store.close()


def test_the_ledger_holds_only_facts_not_applied_yet(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_mod, "APPLIED_HELD", 64)
    store, sid = _scenario_store(tmp_path, 3_000)
    top = store.max_seq()
    cache = KernelCache()
    held = []
    for until in range(50, top + 1, 50):
        canonical_state(store, sid, until, cache=cache)
        held.append(len(cache.ledger(store, 0).facts[sid]))
    ledger = cache.ledger(store, 0)
    total = ledger.dropped.get(sid, 0) + len(ledger.facts[sid])
    assert total > 1_000 and max(held) < 64 + 60  # at most the threshold plus one view's facts
    fresh = KernelCache().ledger(store)
    assert ledger.session_facts(sid, store) == fresh.session_facts(sid)  # derived again, equal
    store.close()


def test_an_earlier_view_after_facts_were_let_go_equals_a_fresh_one(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_mod, "APPLIED_HELD", 64)
    store, sid = _scenario_store(tmp_path, 2_000)
    top = store.max_seq()
    cache = KernelCache()
    canonical_state(store, sid, cache=cache)
    assert cache.ledger(store, 0).dropped.get(sid, 0) > 0
    with pytest.raises(ValueError, match="pass the store"):
        cache.ledger(store, 0).session_facts(sid)
    for until in (top // 3, top // 2, top):
        assert (
            canonical_state(store, sid, until, cache=cache).to_json()
            == canonical_state(store, sid, until, cache=KernelCache()).to_json()
        )
    store.close()
