"""Agent Skills: discovery in the three folders, the session context listing, ``load_skill`` and
``read_skill_resource`` as durable bounded tool results, and a list fixed at session start (resume included).
The model is a scripted provider answering in the chat-completions wire shape; the store, engine and loop are real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from latch.agent.context import SYSTEM_PROMPT, session_context
from latch.agent.loop import AgentLoop
from latch.agent.skills import discover_skills, session_skills, skill_tools
from latch.agent.tools import ToolContext, builtin_tools
from latch.agent.tools.processes import ProcessManager
from latch.engine.recall import recalled_seqs
from latch.events import SkillsListed, ToolResult
from latch.host.loop import build_engine
from latch.kernel.files import PAGE_LIMIT_BYTES
from latch.port import ContextBudget
from latch.providers import ScriptedProvider
from latch.store import EventStore


def oa(text: str = "", calls=()) -> dict:
    msg: dict = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}],
    }


def skill(root: Path, folder: str, front: str, body: str = "Do the thing.\n", files: dict | None = None) -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}")
    for name, text in (files or {}).items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


@pytest.fixture
def dirs(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    user = tmp_path / "home" / "skills"
    return ws, user


def test_discovery_in_three_folders_with_precedence_and_one_line_warnings(dirs):
    ws, user = dirs
    skill(ws / ".latch" / "skills", "pdf", "name: pdf\ndescription: Fill PDF forms.")
    skill(user, "pdf", "name: pdf\ndescription: The user's older PDF skill.")
    skill(user, "release", "name: release\ndescription: >\n  Cut a release:\n  tag and publish.")
    skill(ws / ".claude" / "skills", "alpha", "name: alpha\ndescription: 'Claude-format skill'")
    bad = skill(ws / ".latch" / "skills", "broken", "name: [unclosed\ndescription: x")
    nodesc = skill(ws / ".claude" / "skills", "nodesc", "name: nodesc")
    upper = skill(user, "Upper", "name: Upper\ndescription: bad name")
    (ws / ".latch" / "skills" / "nofront").mkdir()
    (ws / ".latch" / "skills" / "nofront" / "SKILL.md").write_text("just text\n")
    skills, warnings = discover_skills(ws, user)
    assert [(s.name, s.source, s.description) for s in skills] == [
        ("alpha", "claude", "Claude-format skill"),
        ("pdf", "workspace", "Fill PDF forms."),
        ("release", "user", "Cut a release: tag and publish."),
    ]
    assert skills[1].path == str((ws / ".latch" / "skills" / "pdf").resolve())
    assert all("\n" not in w for w in warnings) and len(warnings) == 5
    by_file = {w.split(": ", 1)[0]: w for w in warnings}
    assert "not valid YAML" in by_file[str(bad / "SKILL.md")]
    assert "no description" in by_file[str(nodesc / "SKILL.md")]
    assert "lowercase" in by_file[str(upper / "SKILL.md")]
    assert "no front matter" in by_file[str(ws / ".latch" / "skills" / "nofront" / "SKILL.md")]
    assert "already loaded from" in by_file[str(user / "pdf" / "SKILL.md")]


class Agent:
    def __init__(
        self,
        tmp_path: Path,
        ws: Path,
        user: Path,
        responses,
        sid: str | None = None,
        store=None,
        budget: ContextBudget | None = None,
    ):
        self.ws = ws
        self.store = store or EventStore(tmp_path / "latch.db")
        self.sid = sid or self.store.create_session(workspace=str(ws), source="latch run", format="latch")
        self.skills, self.warnings = session_skills(self.store, self.sid, lambda: discover_skills(ws, user))
        self.setup = build_engine(self.store, self.sid, stream="continuity:main", model="gpt-4.1")
        self.processes = ProcessManager(self.store, self.sid, ws, log_dir=tmp_path / "logs")
        ctx = ToolContext(
            workspace=ws,
            store=self.store,
            session_id=self.sid,
            processes=self.processes,
            estimate=self.setup.counter.text,
        )
        self.provider = ScriptedProvider(responses, model="gpt-4.1")
        sc, _ = session_context(ws, skills=self.skills)
        self.loop = AgentLoop(
            self.store,
            self.sid,
            self.provider,
            setup=self.setup,
            budget=budget or ContextBudget(64_000, 4_000, 16_000),
            tools=(*builtin_tools(), *(skill_tools() if self.skills else ())),
            tool_context=ctx,
            session_context=sc,
        )

    def results(self) -> list[ToolResult]:
        return [s.event for s in self.store.events(self.sid, kinds=["tool_result"])]

    def close(self, store: bool = True):
        self.processes.close()
        if store:
            self.store.close()


def _workspace_skills(ws: Path) -> None:
    root = ws / ".latch" / "skills"
    skill(
        root,
        "pdf",
        "name: pdf\ndescription: Fill PDF forms.",
        "# PDF\n\nRun scripts/fill.py on the form.\n",
        {"scripts/fill.py": "print('filling')\n", "reference.md": "Field names are case-sensitive.\n"},
    )
    skill(root, "big", "name: big\ndescription: A very long skill.", "word " * 20_000)
    skill(root, "alpha", "name: alpha\ndescription: First by name.")


def test_skills_are_listed_in_the_session_context_in_the_same_order_across_sessions(tmp_path, dirs):
    ws, user = dirs
    _workspace_skills(ws)
    a = Agent(tmp_path, ws, user, [oa("a")])
    a.loop.say("task one")
    b = Agent(tmp_path, ws, user, [oa("b")], store=a.store)
    b.loop.say("task two")
    body_a, body_b = a.loop.turn().body, b.loop.turn().body
    assert body_a["messages"][0] == body_b["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert "pdf" not in SYSTEM_PROMPT
    first_a, first_b = body_a["messages"][1]["content"], body_b["messages"][1]["content"]
    assert first_a == first_b
    lines = [ln for ln in first_a.splitlines() if ln.startswith("- ")]
    assert lines == ["- alpha: First by name.", "- big: A very long skill.", "- pdf: Fill PDF forms."]
    assert json.dumps(body_a["tools"]) == json.dumps(body_b["tools"])
    assert [t["function"]["name"] for t in body_a["tools"]][-2:] == ["load_skill", "read_skill_resource"]
    b.close(store=False)
    a.close()


def test_load_skill_and_resources_are_durable_bounded_results_that_survive_resume(tmp_path, dirs):
    ws, user = dirs
    _workspace_skills(ws)
    a = Agent(
        tmp_path,
        ws,
        user,
        [
            oa(
                calls=[
                    ("c1", "load_skill", {"name": "pdf"}),
                    ("c2", "read_skill_resource", {"name": "pdf", "path": "scripts/fill.py"}),
                ]
            ),
            oa(
                calls=[
                    ("c3", "load_skill", {"name": "big"}),
                    ("c4", "read_skill_resource", {"name": "pdf", "path": "../big/SKILL.md"}),
                    ("c5", "load_skill", {"name": "nosuch"}),
                ]
            ),
            oa("done"),
        ],
    )
    a.loop.say("fill the form")
    a.loop.run(5)
    r1, r2, r3, r4, r5 = a.results()
    assert "Run scripts/fill.py on the form." in r1.content and not r1.is_error
    assert "[resources (read_skill_resource): reference.md, scripts/fill.py]" in r1.content
    assert "name: pdf" not in r1.content  # the body, not the front matter
    assert r2.content == "print('filling')\n"
    assert len(r3.content.encode()) <= PAGE_LIMIT_BYTES + 200 and "continue with offset=" in r3.content
    assert r4.is_error and "outside the folder of skill pdf" in r4.content
    assert r5.is_error and "no skill 'nosuch'" in r5.content
    assert [
        h.event.call_id
        for h in a.store.search("scripts/fill.py on the form", session_id=a.sid)
        if isinstance(h.event, ToolResult)
    ] == ["c1"]  # recall finds the loaded body
    sid = a.sid
    a.close()
    # resume (a new process): the same list, and the loaded skill is in the view from the store
    store = EventStore(tmp_path / "latch.db")
    b = Agent(tmp_path, ws, user, [oa("resumed")], sid=sid, store=store)
    assert b.skills == a.skills
    b.loop.say("continue")
    body = b.loop.turn().body
    tool_msgs = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    assert any("Run scripts/fill.py on the form." in c for c in tool_msgs)
    b.close()


def test_a_skill_added_or_edited_mid_session_changes_nothing_already_sent(tmp_path, dirs):
    ws, user = dirs
    _workspace_skills(ws)
    a = Agent(tmp_path, ws, user, [oa("one"), oa(calls=[("c1", "load_skill", {"name": "late"})]), oa("two")])
    a.loop.say("start")
    first = a.loop.turn().body
    skill(ws / ".latch" / "skills", "late", "name: late\ndescription: Added mid-session.")
    skill(ws / ".latch" / "skills", "alpha", "name: alpha\ndescription: Edited description.")
    again, _ = session_skills(a.store, a.sid, lambda: discover_skills(ws, user))
    assert again == a.skills and [s.name for s in again] == ["alpha", "big", "pdf"]
    a.loop.say("next")
    second = a.loop.turn().body
    (res,) = a.results()
    assert res.is_error and "offered from the next session" in res.content
    third = a.loop.turn().body
    for later in (second, third):
        assert later["messages"][:2] == first["messages"][:2]
        assert json.dumps(later["tools"]) == json.dumps(first["tools"])
    assert len(list(a.store.events(a.sid, kinds=[SkillsListed.KIND]))) == 1
    # the next session sees both changes
    b = Agent(tmp_path, ws, user, [], store=a.store)
    assert [(s.name, s.description) for s in b.skills][:2] == [
        ("alpha", "Edited description."),
        ("big", "A very long skill."),
    ]
    assert "late" in [s.name for s in b.skills]
    b.close(store=False)
    a.close()


def test_a_session_without_skills_offers_no_skill_tools_and_an_unchanged_context(tmp_path, dirs):
    ws, user = dirs
    a = Agent(tmp_path, ws, user, [oa("x")])
    assert a.skills == () and a.warnings == []
    a.loop.say("task")
    body = a.loop.turn().body
    assert "Agent skills" not in body["messages"][1]["content"]
    assert [t["function"]["name"] for t in body["tools"]] == [t.NAME for t in builtin_tools()]
    a.close()


def test_a_loaded_skill_body_stays_in_every_view_through_rotation_and_resume(tmp_path, dirs):
    """The loaded body leaves the recent window: every later view still holds it verbatim (the snapshot's
    loaded skills); the session ends and, resumed in a new process, the view holds the stored result."""
    ws, user = dirs
    skill(
        ws / ".latch" / "skills",
        "ledger",
        "name: ledger\ndescription: Reconcile the ledger.",
        "Reconcile shard LEDGER-7f3a9c1e with ROUND_HALF_EVEN before closing the month.\n",
    )
    small = ContextBudget(16_000, 2_000, 3_000)
    filler = [
        oa(f"Working through the invoices, step {i}: " + "the totals add up line by line. " * 60) for i in range(12)
    ]
    a = Agent(tmp_path, ws, user, [oa(calls=[("c1", "load_skill", {"name": "ledger"})]), *filler], budget=small)
    a.loop.say("reconcile the books")
    a.loop.turn()
    (loaded,) = [s for s in a.store.events(a.sid, kinds=["tool_result"])]
    assert "LEDGER-7f3a9c1e" in loaded.event.content
    epochs = set()
    for i in range(12):
        a.loop.say(f"next invoice batch {i}")
        last = a.loop.turn()
        epochs.add(last.view.epoch)
        shown = [m["content"] for m in last.body["messages"] if isinstance(m.get("content"), str)]
        assert any(loaded.event.content in t for t in shown), f"batch {i}: the skill body left the view"
    assert len(epochs) > 1  # rotated: the body left the recent window, the snapshot carries it
    sid = a.sid
    a.close()
    store = EventStore(tmp_path / "latch.db")
    b = Agent(tmp_path, ws, user, [oa("the shard is LEDGER-7f3a9c1e")], sid=sid, store=store, budget=small)
    b.loop.say("which shard did the ledger skill say to reconcile? LEDGER-7f3a9c1e ROUND_HALF_EVEN")
    body = b.loop.turn().body
    texts = [m["content"] for m in body["messages"] if isinstance(m.get("content"), str)]
    assert any(loaded.seq in recalled_seqs(t) for t in texts), "the load_skill result is not in the view"
    assert any(loaded.event.content in t for t in texts)
    b.close()
