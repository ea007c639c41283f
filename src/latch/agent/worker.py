"""Group workers: ``latch run --group NAME --worker`` (spec: "Group coordination durability",
"Port boundary").

A worker is one process that joins the group rooted in session ``root`` as member ``agent``, then, one
at a time, claims a ready task (every dependency completed) or reclaims a task whose owner's lease ran
out (a killed worker), runs it as a child agent session of the root and completes it with that child's
:class:`~latch.events.AgentReport`; it returns when nothing is claimable.

The task's child is the session of :func:`latch.agent.children.child_key` ``(root, "group-task:<id>")``:
one session per task, whoever runs it. The first claimer stores its :class:`~latch.events.AgentProfile`
(model, engine, config, tools, the task's brief) with :func:`~latch.agent.children.create_child`; every
run, first or reclaimed, builds the child's engine from that durable profile through the supervisor's
child policy (:meth:`latch.agent.handoff.ChildAgents.run_child`, the path of ``spawn_agent`` and resume), so
a reclaimed task continues from its log (calls the killed worker left open are closed as interrupted,
never re-run) and a child that already reported is completed with that report without a new request:
no task runs twice to completion.

While a task runs, a heartbeat thread renews the claim's lease every third of ``lease_seconds``
(:meth:`latch.agent.group.Group.renew_lease`); a SIGKILLed worker stops renewing, and a later worker may
reclaim the task ``lease_seconds`` after the last renewal.

Leases are fenced. Every write the worker makes for a task (the child's creation, its messages, tool calls and
results, its engine's kernel records and processes, its report, the root's lifecycle event, the renewals and the
completion) goes through the store fenced by the claim (:meth:`latch.agent.group.Group.fence`; the fencing token
is the claim's attempt), checked inside the write's own transaction. A worker that was paused past its lease (a
SIGSTOP, a suspended machine) and whose task another worker reclaimed meanwhile therefore commits nothing more
for it. Its heartbeat, finding the claim taken over, kills the child's running processes and makes the child's
loop stop before its next request or tool call (:class:`latch.host.lease.LeaseGuard`). The run of that task
ends with ``lost`` set and no report of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from ..events import AgentProfile, AgentReport
from ..host.lease import LeaseGuard
from ..records import dataclass
from ..store import LeaseLost, StoreError
from .children import child_key, child_profile, child_report, create_child, find_child
from .group import Group, GroupError, GroupTask, reconnecting
from .handoff import engine_name

__all__ = ["DEFAULT_LEASE_SECONDS", "TaskRun", "task_call_id", "run_worker"]

DEFAULT_LEASE_SECONDS = 300.0
"""How long (seconds) a claim outlives its owner's last heartbeat before another worker may reclaim it."""


def task_call_id(task_id: str) -> str:
    """The ``call_id`` of a group task's child profile (its child is ``child_key(root, task_call_id(id))``)."""
    return f"group-task:{task_id}"


@dataclass(frozen=True)
class TaskRun:
    """What a worker did with one task: its id, the child ``session_id``, the ``report`` (``None`` when the lease
    was lost first), ``reclaimed`` (an earlier owner's lease had run out), ``completed`` (this worker's completion
    was recorded) and ``lost`` (another worker took the task over while this one ran it: the one-line reason)."""

    task_id: str
    session_id: str
    report: AgentReport | None
    reclaimed: bool
    completed: bool
    lost: str | None = None


class _Heartbeat:
    def __init__(self, group: Group, task: GroupTask, agent: str, every: float, guard: LeaseGuard):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(group, task, agent, every, guard), daemon=True)
        self._thread.start()

    def _beat(self, group: Group, task: GroupTask, agent: str, every: float, guard: LeaseGuard) -> None:
        while not self._stop.wait(every):
            try:
                renewed = group.renew_lease(task.task_id, agent, token=task.attempt)
            except StoreError:  # busy: the next beat tries again (the lease has room for two misses)
                continue
            if not renewed:  # the claim is no longer ours: stop the child before anything more runs
                if not self._stop.is_set():
                    guard.lose(_holder(group, task, agent))
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _holder(group: Group, task: GroupTask, agent: str) -> str:
    """Why ``agent``'s claim of ``task`` is no longer current, in a few words."""
    try:
        now = group.state().tasks.get(task.task_id)
    except StoreError:
        return "the claim could not be renewed"
    if now is not None and (now.owner, now.attempt) != (agent, task.attempt):
        return f"taken over by {now.owner!r} (token {now.attempt})"
    return "the claim ended"


def run_worker(
    group: Group,
    agent: str,
    root_loop: Any,
    *,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    on_task: Callable[[GroupTask], None] | None = None,
    on_done: Callable[[TaskRun], None] | None = None,
    wait: bool = False,
    max_wait: float = 5.0,
) -> list[TaskRun]:
    """Run group tasks as ``agent`` until nothing is claimable (see the module docstring); the runs in order.

    With ``wait``, a worker with nothing claimable whose group has open tasks (or none yet) waits for the group's
    task changes instead (:meth:`~latch.agent.group.Group.wait_for_work`: ``LISTEN``/``NOTIFY`` on PostgreSQL,
    polling on SQLite, at most ``max_wait`` seconds at a time and never past the first running lease's end), and
    returns once every task is done. The group's reads and its claims and completions are repeated through a
    server restart (:func:`~latch.agent.group.reconnecting`); a claim whose reply the restart lost is found again
    as this worker's own by the repeated call, which runs the task under that claim (no second claim).

    ``root_loop`` is the :class:`~latch.agent.loop.AgentLoop` of the group's root session, built with the
    supervisor (it is never run: it lends its provider, tools, policy and child policy to each task's
    child). ``lease_seconds`` (> 0) is each claim's lease. ``on_task`` is called with each task claimed,
    ``on_done`` with each run. Raises :class:`~latch.agent.supervisor.ChildPolicyError` when the child
    policy cannot build a task's child (the claim stays; its lease lets another worker take it) and
    ``ValueError`` for a lease that is not positive."""
    if not lease_seconds > 0:
        raise ValueError(f"the lease must be a positive number of seconds, got {lease_seconds!r}")
    root = group.root
    factory = root_loop.supervisor.require_child_factory(f"a task of the group rooted in {root}")  # before any write
    reconnecting(lambda: group.join(agent))
    wakeups = reconnecting(group.wakeups) if wait else None  # listening before the first read: nothing is missed
    try:
        return _work(group, agent, root_loop, factory, lease_seconds, on_task, on_done, wakeups, max_wait)
    finally:
        if wakeups is not None:
            wakeups.close()


def _run_task(
    store: Any, fenced: Any, root: str, task: GroupTask, root_loop: Any, factory: Any, guard: LeaseGuard
) -> AgentReport | None:
    """Run ``task``'s child to its report: created from a durable profile by its first claimer, continued from its
    log by a reclaimer (or after a reconnect), not run again once it reported."""
    call_id = task_call_id(task.task_id)
    child = store.session_id_for(child_key(root, call_id))
    found = find_child(store, root, call_id)
    spawned = found is None
    if found is None:
        profile = AgentProfile(
            parent_session_id=root,
            call_id=call_id,
            brief=task.brief or task.title,
            model=root_loop.setup.model,
            engine=engine_name(factory),
            config=dict(root_loop.setup.config),
            tools=tuple(t.NAME for t in root_loop.tools if t.NAME != "spawn_agent"),
        )
        found = create_child(fenced, root, profile)
    assert found == child and child_profile(store, child)
    report = child_report(store, child)
    if report is None:  # a reclaimed child continues from its log; a reported one is not run again
        report = root_loop.children.run_child(child, spawned, store=fenced, guard=guard)
    return report


def _work(
    group: Group,
    agent: str,
    root_loop: Any,
    factory: Any,
    lease_seconds: float,
    on_task: Callable[[GroupTask], None] | None,
    on_done: Callable[[TaskRun], None] | None,
    wakeups: Any,
    max_wait: float,
) -> list[TaskRun]:
    store, root = group.store, group.root
    runs: list[TaskRun] = []
    while True:
        task = reconnecting(lambda: group.claim_next(agent, lease_seconds=lease_seconds))
        if task is None:
            if wakeups is None or reconnecting(group.done):
                return runs
            reconnecting(lambda: group.wait_for_work(wakeups, max_wait=max_wait))
            continue
        if on_task is not None:
            on_task(task)
        fence = reconnecting(partial(group.fence, task.task_id, agent))  # every write for it carries the token
        fenced = store.fenced(fence)
        guard = LeaseGuard(f"the lease of task {task.task_id!r} (token {fence.token})")
        beat = _Heartbeat(group, task, agent, lease_seconds / 3, guard)
        child = store.session_id_for(child_key(root, task_call_id(task.task_id)))
        report: AgentReport | None = None
        try:  # a server restart mid-task: the child continues from its log once the store reconnects
            report = reconnecting(partial(_run_task, store, fenced, root, task, root_loop, factory, guard))
        except LeaseLost as exc:  # taken over while it ran: nothing more was written for it
            guard.lose(str(exc))
            lost: str | None = str(exc)
        else:
            lost = None
        finally:
            beat.stop()
        done = False
        if report is not None:
            try:
                done = reconnecting(
                    partial(
                        group.complete_task,
                        task.task_id,
                        agent,
                        status="completed" if report.status == "completed" else "failed",
                        summary=report.summary,
                        session_id=child,
                        token=fence.token,
                    )
                )
            except GroupError as exc:  # our lease ran out at the end and another worker took the task over
                lost = str(exc)
        run = TaskRun(task.task_id, child, report, task.attempt > 0, done, lost)
        runs.append(run)
        if on_done is not None:
            on_done(run)
