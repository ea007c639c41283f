"""MCP tools: a real stdio MCP server built on the official SDK (tests/mcp_server.py), driven
by the SDK's real client through :class:`latch.agent.mcp.McpHub` and the real agent loop, store and engine.
The model is a scripted provider answering in the chat-completions wire shape."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from latch.agent.context import session_context
from latch.agent.loop import AgentLoop
from latch.agent.mcp import McpHub, McpServerConfig, mcp_servers, mcp_tools, session_mcp_tools
from latch.agent.tools import ToolContext, builtin_tools
from latch.agent.tools.processes import ProcessManager
from latch.config import ConfigError, validate_config
from latch.events import McpToolsListed, Mutation, ToolResult
from latch.host.loop import build_engine
from latch.kernel.state import canonical_state
from latch.port import ContextBudget
from latch.providers import ScriptedProvider
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


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


class Server:
    """The test server's files: its tool list (``state``), its pid, its notes."""

    def __init__(self, tmp_path: Path):
        self.state, self.pid_file, self.notes = tmp_path / "state.json", tmp_path / "server.pid", tmp_path / "notes"
        self.set(tools=["echo", "add", "note"])

    def set(self, **state) -> None:
        self.state.write_text(json.dumps(state))

    def env(self, db: Path | None = None) -> dict[str, str]:
        env = {
            "LATCH_TEST_MCP_STATE": str(self.state),
            "LATCH_TEST_MCP_PID": str(self.pid_file),
            "LATCH_TEST_MCP_NOTES": str(self.notes),
        }
        if db is not None:
            env["LATCH_TEST_MCP_DB"] = str(db)
        return env

    def kill(self) -> None:
        pid = int(self.pid_file.read_text())
        self.pid_file.unlink()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def note_lines(self) -> list[list[str]]:
        return [ln.split("\t") for ln in self.notes.read_text().splitlines()] if self.notes.exists() else []


class Agent:
    def __init__(self, tmp_path: Path, server: Server, responses, hub_config: McpServerConfig | None = None, **kw):
        self.ws = tmp_path / "ws"
        self.ws.mkdir(exist_ok=True)
        self.db = tmp_path / "latch.db"
        self.store = EventStore(self.db)
        self.sid = self.store.create_session(workspace=str(self.ws), source="latch run", format="latch")
        self.hub = McpHub(
            [hub_config or McpServerConfig("t", sys.executable, (str(SERVER),), server.env(self.db))],
            cwd=self.ws,
            log_dir=tmp_path / "mcp-logs",
        )
        self.entries, self.warnings = session_mcp_tools(self.store, self.sid, self.hub)
        self.setup = build_engine(self.store, self.sid, stream="continuity:main", model="gpt-4.1")
        self.processes = ProcessManager(self.store, self.sid, self.ws, log_dir=tmp_path / "logs")
        ctx = ToolContext(
            workspace=self.ws,
            store=self.store,
            session_id=self.sid,
            processes=self.processes,
            estimate=self.setup.counter.text,
        )
        self.provider = ScriptedProvider(responses, model="gpt-4.1")
        sc, _ = session_context(self.ws)
        self.loop = AgentLoop(
            self.store,
            self.sid,
            self.provider,
            setup=self.setup,
            budget=ContextBudget(64_000, 4_000, 16_000),
            tools=(*builtin_tools(), *mcp_tools(self.entries, self.hub)),
            tool_context=ctx,
            session_context=sc,
            **kw,
        )

    def results(self) -> list[ToolResult]:
        return [s.event for s in self.store.events(self.sid, kinds=["tool_result"])]

    def kinds(self) -> list[str]:
        return [s.event.KIND for s in self.store.events(self.sid)]

    def close(self):
        self.hub.close()
        self.processes.close()
        self.store.close()


@pytest.fixture
def server(tmp_path):
    return Server(tmp_path)


@pytest.fixture
def agent(tmp_path, server):
    made = []

    def make(responses, **kw):
        a = Agent(tmp_path, server, responses, **kw)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


def test_tools_are_listed_once_prefixed_sorted_and_stored(agent, server):
    a = agent([oa(calls=[("c1", "mcp__t__add", {"a": 2, "b": 40})]), oa("42")])
    assert [e.name for e in a.entries] == ["mcp__t__add", "mcp__t__echo", "mcp__t__note"]
    assert [e.read_only for e in a.entries] == [True, True, False]
    (listed,) = [s.event for s in a.store.events(a.sid, kinds=[McpToolsListed.KIND])]
    assert listed.tools == a.entries and listed.servers == ("t",) and listed.failed == {}
    schema = json.loads(a.entries[0].schema)
    assert schema["name"] == "mcp__t__add" and schema["input_schema"]["required"] == ["a", "b"]
    out = a.loop.run(3)
    assert out.stopped == "done"
    (res,) = a.results()
    assert res.content == "42" and not res.is_error and res.name == "mcp__t__add"
    names = [t["function"]["name"] for t in out.steps[0].body["tools"]]
    assert names[-3:] == ["mcp__t__add", "mcp__t__echo", "mcp__t__note"]
    assert names[: len(builtin_tools())] == [t.NAME for t in builtin_tools()]
    # the result is an ordinary durable event: exact recall finds it
    assert any(h.seq for h in a.store.search("42", session_id=a.sid))
    # a second call of session_mcp_tools reads the stored list back, whatever the server lists now
    server.set(tools=["echo"])
    again, _ = session_mcp_tools(a.store, a.sid, None)
    assert again == a.entries


def test_a_restarted_server_with_reordered_and_missing_tools_leaves_the_tools_bytes_identical(agent, server):
    a = agent([], assume_yes=True)
    a.provider._responses += [oa(calls=[("c1", "mcp__t__echo", {"text": "one"})])]
    first = a.loop.turn()
    assert first.results[0].content == "echo: one"
    server.kill()  # the server crashes ...
    server.set(crash=True)  # ... and cannot come back for a while
    a.provider._responses += [oa(calls=[("c2", "mcp__t__echo", {"text": "two"})])]
    down = a.loop.turn()
    assert down.results[0].is_error and "not available" in down.results[0].content
    server.set(tools=["note", "echo"])  # back, with its tools reordered and add missing
    a.provider._responses += [
        oa(calls=[("c3", "mcp__t__add", {"a": 1, "b": 2}), ("c4", "mcp__t__echo", {"text": "three"})]),
        oa("done"),
    ]
    back = a.loop.turn()
    missing, works = back.results
    assert missing.is_error and "no longer offers the tool 'add'" in missing.content
    assert not works.is_error and works.content == "echo: three"
    last = a.loop.turn()
    steps = [first, down, back, last]
    tools = [json.dumps(s.body["tools"]).encode() for s in steps]
    assert len(set(tools)) == 1  # every request of the session offered the same bytes
    assert [t["function"]["name"] for t in steps[-1].body["tools"] if "mcp__" in t["function"]["name"]] == [
        "mcp__t__add",
        "mcp__t__echo",
        "mcp__t__note",
    ]
    assert all(s.body["messages"][0] == steps[0].body["messages"][0] for s in steps)
    assert len([s for s in a.store.events(a.sid, kinds=[McpToolsListed.KIND])]) == 1


def test_a_mutating_tool_asks_commits_before_it_runs_and_stales_validation(agent, server):
    a = agent([])
    (a.ws / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    pytest_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_ok.py"
    a.loop.assume_yes = True
    a.provider._responses += [oa(calls=[("c1", "shell", {"command": pytest_cmd})])]
    a.loop.turn()
    (obs,) = canonical_state(a.store, a.sid).evidence
    assert obs["status"] == "passed" and obs["current"]
    g0 = canonical_state(a.store, a.sid).generation
    # a read-only tool: allowed without asking, no mutation, the evidence stays current
    a.loop.assume_yes = False
    a.provider._responses += [oa(calls=[("c2", "mcp__t__echo", {"text": "look"})])]
    step = a.loop.turn()
    assert step.results[0].content == "echo: look"
    st = canonical_state(a.store, a.sid)
    assert st.generation == g0 and st.evidence[0]["current"]
    # a mutating tool is asked for like a shell command: not interactive, no --yes -> refused, nothing ran
    a.provider._responses += [oa(calls=[("c3", "mcp__t__note", {"text": "refused"})])]
    step = a.loop.turn()
    assert step.results[0].is_error and "needs the user's approval" in step.results[0].content
    assert server.note_lines() == [] and canonical_state(a.store, a.sid).generation == g0
    # allowed: the call, its ToolStarted and a Mutation are durable before the server runs it
    a.loop.assume_yes = True
    a.provider._responses += [oa(calls=[("c4", "mcp__t__note", {"text": "hello"})])]
    step = a.loop.turn()
    assert step.results[0].content == "noted" and not step.results[0].is_error
    ((text, seen),) = server.note_lines()
    seen = seen.split()
    assert text == "hello" and seen[-3:] == ["assistant_message", "tool_started", "mutation"]
    st = canonical_state(a.store, a.sid)
    assert st.generation == g0 + 1 and not st.evidence[0]["current"]
    (mut,) = [s.event for s in a.store.events(a.sid, kinds=[Mutation.KIND])]
    assert mut.tool == "mcp__t__note" and mut.paths == ()


def test_a_server_that_cannot_start_is_one_warning_and_offers_nothing(tmp_path, server):
    server.set(crash=True)
    store = EventStore(tmp_path / "x.db")
    sid = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    with McpHub([McpServerConfig("t", sys.executable, (str(SERVER),), server.env())]) as hub:
        entries, warnings = session_mcp_tools(store, sid, hub)
    assert entries == ()
    (w,) = warnings
    assert w.startswith("mcp server t: ") and "not offered in this session" in w and "\n" not in w
    (listed,) = [s.event for s in store.events(sid, kinds=[McpToolsListed.KIND])]
    assert listed.servers == ("t",) and set(listed.failed) == {"t"}
    store.close()


@pytest.mark.parametrize(
    "table, message",
    [
        ({"x": {"args": []}}, "mcp.servers.x.command must be a non-empty string"),
        ({"x": {"command": "srv", "args": "a b"}}, "mcp.servers.x.args must be a list of strings"),
        ({"x": {"command": "srv", "env": {"A": 1}}}, "mcp.servers.x.env must be a table of strings"),
        ({"x": {"command": "srv", "timeout": 0}}, "mcp.servers.x.timeout must be a number of seconds"),
        ({"x": {"command": "srv", "cmd": "y"}}, "unknown key 'cmd'"),
        ({"a__b": {"command": "srv"}}, "server name must be"),
    ],
)
def test_bad_mcp_config_is_one_clear_error(table, message):
    with pytest.raises(ConfigError, match="^cfg.toml: ") as exc:
        validate_config({"mcp": {"servers": table}}, "cfg.toml")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_servers_come_from_the_config_sorted():
    cfg = validate_config(
        {
            "mcp": {
                "servers": {
                    "zeta": {"command": "z"},
                    "alpha": {"command": "a", "args": ["-v"], "env": {"K": "v"}, "timeout": 5},
                }
            }
        }
    )
    assert [(s.name, s.command, s.args, dict(s.env), s.timeout) for s in mcp_servers(cfg)] == [
        ("alpha", "a", ("-v",), {"K": "v"}, 5.0),
        ("zeta", "z", (), {}, 120.0),
    ]


def test_latch_run_offers_config_servers_and_skills_and_resume_offers_the_same_bytes(tmp_path, server):
    import subprocess

    from fake_providers import Reply, ToolUse, serve_openai

    ws = tmp_path / "ws"
    (ws / ".latch" / "skills" / "pdf").mkdir(parents=True)
    (ws / ".latch" / "skills" / "pdf" / "SKILL.md").write_text(
        "---\nname: pdf\ndescription: Fill PDF forms.\n---\nUse the form filler.\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    env_table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in server.env().items())
    (home / "config.toml").write_text(
        f"[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}]\nenv = {{ {env_table} }}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(home), "COLUMNS": "200"})

    def latch(*args):
        return subprocess.run(
            [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), *args],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )

    script = [
        Reply(tool_calls=(ToolUse("c1", "mcp__t__echo", json.dumps({"text": "hi"})),)),
        Reply(tool_calls=(ToolUse("c2", "load_skill", json.dumps({"name": "pdf"})),)),
        Reply("done"),
    ]
    with serve_openai(script) as fake:
        r = latch(
            "run", "use the tools", "--provider", "openai-compatible", "--model", "local", "--base-url", fake.base_url
        )
        bodies = fake.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert "→ mcp__t__echo: hi" in r.stdout and "ok: echo: hi" in r.stdout and "→ load_skill: pdf" in r.stdout
    names = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert names[-5:] == ["load_skill", "read_skill_resource", "mcp__t__add", "mcp__t__echo", "mcp__t__note"]
    assert "- pdf: Fill PDF forms." in bodies[0]["messages"][1]["content"]
    assert "Use the form filler." in json.dumps(bodies[2])
    # the server changes its tools and a skill is added; the resumed session offers the same bytes
    server.set(tools=["note", "echo"])
    (ws / ".latch" / "skills" / "late").mkdir()
    (ws / ".latch" / "skills" / "late" / "SKILL.md").write_text("---\nname: late\ndescription: Late.\n---\nx\n")
    import sqlite3

    with sqlite3.connect(tmp_path / "latch.db") as db:
        (sid,) = db.execute("SELECT id FROM sessions WHERE source = 'latch run'").fetchone()
    with serve_openai(
        [Reply(tool_calls=(ToolUse("c3", "mcp__t__add", json.dumps({"a": 1, "b": 1})),)), Reply("resumed")]
    ) as fake:
        r = latch("run", "--resume", sid, "go on", "--base-url", fake.base_url, "--yes")
        resumed = fake.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert "no longer offers the tool 'add'" in r.stdout
    assert {json.dumps(b["tools"]) for b in resumed} == {json.dumps(bodies[0]["tools"])}
    assert resumed[0]["messages"][1] == bodies[0]["messages"][1]  # the same session context: no 'late' skill
