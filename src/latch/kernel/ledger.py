"""The ledger: every session's derived facts, and the workspace-wide mutation and disproof records.

One :class:`Ledger` per store *object* scans the log once and then only the events
appended since its ``seq`` watermark. Ledgers live in a :class:`KernelCache`, an
object its owner passes to :func:`ledger_for` and
:func:`~latch.kernel.state.canonical_state` (the host keeps one per plugin
manager, :func:`latch.host.kernel.kernel_cache`); a cache keys ledgers by store object,
never by database path, so two stores opened on one path, or a store deleted and
recreated at the same path, never share derived state. A view as of seq ``N``
derives the log only through ``N``. For each session it keeps the facts derived
from its events (see :mod:`latch.kernel.derive`) at their position ``(seq, n)``
(``n`` orders several facts of one event) until the session's reducer has applied
them (:meth:`Ledger.applied`; derived again from the log when an earlier view
needs them), so what it holds does not grow with the history. For each
*workspace* (sessions sharing ``sessions.workspace``; a session without one
belongs to its parent's, else to itself) it keeps the mutations, which define
the workspace generation, and the disproofs, which every session of the
workspace and every descendant of the recording session sees.

Tombstoned sessions stay in the ledger: their mutations still advance the
generation and their disproofs still count (spec: "Sessions & continuity").
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..records import dataclass
from .derive import (
    DerivationContext,
    DerivationRule,
    SessionDeriver,
    ToolFailure,
    ToolSuccess,
    UserInstruction,
    builtin_rules,
    check_rules,
    derives_nothing,
)
from .events import FileObservation, Mutation, StateUpdate, ValidationEvidence

if TYPE_CHECKING:
    from ..store import EventLog, SessionInfo, StoredEvent

__all__ = ["Ledger", "Disproof", "Workspace", "Pos", "KernelCache", "ledger_for", "clear_cache", "END", "APPLIED_HELD"]

END = 1 << 62
"""Sub-position after every fact of an event: ``(seq, END)`` is "after everything at ``seq``"."""

Pos = tuple[int, int]

APPLIED_HELD = 1024
"""Facts a session's reducer has applied that the ledger holds before letting them go (:meth:`Ledger.applied`)."""

DERIVE_PAGE = 4096
"""Events :meth:`Ledger.derived` reads at a time."""


@dataclass
class Disproof:
    """A durable disproof: ``claim`` is not a real problem because ``reason``.

    ``files`` are workspace-relative; ``stale_pos`` is the first mutation that
    touched one of them (or an unknown set of files) after it was recorded.
    """

    pos: Pos
    session_id: str
    claim: str
    reason: str
    evidence: tuple[str, ...]
    files: tuple[str, ...]
    generation: int
    stale_pos: Pos | None = None
    stale_path: str | None = None

    @property
    def id(self) -> str:
        return f"X{self.pos[0]}"


@dataclass
class Workspace:
    """Mutations and disproofs of one workspace, in log order."""

    key: str
    mutations: list[Pos] = field(default_factory=list)
    by_path: dict[str, list[Pos]] = field(default_factory=dict)
    pathless: list[Pos] = field(default_factory=list)
    disproofs: list[Disproof] = field(default_factory=list)
    open_disproofs: list[Disproof] = field(default_factory=list)  # not stale yet
    staled: list[Pos] = field(default_factory=list)  # where each stale disproof went stale, in log order
    pending_starts: list[int] = field(default_factory=list)  # seq of each possibly-mutating call, in log order
    pending_ends: list[int] = field(default_factory=list)  # seq of the result of each one resolved, sorted

    def generation(self, pos: Pos) -> int:
        """The generation at ``pos``: mutations strictly before it (``(seq, END)``: through ``seq``)."""
        return bisect_left(self.mutations, pos)

    def pending(self, until: int) -> int:
        """How many possibly-mutating tool calls had no result yet as of seq ``until`` (called at or before
        it, resolved after it). The *current* generation counts each once (spec: possible external mutations
        commit before execution), so a crash mid-call can only over-count; facts keep :meth:`generation`
        (a validation that ran while a mutation was pending is never current after it lands)."""
        return bisect_right(self.pending_starts, until) - bisect_right(self.pending_ends, until)

    def changed_after(self, path: str, pos: Pos, until: Pos) -> Pos | None:
        """The first mutation in ``(pos, until]`` touching ``path``, else ``None``.

        A mutation of unknown files touches every workspace-relative path (never an absolute one,
        which lies outside the workspace)."""
        best: Pos | None = None
        for positions in (self.by_path.get(path, ()), () if path.startswith("/") else self.pathless):
            i = bisect_right(positions, pos)
            if i < len(positions) and positions[i] <= until and (best is None or positions[i] < best):
                best = positions[i]
        return best

    def add_mutation(self, pos: Pos, mutation: Mutation) -> None:
        self.mutations.append(pos)
        if mutation.paths:
            for p in mutation.paths:
                self.by_path.setdefault(p, []).append(pos)
        else:
            self.pathless.append(pos)
        still = []
        for d in self.open_disproofs:
            inside = any(not p.startswith("/") for p in d.files)
            if not mutation.paths and inside or set(d.files) & set(mutation.paths):
                d.stale_pos = pos
                d.stale_path = next((p for p in d.files if p in mutation.paths), None)
                self.staled.append(pos)
            else:
                still.append(d)
        self.open_disproofs = still

    def add_disproof(self, d: Disproof) -> None:
        self.disproofs.append(d)
        self.open_disproofs.append(d)


class Ledger:
    """Derived facts of one store, extended incrementally (thread-safe); ``rules`` are tried in order."""

    def __init__(self, rules: Sequence[DerivationRule] | None = None) -> None:
        self.lock = threading.RLock()
        self.rules = builtin_rules() if rules is None else tuple(rules)
        self._reset()

    def _reset(self) -> None:
        self.watermark = 0
        self.watermark_session: str | None = None
        self.facts: dict[str, list[tuple[Pos, Any]]] = {}
        self.info: dict[str, SessionInfo] = {}
        self.workspace_of: dict[str, str] = {}
        self.workspaces: dict[str, Workspace] = {}
        self.workspaces_of: dict[str, Workspace] = {}  # session id -> its workspace (:meth:`workspace`), kept
        self.derivers: dict[str, SessionDeriver] = {}
        self.reducers: dict[str, Any] = {}
        self.dropped: dict[str, int] = {}  # per session: facts its reducer applied and the ledger let go

    # ----------------------------------------------------------------- sessions
    def _session(self, store: EventLog, sid: str) -> SessionInfo:
        info = self.info.get(sid)
        if info is None:
            info = self.info[sid] = store.session(sid)
        return info

    def workspace_key(self, store: EventLog, sid: str) -> str:
        key = self.workspace_of.get(sid)
        if key is None:
            info = self._session(store, sid)
            if info.workspace:
                key = "ws:" + info.workspace.rstrip("/")
            elif info.parent_id:
                key = self.workspace_key(store, info.parent_id)
            else:
                key = "session:" + sid
            self.workspace_of[sid] = key
        return key

    def workspace(self, store: EventLog, sid: str) -> Workspace:
        key = self.workspace_key(store, sid)
        ws = self.workspaces.get(key)
        if ws is None:
            ws = self.workspaces[key] = Workspace(key)
        return ws

    def ancestors(self, store: EventLog, sid: str) -> list[str]:
        out: list[str] = []
        parent = self._session(store, sid).parent_id
        while parent and parent not in out:
            out.append(parent)
            parent = self._session(store, parent).parent_id
        return out

    # ------------------------------------------------------------------ refresh
    def refresh(self, store: EventLog, until: int | None = None) -> None:
        """Derive the events appended since the watermark, through global seq ``until`` (``None``: the newest
        event), and no further: a view as of ``until`` derives only what it shows (rebuild if the log was
        replaced)."""
        with self.lock:
            top = store.max_seq()
            if top < self.watermark or not self._same_log(store):
                self._reset()
            end = top if until is None else min(top, until)
            if end <= self.watermark:
                return
            last = None
            derivers = self.derivers
            try:
                for ev in store.events(after_seq=self.watermark, until_seq=end):
                    # an event that derives nothing, of a session already derived, is skipped
                    if ev.session_id not in derivers or not derives_nothing(type(ev.event)):
                        self._derive(store, ev)
                    last = ev
            finally:  # through the last event derived
                if last is not None:
                    self.watermark, self.watermark_session = last.seq, last.session_id

    def _same_log(self, store: EventLog) -> bool:
        if not self.watermark:
            return True
        try:
            return store.get(self.watermark).session_id == self.watermark_session
        except KeyError:
            return False

    def _new_deriver(self, store: EventLog, sid: str) -> SessionDeriver:
        info = self._session(store, sid)
        ws_key = self.workspace_key(store, sid)
        workspace = info.workspace or (ws_key[3:] if ws_key.startswith("ws:") else None)
        return SessionDeriver(DerivationContext(sid, info.format, workspace), self.rules)

    def _derive(self, store: EventLog, ev: StoredEvent) -> None:
        sid = ev.session_id
        deriver = self.derivers.get(sid)
        if deriver is None:
            deriver = self.derivers[sid] = self._new_deriver(store, sid)
        facts = deriver.feed(ev.event)
        if not facts and not (deriver.opened or deriver.closed):
            return
        ws = self.workspaces_of.get(sid)
        if ws is None:
            ws = self.workspaces_of[sid] = self.workspace(store, sid)
        seq = ev.seq
        if deriver.opened or deriver.closed:
            ws.pending_starts.extend([seq] * deriver.opened)
            for _ in range(deriver.closed):
                insort(ws.pending_ends, seq)
        if not facts:
            return
        bucket = self.facts.get(sid)
        if bucket is None:
            bucket = self.facts[sid] = []
        for n, fact in enumerate(facts):
            pos = (seq, n)
            bucket.append((pos, fact))
            kind = type(fact)
            if kind in _PLAIN_FACTS:
                continue
            if isinstance(fact, Mutation):
                ws.add_mutation(pos, fact)
            elif isinstance(fact, StateUpdate) and fact.tool == "record_disproof":
                args = fact.arguments
                ws.add_disproof(
                    Disproof(
                        pos=pos,
                        session_id=sid,
                        claim=str(args.get("claim", "")),
                        reason=str(args.get("reason", "")),
                        evidence=tuple(str(x) for x in args.get("evidence", ()) or ()),
                        files=tuple(deriver.ctx.path(str(x)) for x in args.get("files", ()) or ()),
                        generation=ws.generation(pos),
                    )
                )

    # -------------------------------------------------------------------- reads
    def session_facts(self, sid: str, store: EventLog | None = None) -> list[tuple[Pos, Any]]:
        """Every fact of ``sid`` through the watermark, ``((seq, n), fact)`` in log order.

        Facts the session's reducer has applied are let go (:meth:`applied`); when some were, they are derived
        again from ``store``'s log (the same facts: derivation is a pure function of the session's events).
        ``ValueError`` when some were let go and no ``store`` is given."""
        with self.lock:
            if self.dropped.get(sid):
                if store is None:
                    raise ValueError(f"session {sid}: applied facts were let go; pass the store to derive them again")
                self.restore(store, sid)
            return self.facts.get(sid, [])

    def held_facts(self, sid: str) -> tuple[int, list[tuple[Pos, Any]]]:
        """``(first, facts)``: the facts of ``sid`` held in memory, ``first`` the number of facts before them
        (let go after its reducer applied them)."""
        return self.dropped.get(sid, 0), self.facts.get(sid, [])

    def applied(self, sid: str, count: int) -> None:
        """The reducer of ``sid`` has applied its first ``count`` facts: once :data:`APPLIED_HELD` or more are held,
        let them go, so what the ledger holds per session is bounded by what its views have not applied yet, not by
        the history (a reducer rebuilt for an earlier seq derives them again, :meth:`restore`)."""
        first = self.dropped.get(sid, 0)
        done = count - first
        if done >= APPLIED_HELD:
            del self.facts[sid][:done]
            self.dropped[sid] = count

    def restore(self, store: EventLog, sid: str) -> None:
        """Derive every fact of ``sid`` through the watermark again from the log and hold them all (after
        :meth:`applied` let some go). O(the session's history): a view earlier than the reducer's is rebuilt."""
        with self.lock:
            if not self.dropped.get(sid):
                return
            deriver = self._new_deriver(store, sid)
            facts: list[tuple[Pos, Any]] = []
            for ev in store.events(sid, until_seq=self.watermark):
                facts.extend(((ev.seq, n), fact) for n, fact in enumerate(deriver.feed(ev.event)))
            self.facts[sid] = facts
            self.dropped[sid] = 0

    def derived(self, store: EventLog, sid: str, until: int) -> Iterator[tuple[Pos, Any]]:
        """Every fact of ``sid`` with ``seq <= until`` (at most the watermark), ``((seq, n), fact)`` in log order,
        holding nothing new: the held ones when none were let go, else derived again from ``store``'s log as they
        are read (O(the session's history) time; call under :attr:`lock`)."""
        if not self.dropped.get(sid):
            yield from [f for f in self.facts.get(sid, []) if f[0][0] <= until]
            return
        deriver = self._new_deriver(store, sid)
        after, end = 0, min(until, self.watermark)
        while True:  # in pages: the session's events are never all in memory at once
            page = list(store.events(sid, after_seq=after, until_seq=end, limit=DERIVE_PAGE))
            for ev in page:
                for n, fact in enumerate(deriver.feed(ev.event)):
                    yield (ev.seq, n), fact
            if len(page) < DERIVE_PAGE:
                return
            after = page[-1].seq

    def _visible(self, store: EventLog, sid: str) -> list[Workspace]:
        keys = {self.workspace_key(store, sid)} | {self.workspace_key(store, a) for a in self.ancestors(store, sid)}
        return [self.workspaces[k] for k in sorted(keys) if k in self.workspaces]

    def isolated(self, store: EventLog, sid: str) -> bool:
        """Whether ``sid`` is a spawned child agent (session meta ``agent_child``): it starts from its brief
        only, so it sees no other session's disproofs, and no other session sees its own (spec: "Every
        child agent has its own complete L0-L3 stack ... task state and evidence remain local")."""
        meta = self._session(store, sid).meta or {}
        return bool(meta.get("agent_child"))

    def _isolation_matters(self, store: EventLog, sid: str, found: list[Disproof]) -> bool:
        return self.isolated(store, sid) or any(self.isolated(store, d.session_id) for d in found)

    def _filter_isolated(self, store: EventLog, sid: str, found: list[Disproof]) -> list[Disproof]:
        if self.isolated(store, sid):
            return [d for d in found if d.session_id == sid]
        return [d for d in found if not self.isolated(store, d.session_id)]

    def visible_disproofs(self, store: EventLog, sid: str, until: int) -> list[Disproof]:
        """Disproofs recorded at or before ``until`` in ``sid``'s workspace or one of its ancestors';
        a spawned child agent (:meth:`isolated`) sees only its own, and nobody else sees a child's."""
        end = (until, END)
        out = [d for ws in self._visible(store, sid) for d in ws.disproofs[: bisect_right(ws.disproofs, end, key=_pos)]]
        if self._isolation_matters(store, sid, out):
            out = self._filter_isolated(store, sid, out)
        return sorted(out, key=_pos)

    def disproof_counts(self, store: EventLog, sid: str, until: int) -> tuple[int, int]:
        """``(visible, stale)``: how many disproofs :meth:`visible_disproofs` returns and how many of them
        are stale as of ``until`` (O(log n) per workspace; a linear count when child agents take part)."""
        end = (until, END)
        visible = stale = 0
        for ws in self._visible(store, sid):
            shown = ws.disproofs[: bisect_right(ws.disproofs, end, key=_pos)]
            if self._isolation_matters(store, sid, shown):
                kept = {d.pos for d in self._filter_isolated(store, sid, shown)}
                visible += len(kept)
                stale += sum(1 for d in shown if d.pos in kept and self._stale_by(ws, d, end))
                continue
            visible += len(shown)
            stale += bisect_right(ws.staled, end)
        return visible, stale

    @staticmethod
    def _stale_by(ws: Workspace, d: Disproof, end: Pos) -> bool:
        """Whether disproof ``d`` went stale at or before ``end``."""
        return d.stale_pos is not None and d.stale_pos <= end


_PLAIN_FACTS = frozenset({ToolSuccess, ToolFailure, FileObservation, ValidationEvidence, UserInstruction})
"""Fact types that are neither a :class:`Mutation` nor a :class:`StateUpdate` (the workspace records nothing of
them)."""


def _pos(d: Disproof) -> Pos:
    return d.pos


class KernelCache:
    """The derived kernel state (one :class:`Ledger` and its reducers per store object) of its owner.

    ``rules`` are the :class:`~latch.kernel.derive.DerivationRule` instances every ledger of this
    cache derives with, tried in order (default: :func:`~latch.kernel.derive.builtin_rules`);
    ``ValueError`` when a name is missing or repeated. A ledger is keyed by the store *object*
    (weakly: it is dropped with the store), never by its path. Thread-safe.
    """

    def __init__(self, rules: Sequence[DerivationRule] | None = None) -> None:
        self.rules = check_rules(builtin_rules() if rules is None else rules)
        self._ledgers: weakref.WeakKeyDictionary[Any, Ledger] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        _CACHES.add(self)

    def ledger(self, store: EventLog, until: int | None = None) -> Ledger:
        """The ledger of ``store`` in this cache, refreshed to the store's newest event (``until``: at least
        through global seq ``until``, see :meth:`Ledger.refresh`)."""
        with self._lock:
            ledger = self._ledgers.get(store)
            if ledger is None:
                ledger = self._ledgers[store] = Ledger(self.rules)
        ledger.refresh(store, until)
        return ledger

    def clear(self) -> None:
        """Drop every ledger: the next reduction rebuilds from the log."""
        with self._lock:
            self._ledgers.clear()


_CACHES: weakref.WeakSet[KernelCache] = weakref.WeakSet()
_DEFAULT: KernelCache | None = None


def default_cache() -> KernelCache:
    """The cache used when a caller passes none: the built-in rules, ledgers keyed by store object."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = KernelCache()
    return _DEFAULT


def ledger_for(store: EventLog, cache: KernelCache | None = None, until: int | None = None) -> Ledger:
    """The ledger of ``store`` in ``cache`` (default :func:`default_cache`), refreshed (through global seq
    ``until`` at least; ``None``: to the newest event)."""
    return (cache or default_cache()).ledger(store, until)


def clear_cache() -> None:
    """Drop every ledger (and its reducers) of every live :class:`KernelCache`: the next reduction
    rebuilds from the log, as a new process would."""
    for cache in list(_CACHES):
        cache.clear()
