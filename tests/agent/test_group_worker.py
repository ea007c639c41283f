"""Group workers: ``latch run --group NAME --worker`` processes claim ready tasks one at a
time, run each as a child agent built from its durable profile (the child-policy path of spawn and resume),
complete it with its AgentReport and exit when nothing is claimable. A SIGKILLed worker's claim is taken
over by a later worker once its lease ran out, and the task's child continues from its profile and log:
never run twice to completion. Real processes, the official OpenAI SDK, the loopback fake server, SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fake_providers import Reply, ToolUse, serve_openai
from group_projection_support import assert_projection_is_the_replay
from sandbox_support import end_shell_group
from store_backends import db_of, reopen

from latch.agent.children import child_key, child_profile, child_report
from latch.agent.group import Group, GroupError, GroupState, resolve_group
from latch.agent.worker import task_call_id
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

MODEL = "gpt-4.1"


@pytest.fixture
def group(backend_store, tmp_path):
    store = backend_store
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch", meta={"group": "g1"})
    return Group(store, root)


def test_a_lease_lets_a_second_agent_reclaim_only_after_it_ran_out(group):
    group.create_task("a", "parse")
    assert group.claim_task("a", "w1", lease_seconds=10, now=1000.0)
    assert group.reclaim_task("a", "w2", lease_seconds=10, now=1009.0) is False  # still w1's
    assert group.claim_next("w2", lease_seconds=10, now=1009.0) is None  # nothing claimable
    assert group.renew_lease("a", "w1", now=1008.0)
    assert group.claim_next("w2", lease_seconds=10, now=1017.0) is None  # renewed at 1008: alive until 1018
    got = group.claim_next("w2", lease_seconds=10, now=1019.0)
    assert (got.task_id, got.owner, got.attempt) == ("a", "w2", 1)
    assert group.reclaim_task("a", "w3", lease_seconds=10, now=1019.0) is False  # w2's fresh lease
    assert group.renew_lease("a", "w1", now=1020.0) is False  # w1 lost it: nothing appended
    with pytest.raises(GroupError, match="owned by 'w2', not 'w1'"):
        group.complete_task("a", "w1")
    assert group.complete_task("a", "w2", summary="parsed", session_id="s2")
    assert group.reclaim_task("a", "w3", lease_seconds=10, now=99_999.0) is False  # done: never again
    st = group.state()
    t = st.tasks["a"]
    assert (t.owner, t.attempt, t.status, t.summary, t.session_id) == ("w2", 1, "completed", "parsed", "s2")
    claims = [
        (s.event.agent, s.event.attempt, s.source_ref)
        for s in group.store.events(group.root, kinds=["group_task_claimed"])
    ]
    assert claims == [("w1", 0, "group-claim:a"), ("w2", 1, "group-claim:a:1")]
    assert GroupState.replay(Group(reopen(group.store), group.root).events()) == st
    # a claim without a lease never expires (an agent restarted under its own name finishes it)
    group.create_task("b", "lint")
    assert group.claim_task("b", "w1")
    assert group.claim_next("w2", lease_seconds=10, now=10**12) is None


def test_resolve_group_by_name_or_id(group):
    assert resolve_group(group.store, "g1") == group.root
    assert resolve_group(group.store, group.root[:6]) == group.root
    with pytest.raises(KeyError, match="no agent group 'nope'"):
        resolve_group(group.store, "nope")
    with pytest.raises(KeyError):
        resolve_group(group.store, group.root, by_id=False)


def _responder(body):
    """The fake model of every task's child: the slow task calls a shell that sleeps (the worker is killed
    there); a child that sees a tool result answers; any other child answers its brief at once."""
    msgs = body["messages"]
    brief = [m["content"] for m in msgs if m["role"] == "user"][-1]
    tools = [m for m in msgs if m["role"] == "tool"]
    if tools:
        return Reply(f"finished after: {tools[-1]['content'][:40]}")
    if brief.startswith("SLOW"):
        cmd = brief.split(":", 1)[1].strip()
        return Reply(tool_calls=(ToolUse("k1", "shell", json.dumps({"command": cmd, "timeout": 120})),))
    return Reply(f"done: {brief}")


def test_workers_claim_run_and_reclaim_after_sigkill(backend_store, tmp_path):
    store = backend_store
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Worker rule: be brief.\n")
    db = db_of(store)
    marker = ws / "started.txt"
    root = store.create_session(
        workspace=str(ws),
        source="latch run",
        format="latch",
        meta={"group": "g1", "agent": {"provider": "openai-compatible", "model": MODEL}},
    )
    g = Group(store, root)
    g.create_task("t1", "slow job", brief=f"SLOW: echo $$ > {marker}; sleep 60")
    g.create_task("t2", "after the slow job", brief="Summarise the slow job.", depends_on=["t1"])
    g.create_task("t3", "independent", brief="Count the files.")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    lease = 3.0
    with serve_openai([_responder] * 20) as server:
        cmd = [
            sys.executable,
            "-m",
            "latch",
            "--db",
            db,
            "run",
            "--group",
            "g1",
            "--worker",
            "--yes",
            "--base-url",
            server.base_url,
            "--lease",
            str(lease),
        ]
        first = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the slow task's shell call never started"
        time.sleep(0.3)  # the pid is written
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        killed_at = time.time()
        end_shell_group(marker)  # a shell a SIGKILLed worker left behind, ended like a reboot would
        child1 = store.session_id_for(child_key(root, task_call_id("t1")))
        before = [(s.seq, s.kind) for s in store.events(child1)]
        assert [k for _, k in before][-1] == "tool_started"  # killed mid-call
        st = g.state()
        assert st.tasks["t1"].owner is not None and st.tasks["t1"].status is None
        killed_owner = st.tasks["t1"].owner
        time.sleep(max(0.0, st.tasks["t1"].alive_at + lease + 0.5 - time.time()))  # the lease runs out
        assert time.time() > killed_at
        second = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
        bodies = server.bodies
    assert second.returncode == 0, second.stderr + second.stdout
    out = second.stdout
    assert "reclaimed (attempt 1) task t1: slow job" in out and "nothing claimable: 3 tasks run by worker-" in out

    assert_projection_is_the_replay(db, root)  # the projection as the SIGKILLed and the second worker left it
    fresh = EventStore(db)
    try:
        st = Group(fresh, root).state()
        assert {k: t.status for k, t in st.tasks.items()} == {"t1": "completed", "t2": "completed", "t3": "completed"}
        assert st.tasks["t1"].attempt == 1 and st.tasks["t1"].owner != killed_owner
        assert len({st.tasks[k].owner for k in ("t1", "t2", "t3")}) == 1  # the second worker ran them all
        rows = list(fresh.events(root, kinds=["group_task_claimed", "group_task_completed"]))
        claims = [(s.event.task_id, s.event.attempt) for s in rows if s.kind == "group_task_claimed"]
        assert sorted(claims) == [("t1", 0), ("t1", 1), ("t2", 0), ("t3", 0)]
        done = [s.event.task_id for s in rows if s.kind == "group_task_completed"]
        assert sorted(done) == ["t1", "t2", "t3"]  # each completed exactly once
        # t2 was claimed only after t1 completed
        seq = {(s.kind, s.event.task_id, getattr(s.event, "attempt", 0)): s.seq for s in rows}
        assert seq[("group_task_claimed", "t2", 0)] > seq[("group_task_completed", "t1", 0)]
        # one child session per task, each from its durable profile, with one report
        kids = fresh.children(root)
        assert sorted(child_profile(fresh, k.id).call_id for k in kids) == [
            "group-task:t1",
            "group-task:t2",
            "group-task:t3",
        ]
        for k in kids:
            assert [s.kind for s in fresh.events(k.id)].count("agent_report") == 1
            assert child_profile(fresh, k.id).model == MODEL and child_profile(fresh, k.id).engine == "continuity"
            assert st.tasks[child_profile(fresh, k.id).call_id.split(":")[1]].session_id == k.id
        # the reclaimed child continued its own log: nothing rewritten, the killed call closed as interrupted
        after = [(s.seq, s.kind) for s in fresh.events(child1)]
        assert after[: len(before)] == before
        report = child_report(fresh, child1)
        assert report.status == "completed" and report.summary.startswith("finished after: [error] [interrupted:")
        assert st.tasks["t1"].summary == report.summary
        # the reclaimed child's request: its own brief and log, the interrupted result; never a second sleep
        t1_bodies = [b for b in bodies if "SLOW:" in json.dumps(b)]
        assert len(t1_bodies) == 2
        (interrupted,) = [m for m in t1_bodies[1]["messages"] if m["role"] == "tool"]
        assert interrupted["tool_call_id"] == "k1" and "[interrupted:" in interrupted["content"]
        for b in bodies:  # every child starts from its brief and the repository instructions
            text = json.dumps(b)
            assert "Worker rule: be brief." in text and "spawn_agent" not in text
        assert len(bodies) == 4  # t1 twice (killed, then continued), t2 and t3 once
        assert GroupState.replay(Group(fresh, root).events()) == st
    finally:
        fresh.close()


def test_a_lead_creates_tasks_and_a_worker_runs_them_in_dependency_order(backend_store, tmp_path):
    store = backend_store
    ws = tmp_path / "ws"
    ws.mkdir()
    db = db_of(store)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    base = [sys.executable, "-m", "latch", "--db", db, "run"]
    create = [
        ToolUse("c1", "create_task", json.dumps({"task_id": "parse", "title": "parse", "brief": "Parse it."})),
        ToolUse(
            "c2",
            "create_task",
            json.dumps({"task_id": "test", "title": "test", "brief": "Test it.", "depends_on": ["parse"]}),
        ),
    ]
    with serve_openai([Reply(tool_calls=tuple(create)), Reply("Two tasks queued.")]) as server:
        lead = subprocess.run(
            base
            + [
                "--group",
                "rev",
                "split the work",
                "--provider",
                "openai-compatible",
                "--model",
                MODEL,
                "--base-url",
                server.base_url,
            ],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert lead.returncode == 0, lead.stderr + lead.stdout
        assert [t["function"]["name"] for t in server.bodies[0]["tools"]][-4:] == [
            "create_task",
            "claim_task",
            "complete_task",
            "send_message",
        ]
    again = subprocess.run(
        base
        + [
            "--group",
            "rev",
            "again",
            "--provider",
            "openai-compatible",
            "--model",
            MODEL,
            "--base-url",
            "http://127.0.0.1:9",
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2 and "a group named 'rev' exists already" in again.stderr
    with serve_openai([_responder] * 4) as server:
        w = subprocess.run(
            base + ["--group", "rev", "--worker", "--base-url", server.base_url],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        bodies = server.bodies
    assert w.returncode == 0, w.stderr + w.stdout
    assert w.stdout.index("claimed task parse") < w.stdout.index("claimed task test")
    assert "nothing claimable: 2 tasks run" in w.stdout
    assert [[m["content"] for m in b["messages"] if m["role"] == "user"][-1] for b in bodies] == [
        "Parse it.",
        "Test it.",
    ]
    assert all("split the work" not in json.dumps(b) for b in bodies)  # never the lead's conversation
    with EventStore(db) as again:
        st = Group(again, resolve_group(again, "rev")).state()
        assert [(t.task_id, t.status, t.summary) for t in st.tasks.values()] == [
            ("parse", "completed", "done: Parse it."),
            ("test", "completed", "done: Test it."),
        ]
    with serve_openai([Reply("All tasks are done.")]) as server:  # the lead resumed keeps its group tools
        root = resolve_group(EventStore(db), "rev")
        resumed = subprocess.run(
            base + ["--resume", root, "--base-url", server.base_url],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr + resumed.stdout
        (body,) = server.bodies
        assert [t["function"]["name"] for t in body["tools"]][-4:] == [
            "create_task",
            "claim_task",
            "complete_task",
            "send_message",
        ]
    for args, message in (
        (["--worker"], "--worker needs --group NAME"),
        (["--group", "rev", "--worker", "task"], "--worker takes no TASK"),
        (["--lease", "5", "task"], "--lease applies to --worker only"),
        (["--group", "rev", "--worker", "--lease", "0"], "--lease"),
        (["--group", "nope", "--worker"], "no agent group 'nope'"),
    ):
        r = subprocess.run(base + args, cwd=ws, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
