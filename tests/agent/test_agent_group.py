"""Agent groups: tasks, claims, membership and messages as durable events of the root
session; claims decided by the transaction that appends them; messages delivered FIFO, exactly once, at
safe boundaries; GroupState.replay is the one reducer. The fault test runs real worker processes on one
store and kills them with SIGKILL at random points."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from group_projection_support import assert_projection_is_the_replay
from store_backends import db_of, reopen

from latch.agent.group import Group, GroupError, GroupState
from latch.events import AssistantMessage, GroupMessageDelivered, ToolCall, ToolResult
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


@pytest.fixture
def group(backend_store, tmp_path):
    store = backend_store
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    return Group(store, root)


def test_tasks_claims_dependencies_and_replay(group):
    group.create_task("a", "write the parser")
    group.create_task("b", "test the parser", depends_on=["a"])
    group.join("w1")
    with pytest.raises(GroupError, match="already exists"):
        group.create_task("a", "again")
    with pytest.raises(GroupError, match="unknown dependency 'zz'"):
        group.create_task("c", "x", depends_on=["zz"])
    with pytest.raises(GroupError, match="dependencies have not completed"):
        group.claim_task("b", "w1")
    assert group.claim_task("a", "w1") is True
    assert group.claim_task("a", "w2") is False  # exactly one owner
    with pytest.raises(GroupError, match="owned by 'w1', not 'w2'"):
        group.complete_task("a", "w2")
    assert group.complete_task("a", "w1", summary="done") is True
    assert group.complete_task("a", "w1") is False
    assert [t.task_id for t in group.state().ready()] == ["b"]
    st = group.state()
    assert {k: (t.owner, t.status) for k, t in st.tasks.items()} == {"a": ("w1", "completed"), "b": (None, None)}
    assert st.members == {"w1": None}
    # a fresh replay of the stored events (a restart) equals the live state
    fresh = Group(reopen(group.store), group.root).state()
    assert fresh == st and fresh.summary()["tasks"][1]["status"] == "ready"


def test_messages_wait_for_a_safe_boundary_and_arrive_fifo_once(group):
    store = group.store
    member = store.create_session(workspace="/w", source="latch run", format="latch", parent_id=group.root)
    ids = [group.send_message("lead", "w1", f"note {i}") for i in range(3)]
    group.send_message("lead", "w2", "not for w1")
    store.append(member, [AssistantMessage("", tool_calls=(ToolCall("c1", "shell", '{"command":"true"}'),))])
    assert group.deliver("w1", member) == []  # a call without its result: not a safe boundary
    store.append(member, [ToolResult("c1", "ok", name="shell")])
    seqs = group.deliver("w1", member)
    got = [store.get(s).event for s in seqs]
    assert [e.message_id for e in got] == ids and [e.text for e in got] == [
        f"[message from lead] note {i}" for i in range(3)
    ]
    assert all(isinstance(e, GroupMessageDelivered) for e in got)
    assert group.deliver("w1", member) == []
    assert Group(reopen(store), group.root).deliver("w1", member) == []  # a restart: nothing twice
    st = group.state()
    assert st.delivered == set(ids) and [m.text for m in st.pending_for("w2")] == ["not for w1"]


WORKER = r"""
import sys, time
from latch.store import EventStore
from latch.agent.group import Group
db, root, agent, member, deliver_for = sys.argv[1:6]
store = EventStore(db)
g = Group(store, root)
g.join(agent, member)
while True:
    st = g.state()
    mine = [t for t in st.tasks.values() if t.owner == agent and t.status is None]
    for t in mine:  # a restarted worker first finishes what it owns
        time.sleep(0.002)
        g.complete_task(t.task_id, agent, summary=f"{t.task_id} by {agent}")
    g.deliver(deliver_for, member)
    t = g.claim_next(agent)
    if t is None and not mine:
        if all(x.status for x in g.state().tasks.values()) and not g.state().pending_for(deliver_for):
            break
        time.sleep(0.01)
        continue
    if t is not None:
        time.sleep(0.002)
        g.complete_task(t.task_id, agent, summary=f"{t.task_id} by {agent}")
"""


# SQLite only: PostgreSQL has its own SIGKILL-and-restart run (test_group_postgres_faults.py), and this one reads the file
def test_workers_killed_at_random_claim_each_task_once_and_deliver_each_message_once(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    g = Group(store, root)
    for i in range(200):
        g.create_task(f"t{i:03d}", f"task {i}", depends_on=[f"t{i - 50:03d}"] if i >= 50 and i % 5 == 0 else [])
    agents = [f"w{i}" for i in range(4)]
    members = {
        a: store.create_session(workspace=str(tmp_path), source="latch run", format="latch", parent_id=root)
        for a in agents
    }
    sent: dict[str, list[str]] = {a: [] for a in agents}
    for i in range(1000):
        to = agents[i % 4]
        sent[to].append(g.send_message("lead", to, f"m{i}"))
    rng = random.Random(14)
    env = dict(os.environ)

    def start(a):
        return subprocess.Popen(
            [sys.executable, "-c", WORKER, str(store.path), root, a, members[a], a],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    procs = {a: start(a) for a in agents}
    kills = 0
    deadline = time.monotonic() + 240
    while kills < 20 and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.05, 0.4))
        a = rng.choice(agents)
        if procs[a].poll() is None:
            os.kill(procs[a].pid, signal.SIGKILL)
            procs[a].wait()
            kills += 1
        procs[a] = start(a)
    for p in procs.values():
        p.wait(timeout=max(10, deadline - time.monotonic()))
        assert p.returncode == 0, p.stderr.read()
    assert kills >= 20

    fresh = EventStore(store.path)
    events = list(fresh.events(root, kinds=["group_task_claimed", "group_task_completed"]))
    claims = [e.event.task_id for e in events if e.event.KIND == "group_task_claimed"]
    done = [e.event.task_id for e in events if e.event.KIND == "group_task_completed"]
    assert sorted(claims) == sorted(set(claims)) == [f"t{i:03d}" for i in range(200)]  # each claimed once
    assert sorted(done) == sorted(set(done)) == sorted(claims)  # and completed once
    order = {e.event.task_id: e.seq for e in events if e.event.KIND == "group_task_completed"}
    claimed_at = {e.event.task_id: e.seq for e in events if e.event.KIND == "group_task_claimed"}
    for i in range(50, 200, 5):  # a dependent task was claimed only after its dependency completed
        assert claimed_at[f"t{i:03d}"] > order[f"t{i - 50:03d}"]
    for a in agents:
        delivered = [s.event.message_id for s in fresh.events(members[a], kinds=["group_message_delivered"])]
        assert delivered == sent[a]  # every message exactly once, FIFO per recipient
    assert_projection_is_the_replay(store.path, root)  # the projection as the killed workers left it
    replayed = GroupState.replay(Group(fresh, root).events())
    assert replayed == Group(fresh, root).state()
    assert all(t.status == "completed" for t in replayed.tasks.values()) and len(replayed.delivered) == 1000
    print(f"fault run: {kills} SIGKILLs, 200 tasks, 1000 messages")


def test_latch_group_prints_the_view_and_json_from_the_same_reducer(group):
    import json as _json

    from click.testing import CliRunner

    from latch.cli import _load_commands, cli

    if "group" not in cli.commands:
        _load_commands()
    group.create_task("a", "write the parser")
    group.create_task("b", "test the parser", depends_on=["a"])
    group.join("w1", "s-w1")
    group.claim_task("a", "w1")
    group.send_message("lead", "w1", "hello")
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", db_of(group.store), "group", group.root, "--json"])
    assert r.exit_code == 0, r.output
    doc = _json.loads(r.output)
    assert doc["tasks"] == [
        {"id": "a", "title": "write the parser", "depends_on": [], "owner": "w1", "status": "claimed"},
        {"id": "b", "title": "test the parser", "depends_on": ["a"], "owner": None, "status": "blocked"},
    ]
    assert doc["members"] == [{"agent": "w1", "session": "s-w1"}] and doc["messages"] == {"queued": 1, "delivered": 0}
    r = runner.invoke(cli, ["--db", db_of(group.store), "group"])
    assert r.exit_code == 0 and "2 tasks · 1 member · messages 0/1 delivered" in r.output
    assert "write the parser" in r.output and "blocked" in r.output


def test_group_tools_and_delivery_in_the_agent_loop(backend_store, tmp_path):
    store = backend_store
    import json as _json

    from latch.agent.context import session_context
    from latch.agent.loop import AgentLoop
    from latch.agent.supervisor import Supervisor
    from latch.agent.tools import ToolContext, builtin_tools
    from latch.agent.tools.group import GROUP_TOOLS
    from latch.agent.tools.processes import ProcessManager
    from latch.plugins import get_engine_factory
    from latch.providers import ScriptedProvider

    def oa(text="", calls=()):
        msg = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": _json.dumps(a)}} for i, n, a in calls
            ]
        return {"id": "r", "model": "gpt-4.1", "choices": [{"index": 0, "message": msg}]}

    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    g = Group(store, root)
    provider = ScriptedProvider(
        [
            oa(
                calls=[
                    ("c1", "create_task", {"task_id": "t1", "title": "parse"}),
                    ("c2", "claim_task", {"task_id": "t1"}),
                    ("c3", "send_message", {"recipient": "lead", "text": "I took t1"}),
                    ("c4", "complete_task", {"task_id": "t1", "summary": "parsed"}),
                    ("c5", "claim_task", {"task_id": "nosuch"}),
                ]
            ),
            oa("done"),
        ],
        model="gpt-4.1",
    )
    processes = ProcessManager(store, root, tmp_path)
    ctx = ToolContext(workspace=tmp_path, store=store, session_id=root, processes=processes, estimate=len)
    g.send_message("boss", "lead", "PLEASE START")
    loop = AgentLoop.from_supervisor(
        store,
        root,
        Supervisor(get_engine_factory("continuity")),
        provider,
        model="gpt-4.1",
        tools=(*builtin_tools(), *GROUP_TOOLS),
        tool_context=ctx,
        session_context=session_context(tmp_path)[0],
        group=g,
        group_agent="lead",
        assume_yes=True,
    )
    loop.run(3)
    results = [s.event for s in store.events(root, kinds=["tool_result"])]
    assert [r.is_error for r in results] == [False, False, False, False, True]
    assert "claimed by you" in results[1].content and "no task 'nosuch'" in results[4].content
    st = g.state()
    assert (st.tasks["t1"].owner, st.tasks["t1"].status, st.tasks["t1"].summary) == ("lead", "completed", "parsed")
    first_users = [m["content"] for m in provider.requests[0]["messages"] if m["role"] == "user"]
    assert first_users[-1] == "[message from boss] PLEASE START"  # delivered before the first request
    second = [m["content"] for m in provider.requests[1]["messages"] if m["role"] == "user"]
    assert second.count("[message from lead] I took t1") == 1  # its own message, at the next safe boundary
    assert second.count("[message from boss] PLEASE START") == 1  # delivered once, kept in the epoch
    assert st.pending_for("lead") == []
    processes.close()


LEASED_WORKER = r"""
import sys, time, uuid
from latch.store import EventStore
from latch.agent.group import Group, GroupError
db, root, prefix = sys.argv[1:4]
agent = f"{prefix}-{uuid.uuid4().hex[:6]}"  # a restarted worker is a new member: it never finishes its old claims
store = EventStore(db)
g = Group(store, root)
g.join(agent)
while True:
    t = g.claim_next(agent, lease_seconds=1.0)
    if t is None:
        if all(x.status for x in g.state().tasks.values()):
            break
        time.sleep(0.02)  # claimed by a live (or not yet expired) owner: wait for its lease
        continue
    time.sleep(0.2)  # the work: a SIGKILL here leaves the claim to expire
    g.renew_lease(t.task_id, agent)
    try:
        g.complete_task(t.task_id, agent, summary=f"{t.task_id} by {agent} attempt {t.attempt}")
    except GroupError:  # a slow owner whose lease ran out: the new owner completes it, this one must not
        pass
"""


# SQLite only: PostgreSQL has its own SIGKILL-and-restart run (test_group_postgres_faults.py), and this one reads the file
def test_leased_workers_killed_at_random_reclaim_and_complete_each_task_once(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    g = Group(store, root)
    for i in range(100):
        g.create_task(f"t{i:03d}", f"task {i}", depends_on=[f"t{i - 25:03d}"] if i >= 25 and i % 5 == 0 else [])
    rng = random.Random(1414)
    slots = [f"w{i}" for i in range(4)]

    def start(slot):
        return subprocess.Popen(
            [sys.executable, "-c", LEASED_WORKER, str(store.path), root, slot],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def holding(slot):  # the slot's live worker (its newest member) owns an open task
        st = g.state()
        newest = [a for a in st.members if a.startswith(slot + "-")][-1:]
        return bool(newest) and any(t.owner == newest[0] and t.status is None for t in st.tasks.values())

    procs = {s: start(s) for s in slots}
    kills = 0
    deadline = time.monotonic() + 240
    while kills < 20 and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.05, 0.4))
        s = rng.choice(slots)
        until = time.monotonic() + 2
        while not holding(s) and procs[s].poll() is None and time.monotonic() < until:
            time.sleep(0.01)  # most kills land mid-task, the rest wherever the worker is
        if procs[s].poll() is None:
            os.kill(procs[s].pid, signal.SIGKILL)
            procs[s].wait()
            kills += 1
        procs[s] = start(s)
    for p in procs.values():
        p.wait(timeout=max(10, deadline - time.monotonic()))
        assert p.returncode == 0, p.stderr.read()
    assert kills >= 20

    assert_projection_is_the_replay(store.path, root)  # the projection as the killed workers left it
    fresh = EventStore(store.path)
    rows = list(fresh.events(root, kinds=["group_task_claimed", "group_task_completed"]))
    done = [s.event.task_id for s in rows if s.kind == "group_task_completed"]
    assert sorted(done) == [f"t{i:03d}" for i in range(100)]  # every task completed exactly once
    attempts: dict[str, list[int]] = {}
    for s in rows:
        if s.kind == "group_task_claimed":
            attempts.setdefault(s.event.task_id, []).append(s.event.attempt)
    assert all(a == list(range(len(a))) for a in attempts.values())  # reclaims are attempt n+1, one owner each
    st = Group(fresh, root).state()
    for s in rows:  # the completion is the current owner's
        if s.kind == "group_task_completed":
            assert s.event.agent == st.tasks[s.event.task_id].owner
    assert GroupState.replay(Group(fresh, root).events()) == st
    assert all(t.status == "completed" for t in st.tasks.values())
    reclaimed = sum(1 for a in attempts.values() if len(a) > 1)
    assert reclaimed > 0  # some SIGKILL landed while a worker held a claim, and another worker took it over
    print(f"leased fault run: {kills} SIGKILLs, 100 tasks, {reclaimed} reclaimed after a lease ran out")


def test_latch_group_of_a_member_shows_its_group_and_of_a_lone_session_is_one_error_line(group):
    """Found by a new user's trial: `latch group SESSION` of a session in no group printed an empty group, exit 0."""
    from click.testing import CliRunner

    from latch.cli import _load_commands, cli

    if "group" not in cli.commands:
        _load_commands()
    member = group.store.create_session(workspace="/w", source="latch run", format="latch")
    lone = group.store.create_session(workspace="/w", source="latch run", format="latch")
    group.create_task("a", "write the parser")
    group.join("w1", member)
    runner = CliRunner()
    db = db_of(group.store)
    shown = json.loads(runner.invoke(cli, ["--db", db, "group", member, "--json"]).output)
    assert shown["root"] == group.root and shown["members"] == [{"agent": "w1", "session": member}]
    r = runner.invoke(cli, ["--db", db, "group", lone])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.output.strip().splitlines() == [
        f"Error: session {lone} is in no agent group (it holds no group events and no group lists it as a member); "
        "`latch group` alone shows the newest group"
    ]


RACER = r"""
import os, sys, time
from latch.store import EventStore
from latch.agent.group import Group
db, root, member, barrier, rounds = sys.argv[1:6]
g = Group(EventStore(db), root)
for r in range(int(rounds)):
    go = f"{barrier}.go{r}"
    while not os.path.exists(go):
        time.sleep(0.0005)
    g.deliver("w1", member)
    open(f"{barrier}.done{r}.{os.getpid()}", "w").close()
"""


def test_two_processes_delivering_at_once_deliver_each_message_once(backend_store, tmp_path):
    """Real processes race :meth:`Group.deliver` for the same recipient, released together each round: the
    delivery markers make each message arrive exactly once (spec: "exactly-once across restarts are properties
    of the log, not of process memory")."""
    store = backend_store
    db = db_of(store)
    root = store.create_session(workspace="/w", source="latch run", format="latch")
    member = store.create_session(workspace="/w", source="latch run", format="latch", parent_id=root)
    g = Group(store, root)
    g.join("w1", member)
    barrier, rounds, racers = tmp_path / "barrier", 12, 4
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, db, root, member, str(barrier), str(rounds)])
        for _ in range(racers)
    ]
    sent: list[str] = []
    try:
        for r in range(rounds):
            sent += [g.send_message("lead", "w1", f"round {r} note {i}") for i in range(3)]
            Path(f"{barrier}.go{r}").touch()
            deadline = time.monotonic() + 30
            while len(list(tmp_path.glob(f"barrier.done{r}.*"))) < racers:
                assert time.monotonic() < deadline, f"round {r}: the racers did not finish"
                time.sleep(0.005)
    finally:
        for p in procs:
            assert p.wait(timeout=30) == 0
    delivered = [s.event.message_id for s in store.events(member, kinds=[GroupMessageDelivered.KIND])]
    assert sorted(delivered) == sorted(sent)  # each message once: none lost, none twice
    assert delivered == sent  # and FIFO


def test_an_idle_member_is_not_woken_by_a_message_alone(backend_store, tmp_path):
    """A message queued while the member answers without a tool call does not start another request: the run
    ends ``done`` and the message waits, pending, for the member's next turn (spec: "an idle agent is never
    woken by information alone")."""
    store = backend_store
    from latch.agent.context import session_context
    from latch.agent.loop import AgentLoop
    from latch.agent.supervisor import Supervisor
    from latch.plugins import get_engine_factory
    from latch.providers import ScriptedProvider

    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    g = Group(store, root)

    def answer(text, send=None):
        def reply(body):
            if send is not None:  # the lead writes while this member's answer is being generated
                g.send_message("lead", "w1", send)
            return {
                "id": "r",
                "model": "gpt-4.1",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            }

        return reply

    provider = ScriptedProvider(
        [answer("nothing to do", send="FYI: the build is green"), answer("noted")], model="gpt-4.1"
    )
    loop = AgentLoop.from_supervisor(
        store,
        root,
        Supervisor(get_engine_factory("continuity")),
        provider,
        model="gpt-4.1",
        tools=(),
        session_context=session_context(tmp_path)[0],
        group=g,
        group_agent="w1",
    )
    out = loop.run(5)
    assert out.stopped == "done" and len(provider.requests) == 1
    assert [m.text for m in g.state().pending_for("w1")] == ["FYI: the build is green"]
    assert list(store.events(root, kinds=[GroupMessageDelivered.KIND])) == []
    # the member's next turn (a user's message) delivers it, once, before that request
    loop.say("anything new?")
    out = loop.run(5)
    assert out.stopped == "done" and len(provider.requests) == 2
    users = [m["content"] for m in provider.requests[1]["messages"] if m["role"] == "user"]
    assert users.count("[message from lead] FYI: the build is green") == 1
    assert g.state().pending_for("w1") == []


def test_latch_group_escapes_member_names_and_sessions(group):
    """Member names come from models and users: `latch group` shows their control characters as escapes."""
    from click.testing import CliRunner

    from latch.cli import _load_commands, cli

    if "group" not in cli.commands:
        _load_commands()
    group.create_task("a", "write the parser")
    group.join("w1\x1b]0;pwned\x07\u202e", "s-\x1b[2J")
    r = CliRunner().invoke(cli, ["--db", db_of(group.store), "group", group.root])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output and "\u202e" not in r.output
    assert "member w1\\x1b]0;pwned\\x07\\u202e: session s-\\x1b[2J" in r.output.splitlines()
