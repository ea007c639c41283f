"""latch web in a real headless Chromium (Debian's ``chromium``, installed by .ci/run).

The page is driven by Playwright against a real uvicorn server; events are appended to the store from the test,
as a running ``latch run`` would. Skipped without Playwright or the browser, failed instead when CI is set.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from io import BytesIO
from pathlib import Path

import pytest
from fake_providers import Reply, ToolUse, serve_openai
from sandbox_support import end_shell_group
from web_server import WebServer

from latch.events import AssistantMessage, CompactionMarker, ToolCall, ToolResult, ToolStarted, Usage, UserMessage
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

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
        assert page.inner_text("#sessions tbody tr td a") == sid[:8]
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
        live = store.append(
            sid,
            [
                AssistantMessage(text="step 1", tool_calls=(ToolCall(id="c1", name="bash", arguments="{}"),)),
                ToolStarted(call_id="c1", name="bash"),
                ToolResult(call_id="c1", content="ok"),
            ],
        )
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
        store.append(
            sid,
            [
                AssistantMessage(
                    text="", reasoning_reported=True, tool_calls=(ToolCall(id="c9", name="pytest", arguments="{}"),)
                ),
                ToolStarted(call_id="c9", name="pytest"),
            ],
        )
        page.goto(f"{srv.url}/s/{sid}")
        page.wait_for_selector('#activity .badge.tool.running[data-call-id="c9"]', timeout=15_000)
        assert "reasoning reported" in page.inner_text("#activity")
        srv.restart()  # the run's tool never finished; a new server knows no live run
        page.wait_for_selector('#activity .badge.tool.interrupted[data-call-id="c9"]', timeout=15_000)
        assert page.inner_text("#activity .badge.tool") == "pytest interrupted"
        assert page.query_selector("#activity .badge.tool.running") is None
    finally:
        srv.stop()


HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    "\x1b[31mred\x1b[0m\x07bell\u202eevil\nline2"
)


def test_hostile_transcript_text_renders_as_inert_text(db, store, page):
    sid = store.create_session(format="test")
    seqs = store.append(sid, [UserMessage(text=HOSTILE)])
    srv = WebServer(db).start()
    try:
        page.goto(f"{srv.url}/s/{sid}")
        _wait_seq(page, seqs[0])
        live = store.append(sid, [ToolResult(call_id="x", content=HOSTILE, name="<b>bold</b>")])
        _wait_seq(page, live[0])  # through the snapshot and through the stream alike
        expected = (
            '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
            "\\x1b[31mred\\x1b[0m\\x07bell\\u202eevil\nline2"
        )
        texts = page.eval_on_selector_all("#transcript .item pre", "els => els.map(e => e.textContent)")
        assert texts == [expected, expected]
        assert page.evaluate("window.__pwned") is None
        assert page.query_selector("#transcript img") is None and page.query_selector("#transcript script") is None
        assert page.query_selector("#transcript b") is None
        assert "<b>bold</b>" in page.inner_text(f'#transcript .item[data-seq="{live[0]}"] .meta')
        assert page.errors == []
    finally:
        srv.stop()


# --- a real `latch run` (subprocess, official OpenAI SDK, the loopback fake server) observed by the page ---


def _run_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    return env


def _start_run(tmp_path: Path, db: Path, ws: Path, base_url: str, task: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "latch",
            "--db",
            str(db),
            "run",
            task,
            "--provider",
            "openai-compatible",
            "--model",
            "local",
            "--base-url",
            base_url,
            "--yes",
        ],
        cwd=ws,
        env=_run_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_session(db: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as con:
            row = con.execute("SELECT id FROM sessions WHERE source = 'latch run'").fetchone()
        if row:
            return row[0]
        time.sleep(0.1)
    raise AssertionError("latch run created no session")


def _wait_file(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists(), f"{path.name} never appeared: the shell call did not start"


def _screenshot_shows(page, path: Path, selectors: list[str]) -> None:
    """A full-page screenshot in which every one of ``selectors`` is visible and drawn: its box lies inside the
    image and holds more than one colour (its text or border was painted there)."""
    import matplotlib.image as mpimg  # test extra

    page.evaluate("window.scrollTo(0, 0)")
    png = page.screenshot(path=str(path), full_page=True)
    pixels = mpimg.imread(BytesIO(png), format="png")[:, :, :3]
    height, width = pixels.shape[:2]
    for sel in selectors:
        el = page.locator(sel).first
        assert el.is_visible(), f"{sel} is not visible"
        box = el.bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0, sel
        x0, y0 = int(box["x"]), int(box["y"])
        x1, y1 = min(width, int(box["x"] + box["width"])), min(height, int(box["y"] + box["height"]))
        assert 0 <= x0 < x1 and 0 <= y0 < y1, f"{sel} lies outside the screenshot ({box}, {width}x{height})"
        region = pixels[y0:y1, x0:x1].reshape(-1, 3)
        assert len({tuple(p) for p in (region * 255).round().astype(int)}) > 1, f"{sel} is blank in the screenshot"


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


def test_closing_the_page_does_not_stop_a_running_latch_run(db, browser, tmp_path, ws):
    gate, started = ws / "gate", ws / "started"
    command = f"touch {started}; while [ ! -f {gate} ]; do sleep 0.1; done; echo gate-passed"
    script = [
        Reply(
            tool_calls=(ToolUse("c1", "shell", json.dumps({"command": command, "timeout": 120})),),
            usage={"prompt_tokens": 900, "completion_tokens": 20},
        ),
        Reply("The gate opened and the command passed.", usage={"prompt_tokens": 950, "completion_tokens": 9}),
    ]
    EventStore(db).close()
    srv = WebServer(db).start()  # up before the run: it sees the run append, so the run is live to it
    proc = None
    try:
        with serve_openai(script) as model:
            proc = _start_run(tmp_path, db, ws, model.base_url, "wait for the gate")
            sid = _run_session(db)
            _wait_file(started)
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{srv.url}/s/{sid}")
            page.wait_for_selector('#activity .badge.tool.running[data-call-id="c1"]', timeout=15_000)
            context.close()  # the page goes away while the tool runs
            gate.touch()
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err + out
            assert len(model.requests) == 2  # the run went on to its next model request
        with EventStore(db) as store:  # without the run lifecycle bookkeeping (tests/agent/test_run_lifecycle.py)
            events = [e for e in store.events(sid) if e.kind not in ("run_started", "run_ended")]
        results = [e.event for e in events if e.kind == "tool_result"]
        assert [r.call_id for r in results] == ["c1"] and "gate-passed" in results[0].content
        assert events[-1].kind in ("assistant_message", "usage")
        # a new page shows the finished run: the final answer, no tool running
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{srv.url}/s/{sid}")
        page.wait_for_selector("#transcript .item", timeout=15_000)
        page.wait_for_function(
            "document.getElementById('transcript').textContent.includes('The gate opened and the command passed.')",
            timeout=15_000,
        )
        assert page.query_selector("#activity .badge.tool") is None
        context.close()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        srv.stop()


def test_a_killed_run_shows_its_turn_interrupted_after_a_server_restart(db, browser, tmp_path, ws):
    marker = ws / "pid"
    slow = f"echo $$ > {marker}; sleep 60"
    EventStore(db).close()
    srv = WebServer(db).start()
    proc = None
    try:
        with serve_openai(
            [
                Reply(
                    tool_calls=(ToolUse("k1", "shell", json.dumps({"command": slow, "timeout": 120})),),
                    usage={"prompt_tokens": 800, "completion_tokens": 12},
                )
            ]
        ) as model:
            proc = _start_run(tmp_path, db, ws, model.base_url, "a slow job")
            sid = _run_session(db)
            _wait_file(marker)
            context = browser.new_context(viewport={"width": 1200, "height": 800})
            page = context.new_page()
            page.goto(f"{srv.url}/s/{sid}")
            page.wait_for_selector('#activity .badge.tool.running[data-call-id="k1"]', timeout=15_000)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            end_shell_group(marker)  # a shell a SIGKILLed agent left behind, ended like a reboot would
        with EventStore(db) as store:
            kinds = [e.kind for e in store.events(sid)]
        assert kinds[-1] == "tool_started" and "tool_result" not in kinds  # the turn never finished
        srv.restart()  # a new server: committed history only, no live run
        page.wait_for_selector('#activity .badge.tool.interrupted[data-call-id="k1"]', timeout=15_000)
        assert page.inner_text("#activity .badge.tool") == "shell interrupted"
        assert page.query_selector("#activity .badge.tool.running") is None
        # a fresh page after the restart says the same (the snapshot, not the old stream)
        fresh = context.new_page()
        fresh.goto(f"{srv.url}/s/{sid}")
        fresh.wait_for_selector('#activity .badge.tool.interrupted[data-call-id="k1"]', timeout=15_000)
        _screenshot_shows(
            fresh,
            tmp_path / "interrupted.png",
            ["#activity .badge.tool.interrupted", "#transcript .item", "#state", "#usage"],
        )
        context.close()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        srv.stop()


def test_a_screenshot_of_each_page_shows_its_elements(db, store, browser, tmp_path):
    sid = store.create_session(format="test", source="/tmp/shot.jsonl")
    seqs = store.append(
        sid,
        [
            UserMessage(text="make the screenshot"),
            AssistantMessage(
                text="", reasoning_reported=True, tool_calls=(ToolCall(id="s1", name="pytest", arguments="{}"),)
            ),
            Usage(
                input_tokens=10,
                cache_read_tokens=900,
                cache_write_tokens=50,
                output_tokens=7,
                model="claude-sonnet-4-5",
            ),
            ToolStarted(call_id="s1", name="pytest"),
        ],
    )
    srv = WebServer(db).start()
    try:
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        page = context.new_page()
        page.goto(srv.url + "/")
        page.wait_for_selector("#sessions tbody tr")
        _screenshot_shows(
            page,
            tmp_path / "sessions.png",
            ["header #home", "#sessions-view h1", "#sessions thead", "#sessions tbody tr td a"],
        )
        assert page.inner_text("#sessions tbody tr td a") == sid[:8]
        assert page.locator("#session-view").is_hidden()
        page.click("#sessions tbody tr td a")
        _wait_seq(page, seqs[1])
        page.wait_for_selector("#activity .badge.tool")
        _screenshot_shows(
            page,
            tmp_path / "session.png",
            [
                "header #title",
                "#conn",
                f'#transcript .item[data-seq="{seqs[0]}"]',
                "#activity .badge.tool",
                "#state",
                "#usage",
            ],
        )
        assert page.locator("#sessions-view").is_hidden()
        assert "reasoning reported" in page.inner_text("#activity")
        assert page.inner_text(f'#transcript .item[data-seq="{seqs[0]}"] pre') == "make the screenshot"
        context.close()
    finally:
        srv.stop()


def test_requests_show_context_bars_cache_epochs_breaks_and_cost_live(db, store, page, tmp_path):
    sid = store.create_session(format="test")
    model = "claude-sonnet-4-5"
    store.append(
        sid,
        [
            UserMessage(text="go"),
            Usage(input_tokens=10, cache_read_tokens=0, cache_write_tokens=4000, output_tokens=5, model=model),
            Usage(input_tokens=10, cache_read_tokens=4000, cache_write_tokens=500, output_tokens=5, model=model),
        ],
    )
    srv = WebServer(db).start()
    try:
        page.goto(f"{srv.url}/s/{sid}")
        page.wait_for_selector('#requests .req[data-request="2"]', timeout=15_000)
        assert page.locator("#requests .req").count() == 2
        assert page.inner_text('#requests .req[data-request="1"] .info').endswith("epoch 1 first")
        assert page.inner_text('#requests .req[data-request="2"] .info').startswith("4,510 tokens \u00b7 $")
        # the bars are drawn to scale: request 2's cache read is 4000 of the largest request's 4510 tokens
        widths = page.eval_on_selector_all(
            '#requests .req[data-request="2"] .seg', "els => els.map(e => e.getBoundingClientRect().width)"
        )
        bar = page.eval_on_selector('#requests .req[data-request="2"] .bar', "e => e.getBoundingClientRect().width")
        assert abs(widths[0] / bar - 4000 / 4510) < 0.01 and abs(widths[1] / bar - 500 / 4510) < 0.01
        assert page.locator("#epochs .epoch").count() == 1
        assert page.inner_text("#epochs .cost").startswith("cost $")
        # a compaction, then a request that reads nothing from the cache: a break, streamed live
        live = store.append(
            sid,
            [
                CompactionMarker(summary="s", pre_tokens=4510, post_tokens=300),
                Usage(input_tokens=300, cache_read_tokens=0, cache_write_tokens=0, output_tokens=3, model=model),
            ],
        )
        page.wait_for_selector('#requests .req.broken[data-request="3"]', timeout=15_000)
        assert page.inner_text('#requests .req[data-request="3"] .info').endswith("epoch 2 broken (compaction)")
        assert page.get_attribute('#requests .req[data-request="3"]', "data-seq") == str(live[1])
        assert page.locator("#epochs .epoch").count() == 2
        assert page.inner_text("#epochs .cache-break") == "cache break at request 3: compaction"
        _screenshot_shows(
            page,
            tmp_path / "requests.png",
            ["#requests-view h2", "#requests .req.broken", "#epochs .epoch", "#epochs .cache-break"],
        )
        assert page.errors == []
    finally:
        srv.stop()


def test_replay_page_shows_each_requests_view_and_keeps_script_inert(db, store, page, tmp_path):
    """The replay page, linked from the session page: the per-request table, a click on
    request 2 shows its view content, and transcript text holding markup stays text."""
    sid = store.create_session(format="test", source="/tmp/replay.jsonl")
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> fix the rounding'
    store.append(
        sid,
        [
            UserMessage(text="round the invoice totals"),
            AssistantMessage(text="looking", model="m"),
            Usage(input_tokens=100, output_tokens=5),
            UserMessage(text=hostile),
            AssistantMessage(text="done <b>bold</b>", model="m"),
            Usage(input_tokens=150, output_tokens=7),
            UserMessage(text="thanks"),
            AssistantMessage(text="ok", model="m"),
        ],
    )
    srv = WebServer(db).start()
    try:
        page.goto(f"{srv.url}/s/{sid}")
        page.click("#replay-link")
        page.wait_for_selector("body[data-replay=ready]", timeout=60_000)
        assert page.url == f"{srv.url}/s/{sid}/replay"
        rows = page.eval_on_selector_all("#replay-table tbody tr", "els => els.map(e => e.dataset.request)")
        assert rows == ["1", "2", "3"]
        doc = page.evaluate(f"fetch('/api/sessions/{sid}/replay').then(r => r.json())")
        cells = page.eval_on_selector_all('#replay-table tr[data-request="2"] td', "els => els.map(e => e.textContent)")
        row = doc["requests"][1]
        assert cells[:3] == ["#2", f"{row['total_tokens']:,}", str(row["epoch"])]
        assert cells[3].startswith("cache kept") and "+units" in cells[3]
        page.click('#replay-table tr[data-request="2"]')
        page.wait_for_selector('#replay-request[data-request="2"]', timeout=30_000)
        assert page.text_content("#replay-request-title").startswith("request 2 of 3")
        contents = page.eval_on_selector_all("#replay-messages .msg pre.content", "els => els.map(e => e.textContent)")
        assert any(hostile in c for c in contents)  # request 2's view holds the hostile message, as text
        assert not any("done <b>bold</b>" in c for c in contents)  # request 2 is before that answer
        assert page.evaluate("window.__pwned") is None
        assert (
            page.eval_on_selector_all(
                "#replay-request script, #replay-request img, #replay-request b", "els => els.length"
            )
            == 0
        )
        _screenshot_shows(
            page, tmp_path / "replay.png", ["#replay-table", "#replay-request-title", "#replay-messages .msg"]
        )
        assert page.errors == []
    finally:
        srv.stop()
