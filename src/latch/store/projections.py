"""Projections: caches derived from the event log, kept in the store's own tables.

A :class:`Projection` names the event kinds it folds, the tables it owns and an ``apply`` function that
updates those tables for one stored event, given the open write transaction's connection. The projections
are built into the store (:data:`PROJECTIONS`; today the agent group's, folding the group events of
:mod:`latch.events` by the same rules as ``latch.agent.group.GroupState.replay``), never registered at run
time, so every process that opens a store keeps them current: :class:`~latch.store.EventStore` applies each in the same transaction that appends any of its kinds,
and brings it up to date (``EventStore.sync_projection``) at store open and before each
``EventStore.read_projection``: when its mark in ``projection_marks`` is missing (a store written before the
projection existed, or its rows deleted) the tables are emptied and rebuilt from the log, and when the mark
is behind the newest event of its kinds (a release without the projection appended) the
missing tail is applied. The log stays the authority; the tables can always be dropped and rebuilt.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from ..events import (
    GroupMemberJoined,
    GroupMessageDelivered,
    GroupMessageQueued,
    GroupTaskClaimed,
    GroupTaskCompleted,
    GroupTaskCreated,
    GroupTaskLeaseRenewed,
)
from ..records import dataclass

__all__ = ["Projection", "PROJECTIONS"]


@dataclass(frozen=True)
class Projection:
    """``name`` (its key in ``projection_marks``), ``kinds`` (event kinds it folds), ``tables`` (emptied on
    a rebuild) and ``apply(db, stored_event)`` (updates the tables for one event, in log order, inside the
    store's write transaction; it must not commit or roll back)."""

    name: str
    kinds: tuple[str, ...]
    tables: tuple[str, ...]
    apply: Callable[[sqlite3.Connection, Any], None]


def _group_apply(db: sqlite3.Connection, stored: Any) -> None:
    """Fold one stored group event into the projection tables: the same rules as ``latch.agent.group.GroupState.replay``
    (its ``root_session_id`` is the event's session, or for a delivery the root it names)."""
    e, seq = stored.event, stored.seq
    root = stored.session_id
    if isinstance(e, GroupTaskCreated):
        db.execute(
            "INSERT OR IGNORE INTO group_tasks(root_session_id, task_id, pos, title, brief, depends_on) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (root, e.task_id, seq, e.title, e.brief, json.dumps(list(e.depends_on))),
        )
    elif isinstance(e, GroupTaskClaimed):
        db.execute(
            "UPDATE group_tasks SET owner = ?, attempt = ?, lease_seconds = ?, alive_at = ? "
            "WHERE root_session_id = ? AND task_id = ? AND status IS NULL AND "
            "((owner IS NULL AND ? = 0) OR (owner IS NOT NULL AND ? = attempt + 1))",
            (e.agent, e.attempt, e.lease_seconds, e.at, root, e.task_id, e.attempt, e.attempt),
        )
    elif isinstance(e, GroupTaskLeaseRenewed):
        db.execute(
            "UPDATE group_tasks SET alive_at = max(coalesce(alive_at, 0.0), ?) WHERE root_session_id = ? "
            "AND task_id = ? AND status IS NULL AND owner IS ? AND attempt = ?",
            (e.at, root, e.task_id, e.agent, e.attempt),
        )
    elif isinstance(e, GroupTaskCompleted):
        db.execute(
            "UPDATE group_tasks SET status = ?, summary = ?, session_id = ? WHERE root_session_id = ? "
            "AND task_id = ? AND status IS NULL AND owner IS ?",
            (e.status, e.summary, e.session_id, root, e.task_id, e.agent),
        )
    elif isinstance(e, GroupMemberJoined):
        db.execute(
            "INSERT INTO group_members(root_session_id, agent, pos, session_id) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(root_session_id, agent) DO UPDATE SET session_id = excluded.session_id "
            "WHERE group_members.session_id IS NULL",
            (root, e.agent, seq, e.session_id),
        )
    elif isinstance(e, GroupMessageQueued):
        db.execute(
            "INSERT OR IGNORE INTO group_messages(root_session_id, message_id, pos, sender, recipient, text) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (root, e.message_id, seq, e.sender, e.recipient, e.text),
        )
    elif isinstance(e, GroupMessageDelivered):
        db.execute(
            "UPDATE group_messages SET delivered = 1 WHERE root_session_id = ? AND message_id = ?",
            (e.root_session_id, e.message_id),
        )


PROJECTIONS: dict[str, Projection] = {
    "group": Projection(
        name="group",
        kinds=(
            GroupTaskCreated.KIND,
            GroupTaskClaimed.KIND,
            GroupTaskCompleted.KIND,
            GroupTaskLeaseRenewed.KIND,
            GroupMemberJoined.KIND,
            GroupMessageQueued.KIND,
            GroupMessageDelivered.KIND,
        ),
        tables=("group_tasks", "group_members", "group_messages"),
        apply=_group_apply,
    )
}
"""The projections every store keeps, by name (a constant: no run-time registry)."""
