"""``latch sessions``: sessions told apart (title from the first prompt, start, model, requests, cost, status),
newest first, children as a tree, 80 columns in a terminal and in a pipe, filters, and the per-workspace store."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.cli import _load_commands, cli
from latch.events import AssistantMessage, RunEnded, RunStarted, ToolCall, ToolResult, UserMessage
from latch.store import EventStore, default_db_path

_load_commands()

SPOTTER = "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"  # brings its two sub-agent files
PORT = "claude-code/claude-reliability_python-to-rust-port.jsonl"
CODEX = "codex/edgerunner_codex-session.jsonl"


@pytest.fixture
def utc(monkeypatch):
    """Local time is UTC (the list shows local times)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _latch(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env or {})


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory):
    require_corpus()
    db = tmp_path_factory.mktemp("list") / "s.db"
    res = _latch("--db", str(db), "import", *(str(CORPUS / f) for f in (SPOTTER, PORT, CODEX)))
    assert res.exit_code == 0, res.output
    return db


LISTED = """\
5 sessions, newest first
bf2333c7  2026-07-10 16:45  gpt-5.6-sol · 174 requests · $32.08+ · interrupted
          codex: https://superteam.fun/earn/listing/trading-tools-and-agents fo…
96d68eaa  2026-02-11 21:41  claude-opus-4-6 · 143 requests · $10.52 · done
          claude-code: Work on bead spotter-fum. Run bd show spotter-fum to see…
└ cf37594e  2026-02-11 21:59  claude-opus-4-6 · 1 request · $0.1013 · done
            claude-code: Your task is to create a detailed summary of the conve…
└ e46423e4  2026-02-11 22:38  claude-haiku-4-5-… · 13 requests · $0.04715 · done
            claude-code: I need to understand: 1. How Spotter.Services.Tmux.lis…
1e076572  2026-01-21 06:20  claude-opus-4-5-2025… · 39 requests · $0.7150 · done
          claude-code: Port this Python project to Rust. Create a standalone Ru…
"""


@pytest.mark.parametrize("columns", ["80", "200", None])  # a terminal of 80 or 200 columns, a pipe
def test_the_list_tells_sessions_apart_newest_first_with_children_under_their_parent(corpus_db, utc, columns):
    res = _latch("--db", str(corpus_db), "sessions", env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    assert res.output == LISTED


def test_filters_by_harness_project_and_day(corpus_db, utc):
    res = _latch("--db", str(corpus_db), "sessions", "--harness", "CODEX")
    assert res.output == "1 session of 5, newest first\n" + "".join(LISTED.splitlines(True)[1:3])
    res = _latch("--db", str(corpus_db), "sessions", "--project", "spotter", "--since", "2026-02-11")
    assert res.output == "3 sessions of 5, newest first\n" + "".join(LISTED.splitlines(True)[3:9])
    res = _latch("--db", str(corpus_db), "sessions", "--since", "2026-02-12", "--harness", "claude-code")
    assert res.output == "0 sessions of 5, newest first\n"
    bad = _latch("--db", str(corpus_db), "sessions", "--since", "2026-13-01")
    assert (bad.exit_code, bad.output) == (
        2,
        "Error: Invalid value for '--since': '2026-13-01' does not match the format '%Y-%m-%d'.\n",
    )


def test_json_has_the_summary_and_the_tree(corpus_db):
    doc = json.loads(_latch("--db", str(corpus_db), "sessions", "--json").output)
    assert [(d["id"][:8], d["depth"], d["requests"], d["status"]) for d in doc] == [
        ("bf2333c7", 0, 174, "interrupted"),
        ("96d68eaa", 0, 143, "done"),
        ("cf37594e", 1, 1, "done"),
        ("e46423e4", 1, 13, "done"),
        ("1e076572", 0, 39, "done"),
    ]
    assert doc[0]["model"] == "gpt-5.6-sol" and doc[0]["unpriced"] == 1 and doc[0]["usd"] == pytest.approx(32.0776402)
    assert doc[2]["parent"] == doc[3]["parent"] == doc[1]["id"] and doc[1]["parent"] is None


def _session(store, *events, title=None, workspace=None):
    sid = store.create_session(format="latch", meta={"title": title} if title else None, workspace=workspace)
    store.append(sid, list(events))
    return sid


def test_title_from_the_first_prompt_is_escaped_and_status_follows_the_run(tmp_path, utc):
    db = tmp_path / "s.db"
    host = socket.gethostname()
    with EventStore(db) as store:
        _session(store, UserMessage("<meta>", is_meta=True), UserMessage("fix \x1b[31mred[/b]\n  now"))
        _session(
            store,
            UserMessage("run ls"),
            AssistantMessage(tool_calls=(ToolCall("call_1", "shell", '{"command": "ls"}'),)),
        )
        _session(
            store,
            RunStarted("r1", 1, host, "2026-01-01T00:00:00Z"),
            UserMessage("big"),
            RunEnded("r1", "error", "2026-01-01T00:00:01Z", 1, "ContextOverflow: the view does not fit"),
        )
        _session(store, RunStarted("r2", os.getpid(), host, "2026-01-02T00:00:00Z"), UserMessage("going"))
        _session(store, RunStarted("r3", 2**22 + 7, host, "2026-01-03T00:00:00Z"), UserMessage("killed"))
        _session(
            store,
            UserMessage("ls"),
            AssistantMessage(tool_calls=(ToolCall("c2", "shell", "{}"),)),
            ToolResult("c2", "ok"),
            title="Harness title",
        )
    doc = json.loads(_latch("--db", str(db), "sessions", "--json").output)
    assert {d["title"]: d["status"] for d in doc} == {
        "fix \x1b[31mred[/b] now": "done",
        "run ls": "interrupted",
        "big": "refused",
        "going": "live",
        "killed": "interrupted",
        "Harness title": "done",
    }
    out = _latch("--db", str(db), "sessions").output
    assert "latch: fix \\x1b[31mred[/b] now\n" in out and "\x1b" not in out


def test_an_empty_store_says_stores_are_per_workspace_and_lists_the_others(tmp_path, monkeypatch):
    home, here, there = tmp_path / "home", tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    env = {"LATCH_HOME": str(home), "LATCH_DB": None}
    monkeypatch.setenv("LATCH_HOME", str(home))
    other = default_db_path(there)
    other.parent.mkdir(parents=True)
    with EventStore(other) as store:
        _session(store, UserMessage("hello"), workspace=str(there))
    monkeypatch.chdir(here)
    res = _latch("sessions", env=env)
    assert res.output == (
        f"0 sessions in this workspace's store ({default_db_path(here)})\n"
        f"Latch keeps one store per workspace folder; 1 other store under {home / 'workspaces'}:\n"
        "`latch sessions --all-workspaces` lists them\n"
    )
    assert not default_db_path(here).exists()  # a reading command creates no store
    res = _latch("sessions", "--all-workspaces", env=env)
    assert res.output.splitlines()[:2] == [f"1 store under {home / 'workspaces'}", f"  {other.name}  1 session, last –"]
    doc = json.loads(_latch("sessions", "--all-workspaces", "--json", env=env).output)
    assert doc == [{"path": str(other), "workspaces": [str(there)], "sessions": 1, "last": None, "error": None}]
