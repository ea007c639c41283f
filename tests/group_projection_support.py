"""The group projection check every group fault test ends with."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from latch.agent.group import GROUP_PROJECTION, Group, GroupState
from latch.store import EventStore


def assert_projection_is_the_replay(path: str | Path, root: str) -> GroupState:
    """As the writers left it (read with plain sqlite3, before any open could rebuild it), the group
    projection's mark is the newest group event's seq (every append moved it in its own transaction), and
    ``Group.state()`` (the projection) equals ``GroupState.replay`` of the log. Returns that state."""
    kinds = GROUP_PROJECTION.kinds
    with closing(sqlite3.connect(str(path))) as db:
        mark = db.execute("SELECT last_seq FROM projection_marks WHERE name = ?", (GROUP_PROJECTION.name,)).fetchone()
        newest = db.execute(
            f"SELECT max(seq) FROM events WHERE kind IN ({','.join('?' * len(kinds))})", kinds
        ).fetchone()[0]
        tasks = db.execute("SELECT count(*) FROM group_tasks WHERE root_session_id = ?", (root,)).fetchone()[0]
    assert mark is not None and mark[0] == newest, (mark, newest)
    with EventStore(path) as store:
        g = Group(store, root)
        projected, replayed = g.state(), GroupState.replay(g.events())
    assert projected == replayed and tasks == len(replayed.tasks)
    return projected
