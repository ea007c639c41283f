"""The store, recall and invariant tiers on both backends: the ``store`` fixture of tests/store, tests/invariants and
the recall tests yields an empty store on SQLite (a file under ``tmp_path``) and, as a second case, on PostgreSQL (a
new schema of the session's one cluster, tests/pg_support.py), so the same events and the same recall hits are
checked on each. The PostgreSQL case is marked ``slow``: the fast tier stays on SQLite, CI runs both. Elsewhere (the
group tests) the same fixture is ``backend_store`` (tests/conftest.py).

``raw_connection(store)`` opens the database under a store without Latch (``sqlite3`` or psycopg), ``refused(store)``
is the exception its append-only triggers raise, ``db_of(store)`` is its ``--db`` (a path or a URL), ``reopen(store)``
a second store on the same database (a restart, another process), and ``sqlite_only(store)`` skips the PostgreSQL
case of a test that needs the SQLite file itself, with the reason.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from latch.store import EventStore

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)]


def open_store(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> EventStore:
    if backend == "sqlite":
        return EventStore(tmp_path / "latch.db")
    return EventStore(request.getfixturevalue("pg_url"))


@pytest.fixture(params=BACKENDS)
def backend_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    s = open_store(request, tmp_path, request.param)
    yield s
    s.close()


def sqlite_only(store: EventStore, why: str = "it reads the SQLite file itself") -> None:
    from latch.store.postgres import PostgresEventStore

    if isinstance(store, PostgresEventStore):
        pytest.skip(f"SQLite only: {why}")


def db_of(store: EventStore) -> str:
    """The ``--db`` of ``store``: its PostgreSQL URL, or its SQLite file's path."""
    dsn = getattr(store, "_dsn", None)
    return str(dsn) if dsn is not None else str(store.path)


def reopen(store: EventStore) -> EventStore:
    """A new store on the same database as ``store`` (its own connection), on either backend."""
    return EventStore(db_of(store))


def raw_connection(store: EventStore | str | Path) -> Any:
    """A plain connection to the database under ``store`` (a store, or an SQLite path), without Latch: ``sqlite3``
    for a file, psycopg (autocommit) for a PostgreSQL store. Its ``execute`` returns rows to iterate on both."""
    dsn = getattr(store, "_dsn", None) or (store if str(store).startswith("postgresql") else None)
    if dsn is not None:
        import psycopg

        return psycopg.connect(dsn, autocommit=True)
    return sqlite3.connect(str(getattr(store, "path", store)))


def refused(store: EventStore) -> type[BaseException]:
    """The exception the database itself raises when a trigger refuses a write to the append-only log."""
    if getattr(store, "_dsn", None) is not None:
        import psycopg

        return psycopg.errors.RaiseException
    return sqlite3.IntegrityError
