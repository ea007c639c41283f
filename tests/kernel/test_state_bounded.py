"""A session's reducer holds only the newest shell commands and the open plus the newest closed failure streaks,
whatever the history; the counts a rendered state shows (``N older omitted``, a command's ``×runs``, a streak's
count) and every collection of :meth:`CanonicalState.to_json` stay exact: what was let go is derived again from the
log when a render or a collection reaches it (spec: "Bounded materialization")."""

from __future__ import annotations

import json

import pytest
from kernel_support import session, turn

from latch.hotpaths import estimate_tokens
from latch.kernel import canonical_state
from latch.kernel import ledger as ledger_mod
from latch.kernel import state as state_mod
from latch.kernel.ledger import KernelCache
from latch.store import EventStore

HELD = 16
CLOSED_HELD = 4


def _history(store: EventStore, sid: str) -> list[int]:
    """300 distinct commands (some run again long after they were let go), 60 failure streaks closed by a
    success of their command, and 3 streaks still open; the seqs to view at."""
    marks = []
    for i in range(300):
        turn(store, sid, "Bash", {"command": f"echo step{i}"}, "done")
        if i % 5 == 0:
            cmd = f"./deploy.sh stage{i}"
            turn(store, sid, "Bash", {"command": cmd}, f"deploy failed: host {i} unreachable", is_error=True)
            turn(store, sid, "Bash", {"command": cmd}, f"deploy failed: host {i} unreachable", is_error=True)
            turn(store, sid, "Bash", {"command": cmd}, "deployed")
        if i in (150, 220):
            turn(store, sid, "Bash", {"command": "echo step3"}, "done")  # let go long ago: its runs count on
        if i % 40 == 39:
            marks.append(store.max_seq())
    for i, error in enumerate(("unused import os", "undefined name parse", "line too long")):
        turn(store, sid, "Bash", {"command": f"./lint.sh part{i}"}, f"error: {error}", is_error=True)
    marks.append(store.max_seq())
    return marks


def _shown(state) -> tuple:
    return (
        state.render(400, estimate_tokens),
        state.render(3_000, estimate_tokens),
        state.render(10**9, estimate_tokens),
        state.to_json(),
        state.repeated_failures(2),
    )


@pytest.fixture
def bounded(monkeypatch):
    monkeypatch.setattr(state_mod, "COMMANDS_HELD", HELD)
    monkeypatch.setattr(state_mod, "FAILURES_HELD", CLOSED_HELD)
    monkeypatch.setattr(ledger_mod, "APPLIED_HELD", 64)  # the ledger lets applied facts go: derived again from the log


def _unbounded(store, sid, until, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(state_mod, "COMMANDS_HELD", 10**9)
        m.setattr(state_mod, "FAILURES_HELD", 10**9)
        return _shown(canonical_state(store, sid, until, cache=KernelCache()))


def test_held_entries_stay_bounded_and_what_a_state_shows_stays_exact(tmp_path, bounded, monkeypatch):
    store = EventStore(tmp_path / "s.db")
    sid = session(store, fmt="claude-code")
    marks = _history(store, sid)
    cache = KernelCache()
    for until in marks:
        state = canonical_state(store, sid, until, cache=cache)
        red = cache.ledger(store, 0).reducers[sid]
        assert len(red.commands) <= HELD
        assert len(red.failures) <= 2 * CLOSED_HELD + len(red.active_failures)
        assert _shown(state) == _unbounded(store, sid, until, monkeypatch), until
    whole = state.render(10**9, estimate_tokens)
    assert "- `echo step3` ×3 → ok" in whole  # let go twice, its runs still counted
    assert "Working set: commands run (newest first):\n- `./lint.sh part2` → failed" in whole
    assert whole.count("\n- `") == 300 + 60 + 3 + len(state.to_json()["files"])  # every command, none omitted
    assert len(state.failures) == 63
    assert sum(1 for f in state.failures if f["active"]) == 3
    budgeted = state.render(3_000, estimate_tokens)
    omitted = budgeted.split("Working set: commands run (newest first) (", 1)[1].split(" older omitted)", 1)[0]
    assert int(omitted) == 363 - budgeted.split("commands run (newest first)", 1)[1].count("\n- `")
    store.close()


def test_a_frozen_state_shows_its_own_revision(tmp_path, bounded, monkeypatch):
    """A state taken before the reducer moved on keeps what it held (copied out, O(what is held)) and derives the
    rest as of its own seq."""
    store = EventStore(tmp_path / "s.db")
    sid = session(store, fmt="claude-code")
    marks = _history(store, sid)
    cache = KernelCache()
    early = canonical_state(store, sid, marks[2], cache=cache)
    canonical_state(store, sid, marks[-1], cache=cache)  # the reducer moves on: ``early`` is frozen
    assert early._core.red is None
    assert len(early._core._held["commands"]) <= HELD
    assert _shown(early) == _unbounded(store, sid, marks[2], monkeypatch)
    store.close()


def test_to_json_gives_copies_a_caller_may_change(tmp_path):
    """The command entries and closed streaks a frozen state shares with its session's reducer reach a caller of
    ``to_json`` as copies: changing them changes neither that state nor a later one."""
    store = EventStore(tmp_path / "s.db")
    sid = session(store, fmt="claude-code")
    turn(store, sid, "Bash", {"command": "make lint"}, "error: line too long", is_error=True)
    turn(store, sid, "Bash", {"command": "make lint"}, "ok")
    cache = KernelCache()
    early = canonical_state(store, sid, store.max_seq(), cache=cache)
    turn(store, sid, "Bash", {"command": "make test"}, "ok")
    canonical_state(store, sid, store.max_seq(), cache=cache)  # the reducer moves on: ``early`` is frozen
    assert early._core.red is None
    shown = (early.render(10**9, estimate_tokens), json.dumps(early.to_json()))
    data = early.to_json()
    data["commands"][0]["runs"] = 99
    data["failures"][0]["actions"].append("rm -rf /")
    data["failures"][0]["count"] = 99
    assert (early.render(10**9, estimate_tokens), json.dumps(early.to_json())) == shown
    assert "×2" in shown[0] and "×99" not in shown[0]
    turn(store, sid, "Bash", {"command": "make docs"}, "ok")
    later = canonical_state(store, sid, store.max_seq(), cache=cache).to_json()
    assert later["commands"][0] == json.loads(shown[1])["commands"][0]
    assert later["failures"] == json.loads(shown[1])["failures"]
    store.close()
