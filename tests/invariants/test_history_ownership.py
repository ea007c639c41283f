"""Invariant tier: durable history ownership (spec: "Port boundary", "Cache epochs and working memory",
"File state and compaction").

The engine reads the log and writes only its own kernel records: materializing, rotating and
/compact never add, change or delete a conversation event, and every raw event stays retrievable.
"""

from __future__ import annotations

import sqlite3

import pytest
from invariant_helpers import STREAM, continuity, grow, kernel_streams, new_session, request, rows_digest
from store_backends import raw_connection, refused

from latch.engine.continuity import RECORD_KINDS
from latch.events import UserMessage


def test_materialize_rotate_and_compact_leave_the_event_log_byte_identical(store):
    sid = new_session(store)
    store.append(sid, [UserMessage("Early note: the ledger export uses cp1252 (remember this: zq-ledger-cp1252).")])
    engine = continuity(store, sid)
    epochs = set()

    def check(i):
        before = rows_digest(store)
        view = engine.materialize(request(sid))
        epochs.add(view.epoch)
        assert rows_digest(store) == before, f"request {i}: materialize changed the event log"

    grow(store, sid, engine, 40, between=check)
    before = rows_digest(store)
    engine.manual_compact("test")
    after_compact = engine.materialize(request(sid))
    assert rows_digest(store) == before
    assert after_compact.metrics["rotation_reason"] == "manual_compact"
    assert len(epochs) >= 3, f"the small budget should rotate several epochs, saw {sorted(epochs)}"

    # Everything appended is still there, in order, and an early fact is still found by exact search.
    n, _ = before
    assert store.count_events(sid) == n == store.max_seq(sid)
    early = store.search("zq-ledger-cp1252", session_id=sid)
    assert [e.seq for e in early] == [1]
    # The engine's only writes are its own records, in its own stream.
    assert kernel_streams(store) <= {(STREAM, k) for k in RECORD_KINDS}
    assert {k for _, k in kernel_streams(store)} >= {
        "epoch",
        "kernel_context",
        "materialization",
        "manual_compact",
    }


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM events",
        "UPDATE events SET payload = '{}'",
        "DELETE FROM kernel_records",
        "UPDATE kernel_records SET kind = 'x'",
    ],
)
def test_the_database_refuses_to_rewrite_history(store, sql):
    sid = new_session(store)
    engine = continuity(store, sid)
    grow(store, sid, engine, 3)
    db = raw_connection(store)
    try:
        with pytest.raises(refused(store), match="append-only"):
            db.execute(sql)
    finally:
        db.close()


def test_the_port_hands_the_engine_no_store_or_sqlite_handle(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    reachable = [v for v in vars(engine).values()]
    for obj in reachable:
        assert not isinstance(obj, (sqlite3.Connection, type(store))), type(obj)
    reader, writer = engine._reader, engine._writer
    public = {name for name in dir(reader) if not name.startswith("_")}
    assert public == {"session_id", "events", "search", "max_seq", "get_artifact", "canonical_state"}
    assert {name for name in dir(writer) if not name.startswith("_")} == {
        "session_id",
        "stream",
        "append",
        "append_many",
        "records",
    }
