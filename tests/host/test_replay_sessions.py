"""``latch replay`` of a file holding several sessions: a Goose ``sessions.db`` is replayed session
after session (one report each, ``--json`` a list), or only the one ``--session ID`` names; an id that names
none of them is one line listing them. A stored session (one ``latch run`` recorded) is replayed by its id."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS

from latch.cli import _load_commands, cli
from latch.store import EventStore

DB = CORPUS / "goose" / "lantern_sessions.db"
GOOSE_IDS = ["20260805_1", "20260805_2", "20260805_3", "20260805_4"]
GOOSE_REQUESTS = [2, 2, 4, 2]  # assistant rows per session (tests/importers/test_import_goose.py CORPUS_COUNTS)


@pytest.fixture
def run(tmp_path):
    _load_commands()
    if not DB.is_file():
        pytest.skip("the corpus is not here")
    src = sqlite3.connect(f"file:{DB}?mode=ro&immutable=1", uri=True)
    copy = sqlite3.connect(tmp_path / "sessions.db")
    src.backup(copy)
    src.close()
    copy.close()

    def invoke(*args):
        return CliRunner().invoke(
            cli,
            ["--db", str(tmp_path / "latch.db"), *args],
            env={"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"},
        )

    return invoke


def _ids(tmp_path: Path) -> list[str]:
    store = EventStore(tmp_path / "latch.db")
    try:
        by_key = {s.external_key: s.id for s in store.sessions()}
    finally:
        store.close()
    return [next(sid for key, sid in by_key.items() if key and key.endswith(g)) for g in GOOSE_IDS]


def test_every_session_of_a_goose_database_is_replayed(run, tmp_path):
    res = run("replay", str(tmp_path / "sessions.db"), "--json")
    assert res.exit_code == 0, res.output
    docs = json.loads(res.output)
    ids = _ids(tmp_path)
    assert isinstance(docs, list) and [d["session"] for d in docs] == ids
    assert [d["summary"]["requests"] for d in docs] == GOOSE_REQUESTS

    table = run("replay", str(tmp_path / "sessions.db"))
    assert table.exit_code == 0, table.output
    assert f"sessions.db: 4 sessions ({ids[0]} 2 request(s)" in " ".join(table.output.split())
    assert [f"session {i} of 4: {sid}" in table.output for i, sid in enumerate(ids, 1)] == [True] * 4
    assert table.output.count("budget never exceeded") == 4


def test_session_option_replays_one_and_names_the_choices(run, tmp_path):
    run("replay", str(tmp_path / "sessions.db"), "--json")
    ids = _ids(tmp_path)
    one = run("replay", str(tmp_path / "sessions.db"), "--session", ids[2][:8], "--json")
    assert one.exit_code == 0, one.output
    doc = json.loads(one.output)
    assert doc["session"] == ids[2] and doc["summary"]["requests"] == 4

    bad = run("replay", str(tmp_path / "sessions.db"), "--session", "zzzz")
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    line = " ".join(bad.output.split())
    assert "--session zzzz names no session of" in line and all(sid in line for sid in ids)


def test_a_stored_session_is_replayed_by_its_id(run, tmp_path):
    run("replay", str(tmp_path / "sessions.db"), "--json")
    sid = _ids(tmp_path)[0]
    res = run("replay", sid, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["session"] == sid
    missing = run("replay", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code != 0 and "nope.jsonl" in missing.output and "Traceback" not in missing.output


def test_first_seq_is_numbered_within_the_session(run, tmp_path):
    docs = json.loads(run("replay", str(tmp_path / "sessions.db"), "--json").output)
    last = docs[-1]
    store = EventStore(tmp_path / "latch.db")
    try:
        seqs = [s.seq for s in store.events(last["session"])]
    finally:
        store.close()
    assert seqs[0] > 1  # the store holds the earlier sessions first
    for r in last["requests"]:
        assert r["first_retained_event"] == seqs.index(r["first_retained_seq"]) + 1
    table = run("replay", str(tmp_path / "sessions.db"), "--session", last["session"]).output
    lines = table.splitlines()
    h = next(i for i, line in enumerate(lines) if line.split()[:2] == ["req", "events"])
    header = lines[h].replace("first seq", "first-seq").split()
    rows = [line.split() for line in lines[h + 2 : h + 2 + len(last["requests"])]]
    assert [r[header.index("first-seq")] for r in rows] == [str(r["first_retained_event"]) for r in last["requests"]]
    assert [r["first_retained_event"] for r in last["requests"]] == [1] * len(last["requests"])
    assert "its number in this session" in " ".join(table.split())


def test_view_of_a_file_with_several_sessions_lists_them_and_session_picks_one(run, tmp_path):
    """``latch view FILE --request N`` of a Goose database: no silent pick of one session; without --session one
    line lists the ids with their request counts (exit 2); --session ID (or a unique prefix) views that one."""
    res = run("view", str(tmp_path / "sessions.db"), "--request", "1")
    assert res.exit_code == 2 and "Traceback" not in res.output
    ids = _ids(tmp_path)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    line = " ".join(res.output.split())
    assert len(lines) <= 2 and "holds 4 sessions, pick one with --session ID" in line  # one (wrapped) line
    assert all(f"{sid} ({n} requests)" in line for sid, n in zip(ids, GOOSE_REQUESTS, strict=False))

    one = run("view", str(tmp_path / "sessions.db"), "--request", "4", "--session", ids[2][:8], "--format", "openai")
    assert one.exit_code == 0, one.output
    assert json.loads(one.output)["model"] == "qwen3:0.6b"
    out = run("view", str(tmp_path / "sessions.db"), "--request", "3", "--session", ids[0])
    assert out.exit_code == 2 and f"session {ids[0]} has 2 model request(s), 1..2" in " ".join(out.output.split())
    bad = run("view", str(tmp_path / "sessions.db"), "--request", "1", "--session", "zzzz")
    assert bad.exit_code == 2 and "--session zzzz names no session of" in " ".join(bad.output.split())


def test_view_skips_a_forgotten_session_of_the_file(run, tmp_path):
    run("replay", str(tmp_path / "sessions.db"), "--json")
    ids = _ids(tmp_path)
    for sid in ids[:3]:
        assert run("forget", sid).exit_code == 0
    res = run("view", str(tmp_path / "sessions.db"), "--request", "2", "--format", "openai")
    assert res.exit_code == 0, res.output  # the one session left is viewed, the forgotten ones do not block it
    assert json.loads(res.output)["messages"]
    assert run("forget", ids[3]).exit_code == 0
    gone = run("view", str(tmp_path / "sessions.db"), "--request", "1")
    assert gone.exit_code == 1 and "is forgotten" in gone.output and "Traceback" not in gone.output


# ------------------------------------------------------------------ a Claude Code session with sub-agent files
SPOTTER = CORPUS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SPOTTER_AGENTS = ["a7be2f0", "acompact-f46190"]  # subagents/agent-<id>.jsonl, sorted
# model requests: distinct message.id of each file's non-synthetic assistant lines (jq, not latch)
SPOTTER_REQUESTS = [143, 13, 1]


@pytest.fixture
def claude_code(tmp_path):
    """A copy of the corpus's Claude Code session and its ``<sessionId>/subagents`` folder, and a CLI runner."""
    _load_commands()
    if not SPOTTER.is_file():
        pytest.skip("the corpus's Claude Code session with sub-agents is not here")
    copy = tmp_path / "projects" / SPOTTER.name
    shutil.copytree(SPOTTER.with_suffix(""), copy.with_suffix(""))
    shutil.copyfile(SPOTTER, copy)

    def invoke(*args):
        return CliRunner().invoke(
            cli,
            ["--db", str(tmp_path / "latch.db"), *args],
            env={"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"},
        )

    return copy, invoke


def _family(db: Path) -> tuple[str, list[str], list[str | None]]:
    """The parent session's id, its children's ids (sorted by agent id) and their agent ids."""
    store = EventStore(db)
    try:
        sessions = store.sessions()
        (parent,) = [s for s in sessions if s.parent_id is None]
        children = sorted((s for s in sessions if s.parent_id == parent.id), key=lambda s: s.meta.get("agent_id"))
        return parent.id, [s.id for s in children], [s.meta.get("agent_id") for s in children]
    finally:
        store.close()


@pytest.mark.slow  # left out of the fast tier: three replays of a corpus session (157 requests) and its sub-agents
def test_a_claude_code_session_is_replayed_with_its_sub_agent_files(claude_code, tmp_path):
    path, run = claude_code
    res = run("replay", str(path), "--json")
    assert res.exit_code == 0, res.output
    docs = json.loads(res.output)
    parent, children, agents = _family(tmp_path / "latch.db")
    assert agents == SPOTTER_AGENTS
    assert isinstance(docs, list) and [d["session"] for d in docs] == [parent, *children]
    assert [d["summary"]["requests"] for d in docs] == SPOTTER_REQUESTS
    assert [d["summary"]["violations"] for d in docs] == [[], [], []]

    table = run("replay", str(path))  # the second time from the import fingerprints: the same three
    assert table.exit_code == 0, table.output
    flat = " ".join(table.output.split())
    assert (
        f"{SPOTTER.name}: 3 sessions ({parent} 143 request(s), {children[0]} 13 request(s), {children[1]} 1 "
        "request(s))" in flat
    )
    assert [f"session {i} of 3: {sid}" in flat for i, sid in enumerate([parent, *children], 1)] == [True] * 3

    one = run("replay", str(path), "--session", children[0][:8], "--json")
    assert one.exit_code == 0, one.output
    assert json.loads(one.output)["session"] == children[0]


def test_a_bad_sub_agent_file_leaves_the_session_unreplayed_and_unimported(claude_code, tmp_path):
    path, run = claude_code
    agent = path.with_suffix("") / "subagents" / f"agent-{SPOTTER_AGENTS[0]}.jsonl"
    lines = agent.read_text(encoding="utf-8").splitlines(keepends=True)
    agent.write_text("".join(lines[:3]) + '{"type": "user", "uuid": \n' + "".join(lines[3:]), encoding="utf-8")
    res = run("replay", str(path))
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output == f"Error: {agent}:line 4 column 25: invalid JSON: Expecting value\n"
    store = EventStore(tmp_path / "latch.db")
    try:
        assert store.sessions() == []
    finally:
        store.close()
