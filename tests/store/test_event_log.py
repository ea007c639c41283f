"""EventLog (latch.store.protocol): every store class the layers above receive conforms to it.

mypy checks the same statically (the end of ``latch/store/protocol.py``); here real instances are checked at run
time, so a method renamed or removed on one backend fails here too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from latch.store import EventLog, EventStore, FencedStore, RunFence
from latch.store.postgres import PostgresEventStore

MEMBERS = sorted(name for name in vars(EventLog) if not name.startswith("_"))


def _conforms(store: object) -> list[str]:
    """The protocol members ``store`` lacks (empty when it is an EventLog)."""
    return [name for name in MEMBERS if not hasattr(store, name)]


def test_the_protocol_names_what_the_callers_use() -> None:
    assert {"append", "events", "session", "sessions", "fenced", "append_kernel_records", "path"} <= set(MEMBERS)


def test_the_sqlite_store_and_its_fenced_form_are_event_logs(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.db")
    try:
        fenced = store.fenced(RunFence("s1", "r1"))
        assert type(fenced) is FencedStore
        for s in (store, fenced):
            assert _conforms(s) == []
            assert isinstance(s, EventLog)
        assert fenced.path == store.path
    finally:
        store.close()


@pytest.mark.slow
def test_the_postgres_store_is_an_event_log(pg_url: str) -> None:
    store = EventStore(pg_url)
    try:
        assert type(store) is PostgresEventStore
        assert _conforms(store) == []
        assert isinstance(store, EventLog)
        assert isinstance(store.fenced(RunFence("s1", "r1")), EventLog)
    finally:
        store.close()


def test_an_object_missing_a_member_is_not_an_event_log(tmp_path: Path) -> None:
    class Partial:
        def __init__(self, store: EventStore) -> None:
            self._store = store

        def __getattr__(self, name: str) -> object:
            if name == "append":
                raise AttributeError(name)
            return getattr(self._store, name)

    store = EventStore(tmp_path / "s.db")
    try:
        partial = Partial(store)
        assert _conforms(partial) == ["append"]
        assert not isinstance(partial, EventLog)
    finally:
        store.close()
