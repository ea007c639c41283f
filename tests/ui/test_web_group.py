"""The group sidebar of the session page: members, tasks and claims from the group events, the
same reducer ``latch group`` prints (GroupState.summary), in a real Chromium page, live as a claim is appended."""

from __future__ import annotations

import pytest
from test_web_browser import browser  # noqa: F401 (the fixture)
from web_server import WebServer

from latch.agent.group import Group
from latch.events import UserMessage
from latch.store import EventStore
from latch.ui.web.app import group_view, snapshot


@pytest.fixture
def db(tmp_path):
    return tmp_path / "web.sqlite"


def _group(store):
    root = store.create_session(format="test")
    store.append(root, [UserMessage(text="lead the group")])
    worker = store.create_session(format="test")
    store.append(worker, [UserMessage(text="a worker")])
    g = Group(store, root)
    g.create_task("t1", "write the parser")
    g.create_task("t2", "test the parser", depends_on=("t1",))
    g.join("alice", worker)
    g.join("bob")
    return root, worker, g


def test_group_view_of_the_root_and_of_a_member_is_the_group_summary(db):
    with EventStore(db) as store:
        root, worker, g = _group(store)
        lone = store.create_session(format="test")
        expected = {"root": root, **g.state().summary()}
        assert group_view(store, root) == group_view(store, worker) == expected
        assert [(t["id"], t["status"], t["owner"]) for t in expected["tasks"]] == [
            ("t1", "ready", None),
            ("t2", "blocked", None),
        ]
        assert group_view(store, lone) is None and snapshot(store, lone)["session"]["group"] is None
        assert snapshot(store, worker)["session"]["group"] == expected


@pytest.mark.slow  # left out of the fast tier: a browser on a real server
def test_the_session_page_shows_members_tasks_and_a_claim_live(db, browser):  # noqa: F811
    store = EventStore(db)
    root, worker, g = _group(store)
    srv = WebServer(db).start()
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{srv.url}/s/{root}")
        page.wait_for_selector('#group .task[data-task="t1"][data-status="ready"]', timeout=15_000)
        assert page.is_visible("#group-box")
        assert [page.get_attribute(f"#group .member >> nth={i}", "data-agent") for i in range(2)] == ["alice", "bob"]
        assert page.inner_text('#group .member[data-agent="bob"]') == "bob · not running"
        assert page.get_attribute('#group .task[data-task="t2"]', "data-status") == "blocked"
        assert g.claim_task("t1", "alice")  # appended while the page watches
        page.wait_for_selector(
            '#group .task[data-task="t1"][data-status="claimed"][data-owner="alice"]', timeout=15_000
        )
        assert "claimed by alice" in page.inner_text('#group .task[data-task="t1"]')
        member = context.new_page()  # a member's own page shows the same group
        member.goto(f"{srv.url}/s/{worker}")
        member.wait_for_selector('#group .task[data-task="t1"][data-owner="alice"]', timeout=15_000)
        assert member.inner_text("#group .meta").startswith(f"root {root}")
        lone = store.create_session(format="test")
        other = context.new_page()
        other.goto(f"{srv.url}/s/{lone}")
        other.wait_for_selector("#run .badge.run", timeout=15_000)
        assert not other.is_visible("#group-box")
    finally:
        context.close()
        srv.stop()
        store.close()
