"""The group projection (on SQLite and on PostgreSQL): a cache of the group events, moved in the transaction that
appends each one and rebuilt from the log at open or read when it is missing or behind; it always equals
the reference reducer ``GroupState.replay``."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from group_projection_support import assert_projection_is_the_replay
from store_backends import db_of, raw_connection

from latch.agent.group import GROUP_PROJECTION, Group
from latch.events import (
    AssistantMessage,
    GroupMemberJoined,
    GroupMessageDelivered,
    GroupMessageQueued,
    GroupTaskClaimed,
    GroupTaskCompleted,
    GroupTaskCreated,
    PendingEvent,
    ToolCall,
    ToolResult,
)
from latch.store import EventStore, migrations, projections


def _mark(store):
    with closing(raw_connection(store)) as db:
        row = db.execute("SELECT last_seq FROM projection_marks WHERE name = 'group'").fetchone()
    return None if row is None else row[0]


def _delete(store, *tables):
    """Empty ``tables`` under the store, without Latch."""
    with closing(raw_connection(store)) as db:
        for table in tables:
            db.execute(f"DELETE FROM {table}")
        db.commit()


def _operate(store: EventStore, root: str, member: str, other_root: str) -> list:
    """A sequence of every kind of group operation; the projection equals the replay after each one."""
    g, other = Group(store, root), Group(store, other_root)
    states = []

    def check():
        st = g.state()
        assert st == g.replayed_state()
        assert other.state() == other.replayed_state()
        states.append(st)

    steps = [
        lambda: g.create_task("a", "parse", brief="parse the input"),
        lambda: g.create_task("b", "test", depends_on=["a"]),
        lambda: g.create_task("c", "docs"),
        lambda: other.create_task("a", "same id, other group"),
        lambda: g.join("w1"),
        lambda: g.join("w2", "s2"),
        lambda: g.join("w1", "s1"),  # a later join fills in the session
        lambda: g.join("w1", "s9"),  # ... once
        lambda: g.claim_task("a", "w1", lease_seconds=10, now=100.0),
        lambda: g.claim_task("a", "w2"),  # lost: one owner
        lambda: g.renew_lease("a", "w1", now=105.0),
        lambda: g.renew_lease("a", "w2", now=106.0),  # not the owner: nothing
        lambda: g.reclaim_task("a", "w2", lease_seconds=10, now=200.0),  # the lease ran out
        lambda: g.complete_task("a", "w2", summary="parsed"),
        lambda: g.claim_task("b", "w1"),
        lambda: g.complete_task("b", "w1", status="failed", summary="red"),
        lambda: other.claim_task("a", "x"),
        [lambda i=i: g.send_message("lead", "w1" if i % 2 else "w2", f"note {i}") for i in range(6)],
        lambda: other.send_message("lead", "w1", "other group"),
        lambda: store.append(member, [AssistantMessage("", tool_calls=(ToolCall("c1", "shell", "{}"),))]),
        lambda: g.deliver("w1", member),  # a call is open: nothing
        lambda: store.append(member, [ToolResult("c1", "ok")]),
        lambda: g.deliver("w1", member),
        lambda: other.deliver("w1", member),
    ]
    check()
    for step in steps:
        for op in step if isinstance(step, list) else [step]:
            op()
            check()
    return states


@pytest.fixture
def groups(backend_store):
    store = backend_store
    root = store.create_session(workspace="/w", source="latch run", format="latch")
    other = store.create_session(workspace="/w", source="latch run", format="latch")
    member = store.create_session(workspace="/w", source="latch run", format="latch", parent_id=root)
    return store, root, member, other


def test_the_projection_equals_the_replay_after_each_operation_and_a_reopen(groups):
    store, root, member, other = groups
    states = _operate(store, root, member, other)
    last = states[-1]
    assert {k: (t.owner, t.status, t.attempt) for k, t in last.tasks.items()} == {
        "a": ("w2", "completed", 1),
        "b": ("w1", "failed", 0),
        "c": (None, None, 0),
    }
    assert last.members == {"w1": "s1", "w2": "s2"} and len(last.messages) == 6 and len(last.delivered) == 3
    assert Group(store, other).state().tasks["a"].owner == "x"
    seq = store.append(root, [PendingEvent(GroupMessageQueued("m9", "lead", "w2", "late"), "group-message:m9")])[0]
    assert _mark(store) == seq  # the append's own transaction moved it: no read in between
    last.messages["m9"] = GroupMessageQueued("m9", "lead", "w2", "late")
    db = db_of(store)
    store.close()
    assert assert_projection_is_the_replay(db, root) == last  # moved in each append's own transaction
    with EventStore(db) as again:
        assert Group(again, root).state() == last


def test_deleted_projection_rows_are_rebuilt_from_the_log_at_open_and_at_read(groups):
    store, root, member, other = groups
    last = _operate(store, root, member, other)[-1]
    _delete(store, "group_tasks", "group_members", "group_messages", "projection_marks")
    assert _mark(store) is None
    assert Group(store, root).state() == last  # at read: the missing mark rebuilds it
    _delete(store, "group_tasks", "projection_marks")
    db = db_of(store)
    store.close()
    with EventStore(db) as again:  # at open
        assert _mark(again) is not None
    assert assert_projection_is_the_replay(db, root) == last


def test_a_projection_behind_the_log_catches_up_at_read(groups, monkeypatch):
    store, root, member, other = groups
    g = Group(store, root)
    g.create_task("a", "parse")
    before = _mark(store)
    with monkeypatch.context() as m:  # a process that appends group events without the projection registered
        m.delitem(projections.PROJECTIONS, GROUP_PROJECTION.name)
        store.append(
            root,
            [
                PendingEvent(GroupTaskCreated("b", "test", "", ("a",)), "group-task:b"),
                PendingEvent(GroupTaskClaimed("a", "w1", 0, None, None), "group-claim:a"),
                PendingEvent(GroupMessageQueued("m1", "lead", "w1", "hi"), "group-message:m1"),
            ],
        )
    assert _mark(store) == before  # behind
    st = g.state()
    assert list(st.tasks) == ["a", "b"] and st.tasks["a"].owner == "w1" and len(st.messages) == 1
    assert st == g.replayed_state() and _mark(store) > before


# SQLite only: it opens a file with SQLite's migration list cut short (PostgreSQL's has its own, pg_migrations)
def test_a_store_written_by_main_before_the_projection_opens_and_rebuilds_it(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    with monkeypatch.context() as m:  # today's main: no m008 tables, no projection
        m.setattr(migrations, "MIGRATIONS", [x for x in migrations.MIGRATIONS if x[0] != "m008_group_projection"])
        m.setattr("latch.store.event_store.MIGRATIONS", migrations.MIGRATIONS)
        m.delitem(projections.PROJECTIONS, GROUP_PROJECTION.name)
        with EventStore(path) as old:
            root = old.create_session(workspace="/w", source="latch run", format="latch")
            member = old.create_session(workspace="/w", source="latch run", format="latch", parent_id=root)
            other = old.create_session(workspace="/w", source="latch run", format="latch")
            g = Group(old, root)
            old.append(
                root,
                [
                    PendingEvent(
                        GroupTaskCreated(f"t{i}", f"task {i}", "", (f"t{i - 1}",) if i else ()), f"group-task:t{i}"
                    )
                    for i in range(5)
                ],
            )
            old.append(
                root,
                [
                    GroupMemberJoined("w1", member),
                    PendingEvent(GroupTaskClaimed("t0", "w1", 0, None, None), "group-claim:t0"),
                    PendingEvent(GroupTaskCompleted("t0", "w1", "completed", "done", None), "group-complete:t0"),
                    PendingEvent(GroupMessageQueued("m1", "lead", "w1", "hi"), "group-message:m1"),
                ],
            )
            old.append(
                member,
                [
                    GroupMessageDelivered(
                        "[message from lead] hi", message_id="m1", sender="lead", recipient="w1", root_session_id=root
                    )
                ],
            )
            old.append(other, [GroupTaskCreated("z", "elsewhere")])
            expected = g.replayed_state()
            assert "m008_group_projection" not in old.applied_migrations()
        with closing(sqlite3.connect(str(path))) as db:
            assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'group_tasks'").fetchone()
    with EventStore(path) as new:
        assert new.applied_migrations()[-1] == "m008_group_projection"
    state = assert_projection_is_the_replay(path, root)  # rebuilt at open
    assert state == expected and state.tasks["t0"].status == "completed" and state.delivered == set(state.messages)


def test_an_unregistered_projection_is_a_one_line_key_error(groups):
    store = groups[0]
    with pytest.raises(KeyError, match="no projection 'nope' is registered"):
        store.read_projection("nope", [])


def test_the_store_built_projection_folds_exactly_the_group_kinds():
    """The projection is built into the store (no run-time registry): its kinds are the group's own
    (``GROUP_KINDS`` plus deliveries, which live in the recipients' sessions)."""
    from latch.agent.group import GROUP_KINDS
    from latch.events import GroupMessageDelivered
    from latch.store.projections import PROJECTIONS

    assert PROJECTIONS["group"] is GROUP_PROJECTION
    assert set(GROUP_PROJECTION.kinds) == {*GROUP_KINDS, GroupMessageDelivered.KIND}
