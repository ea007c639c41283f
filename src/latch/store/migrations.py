"""Named, ordered schema migrations for the EventStore.

Each migration is a function registered with :func:`migration`; they run in
registration order, each in its own transaction, and their names are recorded
in ``_latch_migrations`` so a database is never migrated twice. Add new
migrations at the end; never edit one that has shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ..events import EVENT_KINDS, decode_event
from .fts import prepare_text

MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = []


def migration(fn: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
    """Decorator: register ``fn`` as the next named migration (its function name is recorded once applied)."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_sessions_events(db: sqlite3.Connection) -> None:
    """Sessions and the append-only event log (triggers refuse UPDATE and DELETE)."""
    db.execute(
        """
        CREATE TABLE sessions (
            id           TEXT PRIMARY KEY,
            parent_id    TEXT REFERENCES sessions(id),
            workspace    TEXT,
            source       TEXT,
            format       TEXT,
            external_key TEXT UNIQUE,
            created_at   TEXT NOT NULL,
            meta         TEXT NOT NULL DEFAULT '{}'
        )
        """
    )
    db.execute(
        """
        CREATE TABLE events (
            seq        INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            kind       TEXT NOT NULL,
            payload    TEXT NOT NULL,
            source_ref TEXT,
            ts         TEXT,
            UNIQUE (session_id, source_ref)
        )
        """
    )
    db.execute("CREATE INDEX events_session_seq ON events(session_id, seq)")
    db.execute("CREATE INDEX events_kind ON events(kind, session_id)")
    # Append-only: the database itself refuses updates and deletes of events.
    db.execute(
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
    )
    db.execute(
        "CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
    )


@migration
def m002_events_fts(db: sqlite3.Connection) -> None:
    # Contentless FTS5 index, rowid = events.seq; text is prepared by store.fts.prepare_text.
    # Token characters: letters, numbers, private use and other symbols (So: emoji), i.e. store.fts.TOKENIZE.
    """Contentless FTS5 index over each event's prepared searchable text (rowid = seq)."""
    db.execute(
        "CREATE VIRTUAL TABLE events_fts USING fts5(text, content='', "
        "tokenize=\"unicode61 remove_diacritics 2 categories 'L* N* Co So'\")"
    )


@migration
def m003_artifacts(db: sqlite3.Connection) -> None:
    """Content-addressed artifacts: SHA-256 → bytes, media type, image width/height."""
    db.execute(
        """
        CREATE TABLE artifacts (
            sha256     TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            byte_size  INTEGER NOT NULL,
            width      INTEGER,
            height     INTEGER,
            data       BLOB NOT NULL,
            created_at TEXT NOT NULL
        )
        """
    )


@migration
def m004_kernel_records(db: sqlite3.Connection) -> None:
    # Engine-owned durable records (kernel context snapshots/deltas, epochs,
    # materialization metrics). Written only through the narrow KernelWriter.
    """Engine-owned append-only records (kernel context, epochs, materializations) per stream."""
    db.execute(
        """
        CREATE TABLE kernel_records (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            stream     TEXT NOT NULL,
            kind       TEXT NOT NULL,
            at_seq     INTEGER NOT NULL,
            payload    TEXT NOT NULL
        )
        """
    )
    db.execute("CREATE INDEX kernel_records_stream ON kernel_records(session_id, stream, id)")
    db.execute(
        "CREATE TRIGGER kernel_records_no_update BEFORE UPDATE ON kernel_records "
        "BEGIN SELECT RAISE(ABORT, 'kernel records are append-only'); END"
    )
    db.execute(
        "CREATE TRIGGER kernel_records_no_delete BEFORE DELETE ON kernel_records "
        "BEGIN SELECT RAISE(ABORT, 'kernel records are append-only'); END"
    )


@migration
def m005_token_counts(db: sqlite3.Connection) -> None:
    # A cache, not history: exact token counts of provider-visible messages rendered from one event, per
    # tokenizer. ``digest`` identifies the rendering (an event can be rendered more than
    # one way, e.g. by a masking engine), so a count is only ever reused for the same bytes. Rows are only
    # inserted (INSERT OR IGNORE); dropping the table loses nothing the log cannot rebuild.
    """Exact per-event token counts: (session, tokenizer, event seq, rendering digest) → tokens."""
    db.execute(
        """
        CREATE TABLE token_counts (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            tokenizer  TEXT NOT NULL,
            seq        INTEGER NOT NULL REFERENCES events(seq),
            digest     TEXT NOT NULL,
            tokens     INTEGER NOT NULL CHECK (tokens >= 0),
            PRIMARY KEY (session_id, tokenizer, seq, digest)
        ) WITHOUT ROWID
        """
    )


@migration
def m006_fts_glued_terms(db: sqlite3.Connection) -> None:
    # Re-index every event with the preparation that gives C++, C# and .NET their own tokens
    # (store.fts.prepare_text). The index is contentless: its rows cannot be read back or deleted one by one
    # without the exact text first inserted, so the whole index is emptied ('delete-all') and rebuilt from the
    # log. A store holding an event kind this process cannot decode (a third-party kind whose module is not
    # imported) keeps its index as it was: its old text still matches every query that does not use a glued term.
    """Rebuild the FTS index with glued terms (``C++``, ``C#``, ``.NET`` searchable as themselves)."""
    kinds = {r[0] for r in db.execute("SELECT DISTINCT kind FROM events")}
    if not kinds or not kinds <= set(EVENT_KINDS):
        return
    db.execute("INSERT INTO events_fts(events_fts) VALUES ('delete-all')")
    rows = db.execute("SELECT seq, kind, payload FROM events ORDER BY seq")
    while True:
        batch = rows.fetchmany(2_000)
        if not batch:
            break
        for seq, kind, payload in batch:
            text = decode_event(kind, payload).searchable_text()
            if text:
                db.execute("INSERT INTO events_fts(rowid, text) VALUES (?, ?)", (seq, prepare_text(text)))


@migration
def m007_fts_dotted_terms(db: sqlite3.Connection) -> None:
    # Re-index every event with the preparation that adds the dotted-term tokens (store.fts.dotted_terms), as
    # m006 did for glued terms (same rebuild, same rule for a store holding a kind this process cannot decode).
    """Rebuild the FTS index with dotted terms (``node.js``, ``v1.2.3``, ``os.path`` searchable as themselves)."""
    m006_fts_glued_terms(db)


@migration
def m008_group_projection(db: sqlite3.Connection) -> None:
    # A cache, not history: the group projection of the root sessions' group events. Its rows
    # are written by the registered projection (store.projections) in the transaction that appends each group
    # event; ``projection_marks`` records the last seq a projection applied, and a missing mark (a store
    # written before this migration, or rows deleted) makes the next open or read rebuild it from the log.
    # ``pos`` is the seq of the event that first created the row (creation, join and queue order).
    """Group projection cache: tasks (with claims), members, messages (with delivery state), per-projection marks."""
    db.execute("CREATE TABLE projection_marks (name TEXT PRIMARY KEY, last_seq INTEGER NOT NULL)")
    db.execute(
        """
        CREATE TABLE group_tasks (
            root_session_id TEXT NOT NULL,
            task_id         TEXT NOT NULL,
            pos             INTEGER NOT NULL,
            title           TEXT NOT NULL,
            brief           TEXT NOT NULL,
            depends_on      TEXT NOT NULL,
            owner           TEXT,
            status          TEXT,
            summary         TEXT NOT NULL DEFAULT '',
            attempt         INTEGER NOT NULL DEFAULT 0,
            lease_seconds   REAL,
            alive_at        REAL,
            session_id      TEXT,
            PRIMARY KEY (root_session_id, task_id)
        )
        """
    )
    db.execute(
        """
        CREATE TABLE group_members (
            root_session_id TEXT NOT NULL,
            agent           TEXT NOT NULL,
            pos             INTEGER NOT NULL,
            session_id      TEXT,
            PRIMARY KEY (root_session_id, agent)
        )
        """
    )
    db.execute(
        """
        CREATE TABLE group_messages (
            root_session_id TEXT NOT NULL,
            message_id      TEXT NOT NULL,
            pos             INTEGER NOT NULL,
            sender          TEXT NOT NULL,
            recipient       TEXT NOT NULL,
            text            TEXT NOT NULL,
            delivered       INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (root_session_id, message_id)
        )
        """
    )
    db.execute("CREATE INDEX group_messages_pending ON group_messages(root_session_id, recipient, delivered, pos)")
    # the freshness check reads max(seq) per projected kind: one index seek each
    db.execute("CREATE INDEX events_kind_seq ON events(kind, seq)")


@migration
def m009_import_fingerprints(db: sqlite3.Connection) -> None:
    # A cache, not history: what a transcript file's last import into this store found, keyed by the file's
    # resolved path and the import's options (format, final, Latch version, plugins). A re-import of the same
    # bytes (SHA-256) with the same options finds its sessions here instead of parsing the file again
    # (latch.host.ingest.imported_session_ids); any other file or option parses as before.
    """Import fingerprints: per (path, options), the SHA-256 and size of the bytes imported and their sessions' keys."""
    db.execute(
        """
        CREATE TABLE import_fingerprints (
            path        TEXT NOT NULL,
            options     TEXT NOT NULL,
            sha256      TEXT NOT NULL,
            size        INTEGER NOT NULL,
            keys        TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            PRIMARY KEY (path, options)
        )
        """
    )


@migration
def m010_run_leases(db: sqlite3.Connection) -> None:
    # Coordination state, not history (latch.store.leases): one row per session while a `latch run` holds it, so a
    # second run of a live session is refused; the row is taken over when its holder is gone or its lease expired
    # without renewal, and deleted in the transaction that appends the run's run_ended. The run_started/run_ended
    # events stay the record of what ran; dropping the table loses only who holds a session right now.
    """Run leases: per session, the run holding it (run id, pid, host, process start) and its lease's renewal."""
    db.execute(
        """
        CREATE TABLE run_leases (
            session_id    TEXT PRIMARY KEY REFERENCES sessions(id),
            run_id        TEXT NOT NULL,
            pid           INTEGER NOT NULL,
            host          TEXT NOT NULL,
            process_start INTEGER,
            acquired_at   REAL NOT NULL,
            renewed_at    REAL NOT NULL,
            lease_seconds REAL NOT NULL CHECK (lease_seconds > 0)
        )
        """
    )


FTS_HASHSIZE = 16 * 1024 * 1024
"""Bytes of pending index data one write transaction keeps in memory before FTS5 writes them out as a segment
(FTS5's ``hashsize``; its default is 1 MiB). A large batch (an import, ``latch stress``'s 5,000 events) then
writes one segment where it wrote dozens, and the index merges fewer: about 20% less SQL time per appended event
at 10^5 events. It bounds memory only: what is indexed, and when it is durable (the commit), stay the same."""


def fts_settings_behind(db: sqlite3.Connection) -> bool:
    """Whether the index's stored FTS5 settings (:data:`FTS_HASHSIZE`) differ from this version's. Never with an
    SQLite older than 3.40 (its FTS5 may not know the setting: no write at every open to find out)."""
    if sqlite3.sqlite_version_info < (3, 40, 0):  # pragma: no cover - depends on the SQLite Python links
        return False
    row = db.execute("SELECT v FROM events_fts_config WHERE k = 'hashsize'").fetchone()
    return row is None or row[0] != FTS_HASHSIZE


def apply_fts_settings(db: sqlite3.Connection) -> None:
    """Inside a write transaction: store this version's FTS5 settings in the index's config table (FTS5 keeps
    them with the index, as SQLite keeps ``journal_mode``). An SQLite whose FTS5 has no such setting keeps its
    default."""
    try:
        db.execute("INSERT INTO events_fts(events_fts, rank) VALUES ('hashsize', ?)", (FTS_HASHSIZE,))
    except sqlite3.OperationalError:  # pragma: no cover - FTS5 before the hashsize setting
        pass


PROJECTED_KINDS_SQL = "substr(kind, 1, 6) = 'group_'"
"""The condition of the ``events_projected_kind_seq`` partial index: the projected kinds (:mod:`.projections`: the
agent group's events) by their prefix. SQLite evaluates it on every insert at almost no cost (an ``IN`` list of
the seven kinds made an insert cost more than a whole index), and unlike ``GLOB 'group_*'`` it does not turn into a
range over every group event. A query must repeat it word for word for SQLite to use the index."""


@migration
def m011_events_kind_indexes(db: sqlite3.Connection) -> None:
    # Two of the events table's four indexes were updated on every append for few readers. events_kind
    # (kind, session_id) served only a person's `latch search --tool` (a session's assistant messages, now read
    # through events_session_seq), and events_kind_seq (kind, seq) the projections' freshness check (the newest
    # seq of each projected kind). One partial index over the projected kinds answers that check with the same
    # seek, and an ordinary event (a message, a tool result) updates neither.
    """Replace ``events_kind`` and ``events_kind_seq`` by ``events_projected_kind_seq`` (kind, seq), partial:
    only the projected kinds' rows."""
    db.execute("DROP INDEX IF EXISTS events_kind")
    db.execute("DROP INDEX IF EXISTS events_kind_seq")
    # the condition spelled out (this migration never changes); PROJECTED_KINDS_SQL repeats it for the queries
    db.execute("CREATE INDEX events_projected_kind_seq ON events(kind, seq) WHERE substr(kind, 1, 6) = 'group_'")


@migration
def m012_events_source_ref_partial_index(db: sqlite3.Connection) -> None:
    # The (session_id, source_ref) uniqueness that makes an import idempotent was a table constraint, so every event
    # had a row in its index, NULL source_ref included (what the agent appends: none of which can ever conflict,
    # NULLs being distinct). A partial unique index over the rows that have one enforces exactly the same rule, and
    # an appended event updates one index fewer. A constraint cannot be dropped in SQLite: the table is rebuilt under
    # the same name, every row with its seq (the FTS index's rowid), its AUTOINCREMENT counter kept, its indexes and
    # append-only triggers made again. token_counts rows point at events: they are set aside while the table is
    # replaced (foreign keys stay on: every row is checked as it goes back).
    """Make the events table's ``UNIQUE (session_id, source_ref)`` a partial unique index (rows with a source_ref)."""
    counter = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    db.execute("CREATE TEMP TABLE m012_token_counts AS SELECT * FROM token_counts")
    db.execute("DELETE FROM token_counts")
    db.execute(
        """
        CREATE TABLE events_m012 (
            seq        INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            kind       TEXT NOT NULL,
            payload    TEXT NOT NULL,
            source_ref TEXT,
            ts         TEXT
        )
        """
    )
    db.execute(
        "INSERT INTO events_m012(seq, session_id, kind, payload, source_ref, ts) "
        "SELECT seq, session_id, kind, payload, source_ref, ts FROM events ORDER BY seq"
    )
    db.execute("DROP TABLE events")  # its indexes and triggers with it (a drop fires no trigger)
    db.execute("ALTER TABLE events_m012 RENAME TO events")
    if counter is not None:  # numbers a skipped duplicate used up stay used
        db.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'events'", (counter[0],))
        db.execute(
            "INSERT INTO sqlite_sequence(name, seq) SELECT 'events', ? "
            "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events')",
            (counter[0],),
        )
    db.execute(
        "CREATE UNIQUE INDEX events_session_source_ref ON events(session_id, source_ref) WHERE source_ref IS NOT NULL"
    )
    db.execute("CREATE INDEX events_session_seq ON events(session_id, seq)")
    db.execute("CREATE INDEX events_projected_kind_seq ON events(kind, seq) WHERE substr(kind, 1, 6) = 'group_'")
    db.execute(
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
    )
    db.execute(
        "CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
    )
    db.execute("INSERT INTO token_counts SELECT * FROM temp.m012_token_counts")
    db.execute("DROP TABLE temp.m012_token_counts")
