"""The CLI, the web API and the TUI show the same reducer state for every corpus session.

Each corpus session (``corpus_support.corpus_items``: every importable file, every session of a container
file) is imported into one store file. For each, ``latch show --json`` and ``latch state --json`` (the real
CLI), ``GET /api/sessions/{id}`` (a real uvicorn server) and the view the TUI's session screen built
(``App.run_test``) must agree: the CLI and the TUI exactly (the same JSON encoding), the web after its
documented display escaping (:func:`latch.textsafe.safe`, multiline, on every string).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from click.testing import CliRunner
from corpus_support import corpus_items, import_item, item_id, item_name, require_corpus
from web_server import WebServer

from latch.cli import _load_commands, cli
from latch.host import reducers as R
from latch.store import EventStore
from latch.textsafe import dumps, safe
from latch.ui.tui.app import LatchTUI, SessionScreen

ITEMS = corpus_items()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_corpus()
    db = tmp_path_factory.mktemp("ui-corpus") / "corpus.sqlite"
    with EventStore(db) as store:
        sids = {item_name(item): import_item(store, item) for item in ITEMS}
    srv = WebServer(db).start()
    try:
        with httpx.Client(timeout=30) as client:
            yield db, sids, srv, client
    finally:
        srv.stop()


def _displayed(value):
    """``value`` as the web sends it: every string through ``safe(..., multiline=True)``."""
    if isinstance(value, str):
        return safe(value, multiline=True)
    if isinstance(value, dict):
        return {k: _displayed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_displayed(v) for v in value]
    return value


def _tui_view(db, sid: str) -> dict:
    async def go():
        app = LatchTUI(db, session=sid, poll_interval=60)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, SessionScreen) and app.screen.view is not None
            return app.screen.view

    return asyncio.run(go())


@pytest.mark.parametrize("item", ITEMS, ids=item_id)
def test_cli_web_and_tui_agree(served, item, tmp_path):
    db, sids, srv, client = served
    sid = sids[item_name(item)]
    _load_commands()
    runner = CliRunner()
    env = {"LATCH_HOME": str(tmp_path / "home")}
    show = runner.invoke(cli, ["--db", str(db), "show", sid, "--json"], env=env, catch_exceptions=False)
    assert show.exit_code == 0, show.output
    from_cli = json.loads(show.output)
    assert from_cli.pop("session") == sid
    state = runner.invoke(cli, ["--db", str(db), "state", sid, "--json"], env=env, catch_exceptions=False)
    assert state.exit_code == 0, state.output

    tui = _tui_view(db, sid)
    from_tui = json.loads(dumps(tui))
    assert from_cli == from_tui
    assert R.state_summary(json.loads(state.output)) == from_tui["state"]

    from_web = client.get(f"{srv.url}/api/sessions/{sid}").json()
    assert from_web.pop("session")["id"] == sid
    assert from_web == json.loads(json.dumps(_displayed(tui)))

    # the views are not empty by accident: every session has a transcript and the request count is the usage's
    assert from_tui["transcript"] and from_tui["last_seq"] > 0
    assert len(from_tui["context"]) == len(from_tui["cache"]["requests"]) == from_tui["usage"]["requests"]
