"""latch tui: textual pilot tests (App.run_test) of every panel over a real imported transcript."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus
from textual.widgets import DataTable, Static

from latch.accounting.pricing import format_usd
from latch.agent.group import Group
from latch.cli import _load_commands, cli
from latch.events import AssistantMessage, RunStarted, ToolCall, ToolStarted, Usage, UserMessage
from latch.host import reducers as R
from latch.host.ingest import import_all
from latch.host.kernel import kernel_cache
from latch.host.runs import process_start
from latch.kernel import canonical_state
from latch.kernel.tombstones import forget_session
from latch.plugins import get_plugin_manager
from latch.store import EventStore
from latch.ui.tui import TerminalUI
from latch.ui.tui.app import PANELS, LatchTUI, SessionScreen, SessionsScreen

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

FILE = "claude-code/entire-image_session.jsonl"  # 89 requests, 3 provider cache epochs, 2 cache breaks
SIZE = (200, 60)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    require_corpus()
    db = tmp_path_factory.mktemp("tui") / "tui.sqlite"
    store = EventStore(db)
    [(sid, _, _)] = import_all(store, CORPUS / FILE, final=True)
    events = list(store.events(sid))
    view = R.session_view(events, canonical_state(store, sid, cache=kernel_cache()))
    store.close()
    return db, sid, view


def run(coro):
    return asyncio.run(coro)


def lines(widget: Static) -> list[str]:
    """The rendered lines of ``widget`` (what the terminal shows, wrapped at its width)."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


async def until(pilot, check, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await pilot.pause(0.05)
    assert check()


def test_registered_as_ui_plugin():
    uis = [cls for group in get_plugin_manager().hook.latch_register_uis() for cls in group]
    assert TerminalUI in uis and {c.PLUGIN_NAME for c in uis} >= {"web", "tui"}


def test_sessions_list_opens_a_session(imported):
    db, sid, view = imported

    async def go():
        app = LatchTUI(db, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, SessionsScreen)
            table = app.screen.query_one("#sessions", DataTable)
            assert table.row_count == 1
            row = [str(v) for v in table.get_row_at(0)]
            assert row[:1] + row[2:] == [
                sid[:8],
                "claude-code",
                "claude-opus-4-5-20251101",
                "89",
                "$6.67",
                "done",
                "<command-message>superpowers:brainstorm</command-message> <…",
            ]  # 60 cells
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, SessionScreen))
            assert app.screen.session_id == sid
            title = str(app.screen.query_one("#title", Static).content)
            assert (
                title == f"session {sid} · last seq {view['last_seq']} · {len(view['transcript'])} items · 89 requests"
            )
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, SessionsScreen))

    run(go())


def test_transcript_panel(imported):
    db, sid, view = imported

    async def go():
        app = LatchTUI(db, session=sid[:6], poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            shown = lines(app.screen.query_one("#transcript-text", Static))
            first = view["transcript"][0]
            assert shown[:3] == [
                f"#{first['seq']} user",
                "<command-message>superpowers:brainstorm</command-message>",
                "<command-name>/superpowers:brainstorm</command-name>",
            ]
            tool = next(i for i in view["transcript"] if i["role"] == "tool")
            at = shown.index(f"#{tool['seq']} tool {tool['name']} ({tool['call_id']})")
            assert shown[at + 1] == tool["line"]  # the result in one line, not its whole text
            # each call: its command or path, then its result in one line
            at = shown.index(
                "I'll help you brainstorm and design something. Let me first understand the current project context."
            )
            assert shown[at + 1 : at + 3] == [
                "  → Bash(git log --oneline -10) ⇒ 2474647 Merge pull request #135 from "
                "entireio/alex/fix-worktree-shadow-branch-c… (+9 lines)",  # cut at 80 characters
                "  → Glob(/Users/user/workspace/cli/.worktrees/1) ⇒ No files found",
            ]

    run(go())


def test_state_panel(imported):
    db, sid, view = imported
    s = view["state"]

    async def go():
        app = LatchTUI(db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("s")
            await pilot.pause()
            shown = lines(app.screen.query_one("#state-text", Static))
            assert shown[0] == f"session {sid} · revision {s['revision']}"
            assert shown[1].startswith(
                f"files {s['files']} ({s['files_observed']} observed, {s['files_written']} "
                f"written) · mutations {s['mutations']} · generation {s['generation']}"
            )
            assert shown[2:4] == ["Canonical state", "Goal: /superpowers:brainstorm"]
            assert s["files"] > 0 and s["revision"] > 0
            assert "reasoning reported: no · running 0 · interrupted 0" in shown
            # the validation `latch evidence` finds (4 go builds and tests, stale since), not "no validation"
            at = shown.index("evidence · workspace generation 19")
            assert shown[at + 1 : at + 11] == [
                "- go test -v ./cmd/entire/cli/strategy/... -run TestLoadSessionState_WithEndedAt: passed at generation "
                "17, STALE (set 244)",
                "- go build ./cmd/entire/...: passed at generation 16, STALE (set 223)",
                "- go build ./cmd/entire/cli/agent/claudecode/...: passed at generation 9, STALE (set 163)",
                "- go build ./cmd/entire/cli/session/...: passed at generation 2, STALE (set 121)",
                "set 121 proved by: go build ./cmd/entire/cli/session/...",
                "set 163 proved by: go build ./cmd/entire/cli/agent/claudecode/...",
                "set 223 proved by: go build ./cmd/entire/...",
                'set 244 proved by: go test -v ./cmd/entire/cli/strategy/... -run "TestLoadSessionState_WithEndedAt" '
                "2>&1 | head -50",
                "verdict: NOT CERTIFIED",
                "  - go test -v ./cmd/entire/cli/strategy/... -run TestLoadSessionState_WithEndedAt: passed, but the "
                "workspace changed since",
            ]
            assert "(no validation recorded)" not in shown

    run(go())


def test_usage_panel(imported):
    db, sid, view = imported

    async def go():
        app = LatchTUI(db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("u")
            await pilot.pause()
            table = app.screen.query_one("#usage-table", DataTable)
            assert table.row_count == 89
            r, c = view["requests"][0], view["costs"]["requests"][0]
            assert [str(v) for v in table.get_row_at(0)] == [
                "1",
                str(r["seq"]),
                "claude-opus-4-5-20251101",
                "2",
                "16,496",
                "25,415",
                "1",
                "41,913",
                format_usd(c["usd"]),
            ]
            assert c["usd"] > 0
            total = str(app.screen.query_one("#usage-total", Static).content)
            assert (
                total.startswith("89 requests · uncached ")
                and f"cost {format_usd(view['costs']['totals']['usd'])}" in total
            )

    run(go())


def test_context_panel(imported):
    db, sid, view = imported

    async def go():
        app = LatchTUI(db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("c")
            await pilot.pause()
            table = app.screen.query_one("#context-table", DataTable)
            assert table.row_count == 89
            last = view["context"][-1]
            row = [str(v) for v in table.get_row_at(88)]
            assert row[:3] == ["89", str(last["seq"]), f"{last['prompt_tokens']:,}"]
            assert row[7:11] == [f"{last['chars'][k]:,}" for k in ("user", "assistant", "tool", "system")]
            assert last["chars"]["tool"] > last["chars"]["user"] > 0

    run(go())


def test_epochs_panel(imported):
    db, sid, view = imported

    async def go():
        app = LatchTUI(db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("e")
            await pilot.pause()
            shown = lines(app.screen.query_one("#epochs-text", Static))
            assert shown[0] == "3 cache epochs · 2 cache breaks"
            assert (
                "break at request 4 (seq 1000): prefix changed · read 16,496 of 42,993 cached".replace(
                    "1000", str(view["cache"]["breaks"][0]["seq"])
                )
                in shown
            )
            table = app.screen.query_one("#epochs-table", DataTable)
            assert table.row_count == 89
            assert [str(v) for v in table.get_row_at(3)][2:] == ["2", "broken", "prefix changed"]
            assert [str(v) for v in table.get_row_at(4)][2:] == ["2", "kept", ""]

    run(go())


def test_follows_new_events_and_never_parses_markup(imported, tmp_path):
    db, sid, _ = imported
    live_db = tmp_path / "live.sqlite"
    live_db.write_bytes(db.read_bytes())
    writer = EventStore(live_db)
    evil = "[bold red]not bold[/bold red] [link=http://x.test]y[/link] \x1b[2J done"

    async def go():
        app = LatchTUI(live_db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            screen = app.screen
            before = screen.last_seq
            assert "running 0" in str(screen.query_one("#state-text", Static).content)
            seqs = writer.append(
                sid,
                [
                    UserMessage(text=evil),
                    AssistantMessage(text="", tool_calls=(ToolCall(id="c9", name="Bash", arguments="{}"),)),
                    Usage(
                        input_tokens=5,
                        cache_read_tokens=0,
                        cache_write_tokens=0,
                        output_tokens=1,
                        model="claude-opus-4-5-20251101",
                    ),
                    ToolStarted(call_id="c9", name="Bash"),
                ],
            )
            await until(pilot, lambda: screen.last_seq == seqs[-1])
            assert before < seqs[0]
            text = screen.query_one("#transcript-text", Static)
            content = text.content
            at = content.plain.index(f"#{seqs[0]} user\n") + len(f"#{seqs[0]} user\n")
            assert content.plain[at:].startswith(
                "[bold red]not bold[/bold red] [link=http://x.test]y[/link] \\x1b[2J done\n"
            )
            assert not [s for s in content.spans if s.start < at + len(evil) and s.end > at]  # no style on it
            shown = "[bold red]not bold[/bold red] [link=http://x.test]y[/link] \\x1b[2J done"
            await until(pilot, lambda: shown in lines(text))  # (drawn at the widget's next refresh)
            state = str(screen.query_one("#state-text", Static).content)
            assert "running 1" in state and f"tool Bash (c9) at #{seqs[-1]}: running" in state
            assert screen.query_one("#usage-table", DataTable).row_count == 90
            assert [str(v) for v in screen.query_one("#epochs-table", DataTable).get_row_at(89)][2:] == [
                "4",
                "broken",
                "prefix changed",
            ]

    try:
        run(go())
    finally:
        writer.close()


def test_unfinished_tool_shows_interrupted_when_not_live(imported, tmp_path):
    db, sid, _ = imported
    dead = tmp_path / "dead.sqlite"
    dead.write_bytes(db.read_bytes())
    with EventStore(dead) as w:
        [seq] = w.append(sid, [ToolStarted(call_id="k1", name="Bash")])

    async def go():
        app = LatchTUI(dead, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            state = str(app.screen.query_one("#state-text", Static).content)
            assert f"tool Bash (k1) at #{seq}: interrupted" in state and "interrupted 1" in state

    run(go())


def test_cli_unknown_session_is_one_line(tmp_path):
    db = tmp_path / "empty.sqlite"
    EventStore(db).close()
    _load_commands()
    res = CliRunner().invoke(cli, ["--db", str(db), "tui", "nope"], env={"LATCH_HOME": str(tmp_path / "home")})
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith("Error: ") and "nope" in res.output


def test_panels_constant():
    assert PANELS == ("transcript", "state", "usage", "context", "epochs")


def test_a_run_whose_process_dies_turns_interrupted_while_watched(tmp_path):
    """Live comes from the durable run lifecycle: a run_started of a process that dies (a real SIGKILL) with
    no run_ended turns the watched session from live to interrupted with no new event appended."""
    db = tmp_path / "run.sqlite"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with EventStore(db) as w:
            sid = w.create_session(format="test")
            w.append(
                sid,
                [
                    RunStarted(
                        "r1", child.pid, socket.gethostname(), "2026-12-02T00:00:00.000Z", process_start(child.pid)
                    ),
                    UserMessage(text="go"),
                    AssistantMessage(text="", tool_calls=(ToolCall(id="k1", name="Bash", arguments="{}"),)),
                    ToolStarted(call_id="k1", name="Bash"),
                ],
            )

        async def go():
            app = LatchTUI(db, session=sid, poll_interval=0.05)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                screen = app.screen
                title = lambda: str(screen.query_one("#title", Static).content)  # noqa: E731
                state = lambda: str(screen.query_one("#state-text", Static).content)  # noqa: E731
                assert "· live · run running" in title() and "tool Bash (k1)" in state() and "running 1" in state()
                os.kill(child.pid, signal.SIGKILL)
                child.wait(10)
                await until(pilot, lambda: "run interrupted" in title())
                assert "· live" not in title() and "interrupted 1" in state() and "running 0" in state()

        run(go())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


def test_state_panel_shows_the_group_members_tasks_and_claims(tmp_path):
    db = tmp_path / "group.sqlite"
    with EventStore(db) as w:
        root = w.create_session(format="test")
        worker = w.create_session(format="test")
        w.append(root, [UserMessage(text="lead")])
        w.append(worker, [UserMessage(text="work")])
        g = Group(w, root)
        g.create_task("t1", "write [bold]the[/bold] parser")
        g.create_task("t2", "test it", depends_on=("t1",))
        g.join("alice", worker)
        assert g.claim_task("t1", "alice")

    async def go(sid):
        app = LatchTUI(db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            return str(app.screen.query_one("#state-text", Static).content)

    for sid in (root, worker):  # the root's page and a member's page show the same group
        shown = run(go(sid))
        assert f"root {root} · 1 member · 2 tasks · messages 0/0 delivered" in shown
        assert f"member alice: session {worker}" in shown
        assert "task t1 claimed · claimed by alice: write [bold]the[/bold] parser" in shown
        assert "task t2 blocked · after t1: test it" in shown
    with EventStore(db) as w:
        lone = w.create_session(format="test")
    assert "group" not in run(go(lone)).split("evidence")[-1]


def test_forgotten_sessions_are_not_listed_and_cannot_be_opened(tmp_path):
    db = tmp_path / "forgotten.sqlite"
    store = EventStore(db)
    kept = store.create_session(format="test", source="kept.jsonl")
    gone = store.create_session(format="test", source="gone.jsonl")
    child = store.create_session(format="test", source="child.jsonl", parent_id=gone)
    for sid in (kept, gone, child):
        store.append(sid, [UserMessage(text=f"secret plan of {sid[:4]}")])
    forget_session(store, gone)
    store.close()

    async def go():
        app = LatchTUI(db, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            table = app.screen.query_one("#sessions", DataTable)
            assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == [kept[:8]]

    run(go())
    for sid in (gone, child):
        with pytest.raises(KeyError, match=f"session {sid} is forgotten"):
            LatchTUI(db, session=sid)
    _load_commands()
    res = CliRunner().invoke(cli, ["--db", str(db), "tui", gone[:8]], env={"LATCH_HOME": str(tmp_path / "home")})
    assert res.exit_code == 1 and res.output == (
        f"Error: session {gone} is forgotten (tombstoned by `latch forget`); its history is not shown\n"
    )


def test_a_session_forgotten_while_open_stops_showing_its_transcript(tmp_path):
    db = tmp_path / "open.sqlite"
    store = EventStore(db)
    sid = store.create_session(format="test")
    store.append(sid, [UserMessage(text="the secret plan")])

    async def go():
        app = LatchTUI(db, session=sid, poll_interval=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot, lambda: "the secret plan" in "\n".join(lines(app.screen.query_one("#transcript-text", Static)))
            )
            forget_session(store, sid)
            await until(pilot, lambda: "forgotten" in str(app.screen.query_one("#title", Static).content))
            assert "the secret plan" not in "\n".join(lines(app.screen.query_one("#transcript-text", Static)))

    run(go())
    store.close()
