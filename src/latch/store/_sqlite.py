"""SQLite helpers shared by the event store and the replay scratch database: the one-line errors
(:class:`StoreError`, :class:`StoreBusyError`), busy and damage detection, the busy back-off loop, the write
transaction."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["StoreError", "StoreBusyError", "StoreUnavailable", "non_folder_parent", "write_transaction"]


class StoreError(Exception):
    """A store operation failed; the store is unchanged. ``str()`` is one line naming the database."""


class StoreBusyError(StoreError):
    """Another process held the database's lock past the busy timeout (a :class:`StoreError`)."""


class StoreUnavailable(StoreError):
    """The store's server could not be reached or dropped the connection (a restart); nothing of the failed call
    was committed unless its transaction's COMMIT had been sent. The store reconnects on its next call (a
    :class:`StoreError`)."""


def _busy(exc: BaseException) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED (another connection holds the lock past the busy timeout)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc)


def _until_not_busy(op: Callable[[], object], deadline: float) -> None:
    """Run ``op``, retrying while SQLite reports busy, until ``deadline`` (``time.monotonic()`` seconds).

    SQLite's busy handler does not wait for every lock: switching a brand-new file to WAL, or a write
    transaction that would deadlock with another process's, returns SQLITE_BUSY at once. A short
    back-off loop makes two processes that create the same store at once both succeed.
    """
    delay = 0.005
    while True:
        try:
            op()
            return
        except (sqlite3.OperationalError, StoreError) as exc:
            busy = isinstance(exc, StoreBusyError) or isinstance(exc, sqlite3.OperationalError) and _busy(exc)
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _damaged(exc: BaseException) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB: a page of the file is not what SQLite wrote (``database disk image is
    malformed``, ``file is not a database``, a broken FTS5 table)."""
    if type(exc) is not sqlite3.DatabaseError:  # the bare class: not an IntegrityError, ProgrammingError...
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return code is None or code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_ERROR)


@contextmanager
def write_transaction(
    lock: AbstractContextManager[object],
    db: Callable[[], sqlite3.Connection],
    error: Callable[[BaseException], StoreError],
    *,
    begin_errors: type[sqlite3.Error] = sqlite3.OperationalError,
    undecodable: Callable[[UnicodeEncodeError], StoreError] | None = None,
) -> Iterator[sqlite3.Connection]:
    """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``) on ``db()`` under ``lock``; any exception rolls
    it back. ``error`` turns a failed SQLite operation into its :class:`StoreError`: a ``begin_errors`` raised by
    ``BEGIN``, and in the transaction an operational error (busy, I/O) or damage (:func:`_damaged`). With
    ``undecodable``, a :class:`UnicodeEncodeError` (a surrogate escape SQLite cannot bind) becomes its
    :class:`StoreError` too; any other exception propagates unchanged."""
    with lock:
        conn = db()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except begin_errors as exc:
            raise error(exc) from None
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) or _damaged(exc):
                raise error(exc) from None
            if undecodable is not None and isinstance(exc, UnicodeEncodeError):
                raise undecodable(exc) from None
            raise


def non_folder_parent(path: Path) -> Path | None:
    """The first of ``path``'s parents that exists but is not a folder (a file where a folder must be), else
    ``None``: why no database can ever be created at ``path``."""
    return next((q for q in path.parents if q.exists() and not q.is_dir()), None)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
