"""A view's canonical-state cost against the history, when the host keeps the previous view's state (so before
the reducer changes it copies out what it holds: a frozen state).

Sessions of 2,000 and 20,000 distinct shell commands, a failure streak every fifth command closed by its next
run. Each view appends one tool turn, takes the state, renders it within the engine's default state budget
(8,000 tokens) and keeps it as the previous state. Per view p50, in one run:

* ``ratio_to_small``: 20,000 over 2,000 commands as a reducer holds them now (the newest
  :data:`~latch.kernel.state.COMMANDS_HELD` commands and :data:`~latch.kernel.state.FAILURES_HELD` closed streaks;
  goal: about 1, flat);
* ``unbounded_ratio_to_small``: the same with nothing let go (both limits lifted: every command and streak held and
  copied per view, as before);
* ``held_commands`` / ``held_failures``: what the reducer holds at 20,000.

Run: ``python -m pytest benchmarks/test_bench_state_bounded.py --benchmark-only``.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time

from latch.events import AssistantMessage, ToolCall, ToolResult
from latch.hotpaths import estimate_tokens
from latch.kernel import canonical_state
from latch.kernel import state as state_mod
from latch.kernel.ledger import KernelCache
from latch.store import EventStore

SMALL, LARGE = 2_000, 20_000
VIEWS = 30
_ids = itertools.count()


def _turn(i: int) -> list:
    cid = f"b{next(_ids)}"
    failed = i % 5 == 0
    call = ToolCall(cid, "Bash", json.dumps({"command": f"./run.sh job{i}" if not failed else f"./deploy.sh s{i}"}))
    result = ToolResult(cid, f"deploy failed: host {i} unreachable" if failed else "done", is_error=failed)
    closing = []
    if failed:  # the same command again succeeds: the streak closes
        cid2 = f"b{next(_ids)}"
        closing = [
            AssistantMessage(tool_calls=(ToolCall(cid2, "Bash", json.dumps({"command": f"./deploy.sh s{i}"})),)),
            ToolResult(cid2, "deployed"),
        ]
    return [AssistantMessage(tool_calls=(call,)), result, *closing]


def _per_view(tmp_path, n: int, monkeypatch, unbounded: bool) -> tuple[float, int, int]:
    """p50 seconds of one view after ``n`` commands, and the commands and streaks the reducer holds."""
    with monkeypatch.context() as m:
        if unbounded:
            m.setattr(state_mod, "COMMANDS_HELD", 10**9, raising=False)
            m.setattr(state_mod, "FAILURES_HELD", 10**9, raising=False)
        store = EventStore(tmp_path / f"s{n}{unbounded}.db")
        sid = store.create_session(workspace="/ws", format="claude-code")
        store.append(sid, [ev for i in range(n) for ev in _turn(i)])
        cache = KernelCache()
        previous = canonical_state(store, sid, cache=cache)
        previous.render(8_000, estimate_tokens)
        times = []
        for i in range(n, n + VIEWS):
            store.append(sid, _turn(i))
            t = time.perf_counter()
            state = canonical_state(store, sid, cache=cache)  # freezes ``previous``: it is still referenced
            state.render(8_000, estimate_tokens)
            times.append(time.perf_counter() - t)
            previous = state
        red = cache.ledger(store, 0).reducers[sid]
        held = len(red.commands), len(red.failures)
        assert previous.render(8_000, estimate_tokens).startswith("Canonical state")
        store.close()
    return statistics.median(times), *held


def test_state_per_view_with_the_previous_state_kept(benchmark, tmp_path, monkeypatch):
    bounded = {n: _per_view(tmp_path, n, monkeypatch, unbounded=False) for n in (SMALL, LARGE)}
    unbounded = {n: _per_view(tmp_path, n, monkeypatch, unbounded=True) for n in (SMALL, LARGE)}
    benchmark.extra_info.update(
        ratio_to_small=round(bounded[LARGE][0] / bounded[SMALL][0], 3),
        unbounded_ratio_to_small=round(unbounded[LARGE][0] / unbounded[SMALL][0], 3),
        p50_ms={
            "held": {n: round(1000 * bounded[n][0], 3) for n in (SMALL, LARGE)},
            "unbounded": {n: round(1000 * unbounded[n][0], 3) for n in (SMALL, LARGE)},
        },
        held_commands=bounded[LARGE][1],
        held_failures=bounded[LARGE][2],
    )
    assert bounded[LARGE][1] <= state_mod.COMMANDS_HELD
    assert bounded[LARGE][2] <= 2 * state_mod.FAILURES_HELD

    store = EventStore(tmp_path / "timed.db")
    sid = store.create_session(workspace="/ws", format="claude-code")
    store.append(sid, [ev for i in range(LARGE) for ev in _turn(i)])
    cache = KernelCache()
    step = itertools.count(LARGE)
    kept = [canonical_state(store, sid, cache=cache)]

    def setup():
        store.append(sid, _turn(next(step)))
        return (), {}

    def view():
        kept[0] = canonical_state(store, sid, cache=cache)
        return kept[0].render(8_000, estimate_tokens)

    assert benchmark.pedantic(view, setup=setup, rounds=VIEWS, iterations=1).startswith("Canonical state")
    store.close()
