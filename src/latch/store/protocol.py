"""EventLog: what the layers above the store use of it, as one protocol.

Three classes satisfy it: :class:`~latch.store.event_store.EventStore` (SQLite),
:class:`~latch.store.postgres.PostgresEventStore` (the same log on a PostgreSQL server) and
:class:`~latch.store.leases.FencedStore` (either of them with fences on every write, handed to everything that
writes for a lease). A function that only reads and appends the log (sessions, events, search, artifacts, kernel
records, token counts, projections, run leases) takes an ``EventLog``; one that needs a store's maintenance
surface (migrations, integrity checks, the replay scratch database, import fingerprints) takes the
``EventStore`` itself. mypy checks that the three classes conform (the end of this module), and so does
``tests/store/test_event_log.py`` on real instances.

Spec: "Sessions & continuity" (the append-only event log and its sessions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..events import Event, MediaRef, PendingEvent
from .event_store import SessionInfo, StoredEvent
from .leases import Fence, RunLease

__all__ = ["EventLog"]


@runtime_checkable
class EventLog(Protocol):
    """The event log of one workspace: sessions, their append-only events, artifacts, kernel records, token
    counts, projections and run leases. Every method has the meaning, shapes and errors
    (:class:`~latch.store.StoreError`, :class:`~latch.store.LeaseLost` for a write whose fence no longer holds)
    of the :class:`~latch.store.event_store.EventStore` method of the same name."""

    @property
    def path(self) -> Path:
        """The database file (for a server store: the local anchor its side files sit beside)."""
        ...

    def close(self) -> None: ...

    # sessions
    def session_id_for(self, external_key: str) -> str:
        """The session id of an external key (a static method on the store classes)."""
        ...

    def create_session(
        self,
        *,
        external_key: str | None = None,
        source: str | None = None,
        format: str | None = None,
        workspace: str | None = None,
        parent_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str: ...

    def sessions(self) -> list[SessionInfo]: ...

    def session(self, session_id: str) -> SessionInfo: ...

    def children(self, session_id: str) -> list[SessionInfo]: ...

    # the log
    def fenced(self, fence: Fence | Sequence[Fence]) -> EventLog: ...

    def append(
        self, session_id: str, events: Iterable[PendingEvent | Event], *, fence: Fence | Sequence[Fence] | None = None
    ) -> list[int]: ...

    def import_session(
        self,
        *,
        external_key: str,
        source: str | None,
        format: str | None,
        workspace: str | None,
        events: Sequence[PendingEvent],
        meta: dict[str, Any] | None = None,
        parent_id: str | None = None,
        artifacts: Sequence[tuple[bytes, str, int | None, int | None]] = (),
        parent_key: str | None = None,
        fence: Fence | Sequence[Fence] | None = None,
    ) -> tuple[str, list[int]]: ...

    def events(
        self,
        session_id: str | None = None,
        *,
        after_seq: int = 0,
        until_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[StoredEvent]: ...

    def get(self, seq: int) -> StoredEvent: ...

    def count_events(self, session_id: str | None = None) -> int: ...

    def max_seq(self, session_id: str | None = None) -> int: ...

    # search
    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        mode: str = "and",
        before_seq: int | None = None,
        until_seq: int | None = None,
        exclude_sessions: Iterable[str] = (),
    ) -> list[StoredEvent]: ...

    def search_hits(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        order: str = "recent",
        kinds: Sequence[str] | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        exclude_sessions: Iterable[str] = (),
    ) -> list[tuple[StoredEvent, float]]: ...

    def call_events(
        self,
        call_id: str,
        *,
        session_id: str | None = None,
        kinds: Sequence[str] | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        exclude_sessions: Iterable[str] = (),
    ) -> list[StoredEvent]: ...

    # artifacts
    def put_artifact(
        self, data: bytes, media_type: str, *, width: int | None = None, height: int | None = None
    ) -> MediaRef: ...

    def get_artifact(self, sha256: str) -> tuple[MediaRef, bytes]: ...

    # engine-owned records
    def append_kernel_records(
        self,
        session_id: str,
        stream: str,
        records: Sequence[tuple[str, int, dict[str, Any]]],
        *,
        fence: Fence | Sequence[Fence] | None = None,
    ) -> list[int]: ...

    def kernel_records(
        self, session_id: str, stream: str, *, kinds: Sequence[str] | None = None, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]: ...

    def kernel_streams(self, session_id: str, *, kind: str | None = None) -> list[str]: ...

    def token_counts(self, session_id: str, tokenizer: str) -> dict[tuple[int, str], int]: ...

    def put_token_counts(self, session_id: str, tokenizer: str, counts: Sequence[tuple[int, str, int]]) -> int: ...

    # projections
    def sync_projection(self, name: str) -> bool: ...

    def read_projection(self, name: str, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]: ...

    # run leases
    def run_lease(self, session_id: str) -> RunLease | None: ...

    def acquire_run_lease(
        self,
        session_id: str,
        run_id: str,
        *,
        pid: int,
        host: str,
        process_start: int | None,
        lease_seconds: float,
        now: float,
        holder_live: Callable[[RunLease], bool],
    ) -> RunLease | None: ...

    def renew_run_lease(self, session_id: str, run_id: str, *, now: float) -> bool: ...

    def release_run_lease(
        self, session_id: str, run_id: str, events: Iterable[PendingEvent | Event] = ()
    ) -> list[int]: ...


if TYPE_CHECKING:  # mypy checks that every store class is an EventLog
    from .event_store import EventStore
    from .leases import FencedStore
    from .postgres import PostgresEventStore

    def _sqlite(store: EventStore) -> EventLog:
        return store

    def _server(store: PostgresEventStore) -> EventLog:
        return store

    def _fenced(store: FencedStore) -> EventLog:
        return store
