"""The session builder behind ``latch run`` (latch.agent.session): a mistake is a one-line SessionError that says
whether it is a usage error, and a rejected new run never opens the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from latch.agent.session import RunOptions, SessionError, check_options, open_session
from latch.store import EventStore


def _open(options: RunOptions, opened: list, *, store: EventStore | None = None, config=None):
    def open_store(create: bool = True):
        opened.append(create)
        assert store is not None, "a rejected new run must not open the store"
        return store

    return open_session(
        options,
        config or {},
        open_store=open_store,
        on_terminal=False,
        store_files=lambda: [],
        warn=lambda line: None,
        defer=lambda release: None,
        observer=lambda name, model, setup: None,
        approve=lambda workspace: None,
    )


@pytest.mark.parametrize(
    "options, message",
    [
        (RunOptions(worker=True), "--worker needs --group NAME"),
        (RunOptions(task="t", lease_seconds=5.0), "--lease applies to --worker only"),
        (RunOptions(task="t", window=100, reserve=100), "--reserve (100) must be below --window (100)"),
        (RunOptions(task="  "), "TASK is empty"),
        (RunOptions(once=True), "--once needs a TASK (or --resume SESSION)"),
    ],
)
def test_contradicting_options_are_usage_errors(options, message):
    with pytest.raises(SessionError) as exc:
        check_options(options)
    assert str(exc.value) == message
    assert exc.value.usage is True


def test_a_new_run_without_a_provider_is_refused_before_the_store_opens():
    opened: list = []
    with pytest.raises(SessionError, match=r"^no provider: pass --provider ") as exc:
        _open(RunOptions(task="do it", model="gpt-4.1"), opened)
    assert exc.value.usage is True
    assert opened == []


def test_an_unknown_tool_names_the_known_ones():
    with pytest.raises(SessionError, match=r"^--tools: unknown tool 'nope' \(known: read_file, ") as exc:
        _open(RunOptions(task="do it", tool_names="read_file,nope"), [])
    assert exc.value.usage is True


def test_resuming_an_unknown_session_is_not_a_usage_error(tmp_path: Path):
    store = EventStore(tmp_path / "latch.db")
    try:
        opened: list = []
        with pytest.raises(SessionError) as exc:
            _open(RunOptions(resume="missing"), opened, store=store)
        assert "missing" in str(exc.value) and "\n" not in str(exc.value)
        assert exc.value.usage is False
        assert opened == [False]  # a resume reads the store, it never creates one
        assert store.sessions() == []
    finally:
        store.close()
