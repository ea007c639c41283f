"""The event store on PostgreSQL (latch.store.postgres) against a real server (tests/pg_support.py).

The store, recall and invariant tests that take a ``store`` run on both backends (tests/store_backends.py); the
parity tests write the same batches to both backends and compare every event and every
recall hit; the rest pin what only the server has (the advisory-locked migrations, the triggers, the redacted
password, a reconnect after a restart).
"""

from __future__ import annotations

import threading

import psycopg
import pytest

from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.store import EventStore, PendingEvent, StoreError
from latch.store.migrations import MIGRATIONS
from latch.store.postgres import PostgresEventStore, redact

pytestmark = pytest.mark.slow


@pytest.fixture
def store(pg_url):
    s = EventStore(pg_url)
    assert isinstance(s, PostgresEventStore)
    yield s
    s.close()


TEXTS = [
    "Fix the C++ build: node.js v1.2.3 fails in os.path.join on main.py",
    "café crème brûlée — naïve résumé CAFÉ",
    "大数据库 的 数据 migration 完成 ✓ fix🔥now 👩‍💻",
    "E   AssertionError: invoice INV-2024-0917 total 1043.365 rounded to 1043.37",
    "src/pkg7/mod3.py:41: TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    'the .NET runtime and C# compiler; rust_lib::parse() returned Err("bad")',
    "Straße STRASSE strasse ﬁle file ǅemal",
    "ﬁnance report for Q3",  # a ligature: its token key is "finance", FTS5's token is not
    "",  # no searchable text: not indexed on either backend
]
QUERIES = [
    "node.js",
    "C++",
    "os.path",
    "cafe",
    "CAFÉ",
    "brulee",
    "数据",
    "🔥",
    "👩‍💻",
    "INV-2024-0917",
    "1043.37",
    "src/pkg7/mod3.py",
    "TypeError unsupported",
    ".NET",
    "C#",
    "rust_lib",
    "parse()",
    "strasse",
    "file",
    "fix",
    "v1.2.3",
    "main.py",
    "the",
    "AND",
    "NEAR(",
    '"quoted"',
    "ǆemal",
    "résumé naïve",
    "zzz-nothing",
    "finance",
    "py/main",
    "join/os",
    "0/round",
    "round/0",
]  # keys present, FTS5 says no: verification decides


def _fill(store: EventStore) -> list[int]:
    a = store.create_session(external_key="parity:a")
    b = store.create_session(external_key="parity:b", parent_id=a, meta={"title": "child"})
    seqs: list[int] = []
    for i in range(3):
        for j, text in enumerate(TEXTS):
            sid = a if (i + j) % 2 else b
            call = ToolCall(f"c{i}{j}", "Bash", '{"command": "grep -rn parse src"}')
            seqs += store.append(
                sid,
                [
                    PendingEvent(UserMessage(text), source_ref=f"u{i}.{j}", ts=f"2026-01-0{i + 1}"),
                    AssistantMessage(f"looking at {text[:20]}", (call,)),
                    ToolResult(f"c{i}{j}", text + f" round {i}", is_error=bool(j % 2)),
                ],
            )
    assert store.append(b, [PendingEvent(UserMessage("dup"), source_ref="u0.0")]) == []  # stored already
    seqs += store.append(a, [UserMessage("after the duplicate")])  # SQLite used a seq up for it: so does PostgreSQL
    return seqs


def _events(store: EventStore) -> list[tuple]:
    return [(e.seq, e.session_id, e.kind, e.event.to_payload(), e.source_ref, e.ts) for e in store.events()]


def test_parity_same_events_and_same_recall_hits(tmp_path, pg_url):
    lite, pg = EventStore(tmp_path / "latch.db"), EventStore(pg_url)
    try:
        assert _fill(lite) == _fill(pg)
        for s in (lite, pg):  # a duplicate inside one batch uses a seq up on both backends
            sid = s.sessions()[0].id
            assert s.append(
                sid,
                [
                    PendingEvent(UserMessage("x"), source_ref="r"),
                    PendingEvent(UserMessage("x"), source_ref="r"),
                    UserMessage("z"),
                ],
            ) == [9 * len(TEXTS) + 3, 9 * len(TEXTS) + 5]
        assert _events(lite) == _events(pg) and len(_events(pg)) == 3 * len(TEXTS) * 3 + 3
        assert [(s.id, s.parent_id, s.meta, s.events, s.first_seq, s.last_seq) for s in lite.sessions()] == [
            (s.id, s.parent_id, s.meta, s.events, s.first_seq, s.last_seq) for s in pg.sessions()
        ]
        found = 0
        for q in QUERIES:
            for kw in (
                {},
                {"mode": "or"},
                {"limit": 2},
                {"session_id": lite.sessions()[0].id},
                {"before_seq": 40},
                {"exclude_sessions": [lite.sessions()[1].id]},
            ):
                want = [e.seq for e in lite.search(q, **kw)]
                assert [e.seq for e in pg.search(q, **kw)] == want, (q, kw)
                found += bool(want)
            want_hits = [e.seq for e, _ in lite.search_hits(q)]
            assert [e.seq for e, _ in pg.search_hits(q)] == want_hits, q
        for call_id in ("c01", "c22", "nope"):
            for kw in ({}, {"kinds": ["tool_result"]}, {"session_id": lite.sessions()[1].id}):
                want = [e.seq for e in lite.call_events(call_id, **kw)]
                assert [e.seq for e in pg.call_events(call_id, **kw)] == want, (call_id, kw)
        assert len(lite.call_events("c01")) == 2
        assert found > 100  # the battery finds things, not only nothing on both sides
    finally:
        lite.close()
        pg.close()


def test_parity_group_projection_and_kernel_records(tmp_path, pg_url):
    from latch.events import GroupMessageQueued, GroupTaskClaimed, GroupTaskCompleted, GroupTaskCreated

    queries = [
        ("SELECT task_id, owner, status, attempt, summary FROM group_tasks ORDER BY pos", ()),
        ("SELECT message_id, sender, recipient, delivered FROM group_messages ORDER BY pos", ()),
    ]
    out = []
    for s in (EventStore(tmp_path / "latch.db"), EventStore(pg_url)):
        root = s.create_session(external_key="group:root")
        s.append(
            root,
            [
                GroupTaskCreated(task_id="t1", title="one", brief="do one", depends_on=()),
                GroupTaskCreated(task_id="t2", title="two", brief="do two", depends_on=("t1",)),
                GroupTaskClaimed(task_id="t1", agent="w1", attempt=0, lease_seconds=30.0, at=1.0),
                GroupMessageQueued(message_id="m1", sender="w1", recipient="lead", text="hi"),
            ],
        )
        s.append(root, [GroupTaskCompleted(task_id="t1", agent="w1", status="done", summary="ok", session_id=None)])
        ids = s.append_kernel_records(root, "main", [("snapshot", 1, {"a": 1}), ("delta", 2, {"b": [1, 2]})])
        out.append((s.read_projection("group", queries), ids, s.kernel_records(root, "main"), s.kernel_streams(root)))
        s.close()
    assert [list(map(tuple, rows)) for rows in out[0][0]] == [list(map(tuple, rows)) for rows in out[1][0]]
    assert out[0][0][0][0][:3] == ("t1", "w1", "done")
    assert out[0][1:] == out[1][1:]


def test_migrations_same_names_in_order_once_under_concurrency(pg_cluster):
    url = pg_cluster.new_database()
    errors: list[BaseException] = []
    stores: list[EventStore] = []

    def open_one() -> None:
        try:
            stores.append(EventStore(url))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(stores) == 4
    assert stores[0].applied_migrations() == [n for n, _ in MIGRATIONS]
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT name) FROM _latch_migrations").fetchone() == (
            len(MIGRATIONS),
            len(MIGRATIONS),
        )
    for s in stores:
        s.close()


def test_server_refuses_update_delete_and_truncate_of_the_log(store):
    sid = store.create_session(external_key="a")
    store.append(sid, [UserMessage("keep me")])
    store.append_kernel_records(sid, "s", [("k", 1, {})])
    with psycopg.connect(store._dsn, autocommit=True) as raw:
        for sql in (
            "UPDATE events SET payload = '{}'",
            "DELETE FROM events",
            "TRUNCATE events CASCADE",
            "UPDATE kernel_records SET kind = 'x'",
            "DELETE FROM kernel_records",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                raw.execute(sql)
    assert [e.event.text for e in store.events(sid)] == ["keep me"]


def test_concurrent_writers_get_gap_free_ordered_seqs(pg_url):
    stores = [EventStore(pg_url) for _ in range(3)]
    sid = stores[0].create_session(external_key="w")
    got: list[list[int]] = [[] for _ in stores]

    def write(i: int) -> None:
        for n in range(20):
            got[i] += stores[i].append(sid, [UserMessage(f"w{i} n{n} a"), UserMessage(f"w{i} n{n} b")])

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = sorted(s for g in got for s in g)
    assert every == list(range(1, 121))
    for g in got:  # each batch is two consecutive seqs: no other writer's event between them
        assert all(g[k + 1] == g[k] + 1 for k in range(0, len(g), 2))
    for s in stores:
        s.close()


def test_password_is_redacted_in_url_and_errors(pg_cluster):
    assert (
        redact("postgresql://u:s3cret@h:5/db?sslmode=disable&password=x") == "postgresql://u:***@h:5/db?sslmode=disable"
    )
    url = pg_cluster.url("no_such_db").replace("postgres@", "postgres:s3cret@")
    with pytest.raises(StoreError) as err:
        EventStore(url)
    assert "s3cret" not in str(err.value) and "no_such_db" in str(err.value) and "***" in str(err.value)


def test_a_database_of_another_program_is_left_unchanged(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("CREATE TABLE orders (id int)")
    with pytest.raises(StoreError, match="another program.*orders"):
        EventStore(pg_url)
    with psycopg.connect(pg_url) as raw:
        assert raw.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchone() == (1,)


def test_a_server_restart_is_survived_by_reconnecting(pg_cluster):
    url = pg_cluster.new_database()
    s = EventStore(url)
    sid = s.create_session(external_key="r")
    s.append(sid, [UserMessage("before restart")])
    pg_cluster.stop()
    pg_cluster.start()
    with pytest.raises(StoreError):  # the connection the store held is gone: one clear error, then a new one
        s.append(sid, [UserMessage("lost")])
    assert s.append(sid, [UserMessage("after restart")]) == [2]
    assert [e.event.text for e in s.search("restart")] == ["after restart", "before restart"]
    s.close()


def _snapshot(s: EventStore) -> tuple:
    root = s.sessions()[0].id
    return (
        _events(s),
        [(x.id, x.parent_id, x.external_key, x.meta, x.created_at) for x in s.sessions()],
        s.kernel_records(root, "main"),
        s.get_artifact(s.put_artifact(b"\x00png", "image/png").sha256),
        [[e.seq for e in s.search(q)] for q in QUERIES],
        s.read_projection("group", [("SELECT task_id, owner, status FROM group_tasks ORDER BY pos", ())]),
    )


def test_store_copy_between_backends_keeps_every_event_and_seq(tmp_path, pg_url):
    from click.testing import CliRunner

    from latch.cli.main import cli
    from latch.events import GroupTaskClaimed, GroupTaskCreated

    first = EventStore(tmp_path / "a.db")
    _fill(first)
    root = first.sessions()[0].id
    first.append(
        root,
        [
            GroupTaskCreated(task_id="t1", title="one", brief="b"),
            GroupTaskClaimed(task_id="t1", agent="w1", attempt=0, lease_seconds=None, at=1.0),
        ],
    )
    first.append_kernel_records(root, "main", [("snapshot", 3, {"x": [1, "é"]})])
    counted = first.max_seq(root)
    first.put_token_counts(root, "tok", [(counted, "d1", 7)])
    want = _snapshot(first)
    first.close()
    secret = pg_url.replace("postgres@", "postgres:s3cret@")
    runner = CliRunner()
    out = runner.invoke(cli, ["store", "copy", str(tmp_path / "a.db"), secret])
    assert out.exit_code == 0, out.output
    last = want[0][-1][0]  # seq 73 was used up by the skipped duplicate: the log has 74 events up to seq 75
    assert "s3cret" not in out.output and f"{len(want[0])} events (seq 1..{last})" in out.output
    again = runner.invoke(cli, ["store", "copy", str(tmp_path / "a.db"), secret])
    assert again.exit_code == 1 and "not empty" in again.output and "s3cret" not in again.output
    back = runner.invoke(cli, ["store", "copy", secret, str(tmp_path / "b.db")])
    assert back.exit_code == 0, back.output
    for db in (pg_url, tmp_path / "b.db"):
        with EventStore(db) as s:
            assert _snapshot(s) == want
            assert s.token_counts(root, "tok") == {(counted, "d1"): 7}
            assert s.append(root, [UserMessage("next")]) == [last + 1]  # the seq goes on from the copy


def test_doctor_and_commands_on_a_postgresql_store(pg_url, tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from latch.cli.main import cli

    monkeypatch.setenv("LATCH_HOME", str(tmp_path / "home"))
    secret = pg_url.replace("postgres@", "postgres:s3cret@")
    with EventStore(pg_url) as s:
        _fill(s)
    runner = CliRunner()
    doctor = runner.invoke(cli, ["--db", secret, "doctor", "--json"])
    assert "s3cret" not in doctor.output
    info = json.loads(doctor.output)
    assert info["store_backend"] == "postgresql" and info["store_error"] is None
    assert info["server_version"].split(".")[0].isdigit() and info["db"].startswith("postgresql://postgres:***@")
    assert info["migrations_applied"] == len(MIGRATIONS) and info["migrations_pending"] == []
    listed = runner.invoke(cli, ["--db", secret, "sessions", "--json"])
    assert listed.exit_code == 0 and len(json.loads(listed.output)) == 2
    found = runner.invoke(cli, ["--db", secret, "search", "node.js"])
    assert found.exit_code == 0 and "6 hits" in found.output and "s3cret" not in found.output
