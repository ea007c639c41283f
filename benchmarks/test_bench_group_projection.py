"""Group state read: the SQLite group projection (``Group.state``) vs the reference replay of the log
(``GroupState.replay(Group.events())``), for a group of 200 tasks and 1,000 messages.

The root session also holds 5,000 ordinary events and another group's 1,000 messages, which the replay
decodes or filters and the projection never reads. Run: ``python -m pytest
benchmarks/test_bench_group_projection.py --benchmark-only -s``; the replay-to-projection ratio is in
``extra_info["replay_to_projection"]`` (printed too; no timed assert).
"""

from __future__ import annotations

import statistics
import time

from latch.agent.group import Group
from latch.events import AssistantMessage, UserMessage
from latch.store import EventStore

TASKS, MESSAGES, NOISE = 200, 1_000, 5_000


def _median(fn, rounds: int = 7) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def test_projection_read_vs_replay(benchmark, tmp_path):
    store = EventStore(tmp_path / "latch.db")
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    other = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    members = {
        a: store.create_session(workspace=str(tmp_path), source="latch run", format="latch", parent_id=root)
        for a in ("w0", "w1", "w2", "w3")
    }
    store.append(
        root,
        [
            UserMessage(f"step {i}: look at src/m{i}.py") if i % 2 else AssistantMessage(f"done {i}")
            for i in range(NOISE)
        ],
    )
    g, h = Group(store, root), Group(store, other)
    for i in range(TASKS):
        g.create_task(f"t{i:03d}", f"task {i}", depends_on=[f"t{i - 50:03d}"] if i >= 50 and i % 5 == 0 else [])
    for a, sid in members.items():
        g.join(a, sid)
    for i in range(0, TASKS, 2):
        tid, agent = f"t{i:03d}", f"w{i % 4}"
        if g.state().tasks[tid] in g.state().ready() and g.claim_task(tid, agent) and i % 4 == 0:
            g.complete_task(tid, agent, summary="ok")
    for i in range(MESSAGES):
        g.send_message("lead", f"w{i % 4}", f"m{i}")
        h.send_message("lead", "x", f"other {i}")
    for a, sid in members.items():
        g.deliver(a, sid)
    assert g.state() == g.replayed_state()
    projection_s = _median(g.state)
    replay_s = _median(g.replayed_state)
    benchmark.pedantic(g.state, rounds=5, iterations=1)
    ratio = replay_s / projection_s
    benchmark.extra_info.update(
        projection_ms=round(projection_s * 1e3, 2),
        replay_ms=round(replay_s * 1e3, 2),
        replay_to_projection=round(ratio, 2),
        root_events=store.count_events(root),
    )
    print(
        f"\ngroup of {TASKS} tasks, {MESSAGES} messages ({store.count_events(root)} root events): projection "
        f"{projection_s * 1e3:.1f} ms, replay {replay_s * 1e3:.1f} ms ({ratio:.1f}x)"
    )
    store.close()
