"""The ``latch`` commands on either backend: the same real ``latch`` processes against an SQLite file and against
a PostgreSQL store (``--db postgresql://…`` and ``LATCH_DB``, a schema of the test cluster, tests/pg_support.py)
print the same sessions, replay report, search hits, group view and web API documents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from store_backends import raw_connection

from latch.agent.group import Group
from latch.store import EventStore

pytestmark = pytest.mark.slow  # a real server and real processes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"


def _env(home: Path, db: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(home), "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"})
    if db is not None:
        env["LATCH_DB"] = db
    return env


def _latch(home: Path, db: str, *args: str, via_env: bool = False) -> str:
    cmd = [sys.executable, "-m", "latch", *([] if via_env else ["--db", db]), *args]
    done = subprocess.run(
        cmd, cwd=home, env=_env(home, db if via_env else None), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (args, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    return done.stdout


def _web(home: Path, db: str, paths: list[str]) -> list[Any]:
    """GET each of ``paths`` from a real ``latch web --port 0`` on ``db``: the JSON documents."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "latch", "--db", db, "web", "--port", "0"],
        cwd=home,
        env=_env(home),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/sessions", timeout=10)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, line
                time.sleep(0.1)
        docs = []
        for path in paths:
            reply = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=120)
            assert reply.status_code == 200, (path, reply.text[:500])
            docs.append(reply.json())
        return docs
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def _group(db: str) -> str:
    """A group on ``db`` (through the store API: `latch group` only shows groups): three tasks, a claim, a
    completion, a member and a message."""
    with EventStore(db) as store:
        root = store.create_session(workspace="/w", source="latch run", format="latch", meta={"group": "rev"})
        g = Group(store, root)
        g.create_task("parse", "parse the logs")
        g.create_task("test", "test the parser", depends_on=["parse"])
        g.create_task("docs", "document it")
        g.join("w1", "s-w1")
        assert g.claim_task("parse", "w1")
        assert g.complete_task("parse", "w1", summary="parsed")
        assert g.claim_task("docs", "w1")
        g.send_message("lead", "w1", "the logs are in /var/log")
        return root


def _normal(doc: Any, root: str) -> Any:
    """``doc`` without what differs between any two runs: creation times, a replay's scratch stream, the group's
    new root session id."""
    if isinstance(doc, dict):
        return {k: "*" if k in ("created_at", "stream") else _normal(v, root) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_normal(v, root) for v in doc]
    if isinstance(doc, str):
        return doc.replace(root, "ROOT").replace(root[:8], "ROOT")
    return doc


def _everything(home: Path, db: str, *, via_env: bool) -> dict[str, Any]:
    home.mkdir()
    out: dict[str, Any] = {"import": _latch(home, db, "import", str(EXAMPLE), via_env=via_env)}
    sessions = json.loads(_latch(home, db, "sessions", "--json", via_env=via_env))
    sid = sessions[0]["id"]
    out["sessions"] = sessions
    out["sessions_text"] = _latch(home, db, "sessions", via_env=via_env)
    out["replay"] = json.loads(_latch(home, db, "replay", sid, "--json", via_env=via_env))
    out["replay_text"] = _latch(home, db, "replay", sid, via_env=via_env)
    for query in ("rounding", '"integer cents"', "INV-2041"):
        out[f"search {query}"] = json.loads(_latch(home, db, "search", query, "--json", via_env=via_env))
    root = _group(db)
    group = json.loads(_latch(home, db, "group", root, "--json", via_env=via_env))
    assert group.pop("root") == root
    out["group"] = group
    out["group_text"] = _latch(home, db, "group", via_env=via_env).replace(root, "ROOT")
    out["web"] = _web(home, db, ["/api/sessions", f"/api/sessions/{sid}", f"/api/sessions/{sid}/replay"])
    return _normal(out, root)


def test_the_commands_print_the_same_on_sqlite_and_on_postgresql(tmp_path, pg_url):
    on_sqlite = _everything(tmp_path / "sqlite", str(tmp_path / "latch.db"), via_env=False)
    on_postgres = _everything(tmp_path / "postgres", pg_url, via_env=True)
    assert on_sqlite["sessions"][0]["harness"] == "claude-code" and on_sqlite["replay"]
    assert len(on_sqlite["search rounding"]) > 0 and on_sqlite["group"]["messages"] == {"queued": 1, "delivered": 0}
    for key in on_sqlite:
        assert on_postgres[key] == on_sqlite[key], key
    with raw_connection(pg_url) as db:  # the commands wrote to the server (LATCH_DB), not to a default file
        assert [r[0] for r in db.execute("SELECT count(*) FROM sessions")] == [2]
    assert not list((tmp_path / "postgres").rglob("*.db"))
