"""The FTS5 settings the store keeps with its index (``latch.store.migrations.FTS_HASHSIZE``): a new store has
them, a store made before gets them at its next open (events and index unchanged), and a batch larger than FTS5's
default in-memory budget is indexed whole and stays consistent."""

from __future__ import annotations

from latch.events import ToolResult, UserMessage
from latch.store import EventStore
from latch.store.migrations import FTS_HASHSIZE


def _hashsize(store: EventStore) -> int | None:
    row = store._db.execute("SELECT v FROM events_fts_config WHERE k = 'hashsize'").fetchone()
    return None if row is None else int(row[0])


def test_a_new_store_keeps_the_fts_settings(tmp_path):
    with EventStore(tmp_path / "s.db") as s:
        assert _hashsize(s) == FTS_HASHSIZE == 16 * 1024 * 1024


def test_a_store_from_before_gets_them_at_open_and_keeps_its_index(tmp_path):
    path = tmp_path / "old.db"
    with EventStore(path) as s:
        sid = s.create_session(external_key="old")
        seqs = s.append(sid, [UserMessage("rounding bug in invoice.py"), ToolResult("c1", "pytest passed")])
        s._db.execute("DELETE FROM events_fts_config WHERE k = 'hashsize'")  # as a store made before left it
        assert _hashsize(s) is None
        applied = s.applied_migrations()
    with EventStore(path) as s:
        assert _hashsize(s) == FTS_HASHSIZE
        assert s.applied_migrations() == applied  # a setting, not a migration
        assert [h.seq for h in s.search("rounding")] == [seqs[0]]
        assert [h.seq for h in s.search("invoice.py")] == [seqs[0]]
        assert [h.seq for h in s.search("pytest")] == [seqs[1]]
        assert s.quick_check() == []


def test_a_batch_above_the_default_budget_is_indexed_whole(tmp_path):
    # about 4 MiB of prepared text in one transaction: FTS5's default budget (1 MiB) would have written it out
    # in pieces during the transaction
    words = " ".join(f"word{i}" for i in range(400))
    batch = [UserMessage(f"event{i} {words} token{i % 97}") for i in range(1_500)]
    with EventStore(tmp_path / "s.db") as s:
        sid = s.create_session(external_key="big")
        seqs = s.append(sid, batch)
        assert [h.seq for h in s.search("event0")] == [seqs[0]]
        assert [h.seq for h in s.search("event1499")] == [seqs[-1]]
        assert len(s.search("token5", limit=100)) == len([i for i in range(1_500) if i % 97 == 5])
        assert s.quick_check() == []
