"""`latch context` is read-only (README: a command that only reads): found by a new-user trial, every call
appended a permanent kernel record to the session's `<engine>:main` stream. Here, on a `latch run` session (the
real CLI in subprocesses, a loopback OpenAI server): the report leaves the store unchanged, shows the view a
resumed run continues (same epoch, no rotation: it carries the run's own harness prompt), and a `latch run
--resume` after it sends exactly what it sends without it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_support import store_digest
from fake_providers import Reply, serve_openai
from test_agent_run import _env, session_id

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


def _latch(home: Path, db: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(db), *args],
        cwd=cwd,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def test_context_writes_nothing_and_a_resumed_run_sends_the_same_request(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Run the tests with `python -m pytest`.\n")
    db = tmp_path / "latch.db"
    with serve_openai([Reply("first answer")]) as server:
        r = _latch(
            tmp_path,
            db,
            "run",
            "say hello",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--window",
            "30000",
            "--reserve",
            "1000",
            cwd=ws,
        )
        assert r.returncode == 0, r.stderr
    sid = session_id(tmp_path)
    twin = tmp_path / "twin.db"
    _copy(db, twin)
    with sqlite3.connect(db) as con:
        main_records = con.execute("SELECT count(*) FROM kernel_records WHERE stream = 'continuity:main'").fetchone()[0]
    assert main_records > 0  # the run materialized on the main stream

    before = store_digest(db)
    reports = []
    for args in (("--json",), ()):
        r = _latch(tmp_path, db, "context", sid, *args, cwd=ws)
        assert r.returncode == 0, r.stderr
        reports.append(r.stdout)
    assert store_digest(db) == before  # no kernel record, no token count
    rep = json.loads(reports[0])
    # the view a resumed run gets: the run's budget and its own prompt, so the epoch it left continues
    assert rep["context_window_tokens"] == 30_000 and rep["reserve_tokens"] == 1_000
    assert rep["window_source"] == "run" and rep["epoch"] == 1 and rep["status"] == "ok"
    assert rep["rotation_reason"] == "initial" and rep["cacheability"] is not None and rep["cacheability"] > 0.5
    assert f"estimated cacheability {rep['cacheability']:.0%}" in reports[1]  # the text says what the JSON says

    bodies = []
    for store in (db, twin):
        with serve_openai([Reply("second answer")]) as server:
            r = _latch(tmp_path, store, "run", "--resume", sid, "go on", "--base-url", server.base_url, cwd=ws)
            assert r.returncode == 0, r.stderr
            bodies.append(server.bodies)
    assert len(bodies[0]) == 1 and bodies[0] == bodies[1]  # the report changed nothing the resumed run sends
    # the report showed that very request: its messages, the system prompt the wire sends as one more, and the
    # resumed run's new task
    assert len(bodies[0][0]["messages"]) == rep["messages"] + 2 and bodies[0][0]["messages"][0]["role"] == "system"
    assert bodies[0][0]["messages"][-1] == {"role": "user", "content": "go on"}
