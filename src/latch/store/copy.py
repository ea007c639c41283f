"""Copy a whole store into an empty one, on either backend (``latch store copy SRC DST``).

:func:`copy_store` keeps every session (id, parent, workspace, source, format, external key, creation time,
meta, creation order), every event byte for byte with its ``seq``, every artifact, kernel record (with its id),
cached token count and import fingerprint; the destination indexes each event itself (its own index: FTS5 in
SQLite, token keys in PostgreSQL) and rebuilds its projections from the copied log. Run leases are not copied:
they name processes on the source, not history. It is one write transaction on the destination: all of it or,
on any error, nothing.
"""

from __future__ import annotations

from typing import Any

from ..events import decode_event
from ..records import dataclass
from ._sqlite import StoreError
from .event_store import EventStore
from .projections import PROJECTIONS

__all__ = ["CopyReport", "copy_store"]

BATCH = 2_000
"""Rows read from the source per query."""


@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_store` copied: counts of rows, and the last ``seq``."""

    sessions: int
    events: int
    artifacts: int
    kernel_records: int
    token_counts: int
    import_fingerprints: int
    max_seq: int
    next_seq: int


def _batches(src: EventStore, sql: str, start: Any) -> Any:
    """The rows of ``sql`` (``… WHERE key > ? ORDER BY key LIMIT ?``, the key first), BATCH at a time, from
    ``start`` on."""
    after = start
    while True:
        rows = src._rows(sql, (after, BATCH))
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def copy_store(src: EventStore, dst: EventStore) -> CopyReport:
    """Copy every row of ``src`` into ``dst`` (see the module). :class:`StoreError` (``dst`` unchanged) when
    ``dst`` already holds a session or an event, or a write fails."""
    if dst.count_events() or dst.sessions():
        raise StoreError("the destination store is not empty (it holds sessions or events); copy into a new one")
    counts = dict.fromkeys(
        ("sessions", "events", "artifacts", "kernel_records", "token_counts", "import_fingerprints"), 0
    )
    with dst._write() as db:
        sessions = src._rows(
            "SELECT id, parent_id, workspace, source, format, external_key, created_at, meta "
            "FROM sessions ORDER BY rowid"
        )
        for r in sessions:  # parents after: a child may have been created before its parent
            db.execute(
                "INSERT INTO sessions(id, parent_id, workspace, source, format, external_key, created_at, "
                "meta) VALUES (?, NULL, ?, ?, ?, ?, ?, ?)",
                (r[0], *r[2:]),
            )
        for r in sessions:
            if r[1] is not None:
                db.execute("UPDATE sessions SET parent_id = ? WHERE id = ?", (r[1], r[0]))
        counts["sessions"] = len(sessions)
        for rows in _batches(
            src,
            "SELECT seq, session_id, kind, payload, source_ref, ts FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            0,
        ):
            db.executemany(
                "INSERT INTO events(seq, session_id, kind, payload, source_ref, ts) VALUES (?, ?, ?, ?, ?, ?)", rows
            )
            dst._index_locked([(r[0], decode_event(r[2], r[3]).searchable_text()) for r in rows])
            counts["events"] += len(rows)
        for rows in _batches(
            src,
            "SELECT sha256, media_type, byte_size, width, height, data, created_at FROM "
            "artifacts WHERE sha256 > ? ORDER BY sha256 LIMIT ?",
            "",
        ):
            db.executemany(
                "INSERT INTO artifacts(sha256, media_type, byte_size, width, height, data, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(*r[:5], bytes(r[5]), r[6]) for r in rows],
            )
            counts["artifacts"] += len(rows)
        for rows in _batches(
            src,
            "SELECT id, session_id, stream, kind, at_seq, payload FROM kernel_records WHERE id > ? ORDER BY id LIMIT ?",
            0,
        ):
            db.executemany(
                "INSERT INTO kernel_records(id, session_id, stream, kind, at_seq, payload) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            counts["kernel_records"] += len(rows)
        rows = src._rows("SELECT session_id, tokenizer, seq, digest, tokens FROM token_counts")
        if rows:
            db.executemany(
                "INSERT INTO token_counts(session_id, tokenizer, seq, digest, tokens) VALUES (?, ?, ?, ?, ?)", rows
            )
        counts["token_counts"] = len(rows)
        rows = src._rows("SELECT path, options, sha256, size, keys, recorded_at FROM import_fingerprints")
        if rows:
            db.executemany(
                "INSERT INTO import_fingerprints(path, options, sha256, size, keys, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
        counts["import_fingerprints"] = len(rows)
        for table in ("events", "kernel_records"):  # numbers a skipped duplicate used up stay used
            dst._set_sequence_locked(table, src._sequence(table))
        for p in PROJECTIONS.values():  # a cache: rebuilt from the copied log, in the same transaction
            db.execute("DELETE FROM projection_marks WHERE name = ?", (p.name,))
            dst._sync_projection_locked(p)
    return CopyReport(**counts, max_seq=dst.max_seq(), next_seq=dst._sequence("events") + 1)
