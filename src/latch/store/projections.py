"""Projections: caches derived from the event log, kept in the store's own tables (issue 14 item 3).

A :class:`Projection` names the event kinds it folds, the tables it owns and an ``apply`` function that
updates those tables for one stored event, given the open write transaction's connection. A layer above
the store (the agent's group module) registers one with :func:`register_projection`; from then on, in that
process, :class:`~latch.store.EventStore` applies it in the same transaction that appends any of its kinds,
and brings it up to date (``EventStore.sync_projection``) at store open and before each
``EventStore.read_projection``: when its mark in ``projection_marks`` is missing (a store written before the
projection existed, or its rows deleted) the tables are emptied and rebuilt from the log, and when the mark
is behind the newest event of its kinds (another process appended without the projection registered) the
missing tail is applied. The log stays the authority; the tables can always be dropped and rebuilt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Projection", "PROJECTIONS", "register_projection"]


@dataclass(frozen=True)
class Projection:
    """``name`` (its key in ``projection_marks``), ``kinds`` (event kinds it folds), ``tables`` (emptied on
    a rebuild) and ``apply(db, stored_event)`` (updates the tables for one event, in log order, inside the
    store's write transaction; it must not commit or roll back)."""

    name: str
    kinds: tuple[str, ...]
    tables: tuple[str, ...]
    apply: Callable[[sqlite3.Connection, Any], None]


PROJECTIONS: dict[str, Projection] = {}
"""The projections registered in this process, by name."""


def register_projection(projection: Projection) -> Projection:
    """Register ``projection`` (again under the same name: replaced); returns it."""
    PROJECTIONS[projection.name] = projection
    return projection
