"""Session titles from the harness (Goose ``sessions.name``/``description``, OpenCode ``session.title``) in the
session meta, ``latch sessions`` (an optional column), ``GET /api/sessions`` and the TUI sessions list."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus
from starlette.testclient import TestClient
from textual.widgets import DataTable

from latch.cli import _load_commands, cli
from latch.host.ingest import import_all
from latch.store import EventStore
from latch.ui.tui.app import SESSION_COLUMNS, LatchTUI
from latch.ui.web.app import create_app

_load_commands()

# hand-checked: `sqlite3 lantern_sessions.db "select id, name, description from sessions"` (descriptions empty)
GOOSE = {
    "20260805_1": "What does average_item_price do?",
    "20260805_2": "Division by Zero on Empty Cart",
    "20260805_3": "Cart Empty Average Price",
    "20260805_4": "Read file with absolute path",
}
# `sqlite3 lantern_opencode.db "select id, title from session"` (the quotes are in OpenCode's own title)
OPENCODE = {
    "ses_03156b771ffeANj3CiDnYkqmmr": "What does average_item_price do?",
    "ses_031559a74ffe4reBgr5U6MnTO4": '"Function to Validate Division on Empty Cart: Orders.py"',
    "ses_031541bf9ffeMiy2LOFii47rch": "Fix average_item_price returns 0 when cart has no items",
}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    require_corpus()
    path = tmp_path_factory.mktemp("titles") / "t.sqlite"
    with EventStore(path) as store:
        for f in ("goose/lantern_sessions.db", "opencode/lantern_opencode.db"):
            import_all(store, CORPUS / f, final=True)
    return path


def _titles(db) -> dict[str, str | None]:
    with EventStore(db) as store:
        return {s.meta.get("goose_session_id") or s.meta.get("opencode_session_id"): s.title for s in store.sessions()}


def test_titles_are_imported_into_the_session_meta(db):
    assert _titles(db) == {**GOOSE, **OPENCODE}


def test_goose_description_is_the_title_when_the_name_is_empty(tmp_path):
    require_corpus()
    copy = tmp_path / "sessions.db"
    copy.write_bytes((CORPUS / "goose/lantern_sessions.db").read_bytes())
    with sqlite3.connect(copy) as con:
        con.execute("UPDATE sessions SET name = '', description = 'Described only' WHERE id = '20260805_2'")
        con.execute("UPDATE sessions SET name = '  ', description = '' WHERE id = '20260805_3'")
    store_path = tmp_path / "s.sqlite"
    with EventStore(store_path) as store:
        import_all(store, copy, final=True)
    assert _titles(store_path) == {**GOOSE, "20260805_2": "Described only", "20260805_3": None}


def _sessions(db, columns: int, *extra: str):
    res = CliRunner().invoke(cli, ["--db", str(db), "sessions", *extra], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.output


def test_latch_sessions_shows_the_title_under_each_session(db):
    out = _sessions(db, 200)
    for title in [*GOOSE.values(), *OPENCODE.values()]:
        assert f": {title}\n" in out
    doc = json.loads(_sessions(db, 200, "--json"))
    assert sorted(d["title"] for d in doc) == sorted([*GOOSE.values(), *OPENCODE.values()])


def test_a_narrow_terminal_keeps_the_titles(db):
    assert "goose: Cart Empty Average Price\n" in _sessions(db, 50)


def test_an_untitled_session_and_an_escaped_title(tmp_path):
    path = tmp_path / "u.sqlite"
    with EventStore(path) as store:
        store.create_session(format="test")
    assert "test: (no title)\n" in _sessions(path, 200)
    with EventStore(path) as store:
        store.create_session(format="test", meta={"title": "red \x1b[31mALERT[/b]"})
    out = _sessions(path, 200)
    assert "\x1b[31m" not in out and "red \\x1b[31mALERT[/b]" in out


def test_web_and_tui_session_lists_show_the_title(db):
    with TestClient(create_app(db), base_url="http://127.0.0.1") as client:
        rows = client.get("/api/sessions").json()["sessions"]
    assert sorted(r["title"] for r in rows) == sorted([*GOOSE.values(), *OPENCODE.values()])

    async def go():
        app = LatchTUI(db, poll_interval=0.05)
        async with app.run_test(size=(200, 40)) as pilot:
            await pilot.pause()
            table = app.screen.query_one("#sessions", DataTable)
            title = SESSION_COLUMNS.index("title")
            return sorted(str(table.get_row_at(i)[title]) for i in range(table.row_count))

    assert asyncio.run(go()) == sorted([*GOOSE.values(), *OPENCODE.values()])
