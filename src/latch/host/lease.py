"""The lease a loop works under, as the loop sees it (spec: "Group coordination durability"; one live run per
session).

A :class:`LeaseGuard` is shared by the thread that renews a lease (a group worker's heartbeat, a run's renewal)
and the loop that writes under it. When a renewal finds the lease taken over, the renewing thread calls
:meth:`LeaseGuard.lose`: the functions registered with :meth:`LeaseGuard.on_lost` run at once (the child's
processes are killed: a running command is stopped, not waited for), and :meth:`LeaseGuard.check` raises
:class:`~latch.store.LeaseLost` from then on, which the loop calls before each request and each tool call. The
store's fences (:mod:`latch.store.leases`) are what make a stale write impossible; the guard makes the loop stop
early instead of finding out at its next write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..store import LeaseLost

__all__ = ["LeaseGuard"]


class LeaseGuard:
    """The state of one lease named ``what`` (e.g. ``"the lease of task 't1'"``), shared between threads."""

    def __init__(self, what: str):
        self.what = what
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._callbacks: list[Callable[[], object]] = []

    @property
    def lost(self) -> bool:
        """Whether a renewal found the lease taken over."""
        return self._reason is not None

    def lose(self, reason: str) -> None:
        """Mark the lease lost (``reason``: one line, e.g. who holds it now) and call every :meth:`on_lost` function
        once. Idempotent; the functions' exceptions are swallowed (they run on the renewing thread)."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = " ".join(reason.split())
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn()
            except Exception:  # noqa: BLE001 -- stopping a child must not kill the renewing thread
                pass

    def on_lost(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` when the lease is lost (at once when it already is)."""
        with self._lock:
            if self._reason is None:
                self._callbacks.append(fn)
                return
        fn()

    def check(self) -> None:
        """:class:`~latch.store.LeaseLost` (one line naming the lease and why) once the lease is lost."""
        if self._reason is not None:
            raise LeaseLost(f"{self.what} was lost ({self._reason}); stopped before the next request or tool call")
