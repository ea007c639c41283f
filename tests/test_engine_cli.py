"""``latch replay`` and ``latch context`` through the click CLI on a small OpenAI-chat transcript."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from latch.cli import _load_commands, cli

TRANSCRIPT = {"messages": [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "list the files in the repository"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": "Two files: a.py and b.py."},
    {"role": "user", "content": "thanks"},
    {"role": "assistant", "content": "You're welcome."},
]}


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"
    env = {"LATCH_HOME": str(tmp_path), "COLUMNS": "200"}

    def invoke(*args):
        return CliRunner().invoke(cli, ["--db", str(db), *args], env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def transcript(tmp_path):
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(TRANSCRIPT), encoding="utf-8")
    return p


def test_replay_json_report(run, transcript, tmp_path):
    out = tmp_path / "replay.json"
    res = run("replay", str(transcript), "--json", str(out), "--window", "32000", "--reserve", "4000",
              "--recent", "4000")
    assert res.exit_code == 0, res.output
    assert "3 requests" in res.output and "✓ budget never exceeded" in res.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["engine"] == "continuity" and doc["stream"].startswith("continuity:replay-")
    assert doc["budget"] == {"context_window_tokens": 32_000, "reserve_tokens": 4_000, "recent_tokens": 4_000}
    reqs = doc["requests"]
    assert [r["seq"] - r["until_seq"] for r in reqs] == [1, 1, 1]
    assert [r["events"] for r in reqs] == [2, 4, 6]  # system note + user; + call and result; + answer + user
    assert all(r["epoch"] == 1 for r in reqs) and reqs[0]["first_retained_seq"] == reqs[0]["until_seq"]
    for r in reqs:
        parts = sum(r[k] for k in ("instructions_tokens", "state_tokens", "recent_tokens", "recall_tokens",
                                   "tools_tokens", "extension_tokens"))
        assert r["total_tokens"] == parts <= 28_000
    assert reqs[1]["common_prefix_tokens"] == reqs[0]["recounted_tokens"]
    s = doc["summary"]
    assert (s["requests"], s["violations"], s["rotations"], s["prefix_breaks_within_epoch"],
            s["automatic_compactions"]) == (3, [], 0, 0, 0)


def test_replay_twice_imports_once_and_uses_fresh_streams(run, transcript):
    a = json.loads(run("replay", str(transcript), "--json", "-").output)
    b = json.loads(run("replay", str(transcript), "--json", "-").output)
    assert a["session"] == b["session"] and a["stream"] != b["stream"]
    assert a["requests"] == b["requests"]
    sessions = json.loads(run("sessions", "--json").output)
    assert [s["events"] for s in sessions] == [7]


def test_replay_rejects_bad_options(run, transcript):
    res = run("replay", str(transcript), "--engine", "nope")
    assert res.exit_code == 2 and "unknown engine 'nope'" in res.output
    assert json.loads(run("sessions", "--json").output) == []  # refused before anything was imported
    res = run("replay", str(transcript), "--window", "1000", "--reserve", "1000")
    assert res.exit_code == 2 and "--reserve (1000) must be below --window (1000)" in res.output


def test_context_report(run, transcript):
    sid = json.loads(run("replay", str(transcript), "--json", "-").output)["session"]
    res = run("context", sid[:6], "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["approximate"] is True and rep["events"] == 7 and rep["epoch"] == 1
    assert rep["total_tokens"] == sum(v for k, v in rep["components"].items() if k != "episode_tokens")
    assert rep["headroom_tokens"] == 224_000 - rep["total_tokens"]
    assert rep["left_tokens"] == 0 and rep["status"] == "new_epoch"
    table = run("context", sid)
    assert "recent conversation" in table.output and "≈" in table.output
    assert run("context", "zzzz").exit_code == 2
