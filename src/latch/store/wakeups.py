"""Wake-ups: how a process waiting for an agent group's work learns that the group's tasks changed.

A waiter (a worker with nothing claimable) is woken when a task of its group is created, claimed or completed
(:data:`TASK_WAKE_KINDS`), the events that can make a task claimable or show who holds one. Nothing else wakes
it: a queued message, a delivery, a renewal or a membership change is information only, and an idle agent is
never woken by information alone (spec: "Group coordination durability"). A lease running out is no event: the
waiter bounds its wait by the earliest lease's end itself.

* On PostgreSQL (:class:`ListenWakeups`) the store appends a ``NOTIFY`` on :data:`GROUP_CHANNEL`, payload the
  group's root session id, in the transaction that appends such an event (the server delivers it at COMMIT, so a
  waiter woken by it reads the event); the waiter ``LISTEN``\\ s on a connection of its own, opened before it
  first reads the group, so no change between its read and its wait is missed. A dropped connection (a server
  restart) is reopened and reported as a wake-up: a notification may have been missed, the caller reads again.
* On SQLite (:class:`PollingWakeups`) the waiter polls the root session's log for a newer event of those kinds.

:func:`group_wakeups` picks the one for a store.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from ..events import GroupTaskClaimed, GroupTaskCompleted, GroupTaskCreated
from ._sqlite import StoreUnavailable

__all__ = ["TASK_WAKE_KINDS", "GROUP_CHANNEL", "Wakeups", "PollingWakeups", "ListenWakeups", "group_wakeups"]

TASK_WAKE_KINDS = frozenset({GroupTaskCreated.KIND, GroupTaskClaimed.KIND, GroupTaskCompleted.KIND})
"""The root-session event kinds that wake a group's waiters."""
GROUP_CHANNEL = "latch_group"
"""The PostgreSQL notification channel of group wake-ups (payload: the root session id)."""


class Wakeups(Protocol):
    """A waiter for one group's task changes (see the module)."""

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; ``True`` when a task change arrived (or may have: a reconnect),
        ``False`` when the time ran out first."""
        ...

    def close(self) -> None: ...


class PollingWakeups:
    """The SQLite waiter: polls ``store``'s root session ``root`` every ``interval`` seconds for an event of
    :data:`TASK_WAKE_KINDS` newer than the last one it reported (at first: the session's newest event)."""

    def __init__(self, store: Any, root: str, *, interval: float = 0.05):
        self.store, self.root, self.interval = store, root, interval
        self.mark = int(store.max_seq(root))

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            try:
                new = list(self.store.events(self.root, kinds=sorted(TASK_WAKE_KINDS), after_seq=self.mark))
            except Exception:  # noqa: BLE001 - busy or gone: the caller's own read reports it
                return True
            if new:
                self.mark = new[-1].seq
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(self.interval, left))

    def close(self) -> None:
        pass

    def __enter__(self) -> PollingWakeups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ListenWakeups:
    """The PostgreSQL waiter: ``LISTEN`` :data:`GROUP_CHANNEL` on its own connection to ``dsn`` (opened here:
    :class:`~latch.store.StoreUnavailable` when the server cannot be reached), woken by notifications naming
    ``root``. ``reconnects`` counts the connections it had to reopen."""

    def __init__(self, dsn: str, root: str, *, url: str = "the PostgreSQL store", connect_timeout: int = 10):
        self._dsn, self.root, self._url, self._timeout = dsn, root, url, connect_timeout
        self._conn: Any = None
        self.reconnects = 0
        self.notified = 0
        if not self._connect():
            raise StoreUnavailable(f"cannot listen for the group's changes at {url}: the server cannot be reached")

    def _connect(self) -> bool:
        import psycopg

        try:
            conn = psycopg.connect(
                self._dsn, autocommit=True, connect_timeout=self._timeout, application_name="latch-listen"
            )
            conn.execute(f"LISTEN {GROUP_CHANNEL}")
        except psycopg.Error:
            return False
        self._conn = conn
        return True

    def wait(self, timeout: float) -> bool:
        import psycopg

        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            left = deadline - time.monotonic()
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._drop()
                if self._connect():
                    self.reconnects += 1
                    return True  # a notification may have come while it was down: read again
                if left <= 0:
                    return False
                time.sleep(min(0.2, left))
                continue
            if left <= 0:
                return False
            try:
                for n in self._conn.notifies(timeout=left, stop_after=1):
                    if n.payload == self.root:
                        self.notified += 1
                        return True
            except psycopg.Error:
                self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001, S110 - already gone
                pass
        self._conn = None

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> ListenWakeups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def group_wakeups(store: Any, root: str) -> PollingWakeups | ListenWakeups:
    """The waiter for the group rooted in ``root`` of ``store`` (a PostgreSQL store's ``listen``, else polling)."""
    listen = getattr(store, "listen_group", None)
    if listen is not None:
        waiter: ListenWakeups = listen(root)
        return waiter
    return PollingWakeups(store, root)
