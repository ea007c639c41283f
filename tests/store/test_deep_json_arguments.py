"""A valid transcript whose tool-call arguments or outputs are JSON nested deeper than Python's
recursion limit must not crash import, state, context or replay (the whole kind: every place that
parses tool arguments or tool output as JSON)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from latch.cli import _load_commands, cli

DEEP = "[" * 5000 + "]" * 5000


def _session(tmp_path):
    msgs = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": DEEP}},
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "exec", "arguments": json.dumps({"input": "tools.update_plan(" + DEEP + ")"})},
                },
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "shell", "arguments": json.dumps({"command": ["pytest"]})},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": DEEP},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {"role": "tool", "tool_call_id": "c3", "content": '{"output": ' + DEEP + ', "metadata": {"exit_code": 0}}'},
        {"role": "assistant", "content": "done"},
    ]
    p = tmp_path / "deep.json"
    p.write_text(json.dumps({"messages": msgs}))
    return p


def test_deeply_nested_arguments_do_not_crash_any_command(tmp_path):
    _load_commands()
    path = _session(tmp_path)
    db = str(tmp_path / "l.db")
    runner = CliRunner()
    r = runner.invoke(cli, ["--db", db, "import", str(path)])
    assert r.exit_code == 0, r.output
    sid = r.output.split("session ")[1].split()[0]
    for args in (
        ["state", sid],
        ["state", sid, "--json"],
        ["context", sid],
        ["evidence", sid],
        ["replay", str(path), "--json", str(tmp_path / "r.json")],
    ):
        r = runner.invoke(cli, ["--db", db, *args])
        assert r.exit_code == 0, (args, r.output, r.exception)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["requests"] == 2 and report["summary"]["violations"] == []
