"""Commands from the web page to a running ``latch run`` (steer, compact, stop): a real CLI subprocess
against the loopback OpenAI server, a real uvicorn ``latch web`` and a real Chromium page clicking the controls;
the CSRF and token checks of the command route over HTTP."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from fake_providers import Reply, ToolUse, serve_openai
from test_web_browser import _run_session, _start_run, _wait_file, browser  # noqa: F401 (the fixture)
from web_server import WebServer

from latch.events import RunCommandQueued, SteeringQueued, UserMessage
from latch.host import reducers as R
from latch.host.runs import RunCommands, RunRecord
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


@pytest.fixture
def db(tmp_path):
    return tmp_path / "web.sqlite"


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


def _gated(started: Path, gate: Path) -> str:
    return json.dumps(
        {"command": f"touch {started}; while [ ! -f {gate} ]; do sleep 0.1; done; echo passed", "timeout": 120}
    )


def test_steer_compact_and_stop_from_the_page_reach_a_real_latch_run(db, browser, tmp_path, ws):  # noqa: F811
    s1, g1, s2, g2 = ws / "s1", ws / "g1", ws / "s2", ws / "g2"
    script = [
        Reply(
            tool_calls=(ToolUse("c1", "shell", _gated(s1, g1)),), usage={"prompt_tokens": 900, "completion_tokens": 20}
        ),
        Reply(
            tool_calls=(ToolUse("c2", "shell", _gated(s2, g2)),), usage={"prompt_tokens": 950, "completion_tokens": 20}
        ),
        Reply("never asked: the run is stopped before this request"),
    ]
    EventStore(db).close()
    srv = WebServer(db).start()
    proc = None
    try:
        with serve_openai(script) as model:
            proc = _start_run(tmp_path, db, ws, model.base_url, "run the gated jobs")
            sid = _run_session(db)
            _wait_file(s1)
            context = browser.new_context()
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{srv.url}/s/{sid}")
            page.wait_for_selector("#run .badge.run.running", timeout=15_000)
            page.fill("#steer-text", "Also check the <b>logs</b> please")
            page.click("#steer")
            page.wait_for_selector('#receipts .receipt[data-command="steer"][data-status="queued"]', timeout=15_000)
            page.click("#compact")
            page.wait_for_selector('#receipts .receipt[data-command="compact"][data-status="queued"]', timeout=15_000)
            assert len(model.requests) == 1  # queued while the tool runs: nothing is delivered mid-call
            g1.touch()
            _wait_file(s2)  # request 2 was sent and its tool call is running
            page.wait_for_selector('#receipts .receipt[data-command="steer"][data-status="delivered"]', timeout=15_000)
            page.wait_for_selector('#receipts .receipt[data-command="compact"][data-status="applied"]', timeout=15_000)
            second = model.requests[1].body["messages"]
            users = [m["content"] for m in second if m["role"] == "user"]
            assert any("Also check the <b>logs</b> please" in json.dumps(u) for u in users)
            # the newest user turn (the compaction moved the earlier conversation out of the view)
            assert "Also check the <b>logs</b> please" in json.dumps(
                [m for m in second if m["role"] == "user"][-1]["content"]
            ), second
            page.click("#stop")
            page.wait_for_selector('#receipts .receipt[data-command="stop"][data-status="queued"]', timeout=15_000)
            g2.touch()
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err + out
            assert len(model.requests) == 2  # stopped at the boundary before request 3
            page.wait_for_selector("#run .badge.run.ended", timeout=15_000)
            assert page.inner_text("#run .badge.run") == "ended: stopped"
            page.wait_for_selector('#receipts .receipt[data-command="stop"][data-status="applied"]', timeout=15_000)
            assert page.is_disabled("#stop")
            assert errors == []
            context.close()
        epochs = [int(m) for m in re.findall(r"epoch (\d+)", out)]
        assert len(epochs) == 2 and epochs[1] > epochs[0]  # compact: request 2 started a new epoch
        with EventStore(db) as store:
            events = list(store.events(sid))
        (run,) = R.runs(events)
        assert (run["outcome"], run["exit_code"]) == ("stopped", 0)
        assert events[-1].kind == "run_ended"
        cmds = {c["command"]: c for c in R.commands(events)}
        assert {k: c["status"] for k, c in cmds.items()} == {
            "steer": "delivered",
            "compact": "applied",
            "stop": "applied",
        }
        assert cmds["stop"]["run_id"] == cmds["compact"]["run_id"] == run["run_id"]
        delivered = [e for e in events if e.kind == "user_message" and "logs" in e.event.text]
        assert len(delivered) == 1  # exactly once
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        srv.stop()


@pytest.fixture
def server(db):
    with EventStore(db) as store:
        sid = store.create_session(format="test")
        store.append(sid, [UserMessage(text="task")])
    srv = WebServer(db, token="s3cret").start()
    yield srv, sid
    srv.stop()


def _post(srv, sid, body, headers):
    return httpx.post(
        f"{srv.url}/api/sessions/{sid}/commands",
        content=json.dumps(body) if body is not None else b"command=stop",
        headers=headers,
        timeout=10,
    )


def test_command_post_needs_json_and_the_token_header_and_same_origin(server, db):
    srv, sid = server
    good = {"Content-Type": "application/json", "X-Latch-Token": "s3cret"}
    assert _post(srv, sid, {"command": "compact"}, {"Content-Type": "application/json"}).status_code == 401
    # the query-string token opens the gate but is not the header a command needs
    r = httpx.post(
        f"{srv.url}/api/sessions/{sid}/commands?token=s3cret",
        content=b'{"command": "compact"}',
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 401
    assert _post(srv, sid, None, {**good, "Content-Type": "application/x-www-form-urlencoded"}).status_code == 415
    assert _post(srv, sid, {"command": "compact"}, {**good, "X-Latch-Token": "wrong"}).status_code == 401
    assert _post(srv, sid, {"command": "compact"}, {**good, "Origin": "http://evil.example"}).status_code == 403
    assert _post(srv, sid, {"command": "dance"}, good).json()["error"].startswith("unknown command 'dance'")
    assert _post(srv, sid, {"command": "steer", "text": "  "}, good).status_code == 400
    r = _post(srv, sid, {"command": "stop"}, good)
    assert r.status_code == 409 and "no running latch run" in r.json()["error"]
    with EventStore(db) as store:
        assert [e.kind for e in store.events(sid)] == ["user_message"]  # every refusal left the store unchanged
    r = _post(srv, sid, {"command": "steer", "text": "hello", "id": "r-1"}, {**good, "Origin": srv.url})
    assert r.status_code == 202
    receipt = r.json()["receipt"]
    assert (receipt["id"], receipt["command"], receipt["status"]) == ("r-1", "steer", "queued")
    again = _post(srv, sid, {"command": "steer", "text": "hello", "id": "r-1"}, good)  # a retry
    assert again.status_code == 202 and again.json()["receipt"] == receipt
    with EventStore(db) as store:
        assert [e.event for e in store.events(sid, kinds=["steering_queued"])] == [SteeringQueued("r-1", "hello")]
    got = httpx.get(f"{srv.url}/api/sessions/{sid}/commands/r-1", headers={"X-Latch-Token": "s3cret"}, timeout=10)
    assert got.json()["receipt"] == receipt
    assert httpx.get(f"{srv.url}/api/sessions/{sid}/commands/r-2?token=s3cret", timeout=10).status_code == 404


def test_a_loopback_server_without_token_refuses_a_rebound_host(db):
    with EventStore(db) as store:
        sid = store.create_session(format="test")
    srv = WebServer(db).start()
    try:
        headers = {"Content-Type": "application/json", "X-Latch-Token": "-"}
        assert _post(srv, sid, {"command": "compact"}, {**headers, "Host": "evil.example:80"}).status_code == 403
        assert _post(srv, sid, {"command": "compact"}, {"Content-Type": "application/json"}).status_code == 401
        assert _post(srv, sid, {"command": "compact"}, headers).status_code == 202
    finally:
        srv.stop()


def test_a_stop_is_moot_when_the_run_ends_first_and_never_stops_the_next_run():
    with EventStore(":memory:") as store:
        sid = store.create_session(format="test")
        first = RunRecord(store, sid)
        first.start()
        inbox = RunCommands(store, sid)
        inbox.submit("stop", receipt="late")
        first.end("done", 0)
        assert inbox.receipt("late")["status"] == "moot" and inbox.pending() == []
        store.append(sid, [RunCommandQueued("stale", "stop")])  # queued while no run was running
        RunRecord(store, sid).start()
        assert inbox.receipt("stale")["status"] == "moot" and inbox.pending() == []
        inbox.submit("compact", receipt="c")  # a compact waits for the next boundary of a run
        assert [q.command_id for q in inbox.pending()] == ["c"]
        with pytest.raises(ValueError, match="takes no text"):
            inbox.submit("stop", "now")
        with pytest.raises(ValueError, match="command id"):
            inbox.submit("compact", receipt="has space")
        time.sleep(0)
