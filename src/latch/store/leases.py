"""Leases and fences: the write preconditions the store checks inside a write's own transaction.

A *fence* is carried by a write (``EventStore.append(..., fence=)``, ``import_session``,
``append_kernel_records``) and checked after ``BEGIN IMMEDIATE``, before anything is inserted; when it no longer
holds the write raises :class:`LeaseLost` and the store is unchanged. A check made before the transaction
(read, then write) would let another process take the lease in between; this one cannot.

* :class:`TaskFence`: a write for claim ``token`` of an agent group's task (spec: "Group coordination
  durability"). The fencing token is the claim's attempt number, one more per reclaim, so it only increases.
  It holds while the group projection (``group_tasks``, brought up to date in the same transaction) says the
  task is open and owned by ``agent`` at attempt ``token``.
* :class:`ClaimFence`: the claim ``token`` of a group task itself, a conditional insert: it holds while the
  task is open and, for the first claim (token 0), unclaimed with every dependency completed, or, for a reclaim
  (token n), still at claim n - 1 with its lease run out at the claimer's ``now``. Two claimers racing: the
  first transaction commits, the second finds the condition gone (or the claim's source ref taken).
* :class:`RunFence`: a write of run ``run_id`` of a session. It holds while the session's run lease
  (``run_leases``) names that run.

The run lease (table ``run_leases``, one row per session) makes at most one ``latch run`` live per session:
:meth:`EventStore.acquire_run_lease` inserts the row, or takes over one whose holder the caller's
``holder_live`` says is gone, and refuses a live one. The row is coordination state, not history. The run's
``run_started``/``run_ended`` events stay the durable record of what ran.

:class:`FencedStore` is a store whose every write carries fences: it is handed to everything that writes for a
lease (a group task's child loop, its engine's kernel writer, its tools and processes).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..records import dataclass
from ._sqlite import StoreError

if TYPE_CHECKING:
    from ..events import Event, PendingEvent
    from .event_store import EventStore

__all__ = [
    "TaskFence",
    "ClaimFence",
    "RunFence",
    "Fence",
    "LeaseLost",
    "RunLease",
    "FencedStore",
    "check_fences",
    "fences_of",
]


class LeaseLost(StoreError):
    """A fenced write was refused because its lease was taken over or ended (one line naming the lease, its
    token and the new holder); nothing was written."""


@dataclass(frozen=True)
class TaskFence:
    """Writes for claim ``token`` (its attempt number) of task ``task_id`` of the group rooted in
    ``root_session_id``, owned by ``agent``."""

    root_session_id: str
    task_id: str
    agent: str
    token: int

    def check(self, db: sqlite3.Connection) -> None:
        row = db.execute(
            "SELECT owner, attempt, status FROM group_tasks WHERE root_session_id = ? AND task_id = ?",
            (self.root_session_id, self.task_id),
        ).fetchone()
        where = f"the lease of task {self.task_id!r} (token {self.token}, held by {self.agent!r})"
        if row is None:
            raise LeaseLost(f"{where}: no such task in the group rooted in {self.root_session_id}; nothing written")
        owner, attempt, status = row
        if (owner, attempt) != (self.agent, self.token):
            raise LeaseLost(f"{where} was taken over by {owner!r} (token {attempt}); nothing written")
        if status is not None:
            raise LeaseLost(f"{where}: the task is {status} already; nothing written")


@dataclass(frozen=True)
class ClaimFence(TaskFence):
    """The condition of claim ``token`` of task ``task_id`` by ``agent`` (see the module), checked in the claim's
    own transaction; ``now`` (Unix seconds) is the claimer's clock for a reclaim's lease check."""

    now: float = 0.0

    def check(self, db: sqlite3.Connection) -> None:
        row = db.execute(
            "SELECT owner, attempt, status, lease_seconds, alive_at, depends_on FROM group_tasks "
            "WHERE root_session_id = ? AND task_id = ?",
            (self.root_session_id, self.task_id),
        ).fetchone()
        where = f"claim {self.token} of task {self.task_id!r} by {self.agent!r}"
        if row is None:
            raise LeaseLost(f"{where}: no such task in the group rooted in {self.root_session_id}; nothing written")
        owner, attempt, status, lease, alive, deps = row
        if status is not None:
            raise LeaseLost(f"{where}: the task is {status} already; nothing written")
        if self.token == 0:
            if owner is not None:
                raise LeaseLost(f"{where}: {owner!r} claimed it first; nothing written")
            names = list(json.loads(deps))
            open_deps = names and [
                r[0]
                for r in db.execute(
                    f"SELECT task_id FROM group_tasks WHERE root_session_id = ? AND task_id IN ({','.join('?' * len(names))}) "
                    "AND (status IS NULL OR status != 'completed') ORDER BY pos",
                    (self.root_session_id, *names),
                ).fetchall()
            ]
            if open_deps:
                raise LeaseLost(f"{where}: its dependency {open_deps[0]!r} has not completed; nothing written")
            return
        if owner is None or attempt != self.token - 1:
            raise LeaseLost(f"{where}: the task is at claim {attempt} by {owner!r}; nothing written")
        if lease is None or alive is None or not self.now > alive + lease:
            raise LeaseLost(f"{where}: the lease of {owner!r} (token {attempt}) is still running; nothing written")


@dataclass(frozen=True)
class RunFence:
    """Writes of run ``run_id`` of session ``session_id`` (its run lease)."""

    session_id: str
    run_id: str

    def check(self, db: sqlite3.Connection) -> None:
        row = db.execute("SELECT run_id, pid, host FROM run_leases WHERE session_id = ?", (self.session_id,)).fetchone()
        where = f"the run lease of session {self.session_id} (run {self.run_id})"
        if row is None:
            raise LeaseLost(f"{where} was released; nothing written")
        if row[0] != self.run_id:
            raise LeaseLost(f"{where} was taken over by run {row[0]} (pid {row[1]} on {row[2]}); nothing written")


Fence = TaskFence | RunFence


def fences_of(fence: Fence | Sequence[Fence] | None) -> tuple[Fence, ...]:
    """``fence`` as a tuple (``None``: no fence)."""
    if fence is None:
        return ()
    if isinstance(fence, (TaskFence, RunFence)):
        return (fence,)
    return tuple(fence)


def check_fences(db: sqlite3.Connection, fences: Iterable[Fence]) -> None:
    """Inside a write transaction (the group projection already current): raise :class:`LeaseLost` for the first
    fence that does not hold."""
    for f in fences:
        f.check(db)


@dataclass(frozen=True)
class RunLease:
    """The run lease of ``session_id``: run ``run_id`` of process ``pid`` on ``host`` (``process_start`` its start
    time in clock ticks, ``None`` where unknown), acquired at ``acquired_at`` and last renewed at ``renewed_at``
    (Unix seconds); it expires ``lease_seconds`` after its last renewal."""

    session_id: str
    run_id: str
    pid: int
    host: str
    process_start: int | None
    acquired_at: float
    renewed_at: float
    lease_seconds: float

    def expired(self, now: float) -> bool:
        """``True`` when ``now`` (Unix seconds) is past the last renewal plus ``lease_seconds``."""
        return now > self.renewed_at + self.lease_seconds


class FencedStore:
    """``store`` with ``fences`` on every write (:meth:`append`, :meth:`import_session`,
    :meth:`append_kernel_records`); every other attribute is the store's own. A write whose fence no longer holds
    raises :class:`LeaseLost`, store unchanged."""

    def __init__(self, store: EventStore, fences: Sequence[Fence]):
        self._store, self.fences = store, tuple(fences)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @property
    def unfenced(self) -> EventStore:
        """The store underneath."""
        return self._store

    def fenced(self, fence: Fence | Sequence[Fence]) -> FencedStore:
        return FencedStore(self._store, self.fences + fences_of(fence))

    def append(
        self, session_id: str, events: Iterable[PendingEvent | Event], *, fence: Fence | Sequence[Fence] | None = None
    ) -> list[int]:
        return list(self._store.append(session_id, events, fence=self.fences + fences_of(fence)))

    def import_session(self, **kwargs: Any) -> tuple[str, list[int]]:
        extra = fences_of(kwargs.pop("fence", None))
        return self._store.import_session(**kwargs, fence=self.fences + extra)

    def append_kernel_records(
        self,
        session_id: str,
        stream: str,
        records: Sequence[tuple[str, int, dict[str, Any]]],
        *,
        fence: Fence | Sequence[Fence] | None = None,
    ) -> list[int]:
        return list(
            self._store.append_kernel_records(session_id, stream, records, fence=self.fences + fences_of(fence))
        )
