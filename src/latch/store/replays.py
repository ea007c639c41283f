"""The replay scratch database: kernel records of ``latch replay`` runs, kept out of the conversation log.

A replay materializes every request of a session and its engine writes kernel records (snapshots,
deltas, epochs, materializations: ~770 KB for the Codex corpus file). They go to a scratch SQLite
database beside the store, ``<store>.replays.sqlite`` (:func:`replay_scratch_path`), not to the
store's append-only ``kernel_records``: the store stays the same size however often a session is
replayed. :meth:`latch.store.EventStore.keep_replay` promotes one finished run into the store
(``latch replay --keep``); :meth:`ReplayScratch.prune` drops runs (``latch prune-replays``).

Each run has a row in ``runs``; every batch of records is one transaction; the run is marked finished
(``finished_at``) when the replay completes. A replay killed mid-run leaves an unfinished run: no
command promotes or lists it as a result (:meth:`ReplayScratch.runs` says ``finished=False``), and
:meth:`ReplayScratch.prune` drops it once its process is gone.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..events import canonical_json
from ..records import dataclass
from ._sqlite import StoreBusyError, StoreError, _busy, _damaged, _now, _until_not_busy, write_transaction

__all__ = ["ReplayScratch", "ReplayRun", "replay_scratch_path", "SCRATCH_SUFFIX"]

SCRATCH_SUFFIX = ".replays.sqlite"
SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of the scratch schema (a scratch only holds disposable runs: a future schema may
drop and recreate its tables)."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, "
    "stream TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT)",
    "CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, kind TEXT NOT NULL, at_seq INTEGER NOT NULL, "
    "payload TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS records_run ON records(run_id, id)",
)


def replay_scratch_path(store_path: str | os.PathLike[str]) -> Path | None:
    """The scratch database beside the store at ``store_path`` (``<store>.replays.sqlite``); ``None`` for
    ``":memory:"`` (an in-memory store has an in-memory scratch)."""
    if str(store_path) == ":memory:":
        return None
    return Path(str(store_path) + SCRATCH_SUFFIX)


def _files(path: Path) -> list[Path]:
    return [Path(str(path) + s) for s in ("", "-wal", "-shm")]


def scratch_bytes(path: Path | None) -> int:
    """Bytes on disk of the scratch database at ``path`` (the file, its WAL and shared-memory files); 0 when
    none exists or ``path`` is ``None``."""
    if path is None:
        return 0
    return sum(p.stat().st_size for p in _files(path) if p.is_file())


def _hostname() -> str:
    """This host's name, as ``socket.gethostname()`` gives it (the kernel's node name; the ``socket`` module, about
    2 ms to import, only where ``os.uname`` is missing)."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket

    return socket.gethostname()


def _alive(pid: int, host: str) -> bool:
    """Whether the process that started a run may still be writing it (another host's runs count as alive)."""
    if host != _hostname():
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@dataclass(frozen=True, slots=True)
class ReplayRun:
    """One replay run in the scratch: its ``id``, session, kernel-record ``stream``, the ``pid`` and ``host``
    that ran it, ISO times, ``records`` (count) and whether it ``finished`` (an unfinished run was killed or
    is still running)."""

    id: int
    session_id: str
    stream: str
    pid: int
    host: str
    started_at: str
    finished_at: str | None
    records: int

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


class ReplayScratch:
    """The scratch database at ``path`` (``":memory:"`` for an in-memory one), created on first open.

    Raises :class:`~latch.store.StoreError` (one line naming the file) when it cannot be opened, is
    damaged, or stays locked past ``busy_timeout_ms``. One connection, guarded by a lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 10_000):
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        try:
            self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            deadline = time.monotonic() + busy_timeout_ms / 1000
            _until_not_busy(lambda: self._db.execute("PRAGMA journal_mode=WAL"), deadline)
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")

            def schema() -> None:
                with self._write() as db:
                    version = db.execute("PRAGMA user_version").fetchone()[0]
                    if version > SCHEMA_VERSION:
                        raise StoreError(
                            f"the replay scratch database {self.path} was written by a newer Latch "
                            f"(schema {version}); run `latch prune-replays` with that version"
                        )
                    for sql in _SCHEMA:
                        db.execute(sql)
                    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

            _until_not_busy(schema, deadline)
        except (OSError, sqlite3.Error, StoreError) as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if isinstance(exc, StoreError):
                raise
            raise self._error(exc) from None

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the replay scratch database {self.path} is not open")
        return self._conn

    def _error(self, exc: BaseException) -> StoreError:
        if _busy(exc):
            return StoreBusyError(
                f"the replay scratch database {self.path} is busy (locked by another process); try again"
            )
        if _damaged(exc):
            return StoreError(f"the replay scratch database {self.path} is damaged ({exc}); run `latch prune-replays`")
        return StoreError(f"the replay scratch database {self.path} failed: {exc}")

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction under the lock; SQLite errors become :class:`StoreError`
        (:func:`~latch.store._sqlite.write_transaction`)."""
        return write_transaction(self._lock, lambda: self._db, self._error, begin_errors=sqlite3.Error)

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc) from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ------------------------------------------------------------------ runs
    def start(self, session_id: str, stream: str) -> int:
        """Start a run of ``stream`` for ``session_id``; return its id (unfinished until :meth:`finish`)."""
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO runs(session_id, stream, pid, host, started_at) VALUES (?, ?, ?, ?, ?)",
                (session_id, stream, os.getpid(), _hostname(), _now()),
            )
            return int(cur.lastrowid or 0)

    def _require(self, db: sqlite3.Connection, run_id: int) -> None:
        if not db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
            raise StoreError(f"replay run {run_id} is not in {self.path} (pruned by `latch prune-replays`?)")

    def append(self, run_id: int, records: Sequence[tuple[str, int, Any]]) -> list[int]:
        """Append ``(kind, at_seq, payload)`` records to run ``run_id`` in one transaction; their ids
        (scratch-local, increasing). Raises :class:`StoreError` when the run is unknown (pruned)."""
        with self._write() as db:
            self._require(db, run_id)
            ids = []
            for kind, at_seq, payload in records:
                cur = db.execute(
                    "INSERT INTO records(run_id, kind, at_seq, payload) VALUES (?, ?, ?, ?)",
                    (run_id, kind, at_seq, canonical_json(dict(payload))),
                )
                ids.append(int(cur.lastrowid or 0))
        return ids

    def records(
        self, run_id: int, *, kinds: Sequence[str] | None = None, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]:
        """Records of run ``run_id`` as ``(id, kind, at_seq, payload)`` with ``id > after_id``, in append order."""
        sql = "SELECT id, kind, at_seq, payload FROM records WHERE run_id = ? AND id > ?"
        args: list[Any] = [run_id, after_id]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args.extend(kinds)
        return [(r[0], r[1], r[2], json.loads(r[3])) for r in self._rows(sql + " ORDER BY id", args)]

    def finish(self, run_id: int) -> None:
        """Mark run ``run_id`` finished (every record written). Raises :class:`StoreError` when unknown."""
        with self._write() as db:
            self._require(db, run_id)
            db.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (_now(), run_id))

    def run(self, run_id: int) -> ReplayRun:
        """Run ``run_id``; ``KeyError`` when unknown."""
        found = [r for r in self.runs() if r.id == run_id]
        if not found:
            raise KeyError(run_id)
        return found[0]

    def runs(self) -> list[ReplayRun]:
        """Every run in the scratch, oldest first (unfinished ones included: ``finished`` says which)."""
        rows = self._rows(
            "SELECT r.id, r.session_id, r.stream, r.pid, r.host, r.started_at, r.finished_at, "
            "(SELECT count(*) FROM records x WHERE x.run_id = r.id) FROM runs r ORDER BY r.id"
        )
        return [ReplayRun(*r) for r in rows]

    def discard(self, run_id: int) -> None:
        """Delete run ``run_id`` and its records (nothing when unknown)."""
        with self._write() as db:
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    def prune(self) -> tuple[list[ReplayRun], list[ReplayRun]]:
        """Drop every run whose process is gone (finished runs and killed ones), then compact the file.

        Returns ``(dropped, kept)``: a run still being written by a live process (same host) is kept.
        """
        with self._write() as db:
            runs = self.runs()
            dropped = [r for r in runs if r.finished or not _alive(r.pid, r.host)]
            kept = [r for r in runs if r not in dropped]
            for r in dropped:
                db.execute("DELETE FROM runs WHERE id = ?", (r.id,))
        with self._lock:
            try:
                self._db.execute("VACUUM")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise self._error(exc) from None
        return dropped, kept
