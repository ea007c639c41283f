"""latch web's HTTP API and SSE stream against a real uvicorn server and a real HTTP client."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from web_server import WebServer, read_sse

from latch.events import AssistantMessage, ToolCall, ToolStarted, Usage, UserMessage
from latch.kernel.tombstones import forget_session
from latch.store import EventStore
from latch.ui.web.app import check_bind


@pytest.fixture
def db(tmp_path):
    return tmp_path / "web.sqlite"


@pytest.fixture
def store(db):
    s = EventStore(db)
    yield s
    s.close()


@pytest.fixture
def client():
    with httpx.Client(timeout=10) as c:
        yield c


def test_sessions_and_snapshot(db, store, client):
    sid = store.create_session(format="test", source="/tmp/t.jsonl")
    seqs = store.append(
        sid,
        [
            UserMessage(text="hello \x1b[31mred\n<b>"),
            AssistantMessage(text="hi", model="m"),
            Usage(input_tokens=10, cache_read_tokens=90, output_tokens=5),
        ],
    )
    srv = WebServer(db).start()
    try:
        rows = client.get(srv.url + "/api/sessions").json()["sessions"]
        assert [(r["id"], r["format"], r["events"]) for r in rows] == [(sid, "test", 3)]
        snap = client.get(f"{srv.url}/api/sessions/{sid[:6]}").json()
        assert snap["session"]["id"] == sid and snap["last_seq"] == seqs[-1] and snap["live"] is False
        assert [(i["seq"], i["role"]) for i in snap["transcript"]] == [(seqs[0], "user"), (seqs[1], "assistant")]
        assert snap["transcript"][0]["text"] == "hello \\x1b[31mred\n<b>"  # ESC visible, newline kept, no markup
        assert snap["usage"]["requests"] == 1 and snap["requests"][0]["prompt_tokens"] == 100
        r = client.get(srv.url + "/api/sessions/nope")
        assert r.status_code == 404 and "nope" in r.json()["error"]
        page = client.get(f"{srv.url}/s/{sid}")
        assert page.status_code == 200 and "/static/app.js" in page.text and "http" not in page.text.split("<body>")[1]
        js = client.get(srv.url + "/static/app.js")
        assert js.status_code == 200 and "textContent" in js.text and "innerHTML" not in js.text
        assert client.get(srv.url + "/static/..%2Fapp.py").status_code == 404
    finally:
        srv.stop()


def test_sse_ids_are_seqs_and_resume_after_last_event_id(db, store, client):
    sid = store.create_session(format="test")
    other = store.create_session(format="test")
    first = store.append(sid, [UserMessage(text=f"m{i}") for i in range(3)])
    store.append(other, [UserMessage(text="elsewhere")])
    srv = WebServer(db).start()
    try:
        url = f"{srv.url}/api/sessions/{sid}/events"
        msgs = read_sse(client, url, want=3, then_status=True)
        assert [int(m["id"]) for m in msgs if "id" in m] == first
        assert [m["data"]["item"]["text"] for m in msgs if m.get("event") == "event"] == ["m0", "m1", "m2"]
        assert msgs[-1]["event"] == "status" and msgs[-1]["data"]["last_seq"] == first[-1]
        assert msgs[-1].get("retry") == "200"  # the first status asks browsers to reconnect quickly
        later = store.append(sid, [UserMessage(text="m3"), UserMessage(text="m4")])
        resumed = read_sse(client, url, want=3, headers={"Last-Event-ID": str(first[1])})
        assert [int(m["id"]) for m in resumed if "id" in m] == [first[2], *later]
        # Last-Event-ID wins over ?after (what a reconnecting EventSource sends on its original URL)
        again = read_sse(client, url + f"?after={first[0]}", want=1, headers={"Last-Event-ID": str(later[0])})
        assert [int(m["id"]) for m in again if "id" in m] == [later[1]]
        assert client.get(url, headers={"Last-Event-ID": "x1"}).status_code == 400
        assert client.get(url + "?after=-1").status_code == 400
    finally:
        srv.stop()


def test_sse_streams_events_appended_while_open_and_across_a_restart(db, store, client):
    import threading
    import time

    sid = store.create_session(format="test")
    base = store.append(sid, [UserMessage(text="start")])
    srv = WebServer(db).start()
    try:
        url = f"{srv.url}/api/sessions/{sid}/events"
        appended: list[int] = []

        def writer():
            time.sleep(0.3)
            for i in range(5):
                appended.extend(store.append(sid, [UserMessage(text=f"live{i}")]))
                time.sleep(0.05)

        t = threading.Thread(target=writer)
        t.start()
        msgs = read_sse(client, url, want=6, headers={"Last-Event-ID": "0"})
        t.join()
        ids = [int(m["id"]) for m in msgs if "id" in m]
        assert ids == base + appended
        srv.stop()  # events committed while the server is down are still sent after the restart
        down = store.append(sid, [UserMessage(text="while down"), UserMessage(text="also")])
        srv.start()
        resumed = read_sse(client, url, want=2, headers={"Last-Event-ID": str(ids[-1])})
        assert [int(m["id"]) for m in resumed if "id" in m] == down
        assert [m["data"]["item"]["text"] for m in resumed if "id" in m] == ["while down", "also"]
    finally:
        srv.stop()


def test_tool_running_only_while_this_server_sees_the_run_append_then_interrupted(db, store, client):
    sid = store.create_session(format="test")
    srv = WebServer(db).start()
    try:
        store.append(
            sid,
            [
                AssistantMessage(
                    text="", tool_calls=(ToolCall(id="c1", name="bash", arguments="{}"),), reasoning_reported=True
                ),
                ToolStarted(call_id="c1", name="bash"),
            ],
        )
        snap = client.get(f"{srv.url}/api/sessions/{sid}").json()
        assert snap["live"] is True and snap["activity"]["reasoning_reported"] is True
        assert [(t["call_id"], t["status"]) for t in snap["activity"]["tools"]] == [("c1", "running")]
        srv.restart()  # history is rebuilt from committed events: the unfinished call is interrupted, not done
        snap = client.get(f"{srv.url}/api/sessions/{sid}").json()
        assert snap["live"] is False
        assert [(t["call_id"], t["status"]) for t in snap["activity"]["tools"]] == [("c1", "interrupted")]
        assert snap["activity"]["interrupted"] == 1 and snap["activity"]["running"] == 0
    finally:
        srv.stop()


def test_token_is_checked_on_every_request(db, store, client):
    sid = store.create_session(format="test")
    store.append(sid, [UserMessage(text="x")])
    srv = WebServer(db, token="s3cret").start()
    try:
        for path in (
            "/",
            f"/s/{sid}",
            "/static/app.js",
            "/api/sessions",
            f"/api/sessions/{sid}",
            f"/api/sessions/{sid}/events",
        ):
            assert client.get(srv.url + path).status_code == 401, path
            assert client.get(srv.url + path + "?token=wrong").status_code == 401, path
            assert client.get(srv.url + path, headers={"Authorization": "Bearer s3cre"}).status_code == 401, path
        assert client.get(srv.url + "/api/sessions", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get(srv.url + f"/api/sessions/{sid}?token=s3cret").status_code == 200
        msgs = read_sse(client, f"{srv.url}/api/sessions/{sid}/events?token=s3cret", want=1)
        assert [m["data"]["item"]["text"] for m in msgs if "id" in m] == ["x"]
    finally:
        srv.stop()


def test_a_server_without_a_token_answers_loopback_host_names_only(db, store, client):
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends ``Host: evil.example``;
    every endpoint refuses it, while the loopback names this machine goes by work."""
    sid = store.create_session(format="test")
    store.append(sid, [UserMessage(text="the secret plan")])
    srv = WebServer(db).start()
    try:
        for path in (
            "/",
            f"/s/{sid}",
            "/static/app.js",
            "/api/sessions",
            f"/api/sessions/{sid}",
            f"/api/sessions/{sid}/events",
            f"/api/sessions/{sid}/replay",
        ):
            res = client.get(srv.url + path, headers={"Host": "evil.example"})
            assert res.status_code == 403 and "the secret plan" not in res.text, path
            assert client.get(srv.url + path, headers={"Host": "evil.example:8765"}).status_code == 403, path
        port = srv.url.rsplit(":", 1)[1]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
            assert client.get(srv.url + "/api/sessions", headers={"Host": host}).status_code == 200, host
        # an out-of-range resume point is a 400, not a traceback
        for bad in ("99999999999999999999999", str(store.max_seq() + 5)):
            res = client.get(f"{srv.url}/api/sessions/{sid}/events", headers={"Last-Event-ID": bad})
            assert res.status_code == 400 and "resume point" in res.json()["error"], bad
    finally:
        srv.stop()


def test_non_loopback_bind_needs_a_token():
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("localhost", None)
    check_bind("0.0.0.0", "t")
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.org"):
        with pytest.raises(ValueError, match="requires --token"):
            check_bind(host, None)
    with pytest.raises(ValueError, match="empty --token"):
        check_bind("127.0.0.1", " ")
    result = subprocess.run(
        [sys.executable, "-m", "latch", "--db", ":memory:", "web", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "binding 0.0.0.0 (not loopback) requires --token" in result.stderr


def test_forgotten_sessions_are_not_listed_and_their_endpoints_answer_410(db, store, client):
    kept = store.create_session(format="test")
    gone = store.create_session(format="test")
    child = store.create_session(format="test", parent_id=gone)
    for sid in (kept, gone, child):
        store.append(sid, [UserMessage(text=f"secret plan of {sid[:4]}"), AssistantMessage(text="ok", model="m")])
    forget_session(store, gone)
    srv = WebServer(db).start()
    try:
        rows = client.get(srv.url + "/api/sessions").json()["sessions"]
        assert [r["id"] for r in rows] == [kept]
        assert client.get(f"{srv.url}/api/sessions/{kept}").status_code == 200
        for sid in (gone, child):
            for path in ("", "/events", "/replay", "/replay/1", "/commands/c1"):
                r = client.get(f"{srv.url}/api/sessions/{sid[:8]}{path}")
                assert r.status_code == 410, (sid, path)
                assert r.json() == {
                    "error": f"session {sid} is forgotten (tombstoned by `latch forget`); its history is not shown"
                }
                assert "secret plan" not in r.text
    finally:
        srv.stop()
