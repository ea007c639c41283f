"""latch web in headless Chromium over real corpus sessions: the sessions list as ``latch sessions`` shows it, the
state and evidence as ``latch state``/``latch evidence`` print them, each tool call with its command and its
result in one line, and the replay page (scrolls to the clicked request, no sideways scroll at 1280 px)."""

from __future__ import annotations

import pytest
from browser_support import launch
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus
from web_server import WebServer

from latch.cli import _load_commands, cli
from latch.host.ingest import import_all
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

_load_commands()

SPOTTER = "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"  # two sub-agent files; `latch evidence`: CERTIFIED
PORT = "claude-code/claude-reliability_python-to-rust-port.jsonl"  # 39 requests


@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors
    yield pg
    context.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    require_corpus()
    path = tmp_path_factory.mktemp("webuis") / "s.db"
    with EventStore(path) as store:
        import_all(store, CORPUS / SPOTTER, final=True)
        for sub in sorted((CORPUS / SPOTTER).with_suffix("").glob("subagents/*.jsonl")):
            import_all(store, sub, final=True)
        import_all(store, CORPUS / PORT, final=True)
    return path


def _cli(db, *args) -> str:
    res = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert res.exit_code == 0, res.output
    return res.output


def test_the_sessions_list_shows_what_latch_sessions_shows(db, page):
    srv = WebServer(db).start()
    try:
        page.goto(srv.url + "/")
        page.wait_for_selector("#sessions tbody tr")
        rows = page.eval_on_selector_all(
            "#sessions tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))"
        )
        depth = page.eval_on_selector_all("#sessions tbody tr", "rs => rs.map(r => r.dataset.depth)")
        started = [row[1] for row in rows]
        assert [row[:1] + row[2:7] for row in rows] == [
            ["96d68eaa", "claude-code", "claude-opus-4-6", "143", "$10.52", "done"],
            ["└ cf37594e", "claude-code", "claude-opus-4-6", "1", "$0.1013", "done"],
            ["└ e46423e4", "claude-code", "claude-haiku-4-5-20251001", "13", "$0.04715", "done"],
            ["1e076572", "claude-code", "claude-opus-4-5-20251101", "39", "$0.7150", "done"],
        ]
        assert depth == ["0", "1", "1", "0"]
        assert rows[0][7] == (
            "Work on bead spotter-fum. Run bd show spotter-fum to see the issue details and bd ready "
            "to find available subtasks. Start with the first ready task."
        )
        # the same start times as `latch sessions` prints (local time)
        listed = _cli(db, "sessions").splitlines()[1::2]
        assert [" ".join(line.replace("└", "").split()[1:3]) for line in listed] == started
        assert page.errors == []
    finally:
        srv.stop()


def test_state_and_evidence_render_as_latch_state_and_evidence(db, page):
    state = _cli(db, "state", "96d6").splitlines()
    evidence = _cli(db, "evidence", "96d6").splitlines()
    srv = WebServer(db).start()
    try:
        page.goto(f"{srv.url}/s/96d68eaa7770")
        page.wait_for_selector("#evidence .verdict")
        assert (
            page.text_content("#evidence .verdict")
            == evidence[-1]
            == ("verdict: CERTIFIED (every required validation passed at the current generation)")
        )
        assert "(no validation recorded)" not in page.inner_text("aside")
        assert page.text_content("#state .state-head") == state[0] == "session 96d68eaa7770 · revision 192"
        assert (
            page.text_content("#state .state-counts")
            == state[1]
            == (
                "files 28 (25 observed, 11 written) · mutations 27 · generation 27 · validations 17 runs, 6 requirements "
                "(2 current) · failures 12 lineages (5 active) · processes 1 (0 running)"
            )
        )
        headings = page.eval_on_selector_all("#state h3", "hs => hs.map(h => h.textContent)")
        assert headings == [
            "Canonical state",
            "Validation evidence",
            "Certification",
            "Active failure lineages",
            "Working set: files (newest first)",
            "Working set: commands run (newest first)",
        ]
        rows = page.eval_on_selector_all("#evidence tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
        proved = [line for line in evidence if " proved by: " in line]
        sets = [line.split()[1] for line in proved]  # store-wide seqs, oldest set first
        assert [r[:4] for r in rows] == [
            ["requirement", "status", "generation", "state"],
            ["mix test", "passed", "27", "current"],
            ["mix test test/spotter_web/live/session_live_test.exs", "passed", "27", "current"],
            ["vitest run", "passed", "21", "STALE"],
            ["mix test test/spotter/services/transcript_renderer_test.exs", "failed", "21", "STALE"],
            ["mix compile", "passed", "18", "STALE"],
            ["mix compile --warnings-as-errors", "passed", "14", "STALE"],
        ]
        assert [r[4] for r in rows[1:]] == sets[::-1]
        assert page.eval_on_selector_all("#evidence p.set", "ps => ps.map(p => p.textContent)") == proved
        # no raw counter dump
        aside = page.inner_text("aside")
        assert "files_observed" not in aside and "tombstoned" not in aside
        # each call: its command or path, then its result in one line
        calls = page.eval_on_selector_all("#transcript .call", "cs => cs.map(c => c.textContent)")
        assert calls[:2] == [
            "→ Bash(bd show spotter-fum) ⇒ ○ spotter-fum [EPIC] · Improve Session Transcript Readability "
            "and Structure in … (+36 lines)",
            "→ Bash(bd ready) ⇒ 📋 Ready work (6 issues with no blockers): (+6 lines)",
        ]
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.goto(f"{srv.url}/s/e46423e4841c")  # its long counters once pushed the page 199 px sideways
        page.wait_for_selector("#evidence .verdict")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        assert page.errors == []
    finally:
        srv.stop()


def _scrolled_to(page, selector: str) -> None:
    """Wait (5 s at most) until the top of ``selector`` is at the top of the viewport."""
    for _ in range(100):
        if abs(page.eval_on_selector(selector, "e => e.getBoundingClientRect().top")) < 2:
            return
        page.wait_for_timeout(50)
    assert page.eval_on_selector(selector, "e => e.getBoundingClientRect().top") == 0


def test_replay_page_scrolls_to_the_clicked_request_without_sideways_scroll(db, page):
    srv = WebServer(db).start()
    try:
        page.goto(f"{srv.url}/s/1e07657261df/replay")
        page.wait_for_selector("body[data-replay=ready]", timeout=120_000)
        page.click('#replay-table tr[data-request="30"]')
        page.wait_for_selector('#replay-request[data-request="30"]', timeout=60_000)
        _scrolled_to(page, "#replay-request")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.click('#replay-table tr[data-request="3"]')  # back up: the table stays reachable
        page.wait_for_selector('#replay-request[data-request="3"]', timeout=60_000)
        _scrolled_to(page, "#replay-request")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        assert page.errors == []
    finally:
        srv.stop()
