"""``latch view`` and ``latch replay`` of a session recorded by ``latch run`` show the agent's real system
prompt, tool schemas and repository instructions: the request body the loopback OpenAI server
received equals ``latch view --format openai`` of that request."""

from __future__ import annotations

import json
import sqlite3

import pytest
from fake_providers import Reply, ToolUse, serve_openai
from test_agent_run import KEY, _env, _usage, latch, session_id

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


def _script():
    return [
        Reply(
            tool_calls=(ToolUse("c1", "write_file", json.dumps({"path": "hello.txt", "content": "hi\n"})),),
            usage=_usage("openai", 900),
        ),
        Reply("Wrote hello.txt.", usage=_usage("openai", 950, cached=900)),
    ]


def _comparable(body: dict) -> dict:
    """The parts of a chat-completions body that come from the view (the run adds stream options and caps)."""
    return {k: body.get(k) for k in ("model", "messages", "tools")}


def test_view_of_a_run_request_is_the_body_the_provider_got(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Always run `python -m pytest` before you answer. MARKER-7431\n")
    with serve_openai(_script()) as server:
        r = latch(
            tmp_path,
            "run",
            "write hello.txt",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1",
            "--base-url",
            server.base_url,
            "--yes",
            cwd=ws,
            env=_env(tmp_path, OPENAI_API_KEY=KEY),
        )
        bodies = server.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert len(bodies) == 2
    sid = session_id(tmp_path)
    with sqlite3.connect(tmp_path / "latch.db") as db:
        recorded = [k for (k,) in db.execute("SELECT kind FROM events WHERE kind = 'harness_prompt'")]
    assert recorded == ["harness_prompt"]  # once per session
    for n, sent in enumerate(bodies, 1):
        v = latch(tmp_path, "view", sid, "--request", str(n), "--format", "openai", cwd=ws)
        assert v.returncode == 0, v.stderr + v.stdout
        shown = json.loads(v.stdout)
        assert _comparable(shown) == _comparable(sent)
    system = sent["messages"][0]
    assert system["role"] == "system" and "Latch" in system["content"]
    assert "MARKER-7431" in json.dumps(shown["messages"][1])  # the repository instructions, as sent
    assert {t["function"]["name"] for t in shown["tools"]} >= {"read_file", "write_file", "shell"}

    rep = latch(tmp_path, "replay", sid, "--json", cwd=ws)
    assert rep.returncode in (0, 1), rep.stderr + rep.stdout
    doc = json.loads(rep.stdout)
    assert doc["harness"]["source"] == "recorded" and doc["harness"]["tools"] == len(sent["tools"])
    assert doc["harness"]["system_tokens"] > 0


def test_view_and_replay_of_a_run_use_the_budget_it_ran_with(tmp_path):
    """A `latch run --window 30000 --reserve 1000 --recent 5000` session is viewed and replayed with that budget
    (read from its profile, as `latch run --resume` does), not the default one; --window still wins."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with serve_openai([Reply("first", usage=_usage("openai", 900))]) as server:
        r = latch(
            tmp_path,
            "run",
            "task",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1",
            "--base-url",
            server.base_url,
            "--window",
            "30000",
            "--reserve",
            "1000",
            "--recent",
            "5000",
            "--yes",
            cwd=ws,
            env=_env(tmp_path, OPENAI_API_KEY=KEY),
        )
    assert r.returncode == 0, r.stderr + r.stdout
    sid = session_id(tmp_path)
    v = latch(tmp_path, "view", sid, "--request", "1", cwd=ws)
    assert v.returncode == 0, v.stderr + v.stdout
    text = " ".join(v.stdout.split())
    assert "of 29,000 tokens" in text and "window 30,000 (the budget its `latch run` was started with)" in text
    assert "reserve 1,000" in text
    body = json.loads(latch(tmp_path, "view", sid, "--request", "1", "--format", "anthropic", cwd=ws).stdout)
    assert body["max_tokens"] == 1000
    rep = json.loads(latch(tmp_path, "replay", sid, "--json", cwd=ws).stdout)
    assert {
        k: rep["budget"][k] for k in ("context_window_tokens", "reserve_tokens", "recent_tokens", "window_source")
    } == {"context_window_tokens": 30000, "reserve_tokens": 1000, "recent_tokens": 5000, "window_source": "run"}
    flagged = latch(tmp_path, "view", sid, "--request", "1", "--window", "100000", cwd=ws)
    assert flagged.returncode == 0 and "window 100,000 (set by --window)" in " ".join(flagged.stdout.split())


def test_a_resumed_run_with_other_instructions_is_viewed_with_the_prompt_it_sent(tmp_path):
    """A run resumed after AGENTS.md changed records a second harness prompt with its first answer; `latch view` of
    every request, before and after the resume, is the body the provider got (replay once used the first)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Rule one. MARKER-ALPHA\n")
    env = _env(tmp_path, OPENAI_API_KEY=KEY)
    with serve_openai(_script()) as server:
        r = latch(
            tmp_path,
            "run",
            "write hello.txt",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1",
            "--base-url",
            server.base_url,
            "--yes",
            cwd=ws,
            env=env,
        )
        bodies = server.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    sid = session_id(tmp_path)
    (ws / "AGENTS.md").write_text("Rule two replaces it. MARKER-BETA\n")
    with serve_openai([Reply("Resumed and done.", usage=_usage("openai", 1_000))]) as server:
        r = latch(tmp_path, "run", "--resume", sid, "go on", "--base-url", server.base_url, "--yes", cwd=ws, env=env)
        bodies += server.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert len(bodies) == 3
    assert "MARKER-ALPHA" in json.dumps(bodies[1]) and "MARKER-BETA" in json.dumps(bodies[2])
    with sqlite3.connect(tmp_path / "latch.db") as db:
        recorded = [k for (k,) in db.execute("SELECT kind FROM events WHERE kind = 'harness_prompt'")]
    assert recorded == ["harness_prompt", "harness_prompt"]
    for n, sent in enumerate(bodies, 1):
        v = latch(tmp_path, "view", sid, "--request", str(n), "--format", "openai", cwd=ws)
        assert v.returncode == 0, v.stderr + v.stdout
        assert _comparable(json.loads(v.stdout)) == _comparable(sent), n
    rep = json.loads(latch(tmp_path, "replay", sid, "--json", cwd=ws).stdout)
    assert [r["epoch"] for r in rep["requests"]][-1] > rep["requests"][0]["epoch"]  # the new header rotated
