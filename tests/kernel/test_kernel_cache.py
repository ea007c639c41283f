"""The canonical-state cache belongs to its store object, never to a database path.

On the old per-process cache keyed by path, a store deleted and recreated at the same path, whose
session has the same (deterministic) id and at least as many events, was served the old store's
derived facts: its goal and generation.
"""

from __future__ import annotations

import gc

from latch.events import UserMessage
from latch.kernel import canonical_state
from latch.kernel.events import Mutation, StateUpdate
from latch.store import EventStore


def _store(path, goal: str, mutations: int) -> tuple[EventStore, str]:
    store = EventStore(path)
    sid = store.create_session(external_key="same-key", workspace="/ws")
    events = [UserMessage(text="hello"), StateUpdate(tool="set_goal", arguments={"goal": goal})]
    events += [Mutation(paths=(f"f{i}.py",), tool="Write") for i in range(mutations)]
    store.append(sid, events)
    return store, sid


def test_a_store_recreated_at_the_same_path_never_sees_the_old_state(tmp_path):
    path = tmp_path / "latch.db"
    old, sid = _store(path, "the old goal", 1)
    before = canonical_state(old, sid)
    assert (before.goal, before.generation) == ("the old goal", 1)
    old.close()
    for p in tmp_path.iterdir():
        p.unlink()
    new, sid2 = _store(path, "the new goal", 3)
    assert sid2 == sid  # same external key, same session id, more events: the old cache looked valid
    after = canonical_state(new, sid)
    assert (after.goal, after.generation) == ("the new goal", 3)
    new.close()


def test_two_open_stores_at_one_path_each_derive_their_own_state(tmp_path):
    path = tmp_path / "latch.db"
    a, sid = _store(path, "goal A", 0)
    b = EventStore(path)  # the same file, a second handle
    assert canonical_state(a, sid).goal == "goal A"
    assert canonical_state(b, sid).goal == "goal A"
    b.append(sid, [StateUpdate(tool="set_goal", arguments={"goal": "goal B"})])
    assert canonical_state(b, sid).goal == "goal B"
    assert canonical_state(a, sid).goal == "goal B"  # a's cache extends from the shared log, never stale
    a.close()
    b.close()
    del a, b
    gc.collect()


def test_a_fresh_process_decodes_kernel_and_agent_events_without_importing_them(tmp_path):
    """``latch.events`` declares every kind: reading a store loads neither the kernel nor the agent."""
    import subprocess
    import sys

    path = tmp_path / "kinds.db"
    store, sid = _store(path, "decode me", 1)
    from latch.agent.steering import SteeringInbox

    SteeringInbox(store, sid).submit("steer")
    store.close()
    code = (
        "import sys\n"
        "from latch.store import EventStore\n"
        f"s = EventStore({str(path)!r})\n"
        "print([(e.kind, type(e.event).__name__) for e in s.events()])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('latch.kernel', 'latch.agent'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    kinds, loaded = out.splitlines()
    assert kinds == (
        "[('user_message', 'UserMessage'), ('state_update', 'StateUpdate'), ('mutation', 'Mutation'), "
        "('steering_queued', 'SteeringQueued')]"
    )
    assert loaded == "[]"
