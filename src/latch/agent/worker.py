"""Group workers: ``latch run --group NAME --worker`` (issue 14 item 5; spec: "Group coordination durability",
"Port boundary").

A worker is one process that joins the group rooted in session ``root`` as member ``agent``, then, one
at a time, claims a ready task (every dependency completed) or reclaims a task whose owner's lease ran
out (a killed worker), runs it as a child agent session of the root and completes it with that child's
:class:`~latch.events.AgentReport`; it returns when nothing is claimable.

The task's child is the session of :func:`latch.agent.children.child_key` ``(root, "group-task:<id>")``:
one session per task, whoever runs it. The first claimer stores its :class:`~latch.events.AgentProfile`
(model, engine, config, tools, the task's brief) with :func:`~latch.agent.children.create_child`; every
run, first or reclaimed, builds the child's engine from that durable profile through the supervisor's
child policy (:meth:`latch.agent.loop.AgentLoop._run_child`, the path of ``spawn_agent`` and resume), so
a reclaimed task continues from its log (calls the killed worker left open are closed as interrupted,
never re-run) and a child that already reported is completed with that report without a new request:
no task runs twice to completion.

While a task runs, a heartbeat thread renews the claim's lease every third of ``lease_seconds``
(:meth:`latch.agent.group.Group.renew_lease`); a SIGKILLed worker stops renewing, and a later worker may
reclaim the task ``lease_seconds`` after the last renewal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..events import AgentProfile, AgentReport
from .children import child_key, child_profile, child_report, create_child, find_child
from .group import Group, GroupError, GroupTask
from .loop import engine_name

__all__ = ["DEFAULT_LEASE_SECONDS", "TaskRun", "task_call_id", "run_worker"]

DEFAULT_LEASE_SECONDS = 300.0
"""How long (seconds) a claim outlives its owner's last heartbeat before another worker may reclaim it."""


def task_call_id(task_id: str) -> str:
    """The ``call_id`` of a group task's child profile (its child is ``child_key(root, task_call_id(id))``)."""
    return f"group-task:{task_id}"


@dataclass(frozen=True)
class TaskRun:
    """What a worker did with one task: its id, the child ``session_id``, the ``report``, ``reclaimed``
    (an earlier owner's lease had run out) and ``completed`` (this worker's completion was recorded)."""

    task_id: str
    session_id: str
    report: AgentReport
    reclaimed: bool
    completed: bool


class _Heartbeat:
    def __init__(self, group: Group, task_id: str, agent: str, every: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(group, task_id, agent, every), daemon=True)
        self._thread.start()

    def _beat(self, group: Group, task_id: str, agent: str, every: float) -> None:
        while not self._stop.wait(every):
            if not group.renew_lease(task_id, agent):
                return  # the claim is no longer ours (completed or reclaimed)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_worker(group: Group, agent: str, root_loop: Any, *, lease_seconds: float = DEFAULT_LEASE_SECONDS,
               on_task: Callable[[GroupTask], None] | None = None,
               on_done: Callable[[TaskRun], None] | None = None) -> list[TaskRun]:
    """Run group tasks as ``agent`` until nothing is claimable (see the module docstring); the runs in order.

    ``root_loop`` is the :class:`~latch.agent.loop.AgentLoop` of the group's root session, built with the
    supervisor (it is never run: it lends its provider, tools, policy and child policy to each task's
    child). ``lease_seconds`` (> 0) is each claim's lease. ``on_task`` is called with each task claimed,
    ``on_done`` with each run. Raises :class:`~latch.agent.supervisor.ChildPolicyError` when the child
    policy cannot build a task's child (the claim stays; its lease lets another worker take it) and
    ``ValueError`` for a lease that is not positive."""
    if not lease_seconds > 0:
        raise ValueError(f"the lease must be a positive number of seconds, got {lease_seconds!r}")
    store, root = group.store, group.root
    factory = root_loop.supervisor.require_child_factory(f"a task of the group rooted in {root}")  # before any write
    group.join(agent)
    runs: list[TaskRun] = []
    while True:
        task = group.claim_next(agent, lease_seconds=lease_seconds)
        if task is None:
            return runs
        if on_task is not None:
            on_task(task)
        beat = _Heartbeat(group, task.task_id, agent, lease_seconds / 3)
        try:
            call_id = task_call_id(task.task_id)
            child = find_child(store, root, call_id)
            spawned = child is None
            if child is None:
                profile = AgentProfile(parent_session_id=root, call_id=call_id, brief=task.brief or task.title,
                                       model=root_loop.setup.model, engine=engine_name(factory),
                                       config=dict(root_loop.setup.config),
                                       tools=tuple(t.NAME for t in root_loop.tools if t.NAME != "spawn_agent"))
                child = create_child(store, root, profile)
            assert child == store.session_id_for(child_key(root, call_id)) and child_profile(store, child)
            report = child_report(store, child)
            if report is None:  # a reclaimed child continues from its log; a reported one is not run again
                report = root_loop._run_child(child, spawned)
        finally:
            beat.stop()
        try:
            done = group.complete_task(task.task_id, agent, status="completed" if report.status == "completed"
                                       else "failed", summary=report.summary, session_id=child)
        except GroupError:  # our lease ran out mid-run and another worker took the task over
            done = False
        run = TaskRun(task.task_id, child, report, task.attempt > 0, done)
        runs.append(run)
        if on_done is not None:
            on_done(run)
