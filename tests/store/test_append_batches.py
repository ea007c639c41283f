"""EventStore appends as set-based statements: seqs, skipped duplicates and index rows of a batch, and the
events table's indexes after migrations ``m011_events_kind_indexes`` (each read's query plan) and
``m012_events_source_ref_partial_index`` (a store from before keeps every event, seq, counter and token count)."""

from __future__ import annotations

import sqlite3

import pytest

from latch.events import EVENT_KINDS, GroupMemberJoined, GroupTaskCreated, ToolResult, UserMessage
from latch.store import EventStore, PendingEvent, StoreError
from latch.store.event_store import encode_events
from latch.store.migrations import MIGRATIONS, PROJECTED_KINDS_SQL
from latch.store.projections import PROJECTIONS


@pytest.fixture()
def store(tmp_path):
    with EventStore(tmp_path / "s.db") as s:
        yield s


def test_a_batch_with_skipped_duplicates_returns_the_seqs_of_what_it_stored(store):
    sid, first = store.import_session(
        external_key="fmt:x",
        source="f",
        format="fmt",
        workspace=None,
        events=[PendingEvent(UserMessage("alpha stored"), "line:1")],
    )
    batch = [
        PendingEvent(UserMessage("beta unreferenced")),  # no source_ref: always stored
        PendingEvent(UserMessage("alpha again"), "line:1"),  # already stored: skipped
        PendingEvent(UserMessage("gamma first"), "line:2"),
        PendingEvent(UserMessage("gamma repeated"), "line:2"),  # repeated in the batch: skipped
        PendingEvent(UserMessage("delta unreferenced")),
        PendingEvent(UserMessage("epsilon last"), "line:3"),
    ]
    _, seqs = store.import_session(external_key="fmt:x", source="f", format="fmt", workspace=None, events=batch)
    assert len(seqs) == 4 and seqs == sorted(seqs) and seqs[0] == first[0] + 1
    got = {e.seq: (e.event.text, e.source_ref) for e in store.events(sid)}
    assert [got[s] for s in seqs] == [
        ("beta unreferenced", None),
        ("gamma first", "line:2"),
        ("delta unreferenced", None),
        ("epsilon last", "line:3"),
    ]
    # each stored event is found by its own words, and no skipped one was indexed
    for seq, word in zip(seqs, ("beta", "gamma", "delta", "epsilon"), strict=True):
        assert [e.seq for e in store.search(word, session_id=sid)] == [seq]
    assert store.search("repeated") == [] and store.search("again") == []
    assert [e.seq for e in store.search("alpha")] == first


def test_an_event_that_cannot_be_encoded_leaves_the_store_unchanged(store):
    sid = store.create_session(external_key="bad")
    store.append(sid, [UserMessage("kept")])
    with pytest.raises(StoreError, match="cannot append"):
        store.append(sid, [UserMessage("never"), ToolResult("c1", "x", exit_code=float("nan"))])
    assert [e.event.text for e in store.events(sid)] == ["kept"] and store.search("never") == []


def test_encoded_rows_hold_canonical_payloads_and_prepared_text():
    rows = encode_events([UserMessage("C++ and node.js"), PendingEvent(ToolResult("c1", ""), "line:9", "t0")]).rows
    assert rows[0][0] == "user_message" and rows[0][2:4] == (None, None)
    assert rows[0][1] == '{"is_meta":false,"media":[],"text":"C++ and node.js"}'
    assert rows[0][4] == "C\ue02b\ue02b C++ and node.js\nnode\ue02ejs"
    assert rows[1][0] == "tool_result" and rows[1][2:] == ("line:9", "t0", None)  # no searchable text: no FTS row


def _indexes(db: sqlite3.Connection) -> list[str]:
    return sorted(
        r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'")
    )


def test_the_kind_indexes_are_replaced_by_one_partial_index(tmp_path):
    with EventStore(tmp_path / "s.db") as s:
        assert "m011_events_kind_indexes" in [name for name, _ in MIGRATIONS]
        assert _indexes(s._db) == ["events_projected_kind_seq", "events_session_seq", "events_session_source_ref"]
        sid = s.create_session(external_key="g")
        s.append(sid, [UserMessage("hello")] * 3 + [GroupMemberJoined("a1", None), GroupTaskCreated("t1", "T", "b")])
        # only the projected kinds' rows are in the partial index
        assert (
            s._db.execute(
                f"SELECT count(*) FROM events INDEXED BY events_projected_kind_seq WHERE {PROJECTED_KINDS_SQL}"
            ).fetchone()[0]
            == 2
        )


def test_the_partial_index_holds_exactly_the_projected_kinds():
    db = sqlite3.connect(":memory:")
    projected = {k for p in PROJECTIONS.values() for k in p.kinds}
    indexed = {
        k
        for k in EVENT_KINDS
        if db.execute(f"SELECT {PROJECTED_KINDS_SQL} FROM (SELECT ? AS kind)", (k,)).fetchone()[0]
    }
    assert projected and indexed == projected


def _plan(db: sqlite3.Connection, sql: str, args: tuple[object, ...] = ()) -> str:
    return "; ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql, args))


def test_each_read_of_the_events_table_keeps_an_index(store):
    db = store._db
    fresh = f"SELECT max(seq) FROM events WHERE {PROJECTED_KINDS_SQL} AND kind = ?"
    assert "USING COVERING INDEX events_projected_kind_seq (kind=?)" in _plan(db, fresh, ("group_task_created",))
    assert "events_session_seq (session_id=? AND seq>?)" in _plan(
        db,
        "SELECT seq FROM events WHERE seq > ? AND session_id = ? AND kind IN (?, ?) ORDER BY seq",
        (0, "s", "user_message", "tool_result"),
    )
    assert "USING INTEGER PRIMARY KEY (rowid>?)" in _plan(
        db, "SELECT seq FROM events WHERE seq > ? AND kind IN (?, ?) ORDER BY seq", (0, "a", "b")
    )
    assert "events_session_seq (session_id=?)" in _plan(db, "SELECT count(*) FROM events WHERE session_id = ?", ("s",))


def test_a_store_from_before_the_migration_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    with EventStore(path) as s:
        sid = s.create_session(external_key="old")
        s.append(sid, [UserMessage("before"), GroupMemberJoined("a1", None)])
        db = s._db
        # put the store back as m010 left it: the two kind indexes, no partial one, m011 not applied
        db.execute("DROP INDEX events_projected_kind_seq")
        db.execute("CREATE INDEX events_kind ON events(kind, session_id)")
        db.execute("CREATE INDEX events_kind_seq ON events(kind, seq)")
        db.execute("DELETE FROM _latch_migrations WHERE name = 'm011_events_kind_indexes'")
    with EventStore(path) as s:
        assert s.applied_migrations()[-1] == "m011_events_kind_indexes"
        assert _indexes(s._db) == ["events_projected_kind_seq", "events_session_seq", "events_session_source_ref"]
        assert [e.event.text for e in s.events(sid, kinds=["user_message"])] == ["before"]
        assert not s.sync_projection("group")  # its mark is current: the freshness check reads the new index


def test_dots_that_end_sentences_add_no_terms_and_dotted_terms_still_do():
    from latch.store.fts import dotted_terms, prepare_text

    assert prepare_text("Done. Next step: x + 2.") == "Done. Next step: x + 2." and dotted_terms("Done. Again.") == []
    assert dotted_terms("Done. Now see node.js. Then .NET.") == ["node\ue02ejs"]
    assert prepare_text("Then .NET.") == "Then  \ue02eNET .NET."


def _store_as_m011_left_it(path) -> None:
    """A store file that migrations m001..m011 made: events with and without source_ref, a duplicate skipped at the
    end (AUTOINCREMENT's counter above the largest seq), their FTS rows and a token count."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("CREATE TABLE _latch_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, fn in MIGRATIONS[: [n for n, _ in MIGRATIONS].index("m011_events_kind_indexes") + 1]:
        fn(db)
        db.execute("INSERT INTO _latch_migrations VALUES (?, '2026-12-01T00:00:00Z')", (name,))
    db.execute("INSERT INTO sessions(id, created_at) VALUES ('s1', '2026-12-01T00:00:00Z')")
    batch = [PendingEvent(UserMessage("first line"), source_ref="line:1"), UserMessage("no ref")]
    batch += [PendingEvent(ToolResult("c1", "pytest passed"), source_ref="line:2")]
    batch += [PendingEvent(UserMessage("again"), source_ref="line:1")]  # skipped: uses seq 4 up
    for kind, payload, ref, ts, text in encode_events(batch).rows:
        cur = db.execute(
            "INSERT INTO events(session_id, kind, payload, source_ref, ts) VALUES ('s1', ?, ?, ?, ?) "
            "ON CONFLICT(session_id, source_ref) DO NOTHING",
            (kind, payload, ref, ts),
        )
        if cur.rowcount:
            db.execute("INSERT INTO events_fts(rowid, text) VALUES (?, ?)", (cur.lastrowid, text))
    db.execute("INSERT INTO token_counts VALUES ('s1', 'cl100k', 3, 'd', 7)")
    assert db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()[0] == 4
    assert _indexes(db) == ["events_projected_kind_seq", "events_session_seq", "sqlite_autoindex_events_1"]
    db.close()


def test_a_store_from_before_the_partial_source_ref_index_keeps_everything(tmp_path):
    path = tmp_path / "old.db"
    _store_as_m011_left_it(path)
    with EventStore(path) as s:
        db = s._db
        assert s.applied_migrations()[-1] == "m012_events_source_ref_partial_index"
        assert _indexes(db) == ["events_projected_kind_seq", "events_session_seq", "events_session_source_ref"]
        assert [(e.seq, e.source_ref) for e in s.events("s1")] == [(1, "line:1"), (2, None), (3, "line:2")]
        assert [h.seq for h in s.search("pytest")] == [3] and [h.seq for h in s.search("line")] == [1]
        assert s.token_counts("s1", "cl100k") == {(3, "d"): 7}
        assert s._sequence("events") == 4  # the number the skipped duplicate used stays used
        # the same rule: a stored source_ref is skipped, events without one never conflict
        new = [PendingEvent(UserMessage("dup"), source_ref="line:2"), UserMessage("no ref"), UserMessage("no ref")]
        assert s.append("s1", new) == [6, 7]
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("INSERT INTO events(session_id, kind, payload, source_ref) VALUES ('s1', 'k', '{}', 'line:1')")
        with pytest.raises(sqlite3.IntegrityError):  # foreign keys still hold
            db.execute("INSERT INTO events(session_id, kind, payload) VALUES ('nobody', 'k', '{}')")
        for sql in ("UPDATE events SET payload = '{}' WHERE seq = 1", "DELETE FROM events WHERE seq = 1"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(sql)
        assert "events_session_source_ref (session_id=? AND source_ref=?)" in _plan(
            db, "SELECT seq FROM events WHERE session_id = ? AND source_ref = ?", ("s1", "line:1")
        )
        assert s.quick_check() == []
