"""Durable run lifecycle and run commands (spec: "Transient interface activity", "Browser
observation and reconnect").

* :class:`RunRecord` appends a :class:`~latch.events.RunStarted` (``run_id``, ``pid``, ``host``,
  ``started_at``, the process start time) when ``latch run`` begins and a :class:`~latch.events.RunEnded`
  (``outcome``, exit code) when it ends; a run killed in between leaves a ``RunStarted`` without an end,
  which :func:`session_liveness` reports as *interrupted* once its process is gone (never live, never
  completed).
* :class:`RunCommands` is the durable inbox of commands for a session's running agent: ``steer`` (a
  :class:`~latch.events.SteeringQueued`, delivered by :class:`latch.agent.steering.SteeringInbox` at the
  next safe boundary), ``stop`` and ``compact`` (:class:`~latch.events.RunCommandQueued`, applied by the run
  at its next safe boundary and marked with a :class:`~latch.events.RunCommandApplied`). Each command has a
  receipt id, stored as the event's source ref (``command:<id>``), so a retried request adds nothing. The
  receipt a client holds is transport state; the queued and applied events are the durable record.

* One live run per session: :meth:`RunRecord.acquire` takes the session's run lease (:mod:`latch.store.leases`,
  table ``run_leases``) before the run appends anything, and a renewal thread renews it every third of
  :data:`RUN_LEASE_SECONDS`. A second run of a session whose run is live is refused with
  :class:`RunLeaseHeld` (one line naming the session, the live run's pid and host) and nothing is appended. A
  lease whose process is gone (this host: pid gone or reused) or that expired without renewal (a paused process,
  another host) is taken over. Every write of the run can carry :meth:`RunRecord.fence`, and its
  :attr:`RunRecord.guard` is lost once a renewal finds the lease taken over.

:func:`process_alive` and :func:`session_liveness` read the process table (``os.kill(pid, 0)`` and Linux
``/proc``); the reducers they feed (:func:`latch.host.reducers.run_status`) stay pure.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..events import (
    RUN_COMMANDS,
    RUN_OUTCOMES,
    PendingEvent,
    RunCommandApplied,
    RunCommandQueued,
    RunEnded,
    RunStarted,
    SteeringQueued,
)
from ..store import EventLog, LeaseLost, RunFence, RunLease, StoreError
from . import reducers as R
from .lease import LeaseGuard

__all__ = [
    "COMMANDS",
    "NoRunningRun",
    "RunRecord",
    "RunCommands",
    "RunLeaseHeld",
    "RUN_LEASE_SECONDS",
    "holder_alive",
    "process_start",
    "process_alive",
    "session_liveness",
    "utc_now",
]

RUN_LEASE_SECONDS = 30.0
"""How long (seconds) a run's lease outlives its last renewal (renewed every third of it while the run lives)."""

COMMANDS = ("steer", *RUN_COMMANDS)
"""Every command a UI can send a running agent: ``steer``, ``stop``, ``compact``."""

_RECEIPT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def utc_now() -> str:
    """The current time as ISO-8601 UTC with milliseconds (``2026-12-02T01:09:35.123Z``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks after boot (Linux ``/proc/PID/stat`` field 22), or
    ``None`` when it cannot be read (no such process, not Linux)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def process_alive(run: Mapping[str, Any]) -> bool:
    """Whether the process of a run (a :func:`latch.host.reducers.runs` entry: ``pid``, ``host``,
    ``process_start``) is still running: on this host, the pid exists and, where both are known, started at
    the recorded time (a reused pid is not the run). A run recorded on another host cannot be checked from
    here and counts as not alive (the store is local; spec: an unfinished phase never implies a live
    process)."""
    if run.get("host") != socket.gethostname():
        return False
    pid = run.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    recorded, now = run.get("process_start"), process_start(pid)
    return recorded is None or now is None or recorded == now


def session_liveness(events: Iterable[Any], *, observed: bool = False) -> tuple[bool, dict[str, Any]]:
    """``(live, run)`` of one session: ``run`` is :func:`latch.host.reducers.run_status` with
    :func:`process_alive`; ``live`` is ``run["phase"] == "running"`` when a run was ever recorded, else
    ``observed`` (what the caller saw: events appended while it watched, for sessions no ``latch run``
    wrote, e.g. a live import)."""
    run = R.run_status(events, alive=process_alive)
    return (run["phase"] == "running" if run["phase"] is not None else observed), run


def holder_alive(lease: RunLease) -> bool:
    """Whether the process holding ``lease`` may still be running: on this host, :func:`process_alive` (the pid
    exists and started at the recorded time); on another host it cannot be checked from here, so it counts as
    alive until its lease expires."""
    if lease.host != socket.gethostname():
        return True
    return process_alive({"pid": lease.pid, "host": lease.host, "process_start": lease.process_start})


class RunLeaseHeld(Exception):
    """Another live run holds the session's run lease (one line naming the session, its pid and host)."""


class RunRecord:
    """The durable start and end of one ``latch run`` process in session ``session_id`` (see the module
    docstring). :meth:`acquire` first (before anything is appended), :meth:`start` once, then :meth:`end` once."""

    def __init__(self, store: EventLog, session_id: str):
        self.store, self.session_id = store, session_id
        self.run_id = uuid.uuid4().hex
        self.ended = False
        self.acquired = False
        self.guard = LeaseGuard(f"the run lease of session {session_id}")
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def fence(self) -> RunFence:
        """The fence of this run's writes (:meth:`latch.store.EventStore.fenced`)."""
        return RunFence(self.session_id, self.run_id)

    def acquire(self, lease_seconds: float = RUN_LEASE_SECONDS) -> None:
        """Take the session's run lease for this process and start renewing it every third of ``lease_seconds``.
        :class:`RunLeaseHeld` (nothing written) when a live run holds it; a dead or expired holder is taken over.
        :class:`~latch.store.StoreError` as for any write."""
        me = os.getpid()
        held = self.store.acquire_run_lease(
            self.session_id,
            self.run_id,
            pid=me,
            host=socket.gethostname(),
            process_start=process_start(me),
            lease_seconds=lease_seconds,
            now=time.time(),
            holder_live=holder_alive,
        )
        if held is not None:
            raise RunLeaseHeld(
                f"session {self.session_id} is already running in another latch run (pid {held.pid} "
                f"on {held.host}); wait for it to end or stop it, then resume"
            )
        self.acquired = True
        self._renewer = threading.Thread(
            target=self._renew, args=(lease_seconds / 3,), name="latch-run-lease", daemon=True
        )
        self._renewer.start()

    def _renew(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                renewed = self.store.renew_run_lease(self.session_id, self.run_id, now=time.time())
            except StoreError:  # busy or closed: the next renewal tries again (the lease has room for two misses)
                continue
            if not renewed:
                if not self._stop.is_set():
                    try:
                        lease = self.store.run_lease(self.session_id)
                    except StoreError:
                        lease = None
                    self.guard.lose(
                        f"taken over by the run of pid {lease.pid} on {lease.host}"
                        if lease is not None
                        else "taken over or released"
                    )
                return

    def start(self) -> RunStarted:
        """Append and return the :class:`~latch.events.RunStarted` of this process; a ``stop`` left pending
        from before (queued while no run was running) is closed as ``moot`` in the same transaction, so it
        cannot stop this run. After :meth:`acquire` the append is fenced by the run lease
        (:class:`~latch.store.LeaseLost` when another run took it over meanwhile)."""
        ev = RunStarted(self.run_id, os.getpid(), socket.gethostname(), utc_now(), process_start(os.getpid()))
        self.store.append(
            self.session_id,
            [*self._moot_stops(), PendingEvent(ev, f"run-started:{self.run_id}")],
            fence=self.fence if self.acquired else None,
        )
        return ev

    def _moot_stops(self) -> list[PendingEvent]:
        return [
            PendingEvent(
                RunCommandApplied(q.command_id, q.command, self.run_id, "moot"), f"command-applied:{q.command_id}"
            )
            for q in RunCommands(self.store, self.session_id).pending()
            if q.command == "stop"
        ]

    def end(self, outcome: str, exit_code: int | None = None, detail: str = "") -> RunEnded:
        """Append the :class:`~latch.events.RunEnded`; a ``stop`` still pending is closed as ``moot`` in the
        same transaction (it must not stop the next run). ``ValueError`` for an outcome not in
        :data:`~latch.events.RUN_OUTCOMES`."""
        if outcome not in RUN_OUTCOMES:
            raise ValueError(f"unknown run outcome {outcome!r} (known: {', '.join(RUN_OUTCOMES)})")
        ev = RunEnded(self.run_id, outcome, utc_now(), exit_code, " ".join(detail.split())[:500])
        events = [*self._moot_stops(), PendingEvent(ev, f"run-ended:{self.run_id}")]
        self.ended = True
        if not self.acquired:
            self.store.append(self.session_id, events)
            return ev
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        try:  # the end and the lease's release: one transaction
            self.store.release_run_lease(self.session_id, self.run_id, events)
        except LeaseLost:  # another run took the session over: this run writes nothing more (it reads as interrupted)
            pass
        return ev

    def release(self) -> None:
        """Stop renewing and release the lease without recording an end (a run that never started: it failed
        between :meth:`acquire` and :meth:`start`). Idempotent."""
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join()
        if self.acquired and not self.ended:
            self.ended = True
            try:
                self.store.release_run_lease(self.session_id, self.run_id)
            except LeaseLost:
                pass


class NoRunningRun(Exception):
    """``stop`` was sent to a session whose latest ``latch run`` is not running (one line naming the session)."""


class RunCommands:
    """The durable command inbox of one session (see the module docstring). :meth:`send` is what every UI calls
    (``latch web``'s command route, ``latch tui``'s key bindings)."""

    def __init__(self, store: EventLog, session_id: str):
        self.store, self.session_id = store, session_id

    def submit(
        self, command: str | None, text: str | None = None, *, receipt: str | None = None, source: str = "web"
    ) -> dict[str, Any]:
        """Queue ``command`` (one of :data:`COMMANDS`; ``steer`` needs ``text``) and return its receipt
        ``{"id", "command", "status", "seq"}`` (``status`` from :func:`latch.host.reducers.commands`:
        ``queued``, ``applied``, ``delivered`` or ``moot``). ``receipt``: the client's id (1-64 of
        ``A-Za-z0-9_-``) so a retry adds nothing; a new one otherwise. ``ValueError`` (one line) for an unknown
        command, an empty steering text, text on another command or a malformed receipt id."""
        if command is None or command not in COMMANDS:
            raise ValueError(f"unknown command {command!r} (known: {', '.join(COMMANDS)})")
        if receipt is None:
            receipt = uuid.uuid4().hex
        elif not isinstance(receipt, str) or not _RECEIPT.match(receipt):
            raise ValueError("command id must be 1-64 characters of A-Z, a-z, 0-9, '_' and '-'")
        if command == "steer":
            if not isinstance(text, str) or not text.strip():
                raise ValueError("steer needs a non-empty text")
            event: Any = SteeringQueued(receipt, text)
        else:
            if text:
                raise ValueError(f"{command} takes no text")
            event = RunCommandQueued(receipt, command, source)
        self.store.append(self.session_id, [PendingEvent(event, f"command:{receipt}")])
        return self.receipt(receipt) or {"id": receipt, "command": command, "status": "queued", "seq": None}

    def send(
        self, command: str | None, text: str | None = None, *, receipt: str | None = None, source: str = "web"
    ) -> dict[str, Any]:
        """A UI's command: :meth:`submit`, except that ``stop`` raises :class:`NoRunningRun` (store unchanged)
        when the session has no running ``latch run`` (:func:`session_liveness`). ``source``: the UI
        (``web``, ``tui``). ``ValueError`` as :meth:`submit`."""
        if command == "stop" and not session_liveness(self.store.events(self.session_id))[0]:
            raise NoRunningRun(f"session {self.session_id} has no running latch run to stop")
        return self.submit(command, text, receipt=receipt, source=source)

    def receipt(self, command_id: str) -> dict[str, Any] | None:
        """The receipt of ``command_id`` (see :meth:`submit`), or ``None`` for an unknown id."""
        for c in R.commands(self.store.events(self.session_id, kinds=_COMMAND_KINDS)):
            if c["id"] == command_id:
                return {"id": c["id"], "command": c["command"], "status": c["status"], "seq": c["seq"]}
        return None

    def pending(self) -> list[RunCommandQueued]:
        """The ``stop`` and ``compact`` commands not applied yet, in order (steering: the steering inbox)."""
        done = {
            s.event.command_id
            for s in self.store.events(self.session_id, kinds=[RunCommandApplied.KIND])
            if isinstance(s.event, RunCommandApplied)
        }
        return [
            s.event
            for s in self.store.events(self.session_id, kinds=[RunCommandQueued.KIND])
            if isinstance(s.event, RunCommandQueued) and s.event.command_id not in done
        ]

    def applied(self, command: RunCommandQueued, run_id: str, result: str = "applied") -> list[int]:
        """Record that run ``run_id`` applied ``command`` (once: a second call adds nothing)."""
        return self.store.append(
            self.session_id,
            [
                PendingEvent(
                    RunCommandApplied(command.command_id, command.command, run_id, result),
                    f"command-applied:{command.command_id}",
                )
            ],
        )


_COMMAND_KINDS = [SteeringQueued.KIND, "steering_delivered", RunCommandQueued.KIND, RunCommandApplied.KIND]
