"""The group projection check every group fault test ends with."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from store_backends import raw_connection

from latch.agent.group import GROUP_PROJECTION, Group, GroupState
from latch.store import EventStore


def assert_projection_is_the_replay(path: str | Path, root: str) -> GroupState:
    """As the writers left it (read with plain sqlite3 or psycopg, before any open could rebuild it), the group
    projection's mark is the newest group event's seq (every append moved it in its own transaction), and
    ``Group.state()`` (the projection) equals ``GroupState.replay`` of the log. Returns that state."""
    kinds = GROUP_PROJECTION.kinds
    pg = str(path).startswith("postgresql")
    q = "%s" if pg else "?"  # psycopg's placeholder, sqlite3's
    with closing(raw_connection(str(path) if pg else path)) as db:
        mark = db.execute(
            f"SELECT last_seq FROM projection_marks WHERE name = {q}", (GROUP_PROJECTION.name,)
        ).fetchone()
        newest = db.execute(
            f"SELECT max(seq) FROM events WHERE kind IN ({','.join([q] * len(kinds))})", kinds
        ).fetchone()[0]
        tasks = db.execute(f"SELECT count(*) FROM group_tasks WHERE root_session_id = {q}", (root,)).fetchone()[0]
    assert mark is not None and mark[0] == newest, (mark, newest)
    with EventStore(path) as store:
        g = Group(store, root)
        projected, replayed = g.state(), GroupState.replay(g.events())
    assert projected == replayed and tasks == len(replayed.tasks)
    return projected
