"""EventStore: the durable L3 raw store (spec: "Sessions & continuity").

One SQLite database per workspace (standard library ``sqlite3``, WAL mode).
Sessions (with parent and workspace), an append-only event log with a global
monotonic ``seq``, a contentless FTS5 index over each event's searchable text
written in the same transaction as the append, content-addressed artifacts
(SHA-256 → bytes), and engine-owned kernel records. There is no API that updates
or deletes an event, and triggers make the database refuse it too.

Default location: ``$LATCH_HOME/workspaces/<name>-<hash>.db`` when ``LATCH_HOME``
is set, else the platformdirs user data folder for ``latch``.

Failures reach callers as :class:`StoreError` with one readable line: a path that
cannot hold a database (``cannot open the Latch store at PATH: REASON``) and a
database another process keeps locked past ``busy_timeout_ms`` (``the store at PATH
is busy (locked by another process); try again``), on open, every write and every read.
"""

from __future__ import annotations

from ..events import PendingEvent
from ._sqlite import StoreBusyError, StoreError, StoreUnavailable, non_folder_parent
from .event_store import EventStore, SessionInfo, StoredEvent, data_dir, default_db_path, read_only_reason
from .leases import ClaimFence, Fence, FencedStore, LeaseLost, RunFence, RunLease, TaskFence
from .pg_url import is_postgres_url, local_anchor, redact
from .projections import Projection
from .protocol import EventLog
from .replays import ReplayRun, ReplayScratch, replay_scratch_path

StoreError.__module__ = StoreBusyError.__module__ = StoreUnavailable.__module__ = __name__  # their public home

__all__ = [
    "EventStore",
    "EventLog",
    "is_postgres_url",
    "local_anchor",
    "redact",
    "StoredEvent",
    "SessionInfo",
    "PendingEvent",
    "data_dir",
    "default_db_path",
    "StoreError",
    "StoreBusyError",
    "StoreUnavailable",
    "non_folder_parent",
    "read_only_reason",
    "ReplayScratch",
    "ReplayRun",
    "replay_scratch_path",
    "Projection",
    "TaskFence",
    "ClaimFence",
    "RunFence",
    "Fence",
    "FencedStore",
    "LeaseLost",
    "RunLease",
]
