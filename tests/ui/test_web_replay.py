"""latch web's replay API: every request of an imported session as `latch replay --json`
and `latch view --format text` give it, against a real uvicorn server, real imports and the real CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from corpus_support import require_corpus
from web_server import WebServer

from latch.events import AssistantMessage, UserMessage
from latch.store import EventStore
from latch.ui.web.app import _display

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"


def _latch(db: Path, *args: str) -> str:
    env = {**os.environ, "COLUMNS": ""}
    env.pop("COLUMNS")
    out = subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=db.parent,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _rows(doc):
    """The per-request rows without what differs between two replays by design (a correction's origin names its
    replay run)."""
    rows = []
    for r in doc["requests"]:
        r = dict(r)
        if r.get("correction"):
            r["correction"] = {k: v for k, v in r["correction"].items() if k != "origin"}
        rows.append(r)
    return rows


def _scratch_free_kernel_records(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM kernel_records").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("source", ["example", "corpus"])
def test_replay_rows_and_views_equal_the_cli(tmp_path, source):
    path = EXAMPLE if source == "example" else require_corpus() / "claude-code" / "bastion_claude-session.jsonl"
    db = tmp_path / "web.sqlite"
    cli = json.loads(_latch(db, "replay", str(path), "--json"))
    sid = cli["session"]
    before = _scratch_free_kernel_records(db)
    srv = WebServer(db).start()
    try:
        with httpx.Client(timeout=300) as c:
            got = c.get(f"{srv.url}/api/sessions/{sid}/replay")
            assert got.status_code == 200, got.text
            doc = got.json()
            assert doc["session"] == sid and len(doc["requests"]) == len(cli["requests"]) >= 6
            assert _rows(doc) == _display(_rows(cli))  # tokens, epoch, rotation reason, changes, cost: all equal
            assert doc["summary"]["cost"] == cli["summary"]["cost"]
            if source == "example":
                assert doc["summary"]["cost"]["original_usd"] == pytest.approx(0.19090065)
                assert all(r["cost"]["original_usd"] > 0 for r in doc["requests"])
            assert doc["requests"][1]["changes"]["previous"] == 1
            assert doc["last_seq"] > 0 and doc["kept"] is False
            again = c.get(f"{srv.url}/api/sessions/{sid}/replay").json()
            assert again == doc and srv.server.config.app.state.replays.computed == 1  # a reload does not recompute

            view = c.get(f"{srv.url}/api/sessions/{sid}/replay/2").json()
            text = _latch(db, "view", sid, "--request", "2")
            assert view["text"] == text  # exactly what `latch view --format text` prints
            row = cli["requests"][1]
            assert (view["request"], view["seq"], view["epoch"], view["tokens"]["total_tokens"]) == (
                2,
                row["seq"],
                row["epoch"],
                row["total_tokens"],
            )
            assert len(view["messages"]) == row["messages"]
            assert [m["index"] for m in view["messages"]] == list(range(row["messages"]))
            for m in view["messages"]:
                if m["content"].strip():
                    assert m["content"].splitlines()[0] in text
            assert (
                view["system"]["tokens"] + view["tools"]["tokens"] + sum(m["tokens"] for m in view["messages"])
                == row["recounted_tokens"] - row["harness_tokens"]
            )
            for bad in ("0", str(len(doc["requests"]) + 1), "x"):
                r = c.get(f"{srv.url}/api/sessions/{sid}/replay/{bad}")
                assert r.status_code == 404 and "out of range" in r.json()["error"]
            assert c.get(f"{srv.url}/api/sessions/nope/replay").status_code == 404
        assert srv.server.config.app.state.replays.computed == 1
    finally:
        srv.stop()
    assert _scratch_free_kernel_records(db) == before  # the replay never wrote the store


def test_replay_api_needs_the_token(tmp_path):
    db = tmp_path / "web.sqlite"
    sid = json.loads(_latch(db, "replay", str(EXAMPLE), "--json"))["session"]
    srv = WebServer(db, token="s3cret").start()
    try:
        with httpx.Client(timeout=300) as c:
            for path in (f"/api/sessions/{sid}/replay", f"/api/sessions/{sid}/replay/1", f"/s/{sid}/replay"):
                assert c.get(srv.url + path).status_code == 401
            assert c.get(f"{srv.url}/api/sessions/{sid}/replay/1?token=s3cret").json()["request"] == 1
    finally:
        srv.stop()


def test_a_session_that_grew_is_replayed_again(tmp_path):
    db = tmp_path / "web.sqlite"
    store = EventStore(db)
    sid = store.create_session(format="test")
    store.append(
        sid,
        [
            UserMessage(text="one"),
            AssistantMessage(text="a", model="m"),
            UserMessage(text="two"),
            AssistantMessage(text="b", model="m"),
        ],
    )
    srv = WebServer(db).start()
    try:
        with httpx.Client(timeout=300) as c:
            first = c.get(f"{srv.url}/api/sessions/{sid}/replay").json()
            assert [r["request"] for r in first["requests"]] == [1, 2]
            assert "two" in [m["content"] for m in c.get(f"{srv.url}/api/sessions/{sid}/replay/2").json()["messages"]]
            last = store.append(sid, [UserMessage(text="three"), AssistantMessage(text="c", model="m")])[-1]
            grown = c.get(f"{srv.url}/api/sessions/{sid}/replay").json()
            assert [r["request"] for r in grown["requests"]] == [1, 2, 3] and grown["last_seq"] == last
            assert grown["requests"][:2] == first["requests"]
            assert "three" in [m["content"] for m in c.get(f"{srv.url}/api/sessions/{sid}/replay/3").json()["messages"]]
            assert srv.server.config.app.state.replays.computed == 2
    finally:
        srv.stop()
        store.close()
