"""Invariant tier: child agents and agent groups (spec "Sessions & continuity", numbered in reading order).

* R5: every child has its own complete L0-L3 stack; it starts from the brief and the repository
  instructions; its state and evidence stay local; the AgentReport is the only result transferred back and
  its validations never become parent evidence.
* R9: child sessions construct through one explicit policy: every spawn, worker reconstruction and resume
  builds the child's engine through the supervisor's single factory from the child's durable profile; a
  non-default root without a child policy fails before anything is stored.
* R16: asynchronous child lifecycle events are hidden from recent context and recall; a report is
  delivered as AgentNotificationDelivered only at a safe boundary, once (the durable dedupe marker), and
  extends the current cache epoch without rewriting its prefix or exposing the child's transcript.
* R27: group events are ordinary durable events of the root session; a claim is decided by the transaction
  that appends it (two processes racing: one owner); a restart replays the same tasks, claims, members and
  delivery state.
* R28: group messages are information only: pending until the recipient's safe boundary, delivered FIFO
  into its own session in one transaction, exactly once across restarts, never waking an idle agent, never
  evidence, one compact user-role observation each.
* R29: the /group view (``latch group``) reduces the same events with the same reducer, live and resumed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from group_projection_support import assert_projection_is_the_replay

from latch.agent.children import child_key, child_report, create_child
from latch.agent.context import session_context
from latch.agent.group import Group, GroupState
from latch.agent.handoff import engine_name
from latch.agent.loop import AgentLoop
from latch.agent.supervisor import ChildPolicyError, Supervisor
from latch.agent.tools import ToolContext, agent_tools, builtin_tools
from latch.agent.tools.processes import ProcessManager
from latch.agent.worker import run_worker, task_call_id
from latch.cli import _load_commands, cli
from latch.events import AgentProfile, AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.kernel.state import canonical_state
from latch.kernel.tools import apply_kernel_tool
from latch.plugins import get_engine_factory
from latch.port import ContextBudget
from latch.providers import ScriptedProvider
from latch.store import EventStore

MODEL = "gpt-4.1"


def oa(text: str = "", calls=()) -> dict:
    msg: dict = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls
        ]
    return {"id": "r", "model": MODEL, "choices": [{"index": 0, "message": msg}]}


class Root:
    def __init__(self, tmp_path: Path, responses, supervisor=None, store=None, sid=None):
        self.ws = tmp_path / "ws"
        self.ws.mkdir(exist_ok=True)
        (self.ws / "AGENTS.md").write_text("REPO RULE: keep it short.\n")
        self.store = store or EventStore(tmp_path / "latch.db")
        self.sid = sid or self.store.create_session(workspace=str(self.ws), source="latch run", format="latch")
        self.supervisor = supervisor or Supervisor(get_engine_factory("continuity"))
        self.provider = ScriptedProvider(responses, model=MODEL)
        self.processes = ProcessManager(self.store, self.sid, self.ws)
        ctx = ToolContext(
            workspace=self.ws, store=self.store, session_id=self.sid, processes=self.processes, estimate=len
        )
        self.loop = AgentLoop.from_supervisor(
            self.store,
            self.sid,
            self.supervisor,
            self.provider,
            model=MODEL,
            tools=agent_tools(),
            tool_context=ctx,
            session_context=session_context(self.ws)[0],
            system_prompt="You are a test agent.",
            assume_yes=True,
            budget=ContextBudget(64_000, 4_000, 16_000),
        )

    def close(self):
        self.processes.close()
        self.store.close()


def _users(body) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_r5_a_child_has_its_own_stack_and_only_its_report_comes_back(tmp_path):
    check = f"{sys.executable} -m pytest --version"
    brief = "Write notes.txt and run the check."
    r = Root(
        tmp_path,
        [
            oa(calls=[("p1", "spawn_agent", {"brief": brief, "tools": ["write_file", "shell"]})]),
            oa(calls=[("k1", "write_file", {"path": "notes.txt", "content": "CHILDBYTES\n"})]),
            oa(calls=[("k2", "shell", {"command": check})]),
            oa("CHILDSUMMARY wrote notes.txt"),
            oa("parent done"),
        ],
    )
    r.store.append(r.sid, [UserMessage("PARENTHISTORY delegate")])
    apply_kernel_tool(r.store, r.sid, "set_goal", {"goal": "PARENTGOAL"})
    apply_kernel_tool(r.store, r.sid, "record_disproof", {"claim": "PARENTDISPROOF", "reason": "not ours"})
    assert r.loop.run(3).stopped == "done"
    (child,) = r.store.children(r.sid)
    # L3: the child's events are its own session's; none of them is in the parent's
    parent_calls = [c.name for s in r.store.events(r.sid, kinds=["assistant_message"]) for c in s.event.tool_calls]
    child_calls = [c.name for s in r.store.events(child.id, kinds=["assistant_message"]) for c in s.event.tool_calls]
    assert parent_calls == ["spawn_agent"] and child_calls == ["write_file", "shell"]
    # L0: the child's first view is its brief and the repository instructions (and its own kernel context)
    first = r.provider.requests[1]
    users = _users(first)
    assert "REPO RULE: keep it short." in users[0] and users[-1] == brief
    assert all(u.startswith("<kernel-context") for u in users[1:-1])
    assert [m["role"] for m in first["messages"]] == ["system"] + ["user"] * len(users)
    for parent_only in ("PARENTHISTORY", "PARENTGOAL", "PARENTDISPROOF"):
        assert parent_only not in json.dumps(first)
    # L1: the child's state and evidence are local; the parent's validations are not the child's, nor back
    cs, ps = canonical_state(r.store, child.id), canonical_state(r.store, r.sid)
    assert cs.goal == brief and cs.disproofs == () and [e["command"] for e in cs.evidence] == [check]
    assert ps.goal == "PARENTGOAL" and list(ps.evidence) == [] and len(ps.disproofs) == 1
    # the report is the only result transferred back
    report = child_report(r.store, child.id)
    assert (report.status, report.summary, report.files_touched) == (
        "completed",
        "CHILDSUMMARY wrote notes.txt",
        ("notes.txt",),
    )
    (result,) = [s.event for s in r.store.events(r.sid, kinds=["tool_result"])]
    assert result.call_id == "p1" and result.content.startswith("[agent report: completed after 3 requests")
    last = json.dumps(r.provider.requests[4])
    assert "CHILDSUMMARY" in last and "CHILDBYTES" not in last and '"write_file", "arguments"' not in last
    assert "k1" not in [m.get("tool_call_id") for m in r.provider.requests[4]["messages"]]
    r.close()


def test_r9_spawn_resume_and_worker_reconstruction_build_children_through_one_factory(tmp_path):
    built: list[tuple[str, str | None, str | None]] = []
    continuity = get_engine_factory("continuity")

    def policy(profile):
        built.append((profile.session_id, profile.parent_session_id, profile.model))
        return continuity(profile)

    sup = Supervisor(continuity, child_policy=policy)
    r = Root(
        tmp_path,
        [
            oa(calls=[("p1", "spawn_agent", {"brief": "child A", "model": "child-model"})]),
            oa("A done"),
            oa("parent done"),
            oa("task done"),
        ],
        supervisor=sup,
    )
    r.loop.run(2)
    (a,) = r.store.children(r.sid)
    assert built == [(a.id, r.sid, "child-model")]  # spawn: from the durable profile's model
    AgentLoop.from_supervisor(r.store, a.id, sup, r.provider)  # resume: the same factory, the same profile
    assert built[-1] == (a.id, r.sid, "child-model") and len(built) == 2
    # worker reconstruction: a task whose dead owner left its child (profile + brief) behind
    g = Group(r.store, r.sid)
    g.create_task("t1", "summarise", brief="Summarise the notes.")
    assert g.claim_task("t1", "dead", lease_seconds=1, now=0.0)
    profile = AgentProfile(
        parent_session_id=r.sid,
        call_id=task_call_id("t1"),
        brief="Summarise the notes.",
        model="task-model",
        engine=engine_name(policy),
        config={},
        tools=("read_file",),
    )
    orphan = create_child(r.store, r.sid, profile)
    (run,) = run_worker(g, "w2", r.loop, lease_seconds=30)
    assert (run.task_id, run.session_id, run.reclaimed, run.completed) == ("t1", orphan, True, True)
    assert built[-1] == (orphan, r.sid, "task-model") and len(built) == 3
    assert orphan == r.store.session_id_for(child_key(r.sid, "group-task:t1"))
    assert [s.event.text for s in r.store.events(orphan, kinds=["user_message"])] == ["Summarise the notes."]
    # a non-default root without a child policy: spawn, resume and workers all refuse; nothing is stored
    other = Supervisor(lambda p: continuity(p))
    before = r.store.max_seq()
    root2 = AgentLoop.from_supervisor(r.store, r.sid, other, r.provider, model=MODEL, tools=agent_tools())
    out = root2.spawn_agent("p9", {"brief": "nope"})
    assert out.is_error and "no child policy" in out.content
    with pytest.raises(ChildPolicyError):
        AgentLoop.from_supervisor(r.store, a.id, other, r.provider)
    g.create_task("t2", "more")
    before = r.store.max_seq()
    with pytest.raises(ChildPolicyError, match="no child policy"):
        run_worker(g, "w3", root2, lease_seconds=30)
    assert r.store.max_seq() == before and len(built) == 3
    r.close()


def test_r16_reports_are_delivered_once_at_safe_boundaries_and_lifecycle_stays_hidden(tmp_path):
    r = Root(
        tmp_path,
        [
            oa(
                calls=[
                    ("p1", "spawn_agent", {"brief": "bg child", "background": True}),
                    ("x1", "read_file", {"path": "AGENTS.md"}),
                ]
            ),
            oa(calls=[("k1", "read_file", {"path": "AGENTS.md"})]),
            oa("CHILDREPORT ok"),  # the child
            oa("parent saw it"),
        ],
    )
    r.store.append(r.sid, [UserMessage("fan out")])
    out = r.loop.run(3)
    assert out.stopped == "done" and len(out.steps) == 2
    first, second = r.provider.requests[0]["messages"], r.provider.requests[3]["messages"]
    assert second[: len(first)] == first and out.steps[0].view.epoch == out.steps[1].view.epoch
    tail = second[len(first) :]
    assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "user"]  # after both results: safe
    assert tail[3]["content"].startswith("[agent notification] [agent report: completed after 2 requests")
    text = json.dumps(second)
    assert "CHILDREPORT ok" in text and "k1" not in [m.get("tool_call_id") for m in second]  # no child transcript
    assert "agent_lifecycle" not in text and "spawned" not in tail[3]["content"]
    kinds = [s.kind for s in r.store.events(r.sid)]
    assert kinds.count("agent_lifecycle") == 2 and kinds.count("agent_notification_delivered") == 1
    assert all(h.event.KIND != "agent_lifecycle" for h in r.store.search("spawned completed", mode="or"))
    # a restart delivers nothing twice; a report finished while a call is open waits for its result
    child = r.store.children(r.sid)[0].id
    r.close()
    again = Root(
        tmp_path,
        [oa(calls=[("p2", "spawn_agent", {"brief": "bg two", "background": True})]), oa("second child done")],
        store=EventStore(tmp_path / "latch.db"),
        sid=r.sid,
    )
    marker = [s.event for s in again.store.events(again.sid, kinds=["agent_notification_delivered"])]
    assert [m.child_session_id for m in marker] == [child]
    assert again.loop.deliver_notifications() == []
    again.loop.say("one more")
    again.loop.turn()  # spawns p2 (its result is the started note)
    assert len(again.loop.advance_children()) == 1  # finished, buffered, not delivered
    again.store.append(again.sid, [AssistantMessage("", tool_calls=(ToolCall("o1", "shell", '{"command":"true"}'),))])
    assert again.loop.deliver_notifications() == []  # o1 has no result: not a safe boundary
    again.store.append(again.sid, [ToolResult("o1", "ok", name="shell")])
    (seq,) = again.loop.deliver_notifications()
    assert again.store.get(seq).event.child_session_id == again.store.children(again.sid)[1].id
    assert again.loop.deliver_notifications() == []
    again.close()


RACE = r"""
import sys
from latch.store import EventStore
from latch.agent.group import Group
store = EventStore(sys.argv[1])
g = Group(store, sys.argv[2])
won = [t for t in sys.argv[4:] if g.claim_task(t, sys.argv[3])]
print(" ".join(won))
"""


def test_r27_claims_are_decided_by_their_transaction_and_replay_after_restart(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    g = Group(store, root)
    ids = [f"t{i:02d}" for i in range(40)]
    for t in ids:
        g.create_task(t, f"task {t}")
    g.join("a", "sa")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(store.path), root, agent, *ids], stdout=subprocess.PIPE, text=True
        )
        for agent in ("a", "b")
    ]
    won = [set(p.communicate(timeout=120)[0].split()) for p in procs]
    assert won[0].isdisjoint(won[1]) and won[0] | won[1] == set(ids)  # exactly one owner per task
    claims = [s for s in store.events(root, kinds=["group_task_claimed"])]
    assert len(claims) == 40 and all(s.session_id == root for s in claims)  # ordinary events of the root
    live = g.state()
    assert {t: live.tasks[t].owner for t in ids} == {t: ("a" if t in won[0] else "b") for t in ids}
    store.close()
    assert assert_projection_is_the_replay(tmp_path / "latch.db", root) == live  # as the racing processes left it
    fresh = EventStore(tmp_path / "latch.db")
    resumed = Group(fresh, root)
    assert resumed.state() == live and GroupState.replay(resumed.events()) == live
    assert resumed.state().members == {"a": "sa"}
    assert resumed.claim_task("t00", "c") is False  # a restart never duplicates ownership
    fresh.close()


def test_r28_messages_are_information_delivered_fifo_once_at_a_safe_boundary(tmp_path):
    store = EventStore(tmp_path / "latch.db")
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    member = store.create_session(workspace=str(tmp_path), source="latch run", format="latch", parent_id=root)
    g = Group(store, root)
    texts = ["first: tests passed", "second", "third"]
    ids = [g.send_message("lead", "w1", t) for t in texts]
    assert store.count_events(member) == 0  # an idle agent is not woken: nothing reaches its session
    provider = ScriptedProvider([oa("noted")], model=MODEL)
    processes = ProcessManager(store, member, tmp_path)
    ctx = ToolContext(workspace=tmp_path, store=store, session_id=member, processes=processes, estimate=len)
    loop = AgentLoop.from_supervisor(
        store,
        member,
        Supervisor(get_engine_factory("continuity")),
        provider,
        model=MODEL,
        tools=builtin_tools(),
        tool_context=ctx,
        session_context=session_context(tmp_path)[0],
        group=g,
        group_agent="w1",
    )
    loop.say("go on")
    loop.turn()
    delivered = list(store.events(member, kinds=["group_message_delivered"]))
    assert [s.event.message_id for s in delivered] == ids  # FIFO
    assert [s.seq for s in delivered] == list(range(delivered[0].seq, delivered[0].seq + 3))  # one transaction
    users = _users(provider.requests[0])
    assert users[-3:] == [f"[message from lead] {t}" for t in texts]  # one compact user-role observation each
    assert list(canonical_state(store, member).evidence) == []  # information, never evidence
    processes.close()
    store.close()
    fresh = EventStore(tmp_path / "latch.db")
    assert Group(fresh, root).deliver("w1", member) == []  # exactly once across restarts
    assert Group(fresh, root).state().delivered == set(ids)
    fresh.close()


def test_r29_the_group_view_reduces_the_same_events_live_and_resumed(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"
    store = EventStore(db)
    root = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    g = Group(store, root)
    g.create_task("a", "parse")
    g.create_task("b", "test", depends_on=["a"])
    g.join("w1", "s1")
    g.claim_task("a", "w1", lease_seconds=60, now=100.0)
    g.complete_task("a", "w1", summary="parsed")
    g.send_message("lead", "w1", "hi")
    live = CliRunner().invoke(cli, ["--db", str(db), "group", root, "--json"])
    assert live.exit_code == 0, live.output
    doc = json.loads(live.output)
    assert doc == {"root": root, **GroupState.replay(g.events()).summary()}
    assert [(t["id"], t["status"]) for t in doc["tasks"]] == [("a", "completed"), ("b", "ready")]
    store.close()
    resumed = subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(db), "group", root, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert resumed.returncode == 0 and json.loads(resumed.stdout) == doc
