"""Agent groups: durable tasks, claims, membership and messages in the root session (spec: "Group
coordination durability").

Every group fact is an ordinary event of the root session (:class:`~latch.events.GroupTaskCreated`,
:class:`~latch.events.GroupTaskClaimed`, :class:`~latch.events.GroupTaskCompleted`,
:class:`~latch.events.GroupMemberJoined`, :class:`~latch.events.GroupMessageQueued`); a delivered
message is a :class:`~latch.events.GroupMessageDelivered` in the recipient's own session. Exactly-once
is a property of the log: each such event carries a source ref (``group-task:<id>``,
``group-claim:<id>``, ``group-complete:<id>``, ``group-delivered:<message id>``) that the store keeps
unique per session, so the one write transaction that appends a claim decides its owner (two processes racing
for one task: exactly one gets a seq back) and a restarted deliverer adds nothing already delivered. A claim is a
conditional insert (:class:`~latch.store.ClaimFence`): the same transaction checks that the task is still
unclaimed with its dependencies completed, or for a reclaim that the previous claim's lease has run out. The
write transaction is SQLite's ``BEGIN IMMEDIATE`` or, on PostgreSQL, one under the store's advisory write lock, so
workers on several hosts sharing one database coordinate exactly as processes on one host.

A worker with nothing claimable waits for the group's task changes (:meth:`Group.wait_for_work`,
:mod:`latch.store.wakeups`): ``LISTEN``/``NOTIFY`` on PostgreSQL, polling on SQLite, bounded by the first running
lease's end. :func:`reconnecting` repeats a group call through a server restart.

:meth:`GroupState.replay` is the reference reducer over those events (tasks, dependencies, claims,
membership, pending and delivered messages). :meth:`Group.state` reads the same state from the SQLite group
projection (:data:`GROUP_PROJECTION`, tables ``group_tasks``, ``group_members``, ``group_messages``): a
cache the store updates in the transaction that appends each group event and rebuilds from the log at open
or when it is missing or behind, so a read costs O(group size), not O(root session log), and always equals
``GroupState.replay(Group.events())``. Messages are information only: pending until the recipient is at a safe model
boundary (every earlier tool call of its session has a result), then delivered FIFO in one transaction;
nothing wakes an idle agent.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from typing import Any, TypeVar

from ..events import (
    Event,
    GroupMemberJoined,
    GroupMessageDelivered,
    GroupMessageQueued,
    GroupTaskClaimed,
    GroupTaskCompleted,
    GroupTaskCreated,
    GroupTaskLeaseRenewed,
    PendingEvent,
)
from ..records import dataclass
from ..store import ClaimFence, EventLog, LeaseLost, StoreBusyError, StoreUnavailable, TaskFence
from ..store.projections import PROJECTIONS
from ..store.wakeups import Wakeups, group_wakeups
from .steering import pending_tool_calls

__all__ = [
    "Group",
    "GroupState",
    "GroupTask",
    "GroupError",
    "GROUP_KINDS",
    "TASK_STATUSES",
    "group_view",
    "resolve_group",
    "GROUP_PROJECTION",
    "reconnecting",
    "new_message_id",
]

_T = TypeVar("_T")

GROUP_KINDS = (
    GroupTaskCreated.KIND,
    GroupTaskClaimed.KIND,
    GroupTaskCompleted.KIND,
    GroupTaskLeaseRenewed.KIND,
    GroupMemberJoined.KIND,
    GroupMessageQueued.KIND,
)
"""The kinds of the root session that make up a group (deliveries live in the recipients' sessions)."""
TASK_STATUSES = ("completed", "failed")


class GroupError(ValueError):
    """A group operation is refused (unknown or duplicate task, unmet dependency, not the owner); one line,
    store unchanged."""


@dataclass
class GroupTask:
    """One task: ``owner`` the claiming agent (``None``: unclaimed); ``status`` ``None`` while open;
    ``attempt`` the current claim's number (0 for the first, one more per reclaim: the claim's fencing token,
    :meth:`Group.fence`); ``lease_seconds``
    (``None``: never expires) and ``alive_at`` (Unix seconds of the claim or its owner's last renewal);
    ``session_id`` the session that ran it, once completed."""

    task_id: str
    title: str
    brief: str = ""
    depends_on: tuple[str, ...] = ()
    owner: str | None = None
    status: str | None = None
    summary: str = ""
    attempt: int = 0
    lease_seconds: float | None = None
    alive_at: float | None = None
    session_id: str | None = None

    def lease_expired(self, now: float) -> bool:
        """``True`` when the task is claimed, open, and its lease ran out before ``now`` (Unix seconds)."""
        return (
            self.owner is not None
            and self.status is None
            and self.lease_seconds is not None
            and self.alive_at is not None
            and now > self.alive_at + self.lease_seconds
        )


@dataclass
class GroupState:
    """What a group's events say: ``tasks`` in creation order, ``members`` (agent -> session id or
    ``None``) in join order, ``messages`` (message id -> queued event) in queue order and the ids
    ``delivered``."""

    tasks: dict[str, GroupTask] = field(default_factory=dict)
    members: dict[str, str | None] = field(default_factory=dict)
    messages: dict[str, GroupMessageQueued] = field(default_factory=dict)
    delivered: set[str] = field(default_factory=set)

    @classmethod
    def replay(cls, events: Iterable[Event]) -> GroupState:
        """The state of ``events`` (group kinds in log order; other kinds are ignored). A second claim or
        completion of one task, or a delivery of an unknown message, changes nothing (the log's own
        uniqueness already prevents them)."""
        st = cls()
        for e in events:
            if isinstance(e, GroupTaskCreated):
                st.tasks.setdefault(e.task_id, GroupTask(e.task_id, e.title, e.brief, tuple(e.depends_on)))
            elif isinstance(e, GroupTaskClaimed):
                t = st.tasks.get(e.task_id)
                if (
                    t is not None
                    and t.status is None
                    and ((t.owner is None and e.attempt == 0) or (t.owner is not None and e.attempt == t.attempt + 1))
                ):
                    t.owner, t.attempt, t.lease_seconds, t.alive_at = e.agent, e.attempt, e.lease_seconds, e.at
            elif isinstance(e, GroupTaskLeaseRenewed):
                t = st.tasks.get(e.task_id)
                if t is not None and t.status is None and (t.owner, t.attempt) == (e.agent, e.attempt):
                    t.alive_at = max(t.alive_at or 0.0, e.at)
            elif isinstance(e, GroupTaskCompleted):
                t = st.tasks.get(e.task_id)
                if t is not None and t.status is None and t.owner == e.agent:
                    t.status, t.summary, t.session_id = e.status, e.summary, e.session_id
            elif isinstance(e, GroupMemberJoined):
                if st.members.get(e.agent) is None:
                    st.members[e.agent] = e.session_id
            elif isinstance(e, GroupMessageQueued):
                st.messages.setdefault(e.message_id, e)
            elif isinstance(e, GroupMessageDelivered):
                if e.message_id in st.messages:
                    st.delivered.add(e.message_id)
        return st

    def ready(self) -> list[GroupTask]:
        """Unclaimed tasks whose every dependency completed, in creation order."""
        return [
            t
            for t in self.tasks.values()
            if t.owner is None and all(self.tasks[d].status == "completed" for d in t.depends_on if d in self.tasks)
        ]

    def reclaimable(self, now: float) -> list[GroupTask]:
        """Claimed open tasks whose lease expired before ``now`` (Unix seconds), in creation order."""
        return [t for t in self.tasks.values() if t.lease_expired(now)]

    def pending_for(self, recipient: str) -> list[GroupMessageQueued]:
        """Undelivered messages for ``recipient``, FIFO (queue order)."""
        return [m for m in self.messages.values() if m.recipient == recipient and m.message_id not in self.delivered]

    def summary(self) -> dict[str, Any]:
        """A JSON-ready view (the ``/group`` view and the UI sidebar reduce to this)."""
        return {
            "tasks": [
                {
                    "id": t.task_id,
                    "title": t.title,
                    "depends_on": list(t.depends_on),
                    "owner": t.owner,
                    "status": t.status or ("claimed" if t.owner else "ready" if t in self.ready() else "blocked"),
                }
                for t in self.tasks.values()
            ],
            "members": [{"agent": a, "session": s} for a, s in self.members.items()],
            "messages": {"queued": len(self.messages), "delivered": len(self.delivered)},
        }


def reconnecting(call: Callable[[], _T], *, seconds: float = 60.0, pause: float = 0.2) -> _T:
    """``call()``, called again after ``pause`` seconds while the store is unreachable or busy
    (:class:`~latch.store.StoreUnavailable`: a server restart, a dropped connection, which the store reopens on its
    next call; :class:`~latch.store.StoreBusyError`), for at most ``seconds``; then that error propagates. Only
    for calls that are safe to repeat: every group write is (its source ref or fence makes a repeat add nothing)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except (StoreUnavailable, StoreBusyError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(pause)


def new_message_id() -> str:
    """A fresh random message id (32 hex digits), to fix before the first try of :meth:`Group.send_message`."""
    return uuid.uuid4().hex


def _holds(t: GroupTask, agent: str, now: float) -> bool:
    """Whether ``agent`` holds the open task ``t`` with its lease running at ``now`` (Unix seconds)."""
    return t.owner == agent and t.status is None and not t.lease_expired(now)


GROUP_PROJECTION = PROJECTIONS["group"]
"""The SQLite group projection, built into the store (:mod:`latch.store.projections`)."""


def resolve_group(store: EventLog, name: str, *, by_id: bool = True) -> str:
    """The root session id of the group called ``name``: the newest session whose meta ``group`` is
    ``name`` (``latch run --group NAME TASK`` records it), else (``by_id``) the session of id or id prefix
    ``name``. ``KeyError`` (one line) when there is none."""
    named = [s for s in store.sessions() if (s.meta or {}).get("group") == name]
    if named:
        return str(named[-1].id)
    if by_id:
        try:
            return str(store.session(name).id)
        except KeyError:
            pass
    raise KeyError(
        f"no agent group {name!r} (no session is named so by latch run --group, and no session id starts with it)"
    )


class Group:
    """The group rooted in session ``root_session_id`` of ``store`` (see the module docstring)."""

    def __init__(self, store: EventLog, root_session_id: str):
        self.store, self.root = store, store.session(root_session_id).id

    # ----------------------------------------------------------------- reads
    def events(self) -> list[Event]:
        """The group's events in log order: the root's group kinds and every delivery of its messages."""
        rows = list(self.store.events(self.root, kinds=list(GROUP_KINDS)))
        rows += [
            s
            for s in self.store.events(kinds=[GroupMessageDelivered.KIND])
            if isinstance(s.event, GroupMessageDelivered) and s.event.root_session_id == self.root
        ]
        return [s.event for s in sorted(rows, key=lambda s: s.seq)]

    def state(self) -> GroupState:
        """The group's state from the SQLite projection (brought up to date with the log first); equal to
        :meth:`replayed_state`, read in O(group size). :class:`~latch.store.StoreError` as for any read."""
        tasks, members, messages = self.store.read_projection(
            GROUP_PROJECTION.name,
            [
                (
                    "SELECT task_id, title, brief, depends_on, owner, status, summary, attempt, lease_seconds, alive_at, "
                    "session_id FROM group_tasks WHERE root_session_id = ? ORDER BY pos",
                    (self.root,),
                ),
                ("SELECT agent, session_id FROM group_members WHERE root_session_id = ? ORDER BY pos", (self.root,)),
                (
                    "SELECT message_id, sender, recipient, text, delivered FROM group_messages WHERE root_session_id = ? "
                    "ORDER BY pos",
                    (self.root,),
                ),
            ],
        )
        st = GroupState()
        for tid, title, brief, deps, owner, status, summary, attempt, lease, alive, sid in tasks:
            st.tasks[tid] = GroupTask(
                tid, title, brief, tuple(json.loads(deps)), owner, status, summary, attempt, lease, alive, sid
            )
        st.members = {agent: sid for agent, sid in members}
        for mid, sender, recipient, text, delivered in messages:
            st.messages[mid] = GroupMessageQueued(mid, sender, recipient, text)
            if delivered:
                st.delivered.add(mid)
        return st

    def done(self) -> bool:
        """Whether the group has tasks and every one of them is completed or failed."""
        tasks = self.state().tasks
        return bool(tasks) and all(t.status is not None for t in tasks.values())

    def wakeups(self) -> Wakeups:
        """A waiter for this group's task changes (:mod:`latch.store.wakeups`: ``LISTEN``/``NOTIFY`` on
        PostgreSQL, polling on SQLite). Open it before reading the state it is to wait on; close it after."""
        return group_wakeups(self.store, self.root)

    def wait_for_work(self, wakeups: Wakeups, *, max_wait: float = 5.0, now: float | None = None) -> bool:
        """With nothing claimable: wait on ``wakeups`` until a task changes, the first running lease ends (a
        reclaim may be due; no event says so) or ``max_wait`` seconds pass. ``True`` when woken by a change. A
        queued message never wakes it (information only)."""
        now = time.time() if now is None else now
        ends = [
            t.alive_at + t.lease_seconds - now
            for t in self.state().tasks.values()
            if t.owner is not None and t.status is None and t.lease_seconds is not None and t.alive_at is not None
        ]
        return wakeups.wait(max(0.0, min([max_wait, *(e + 0.01 for e in ends)])))

    def replayed_state(self) -> GroupState:
        """:meth:`GroupState.replay` of :meth:`events` (the reference the projection must equal; O(root log))."""
        return GroupState.replay(self.events())

    # ----------------------------------------------------------------- writes
    def create_task(self, task_id: str, title: str, *, brief: str = "", depends_on: Sequence[str] = ()) -> int:
        """Add a task; returns its seq. :class:`GroupError` for an empty id or title, a duplicate id or an
        unknown dependency."""
        if not task_id.strip() or not title.strip():
            raise GroupError("create_task: the task id and title must not be empty")
        tasks = self.state().tasks
        unknown = [d for d in depends_on if d not in tasks]
        if unknown:
            raise GroupError(f"create_task {task_id!r}: unknown dependency {unknown[0]!r}")
        seqs = self.store.append(
            self.root,
            [PendingEvent(GroupTaskCreated(task_id, title, brief, tuple(depends_on)), f"group-task:{task_id}")],
        )
        if not seqs:
            raise GroupError(f"create_task: task {task_id!r} already exists")
        seq: int = seqs[0]
        return seq

    def join(self, agent: str, session_id: str | None = None) -> None:
        """Record ``agent`` as a member (once; a later join with its session fills it in)."""
        ref = f"group-member:{agent}" + (f":{session_id}" if session_id else "")
        self.store.append(self.root, [PendingEvent(GroupMemberJoined(agent, session_id), ref)])

    def claim_task(
        self, task_id: str, agent: str, *, lease_seconds: float | None = None, now: float | None = None
    ) -> bool:
        """Try to own ``task_id``: ``True`` when this call's transaction appended the claim, or when ``agent``
        already holds the open task with its lease running (its own claim, committed by an earlier try whose reply
        a server restart lost: a repeat is idempotent and appends nothing); ``False`` when another agent had it.
        With ``lease_seconds`` the claim expires that long after ``now`` (Unix seconds, default the clock) or its
        last :meth:`renew_lease`. :class:`GroupError` for an unknown task or one whose dependencies are open."""
        st = self.state()
        t = st.tasks.get(task_id)
        if t is None:
            raise GroupError(f"claim_task: no task {task_id!r}")
        if _holds(t, agent, time.time() if now is None else now):
            return True
        if t.owner is None and t not in st.ready():
            raise GroupError(f"claim_task {task_id!r}: its dependencies have not completed")
        at = (time.time() if now is None else now) if lease_seconds is not None else None
        try:  # a conditional insert: unclaimed with its dependencies completed, checked in the claim's transaction
            return bool(
                self.store.append(
                    self.root,
                    [PendingEvent(GroupTaskClaimed(task_id, agent, 0, lease_seconds, at), f"group-claim:{task_id}")],
                    fence=ClaimFence(self.root, task_id, agent, 0),
                )
            )
        except LeaseLost:
            return False

    def reclaim_task(self, task_id: str, agent: str, *, lease_seconds: float, now: float | None = None) -> bool:
        """Take over ``task_id`` whose owner's lease expired (a killed worker): claim attempt ``n + 1``, decided
        like a first claim by the transaction that appends ``group-claim:<task_id>:<n + 1>`` (two reclaimers:
        one owner). ``True`` also when ``agent`` already holds the open task with its lease running (its own
        reclaim, repeated after a lost reply: nothing appended). ``False`` when the task is done, another agent's
        lease is still running, or another agent won."""
        now = time.time() if now is None else now
        t = self.state().tasks.get(task_id)
        if t is None:
            raise GroupError(f"claim_task: no task {task_id!r}")
        if _holds(t, agent, now):
            return True
        if not t.lease_expired(now):
            return False
        n = t.attempt + 1
        try:  # the lease's end is checked again in the claim's own transaction (its owner may have renewed it)
            return bool(
                self.store.append(
                    self.root,
                    [
                        PendingEvent(
                            GroupTaskClaimed(task_id, agent, n, lease_seconds, now), f"group-claim:{task_id}:{n}"
                        )
                    ],
                    fence=ClaimFence(self.root, task_id, agent, n, now),
                )
            )
        except LeaseLost:
            return False

    def fence(self, task_id: str, agent: str) -> TaskFence:
        """The fence of ``agent``'s current claim of ``task_id`` (:class:`~latch.store.TaskFence`; its token is the
        claim's attempt): every write made for the task carries it (``store.fenced(fence)``), so none commits once
        another agent reclaimed the task. :class:`GroupError` when ``agent`` does not own the open task."""
        t = self.state().tasks.get(task_id)
        if t is None or t.owner != agent or t.status is not None:
            raise GroupError(f"fence {task_id!r}: {agent!r} does not hold an open claim of it")
        return TaskFence(self.root, task_id, agent, t.attempt)

    def renew_lease(self, task_id: str, agent: str, *, token: int | None = None, now: float | None = None) -> bool:
        """Record that ``agent`` still works on its claim ``token`` (default: its current claim) of ``task_id``
        (its lease runs on from ``now``). ``False`` (nothing appended) when ``agent`` no longer owns the open task
        at that token, checked inside the append's transaction."""
        t = self.state().tasks.get(task_id)
        if t is None or t.owner != agent or t.status is not None or token not in (None, t.attempt):
            return False
        at = time.time() if now is None else now
        try:
            self.store.append(
                self.root,
                [GroupTaskLeaseRenewed(task_id, agent, t.attempt, at)],
                fence=TaskFence(self.root, task_id, agent, t.attempt),
            )
        except LeaseLost:
            return False
        return True

    def claim_next(
        self, agent: str, *, lease_seconds: float | None = None, now: float | None = None
    ) -> GroupTask | None:
        """The first open task ``agent`` already holds with its lease running (its own claim, when a server
        restart lost the reply to the call that made it: a repeat returns that claim and appends nothing), else
        claim the first ready task another agent does not win first, else (with ``lease_seconds``) reclaim the
        first task whose lease expired; ``None`` when nothing is claimable."""
        while True:
            st = self.state()
            held = [t for t in st.tasks.values() if _holds(t, agent, time.time() if now is None else now)]
            if held:
                return held[0]
            ready = st.ready()
            expired = st.reclaimable(time.time() if now is None else now) if lease_seconds is not None else []
            if not ready and not expired:
                return None
            for t in ready:
                if self.claim_task(t.task_id, agent, lease_seconds=lease_seconds, now=now):
                    return self.state().tasks[t.task_id]
            for t in expired:
                if self.reclaim_task(t.task_id, agent, lease_seconds=lease_seconds or 0.0, now=now):
                    return self.state().tasks[t.task_id]

    def complete_task(
        self,
        task_id: str,
        agent: str,
        *,
        status: str = "completed",
        summary: str = "",
        session_id: str | None = None,
        token: int | None = None,
    ) -> bool:
        """Mark ``agent``'s task done (``status`` in :data:`TASK_STATUSES`; ``session_id`` the session that
        ran it), fenced by its claim ``token`` (default: the current claim's), checked inside the append's
        transaction; ``False`` when it already was. :class:`GroupError` for an unknown task, another owner (also
        one that reclaimed the task after this call read it), a stale ``token`` or a bad status."""
        if status not in TASK_STATUSES:
            raise GroupError(f"complete_task: status must be one of {', '.join(TASK_STATUSES)}, got {status!r}")
        t = self.state().tasks.get(task_id)
        if t is None:
            raise GroupError(f"complete_task: no task {task_id!r}")
        if t.owner != agent:
            raise GroupError(f"complete_task {task_id!r}: owned by {t.owner!r}, not {agent!r}")
        if t.status is not None:
            return False
        fence = TaskFence(self.root, task_id, agent, t.attempt if token is None else token)
        try:
            return bool(
                self.store.append(
                    self.root,
                    [
                        PendingEvent(
                            GroupTaskCompleted(task_id, agent, status, summary, session_id), f"group-complete:{task_id}"
                        )
                    ],
                    fence=fence,
                )
            )
        except LeaseLost as exc:
            now = self.state().tasks[task_id]
            if (now.owner, now.attempt) == (agent, fence.token) and now.status is not None:
                return False  # completed meanwhile by this very claim (a retry)
            raise GroupError(f"complete_task {task_id!r}: {exc}") from None

    def send_message(self, sender: str, recipient: str, text: str, *, message_id: str | None = None) -> str:
        """Queue ``text`` for ``recipient``; returns its message id: ``message_id``, or a new random one when
        ``None``. A message id is queued at most once (its source ref ``group-message:<id>``): a repeat of the same
        message after a lost reply appends nothing and returns the id, so a caller that fixes the id before the
        first try (:func:`new_message_id`) can repeat the call through a server restart (:func:`reconnecting`) and
        the recipient still gets it once, in send order. :class:`GroupError` for empty text, an empty id, or an id
        already queued with another sender, recipient or text."""
        if not text.strip():
            raise GroupError("send_message: the text is empty")
        mid = new_message_id() if message_id is None else message_id
        if not mid.strip():
            raise GroupError("send_message: the message id is empty")
        sent = GroupMessageQueued(mid, sender, recipient, text)
        if not self.store.append(self.root, [PendingEvent(sent, f"group-message:{mid}")]):
            queued = self.state().messages.get(mid)
            if queued is None or (queued.sender, queued.recipient, queued.text) != (sender, recipient, text):
                raise GroupError(f"send_message: message id {mid!r} is already queued for another message")
        return mid

    def deliver(self, recipient: str, session_id: str) -> list[int]:
        """Deliver ``recipient``'s pending messages into its session ``session_id`` if that session is at a
        safe boundary: one :class:`~latch.events.GroupMessageDelivered` per message, FIFO, all in one
        transaction. Returns the new seqs (``[]`` when nothing is due, a call is still open, or another
        process delivered them first)."""
        if pending_tool_calls(self.store, session_id):
            return []
        due = self.state().pending_for(recipient)
        if not due:
            return []
        seqs: list[int] = self.store.append(
            session_id,
            [
                PendingEvent(
                    GroupMessageDelivered(
                        f"[message from {m.sender}] {m.text}",
                        message_id=m.message_id,
                        sender=m.sender,
                        recipient=recipient,
                        root_session_id=self.root,
                    ),
                    f"group-delivered:{m.message_id}",
                )
                for m in due
            ],
        )
        return seqs


def group_view(store: EventLog, session_id: str) -> dict[str, Any] | None:
    """The agent group a session belongs to, for the UI sidebar (``latch web``, ``latch tui``): ``{"root",
    "tasks": [{"id", "title", "depends_on", "owner", "status"}], "members": [{"agent", "session"}],
    "messages": {"queued", "delivered"}}`` (:meth:`GroupState.summary`, the reducer ``latch group`` prints), or
    ``None`` when the session is neither a group's root (it holds group events) nor a member (a
    ``group_member_joined`` names it)."""
    root = None
    if any(True for _ in store.events(session_id, kinds=list(GROUP_KINDS), limit=1)):
        root = session_id
    else:
        for s in store.events(kinds=[GroupMemberJoined.KIND]):
            if isinstance(s.event, GroupMemberJoined) and s.event.session_id == session_id:
                root = s.session_id
    if root is None:
        return None
    return {"root": root, **Group(store, root).state().summary()}
