"""The PostgreSQL schema of the event store: the same named migrations as :mod:`latch.store.migrations`, in the
same order, written for PostgreSQL.

Differences from the SQLite schema, each forced by the database:

* ``sessions`` and ``_latch_migrations`` have an explicit ``rowid`` identity column (SQLite's implicit rowid:
  creation order).
* ``events_fts`` is a table ``(seq, tokens text[])`` with a GIN index instead of an FTS5 virtual table: the
  distinct token keys of each event's prepared text (:func:`latch.store.fts.index_keys`). It narrows exact
  recall to candidate rows; FTS5 itself (in memory, the same tokenizer) decides the hits, so both backends
  return the same rows (:mod:`latch.store.postgres`).
* append-only is a trigger function raising ``<table> are append-only`` before UPDATE, DELETE and TRUNCATE.
* ``seq`` and ``kernel_records.id`` are plain ``BIGINT`` keys the store assigns under its write lock from
  ``latch_sequence`` (SQLite's ``sqlite_sequence``): the same numbers AUTOINCREMENT gives, a duplicate skipped
  on re-import using one up as in SQLite, and a copy keeps them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..events import EVENT_KINDS, decode_event
from .fts import index_keys
from .migrations import MIGRATIONS as SQLITE_MIGRATIONS
from .pg_ranking import TOKENS

PG_MIGRATIONS: list[tuple[str, Callable[[Any], None]]] = []


def _migration(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    PG_MIGRATIONS.append((fn.__name__, fn))
    return fn


def _append_only(db: Any, table: str, what: str) -> None:
    db.execute(
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} FOR EACH ROW "
        f"EXECUTE FUNCTION latch_append_only('{what}')"
    )
    db.execute(
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} FOR EACH ROW "
        f"EXECUTE FUNCTION latch_append_only('{what}')"
    )
    db.execute(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} FOR EACH STATEMENT "
        f"EXECUTE FUNCTION latch_append_only('{what}')"
    )


@_migration
def m001_sessions_events(db: Any) -> None:
    db.execute("""
        CREATE TABLE sessions (
            rowid        BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            id           TEXT PRIMARY KEY,
            parent_id    TEXT REFERENCES sessions(id),
            workspace    TEXT,
            source       TEXT,
            format       TEXT,
            external_key TEXT UNIQUE,
            created_at   TEXT NOT NULL,
            meta         TEXT NOT NULL DEFAULT '{}'
        )""")
    db.execute("""
        CREATE TABLE events (
            seq        BIGINT PRIMARY KEY CHECK (seq > 0),
            session_id TEXT NOT NULL REFERENCES sessions(id),
            kind       TEXT NOT NULL,
            payload    TEXT NOT NULL,
            source_ref TEXT,
            ts         TEXT,
            UNIQUE (session_id, source_ref)
        )""")
    # SQLite's sqlite_sequence: the last number handed out per table, moved in the write transaction (a rolled
    # back batch gives its numbers back; an event skipped as a duplicate keeps its number used, as AUTOINCREMENT)
    db.execute("CREATE TABLE latch_sequence (name TEXT PRIMARY KEY, seq BIGINT NOT NULL)")
    db.execute("CREATE INDEX events_session_seq ON events(session_id, seq)")
    db.execute("CREATE INDEX events_kind ON events(kind, session_id)")
    db.execute(
        "CREATE OR REPLACE FUNCTION latch_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION '% are append-only', TG_ARGV[0]; END $$"
    )
    _append_only(db, "events", "events")


@_migration
def m002_events_fts(db: Any) -> None:
    db.execute("CREATE TABLE events_fts (seq BIGINT PRIMARY KEY REFERENCES events(seq), tokens TEXT[] NOT NULL)")
    db.execute("CREATE INDEX events_fts_tokens ON events_fts USING gin (tokens)")


@_migration
def m003_artifacts(db: Any) -> None:
    db.execute("""
        CREATE TABLE artifacts (
            sha256     TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            byte_size  BIGINT NOT NULL,
            width      INTEGER,
            height     INTEGER,
            data       BYTEA NOT NULL,
            created_at TEXT NOT NULL
        )""")


@_migration
def m004_kernel_records(db: Any) -> None:
    db.execute("""
        CREATE TABLE kernel_records (
            id         BIGINT PRIMARY KEY CHECK (id > 0),
            session_id TEXT NOT NULL REFERENCES sessions(id),
            stream     TEXT NOT NULL,
            kind       TEXT NOT NULL,
            at_seq     BIGINT NOT NULL,
            payload    TEXT NOT NULL
        )""")
    db.execute("CREATE INDEX kernel_records_stream ON kernel_records(session_id, stream, id)")
    _append_only(db, "kernel_records", "kernel records")


@_migration
def m005_token_counts(db: Any) -> None:
    db.execute("""
        CREATE TABLE token_counts (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            tokenizer  TEXT NOT NULL,
            seq        BIGINT NOT NULL REFERENCES events(seq),
            digest     TEXT NOT NULL,
            tokens     BIGINT NOT NULL CHECK (tokens >= 0),
            PRIMARY KEY (session_id, tokenizer, seq, digest)
        )""")


def reindex(db: Any) -> None:
    """Rebuild ``events_fts`` from the log (today's :func:`~latch.store.fts.index_keys`); a store holding an event
    kind this process cannot decode keeps its index, as in SQLite's ``m006_fts_glued_terms``."""
    kinds = {r[0] for r in db.execute("SELECT DISTINCT kind FROM events")}
    if not kinds or not kinds <= set(EVENT_KINDS):
        return
    db.execute("DELETE FROM events_fts")
    db.execute("DELETE FROM latch_sequence WHERE name = ?", (TOKENS,))  # counted again after the migrations
    after = 0
    while True:
        batch = db.execute(
            "SELECT seq, kind, payload FROM events WHERE seq > ? ORDER BY seq LIMIT 2000", (after,)
        ).fetchall()
        if not batch:
            break
        rows = []
        for seq, kind, payload in batch:
            text = decode_event(kind, payload).searchable_text()
            if text:
                rows.append((seq, index_keys(text)))
        if rows:
            db.executemany("INSERT INTO events_fts(seq, tokens) VALUES (?, ?)", rows)
        after = batch[-1][0]


@_migration
def m006_fts_glued_terms(db: Any) -> None:
    reindex(db)


@_migration
def m007_fts_dotted_terms(db: Any) -> None:
    reindex(db)


@_migration
def m008_group_projection(db: Any) -> None:
    db.execute("CREATE TABLE projection_marks (name TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)")
    db.execute("""
        CREATE TABLE group_tasks (
            root_session_id TEXT NOT NULL,
            task_id         TEXT NOT NULL,
            pos             BIGINT NOT NULL,
            title           TEXT NOT NULL,
            brief           TEXT NOT NULL,
            depends_on      TEXT NOT NULL,
            owner           TEXT,
            status          TEXT,
            summary         TEXT NOT NULL DEFAULT '',
            attempt         INTEGER NOT NULL DEFAULT 0,
            lease_seconds   DOUBLE PRECISION,
            alive_at        DOUBLE PRECISION,
            session_id      TEXT,
            PRIMARY KEY (root_session_id, task_id)
        )""")
    db.execute("""
        CREATE TABLE group_members (
            root_session_id TEXT NOT NULL,
            agent           TEXT NOT NULL,
            pos             BIGINT NOT NULL,
            session_id      TEXT,
            PRIMARY KEY (root_session_id, agent)
        )""")
    db.execute("""
        CREATE TABLE group_messages (
            root_session_id TEXT NOT NULL,
            message_id      TEXT NOT NULL,
            pos             BIGINT NOT NULL,
            sender          TEXT NOT NULL,
            recipient       TEXT NOT NULL,
            text            TEXT NOT NULL,
            delivered       INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (root_session_id, message_id)
        )""")
    db.execute("CREATE INDEX group_messages_pending ON group_messages(root_session_id, recipient, delivered, pos)")
    db.execute("CREATE INDEX events_kind_seq ON events(kind, seq)")


@_migration
def m009_import_fingerprints(db: Any) -> None:
    db.execute("""
        CREATE TABLE import_fingerprints (
            path        TEXT NOT NULL,
            options     TEXT NOT NULL,
            sha256      TEXT NOT NULL,
            size        BIGINT NOT NULL,
            keys        TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            PRIMARY KEY (path, options)
        )""")


@_migration
def m010_run_leases(db: Any) -> None:
    db.execute("""
        CREATE TABLE run_leases (
            session_id    TEXT PRIMARY KEY REFERENCES sessions(id),
            run_id        TEXT NOT NULL,
            pid           BIGINT NOT NULL,
            host          TEXT NOT NULL,
            process_start BIGINT,
            acquired_at   DOUBLE PRECISION NOT NULL,
            renewed_at    DOUBLE PRECISION NOT NULL,
            lease_seconds DOUBLE PRECISION NOT NULL CHECK (lease_seconds > 0)
        )""")


@_migration
def m011_events_kind_indexes(db: Any) -> None:
    """Replace ``events_kind`` and ``events_kind_seq`` by ``events_projected_kind_seq`` (kind, seq), partial:
    only the projected kinds' rows (as SQLite's m011)."""
    db.execute("DROP INDEX IF EXISTS events_kind")
    db.execute("DROP INDEX IF EXISTS events_kind_seq")
    db.execute("CREATE INDEX events_projected_kind_seq ON events(kind, seq) WHERE substr(kind, 1, 6) = 'group_'")


@_migration
def m012_events_source_ref_partial_index(db: Any) -> None:
    """Make the events table's ``UNIQUE (session_id, source_ref)`` a partial unique index over the rows that have a
    source_ref (as SQLite's m012; PostgreSQL drops a constraint in place, no rebuild). NULLs are distinct in both,
    so the rule is the same."""
    db.execute("ALTER TABLE events DROP CONSTRAINT IF EXISTS events_session_id_source_ref_key")
    db.execute(
        "CREATE UNIQUE INDEX events_session_source_ref ON events(session_id, source_ref) WHERE source_ref IS NOT NULL"
    )


if [n for n, _ in PG_MIGRATIONS] != [n for n, _ in SQLITE_MIGRATIONS]:  # pragma: no cover - a developer's slip
    raise RuntimeError("the PostgreSQL migrations must be SQLite's, by name and in order")
