"""Session tombstones: deleting history without deleting anything (spec: "Sessions & continuity").

:func:`forget_session` appends a :class:`~latch.kernel.events.Tombstone` to the
session's own log. Normal history and resume selectors (``latch sessions``)
omit tombstoned roots and their descendants via :func:`tombstoned_sessions`;
raw events, child sessions and artifacts remain available internally, mutation
evidence and the workspace generation are untouched, and no disk space is reclaimed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .events import Tombstone

if TYPE_CHECKING:
    from ..store import EventLog, EventStore

__all__ = ["forget_session", "tombstoned_sessions", "forgotten_message"]


def tombstoned_sessions(store: EventLog) -> set[str]:
    """Ids of tombstoned sessions and of all their descendants."""
    dead = {ev.session_id for ev in store.events(kinds=[Tombstone.KIND])}
    todo = list(dead)
    while todo:
        for child in store.children(todo.pop()):
            if child.id not in dead:
                dead.add(child.id)
                todo.append(child.id)
    return dead


def forgotten_message(session_id: str) -> str:
    """The one line a history selector (``latch web``, ``latch tui``) gives for a forgotten session."""
    return f"session {session_id} is forgotten (tombstoned by `latch forget`); its history is not shown"


def forget_session(store: EventStore, session_id: str, reason: str = "") -> tuple[str, int | None]:
    """Tombstone ``session_id`` (id or unique prefix); returns ``(session_id, seq or None if it already was)``.

    Raises ``KeyError`` for an unknown session.
    """
    sid = store.session(session_id).id
    if any(True for _ in store.events(sid, kinds=[Tombstone.KIND], limit=1)):
        return sid, None
    (seq,) = store.append(sid, [Tombstone(reason=reason)])
    return sid, seq
