"""Agent groups on both backends (SQLite and a real PostgreSQL server, tests/pg_support.py): the same group
outcomes from the same operations, claims decided by a condition checked in the claim's own transaction, and
wake-ups of a waiting worker by the group's task changes only (LISTEN/NOTIFY on PostgreSQL, polling on SQLite),
also across a server restart."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time

import pytest
from fake_providers import Reply, serve_openai

from latch.agent.group import Group, GroupError, GroupState, new_message_id, reconnecting
from latch.events import AssistantMessage, GroupMessageDelivered, GroupMessageQueued, ToolCall, ToolResult
from latch.store import EventStore, LeaseLost, StoreError, StoreUnavailable, TaskFence
from latch.store.wakeups import ListenWakeups, PollingWakeups

pytestmark = pytest.mark.slow  # a real server


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """The ``--db`` of a new empty store on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "latch.db")
    return request.getfixturevalue("pg_url")


def _root(store: EventStore) -> str:
    return store.create_session(workspace="/w", source="latch run", format="latch")


def test_a_waiting_worker_is_woken_by_task_changes_and_never_by_a_message(db):
    """Another process (its own store connection, as on another host) changes the group while this one waits."""
    with EventStore(db) as here, EventStore(db) as there:
        root = _root(here)
        member = here.create_session(workspace="/w", source="latch run", format="latch", parent_id=root)
        g, other = Group(here, root), Group(there, root)
        with g.wakeups() as wake:
            assert isinstance(wake, ListenWakeups if db.startswith("postgresql") else PollingWakeups)
            other.send_message("lead", "w1", "a note for w1")
            other.join("w2", member)
            assert wake.wait(0.5) is False  # information alone wakes no one
            other.create_task("t1", "parse the logs")
            began = time.monotonic()
            assert wake.wait(30) is True and time.monotonic() - began < 5
            assert other.claim_task("t1", "w2", lease_seconds=60) is True
            assert wake.wait(30) is True  # a claim: who holds what changed
            assert other.renew_lease("t1", "w2") is True
            other.deliver("w1", member)
            assert wake.wait(0.5) is False  # a renewal and a delivery are no new work
            assert other.complete_task("t1", "w2", summary="parsed") is True
            assert wake.wait(30) is True  # a completion may make a dependent task claimable
            assert wake.wait(0.3) is False
            if isinstance(wake, ListenWakeups):
                assert (wake.notified, wake.reconnects) == (3, 0)


def test_wait_for_work_is_bounded_by_the_first_running_lease(db):
    """A lease running out is no event: the waiter wakes (``False``: not by a change) when it ends, in time to
    reclaim."""
    with EventStore(db) as store:
        g = Group(store, _root(store))
        g.create_task("t1", "run")
        assert g.claim_task("t1", "w1", lease_seconds=0.6) is True
        with g.wakeups() as wake:
            began = time.monotonic()
            assert g.wait_for_work(wake, max_wait=30) is False
            assert 0.3 < time.monotonic() - began < 10
        assert g.claim_next("w2", lease_seconds=5).attempt == 1  # the reclaim it woke up for


class _ReadBeforeTheRenewal(Group):
    """A reclaimer whose read of the group was taken before the owner's last renewal."""

    def __init__(self, store, root, stale):
        super().__init__(store, root)
        self._stale = stale

    def state(self):
        return copy.deepcopy(self._stale)


def test_a_reclaim_is_decided_by_the_lease_inside_its_own_transaction(db):
    with EventStore(db) as store:
        root = _root(store)
        g = Group(store, root)
        g.create_task("a", "write the parser")
        assert g.claim_task("a", "w1", lease_seconds=10, now=1000.0) is True
        stale = g.state()  # says: alive at 1000, so expired after 1010
        assert g.renew_lease("a", "w1", now=1008.0) is True  # alive until 1018
        late = _ReadBeforeTheRenewal(store, root, stale)
        assert late.reclaim_task("a", "w2", lease_seconds=10, now=1015.0) is False  # the renewal wins
        st = g.state()
        assert (st.tasks["a"].owner, st.tasks["a"].attempt) == ("w1", 0)
        assert [e.event.attempt for e in store.events(root, kinds=["group_task_claimed"])] == [0]
        assert late.reclaim_task("a", "w2", lease_seconds=10, now=1019.0) is True  # past 1018: taken over
        with pytest.raises(LeaseLost, match="taken over by 'w2' \\(token 1\\)"):
            store.append(root, [AssistantMessage("late")], fence=TaskFence(root, "a", "w1", 0))
        assert GroupState.replay(g.events()) == g.state()


def _script(g: Group, store: EventStore, member: str) -> None:
    g.create_task("a", "write the parser")
    g.create_task("b", "test the parser", depends_on=["a"])
    g.create_task("c", "document it", brief="the README section")
    g.join("w1", member)
    g.join("w2")
    with pytest.raises(GroupError, match="dependencies have not completed"):
        g.claim_task("b", "w1")
    assert g.claim_task("a", "w1", lease_seconds=10, now=100.0) is True
    assert g.claim_task("a", "w2", lease_seconds=10, now=100.0) is False
    assert g.claim_next("w2", lease_seconds=10, now=101.0).task_id == "c"
    assert g.renew_lease("a", "w1", now=105.0) is True
    assert g.reclaim_task("a", "w2", lease_seconds=10, now=114.0) is False
    assert g.reclaim_task("a", "w2", lease_seconds=10, now=116.0) is True
    with pytest.raises(GroupError, match="owned by .w2., not .w1."):
        g.complete_task("a", "w1", token=0)
    assert g.complete_task("a", "w2", summary="parsed", session_id=member) is True
    assert g.complete_task("c", "w2", status="failed", summary="no README") is True
    for i in range(4):
        g.send_message("lead", "w1" if i % 2 == 0 else "w2", f"note {i}")
    store.append(member, [AssistantMessage("", tool_calls=(ToolCall("k1", "shell", '{"command":"true"}'),))])
    assert g.deliver("w1", member) == []  # not at a safe boundary
    store.append(member, [ToolResult("k1", "ok", name="shell")])
    assert len(g.deliver("w1", member)) == 2
    assert g.deliver("w1", member) == []
    assert g.claim_next("w1", lease_seconds=10, now=120.0).task_id == "b"


def test_the_same_operations_give_the_same_group_on_both_backends(tmp_path, pg_url):
    outcomes = []
    for db in (str(tmp_path / "latch.db"), pg_url):
        with EventStore(db) as store:
            root = _root(store)
            member = store.create_session(workspace="/w", source="latch run", format="latch", parent_id=root)
            g = Group(store, root)
            _script(g, store, member)
            state = g.state()
            assert GroupState.replay(g.events()) == state
            ids = {m: f"m{i}" for i, m in enumerate(state.messages)}  # message ids are random: compare by order
            events = [
                (e.KIND, {k: ids.get(v, v) if k == "message_id" else v for k, v in e.to_payload().items()})
                for e in g.events()
            ]
            events = [
                (k, {x: y for x, y in p.items() if x not in ("session_id", "root_session_id")}) for k, p in events
            ]
            tasks = {t: (x.owner, x.status, x.attempt, x.summary, x.alive_at) for t, x in state.tasks.items()}
            outcomes.append((events, tasks, list(state.members), sorted(ids[m] for m in state.delivered)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1]["a"] == ("w2", "completed", 1, "parsed", 116.0)


def test_a_waiter_and_a_worker_reconnect_after_a_server_restart(pg_cluster):
    url = pg_cluster.new_database()
    with EventStore(url) as store:
        g = Group(store, _root(store))
        g.create_task("t1", "before the restart")
        with g.wakeups() as wake:
            pg_cluster.stop()
            assert wake.wait(0.5) is False  # the server is down: nothing to read yet
            pg_cluster.start()
            assert wake.wait(30) is True and wake.reconnects == 1  # reopened: a change may have been missed
            with pytest.raises(StoreError):  # the store's own connection went with the server: one clear error
                g.create_task("t2", "lost")
            assert reconnecting(lambda: g.create_task("t3", "after the restart")) > 0
            assert wake.wait(30) is True and wake.notified == 1
        assert [t.task_id for t in g.state().ready()] == ["t1", "t3"]


class _LosesOneReply:
    """``store``, except that its first append of a ``kind`` event commits and then loses its reply: on PostgreSQL
    the server restarts (the store's connection goes with it) and the call raises
    :class:`~latch.store.StoreUnavailable` as a dropped connection does; on SQLite it only raises."""

    def __init__(self, store, kind, cluster=None):
        self._store, self._kind, self._cluster, self.lost = store, kind, cluster, 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def append(self, session_id, events, **kwargs):
        events = list(events)
        seqs = self._store.append(session_id, events, **kwargs)
        if not self.lost and any(getattr(e, "event", e).KIND == self._kind for e in events):
            self.lost += 1
            if self._cluster is not None:
                self._cluster.stop()
                self._cluster.start()
            raise StoreUnavailable("the server restarted after the commit, before its reply")
        return seqs


def _cluster_of(db, request):
    return request.getfixturevalue("pg_cluster") if db.startswith("postgresql") else None


def test_a_claim_repeated_after_its_reply_was_lost_returns_the_same_claim(db, request):
    with EventStore(db) as store:
        root = _root(store)
        Group(store, root).create_task("a", "write the parser")
        Group(store, root).create_task("b", "document it")
        lossy = _LosesOneReply(store, "group_task_claimed", _cluster_of(db, request))
        g = Group(lossy, root)
        t = reconnecting(lambda: g.claim_next("w1", lease_seconds=60), pause=0.05)
        assert lossy.lost == 1
        assert (t.task_id, t.owner, t.attempt) == ("a", "w1", 0)  # its own claim, not a second task
        assert g.claim_task("a", "w1", lease_seconds=60) is True  # a repeated claim_task: the same claim
        assert g.fence("a", "w1").token == 0
        assert g.claim_task("a", "w2", lease_seconds=60) is False
        claims = [
            (s.event.task_id, s.event.agent, s.event.attempt) for s in store.events(root, kinds=["group_task_claimed"])
        ]
        assert claims == [("a", "w1", 0)]
        assert [x.task_id for x in g.state().ready()] == ["b"]
        # a reclaim whose reply is lost: repeated, it is the same reclaim
        assert g.complete_task("a", "w1") is True
        assert g.claim_task("b", "w1", lease_seconds=10, now=1000.0) is True
        lossy = _LosesOneReply(store, "group_task_claimed")
        g = Group(lossy, root)
        t = reconnecting(lambda: g.claim_next("w2", lease_seconds=10, now=1011.0), pause=0.05)
        assert lossy.lost == 1 and (t.task_id, t.owner, t.attempt) == ("b", "w2", 1)
        assert g.reclaim_task("b", "w2", lease_seconds=10, now=1012.0) is True
        assert g.reclaim_task("b", "w3", lease_seconds=10, now=1012.0) is False
        claims = [
            (s.event.task_id, s.event.agent, s.event.attempt) for s in store.events(root, kinds=["group_task_claimed"])
        ]
        assert claims == [("a", "w1", 0), ("b", "w1", 0), ("b", "w2", 1)]
        assert GroupState.replay(g.events()) == g.state()


def test_a_message_sent_again_with_its_id_is_queued_and_delivered_once_in_order(db, request):
    with EventStore(db) as store:
        root = _root(store)
        member = store.create_session(workspace="/w", source="latch run", format="latch", parent_id=root)
        lossy = _LosesOneReply(store, "group_message_queued", _cluster_of(db, request))
        g = Group(lossy, root)
        mids = [new_message_id() for _ in range(3)]
        for i, mid in enumerate(mids):  # the first send's reply is lost after its commit: it is sent again
            sent = reconnecting(
                lambda i=i, mid=mid: g.send_message("lead", "w1", f"note {i}", message_id=mid), pause=0.05
            )
            assert sent == mid
        assert lossy.lost == 1
        assert g.send_message("lead", "w1", "note 1", message_id=mids[1]) == mids[1]  # a plain repeat: nothing more
        queued = [(e.message_id, e.text) for e in g.events() if isinstance(e, GroupMessageQueued)]
        assert queued == [(mids[0], "note 0"), (mids[1], "note 1"), (mids[2], "note 2")]
        with pytest.raises(GroupError, match="already queued for another message"):
            g.send_message("lead", "w1", "another text", message_id=mids[0])
        assert len(g.deliver("w1", member)) == 3
        assert g.deliver("w1", member) == []
        got = [(s.event.message_id, s.event.text) for s in store.events(member, kinds=[GroupMessageDelivered.KIND])]
        assert got == [(m, f"[message from lead] note {i}") for i, m in enumerate(mids)]
        assert GroupState.replay(g.events()) == g.state()


def _answer(body):
    brief = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    return Reply(f"done: {brief[:60]}")


def test_waiting_workers_on_separate_homes_run_tasks_created_after_they_started(db, tmp_path):
    """Two ``latch run --group g1 --worker --wait`` processes, each with its own LATCH_HOME (as on two hosts),
    start before the group has a task: they wait, are woken by the lead's tasks, one waits again for a dependency
    to complete, and both exit once every task is done."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with EventStore(db) as store:
        root = store.create_session(
            workspace=str(ws),
            source="latch run",
            format="latch",
            meta={"group": "g1", "agent": {"provider": "openai-compatible", "model": "gpt-4.1"}},
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    with serve_openai([_answer] * 10) as server:
        procs = []
        for host in ("a", "b"):
            cmd = [sys.executable, "-m", "latch", "--db", db, "run", "--group", "g1", "--worker", "--wait"]
            cmd += ["--yes", "--sandbox", "off", "--base-url", server.base_url, "--lease", "30"]
            env_host = {**env, "LATCH_HOME": str(tmp_path / f"home-{host}"), "COLUMNS": "200"}
            procs.append(
                subprocess.Popen(cmd, cwd=ws, env=env_host, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            )
        with EventStore(db) as store:
            g = Group(store, root)
            deadline = time.monotonic() + 120
            while len(g.state().members) < 2:  # both joined, found nothing claimable, and wait
                dead = [p.communicate()[0] + p.communicate()[1] for p in procs if p.poll() is not None]
                assert time.monotonic() < deadline and not dead, f"a worker did not start: {dead}"
                time.sleep(0.1)
            time.sleep(1.0)
            assert all(p.poll() is None for p in procs)  # an empty group: they wait instead of exiting
            g.create_task("t1", "parse", brief="Parse the logs.")
            g.create_task("t2", "report", brief="Report on the parsed logs.", depends_on=["t1"])
            g.create_task("t3", "count", brief="Count the files.")
            outs = [p.communicate(timeout=180) for p in procs]
            for p, (out, err) in zip(procs, outs, strict=True):
                assert p.returncode == 0, err + out
                assert "every task is done" in out
            st = g.state()
            assert {t: (x.status, x.attempt) for t, x in st.tasks.items()} == {
                "t1": ("completed", 0),
                "t2": ("completed", 0),
                "t3": ("completed", 0),
            }
            done = [e.event.task_id for e in store.events(root, kinds=["group_task_completed"])]
            assert sorted(done) == ["t1", "t2", "t3"] and done.index("t1") < done.index("t2")
            assert GroupState.replay(g.events()) == st


def test_a_worker_mid_task_survives_a_server_restart(pg_cluster, tmp_path):
    """The server restarts while a ``--wait`` worker's task child waits for its model: the worker reconnects, the
    child continues from its log, and the task completes once."""
    url = pg_cluster.new_database()
    ws = tmp_path / "ws"
    ws.mkdir()
    with EventStore(url) as store:
        root = store.create_session(
            workspace=str(ws),
            source="latch run",
            format="latch",
            meta={"group": "g1", "agent": {"provider": "openai-compatible", "model": "gpt-4.1"}},
        )
        Group(store, root).create_task("t1", "parse", brief="Parse the logs.")
    asked = []

    def slow(body):
        asked.append(time.monotonic())
        return Reply("parsed", delay=4.0 if len(asked) == 1 else 0.0)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    with serve_openai([slow] * 4) as server:
        cmd = [sys.executable, "-m", "latch", "--db", url, "run", "--group", "g1", "--worker", "--wait", "--yes"]
        cmd += ["--sandbox", "off", "--base-url", server.base_url, "--lease", "60"]
        proc = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not asked:  # the child's first request is out, its answer delayed
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        pg_cluster.stop()
        pg_cluster.start()
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err + out
    assert "task t1: completed" in out and "every task is done" in out
    with EventStore(url) as store:
        g = Group(store, root)
        st = g.state()
        assert (st.tasks["t1"].status, st.tasks["t1"].attempt) == ("completed", 0)
        assert len(list(store.events(root, kinds=["group_task_completed"]))) == 1
        assert GroupState.replay(g.events()) == st
