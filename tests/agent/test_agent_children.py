"""Child agents: ``spawn_agent``, the child's own session from a durable profile, the
typed AgentReport as the only thing transferred back, isolation from the parent's history, state and
disproofs, the single child-policy path for spawn and resume. The model is a scripted provider in the
real wire shape (parent and child share it, in request order); tools, store, kernel and engines are real."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from sandbox_support import end_shell_group

from latch.agent.children import child_key, child_profile, child_report, create_child
from latch.agent.context import session_context
from latch.agent.handoff import engine_name
from latch.agent.loop import AgentLoop
from latch.agent.supervisor import ChildPolicyError, Supervisor
from latch.agent.tools import ToolContext, agent_tools
from latch.agent.tools.processes import ProcessManager
from latch.events import AgentProfile, AgentReport, AssistantMessage, ToolCall, ToolStarted, UserMessage
from latch.kernel.state import canonical_state
from latch.kernel.tools import apply_kernel_tool
from latch.plugins import get_engine_factory, get_estimator
from latch.port import ContextBudget
from latch.providers import ScriptedProvider
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

MODEL = "gpt-4.1"


def oa(text: str = "", calls=()) -> dict:
    msg: dict = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls
        ]
    return {"id": "r", "model": MODEL, "choices": [{"index": 0, "message": msg}]}


class Root:
    """A root agent session in ``tmp_path/ws`` whose loop the supervisor builds (``factory``, ``child``)."""

    def __init__(self, tmp_path: Path, responses, *, factory=None, child=None, store=None, sid=None):
        self.ws = tmp_path / "ws"
        self.ws.mkdir(exist_ok=True)
        self.store = store or EventStore(tmp_path / "latch.db")
        self.sid = sid or self.store.create_session(workspace=str(self.ws), source="latch run", format="latch")
        self.supervisor = Supervisor(factory or get_engine_factory("continuity"), child)
        self.provider = ScriptedProvider(responses, model=MODEL)
        self.processes = ProcessManager(self.store, self.sid, self.ws)
        ctx = ToolContext(
            workspace=self.ws, store=self.store, session_id=self.sid, processes=self.processes, estimate=len
        )
        sc, _ = session_context(self.ws)
        self.loop = AgentLoop.from_supervisor(
            self.store,
            self.sid,
            self.supervisor,
            self.provider,
            model=MODEL,
            tools=agent_tools(),
            tool_context=ctx,
            session_context=sc,
            system_prompt="You are a test agent.",
            assume_yes=True,
            budget=ContextBudget(64_000, 4_000, 16_000),
        )

    def results(self, sid=None):
        return [s.event for s in self.store.events(sid or self.sid, kinds=["tool_result"])]

    def close(self):
        self.processes.close()
        self.store.close()


@pytest.fixture
def ws_rules(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "AGENTS.md").write_text("Child rule: keep notes short.\n")


def test_a_child_runs_in_the_workspace_and_only_its_report_comes_back(tmp_path, ws_rules):
    check = f"{sys.executable} -m pytest --version"
    brief = "Create notes.txt with a greeting, then run the checks."
    r = Root(
        tmp_path,
        [
            oa(calls=[("p1", "spawn_agent", {"brief": brief, "tools": ["shell", "write_file", "read_file"]})]),
            oa(calls=[("k1", "write_file", {"path": "notes.txt", "content": "CHILDBYTES\n"})]),  # the child
            oa(calls=[("k2", "shell", {"command": check})]),
            oa("Created notes.txt; the checks ran."),
            oa("The child did it."),  # the parent again
        ],
    )
    r.store.append(r.sid, [UserMessage("PARENTSECRET: delegate the notes file")])
    apply_kernel_tool(r.store, r.sid, "set_goal", {"goal": "PARENTGOAL ship the notes"})
    apply_kernel_tool(
        r.store, r.sid, "record_disproof", {"claim": "PARENTDISPROOF flaky CI", "reason": "runner OOM, not our code"}
    )
    out = r.loop.run(4)
    assert out.stopped == "done" and len(out.steps) == 2
    assert (r.ws / "notes.txt").read_text() == "CHILDBYTES\n"  # the shared workspace

    (child,) = r.store.children(r.sid)
    assert child.id == r.store.session_id_for(child_key(r.sid, "p1")) and child.meta["agent_child"] is True
    kinds = [s.event.KIND for s in r.store.events(child.id)]
    assert kinds[:2] == ["agent_profile", "user_message"] and kinds[-1] == "agent_report"
    profile = child_profile(r.store, child.id)
    assert (
        profile.parent_session_id,
        profile.call_id,
        profile.brief,
        profile.model,
        profile.engine,
        profile.tools,
    ) == (r.sid, "p1", brief, MODEL, "continuity", ("read_file", "write_file", "shell"))  # the parent's order

    # the child's first request: the brief and the repository instructions, nothing of the parent
    first_child = json.dumps(r.provider.requests[1])
    assert brief in first_child
    assert "Child rule: keep notes short." in first_child
    # and in every request of the child, not only its first
    assert all("Child rule: keep notes short." in json.dumps(body) for body in r.provider.requests[1:4])
    for parent_only in ("PARENTSECRET", "PARENTGOAL", "PARENTDISPROOF"):
        assert parent_only not in first_child
    assert [t["function"]["name"] for t in r.provider.requests[1]["tools"]] == ["read_file", "write_file", "shell"]
    # the parent's durable disproof is not in the child's canonical state (it still is in the parent's)
    assert [d["claim"] for d in canonical_state(r.store, r.sid).disproofs] == ["PARENTDISPROOF flaky CI"]
    assert canonical_state(r.store, child.id).disproofs == ()
    # the child's goal is its own brief (derived from it), never the parent's goal
    assert canonical_state(r.store, child.id).goal == brief

    report = child_report(r.store, child.id)
    assert isinstance(report, AgentReport)
    assert (report.status, report.summary, report.files_touched, report.turns) == (
        "completed",
        "Created notes.txt; the checks ran.",
        ("notes.txt",),
        3,
    )
    assert [(v.command, v.status, v.exit_code) for v in report.validations] == [(check, "passed", 0)]

    (spawned,) = [x for x in r.results() if x.call_id == "p1"]
    assert not spawned.is_error
    assert spawned.content.startswith(f"[agent report: completed after 3 requests; child session {child.id}]")
    assert "files touched: notes.txt" in spawned.content and f"- passed: {check} (exit 0)" in spawned.content
    # the parent's next view holds the report and none of the child's history
    parent_next = r.provider.requests[4]
    text = json.dumps(parent_next)
    assert "Created notes.txt; the checks ran." in text and "CHILDBYTES" not in text
    names = [c["function"]["name"] for m in parent_next["messages"] for c in m.get("tool_calls") or ()]
    assert names == ["spawn_agent"]
    # the child's validations are informational: never the parent's evidence
    assert [e["command"] for e in canonical_state(r.store, child.id).evidence] == [check]
    assert list(canonical_state(r.store, r.sid).evidence) == []
    r.close()


def test_a_non_default_root_without_a_child_policy_fails_the_spawn_in_one_line(tmp_path):
    pytest.importorskip("latch_baselines")
    r = Root(
        tmp_path,
        [oa(calls=[("p1", "spawn_agent", {"brief": "do a thing"})]), oa("ok")],
        factory=get_engine_factory("sliding-window"),
    )
    r.loop.run(3)
    (res,) = r.results()
    assert res.is_error and "no child policy" in res.content and "\n" not in res.content
    assert r.store.children(r.sid) == []  # nothing was stored for the child
    assert len(r.provider.requests) == 2
    r.close()


def test_bad_spawn_arguments_are_one_line_and_store_nothing(tmp_path):
    r = Root(
        tmp_path,
        [
            oa(
                calls=[
                    ("p1", "spawn_agent", {"brief": "x", "tools": ["spawn_agent"]}),
                    ("p2", "spawn_agent", {"brief": "x", "tools": ["nosuch"]}),
                    ("p3", "spawn_agent", {"brief": ""}),
                ]
            ),
            oa("ok"),
        ],
    )
    r.loop.run(3)
    a, b, c = r.results()
    assert a.is_error and "unknown tool 'spawn_agent' for a child" in a.content
    assert b.is_error and "unknown tool 'nosuch'" in b.content
    assert c.is_error and "must not be empty" in c.content
    assert r.store.children(r.sid) == []
    r.close()


def test_resume_rebuilds_the_child_from_its_profile_through_the_child_policy(tmp_path):
    built = []

    def policy(profile):
        built.append(profile.session_id)
        return get_engine_factory("continuity")(profile)

    r = Root(
        tmp_path,
        [
            oa(calls=[("p1", "spawn_agent", {"brief": "child task", "model": "child-model"})]),
            oa(calls=[("k1", "shell", {"command": "echo hi"})]),
        ],
        child=policy,
    )
    # a process killed while the child's shell call ran: the parent call started, the child's call too
    r.store.append(
        r.sid,
        [
            UserMessage("go"),
            AssistantMessage(
                "", tool_calls=(ToolCall("p1", "spawn_agent", '{"brief":"child task","model":"child-model"}'),)
            ),
            ToolStarted("p1", "spawn_agent"),
        ],
    )
    child = create_child(
        r.store,
        r.sid,
        AgentProfile(r.sid, "p1", "child task", model="child-model", engine=engine_name(policy), tools=("shell",)),
    )
    r.store.append(
        child,
        [
            AssistantMessage("", tool_calls=(ToolCall("k1", "shell", '{"command":"sleep 60"}'),)),
            ToolStarted("k1", "shell"),
        ],
    )
    r.close()

    again = Root(
        tmp_path,
        [oa("child resumed and finished"), oa("parent done")],
        child=policy,
        store=EventStore(tmp_path / "latch.db"),
        sid=r.sid,
    )
    (res,) = again.loop.resume_children()
    assert res.call_id == "p1" and res.content.startswith("[agent report: completed after 2 requests")
    assert built == [child]  # rebuilt once, through the child policy, from the durable profile
    body = again.provider.requests[0]
    assert body["model"] == "child-model" and [t["function"]["name"] for t in body["tools"]] == ["shell"]
    (tool_msg,) = [m for m in body["messages"] if m["role"] == "tool"]
    assert tool_msg["tool_call_id"] == "k1" and "[interrupted:" in tool_msg["content"]
    assert [s.event.KIND for s in again.store.events(child)].count("agent_report") == 1
    assert again.loop.resume_children() == []  # the call has its result now: nothing runs twice
    assert again.loop.turn().message.text == "parent done"
    assert len(again.store.children(r.sid)) == 1
    again.close()


def test_resume_with_another_child_engine_refuses(tmp_path):
    pytest.importorskip("latch_baselines")
    r = Root(tmp_path, [oa(calls=[("p1", "spawn_agent", {"brief": "child task"})]), oa("child done"), oa("ok")])
    r.loop.run(3)
    (child,) = r.store.children(r.sid)
    store = r.store
    with pytest.raises(ChildPolicyError, match="built with engine 'continuity'"):
        AgentLoop.from_supervisor(
            store,
            child.id,
            Supervisor(get_engine_factory("continuity"), get_engine_factory("sliding-window")),
            ScriptedProvider([]),
            model=MODEL,
        )
    r.close()


def test_resume_through_another_child_policy_refuses_and_stores_nothing(tmp_path):
    pytest.importorskip("latch_baselines")
    r = Root(tmp_path, [])
    r.store.append(
        r.sid,
        [
            AssistantMessage("", tool_calls=(ToolCall("p1", "spawn_agent", '{"brief":"b"}'),)),
            ToolStarted("p1", "spawn_agent"),
        ],
    )
    create_child(r.store, r.sid, AgentProfile(r.sid, "p1", "b", model=MODEL, engine="continuity", tools=("shell",)))
    n = r.store.max_seq()
    other = Root(tmp_path, [], child=get_engine_factory("sliding-window"), store=r.store, sid=r.sid)
    with pytest.raises(ChildPolicyError, match="built with engine 'continuity'"):
        other.loop.resume_children()
    assert r.store.max_seq() == n
    other.processes.close()
    r.close()


def test_kill_9_mid_child_then_resume_rebuilds_the_child_from_its_profile(tmp_path):
    """A real ``latch run`` (subprocess, official OpenAI SDK, loopback server) killed with SIGKILL while the
    child's shell call runs; ``--resume`` rebuilds that child from its durable profile and log (same session,
    its own model), finishes it, and the parent gets the report as the result of its spawn_agent call."""
    import os
    import signal
    import sqlite3
    import subprocess
    import time

    from fake_providers import Reply, ToolUse, serve_openai

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Child rule: be brief.\n")
    db = tmp_path / "latch.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    marker = ws / "started.txt"
    slow = f"echo $$ > {marker}; sleep 60"
    spawn = json.dumps({"brief": "Run the slow job and report.", "model": "child-model"})
    base = [sys.executable, "-m", "latch", "--db", str(db), "run"]
    with serve_openai(
        [
            Reply(tool_calls=(ToolUse("p1", "spawn_agent", spawn),)),
            Reply(tool_calls=(ToolUse("k1", "shell", json.dumps({"command": slow, "timeout": 120})),)),
        ]
    ) as server:
        proc = subprocess.Popen(
            base
            + [
                "delegate the slow job",
                "--provider",
                "openai-compatible",
                "--model",
                "parent-model",
                "--base-url",
                server.base_url,
                "--yes",
            ],
            cwd=ws,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "the child's shell call never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        end_shell_group(marker)  # a shell a SIGKILLed agent left behind, ended like a reboot would
        first_child_body = server.bodies[1]
    assert first_child_body["model"] == "child-model" and "Child rule: be brief." in json.dumps(first_child_body)
    assert "delegate the slow job" not in json.dumps(first_child_body)

    def rows():
        with sqlite3.connect(db) as c:
            return c.execute("SELECT session_id, kind FROM events ORDER BY seq").fetchall()

    before = rows()
    with sqlite3.connect(db) as c:
        (root,) = c.execute("SELECT id FROM sessions WHERE source = 'latch run'").fetchone()
        (child,) = c.execute("SELECT id FROM sessions WHERE parent_id = ?", (root,)).fetchone()
    assert [k for s, k in before if s == child][:2] == ["agent_profile", "user_message"]
    assert [k for s, k in before if s == child][-1] == "tool_started"  # killed mid-call
    # the spawn call is open too; the child's spawn is bookkeeping in the parent
    assert [k for s, k in before if s == root][-2:] == ["tool_started", "agent_lifecycle"]

    with serve_openai([Reply("The slow job was interrupted; nothing else to do."), Reply("Parent done.")]) as server:
        r = subprocess.run(
            base + ["--resume", root, "--base-url", server.base_url],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        bodies = server.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert "resumed child agent: ok: [agent report: completed after 2 requests" in r.stdout
    after = rows()
    assert after[: len(before)] == before  # nothing lost, nothing rewritten
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM sessions WHERE parent_id = ?", (root,)).fetchone() == (1,)
    child_body, parent_body = bodies
    assert child_body["model"] == "child-model"  # from the child's durable profile, not a flag
    (interrupted,) = [m for m in child_body["messages"] if m["role"] == "tool"]
    assert interrupted["tool_call_id"] == "k1" and "[interrupted:" in interrupted["content"]
    assert parent_body["model"] == "parent-model"
    (report,) = [m for m in parent_body["messages"] if m["role"] == "tool"]
    assert report["tool_call_id"] == "p1" and report["content"].startswith("[agent report: completed")
    assert "The slow job was interrupted" in report["content"] and "sleep 60" not in json.dumps(parent_body)
    assert [k for s, k in after if s == child].count("agent_report") == 1


def test_two_background_children_report_once_each_at_safe_boundaries_append_only(tmp_path, ws_rules):
    r = Root(
        tmp_path,
        [
            oa(
                calls=[
                    ("p1", "spawn_agent", {"brief": "Child one: list the files.", "background": True}),
                    ("p2", "spawn_agent", {"brief": "Child two: count the lines.", "background": True}),
                ]
            ),
            oa("child one: 3 files"),
            oa("child two: 42 lines"),  # the children, between the parent's requests
            oa("Both children reported."),
        ],
    )
    r.store.append(r.sid, [UserMessage("PARENTSECRET: fan out")])
    out = r.loop.run(4)
    assert out.stopped == "done" and len(out.steps) == 2
    first, second = (s.result for s in out.steps)
    p1, p2 = r.results()
    assert p1.content.startswith("[agent started in the background: child session")
    c1, c2 = (c.id for c in r.store.children(r.sid))
    for n, (_cid, brief) in enumerate([(c1, "Child one: list the files."), (c2, "Child two: count the lines.")], 1):
        body = r.provider.requests[n]
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert "Child rule: keep notes short." in users[0] and users[-1] == brief  # between: its own kernel context
        assert all(u.startswith("<kernel-context") for u in users[1:-1])
        assert "PARENTSECRET" not in json.dumps(body)
    parent1, parent2 = r.provider.requests[0]["messages"], r.provider.requests[3]["messages"]
    assert parent2[: len(parent1)] == parent1  # the notifications extend the epoch; its prefix is unchanged
    assert out.steps[0].view.epoch == out.steps[1].view.epoch
    tail = parent2[len(parent1) :]
    assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "user", "user"]
    assert tail[3]["content"].startswith(
        f"[agent notification] [agent report: completed after 1 request; child session {c1}]\nchild one: 3 files"
    )
    assert "child two: 42 lines" in tail[4]["content"]
    notes = [s.event for s in r.store.events(r.sid, kinds=["agent_notification_delivered"])]
    assert [(n.child_session_id, n.call_id) for n in notes] == [(c1, "p1"), (c2, "p2")]
    # lifecycle bookkeeping stays out of the view and out of recall
    lifecycle = [s.event for s in r.store.events(r.sid, kinds=["agent_lifecycle"])]
    assert [(e.child_session_id, e.phase, e.status) for e in lifecycle] == [
        (c1, "spawned", None),
        (c2, "spawned", None),
        (c1, "completed", "completed"),
        (c2, "completed", "completed"),
    ]
    assert all(h.event.KIND != "agent_lifecycle" for h in r.store.search("spawned completed", mode="or"))
    assert r.loop.deliver_notifications() == []
    r.close()

    # a restart delivers nothing twice
    again = Root(tmp_path, [oa("still fine")], store=EventStore(tmp_path / "latch.db"), sid=r.sid)
    assert again.loop.deliver_notifications() == [] and again.loop.advance_children() == []
    again.loop.say("anything else?")
    body = again.loop.turn().body
    assert json.dumps(body).count("[agent notification]") == 2
    again.close()


def test_a_report_waits_for_every_open_call_to_have_a_result(tmp_path):
    r = Root(
        tmp_path, [oa(calls=[("p1", "spawn_agent", {"brief": "background job", "background": True})]), oa("child done")]
    )
    r.loop.turn()
    assert r.loop.advance_children() != []
    r.store.append(r.sid, [AssistantMessage("", tool_calls=(ToolCall("x1", "shell", '{"command":"true"}'),))])
    assert r.loop.deliver_notifications() == []  # a call without its result: not a safe boundary
    from latch.events import ToolResult

    r.store.append(r.sid, [ToolResult("x1", "ok", name="shell")])
    (seq,) = r.loop.deliver_notifications()
    assert r.store.get(seq).event.KIND == "agent_notification_delivered"
    r.close()


def test_latch_run_two_children_through_the_fake_openai_server(tmp_path):
    """Done when: a real ``latch run`` (subprocess, official OpenAI SDK) on a parent that spawns two
    background children through the loopback OpenAI server. Each child's first request body, as the server
    received it, holds only the brief and the repository instructions; the parent gets both AgentReports,
    each delivered once, after every earlier call has its result, and every parent request extends the
    previous one (one cache epoch, append-only)."""
    import sqlite3
    import subprocess

    from fake_providers import Reply, ToolUse, serve_openai

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Child rule: keep notes short.\n")
    db = tmp_path / "latch.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    briefs = ("Child one: list the files.", "Child two: count the lines.")
    spawn = [
        ToolUse(f"p{n}", "spawn_agent", json.dumps({"brief": b, "background": True})) for n, b in enumerate(briefs, 1)
    ]
    disproof = ToolUse(
        "d1", "record_disproof", json.dumps({"claim": "PARENTDISPROOF flaky CI", "reason": "runner OOM"})
    )
    script = [
        Reply(tool_calls=(disproof, *spawn)),  # 0 the parent fans out
        Reply("child one: 3 files"),
        Reply("child two: 42 lines"),  # 1, 2 the children
        Reply(tool_calls=(ToolUse("r1", "read_file", json.dumps({"path": "AGENTS.md"})),)),  # 3 the parent
        Reply("Both children reported."),
    ]  # 4 the parent
    with serve_openai(script) as server:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "latch",
                "--db",
                str(db),
                "run",
                "PARENTSECRET: fan out to two children",
                "--provider",
                "openai-compatible",
                "--model",
                MODEL,
                "--base-url",
                server.base_url,
                "--yes",
            ],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        bodies = server.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert len(bodies) == 5 and server.remaining == 0

    with sqlite3.connect(db) as c:
        (root,) = c.execute("SELECT id FROM sessions WHERE source = 'latch run'").fetchone()
        kids = [k for (k,) in c.execute("SELECT id FROM sessions WHERE parent_id = ? ORDER BY rowid", (root,))]
    assert len(kids) == 2
    store = EventStore(db)
    try:
        for n, (cid, brief) in enumerate(zip(kids, briefs, strict=False), 1):
            body = bodies[n]
            text = json.dumps(body)
            for parent_only in ("PARENTSECRET", "PARENTDISPROOF", "fan out", "spawn_agent"):
                assert parent_only not in text  # no parent history, canonical state, disproofs or tools
            assert [m["role"] for m in body["messages"]][0] == "system"
            users = [m["content"] for m in body["messages"] if m["role"] == "user"]
            assert [m["role"] for m in body["messages"][1:]] == ["user"] * len(users)  # no turns before its own
            assert "Child rule: keep notes short." in users[0] and users[-1] == brief
            # between them only the child's own kernel context, which knows the brief as its goal and nothing else
            assert all(u.startswith("<kernel-context") for u in users[1:-1])
            assert canonical_state(store, cid).disproofs == () and canonical_state(store, cid).goal == brief
            assert child_profile(store, cid).brief == brief
        # the parent: one epoch, each request's messages a prefix-extension of the previous one
        parent = [bodies[0], bodies[3], bodies[4]]
        for before, after in zip(parent, parent[1:], strict=False):
            assert after["messages"][: len(before["messages"])] == before["messages"]
        tail = bodies[3]["messages"][len(bodies[0]["messages"]) :]
        # the notifications come after the fan-out's every result (a safe boundary), once each, in spawn order
        # (then the parent's own kernel-context delta for its disproof: appended too, never a rewrite)
        assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "tool", "user", "user", "user"]
        assert tail[6]["content"].startswith('<kernel-context type="delta"') and "PARENTDISPROOF" in tail[6]["content"]
        assert [m["tool_call_id"] for m in tail[1:4]] == ["d1", "p1", "p2"]
        assert tail[4]["content"].startswith(
            f"[agent notification] [agent report: completed after 1 request; "
            f"child session {kids[0]}]\nchild one: 3 files"
        )
        assert tail[5]["content"].startswith(
            f"[agent notification] [agent report: completed after 1 request; "
            f"child session {kids[1]}]\nchild two: 42 lines"
        )
        last = json.dumps(bodies[4])
        assert last.count("[agent notification]") == 2 and "child one: 3 files" in last
        notes = [s.event for s in store.events(root, kinds=["agent_notification_delivered"])]
        assert [(n.child_session_id, n.call_id) for n in notes] == [(kids[0], "p1"), (kids[1], "p2")]
        reports = [child_report(store, k) for k in kids]
        assert [(x.status, x.summary) for x in reports] == [
            ("completed", "child one: 3 files"),
            ("completed", "child two: 42 lines"),
        ]
        assert [c.disproofs[0]["claim"] for c in [canonical_state(store, root)]] == ["PARENTDISPROOF flaky CI"]
    finally:
        store.close()


def test_a_child_engine_is_built_by_the_host_like_the_root(tmp_path):
    pytest.importorskip("latch_tiktoken")
    r = Root(tmp_path, [oa(calls=[("p1", "spawn_agent", {"brief": "child task"})]), oa("child done"), oa("ok")])
    r.loop.run(3)
    (child,) = r.store.children(r.sid)
    exact = get_estimator("tiktoken")
    resumed = AgentLoop.from_supervisor(
        r.store, child.id, r.supervisor, ScriptedProvider([]), model=MODEL, estimator=exact
    )
    assert resumed.setup.engine_name == "continuity" and resumed.setup.estimator is exact
    assert resumed.setup.keeps_instruction  # held to "the latest user instruction is in every view"
    assert resumed.setup.token_counts is not None  # the session's durable exact-count cache
    assert resumed.engine.default_budget().context_window_tokens > 0
    r.close()
