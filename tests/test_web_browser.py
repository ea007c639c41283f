"""latch web in a real headless Chromium (Debian's ``chromium``, installed by .ci/run; issue 16).

The page is driven by Playwright against a real uvicorn server; events are appended to the store from the test,
as a running ``latch run`` would. Skipped without Playwright or the browser, failed instead when CI is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from web_server import WebServer

from latch.events import AssistantMessage, ToolCall, ToolResult, ToolStarted, UserMessage
from latch.store import EventStore

CHROMIUM = Path("/usr/lib/chromium/chromium")


def _need(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {what} is missing (.ci/run installs it)")
    pytest.skip(f"needs {what}")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("playwright (the [test] extra)")
    if not CHROMIUM.is_file():
        _need(f"Debian's chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def db(tmp_path):
    return tmp_path / "web.sqlite"


@pytest.fixture
def store(db):
    s = EventStore(db)
    yield s
    s.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors
    yield pg
    context.close()


def _seqs(page) -> list[int]:
    return [int(s) for s in page.eval_on_selector_all("#transcript .item", "els => els.map(e => e.dataset.seq)")]


def _wait_seq(page, seq: int) -> None:
    page.wait_for_selector(f'#transcript .item[data-seq="{seq}"]', timeout=15_000)


def test_sessions_list_links_to_the_live_page(db, store, page, tmp_path):
    sid = store.create_session(format="test", source="/tmp/x.jsonl")
    store.append(sid, [UserMessage(text="hello")])
    srv = WebServer(db).start()
    try:
        page.goto(srv.url + "/")
        page.wait_for_selector("#sessions tbody tr")
        assert page.inner_text("#sessions tbody tr td a") == sid
        page.click("#sessions tbody tr td a")
        page.wait_for_selector("#transcript .item")
        assert page.url == f"{srv.url}/s/{sid}"
        assert page.inner_text("#transcript .item pre") == "hello"
        shot = page.screenshot(path=str(tmp_path / "session.png"), full_page=True)
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 2000
        assert page.errors == []
    finally:
        srv.stop()


def test_live_page_appends_events_and_resumes_after_a_server_restart_without_duplicates(db, store, page):
    sid = store.create_session(format="test")
    first = store.append(sid, [UserMessage(text="task"), AssistantMessage(text="on it")])
    srv = WebServer(db).start()
    try:
        page.goto(f"{srv.url}/s/{sid}")
        _wait_seq(page, first[-1])
        page.wait_for_function("document.body.dataset.connects === '1'", timeout=15_000)
        live = store.append(sid, [AssistantMessage(text="step 1",
                                                   tool_calls=(ToolCall(id="c1", name="bash", arguments="{}"),)),
                                  ToolStarted(call_id="c1", name="bash"), ToolResult(call_id="c1", content="ok")])
        _wait_seq(page, live[-1])
        assert page.inner_text(f'#transcript .item[data-seq="{live[2]}"] pre') == "ok"

        srv.stop()
        page.wait_for_function("document.getElementById('conn').textContent === 'reconnecting'", timeout=15_000)
        down = store.append(sid, [UserMessage(text="while the server was down")])
        srv.start()
        _wait_seq(page, down[-1])
        after = store.append(sid, [AssistantMessage(text="after restart")])
        _wait_seq(page, after[-1])
        transcript = [s for s in first + live + down + after if s != live[1]]  # ToolStarted is no item
        assert _seqs(page) == transcript  # each once, in order: no gap, no duplicate
        assert page.evaluate("window.__latch.received") == live + down + after  # every streamed seq once
        assert int(page.evaluate("document.body.dataset.connects")) == 2
        assert page.errors == []
    finally:
        srv.stop()


def test_a_running_tool_shows_as_interrupted_after_a_restart(db, store, page):
    sid = store.create_session(format="test")
    srv = WebServer(db).start()
    try:
        store.append(sid, [AssistantMessage(text="", reasoning_reported=True,
                                            tool_calls=(ToolCall(id="c9", name="pytest", arguments="{}"),)),
                           ToolStarted(call_id="c9", name="pytest")])
        page.goto(f"{srv.url}/s/{sid}")
        page.wait_for_selector('#activity .badge.tool.running[data-call-id="c9"]', timeout=15_000)
        assert "reasoning reported" in page.inner_text("#activity")
        srv.restart()  # the run's tool never finished; a new server knows no live run
        page.wait_for_selector('#activity .badge.tool.interrupted[data-call-id="c9"]', timeout=15_000)
        assert page.inner_text("#activity .badge.tool") == "pytest interrupted"
        assert page.query_selector("#activity .badge.tool.running") is None
    finally:
        srv.stop()


HOSTILE = ("<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
           "\x1b[31mred\x1b[0m\x07bell\u202eevil\nline2")


def test_hostile_transcript_text_renders_as_inert_text(db, store, page):
    sid = store.create_session(format="test")
    seqs = store.append(sid, [UserMessage(text=HOSTILE)])
    srv = WebServer(db).start()
    try:
        page.goto(f"{srv.url}/s/{sid}")
        _wait_seq(page, seqs[0])
        live = store.append(sid, [ToolResult(call_id="x", content=HOSTILE, name="<b>bold</b>")])
        _wait_seq(page, live[0])  # through the snapshot and through the stream alike
        expected = ("<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
                    "\\x1b[31mred\\x1b[0m\\x07bell\\u202eevil\nline2")
        texts = page.eval_on_selector_all("#transcript .item pre", "els => els.map(e => e.textContent)")
        assert texts == [expected, expected]
        assert page.evaluate("window.__pwned") is None
        assert page.query_selector("#transcript img") is None and page.query_selector("#transcript script") is None
        assert page.query_selector("#transcript b") is None
        assert "<b>bold</b>" in page.inner_text(f'#transcript .item[data-seq="{live[0]}"] .meta')
        assert page.errors == []
    finally:
        srv.stop()
