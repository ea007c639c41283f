"""latch tui commands: steer, compact and stop from the terminal UI reach a real ``latch run``
subprocess on the loopback OpenAI server, through the same durable inbox as ``latch web`` (textual pilot)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fake_providers import Reply, ToolUse, serve_openai
from test_web_browser import _run_session, _start_run
from textual.widgets import Static

from latch.events import SteeringQueued, UserMessage
from latch.host import reducers as R
from latch.store import EventStore
from latch.ui.tui.app import ConfirmStop, LatchTUI, SessionScreen

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

SIZE = (200, 50)


def _gated(started: Path, gate: Path) -> str:
    return json.dumps(
        {"command": f"touch {started}; while [ ! -f {gate} ]; do sleep 0.1; done; echo passed", "timeout": 120}
    )


async def until(pilot, check, timeout: float = 60.0, what: str = "") -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await pilot.pause(0.05)
    assert check(), what


def _receipts(app) -> str:
    return str(app.screen.query_one("#receipts", Static).content)


def test_steer_compact_and_stop_from_the_tui_reach_a_real_latch_run(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "tui.sqlite"
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
    proc = None
    try:
        with serve_openai(script) as model:
            proc = _start_run(tmp_path, db, ws, model.base_url, "run the gated jobs")
            sid = _run_session(db)

            async def go():
                app = LatchTUI(db, session=sid, poll_interval=0.05)
                async with app.run_test(size=SIZE) as pilot:
                    await until(pilot, s1.exists, what="the first shell call never started")
                    await until(pilot, lambda: "run running" in str(app.screen.query_one("#title", Static).content))
                    await pilot.press("i")
                    await until(pilot, lambda: app.screen.query_one("#steer-text").has_focus)
                    await pilot.press(*"Also check the [b]logs[/b]", "enter")
                    await until(pilot, lambda: "steer" in _receipts(app) and "queued" in _receipts(app))
                    assert not app.screen.query_one("#steer-text").display  # sent: the input closed
                    await pilot.press("k")
                    await until(pilot, lambda: "compact" in _receipts(app))
                    assert len(model.requests) == 1  # queued while the tool runs: nothing is delivered mid-call
                    g1.touch()
                    await until(pilot, s2.exists, what="request 2 was never answered")
                    await until(pilot, lambda: "delivered" in _receipts(app) and "applied" in _receipts(app))
                    second = model.requests[1].body["messages"]
                    assert "Also check the [b]logs[/b]" in json.dumps(
                        [m for m in second if m["role"] == "user"][-1]["content"]
                    ), second
                    await pilot.press("x")
                    await until(pilot, lambda: isinstance(app.screen, ConfirmStop))
                    await pilot.press("n")  # declined: nothing queued
                    await until(pilot, lambda: isinstance(app.screen, SessionScreen))
                    assert "stop" not in _receipts(app)
                    await pilot.press("x")
                    await until(pilot, lambda: isinstance(app.screen, ConfirmStop))
                    await pilot.press("y")
                    await until(pilot, lambda: isinstance(app.screen, SessionScreen) and "stop" in _receipts(app))
                    g2.touch()
                    await until(pilot, lambda: proc.poll() is not None, what="latch run did not stop")
                    await until(
                        pilot, lambda: "run ended (stopped)" in str(app.screen.query_one("#title", Static).content)
                    )
                    shown = _receipts(app)
                    steer, compact, stop = (c for c in R.commands(app.screen.events))
                    assert shown == (
                        f"commands: · steer {steer['id']} 'Also check the [b]logs[/b]' delivered"
                        f" · compact {compact['id']} applied · stop {stop['id']} applied"
                    )

            asyncio.run(go())
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err + out
            assert len(model.requests) == 2  # stopped at the boundary before request 3
        with EventStore(db) as store:
            events = list(store.events(sid))
        (run,) = R.runs(events)
        assert (run["outcome"], run["exit_code"]) == ("stopped", 0)
        cmds = {c["command"]: c for c in R.commands(events)}
        assert {k: c["status"] for k, c in cmds.items()} == {
            "steer": "delivered",
            "compact": "applied",
            "stop": "applied",
        }
        assert {e.event.source for e in events if e.kind == "run_command_queued"} == {"tui"}
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_refused_commands_leave_the_store_unchanged(tmp_path):
    db = tmp_path / "t.sqlite"
    with EventStore(db) as store:
        sid = store.create_session(format="test")
        store.append(sid, [UserMessage(text="task")])

    async def go():
        app = LatchTUI(db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmStop))
            await pilot.press("y")
            await until(pilot, lambda: isinstance(app.screen, SessionScreen))
            await pilot.pause(0.1)
            assert [n.message for n in app._notifications] == [f"session {sid} has no running latch run to stop"]
            await pilot.press("i")
            await until(pilot, lambda: app.screen.query_one("#steer-text").has_focus)
            await pilot.press(" ", "enter")  # an empty steer is refused, the input stays open
            await pilot.pause(0.1)
            assert app.screen.query_one("#steer-text").display
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert not app.screen.query_one("#steer-text").display
            await pilot.press("i")
            await until(pilot, lambda: app.screen.query_one("#steer-text").has_focus)
            await pilot.press(*"go on", "enter")
            await until(pilot, lambda: "steer" in _receipts(app))

    asyncio.run(go())
    with EventStore(db) as store:
        queued = [e.event for e in store.events(sid) if e.kind != "user_message"]
    assert len(queued) == 1 and isinstance(queued[0], SteeringQueued) and queued[0].text == "go on"
