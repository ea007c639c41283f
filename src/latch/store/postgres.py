"""The event store on PostgreSQL: :class:`PostgresEventStore`, the same :class:`~latch.store.EventStore` interface
on a server, through psycopg 3 (the ``postgres`` extra).

``EventStore("postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?…]")`` (``--db``/``LATCH_DB``; ``postgres://`` too)
opens one. What it keeps from the SQLite store:

* the schema and its named migrations, in the same order (:mod:`latch.store.pg_migrations`); they run once
  however many processes open a new database at once (a session advisory lock around the migration run);
* append-only ``events`` and ``kernel_records`` (triggers refuse UPDATE, DELETE and TRUNCATE);
* one transaction per append batch, with its index rows and projection updates;
* ``seq`` order: every write transaction first takes one transaction advisory lock (what ``BEGIN IMMEDIATE``
  is in SQLite) and numbers its events from ``latch_sequence`` (SQLite's ``sqlite_sequence``), so seqs commit
  in order (a reader that has seen ``seq`` N never later finds a new event below N) and are the numbers
  SQLite's AUTOINCREMENT gives for the same appends (a duplicate skipped on re-import uses one up there too);
* exact recall (:meth:`search`): the same hits in the same order. PostgreSQL narrows the rows (a GIN index
  over each event's token keys, :func:`latch.store.fts.index_keys`, a superset filter); FTS5 itself, in memory
  with the index's tokenizer, decides each candidate (:meth:`latch.store.fts_search.CandidateSearch.verify`),
  newest first, until ``limit`` hits.

People search (:meth:`search_hits`, ``latch search``) gives SQLite's hits in SQLite's order with the same
``bm25`` ranks, every filter included (:mod:`latch.store.pg_ranking`). ``read_only=True`` opens as SQLite's
read-only mode does (no migration, no cache rebuild; the session is ``default_transaction_read_only``, so a role
that may only ``SELECT`` can read). A write transaction whose connection is lost (the backend terminated, the
server killed or restarted) is rolled back by the server, whole; the store raises :class:`StoreError` (one line)
and reconnects at its next call.

The connection string's password is never stored or printed: :attr:`url` is the redacted string
(:func:`redact`) and every error names it. The replay scratch database stays a local SQLite file under the data
folder (``replays/pg-<digest>.replays.sqlite``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..events import Event, PendingEvent, canonical_json, decode_event
from ..lazyre import lazy_compile
from ._sqlite import StoreBusyError, StoreError, StoreUnavailable, _now
from .event_store import EncodedBatch, EventStore, StoredEvent, _and, encode_events
from .fts import (
    build_match_query,
    match_phrases,
    phrase_query_phrases,
    prepare_text,
    prepared_keys,
    token_key,
)
from .fts_search import CandidateSearch
from .leases import Fence
from .pg_migrations import PG_MIGRATIONS
from .pg_ranking import TOKENS, Bm25, JulianDay, phrase_tokens
from .pg_url import is_postgres_url, local_anchor, redact
from .projections import PROJECTIONS
from .replays import ReplayScratch
from .wakeups import GROUP_CHANNEL, TASK_WAKE_KINDS, ListenWakeups

__all__ = ["PostgresEventStore", "is_postgres_url", "redact", "local_anchor", "WRITE_LOCK", "MIGRATE_LOCK"]

WRITE_LOCK = 0x4C61746368_01
"""The transaction advisory lock every write takes first (one writer at a time, as SQLite's write lock)."""
MIGRATE_LOCK = 0x4C61746368_02
"""The session advisory lock held while migrations run."""
PAGE = 256
"""Candidate rows recall verifies per step at most (the first step reads about twice ``limit``)."""


_GREATEST = lazy_compile(r"\bmax\((coalesce\([^()]*\)|\w+), ")
_JSON_FIELD = lazy_compile(r"json_extract\((\w+(?:\.\w+)?), '\$\.(\w+)'\)")
_IGNORE = lazy_compile(r"^\s*INSERT OR IGNORE INTO", re.I)


@lru_cache(maxsize=512)
def translate(sql: str, params: bool) -> str:
    """The PostgreSQL text of one of the store's SQLite statements: ``?`` placeholders (when ``params``), ``IS ?``,
    two-argument ``max``, ``INSERT OR IGNORE``, ``json_extract(col, '$.key')``."""
    if _IGNORE.match(sql):
        sql = _IGNORE.sub("INSERT INTO", sql) + " ON CONFLICT DO NOTHING"
    sql = _GREATEST.sub(r"GREATEST(\1, ", sql)
    sql = _JSON_FIELD.sub(r"(\1::jsonb ->> '\2')", sql)
    sql = sql.replace(" IS ?", " IS NOT DISTINCT FROM ?")
    if params:
        sql = sql.replace("%", "%%").replace("?", "%s")
    return sql


class _Connection:
    """A psycopg connection (autocommit; transactions are explicit) that runs the store's SQLite-dialect
    statements (:func:`translate`), with ``execute``/``executemany`` returning cursors as ``sqlite3`` does."""

    def __init__(self, conn: Any):
        self.conn = conn
        self.total_changes = 0

    def execute(self, sql: str, args: Sequence[Any] | None = ()) -> Any:
        cur = self.conn.cursor()
        if args:
            cur.execute(translate(sql, True), list(args))
        else:
            cur.execute(translate(sql, False))
        self.total_changes += max(cur.rowcount, 0)
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        cur = self.conn.cursor()
        cur.executemany(translate(sql, True), [list(r) for r in rows])
        self.total_changes += max(cur.rowcount, 0)
        return cur

    @property
    def in_transaction(self) -> bool:
        import psycopg

        return bool(self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    def close(self) -> None:
        self.conn.close()


class PostgresEventStore(EventStore):
    """:class:`~latch.store.EventStore` on a PostgreSQL database (see the module). ``url`` is a ``postgresql://``
    connection string; :class:`StoreError` (one line, password redacted) when psycopg is missing, the server
    cannot be reached, or the database holds tables of another program."""

    def __init__(
        self, path: Any = None, *, workspace: str | None = None, busy_timeout_ms: int = 10_000, read_only: bool = False
    ):
        self._dsn = str(path)
        self.url = redact(self._dsn)
        self.path = local_anchor(self._dsn)
        self._lock = threading.RLock()
        self._conn = None
        self._scratch = None
        self._candidates = CandidateSearch()
        self._bm25 = Bm25()
        self._days: JulianDay | None = None
        self._busy_timeout_ms = busy_timeout_ms
        self.read_only = read_only
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise StoreError(
                f"the store at {self.url} needs the 'postgres' extra (module 'psycopg' is not installed): "
                "pip install 'latch-context[postgres]' (from a checkout: pip install '.[postgres]')"
            ) from None
        self._connect()
        try:
            self._migrate()
            for name in (
                list(PROJECTIONS) if not read_only else ()
            ):  # a cache behind the log is caught up at open, as in SQLite
                try:
                    self.sync_projection(name)
                except StoreError:  # busy or read-only: a cache must not refuse the open; the next read retries
                    pass
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ connection
    def _connect(self) -> None:
        import psycopg

        try:
            conn = psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=max(1, self._busy_timeout_ms // 1000),
                application_name="latch",
            )
            # no server-side prepared statements: a generic plan of the recall query ignores how rare its tokens
            # are (a backward scan of the whole log instead of the GIN index: 20x slower measured)
            conn.prepare_threshold = None
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot open the Latch store at {self.url}: {self._reason(exc)}") from None
        self._conn = _Connection(conn)  # type: ignore[assignment]
        conn.execute(f"SET lock_timeout = {int(self._busy_timeout_ms)}")
        if self.read_only:  # the server refuses every write of this session too
            conn.execute("SET default_transaction_read_only = on")

    def _reason(self, exc: BaseException) -> str:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return text.replace(self._dsn, self.url)

    def _live(self) -> Any:
        """The connection, reconnected when the server dropped it (a restart)."""
        db: Any = self._db
        if db.conn.closed or db.conn.broken:
            self._connect()
            db = self._db
        return db

    def _error(self, exc: BaseException) -> StoreError:
        import psycopg

        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return StoreBusyError(f"the store at {self.url} is busy (locked by another process); try again")
        if self._lost(exc):
            return StoreUnavailable(f"the Latch store at {self.url} lost its connection: {self._reason(exc)}")
        return StoreError(f"the Latch store at {self.url} failed: {self._reason(exc)}")

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction under the store-wide advisory lock; any exception rolls it back, and a
        database error becomes :class:`StoreError` (a trigger's refusal stays the psycopg error it is)."""
        import psycopg

        with self._lock:
            if self.read_only:
                raise StoreError(f"the store at {self.url} was opened read-only; this needs write access to it")
            try:
                db = self._live()
                db.execute("BEGIN")
                db.execute(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
            except psycopg.Error as exc:
                raise self._error(exc) from None
            try:
                yield db
                db.execute("COMMIT")
            except BaseException as exc:
                try:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                except psycopg.Error:
                    pass  # the connection is gone: the server rolled the transaction back
                if isinstance(exc, psycopg.OperationalError):
                    raise self._error(exc) from None
                if isinstance(exc, UnicodeEncodeError):
                    raise StoreError(
                        f"cannot store {ascii(exc.object[:200])} in the store at {self.url}: it holds "
                        "undecodable bytes (a file name that is not UTF-8? rename the file)"
                    ) from None
                raise

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        import psycopg

        with self._lock:
            try:
                return list(self._live().execute(sql, args).fetchall())
            except UnicodeEncodeError as exc:
                raise StoreError(
                    f"cannot look up {ascii(exc.object[:200])} in the store at {self.url}: it holds undecodable bytes"
                ) from None
            except psycopg.Error as exc:
                raise self._error(exc) from None

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the connection's loss (a server restart, a dropped link), not a refusal."""
        import psycopg

        conn = getattr(self._conn, "conn", None)
        return isinstance(exc, psycopg.OperationalError) and (conn is None or bool(conn.closed or conn.broken))

    @contextmanager
    def _read_errors(self) -> Iterator[None]:
        """Around a read of the shared code: a database error becomes :class:`StoreError` (the connection's loss
        :class:`StoreUnavailable`; the next call reconnects)."""
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def sync_projection(self, name: str) -> bool:
        """:meth:`EventStore.sync_projection` on a live connection (reopened when the server dropped it)."""
        with self._lock:
            with self._read_errors():
                self._live()
            return super().sync_projection(name)

    def listen_group(self, root: str) -> ListenWakeups:
        """A waiter woken by the task changes of the group rooted in ``root`` (``LISTEN``, on a connection of its
        own: :class:`latch.store.wakeups.ListenWakeups`). :class:`StoreUnavailable` when the server is down."""
        return ListenWakeups(self._dsn, root, url=self.url, connect_timeout=max(1, self._busy_timeout_ms // 1000))

    def _notify_locked(self, session_id: str, kinds: set[str]) -> None:
        """Inside the append's transaction: wake the waiters of the group rooted in ``session_id`` when the batch
        holds a task change (:data:`latch.store.wakeups.TASK_WAKE_KINDS`); the server sends it at COMMIT."""
        if kinds.intersection(TASK_WAKE_KINDS):
            self._db.execute("SELECT pg_notify(?, ?)", (GROUP_CHANNEL, session_id))

    def read_projection(self, name: str, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        import psycopg

        self.sync_projection(name)
        with self._lock:
            db = self._live()
            try:
                db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    return [list(db.execute(sql, args).fetchall()) for sql, args in queries]
                finally:
                    db.execute("COMMIT")
            except psycopg.Error as exc:
                raise self._error(exc) from None

    # ---------------------------------------------------------------- schema
    def _migrate(self) -> None:
        """Apply the pending named migrations, each in its own transaction, under a session advisory lock (one
        process migrates; the others wait, then find them applied)."""
        import psycopg

        with self._lock:
            db = self._live()
            try:
                tables = [
                    r[0]
                    for r in db.execute(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                        "ORDER BY table_name"
                    )
                ]
                if tables and "_latch_migrations" not in tables:
                    shown = ", ".join(tables[:5]) + (f", ... ({len(tables) - 5} more)" if len(tables) > 5 else "")
                    raise StoreError(
                        f"cannot open the Latch store at {self.url}: the database holds tables of "
                        f"another program ({shown}); Latch leaves it unchanged"
                    )
                if self.read_only:  # as SQLite's read-only open: no migration, no cache rebuild, nothing written
                    done = {r[0] for r in db.execute("SELECT name FROM _latch_migrations")} if tables else set()
                    pending = [n for n, _ in PG_MIGRATIONS if n not in done]
                    if pending:
                        raise StoreError(
                            f"the store at {self.url} is read-only and needs a migration ({len(pending)} pending, "
                            f"first {pending[0]}): run `latch` once with write access to it (e.g. `latch sessions`)"
                        )
                    return
                db.execute(f"SELECT pg_advisory_lock({MIGRATE_LOCK})")
            except psycopg.Error as exc:
                raise self._error(exc) from None
            try:
                with self._write() as w:
                    w.execute(
                        "CREATE TABLE IF NOT EXISTS _latch_migrations (rowid BIGINT GENERATED ALWAYS AS "
                        "IDENTITY UNIQUE, name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                    )
                done = {r[0] for r in db.execute("SELECT name FROM _latch_migrations")}
                for name, fn in PG_MIGRATIONS:
                    if name in done:
                        continue
                    if self.read_only:
                        raise StoreError(f"the store at {self.url} is read-only and needs a migration (first {name})")
                    with self._write() as w:
                        fn(w)
                        w.execute("INSERT INTO _latch_migrations(name, applied_at) VALUES (?, ?)", (name, _now()))
                if not db.execute("SELECT 1 FROM latch_sequence WHERE name = ?", (TOKENS,)).fetchone():
                    with self._write() as w:  # a store written before the counter: count its index once
                        total = self._count_all_tokens_locked()
                        if total is not None:
                            w.execute(
                                "INSERT INTO latch_sequence(name, seq) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                                (TOKENS, total),
                            )
            except psycopg.Error as exc:
                raise self._error(exc) from None
            finally:
                try:
                    db.execute(f"SELECT pg_advisory_unlock({MIGRATE_LOCK})")
                except psycopg.Error:
                    pass

    def server_version(self) -> str:
        """The server's version (``SHOW server_version``, e.g. ``15.14 (Debian 15.14-0+deb12u1)``)."""
        return str(self._rows("SHOW server_version")[0][0])

    def pending_migrations(self) -> list[str]:
        """Named migrations this database has not applied (``[]`` when current)."""
        done = set(self.applied_migrations())
        return [n for n, _ in PG_MIGRATIONS if n not in done]

    def sqlite_version(self) -> str:
        import sqlite3

        return sqlite3.sqlite_version

    def has_fts5(self) -> bool:
        """Whether the in-memory FTS5 that verifies recall candidates is available."""
        return self._candidates.verify('"x"', [(1, "x")]) == {1}

    def quick_check(self) -> list[str]:
        """``[]`` when the index covers every event that has searchable text (a coarse check; the server keeps
        its own pages), else one line."""
        missing = self._rows(
            "SELECT count(*) FROM events_fts f LEFT JOIN events e ON e.seq = f.seq WHERE e.seq IS NULL"
        )[0][0]
        return [] if not missing else [f"{missing} index rows name no event"]

    def empty_and_unshared(self) -> bool:
        return False  # a server database is never removed by a command

    @property
    def replay_scratch_path(self) -> Path | None:
        return Path(str(self.path) + ".replays.sqlite")

    def replay_scratch(self) -> ReplayScratch:
        """:meth:`EventStore.replay_scratch`, in this host's data folder (``replays/``, created when missing)."""
        where = self.replay_scratch_path
        if where is not None:
            try:
                where.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the replay scratch folder {where.parent}: {exc.strerror or exc}"
                ) from None
        return super().replay_scratch()

    # ---------------------------------------------------------------- writes
    @staticmethod
    def _index_entry(text: str) -> tuple[list[str], str]:
        """The index entry of a searchable ``text``, made outside the write lock: its token keys
        (:func:`~latch.store.fts.prepared_keys`) and its prepared text (for its FTS5 token count)."""
        prepared = prepare_text(text)
        return prepared_keys(prepared), prepared

    def _append_locked(self, session_id: str, events: Iterable[PendingEvent | Event] | EncodedBatch) -> list[int]:
        batch = events if isinstance(events, EncodedBatch) else encode_events(events, self._index_entry)
        if not batch.rows:
            return []
        db = self._db
        refs = sorted({r[2] for r in batch.rows if r[2] is not None})
        known: set[str] = set()
        if refs:
            known = {
                r[0]
                for r in db.execute(
                    "SELECT source_ref FROM events WHERE session_id = ? AND source_ref = ANY(?)", (session_id, refs)
                )
            }
        nxt = self._take_numbers(db, "events", len(batch.rows))
        rows, indexed, prepared, kinds, seen = [], [], [], set(), set()
        for i, (kind, payload, ref, ts, entry) in enumerate(batch.rows):
            seq = nxt + i
            if ref is not None and (ref in known or ref in seen):
                continue  # already stored: its number stays used, as SQLite's AUTOINCREMENT does
            if ref is not None:
                seen.add(ref)
            rows.append((seq, session_id, kind, payload, ref, ts))
            if entry is not None:
                indexed.append((seq, entry[0]))
                prepared.append((seq, entry[1]))
            kinds.add(kind)
        if rows:
            db.executemany(
                "INSERT INTO events(seq, session_id, kind, payload, source_ref, ts) VALUES (?, ?, ?, ?, ?, ?)", rows
            )
        if indexed:
            db.executemany("INSERT INTO events_fts(seq, tokens) VALUES (?, ?)", indexed)
            self._count_tokens_locked(prepared)
        for p in list(PROJECTIONS.values()):
            if kinds.intersection(p.kinds):
                self._sync_projection_locked(p)
        self._notify_locked(session_id, kinds)
        return [r[0] for r in rows]

    @staticmethod
    def _take_numbers(db: Any, table: str, n: int) -> int:
        """Inside a write transaction: hand out the next ``n`` numbers of ``table`` (``latch_sequence``); returns
        the first."""
        if n <= 0:
            return 0
        end = db.execute(
            "INSERT INTO latch_sequence(name, seq) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET "
            "seq = latch_sequence.seq + excluded.seq RETURNING seq",
            (table, n),
        ).fetchone()[0]
        return int(end) - n + 1

    def _sequence(self, table: str) -> int:
        rows = self._rows("SELECT seq FROM latch_sequence WHERE name = ?", (table,))
        return int(rows[0][0]) if rows else 0

    def _set_sequence_locked(self, table: str, value: int) -> None:
        self._db.execute(
            "INSERT INTO latch_sequence(name, seq) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET "
            "seq = GREATEST(latch_sequence.seq, excluded.seq)",
            (table, value),
        )

    def _index_locked(self, texts: Sequence[tuple[int, str]]) -> None:
        entries = [(seq, self._index_entry(text)) for seq, text in texts if text]
        if entries:
            self._db.executemany("INSERT INTO events_fts(seq, tokens) VALUES (?, ?)", [(s, e[0]) for s, e in entries])
            self._count_tokens_locked([(s, e[1]) for s, e in entries])

    def _count_tokens_locked(self, prepared: Sequence[tuple[int, str]]) -> None:
        """Inside a write transaction: add the FTS5 token counts of the newly indexed ``prepared`` texts
        ``(seq, prepared text)`` to the index's token total (:data:`~latch.store.pg_ranking.TOKENS`, what FTS5
        keeps for ``bm25``)."""
        with self._lock:
            n = sum(self._bm25.sizes(prepared).values())
        # only a counted total moves (one that covers the whole index: made at open, see _migrate)
        self._db.execute("UPDATE latch_sequence SET seq = seq + ? WHERE name = ?", (n, TOKENS))

    def _count_all_tokens_locked(self, *, skip_unknown: bool = False) -> int | None:
        """Inside a transaction: the FTS5 token total of every indexed event, counted from the log. An event kind
        this process cannot decode (a newer Latch's): ``None``, or with ``skip_unknown`` that event counted as
        no tokens."""
        total, after = 0, 0
        while True:
            batch = self._db.execute(
                "SELECT e.seq, e.kind, e.payload FROM events_fts f JOIN events e ON e.seq = f.seq WHERE f.seq > ? "
                "ORDER BY f.seq LIMIT 2000",
                (after,),
            ).fetchall()
            if not batch:
                return total
            texts = []
            for seq, kind, payload in batch:
                try:
                    texts.append((seq, decode_event(kind, payload).searchable_text()))
                except (KeyError, ValueError, TypeError):
                    if not skip_unknown:
                        return None
            with self._lock:
                total += sum(self._bm25.sizes([(seq, prepare_text(t)) for seq, t in texts if t]).values())
            after = batch[-1][0]

    def _token_total(self) -> int:
        """The index's FTS5 token total; counted from the log when the store has no counter (opened read-only
        before any writer counted it, or holding a newer Latch's events, which then count as no tokens)."""
        rows = self._rows("SELECT seq FROM latch_sequence WHERE name = ?", (TOKENS,))
        if rows:
            return int(rows[0][0])
        with self._lock:
            return self._count_all_tokens_locked(skip_unknown=True) or 0

    def append_kernel_records(
        self,
        session_id: str,
        stream: str,
        records: Sequence[tuple[str, int, dict[str, Any]]],
        *,
        fence: Fence | Sequence[Fence] | None = None,
    ) -> list[int]:
        with self._write() as db:
            self._check_fences_locked(fence)
            nxt = self._take_numbers(db, "kernel_records", len(records))
            rows = [
                (nxt + i, session_id, stream, kind, at_seq, canonical_json(payload))
                for i, (kind, at_seq, payload) in enumerate(records)
            ]
            if rows:
                db.executemany(
                    "INSERT INTO kernel_records(id, session_id, stream, kind, at_seq, payload) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )
        return [r[0] for r in rows]

    def record_import_fingerprint(self, path: str, options: str, sha256: str, size: int, keys: Sequence[str]) -> None:
        import json

        with self._write() as db:
            db.execute(
                "INSERT INTO import_fingerprints(path, options, sha256, size, keys, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (path, options) DO UPDATE SET sha256 = excluded.sha256, "
                "size = excluded.size, keys = excluded.keys, recorded_at = excluded.recorded_at",
                (path, options, sha256, int(size), json.dumps(list(keys)), _now()),
            )

    # ---------------------------------------------------------------- recall
    def _recall(
        self,
        phrases: list[list[str]],
        match: str,
        mode: str,
        limit: int,
        where: str,
        args: list[Any],
    ) -> list[StoredEvent]:
        """The newest ``limit`` events (newest first) whose text FTS5 matches ``match``, among the rows holding
        the token keys of every phrase (``mode="and"``) or of one phrase (``"or"``), with the filter ``where``."""
        keyed = [sorted({token_key(t) for t in p}) for p in phrases]
        if mode == "and":
            cond, cargs = "f.tokens @> ?::text[]", [sorted({k for p in keyed for k in p})]
        else:
            cond, cargs = "(" + " OR ".join(["f.tokens @> ?::text[]"] * len(keyed)) + ")", list(keyed)
        sql = (
            "SELECT e.seq, e.session_id, e.kind, e.payload, e.source_ref, e.ts FROM events_fts f "
            "JOIN events e ON e.seq = f.seq WHERE " + cond + where
        )
        hits: list[StoredEvent] = []
        below: int | None = None
        size = min(PAGE, max(2 * limit, 32))  # most candidates match: a first page near limit, then larger ones
        while len(hits) < limit:
            page = self._rows(
                sql + (" AND f.seq < ?" if below is not None else "") + " ORDER BY f.seq DESC LIMIT ?",
                [*cargs, *args, *([below] if below is not None else []), size],
            )
            if not page:
                break
            decoded = [self._decode_row(r) for r in page]
            with self._lock:
                ok = self._candidates.verify(match, [(d.seq, d.event.searchable_text()) for d in decoded])
            hits.extend(d for d in decoded if d.seq in ok)
            if len(page) < size:
                break
            below = decoded[-1].seq
            size = min(PAGE, size * 4)
        return hits[:limit]

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
        match = build_match_query(query, mode=mode)
        if match is None or limit <= 0:
            return []
        args: list[Any] = []
        where = _and("", args, (("e.session_id = ?", session_id), ("f.seq < ?", before_seq), ("f.seq <= ?", until_seq)))
        excluded = sorted(set(exclude_sessions))
        if excluded:
            where += " AND NOT (e.session_id = ANY(?))"
            args.append(excluded)
        return self._recall(match_phrases(query), match, mode, limit, where, args)

    def _filters(
        self,
        session_id: str | None,
        kinds: Sequence[str] | None,
        tool: str | None,
        since: str | None,
        until: str | None,
        exclude_sessions: Iterable[str],
    ) -> tuple[str, list[Any], Callable[[StoredEvent], bool] | None]:
        """The filters of :meth:`search_hits` over ``events e``: `` AND …`` SQL terms with their args, and the
        ``since``/``until`` test (SQLite's ``julianday``, :class:`~latch.store.pg_ranking.JulianDay`) or ``None``."""
        args: list[Any] = []
        where = _and("", args, (("e.session_id = ?", session_id), ("e.kind = ANY(?)", list(kinds) if kinds else None)))
        if tool is not None:
            where += (
                " AND ((e.kind = 'assistant_message' AND EXISTS (SELECT 1 FROM json_array_elements(e.payload::json "
                "-> 'tool_calls') t WHERE (t ->> 'name') = ?)) OR (e.kind = 'tool_result' AND ((e.payload::json "
                "->> 'name') = ? OR (e.payload::json ->> 'call_id') IN (SELECT c ->> 'id' FROM events a, "
                "json_array_elements(a.payload::json -> 'tool_calls') c WHERE a.kind = 'assistant_message' AND "
                "a.session_id = e.session_id AND (c ->> 'name') = ?))))"
            )
            args.extend([tool, tool, tool])
        excluded = sorted(set(exclude_sessions))
        if excluded:
            where += " AND NOT (e.session_id = ANY(?))"
            args.append(excluded)
        if since is None and until is None:
            return where, args, None
        if self._days is None:
            self._days = JulianDay()
        days = self._days
        return where, args, lambda e: days.within(e.ts, since, until)

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
        """:meth:`EventStore.search_hits`: the same hits in the same order with the same FTS5 ``bm25`` ranks
        (:class:`~latch.store.pg_ranking.Bm25`). It reads every event holding the token keys of some phrase (the
        rank's IDF counts each phrase's rows over the whole log), in either order."""
        if order not in ("recent", "relevance"):
            raise ValueError(f"order must be 'recent' or 'relevance', not {order!r}")
        chunks = phrase_query_phrases(query)
        if not chunks or limit <= 0:
            return []
        match = " AND ".join(chunks)  # build_phrase_query's expression
        phrases = match.split(" AND ")  # FTS5's phrases, in order (quoted tokens hold no space)
        where, args, keep = self._filters(session_id, kinds, tool, since, until, exclude_sessions)
        return self._ranked(phrases, where, args, keep, limit, order)

    def _ranked(
        self,
        phrases: list[str],
        where: str,
        args: list[Any],
        keep: Callable[[StoredEvent], bool] | None,
        limit: int,
        order: str,
    ) -> list[tuple[StoredEvent, float]]:
        """The ``limit`` events matching all ``phrases`` with the filters, ``[(event, bm25 rank)]``: the best
        first (ties: newest first) for ``order="relevance"``, the newest first for ``"recent"``."""
        tokens = [phrase_tokens(p) for p in phrases]
        keyed = [sorted({token_key(t) for t in p}) for p in tokens]
        every = sorted({k for p in keyed for k in p})
        allowed = {
            r[0]
            for r in self._rows(
                "SELECT e.seq FROM events_fts f JOIN events e ON e.seq = f.seq WHERE f.tokens @> ?::text[]" + where,
                [every, *args],
            )
        }
        if not allowed:
            return []
        cond = " OR ".join(["f.tokens @> ?::text[]"] * len(keyed))
        rows = self._rows(
            "SELECT e.seq, e.session_id, e.kind, e.payload, e.source_ref, e.ts FROM events_fts f "
            "JOIN events e ON e.seq = f.seq WHERE " + cond,
            keyed,
        )
        decoded = {r[0]: self._decode_row(r) for r in rows}
        n_rows = int(self._rows("SELECT count(*) FROM events_fts")[0][0])
        avgdl = float(self._token_total()) / float(n_rows)
        with self._lock:
            sizes, freqs = self._bm25.counts(phrases, [(s, d.event.searchable_text()) for s, d in decoded.items()])
        idfs = [Bm25.idf(n_rows, len(f)) for f in freqs]
        ranked = []
        for seq in allowed:
            got = [f.get(seq, 0) for f in freqs]
            if all(got) and (keep is None or keep(decoded[seq])):
                ranked.append((Bm25.rank(idfs, got, sizes[seq], avgdl), seq))
        ranked.sort(key=(lambda x: (x[0], -x[1])) if order == "relevance" else (lambda x: -x[1]))
        return [(decoded[seq], rank) for rank, seq in ranked[:limit]]

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
        """:meth:`EventStore.call_events` (json lookups), with the same filters."""
        sql = (
            "SELECT e.seq, e.session_id, e.kind, e.payload, e.source_ref, e.ts FROM events e WHERE "
            "((e.kind = 'tool_result' AND (e.payload::json ->> 'call_id') = ?) OR "
            "(e.kind = 'assistant_message' AND EXISTS (SELECT 1 FROM json_array_elements(e.payload::json -> "
            "'tool_calls') c WHERE (c ->> 'id') = ?)))"
        )
        where, args, keep = self._filters(session_id, kinds, tool, since, until, exclude_sessions)
        found = [
            self._decode_row(r) for r in self._rows(sql + where + " ORDER BY e.seq DESC", [call_id, call_id, *args])
        ]
        return [e for e in found if keep is None or keep(e)]
