"""EventStore and its records: the durable L3 raw store (see :mod:`latch.store`)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from ..events import Event, MediaRef, PendingEvent, canonical_json, canonical_payload, decode_event, slot_constructor
from ..records import dataclass
from ._sqlite import (
    StoreBusyError,
    StoreError,
    _busy,
    _damaged,
    _now,
    _until_not_busy,
    non_folder_parent,
    write_transaction,
)
from .decoded import DecodedEvents
from .fts import build_match_query, build_phrase_query, match_phrases, prepare_text
from .fts_search import CandidateSearch, PayloadCheck
from .leases import Fence, FencedStore, RunFence, RunLease, TaskFence, check_fences, fences_of
from .migrations import MIGRATIONS, PROJECTED_KINDS_SQL, apply_fts_settings, fts_settings_behind
from .projections import PROJECTIONS, Projection
from .replays import ReplayScratch, replay_scratch_path


def data_dir() -> Path:
    """The Latch data folder: ``$LATCH_HOME`` or platformdirs' user data dir."""
    home = os.environ.get("LATCH_HOME")
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("latch", appauthor=False))


def default_db_path(workspace: str | os.PathLike[str] | None = None) -> Path:
    """The database of ``workspace`` (default: the current directory), one per workspace."""
    ws = Path(workspace or os.getcwd()).resolve()
    digest = hashlib.sha256(str(ws).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in (ws.name or "root"))[:40]
    return data_dir() / "workspaces" / f"{name}-{digest}.db"


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: global ``seq``, its session, the decoded record and provenance."""

    seq: int
    session_id: str
    kind: str
    event: Event
    source_ref: str | None
    ts: str | None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session row: ids, workspace, imported ``source`` path and ``format``, import identity (``external_key``),
    ``meta``, its event count and the store-wide ``seq`` of its first and last event (``None`` without events)."""

    id: str
    parent_id: str | None
    workspace: str | None
    source: str | None
    format: str | None
    external_key: str | None
    created_at: str
    meta: dict[str, Any]
    events: int = 0
    first_seq: int | None = None  # the store-wide seq of the session's first event (None: no event)
    last_seq: int | None = None

    @property
    def title(self) -> str | None:
        """The session's title from its harness (``meta["title"]``: Goose's session name, OpenCode's session
        title), raw transcript text (pass it through :func:`latch.textsafe.safe` to show it); ``None`` when
        the importer recorded none."""
        t = self.meta.get("title") if isinstance(self.meta, dict) else None
        return t if isinstance(t, str) and t.strip() else None


_READONLY = {
    getattr(sqlite3, n)
    for n in (
        "SQLITE_READONLY",
        "SQLITE_READONLY_DBMOVED",
        "SQLITE_READONLY_RECOVERY",
        "SQLITE_READONLY_CANTINIT",
        "SQLITE_READONLY_CANTLOCK",
        "SQLITE_READONLY_ROLLBACK",
        "SQLITE_READONLY_DIRECTORY",
    )
    if hasattr(sqlite3, n)
}


def read_only_reason(path: str | os.PathLike[str]) -> str | None:
    """Why this process cannot write the existing store file ``path``: ``"PATH is not writable"`` or ``"its
    folder FOLDER is not writable"`` (SQLite creates its ``-wal``/``-shm`` files there), else ``None`` (missing,
    ``:memory:``, or writable)."""
    p = Path(path)
    if str(p) == ":memory:" or not p.is_file():
        return None
    why = [] if os.access(p, os.W_OK) else [f"{p} is not writable"]
    folder = p.absolute().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        wal, shm = (p.with_name(p.name + s) for s in ("-wal", "-shm"))
        if not (wal.is_file() and shm.is_file() and os.access(wal, os.W_OK) and os.access(shm, os.W_OK)):
            why.append(f"{'its' if not why else 'nor is its'} folder {folder}" + ("" if why else " is not writable"))
    return ", ".join(why) or None


def _and(sql: str, args: list[Any], terms: Iterable[tuple[str, Any]]) -> str:
    """``sql`` with `` AND CLAUSE`` for each ``(CLAUSE, value)`` of ``terms`` whose value is not ``None`` (one
    ``?`` placeholder each), that value appended to ``args``."""
    for clause, value in terms:
        if value is not None:
            sql += f" AND {clause}"
            args.append(value)
    return sql


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """A batch of events encoded for the store, outside its write lock: per event ``(kind, canonical JSON payload,
    source_ref, ts, index entry of its searchable text or None)``; the entry is the store's (SQLite: the prepared
    FTS5 text, :func:`~latch.store.fts.prepare_text`)."""

    rows: list[tuple[str, str, str | None, str | None, Any]]


def encode_events(events: Iterable[PendingEvent | Event], index: Callable[[str], Any] = prepare_text) -> EncodedBatch:
    """Encode ``events`` as the store keeps them (canonical JSON, ``index`` of the searchable text). Raises
    ``ValueError`` or ``TypeError`` for an event that cannot be encoded (NaN, an object JSON cannot hold)."""
    rows = []
    for pe in events:
        if isinstance(pe, Event):
            ev, ref, ts = pe, None, None
        else:
            ev, ref, ts = pe.event, pe.source_ref, pe.ts
        text = ev.searchable_text()
        rows.append((ev.KIND, canonical_payload(ev), ref, ts, index(text) if text else None))
    return EncodedBatch(rows)


_stored_event = slot_constructor(StoredEvent)
"""StoredEvent's :func:`~latch.events.slot_constructor`: every row read is one."""


_FIRST_PAGE, _PAGE = 32, 1024
"""Rows :meth:`EventStore.events` decodes at once: the first page, then twice as many each time up to the last."""


def _decode_stored(r: Sequence[Any]) -> StoredEvent:
    return _stored_event(r[0], r[1], r[2], decode_event(r[2], r[3]), r[4], r[5])  # seq, session_id, kind, ..., ts


def _encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogate, e.g. no surrogate escape of an undecodable byte)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class EventStore:
    """The durable event log of one workspace.

    Thread safety: one connection per store object, guarded by a lock; open
    another ``EventStore`` on the same path for another process or thread.
    ``busy_timeout_ms`` is how long an operation waits for another process's lock
    before raising the "busy" :class:`StoreError`. ``template`` (``:memory:`` only): start from a copy of those
    bytes (:meth:`serialize` of a migrated in-memory store) instead of an empty database.

    Raises :class:`StoreError` when ``path`` cannot hold a Latch database (not a
    regular file, not a database, an unwritable folder or file system) or is busy.
    """

    def __new__(cls, path: str | os.PathLike[str] | None = None, *args: Any, **kwargs: Any) -> EventStore:
        """A ``postgresql://`` (or ``postgres://``) ``path`` opens :class:`~latch.store.postgres.PostgresEventStore`
        (the same interface on a server); anything else is an SQLite database file (or ``:memory:``)."""
        if (
            cls is EventStore
            and isinstance(path, str)
            and path.split("://", 1)[0].lower() in ("postgresql", "postgres")
        ):
            from .postgres import PostgresEventStore

            return super().__new__(PostgresEventStore)
        return super().__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        workspace: str | None = None,
        busy_timeout_ms: int = 10_000,
        read_only: bool = False,
        template: bytes | None = None,
    ):
        if path is None:
            path = default_db_path(workspace)
        self.path = Path(path) if str(path) != ":memory:" else Path(":memory:")
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._scratch: ReplayScratch | None = None
        self._candidates = CandidateSearch()
        self._busy_timeout_ms = busy_timeout_ms
        self.read_only = read_only and str(self.path) != ":memory:"
        if self.read_only:
            self._open_read_only()
            return
        try:
            if str(self.path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.exists() and not self.path.is_file():
                    raise StoreError(f"cannot open the Latch store at {self.path}: not a regular file")
            self._conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            if template is not None and str(self.path) == ":memory:":  # a copy: the migrations find nothing to do
                source = sqlite3.connect(":memory:")
                try:  # copied page by page into this plain in-memory database, not kept a second time beside it
                    source.deserialize(template)
                    source.backup(self._conn)
                finally:
                    source.close()
            self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            self._refuse_foreign()
            deadline = time.monotonic() + busy_timeout_ms / 1000
            _until_not_busy(lambda: self._db.execute("PRAGMA journal_mode=WAL"), deadline)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            _until_not_busy(self._migrate, deadline)
            for name in list(PROJECTIONS):  # a cache missing or behind the log is rebuilt at open
                try:
                    self.sync_projection(name)
                except StoreError:  # busy or read-only: a cache must not refuse the open; the next read retries
                    pass
        except (OSError, sqlite3.Error, StoreError) as exc:
            if self._conn is not None:
                self._conn.close()
            if isinstance(exc, StoreError):
                raise
            if isinstance(exc, sqlite3.Error) and _busy(exc):
                raise self._error(exc) from None
            if isinstance(exc, (FileExistsError, NotADirectoryError)):  # a file where a folder must be
                blocker = non_folder_parent(self.path) or exc.filename
                reason = f"{blocker} is not a folder"
            elif isinstance(exc, OSError):
                reason = (exc.strerror or str(exc)) + (f" ({exc.filename})" if exc.filename else "")
            else:
                reason = str(exc)
            unwritable = read_only_reason(self.path)
            if unwritable is not None:
                raise StoreError(
                    f"the store at {self.path} is read-only ({unwritable}); this command writes to "
                    "it: give it write access"
                ) from None
            raise StoreError(f"cannot open the Latch store at {self.path}: {reason}") from None

    def _open_read_only(self) -> None:
        """Open an existing store for reading only (SQLite URI ``mode=ro``, never ``immutable``): no journal mode
        change, no migration, no projection rebuild. :class:`StoreError` when it needs a migration, or when SQLite
        cannot read it so (a WAL store whose ``-shm`` index is missing and whose folder refuses to create it)."""
        uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?mode=ro"
        try:
            self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            self._refuse_foreign()
            has_table = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_latch_migrations'"
            ).fetchone()
            done = {r[0] for r in self._db.execute("SELECT name FROM _latch_migrations")} if has_table else set()
            pending = [name for name, _ in MIGRATIONS if name not in done]
            if pending:
                raise StoreError(
                    f"the store at {self.path} is read-only and needs a migration ({len(pending)} "
                    f"pending, first {pending[0]}): run `latch` once with write access to it (e.g. "
                    "`latch sessions`)"
                )
        except (sqlite3.Error, StoreError) as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if isinstance(exc, StoreError):
                raise
            if _busy(exc):
                raise StoreBusyError(
                    f"the store at {self.path} is busy (locked by another process); try again"
                ) from None
            why = read_only_reason(self.path) or "not writable"
            raise StoreError(
                f"the store at {self.path} is read-only ({why}), and SQLite cannot read a WAL store "
                f"without creating its {self.path.name}-shm index beside it ({exc}): give the folder "
                "write access, or copy the store and pass --db COPY"
            ) from None

    def _refuse_foreign(self) -> None:
        """Raise :class:`StoreError` when the file is an SQLite database of another program (it has tables and
        no ``_latch_migrations``): nothing is written to it, not even the journal mode."""
        tables = [
            r[0]
            for r in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        if tables and "_latch_migrations" not in tables:
            shown = ", ".join(tables[:5]) + (f", ... ({len(tables) - 5} more)" if len(tables) > 5 else "")
            raise StoreError(
                f"cannot open the Latch store at {self.path}: it is an SQLite database of another "
                f"program (tables: {shown}); Latch leaves it unchanged (to import it: latch import "
                f"{self.path})"
            )

    @property
    def _db(self) -> sqlite3.Connection:
        """The open connection (``StoreError`` if the store failed to open)."""
        if self._conn is None:
            raise StoreError(f"the Latch store at {self.path} is not open")
        return self._conn

    def _error(self, exc: BaseException) -> StoreError:
        """The :class:`StoreError` for a failed SQLite operation (busy, I/O, disk full, read-only)."""
        if _busy(exc):
            return StoreBusyError(f"the store at {self.path} is busy (locked by another process); try again")
        if isinstance(exc, sqlite3.Error) and (
            self.read_only or getattr(exc, "sqlite_errorcode", None) in _READONLY or "readonly database" in str(exc)
        ):
            why = read_only_reason(self.path) or "opened for reading only"
            return StoreError(f"the store at {self.path} is read-only ({why}); this needs write access to it")
        if _damaged(exc):
            return StoreError(f"the Latch store at {self.path} is damaged ({exc}); run `latch doctor`")
        return StoreError(f"the Latch store at {self.path} failed: {exc}")

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``) under the lock; any exception rolls
        it back, and SQLite operational errors (busy, I/O) become :class:`StoreError`, as does text holding
        undecodable bytes (:func:`~latch.store._sqlite.write_transaction`)."""
        return write_transaction(self._lock, lambda: self._db, self._error, undecodable=self._undecodable)

    def _undecodable(self, exc: UnicodeEncodeError) -> StoreError:
        """A surrogate escape (a file name that is not UTF-8) SQLite cannot store."""
        return StoreError(
            f"cannot store {ascii(exc.object[:200])} in the store at {self.path}: it holds "
            "undecodable bytes (a file name that is not UTF-8? rename the file)"
        )

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """``fetchall`` of one read under the lock; SQLite operational errors become :class:`StoreError`, and so
        does an argument holding undecodable bytes (surrogate escapes), which SQLite cannot bind."""
        with self._lock, self._read_errors():
            try:
                return self._db.execute(sql, args).fetchall()
            except UnicodeEncodeError as exc:
                raise StoreError(
                    f"cannot look up {ascii(exc.object[:200])} in the store at {self.path}: it holds undecodable bytes"
                ) from None

    @contextmanager
    def _read_errors(self) -> Iterator[None]:
        """Around a read: SQLite operational errors (busy, I/O) and damage become :class:`StoreError`; any other
        exception propagates unchanged."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) or _damaged(exc):
                raise self._error(exc) from None
            raise

    def quick_check(self) -> list[str]:
        """``PRAGMA quick_check`` of the database (pages, b-trees, FTS5 index): ``[]`` when intact, else
        SQLite's problem lines (at most 20), one per damaged spot. Never raises for damage."""
        with self._lock:
            try:
                rows = [r[0] for r in self._db.execute("PRAGMA quick_check(20)").fetchall()]
                if rows == ["ok"]:
                    self._db.execute("INSERT INTO events_fts(events_fts) VALUES ('integrity-check')")
                    return []
                return rows
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) and _busy(exc):
                    raise self._error(exc) from None
                return [str(exc)]

    # ------------------------------------------------------------------ schema
    def _migrate(self) -> None:
        """Apply the pending named migrations, each in its own write transaction. Another process may be
        migrating the same new file at the same moment: each migration is re-checked under the write lock,
        so it runs exactly once whoever gets there first."""
        db = self._db
        has_table = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_latch_migrations'")
        if not has_table.fetchone():  # a new file: the write lock only when there is something to write
            with self._write():
                db.execute(
                    "CREATE TABLE IF NOT EXISTS _latch_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
        done = {r[0] for r in db.execute("SELECT name FROM _latch_migrations")}
        for name, fn in MIGRATIONS:
            if name in done:
                continue
            with self._write():
                if db.execute("SELECT 1 FROM _latch_migrations WHERE name = ?", (name,)).fetchone():
                    continue  # another process applied it while we waited for the lock
                fn(db)
                db.execute("INSERT INTO _latch_migrations(name, applied_at) VALUES (?, ?)", (name, _now()))
        if fts_settings_behind(db):  # set at open, like journal_mode: a store made before gets them too
            with self._write():
                if fts_settings_behind(db):
                    apply_fts_settings(db)

    def serialize(self) -> bytes:
        """This database's bytes (SQLite ``serialize``): for an in-memory store just opened, a ``template`` that
        opens the next one (``EventStore(":memory:", template=...)``) without running the migrations again."""
        return self._db.serialize()

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM _latch_migrations ORDER BY rowid")]

    def close(self) -> None:
        with self._lock:
            if self._scratch is not None:
                self._scratch.close()
                self._scratch = None
            self._candidates.close()
            self._db.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- sessions
    @staticmethod
    def session_id_for(external_key: str) -> str:
        """Deterministic 12-hex-digit session id for an external key (import identity)."""
        return hashlib.sha256(external_key.encode("utf-8", "surrogatepass")).hexdigest()[:12]

    def _insert_session(
        self,
        *,
        session_id: str,
        external_key: str | None,
        source: str | None,
        format: str | None,
        workspace: str | None,
        parent_id: str | None,
        meta: dict[str, Any] | None,
    ) -> None:
        self._db.execute(
            "INSERT INTO sessions(id, parent_id, workspace, source, format, external_key, created_at, meta) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, parent_id, workspace, source, format, external_key, _now(), canonical_json(meta or {})),
        )

    def create_session(
        self,
        *,
        external_key: str | None = None,
        source: str | None = None,
        format: str | None = None,
        workspace: str | None = None,
        parent_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Create a session (or return the existing one with the same ``external_key``)."""
        with self._write() as db:
            if external_key is not None:
                row = db.execute("SELECT id FROM sessions WHERE external_key = ?", (external_key,)).fetchone()
                if row:
                    return str(row[0])
                sid = self.session_id_for(external_key)
            else:
                sid = uuid.uuid4().hex[:12]
            self._insert_session(
                session_id=sid,
                external_key=external_key,
                source=source,
                format=format,
                workspace=workspace,
                parent_id=parent_id,
                meta=meta,
            )
        return sid

    def _row_to_session(self, r: Sequence[Any]) -> SessionInfo:
        return SessionInfo(
            id=r[0],
            parent_id=r[1],
            workspace=r[2],
            source=r[3],
            format=r[4],
            external_key=r[5],
            created_at=r[6],
            meta=json.loads(r[7]),
            events=r[8] if len(r) > 8 else 0,
            first_seq=r[9] if len(r) > 9 else None,
            last_seq=r[10] if len(r) > 10 else None,
        )

    def sessions(self) -> list[SessionInfo]:
        """All sessions (tombstoned ones included; selectors filter them), oldest first."""
        rows = self._rows(
            "SELECT s.id, s.parent_id, s.workspace, s.source, s.format, s.external_key, s.created_at, s.meta, "
            "(SELECT count(*) FROM events e WHERE e.session_id = s.id), "
            "(SELECT min(seq) FROM events e WHERE e.session_id = s.id), "
            "(SELECT max(seq) FROM events e WHERE e.session_id = s.id) FROM sessions s ORDER BY s.rowid"
        )
        return [self._row_to_session(r) for r in rows]

    def session(self, session_id: str) -> SessionInfo:
        """One session by id or unique id prefix; ``KeyError`` when empty, none or ambiguous. An id holding
        undecodable bytes (a surrogate escape from the command line) names no session (``KeyError`` whose message
        shows it escaped, ``no session '\\udcff'``)."""
        if not session_id.strip():
            raise KeyError("empty session id")
        if not _encodable(session_id):  # stored ids are UTF-8 text: nothing can match, and SQLite cannot bind it
            raise KeyError(f"no session {session_id!r}")
        rows = self._rows(
            "SELECT s.id, s.parent_id, s.workspace, s.source, s.format, s.external_key, s.created_at, s.meta, "
            "(SELECT count(*) FROM events e WHERE e.session_id = s.id), "
            "(SELECT min(seq) FROM events e WHERE e.session_id = s.id), "
            "(SELECT max(seq) FROM events e WHERE e.session_id = s.id) FROM sessions s "
            "WHERE s.id = ? OR s.id LIKE ? ESCAPE '\\' ORDER BY s.id = ? DESC",
            (session_id, session_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%", session_id),
        )
        if not rows:
            raise KeyError(f"no session {session_id!r}")
        if rows[0][0] != session_id and len(rows) > 1:
            raise KeyError(f"session prefix {session_id!r} is ambiguous ({len(rows)} sessions)")
        return self._row_to_session(rows[0])

    def children(self, session_id: str) -> list[SessionInfo]:
        rows = self._rows(
            "SELECT id, parent_id, workspace, source, format, external_key, created_at, meta FROM sessions "
            "WHERE parent_id = ? ORDER BY rowid",
            (session_id,),
        )
        return [self._row_to_session(r) for r in rows]

    # ------------------------------------------------------------------ append
    def _append_locked(self, session_id: str, events: Iterable[PendingEvent | Event] | EncodedBatch) -> list[int]:
        """Inside a write transaction: insert a batch (encoded beforehand by :func:`encode_events`, or encoded
        here), its index rows and the projections it moves, with one statement per table. Returns the new seqs
        in batch order; an event whose ``(session, source_ref)`` is already stored, or repeated in the batch, is
        skipped."""
        batch = events if isinstance(events, EncodedBatch) else encode_events(events, self._index_entry)
        if not batch.rows:
            return []
        db = self._db
        # Every new row gets a seq above the newest (AUTOINCREMENT, and events are never deleted), and this
        # transaction is the only writer, so the rows above it are exactly this batch's inserted ones, in order.
        newest = db.execute("SELECT max(seq) FROM events").fetchone()[0] or 0
        inserted = db.executemany(
            "INSERT INTO events(session_id, kind, payload, source_ref, ts) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(session_id, source_ref) WHERE source_ref IS NOT NULL DO NOTHING",
            [(session_id, kind, payload, ref, ts) for kind, payload, ref, ts, _ in batch.rows],
        ).rowcount
        if inserted == len(batch.rows):  # none skipped: AUTOINCREMENT numbered them one after another
            last = db.execute("SELECT last_insert_rowid()").fetchone()[0]
            seqs = list(range(last - inserted + 1, last + 1))
            rows = batch.rows
        else:  # some were skipped: a skipped event has a source_ref that no later inserted row repeats
            stored = db.execute("SELECT seq, source_ref FROM events WHERE seq > ? ORDER BY seq", (newest,)).fetchall()
            seqs, rows, i = [], [], 0
            for row in batch.rows:
                if i < len(stored) and stored[i][1] == row[2]:
                    seqs.append(stored[i][0])
                    rows.append(row)
                    i += 1
        indexed = [(seq, row[4]) for seq, row in zip(seqs, rows, strict=True) if row[4]]
        if indexed:
            db.executemany("INSERT INTO events_fts(rowid, text) VALUES (?, ?)", indexed)
        kinds = {row[0] for row in rows}
        for p in list(PROJECTIONS.values()):  # the projection moves in the transaction that appends its kinds
            if kinds.intersection(p.kinds):
                self._sync_projection_locked(p)
        return seqs

    def _sequence(self, table: str) -> int:
        """The last number AUTOINCREMENT handed out for ``table`` (``events``: seq; ``kernel_records``: id); 0 when
        none. A skipped duplicate uses one up, so it can exceed the largest stored one."""
        rows = self._rows("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,))
        return int(rows[0][0]) if rows else 0

    def _set_sequence_locked(self, table: str, value: int) -> None:
        """Inside a write transaction: AUTOINCREMENT of ``table`` continues after ``value`` (never goes back)."""
        db = self._db
        now = db.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        if now is None:
            db.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (table, value))
        elif int(now[0]) < value:
            db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (value, table))

    def _index_locked(self, texts: Sequence[tuple[int, str]]) -> None:
        """Inside a write transaction: index the searchable ``texts`` ``(seq, text)`` of stored events."""
        rows = [(seq, prepare_text(text)) for seq, text in texts if text]
        if rows:
            self._db.executemany("INSERT INTO events_fts(rowid, text) VALUES (?, ?)", rows)

    # ------------------------------------------------------------- projections
    def _projection(self, name: str) -> Projection:
        try:
            return PROJECTIONS[name]
        except KeyError:
            raise KeyError(f"no projection {name!r} is registered") from None

    def _projection_behind(self, p: Projection) -> bool:
        """``True`` when ``p``'s mark is missing or older than the newest event of its kinds."""
        mark = self._db.execute("SELECT last_seq FROM projection_marks WHERE name = ?", (p.name,)).fetchone()
        if mark is None:
            return True
        # one seek per kind in the partial index, whose condition the query repeats so that SQLite uses it
        newest = self._db.execute(
            "SELECT max(s) FROM ("
            + " UNION ALL ".join(
                [f"SELECT max(seq) AS s FROM events WHERE {PROJECTED_KINDS_SQL} AND kind = ?"] * len(p.kinds)
            )
            + ") AS newest",
            p.kinds,
        ).fetchone()[0]
        return (newest or 0) > int(mark[0])

    def _sync_projection_locked(self, p: Projection) -> None:
        """Inside a write transaction: rebuild ``p`` from the log when its mark is missing, else apply the
        events of its kinds after the mark; then record the new mark."""
        db = self._db
        mark = db.execute("SELECT last_seq FROM projection_marks WHERE name = ?", (p.name,)).fetchone()
        if mark is None:
            for table in p.tables:
                db.execute(f"DELETE FROM {table}")  # noqa: S608 -- table names come from the registered projection
        last = 0 if mark is None else int(mark[0])
        cur = db.execute(
            f"SELECT seq, session_id, kind, payload, source_ref, ts FROM events WHERE seq > ? "
            f"AND kind IN ({','.join('?' * len(p.kinds))}) ORDER BY seq",
            (last, *p.kinds),
        )
        while True:
            batch = cur.fetchmany(2_000)
            if not batch:
                break
            for r in batch:
                p.apply(db, self._decode_row(r))
                last = int(r[0])
        db.execute(
            "INSERT INTO projection_marks(name, last_seq) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET last_seq = excluded.last_seq",
            (p.name, last),
        )

    def sync_projection(self, name: str) -> bool:
        """Bring the registered projection ``name`` up to date with the log (see :mod:`latch.store.projections`):
        rebuilt when its mark is missing, its tail applied when the mark is behind. Returns ``True`` when it
        wrote. ``KeyError`` for an unregistered name; :class:`StoreError` as for any write."""
        p = self._projection(name)
        with self._lock:
            with self._read_errors():
                if not self._projection_behind(p):
                    return False
            if self.read_only:
                raise StoreError(
                    f"the store at {self.path} is read-only and its {name} cache is behind its log: "
                    "run `latch` once with write access to it (e.g. `latch sessions`)"
                )
            with self._write():
                if self._projection_behind(p):  # another process may have caught it up meanwhile
                    self._sync_projection_locked(p)
            return True

    def read_projection(self, name: str, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        """:meth:`sync_projection` ``name``, then run each ``(sql, args)`` read of ``queries`` in one read
        transaction (one consistent snapshot); returns each query's rows. ``KeyError`` for an unregistered
        name; :class:`StoreError` as for any read."""
        self.sync_projection(name)
        with self._lock:
            db = self._db
            with self._read_errors():
                db.execute("BEGIN")
                try:
                    return [db.execute(sql, args).fetchall() for sql, args in queries]
                finally:
                    db.execute("COMMIT")

    def _check_fences_locked(self, fence: Fence | Sequence[Fence] | None) -> None:
        """Inside a write transaction: :class:`LeaseLost` unless every fence holds (a task fence reads the group
        projection, brought up to date first in this same transaction)."""
        fences = fences_of(fence)
        if not fences:
            return
        if any(isinstance(f, TaskFence) for f in fences):
            p = PROJECTIONS["group"]
            if self._projection_behind(p):
                self._sync_projection_locked(p)
        check_fences(self._db, fences)

    def fenced(self, fence: Fence | Sequence[Fence]) -> FencedStore:
        """This store with ``fence`` on every write (:class:`~latch.store.leases.FencedStore`)."""
        return FencedStore(self, fences_of(fence))

    # ---------------------------------------------------------------- run leases
    def run_lease(self, session_id: str) -> RunLease | None:
        """The run lease of ``session_id`` (:mod:`latch.store.leases`), or ``None`` when no run holds it."""
        rows = self._rows(
            "SELECT session_id, run_id, pid, host, process_start, acquired_at, renewed_at, lease_seconds "
            "FROM run_leases WHERE session_id = ?",
            (session_id,),
        )
        return RunLease(*rows[0]) if rows else None

    def acquire_run_lease(
        self,
        session_id: str,
        run_id: str,
        *,
        pid: int,
        host: str,
        process_start: int | None,
        lease_seconds: float,
        now: float,
        holder_live: Callable[[RunLease], bool],
    ) -> RunLease | None:
        """In one write transaction: make run ``run_id`` (process ``pid`` on ``host``) the holder of
        ``session_id``'s run lease for ``lease_seconds`` from ``now`` (Unix seconds), and return ``None``; or, when
        another run holds it, its lease has not expired at ``now`` and ``holder_live(lease)`` says its process is
        alive, return that lease and write nothing. An expired lease, or one whose holder is gone, is taken over.
        ``ValueError`` for a lease that is not positive; :class:`StoreError` as for any write."""
        if not lease_seconds > 0:
            raise ValueError(f"the run lease must be a positive number of seconds, got {lease_seconds!r}")
        with self._write() as db:
            row = db.execute(
                "SELECT session_id, run_id, pid, host, process_start, acquired_at, renewed_at, "
                "lease_seconds FROM run_leases WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is not None:
                held = RunLease(*row)
                if held.run_id != run_id and not held.expired(now) and holder_live(held):
                    return held
            db.execute(
                "INSERT INTO run_leases(session_id, run_id, pid, host, process_start, acquired_at, renewed_at, "
                "lease_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
                "run_id = excluded.run_id, pid = excluded.pid, host = excluded.host, "
                "process_start = excluded.process_start, acquired_at = excluded.acquired_at, "
                "renewed_at = excluded.renewed_at, lease_seconds = excluded.lease_seconds",
                (session_id, run_id, pid, host, process_start, now, now, float(lease_seconds)),
            )
        return None

    def renew_run_lease(self, session_id: str, run_id: str, *, now: float) -> bool:
        """Record that run ``run_id`` still holds ``session_id``'s run lease at ``now`` (Unix seconds); ``False``
        (nothing written) when another run took it over or it was released."""
        with self._write() as db:
            return (
                db.execute(
                    "UPDATE run_leases SET renewed_at = max(renewed_at, ?) WHERE session_id = ? AND run_id = ?",
                    (now, session_id, run_id),
                ).rowcount
                == 1
            )

    def release_run_lease(self, session_id: str, run_id: str, events: Iterable[PendingEvent | Event] = ()) -> list[int]:
        """In one write transaction: append ``events`` to ``session_id`` (e.g. the run's ``run_ended``) and release
        its run lease if run ``run_id`` still holds it (a lease taken over stays with its new holder, and then
        nothing is appended: :class:`LeaseLost`). Returns the new seqs."""
        with self._write() as db:
            held = db.execute("SELECT run_id FROM run_leases WHERE session_id = ?", (session_id,)).fetchone()
            if held is not None and held[0] != run_id:
                RunFence(session_id, run_id).check(db)
            seqs = self._append_locked(session_id, events)
            db.execute("DELETE FROM run_leases WHERE session_id = ? AND run_id = ?", (session_id, run_id))
        return seqs

    @staticmethod
    def _index_entry(text: str) -> Any:
        """What the index keeps of an event's searchable ``text``, made outside the write lock (the prepared FTS5
        text)."""
        return prepare_text(text)

    def _encode(self, events: Iterable[PendingEvent | Event]) -> EncodedBatch:
        """A batch as :meth:`_append_locked` takes it, encoded here, outside the write lock
        (:func:`encode_events` with :meth:`_index_entry`)."""
        return encode_events(events, self._index_entry)

    def append(
        self, session_id: str, events: Iterable[PendingEvent | Event], *, fence: Fence | Sequence[Fence] | None = None
    ) -> list[int]:
        """Append a batch in one transaction; return the new seqs (skipped duplicates excluded).

        Readers never see half a batch. Raises ``StoreError`` (store unchanged)
        when the session does not exist or an event cannot be encoded, and :class:`LeaseLost` (store
        unchanged) when a ``fence`` (:mod:`latch.store.leases`) does not hold inside this transaction.
        """
        try:
            batch = self._encode(events)  # the per-event Python work, before the write lock
            with self._write() as db:
                self._check_fences_locked(fence)
                if not db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                    raise StoreError(f"no session {session_id!r}")
                return self._append_locked(session_id, batch)
        except (ValueError, TypeError) as exc:
            raise StoreError(f"cannot append to session {session_id}: {exc}") from exc

    def import_session(
        self,
        *,
        external_key: str,
        source: str | None,
        format: str | None,
        workspace: str | None,
        events: Sequence[PendingEvent],
        meta: dict[str, Any] | None = None,
        parent_id: str | None = None,
        artifacts: Sequence[tuple[bytes, str, int | None, int | None]] = (),
        parent_key: str | None = None,
        fence: Fence | Sequence[Fence] | None = None,
    ) -> tuple[str, list[int]]:
        """Create-or-reuse the session for ``external_key`` and append ``events``, all in one transaction
        (refused with :class:`LeaseLost`, store unchanged, when a ``fence`` does not hold).

        Events whose ``source_ref`` is already stored are skipped, so importing
        the same file twice adds nothing. Returns ``(session_id, new_seqs)``.

        ``parent_key`` is the external key of the session that spawned this one (a sub-agent's parent),
        kept in the session's meta as ``parent_key``: the child links to the parent (``parent_id``) as soon
        as both are stored, whichever is imported first.
        """
        batch = self._encode(events)  # the per-event Python work, before the write lock
        with self._write():
            self._check_fences_locked(fence)
            return self._import_locked(
                external_key=external_key,
                source=source,
                format=format,
                workspace=workspace,
                events=batch,
                meta=meta,
                parent_id=parent_id,
                artifacts=artifacts,
                parent_key=parent_key,
            )

    def import_sessions(self, sessions: Sequence[dict[str, Any]]) -> list[tuple[str, list[int]]]:
        """:meth:`import_session` for several sessions (each a dict of its keyword arguments), all in ONE
        transaction: every session is stored, or (on any error) none. Returns ``[(session_id, new_seqs)]``
        in the order given. Raises what :meth:`import_session` raises; the store is then unchanged."""
        encoded = [{**kw, "events": self._encode(kw.get("events", ()))} for kw in sessions]  # before the lock
        with self._write():
            return [self._import_locked(**kw) for kw in encoded]

    def _import_locked(
        self,
        *,
        external_key: str,
        source: str | None,
        format: str | None,
        workspace: str | None,
        events: Sequence[PendingEvent | Event] | EncodedBatch,
        meta: dict[str, Any] | None = None,
        parent_id: str | None = None,
        artifacts: Sequence[tuple[bytes, str, int | None, int | None]] = (),
        parent_key: str | None = None,
    ) -> tuple[str, list[int]]:
        db = self._db
        if parent_key is not None:
            meta = {**(meta or {}), "parent_key": parent_key}
            if parent_id is None:
                got = db.execute("SELECT id FROM sessions WHERE external_key = ?", (parent_key,)).fetchone()
                parent_id = got[0] if got else None
        row = db.execute("SELECT id, parent_id FROM sessions WHERE external_key = ?", (external_key,)).fetchone()
        if row:
            sid = str(row[0])
            if row[1] is None and parent_id is not None:
                db.execute("UPDATE sessions SET parent_id = ? WHERE id = ?", (parent_id, sid))
        else:
            sid = self.session_id_for(external_key)
            self._insert_session(
                session_id=sid,
                external_key=external_key,
                source=source,
                format=format,
                workspace=workspace,
                parent_id=parent_id,
                meta=meta,
            )
        # children imported before their parent (meta.parent_key names this session) link to it now
        db.execute(
            "UPDATE sessions SET parent_id = ? WHERE parent_id IS NULL AND id != ? "
            "AND json_extract(meta, '$.parent_key') = ?",
            (sid, sid, external_key),
        )
        for data, media_type, w, h in artifacts:
            self._put_artifact_locked(data, media_type, w, h)
        return sid, self._append_locked(sid, events)

    def import_fingerprint(self, path: str, options: str) -> tuple[str, int, list[str]] | None:
        """``(sha256 hex, size in bytes, external keys of its sessions in file order)`` that
        :meth:`record_import_fingerprint` last recorded for transcript ``path`` imported with ``options`` (an
        opaque string), else ``None``."""
        rows = self._rows(
            "SELECT sha256, size, keys FROM import_fingerprints WHERE path = ? AND options = ?", (path, options)
        )
        if not rows:
            return None
        keys = json.loads(rows[0][2])
        return str(rows[0][0]), int(rows[0][1]), [str(k) for k in keys]

    def record_import_fingerprint(self, path: str, options: str, sha256: str, size: int, keys: Sequence[str]) -> None:
        """Record that transcript ``path`` (``size`` bytes, SHA-256 ``sha256``) imported with ``options`` holds
        the sessions of ``keys`` (their external keys, in file order), replacing what was recorded before. A
        cache beside the log (no event, no seq); raises :class:`StoreError` like every write."""
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO import_fingerprints(path, options, sha256, size, keys, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (path, options, sha256, int(size), json.dumps(list(keys)), _now()),
            )

    # ------------------------------------------------------------------- reads
    _decoded: DecodedEvents[StoredEvent] | None = None  # this object's newest decoded rows, made on first read

    def _decode_row(self, r: Sequence[Any]) -> StoredEvent:
        if self._db.in_transaction:  # a row read inside a write transaction may yet be rolled back: never kept
            return _decode_stored(r)
        cache = self._decoded
        if cache is None:
            cache = self._decoded = DecodedEvents()
        return cache.get(r, _decode_stored)

    def _decode_rows(self, rows: Sequence[Sequence[Any]]) -> list[StoredEvent]:
        """``[self._decode_row(r) for r in rows]``, in one call to the decoded rows kept (:meth:`DecodedEvents.get_all`)."""
        if self._db.in_transaction:
            return [_decode_stored(r) for r in rows]
        cache = self._decoded
        if cache is None:
            cache = self._decoded = DecodedEvents()
        return cache.get_all(rows, _decode_stored)

    def events(
        self,
        session_id: str | None = None,
        *,
        after_seq: int = 0,
        until_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[StoredEvent]:
        """Events in ``seq`` order: ``after_seq < seq <= until_seq``, optionally of ``kinds``. The stretch right
        after ``after_seq`` that this object holds decoded is not read again (:meth:`DecodedEvents.run`)."""
        kept = self._decoded.run(after_seq, until_seq) if self._decoded is not None else []
        if limit is None:  # the kept stretch handed out by the list's own iterator (no Python step per event)
            if session_id is None and not kinds:
                yield from kept
            else:
                yield from [
                    s
                    for s in kept
                    if (session_id is None or s.session_id == session_id) and (not kinds or s.kind in kinds)
                ]
        else:
            for s in kept:
                if limit <= 0:
                    return
                if (session_id is None or s.session_id == session_id) and (not kinds or s.kind in kinds):
                    yield s
                    limit -= 1
        if kept:
            after_seq = kept[-1].seq
            if limit is not None and limit <= 0 or until_seq is not None and after_seq >= until_seq:
                return
        args: list[Any] = [after_seq]
        sql = _and(
            "SELECT seq, session_id, kind, payload, source_ref, ts FROM events WHERE seq > ?",
            args,
            (("session_id = ?", session_id), ("seq <= ?", until_seq)),
        )
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args.extend(kinds)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        rows = self._rows(sql, args)
        start, step = 0, _FIRST_PAGE  # decoded a page at a time: a reader that stops early decodes few rows it leaves
        while start < len(rows):
            yield from self._decode_rows(rows[start : start + step])
            start += step
            step = min(2 * step, _PAGE)

    def get(self, seq: int) -> StoredEvent:
        if self._decoded is not None and (kept := self._decoded.kept(seq)) is not None:
            return kept
        rows = self._rows("SELECT seq, session_id, kind, payload, source_ref, ts FROM events WHERE seq = ?", (seq,))
        if not rows:
            raise KeyError(seq)
        return self._decode_row(rows[0])

    def count_events(self, session_id: str | None = None) -> int:
        if session_id is None:
            return int(self._rows("SELECT count(*) FROM events")[0][0])
        return int(self._rows("SELECT count(*) FROM events WHERE session_id = ?", (session_id,))[0][0])

    def empty_and_unshared(self) -> bool:
        """Whether this store holds no event and this connection is the only one to its database, so removing
        the file (a command that created it and then failed) cannot take another process's events with it (a
        concurrent ``latch import`` into the same new store). SQLite changes a WAL database's journal mode only
        for its sole connection: ``PRAGMA journal_mode=DELETE`` answers ``delete`` then, else it stays ``wal``;
        an exclusive transaction then counts the events. A process that opens the file in the instant between
        this check and the removal is not excluded. Any error answers ``False`` (the store stays)."""
        try:
            db = self._db
            if str(db.execute("PRAGMA journal_mode=DELETE").fetchone()[0]).lower() != "delete":
                return False
            db.execute("BEGIN EXCLUSIVE")
            empty = db.execute("SELECT count(*) FROM events").fetchone()[0] == 0
            db.execute("ROLLBACK")
            return bool(empty)
        except Exception:  # noqa: BLE001 - busy, damaged or closed: never remove what cannot be judged
            return False

    def max_seq(self, session_id: str | None = None) -> int:
        if session_id is None:
            return self._rows("SELECT max(seq) FROM events")[0][0] or 0
        return self._rows("SELECT max(seq) FROM events WHERE session_id = ?", (session_id,))[0][0] or 0

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        mode: str = "and",
        before_seq: int | None = None,
        until_seq: int | None = None,
        exclude_sessions: Iterable[str] = (),
    ) -> list[StoredEvent]:
        """Full-text search, newest first. Any string is a valid query; no token → ``[]``.

        ``before_seq`` restricts to ``seq < before_seq`` (the archival region);
        ``until_seq`` to ``seq <= until_seq``; ``exclude_sessions`` leaves those
        sessions' events out (e.g. tombstoned ones), before ``limit`` applies.
        """
        match = build_match_query(query, mode=mode)
        if match is None or limit <= 0:
            return []
        sql = (
            "SELECT e.seq, e.session_id, e.kind, e.payload, e.source_ref, e.ts FROM events_fts f "
            "JOIN events e ON e.seq = f.rowid WHERE events_fts MATCH ?"
        )
        sql, args = self._hit_filters(sql, [], session_id, exclude_sessions=exclude_sessions)
        key = (match, sql, tuple(args), until_seq)  # the search, apart from its bound
        sql = _and(sql, args, (("f.rowid < ?", before_seq), ("f.rowid <= ?", until_seq)))
        with self._lock:
            with self._read_errors():
                plan = self._candidates.plan(self._db, query, mode)
            if plan is None:
                return self._decode_rows(self._rows(sql + " ORDER BY f.rowid DESC LIMIT ?", [match, *args, limit]))

            def rowids(expr: str, below: int | None, above: int | None, n: int) -> list[int]:
                bounds = "".join(
                    (" AND f.rowid < ?" if below is not None else "", " AND f.rowid > ?" if above is not None else "")
                )
                keys = sql.replace("e.seq, e.session_id, e.kind, e.payload, e.source_ref, e.ts", "f.rowid", 1)
                return [
                    r[0]
                    for r in self._rows(
                        keys + bounds + " ORDER BY f.rowid DESC LIMIT ?",
                        [expr, *args, *(b for b in (below, above) if b is not None), n],
                    )
                ]

            read: dict[int, StoredEvent] = {}
            phrases = (mode, match_phrases(query))  # (their match expression is ``match``)
            payloads = PayloadCheck(*phrases)

            def check(expr: str, page: list[int]) -> set[int]:  # a chunk decided by its text: O(the chunk)
                # (archival rows: the newest decoded ones stay kept; rows whose payload cannot match: not decoded)
                got = self._events_by_seq(page, cache=False, where=payloads.may_match if expr == match else None)
                read.update(got)
                texts = [(s, e.event.searchable_text()) for s, e in got.items()]
                return self._candidates.verify(expr, texts, phrases if expr == match else None)

            start = self._candidates.resume(key, before_seq)  # the next page of a search: its kept matches
            hits = self._candidates.search(rowids, match, *plan, limit, start, check)
            if not self._db.in_transaction:  # (rows of an open transaction could still roll back)
                self._candidates.keep(key, hits, limit)
            found = self._events_by_seq([s for s in hits if s not in read])
            return [read.get(s) or found[s] for s in hits]

    def _events_by_seq(
        self, seqs: Sequence[int], *, cache: bool = True, where: Callable[[str, Any], bool] | None = None
    ) -> dict[int, StoredEvent]:
        """The stored events of ``seqs`` by seq (read in chunks of 500; ``cache``: through the decoded rows kept;
        ``where(kind, payload)``: only the rows it keeps, the others never decoded)."""
        out: dict[int, StoredEvent] = {}
        for i in range(0, len(seqs), 500):
            part = seqs[i : i + 500]
            rows = self._rows(
                "SELECT seq, session_id, kind, payload, source_ref, ts FROM events WHERE seq IN "
                f"({','.join('?' * len(part))})",
                part,
            )
            if where is not None:
                rows = [r for r in rows if where(r[2], r[3])]
            for s in self._decode_rows(rows) if cache else map(_decode_stored, rows):
                out[s.seq] = s
        return out

    def search_hits(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        order: str = "recent",
        kinds: Sequence[str] | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        exclude_sessions: Iterable[str] = (),
    ) -> list[tuple[StoredEvent, float]]:
        """Full-text search for people (``latch search``): ``[(event, rank)]``, at most ``limit``.

        Unlike :meth:`search` (the engine's exact recall, unchanged), a double-quoted span of ``query`` is one
        phrase (:func:`~latch.store.fts.build_phrase_query`). ``order="recent"``: newest first;
        ``"relevance"``: FTS5 ``bm25`` first (ties: newest first). ``rank`` is the bm25 score (lower is more
        relevant). Filters: ``kinds`` (event kinds), ``tool`` (an assistant message calling that tool, or the
        result of such a call), ``since``/``until`` (ISO 8601 instants; events without a timestamp are left out
        then), ``session_id``, ``exclude_sessions``. No token → ``[]``. ``ValueError`` for another ``order``."""
        if order not in ("recent", "relevance"):
            raise ValueError(f"order must be 'recent' or 'relevance', not {order!r}")
        match = build_phrase_query(query)
        if match is None or limit <= 0:
            return []
        sql = (
            "SELECT e.seq, e.session_id, e.kind, e.payload, e.source_ref, e.ts, bm25(events_fts) AS rank "
            "FROM events_fts f JOIN events e ON e.seq = f.rowid WHERE events_fts MATCH ?"
        )
        args: list[Any] = [match]
        sql, args = self._hit_filters(sql, args, session_id, kinds, tool, since, until, exclude_sessions)
        sql += " ORDER BY " + ("rank, f.rowid DESC" if order == "relevance" else "f.rowid DESC") + " LIMIT ?"
        args.append(limit)
        return [(self._decode_row(r), float(r[6])) for r in self._rows(sql, args)]

    def call_events(
        self,
        call_id: str,
        *,
        session_id: str | None = None,
        kinds: Sequence[str] | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        exclude_sessions: Iterable[str] = (),
    ) -> list[StoredEvent]:
        """The events of the tool call ``call_id`` (the assistant message that made it, its tool result), newest
        first, with :meth:`search_hits`' filters. A full scan of those two kinds: for a person's search only."""
        sql = (
            "SELECT e.seq, e.session_id, e.kind, e.payload, e.source_ref, e.ts FROM events e WHERE "
            "((e.kind = 'tool_result' AND json_extract(e.payload, '$.call_id') = ?) OR "
            "(e.kind = 'assistant_message' AND EXISTS (SELECT 1 FROM json_each(e.payload, '$.tool_calls') c "
            "WHERE json_extract(c.value, '$.id') = ?)))"
        )
        args: list[Any] = [call_id, call_id]
        sql, args = self._hit_filters(sql, args, session_id, kinds, tool, since, until, exclude_sessions)
        return self._decode_rows(self._rows(sql + " ORDER BY e.seq DESC", args))

    @staticmethod
    def _hit_filters(
        sql: str,
        args: list[Any],
        session_id: str | None,
        kinds: Sequence[str] | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        exclude_sessions: Iterable[str] = (),
    ) -> tuple[str, list[Any]]:
        """``sql`` (a query over ``events e`` ending in a ``WHERE`` clause) and its ``args`` with the filters of
        :meth:`search_hits` appended as ``AND`` terms (``None``/empty: no such filter)."""
        sql = _and(sql, args, (("e.session_id = ?", session_id),))
        if kinds:
            sql += f" AND e.kind IN ({','.join('?' * len(kinds))})"
            args.extend(kinds)
        if tool is not None:
            sql += (
                " AND ((e.kind = 'assistant_message' AND EXISTS (SELECT 1 FROM json_each(e.payload, "
                "'$.tool_calls') t WHERE json_extract(t.value, '$.name') = ?)) OR (e.kind = 'tool_result' AND "
                "(json_extract(e.payload, '$.name') = ? OR json_extract(e.payload, '$.call_id') IN (SELECT "
                "json_extract(c.value, '$.id') FROM events a, json_each(a.payload, '$.tool_calls') c WHERE "
                "a.kind = 'assistant_message' AND a.session_id = e.session_id AND "
                "json_extract(c.value, '$.name') = ?))))"
            )
            args.extend([tool, tool, tool])
        sql = _and(sql, args, (("julianday(e.ts) >= julianday(?)", since), ("julianday(e.ts) < julianday(?)", until)))
        excluded = sorted(set(exclude_sessions))
        if excluded:
            sql += f" AND e.session_id NOT IN ({','.join('?' * len(excluded))})"
            args.extend(excluded)
        return sql, args

    # --------------------------------------------------------------- artifacts
    def _put_artifact_locked(self, data: bytes, media_type: str, width: int | None, height: int | None) -> MediaRef:
        sha = hashlib.sha256(data).hexdigest()
        self._db.execute(
            "INSERT INTO artifacts(sha256, media_type, byte_size, width, height, data, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha256) DO NOTHING",
            (sha, media_type, len(data), width, height, sqlite3.Binary(data), _now()),
        )
        return MediaRef(sha256=sha, media_type=media_type, byte_size=len(data), width=width, height=height)

    def put_artifact(
        self, data: bytes, media_type: str, *, width: int | None = None, height: int | None = None
    ) -> MediaRef:
        """Store ``data`` content-addressed (SHA-256); storing the same bytes twice is a no-op."""
        with self._write():
            return self._put_artifact_locked(data, media_type, width, height)

    def get_artifact(self, sha256: str) -> tuple[MediaRef, bytes]:
        """The artifact's reference and exact bytes; ``KeyError`` when unknown."""
        rows = self._rows(
            "SELECT sha256, media_type, byte_size, width, height, data FROM artifacts WHERE sha256 = ?", (sha256,)
        )
        if not rows:
            raise KeyError(sha256)
        r = rows[0]
        return MediaRef(sha256=r[0], media_type=r[1], byte_size=r[2], width=r[3], height=r[4]), bytes(r[5])

    # ---------------------------------------------------------- kernel records
    def append_kernel_records(
        self,
        session_id: str,
        stream: str,
        records: Sequence[tuple[str, int, dict[str, Any]]],
        *,
        fence: Fence | Sequence[Fence] | None = None,
    ) -> list[int]:
        """Append engine-owned records ``(kind, at_seq, payload)`` to ``stream`` in one transaction
        (:class:`LeaseLost`, nothing written, when a ``fence`` does not hold)."""
        with self._write() as db:
            self._check_fences_locked(fence)
            ids = []
            for kind, at_seq, payload in records:
                cur = db.execute(
                    "INSERT INTO kernel_records(session_id, stream, kind, at_seq, payload) VALUES (?, ?, ?, ?, ?)",
                    (session_id, stream, kind, at_seq, canonical_json(payload)),
                )
                ids.append(int(cur.lastrowid or 0))
        return ids

    def kernel_records(
        self, session_id: str, stream: str, *, kinds: Sequence[str] | None = None, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]:
        """Records of ``stream`` as ``(id, kind, at_seq, payload)`` in append order."""
        sql = "SELECT id, kind, at_seq, payload FROM kernel_records WHERE session_id = ? AND stream = ? AND id > ?"
        args: list[Any] = [session_id, stream, after_id]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args.extend(kinds)
        sql += " ORDER BY id"
        return [(r[0], r[1], r[2], json.loads(r[3])) for r in self._rows(sql, args)]

    def kernel_streams(self, session_id: str, *, kind: str | None = None) -> list[str]:
        """The record streams of ``session_id`` that hold kernel records (of ``kind`` only, when given), oldest
        first (by their first record)."""
        sql = "SELECT stream, MIN(id) AS first FROM kernel_records WHERE session_id = ?"
        args: list[Any] = [session_id]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        return [r[0] for r in self._rows(sql + " GROUP BY stream ORDER BY first", args)]

    # ---------------------------------------------------------- replay scratch
    @property
    def replay_scratch_path(self) -> Path | None:
        """Where this store's replay runs are written (``<store>.replays.sqlite``); ``None`` in memory."""
        return replay_scratch_path(self.path)

    def replay_scratch(self) -> ReplayScratch:
        """The replay scratch database beside this store (see :mod:`latch.store.replays`), opened (and created)
        once; an in-memory store has an in-memory one. Raises :class:`StoreError` when it cannot be opened."""
        with self._lock:
            if self._scratch is None:
                where = self.replay_scratch_path
                self._scratch = ReplayScratch(
                    ":memory:" if where is None else where, busy_timeout_ms=self._busy_timeout_ms
                )
            return self._scratch

    def keep_replay(self, run_id: int) -> list[int]:
        """Promote finished replay run ``run_id`` from the scratch into this store's kernel records (its own
        stream, one transaction: all of it or nothing), then drop it from the scratch. Returns the new
        record ids. Raises :class:`StoreError` when the run is unknown or unfinished (a killed replay is
        never promoted); the store is then unchanged."""
        scratch = self.replay_scratch()
        try:
            run = scratch.run(run_id)
        except KeyError:
            raise StoreError(f"replay run {run_id} is not in {scratch.path}") from None
        if not run.finished:
            raise StoreError(f"replay run {run_id} ({run.stream}) did not finish; it is not kept")
        records = [(kind, at_seq, payload) for _, kind, at_seq, payload in scratch.records(run_id)]
        ids = self.append_kernel_records(run.session_id, run.stream, records)
        scratch.discard(run_id)
        return ids

    # ------------------------------------------------------------- token counts
    def token_counts(self, session_id: str, tokenizer: str) -> dict[tuple[int, str], int]:
        """Cached exact token counts of ``session_id`` for ``tokenizer``: ``{(seq, digest): tokens}``
        (``{}`` when none were recorded). ``digest`` names the rendering of event ``seq`` that was counted."""
        rows = self._rows(
            "SELECT seq, digest, tokens FROM token_counts WHERE session_id = ? AND tokenizer = ?",
            (session_id, tokenizer),
        )
        return {(int(r[0]), str(r[1])): int(r[2]) for r in rows}

    def put_token_counts(self, session_id: str, tokenizer: str, counts: Sequence[tuple[int, str, int]]) -> int:
        """Record exact counts ``(seq, digest, tokens)`` of ``session_id``'s events for ``tokenizer`` in one
        transaction; a ``(seq, digest)`` already recorded keeps its count. Returns the rows added.

        ``ValueError`` (one line, nothing written) on an empty ``tokenizer``, a non-integer or negative
        ``tokens``, an empty ``digest``, or a ``seq`` that is not an event of ``session_id``."""
        if not isinstance(tokenizer, str) or not tokenizer:
            raise ValueError(f"token counts need a tokenizer name, got {tokenizer!r}")
        rows = []
        for item in counts:
            seq, digest, tokens = item
            if isinstance(seq, bool) or not isinstance(seq, int) or seq <= 0:
                raise ValueError(f"token count for seq {seq!r}: seq must be a positive integer")
            if not isinstance(digest, str) or not digest:
                raise ValueError(f"token count for seq {seq}: digest must be a non-empty string")
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                raise ValueError(f"token count for seq {seq}: tokens must be a non-negative integer, got {tokens!r}")
            rows.append((session_id, tokenizer, seq, digest, tokens))
        if not rows:
            return 0
        with self._write() as db:
            seqs = sorted({r[2] for r in rows})
            known: set[int] = set()
            for i in range(0, len(seqs), 500):
                part = seqs[i : i + 500]
                known.update(
                    r[0]
                    for r in db.execute(
                        f"SELECT seq FROM events WHERE session_id = ? AND seq IN ({','.join('?' * len(part))})",
                        (session_id, *part),
                    )
                )
            missing = [s for s in seqs if s not in known]
            if missing:
                raise ValueError(f"token counts for seq {missing[0]}: not an event of session {session_id}")
            before = db.total_changes
            db.executemany(
                "INSERT OR IGNORE INTO token_counts(session_id, tokenizer, seq, digest, tokens) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            return db.total_changes - before

    def sqlite_version(self) -> str:
        return sqlite3.sqlite_version

    def has_fts5(self) -> bool:
        with self._lock:
            try:
                self._db.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH '\"x\"'").fetchone()
                return True
            except sqlite3.Error:
                return False
