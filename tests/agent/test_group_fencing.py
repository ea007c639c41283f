"""Fenced group leases: every write a worker makes for a task carries its claim's fencing token (the claim's
attempt number), checked inside the store transaction of the write. A worker whose lease was taken over (paused
past its lease, the task reclaimed) commits nothing more for the task: no tool call, no result, no report, no
completion. Real processes: a worker SIGSTOPped mid-request, a second worker that reclaims and finishes the task,
SIGCONT; the loopback OpenAI server and the official SDK."""

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
from store_backends import db_of, reopen

from latch.agent.children import child_key
from latch.agent.group import Group, GroupError
from latch.agent.worker import task_call_id
from latch.events import ToolResult, UserMessage
from latch.store import EventStore, LeaseLost, RunFence, TaskFence

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

MODEL = "gpt-4.1"


@pytest.fixture
def group(backend_store, tmp_path):
    store = backend_store
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch", meta={"group": "g"})
    return Group(store, root)


def test_a_write_fenced_by_a_taken_over_claim_is_refused_and_stores_nothing(group):
    store = group.store
    group.create_task("a", "parse")
    assert group.claim_task("a", "w1", lease_seconds=5, now=1000.0)
    old = group.fence("a", "w1")
    assert old == TaskFence(group.root, "a", "w1", 0)
    child = store.create_session(parent_id=group.root)
    assert store.append(child, [UserMessage("as w1, token 0")], fence=old)  # the claim is current: written
    assert group.reclaim_task("a", "w2", lease_seconds=5, now=1010.0)
    new = group.fence("a", "w2")
    assert new.token == 1
    before = [(s.seq, s.kind) for s in store.events()]
    with pytest.raises(LeaseLost, match=r"task 'a'.*token 0.*taken over by 'w2' \(token 1\)"):
        store.append(child, [ToolResult("k1", "late result")], fence=old)
    with pytest.raises(LeaseLost):
        store.append_kernel_records(child, "engine:main", [("note", 1, {"x": 1})], fence=old)
    with pytest.raises(LeaseLost):
        store.fenced(old).append(child, [UserMessage("through the fenced store")])
    assert [(s.seq, s.kind) for s in store.events()] == before  # store unchanged
    assert store.kernel_records(child, "engine:main") == []
    assert store.fenced(new).append(child, [UserMessage("as w2, token 1")])
    # renewal and completion are fenced too: the stale owner can neither renew nor complete
    assert group.renew_lease("a", "w1", token=0) is False
    with pytest.raises(GroupError, match="owned by 'w2', not 'w1'"):
        group.complete_task("a", "w1", token=0)
    assert group.complete_task("a", "w2", summary="parsed", token=1)
    with pytest.raises(LeaseLost, match="completed"):  # a completed task takes no more writes of any claim
        store.append(child, [UserMessage("after completion")], fence=new)


class _ReadBeforeTheReclaim(Group):
    """A group whose reads return the state as it was before another process reclaimed the task: the window
    between a caller's check and its write, made deterministic."""

    def __init__(self, store, root, stale):
        super().__init__(store, root)
        self.stale = stale

    def state(self):
        return self.stale


def test_the_fence_is_checked_inside_the_write_transaction(group):
    """The owner's check in Python passes (it read the state before another process reclaimed), yet the write's
    own transaction refuses it: a check-then-write would have stored the stale owner's completion, whose source
    ref then blocks the real owner's completion for ever."""
    store = group.store
    group.create_task("a", "parse")
    assert group.claim_task("a", "w1", lease_seconds=1, now=1000.0)
    stale = group.state()  # w1 reads its claim ...
    other = reopen(store)
    try:
        assert Group(other, group.root).reclaim_task("a", "w2", lease_seconds=60, now=1002.0)  # ... w2 takes it
        slow = _ReadBeforeTheReclaim(store, group.root, stale)
        assert slow.state().tasks["a"].owner == "w1"
        with pytest.raises(GroupError, match=r"taken over by 'w2' \(token 1\)"):
            slow.complete_task("a", "w1", summary="done by w1")
        assert slow.renew_lease("a", "w1", now=1003.0) is False  # the renewal's transaction refuses it too
        assert Group(other, group.root).complete_task("a", "w2", summary="done by w2", token=1)
    finally:
        other.close()
    t = group.state().tasks["a"]
    assert (t.owner, t.status, t.summary) == ("w2", "completed", "done by w2")
    assert [s.event.agent for s in store.events(group.root, kinds=["group_task_completed"])] == ["w2"]
    assert [s.event.agent for s in store.events(group.root, kinds=["group_task_lease_renewed"])] == []


def test_a_run_fence_refuses_writes_once_the_run_lease_is_taken_over(backend_store):
    store = backend_store
    sid = store.create_session()
    assert (
        store.acquire_run_lease(
            sid,
            "run-a",
            pid=1,
            host="h",
            process_start=None,
            lease_seconds=5,
            now=100.0,
            holder_live=lambda row: True,
        )
        is None
    )
    assert store.append(sid, [UserMessage("a")], fence=RunFence(sid, "run-a"))
    held = store.acquire_run_lease(
        sid, "run-b", pid=2, host="h", process_start=None, lease_seconds=5, now=101.0, holder_live=lambda row: True
    )
    assert held is not None and (held.run_id, held.pid) == ("run-a", 1)  # refused: a is live
    assert (
        store.acquire_run_lease(
            sid,
            "run-b",
            pid=2,
            host="h",
            process_start=None,
            lease_seconds=5,
            now=102.0,
            holder_live=lambda row: False,
        )
        is None
    )  # a is dead: taken over
    with pytest.raises(LeaseLost, match="run-a"):
        store.append(sid, [UserMessage("late a")], fence=RunFence(sid, "run-a"))
    assert store.renew_run_lease(sid, "run-a", now=103.0) is False
    assert store.renew_run_lease(sid, "run-b", now=103.0) is True
    assert [s.event.text for s in store.events(sid)] == ["a"]


def _responder(counter: dict[str, int], marker: str):
    """The task's child: asks for one shell command that appends a line to ``marker`` (the first request answers
    after a delay, long enough to pause the worker inside it), then answers once it sees the result."""

    def respond(body):
        counter["n"] += 1
        if any(m["role"] == "tool" for m in body["messages"]):
            return Reply("appended the line")
        cmd = f"echo ran >> {marker}"
        return Reply(
            tool_calls=(ToolUse(f"k{counter['n']}", "shell", json.dumps({"command": cmd})),),
            delay=1.5 if counter["n"] == 1 else 0.0,
        )

    return respond


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_worker_paused_past_its_lease_writes_nothing_after_another_worker_reclaimed_its_task(
    backend_store,
    tmp_path,
):
    store = backend_store
    ws = tmp_path / "ws"
    ws.mkdir()
    db = db_of(store)
    marker = ws / "ran.txt"
    root = store.create_session(
        workspace=str(ws),
        source="latch run",
        format="latch",
        meta={"group": "g1", "agent": {"provider": "openai-compatible", "model": MODEL}},
    )
    g = Group(store, root)
    g.create_task("t1", "append a line", brief="Append a line to ran.txt.")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    lease = 2.0
    counter = {"n": 0}
    with serve_openai([_responder(counter, str(marker))] * 10) as server:
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
            "--sandbox",
            "off",
            "--base-url",
            server.base_url,
            "--lease",
            str(lease),
        ]
        first = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait(lambda: len(server.requests) >= 1, 60, "the first worker's request")
            os.kill(first.pid, signal.SIGSTOP)  # paused inside its request, before the answer arrives
            st = g.state().tasks["t1"]
            first_owner = st.owner
            time.sleep(max(0.0, st.alive_at + lease + 0.3 - time.time()))  # its lease runs out
            second = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
            assert second.returncode == 0, second.stderr + second.stdout
            assert "reclaimed (attempt 1) task t1" in second.stdout
        finally:
            os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=120)
        bodies = server.bodies
    assert first.returncode == 0, err + out
    assert "the lease of task t1 was taken over by another worker" in out and "Traceback" not in err
    lines = marker.read_text().splitlines()
    child = store.session_id_for(child_key(root, task_call_id("t1")))
    kinds = [s.kind for s in store.events(child)]
    st = assert_projection_is_the_replay(db, root)
    assert lines == ["ran"]  # the command ran once, by the worker that owns the task
    assert kinds.count("agent_report") == 1 and kinds.count("tool_started") == 1 and kinds.count("tool_result") == 1
    t = st.tasks["t1"]
    assert t.status == "completed" and t.attempt == 1 and t.owner != first_owner
    assert len(bodies) == 3  # the paused request, then the reclaimer's two; the paused worker asked nothing more


def test_a_worker_paused_in_a_command_kills_it_when_its_renewal_fails(backend_store, tmp_path):
    """Paused (SIGSTOP) while its child's shell command runs (the command, in its own session, runs on), reclaimed
    by another worker, then continued: its heartbeat finds the claim taken over and kills the command at once,
    instead of waiting for it to end and then finding its result refused."""
    store = backend_store
    ws = tmp_path / "ws"
    ws.mkdir()
    db = db_of(store)
    marker = ws / "steps.txt"
    with reopen(store) as lead:
        root = lead.create_session(
            workspace=str(ws),
            source="latch run",
            format="latch",
            meta={"group": "g1", "agent": {"provider": "openai-compatible", "model": MODEL}},
        )
        Group(lead, root).create_task("t1", "slow", brief="Run the slow step.")

    def respond(body):
        if any(m["role"] == "tool" for m in body["messages"]):
            return Reply("the step was interrupted")
        cmd = f"echo start >> {marker}; sleep 40; echo end >> {marker}"
        return Reply(tool_calls=(ToolUse("k1", "shell", json.dumps({"command": cmd, "timeout": 120})),))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    lease = 2.0
    with serve_openai([respond] * 6) as server:
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
            "--sandbox",
            "off",
            "--base-url",
            server.base_url,
            "--lease",
            str(lease),
        ]
        first = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait(marker.exists, 60, "the slow command's start")
            os.kill(first.pid, signal.SIGSTOP)
            with EventStore(db) as reader:
                alive_at = Group(reader, root).state().tasks["t1"].alive_at
            time.sleep(max(0.0, alive_at + lease + 0.3 - time.time()))
            second = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
            assert second.returncode == 0, second.stderr + second.stdout
        finally:
            os.kill(first.pid, signal.SIGCONT)
        continued = time.monotonic()
        out, err = first.communicate(timeout=120)
        waited = time.monotonic() - continued
    assert first.returncode == 0, err + out
    assert "the lease of task t1 was taken over by another worker" in out
    assert waited < 15, f"the paused worker took {waited:.1f} s after SIGCONT: it waited for its command"
    time.sleep(0.5)
    assert marker.read_text().splitlines() == ["start"]  # killed: the command never reached its end
    with EventStore(db) as reader:
        child = reader.session_id_for(child_key(root, task_call_id("t1")))
        kinds = [s.kind for s in reader.events(child)]
        t = Group(reader, root).state().tasks["t1"]
    assert (t.status, t.attempt) == ("completed", 1)
    assert kinds.count("tool_started") == 1 and kinds.count("agent_report") == 1
    assert kinds.count("tool_result") == 1  # the reclaimer's "interrupted", never the paused worker's result


def test_a_lease_guard_calls_its_stop_functions_once_and_then_refuses():
    from latch.host.lease import LeaseGuard

    guard = LeaseGuard("the lease of task 'a'")
    called = []
    guard.on_lost(lambda: called.append("kill"))
    guard.check()  # not lost: nothing raised
    guard.lose("taken over by 'w2' (token 1)")
    guard.lose("again")  # idempotent
    assert called == ["kill"] and guard.lost
    with pytest.raises(LeaseLost, match=r"task 'a' was lost \(taken over by 'w2' \(token 1\)\)"):
        guard.check()
    guard.on_lost(lambda: called.append("late"))  # registered after the loss: called at once
    assert called == ["kill", "late"]
