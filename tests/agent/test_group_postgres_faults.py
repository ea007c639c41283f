"""Groups across hosts: worker processes, each with its own LATCH_HOME as if on its own machine, share one
PostgreSQL database; they are SIGKILLed at random and the server is restarted under them (``pg_ctl restart``), and
every task still completes once, every message is delivered once in order, and the replayed state equals the
projection. The workers wait for work with LISTEN/NOTIFY and reconnect after the restart.

The sizes are ``LATCH_PG_GROUP_FAULT=TASKS,MESSAGES,KILLS,RESTARTS`` (default: the issue's 200 tasks and 1,000
messages, with 12 SIGKILLs and one restart)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import psycopg
import pytest
from pg_support import PostgresCluster, require_postgres

from latch.agent.group import GROUP_PROJECTION, Group, GroupState, new_message_id, reconnecting
from latch.store import EventStore

pytestmark = pytest.mark.slow  # real processes and a real server

WORKER = r"""
import os, sys, time
from latch.store import EventStore, StoreBusyError, StoreUnavailable
from latch.agent.group import Group, GroupError, reconnecting
url, root, slot, member, ntasks, lease, log = sys.argv[1:8]
ntasks, lease = int(ntasks), float(lease)
agent = f"{slot}-{os.getpid()}"  # a new process is a new member, as a new host would be

def note(what):
    with open(log, "a") as f:
        f.write(f"{agent} {what}\n")

store = reconnecting(lambda: EventStore(url))
g = Group(store, root)
wake = reconnecting(g.wakeups)  # LISTEN before the first read: no change is missed
reconnecting(lambda: g.join(agent, member))

def step():
    g.deliver(slot, member)  # between tasks: the member's safe boundary
    t = g.claim_next(agent, lease_seconds=lease)  # a claim whose reply was lost comes back as this worker's own
    if t is None:
        st = g.state()
        if len(st.tasks) == ntasks and all(x.status for x in st.tasks.values()) and not st.pending_for(slot):
            return "exit"
        return "wait"
    if t.attempt > 0:
        note(f"reclaimed {t.task_id} {t.attempt}")
    time.sleep(0.003)  # the work
    try:
        g.complete_task(t.task_id, agent, summary=f"{t.task_id} by {agent}", token=t.attempt)
    except GroupError:  # its lease ran out (the server was down) and another worker took the task over
        note(f"lost {t.task_id}")
    return "ran"

while True:
    try:
        what = step()
        if what == "exit":
            break
        if what == "wait":
            before = wake.notified
            woke = g.wait_for_work(wake, max_wait=2.0)
            note("notified" if wake.notified > before else "woken" if woke else "timeout")
    except (StoreUnavailable, StoreBusyError):
        note("reconnect")
        time.sleep(0.2)
note(f"exit notified={wake.notified} listen_reconnects={wake.reconnects}")
"""


def _sizes() -> tuple[int, int, int, int]:
    tasks, messages, kills, restarts = (
        int(x) for x in os.environ.get("LATCH_PG_GROUP_FAULT", "200,1000,12,1").split(",")
    )
    return tasks, messages, kills, restarts


def test_workers_on_separate_hosts_survive_sigkills_and_a_server_restart(tmp_path):
    require_postgres()
    ntasks, nmessages, nkills, nrestarts = _sizes()
    started = time.monotonic()
    cluster = PostgresCluster()  # its own server: the restart must not disturb other tests' stores
    try:
        url = cluster.new_database()
        _run(cluster, url, tmp_path, ntasks, nmessages, nkills, nrestarts, started)
    finally:
        cluster.close()


def _run(cluster, url, tmp_path, ntasks, nmessages, nkills, nrestarts, started) -> None:  # noqa: PLR0915
    store = EventStore(url)
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    g = Group(store, root)
    slots = ["w0", "w1", "w2"]
    members = {
        s: store.create_session(workspace=str(tmp_path), source="latch run", format="latch", parent_id=root)
        for s in slots
    }
    created = 0

    def create(upto: int) -> None:
        nonlocal created
        while created < upto:
            i = created
            deps = [f"t{i - 50:03d}"] if i >= 50 and i % 5 == 0 else []
            reconnecting(lambda i=i, deps=deps: g.create_task(f"t{i:03d}", f"task {i}", depends_on=deps))
            created += 1

    sent: dict[str, list[str]] = {s: [] for s in slots}
    queued = 0

    def send(upto: int) -> None:
        nonlocal queued
        while queued < upto:
            to = slots[queued % len(slots)]
            mid = new_message_id()  # fixed before the first try: a repeat after a lost reply queues nothing more
            sent[to].append(
                reconnecting(lambda to=to, n=queued, mid=mid: g.send_message("lead", to, f"m{n}", message_id=mid))
            )
            queued += 1

    create(ntasks * 3 // 5)  # the rest arrive while the workers run (a waiting worker is woken by them)
    log = tmp_path / "workers.log"
    lease = 1.5

    def start(slot: str) -> subprocess.Popen[str]:
        home = tmp_path / f"host-{slot}"  # as if each worker ran on its own machine
        home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LATCH_")}
        env.update({"LATCH_HOME": str(home), "LATCH_DB": url})
        args = [url, root, slot, members[slot], str(ntasks), str(lease), str(log)]
        return subprocess.Popen(
            [sys.executable, "-c", WORKER, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def holding(slot: str, pid: int) -> bool:
        st = reconnecting(g.state)
        return any(t.owner == f"{slot}-{pid}" and t.status is None for t in st.tasks.values())

    rng = random.Random(31)
    procs = {s: start(s) for s in slots}
    kills = restarts = 0
    steps = nkills + nrestarts
    restart_at = sorted(rng.sample(range(1, steps), nrestarts)) if nrestarts else []
    deadline = time.monotonic() + 600
    for step in range(steps):
        time.sleep(rng.uniform(0.2, 0.6))
        send(nmessages * (step + 1) // steps)
        create(ntasks * 3 // 5 + (ntasks - ntasks * 3 // 5) * (step + 1) // (steps + 1))
        if step in restart_at:
            cluster.stop("fast")  # every worker's connections drop; a worker's lease may run out meanwhile
            time.sleep(rng.uniform(0.2, 1.0))
            cluster.start()
            restarts += 1
            continue
        s = rng.choice(slots)
        until = time.monotonic() + 2
        while procs[s].poll() is None and not holding(s, procs[s].pid) and time.monotonic() < until:
            time.sleep(0.01)  # most kills land while the worker holds a claim
        if procs[s].poll() is None:
            os.kill(procs[s].pid, signal.SIGKILL)
            procs[s].wait()
            kills += 1
        procs[s] = start(s)
    send(nmessages)
    create(ntasks)  # the last tasks after the last message: no worker ends before every message is queued
    for p in procs.values():
        p.wait(timeout=max(10, deadline - time.monotonic()))
        assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    assert kills == nkills and restarts == nrestarts
    store.close()
    _verify(url, root, members, sent, log, ntasks, nmessages, kills, restarts, started)


def _verify(url, root, members, sent, log, ntasks, nmessages, kills, restarts, started) -> None:
    fresh = EventStore(url)
    rows = list(fresh.events(root, kinds=["group_task_claimed", "group_task_completed"]))
    done = [s.event.task_id for s in rows if s.kind == "group_task_completed"]
    assert sorted(done) == [f"t{i:03d}" for i in range(ntasks)]  # every task completed exactly once
    attempts: dict[str, list[int]] = {}
    for s in rows:
        if s.kind == "group_task_claimed":
            attempts.setdefault(s.event.task_id, []).append(s.event.attempt)
    assert all(a == list(range(len(a))) for a in attempts.values())  # each reclaim is attempt n + 1, one owner each
    completed_at = {s.event.task_id: s.seq for s in rows if s.kind == "group_task_completed"}
    for s in rows:  # no claim of a dependent task before its dependency completed
        if s.kind == "group_task_claimed" and s.event.task_id in {f"t{i:03d}" for i in range(50, ntasks, 5)}:
            assert s.seq > completed_at[f"t{int(s.event.task_id[1:]) - 50:03d}"]
    g2 = Group(fresh, root)
    projected = g2.state()
    for s in rows:  # the completion is the current owner's
        if s.kind == "group_task_completed":
            assert s.event.agent == projected.tasks[s.event.task_id].owner
    for slot in members:
        delivered = [e.event.message_id for e in fresh.events(members[slot], kinds=["group_message_delivered"])]
        assert delivered == sent[slot]  # every message exactly once, in order
    with psycopg.connect(url) as db:  # the projection as the workers left it, before any read could catch it up
        mark = db.execute("SELECT last_seq FROM projection_marks WHERE name = %s", (GROUP_PROJECTION.name,)).fetchone()
        newest = db.execute(
            "SELECT max(seq) FROM events WHERE kind = ANY(%s)", (list(GROUP_PROJECTION.kinds),)
        ).fetchone()
    assert mark is not None and mark[0] == newest[0]
    assert GroupState.replay(g2.events()) == projected  # the replayed state equals the projection
    assert all(t.status == "completed" for t in projected.tasks.values()) and len(projected.delivered) == nmessages
    fresh.close()

    notes = Counter(line.split(" ", 1)[1].split(" ")[0] for line in log.read_text().splitlines())
    notified = notes["notified"]
    reclaimed = sum(1 for a in attempts.values() if len(a) > 1)
    assert notified > 0  # waiting workers were woken by NOTIFY
    if restarts:
        assert notes["reconnect"] > 0  # the restart reached the workers, and they reconnected
    if kills:
        assert reclaimed > 0  # a SIGKILL landed while a worker held a claim, and another worker took it over
    print(
        f"\nPostgreSQL group fault run: {ntasks} tasks, {nmessages} messages, {kills} SIGKILLs, {restarts} server "
        f"restart(s), {reclaimed} reclaims, {notes['lost']} claims lost to a reclaim, {notes['reconnect']} reconnects, "
        f"{notified} wake-ups by NOTIFY, {notes['woken']} after a reconnect, {notes['timeout']} timed-out waits, "
        f"{time.monotonic() - started:.1f} s"
    )
