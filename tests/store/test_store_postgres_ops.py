"""Operating the PostgreSQL store against a real server (tests/pg_support.py): a read-only open (as SQLite's), a
connection lost in the middle of a batch (the backend terminated, the server killed) leaving nothing of it and the
next append working, and the named migrations run once by several processes opening a new database at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import psycopg
import pytest
from pg_support import wait_for

from latch.events import UserMessage
from latch.store import EventStore, StoreError
from latch.store.migrations import MIGRATIONS

pytestmark = pytest.mark.slow


def _filled(url: str) -> str:
    with EventStore(url) as s:
        sid = s.create_session(external_key="ro")
        s.append(sid, [UserMessage("the invoice rounding"), UserMessage("off by a cent")])
    return sid


def test_a_read_only_open_reads_and_writes_nothing(pg_url):
    sid = _filled(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as raw:
        before = raw.execute("SELECT count(*) FROM events").fetchone()
        raw.execute("DELETE FROM projection_marks")  # a cache behind the log: a read-only open leaves it so
    with EventStore(pg_url, read_only=True) as ro:
        assert ro.read_only
        assert [e.event.text for e in ro.search("cent")] == ["off by a cent"]
        assert [e.seq for e, _ in ro.search_hits("invoice", order="relevance")] == [1]
        assert [s.id for s in ro.sessions()] == [sid]
        with pytest.raises(StoreError, match="read-only"):
            ro.append(sid, [UserMessage("no")])
        with pytest.raises(StoreError, match="read-only"):
            ro.create_session(external_key="new")
        with pytest.raises(StoreError, match="read-only"):
            ro.read_projection("group", [("SELECT count(*) FROM group_tasks", ())])
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):  # the server refuses the session's writes too
            ro._db.execute("INSERT INTO latch_sequence(name, seq) VALUES ('x', 1)")
    with psycopg.connect(pg_url, autocommit=True) as raw:
        assert raw.execute("SELECT count(*) FROM events").fetchone() == before
        assert raw.execute("SELECT count(*) FROM projection_marks").fetchone() == (0,)
        assert raw.execute("SELECT count(*) FROM latch_sequence WHERE name = 'x'").fetchone() == (0,)


def test_a_read_only_open_of_a_store_that_needs_a_migration_says_so(pg_cluster):
    url = pg_cluster.new_database()
    with pytest.raises(StoreError, match=f"read-only and needs a migration \\({len(MIGRATIONS)} pending, first m001"):
        EventStore(url, read_only=True)
    with psycopg.connect(url) as raw:  # nothing created
        assert raw.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchone() == (0,)


def test_a_role_that_may_only_select_opens_read_only(pg_cluster):
    url = pg_cluster.new_database()
    _filled(url)
    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("DROP ROLE IF EXISTS reader")
        raw.execute("CREATE ROLE reader LOGIN")
        raw.execute(f"GRANT USAGE ON SCHEMA {schema} TO reader")
        raw.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO reader")
    reader = url.replace("postgres@", "reader@")
    with pytest.raises(StoreError, match="permission denied"):
        EventStore(reader)
    with EventStore(reader, read_only=True) as ro:
        assert [e.event.text for e in ro.events()] == ["the invoice rounding", "off by a cent"]


def _in_write_transaction(url: str, pid: int) -> bool:
    with psycopg.connect(url, autocommit=True) as probe:
        return bool(
            probe.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s AND granted", (pid,)
            ).fetchone()[0]
        )


BATCH = [UserMessage(f"event {i} of a batch that is lost with its connection") for i in range(30_000)]


def _lose_a_batch(url: str, cut) -> tuple[EventStore, str, list[BaseException]]:  # type: ignore[no-untyped-def]
    s = EventStore(url)
    sid = s.create_session(external_key="lost")
    assert s.append(sid, [UserMessage("kept")]) == [1]
    with psycopg.connect(url, autocommit=True) as raw:  # the test cluster commits asynchronously: flush it
        raw.execute("CHECKPOINT")
    pid = s._db.conn.info.backend_pid
    errors: list[BaseException] = []

    def append() -> None:
        try:
            s.append(sid, BATCH)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    writer = threading.Thread(target=append)
    writer.start()
    assert wait_for(lambda: _in_write_transaction(url, pid), 30), "the batch never started"
    time.sleep(0.2)  # well inside it
    cut(pid)
    writer.join(60)
    return s, sid, errors


def _after_the_loss(s: EventStore, sid: str, errors: list[BaseException]) -> None:
    assert len(errors) == 1 and isinstance(errors[0], StoreError), errors
    assert "\n" not in str(errors[0])
    assert [e.event.text for e in s.events()] == ["kept"]  # none of the batch
    assert s.append(sid, [UserMessage("next")]) == [2]  # its numbers were given back; a new connection
    assert [e.event.text for e in s.search("next")] == ["next"] and s.search("batch") == []
    s.close()


def test_a_connection_terminated_mid_batch_leaves_nothing_of_it(pg_cluster):
    url = pg_cluster.new_database()

    def terminate(pid: int) -> None:
        with psycopg.connect(url, autocommit=True) as other:
            assert other.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)

    _after_the_loss(*_lose_a_batch(url, terminate))


def test_a_server_killed_mid_batch_leaves_nothing_of_it(pg_cluster):
    url = pg_cluster.new_database()

    def kill(pid: int) -> None:
        pg_cluster.stop("immediate")  # no shutdown: what a crash leaves
        pg_cluster.start()

    _after_the_loss(*_lose_a_batch(url, kill))


OPEN = textwrap.dedent("""
    import os, sys, time
    from latch.store import EventStore
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.005)
    with EventStore(sys.argv[1]) as s:
        print(len(s.applied_migrations()))
""")


def test_migrations_run_once_when_processes_open_a_new_database_at_once(pg_cluster, tmp_path):
    url = pg_cluster.new_database()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", OPEN, url, str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    time.sleep(2.0)  # every process has imported Latch and waits
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, o.decode().strip(), e.decode()) for p, (o, e) in zip(procs, outs, strict=True)] == [
        (0, str(len(MIGRATIONS)), "")
    ] * 4
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT name) FROM _latch_migrations").fetchone() == (
            len(MIGRATIONS),
            len(MIGRATIONS),
        )
        assert [r[0] for r in conn.execute("SELECT name FROM _latch_migrations ORDER BY rowid")] == [
            n for n, _ in MIGRATIONS
        ]
