"""What a new user can throw at the ``latch`` command: every mistake is one line, never a traceback.

Each test reproduces a failure found by trying Latch from scratch (lone surrogates, store files
that are not databases or are locked, unwritable report paths, absurd budgets, forgotten
sessions, empty or missing files) and pins the one-line answer.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from latch.cli import _load_commands, cli
from latch.store import EventStore, StoreError

# An OpenAI-chat transcript whose texts carry a lone surrogate (legal JSON: "\ud800").
SURROGATE_CHAT = (
    '{"messages": ['
    '{"role": "user", "content": "deploy \\ud800 the zebra service"},'
    '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",'
    ' "function": {"name": "bash", "arguments": "{\\"command\\": \\"echo zebra \\\\ud800\\"}"}}]},'
    '{"role": "tool", "tool_call_id": "c1", "content": "zebra \\udfff done"},'
    '{"role": "assistant", "content": "zebra deployed \\ud83d"}'
    ']}'
)


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def invoke(*args, db_path=db, env=None):
        environ = {"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200", **(env or {})}
        pre = ["--db", str(db_path)] if db_path is not None else []
        return CliRunner().invoke(cli, [*pre, *args], env=environ, catch_exceptions=False)

    return invoke


def _one_line_error(res, *needles: str, code: int = 1) -> str:
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------- 1. lone surrogates
def test_lone_surrogates_print_as_replacement_characters(run, tmp_path):
    f = tmp_path / "surrogate.json"
    f.write_text(SURROGATE_CHAT, encoding="ascii")
    res = run("import", str(f))
    assert res.exit_code == 0, res.output
    sid = json.loads(run("sessions", "--json").output)[0]["id"]

    show = run("show", sid)
    assert show.exit_code == 0, show.output
    assert "user: deploy \ufffd the zebra service" in show.output
    assert "tool_result(c1): zebra \ufffd done" in show.output
    assert "assistant: zebra deployed \ufffd" in show.output

    search = run("search", "zebra")
    assert search.exit_code == 0, search.output
    assert search.output.count("\ufffd") == 3  # user, result, answer (the call line shows its name only)

    hits = json.loads(run("search", "--json", "zebra").output)
    assert [h["kind"] for h in hits] == ["assistant_message", "tool_result", "assistant_message", "user_message"]
    assert hits[2]["text"] == 'bash {"command": "echo zebra \\ud800"}'  # arguments: a JSON string, kept verbatim
    assert hits[0]["text"] == "zebra deployed \ufffd" and hits[3]["text"] == "deploy \ufffd the zebra service"

    for args in (("state", sid), ("state", "--json", sid), ("context", sid), ("context", "--json", sid),
                 ("evidence", sid), ("evidence", "--json", sid), ("sessions",), ("sessions", "--json")):
        res = run(*args)
        assert res.exit_code == 0, (args, res.output)

    rep = run("replay", str(f), "--json", "-")
    assert rep.exit_code == 0, rep.output
    assert json.loads(rep.output)["session"] == sid
    out = tmp_path / "replay.json"
    assert run("replay", str(f), "--json", str(out)).exit_code == 0
    assert json.loads(out.read_text(encoding="utf-8"))["session"] == sid


def test_error_messages_with_surrogate_paths_stay_one_line(run, tmp_path):
    missing = str(tmp_path / "gone\udcff.jsonl")  # a file name with an undecodable byte
    _one_line_error(run("import", missing), "gone\ufffd.jsonl", "cannot read: No such file or directory")
