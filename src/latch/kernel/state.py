"""L1 canonical state: a pure reduction of the event log (spec: "Sessions & continuity").

:func:`canonical_state` reduces one session's kernel records and derived facts
(goal, constraints, decisions, hypotheses, notes, questions, actions, criteria,
validation requirements, files, evidence, failure lineages, managed processes,
writer blockers) together with its workspace's generation and disproofs into a
:class:`CanonicalState`. Each state is the complete current state at its
``revision``; a higher revision is current truth.

Incremental (spec: "Bounded materialization"): one :class:`SessionReducer` per
(store path, session) is cached with a ``seq`` watermark and only extended by
newer facts, at a cost per fact that does not grow with history; asking for an
earlier ``until_seq`` rebuilds it from the log. The reducer keeps every
collection in the order it renders in (active constraints, decisions and
failure lineages apart; observations ordered by their latest run), so a state
costs O(1) to take: its JSON collections are built on first access (O(state),
for ``latch state``) and :meth:`CanonicalState.render` reads only the newest
lines that fit its budget. One state object is shared per revision and caches
its renderings per (budget, estimator). A state reads its reducer lazily: before
the reducer changes, every state still referenced is frozen (what the reducer
holds is copied out), so an older state never shows newer facts.

What a reducer holds is bounded by what a view can show, not by the history: the
newest :data:`COMMANDS_HELD` shell commands (a let-go command's run count is kept
by its digest) and the open failure streaks plus the newest :data:`FAILURES_HELD`
closed ones (the rest counted). Counts stay exact (``N older omitted``, ``×runs``,
the number of streaks), and what was let go is derived again from the log (the
durable source) only when asked for: a render whose budget reaches past the held
commands, or the ``commands``/``failures`` collections (``to_json``): then
O(the session's history), once per revision.

Certification (spec: "Sessions & continuity", "Port boundary"): only a Passed
observation at the *current* workspace generation certifies a requirement;
a managed process that was running at or after that observation blocks it until
the process exits and validation is rerun; an unchanged writer blocker (same
text, no mutation since) is a failed certification attempt whatever its command said.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .derive import ActionChanged, ActionsReplaced, ShellRule, ToolFailure, ToolSuccess, UserInstruction
from .events import (
    ExternalChange,
    FileObservation,
    Mutation,
    ProcessExited,
    ProcessStarted,
    StateUpdate,
    Tombstone,
    ValidationEvidence,
    WriterBlocker,
)
from .ledger import END, Disproof, KernelCache, Ledger, Pos, Workspace, ledger_for
from .render import StateOverflow, current_passes, goal_line, render_state, update_key

if TYPE_CHECKING:
    from ..store import EventLog

__all__ = [
    "CanonicalState",
    "StateOverflow",
    "SessionReducer",
    "canonical_state",
    "workspace_generation",
    "requirement_key",
    "GOAL_REVISIONS",
    "COMMANDS_HELD",
    "FAILURES_HELD",
]

GOAL_REVISIONS = 8
"""The most goal revisions (later user instructions) a state keeps, newest last."""

COMMANDS_HELD = 4096
"""Shell commands a session's reducer holds, newest last: an older one is let go, its run count kept by its
digest (so the count of commands and a command's ``runs`` stay exact); a state derives the let-go ones again from
the log when asked for them (:meth:`_Core.section`, :meth:`_Core.collections`)."""

FAILURES_HELD = 256
"""Closed failure streaks a session's reducer holds besides the open ones (the oldest closed are let go and
counted; a state derives them again from the log when asked for them)."""

SHELL_TOOLS = frozenset({*ShellRule.tools, "exec"})
"""Tools whose success or failure is a shell command run (its text the fact's first action): the working set's
commands."""


def _read_range(seen: tuple[int, int | None] | None, fact: FileObservation) -> tuple[int, int | None] | None:
    """The bytes of a file read so far as one ``(start, end)`` range (``None``: the whole file). A page that
    continues or overlaps the known range extends it; any other page replaces it (the newest read wins)."""
    end = None if fact.length is None else fact.offset + fact.length
    if fact.offset == 0 and (end is None or (fact.size is not None and end >= fact.size)):
        return None  # the whole file
    if seen is not None and seen[1] is not None and seen[0] <= fact.offset <= seen[1]:
        start, stop = seen[0], None if end is None else max(end, seen[1])
        if start == 0 and (stop is None or (fact.size is not None and stop >= fact.size)):
            return None
        return start, stop
    return fact.offset, end


def requirement_key(text: str) -> str:
    """The exact-requirement key of a command or requirement text (whitespace collapsed)."""
    return " ".join(text.split())


_LOGS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
"""The logs states derive let-go entries from, by the number a state keeps instead of the log itself (a state
handed to an engine leads to no store: spec "Port boundary")."""
_LOG_NUMBERS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_log_numbers = itertools.count(1)


def _log_number(store: EventLog) -> int:
    number = _LOG_NUMBERS.get(store)
    if number is None:
        number = _LOG_NUMBERS[store] = next(_log_numbers)
        _LOGS[number] = store
    return number


def _digest(command: str) -> bytes:
    return hashlib.blake2b(command.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _sig(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


class SessionReducer:
    """The accumulated state of one session through ``self.until`` (a global seq).

    Every dict keeps insertion order; ``active_*`` hold the same entries as
    their full collection, minus the superseded, replaced or closed ones;
    ``observations`` (requirement key → latest observation) is ordered by
    latest run, so the current ones are its newest suffix.
    """

    def __init__(self, session_id: str, *, bounded: bool = True):
        self.session_id = session_id
        self.bounded = bounded  # hold at most COMMANDS_HELD commands and FAILURES_HELD closed streaks
        self.index = 0
        self.until = 0
        self.changes = 0
        self.tombstoned = False
        self.counters: dict[str, int] = {}
        self.goal: dict[str, Any] | None = None  # set_goal (wins over the derived goal)
        self.first_instruction: dict[str, Any] | None = None  # the derived goal
        self.revisions: list[dict[str, Any]] = []  # later instructions, newest last (at most GOAL_REVISIONS)
        self.instructions = 0  # every instruction, the first included
        self.constraints: dict[str, dict[str, Any]] = {}
        self.active_constraints: dict[str, dict[str, Any]] = {}
        self.decisions: dict[str, dict[str, Any]] = {}
        self.active_decisions: dict[str, dict[str, Any]] = {}
        self.hypotheses: dict[str, dict[str, Any]] = {}
        self.notes: dict[str, dict[str, Any]] = {}
        self.questions: dict[str, dict[str, Any]] = {}
        self.actions: dict[str, dict[str, Any]] = {}
        self.plan_sources: dict[str, list[str]] = {}  # plan/todo tool → ids of the actions it listed last
        self.task_actions: dict[tuple[str, str], str] = {}  # (task tool source, harness task id) → action id
        self.criteria: dict[str, dict[str, Any]] = {}
        self.requirements: dict[str, dict[str, Any]] = {}
        self.requirement_keys: set[str] = set()
        self.files: dict[str, dict[str, Any]] = {}
        self.touched: dict[str, None] = {}  # file paths, the one read or changed last at the end
        self.commands: dict[str, dict[str, Any]] = {}  # shell command text → its latest outcome, newest last
        self.command_runs: dict[bytes, int] = {}  # a let-go command's digest → its runs
        self.external: dict[str, Pos] = {}  # paths changed outside the agent and not re-read since
        self.observations: dict[str, dict[str, Any]] = {}
        self.last_set_keys: tuple[str, ...] = ()
        self.validation_runs = 0
        self.mutations = 0
        self.failures: list[dict[str, Any]] = []  # the streaks held (every open one), in the order they started
        self.failures_dropped = 0  # closed streaks let go
        self.active_failures: dict[tuple[str, str], dict[str, Any]] = {}  # (tool, signature) → its open streak
        self.failing: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (tool, action) → open streaks holding it
        self.processes: dict[str, dict[str, Any]] = {}
        self.running: dict[str, dict[str, Any]] = {}
        self.exits: list[tuple[Pos, str]] = []  # (exit position, process id), in log order
        self.blockers: list[dict[str, Any]] = []
        self.blocker_streak = 0  # consecutive blockers with the last one's text and generation
        self.core: _Core | None = None  # what the current revision shows
        self._issued: list[weakref.ref[_Core]] = []

    def _id(self, prefix: str) -> str:
        self.counters[prefix] = self.counters.get(prefix, 0) + 1
        return f"{prefix}{self.counters[prefix]}"

    def advance(self, facts: list[tuple[Pos, Any]], ws: Workspace, until: int, *, first: int = 0) -> None:
        """Apply the facts with ``seq <= until`` not applied yet (``facts[0]`` is the session's fact number
        ``first``; :attr:`index` counts the facts applied)."""
        i = self.index - first
        if i < len(facts) and facts[i][0][0] <= until:
            self._detach()
            while i < len(facts) and facts[i][0][0] <= until:
                pos, fact = facts[i]
                if self._apply(pos, fact, ws):
                    self.changes += 1
                i += 1
            self.index = i + first
        self.until = max(self.until, until)

    def issue(self, core: _Core) -> _Core:
        """Make ``core`` the current revision's; it reads this reducer until :meth:`_detach`."""
        self.core = core
        self._issued = [r for r in self._issued if r() is not None] + [weakref.ref(core)]
        return core

    def _detach(self) -> None:
        """Before the reducer changes: freeze every state that still reads it."""
        self.core = None
        for ref in self._issued:
            core = ref()
            if core is not None:
                core.freeze()
        self._issued = []

    # ------------------------------------------------------------------- apply
    def _apply(self, pos: Pos, fact: Any, ws: Workspace) -> bool:
        kind = type(fact)  # the most frequent facts first (a type is none of the other fact classes)
        if kind is ToolSuccess:
            return self._success(pos, fact)
        if kind is ToolFailure:
            return self._failure(pos, fact)
        if isinstance(fact, UserInstruction):
            return self._instruction(pos, fact)
        if isinstance(fact, StateUpdate):
            return self._tool(pos, fact.tool, fact.arguments)
        if isinstance(fact, FileObservation):
            f = self._file(fact.path, pos)
            whole_before = f["reads"] > 0 and f["read_range"] is None
            f["reads"] += 1
            f["last_read"] = pos
            f["read_range"] = None if whole_before else _read_range(f["read_range"], fact)
            if fact.sha256 is not None or fact.size is not None:
                f["sha256"], f["size"] = fact.sha256, fact.size
            f.pop("external_change", None)
            self.external.pop(fact.path, None)
            return True
        if isinstance(fact, Mutation):
            self.mutations += 1
            for path in fact.paths:
                f = self._file(path, pos)
                f["writes"] += 1
                f["last_write"] = pos
                f["write_tool"] = fact.tool
                f["written_generation"] = ws.generation(pos) + 1
                f["sha256"], f["size"] = fact.sha256_after, None  # the new bytes: their hash when the write knew it
            return True
        if isinstance(fact, ExternalChange):
            self._file(fact.path, pos)["external_change"] = pos
            self.external[fact.path] = pos
            return True
        if isinstance(fact, ValidationEvidence):
            self.validation_runs += 1
            generation = ws.generation(pos)
            keys = [requirement_key(req) for req in fact.requirements or (fact.command,)]
            for key in keys:
                prev = self.observations.pop(key, None)  # re-inserted: the newest run is last
                self.observations[key] = {
                    "requirement": key,
                    "command": fact.command,
                    "status": fact.status,
                    "exit_code": fact.exit_code,
                    "generation": generation,
                    "seq": pos[0],
                    "pos": pos,
                    "summary": fact.summary,
                    "attempts": (prev["attempts"] if prev else 0) + 1,
                }
            self.last_set_keys = tuple(dict.fromkeys(keys))
            return True
        if isinstance(fact, ToolFailure):
            return self._failure(pos, fact)
        if isinstance(fact, ToolSuccess):
            return self._success(pos, fact)
        if isinstance(fact, ActionsReplaced):
            for aid in self.plan_sources.pop(fact.source, ()):
                del self.actions[aid]
            ids = self.plan_sources[fact.source] = []
            for text, status in fact.items:
                aid = self._id("A")
                self.actions[aid] = {"id": aid, "text": text, "status": status, "source": fact.source, "seq": pos[0]}
                ids.append(aid)
            return True
        if isinstance(fact, ActionChanged):
            return self._task_action(pos, fact)
        if isinstance(fact, ProcessStarted):
            old = self.processes.get(fact.process_id)
            proc = self.processes[fact.process_id] = {
                "process_id": fact.process_id,
                "command": fact.command,
                "started": pos,
                "exited": None,
                "exit_code": None,
                "order": old["order"] if old else len(self.processes),
            }
            self.running[fact.process_id] = proc
            return True
        if isinstance(fact, ProcessExited):
            stopped = self.running.pop(fact.process_id, None)
            if stopped is None:
                return False
            stopped["exited"], stopped["exit_code"] = pos, fact.exit_code
            self.exits.append((pos, fact.process_id))
            return True
        if isinstance(fact, WriterBlocker):
            blocker = {
                "blocker": fact.blocker,
                "signature": _sig(fact.blocker),
                "command": fact.command,
                "command_passed": fact.command_passed,
                "generation": ws.generation(pos),
                "seq": pos[0],
            }
            last = self.blockers[-1] if self.blockers else None
            same = last is not None and (last["signature"], last["generation"]) == (
                blocker["signature"],
                blocker["generation"],
            )
            self.blocker_streak = self.blocker_streak + 1 if same else 1
            self.blockers.append(blocker)
            return True
        if isinstance(fact, Tombstone):
            self.tombstoned = True
            return True
        return False

    def _failure(self, pos: Pos, fact: ToolFailure) -> bool:
        """A failed call: a shell command's outcome, and one more failure of its lineage (opened if new)."""
        if fact.tool in SHELL_TOOLS and fact.actions:
            self._command(pos, fact)
        lineage = (fact.tool, fact.signature)
        lin = self.active_failures.get(lineage)
        if lin is None:
            lin = self.active_failures[lineage] = {
                "tool": fact.tool,
                "signature": fact.signature,
                "count": 0,
                "first_seq": pos[0],
                "actions": {},
                "active": True,
            }
            self.failures.append(lin)
            if self.bounded and len(self.failures) > 2 * FAILURES_HELD:
                self._let_go_failures()
        lin["count"] += 1
        lin["last_seq"] = pos[0]
        lin["excerpt"] = fact.excerpt
        lin["actions"].update(dict.fromkeys(fact.actions))  # an ordered set
        for action in fact.actions:
            self.failing.setdefault((fact.tool, action), set()).add(lineage)
        return True

    def _success(self, pos: Pos, fact: ToolSuccess) -> bool:
        """A successful call: a shell command's outcome; it closes the open lineages of its tool that failed on
        one of its actions."""
        shell = fact.tool in SHELL_TOOLS
        if shell and fact.actions:
            self._command(pos, fact)
        if not self.active_failures:
            return shell
        closed: set[tuple[str, str]] = set()  # the open streaks of its tool holding one of its actions
        for action in fact.actions:
            keys = self.failing.get((fact.tool, action))
            if keys:
                closed |= keys
        for k in closed:
            lin = self.active_failures.pop(k)  # closed: it never changes again (states share it)
            for action in lin["actions"]:
                keys = self.failing[(lin["tool"], action)]
                keys.discard(k)
                if not keys:
                    del self.failing[(lin["tool"], action)]
            lin["active"], lin["closed_seq"], lin["actions"] = False, pos[0], list(lin["actions"])
        return bool(closed) or shell

    def _let_go_failures(self) -> None:
        """Let the oldest closed streaks go until :data:`FAILURES_HELD` are held (or only open ones are left)."""
        excess = len(self.failures) - FAILURES_HELD
        kept = []
        for lin in self.failures:
            if excess > 0 and not lin["active"]:
                excess -= 1
                self.failures_dropped += 1
            else:
                kept.append(lin)
        self.failures = kept

    @property
    def command_count(self) -> int:
        """Distinct shell commands run (held or let go)."""
        return len(self.commands) + len(self.command_runs)

    @property
    def failure_count(self) -> int:
        """Failure streaks started (held or let go)."""
        return len(self.failures) + self.failures_dropped

    def _instruction(self, pos: Pos, fact: UserInstruction) -> bool:
        """The first instruction is the derived goal; a later one that differs from the latest is a revision."""
        entry = {"text": fact.text, "seq": pos[0], "truncated": fact.truncated}
        latest = self.revisions[-1] if self.revisions else self.first_instruction
        if latest is not None and latest["text"] == fact.text:
            return False  # the same instruction again: no change of task
        self.instructions += 1
        if self.first_instruction is None:
            self.first_instruction = entry
        else:
            self.revisions.append(entry)
            if len(self.revisions) > GOAL_REVISIONS:
                del self.revisions[0]
        return True

    def _task_action(self, pos: Pos, fact: ActionChanged) -> bool:
        """Create, update or remove the action a task tool keyed ``(source, key)``; ``False`` when nothing changed."""
        ref = (fact.source, fact.key)
        aid = self.task_actions.get(ref)
        if fact.created:
            if fact.status == "deleted":
                return False
            if aid is not None:  # the harness reused the id: the new task replaces the old one
                self.actions.pop(aid, None)
            aid = self.task_actions[ref] = self._id("A")
            self.actions[aid] = {
                "id": aid,
                "text": fact.text or "",
                "status": fact.status or "pending",
                "source": fact.source,
                "seq": pos[0],
            }
            return True
        action = self.actions.get(aid) if aid is not None else None
        if aid is None or action is None:
            return False
        if fact.status == "deleted":
            del self.actions[aid], self.task_actions[ref]
            return True
        changed = False
        for field, value in (("text", fact.text), ("status", fact.status)):
            if value is not None and action[field] != value:
                action[field] = value
                changed = True
        return changed

    def _file(self, path: str, pos: Pos) -> dict[str, Any]:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = {
                "path": path,
                "reads": 0,
                "writes": 0,
                "first_seq": pos[0],
                "last_read": None,
                "last_write": None,
                "sha256": None,
                "size": None,
                "written_generation": None,
                "read_range": None,
                "write_tool": None,
            }
        self.touched.pop(path, None)
        self.touched[path] = None
        return f

    def _command(self, pos: Pos, fact: Any) -> None:
        """A shell command's outcome (its text is the fact's first action): the command moves to the newest end."""
        text = fact.actions[0]
        prev = self.commands.pop(text, None)
        runs = prev["runs"] if prev else self.command_runs.pop(_digest(text), 0) if self.command_runs else 0
        failed = isinstance(fact, ToolFailure)
        self.commands[text] = {
            "command": text,
            "status": "failed" if failed else "ok",
            "excerpt": fact.excerpt if failed else "",
            "runs": runs + 1,
            "seq": pos[0],
        }
        if self.bounded and len(self.commands) > COMMANDS_HELD:
            oldest = next(iter(self.commands))
            self.command_runs[_digest(oldest)] = self.commands.pop(oldest)["runs"]

    def _tool(self, pos: Pos, tool: str, args: dict[str, Any]) -> bool:
        seq = pos[0]
        if tool == "set_goal":
            self.goal = {"text": args.get("goal", ""), "seq": seq}
        elif tool == "add_constraint":
            old = self.active_constraints.pop(args.get("replaces", ""), None)
            cid = self._id("C")
            self.constraints[cid] = self.active_constraints[cid] = {
                "id": cid,
                "text": args.get("constraint", ""),
                "seq": seq,
                "active": True,
            }
            if old:
                old["active"], old["replaced_by"] = False, cid
        elif tool == "record_decision":
            old = self.active_decisions.pop(args.get("supersedes", ""), None)
            did = self._id("D")
            self.decisions[did] = self.active_decisions[did] = {
                "id": did,
                "text": args.get("decision", ""),
                "rationale": args.get("rationale"),
                "seq": seq,
                "active": True,
            }
            if old:
                old["active"], old["superseded_by"] = False, did
        elif tool == "propose_hypothesis":
            hid = self._id("H")
            self.hypotheses[hid] = {"id": hid, "text": args.get("hypothesis", ""), "status": "active", "seq": seq}
        elif tool == "reject_hypothesis":
            h = self.find_hypothesis(args.get("hypothesis", ""))
            if h is None:
                return False
            h["status"], h["reason"], h["rejected_seq"] = "rejected", args.get("reason", ""), seq
        elif tool == "add_note":
            nid = self._id("N")
            self.notes[nid] = {"id": nid, "text": args.get("note", ""), "seq": seq}
        elif tool == "ask_question":
            q = self.questions.get(args.get("id", ""))
            if q is None:
                qid = self._id("Q")
                q = self.questions[qid] = {"id": qid, "text": args.get("question", ""), "answer": None, "seq": seq}
            if args.get("answer"):
                q["answer"] = args["answer"]
        elif tool == "plan_action":
            a = self.actions.get(args.get("id", ""))
            if a is None:
                aid = self._id("A")
                a = self.actions[aid] = {
                    "id": aid,
                    "text": args.get("action", ""),
                    "status": "pending",
                    "source": "plan_action",
                    "seq": seq,
                }
            elif args.get("action"):
                a["text"] = args["action"]
            a["status"] = args.get("status", a["status"])
        elif tool == "set_criterion":
            k = self.criteria.get(args.get("id", ""))
            if k is None:
                kid = self._id("K")
                k = self.criteria[kid] = {"id": kid, "text": args.get("criterion", ""), "met": False, "seq": seq}
            elif args.get("criterion"):
                k["text"] = args["criterion"]
            if "met" in args:
                k["met"] = bool(args["met"])
        elif tool == "require_validation":
            req = requirement_key(args.get("requirement", ""))
            if req in self.requirement_keys:
                return False
            self.requirement_keys.add(req)
            vid = self._id("V")
            command = args.get("command")
            self.requirements[vid] = {
                "id": vid,
                "requirement": req,
                "seq": seq,
                "command": requirement_key(command) if command else None,
            }
        elif tool != "record_disproof":  # disproofs live in the workspace ledger
            return False
        return True

    def find_hypothesis(self, ref: str) -> dict[str, Any] | None:
        """A hypothesis by id (``H3``) or exact text."""
        h = self.hypotheses.get(ref)
        if h is None:
            h = next((x for x in self.hypotheses.values() if x["text"] == ref), None)
        return h


# --------------------------------------------------------------------------- one revision
def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "pos"}


def _certification(
    red: SessionReducer, generation: int, attempts: int, blocker: dict[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """The verdict and the reasons the view shows.

    Certified only when every required observation passed at ``generation``
    after every managed process exited, and no writer blocker is unchanged.
    Reasons name no generation number. The view shows a managed process only
    when it is what blocks certification (every requirement has a current
    pass): a process started and waited on while the evidence fails anyway
    does not change what the model must do, and would change the text twice.
    """
    if red.requirements:
        keys = [(r["id"], r["command"] or r["requirement"]) for r in red.requirements.values()]
    else:
        keys = [(None, k) for k in red.last_set_keys]
    reasons: list[str] = [] if keys else ["no validation evidence"]
    since: Pos | None = None  # the oldest current pass: a process that ran at or after it blocks
    for rid, key in keys:
        obs = red.observations.get(key)
        label = f"{rid} {key}" if rid else key
        if obs is None:
            reasons.append(f"{label}: never validated")
        elif obs["status"] != "passed":
            reasons.append(f"{label}: {obs['status']}")
        elif obs["generation"] != generation:
            reasons.append(f"{label}: passed, but the workspace changed since")
        elif since is None or obs["pos"] < since:
            since = obs["pos"]
    procs = list(red.running.values())
    if since is not None:
        later = red.exits[bisect_right(red.exits, since, key=itemgetter(0)) :]
        procs += [red.processes[pid] for pos, pid in later if red.processes[pid]["exited"] == pos]
    process_reasons = [
        f"managed process {p['process_id']} is running"
        if p["exited"] is None
        else f"managed process {p['process_id']} exited after the validation; rerun it"
        for p in sorted(procs, key=itemgetter("order"))
    ]
    shown = list(reasons or process_reasons)
    reasons += process_reasons
    if blocker is not None:
        reasons.append(
            f"writer blocker unchanged ({attempts} failed certification attempt"
            f"{'s' if attempts != 1 else ''}): {blocker['blocker']}"
        )
        shown = [*shown, reasons[-1]]
    return (
        {
            "certified": not reasons,
            "requirements": [k for _, k in keys],
            "reasons": reasons,
            "failed_attempts": attempts,
        },
        shown,
    )


def _disproof_json(d: Disproof, end: Pos) -> dict[str, Any]:
    stale = d.stale_pos is not None and d.stale_pos <= end
    return {
        "id": d.id,
        "claim": d.claim,
        "reason": d.reason,
        "evidence": list(d.evidence),
        "files": list(d.files),
        "generation": d.generation,
        "session_id": d.session_id,
        "seq": d.pos[0],
        "stale": stale,
        "stale_seq": d.stale_pos[0] if stale and d.stale_pos is not None else None,
        "stale_path": d.stale_path if stale else None,
    }


_Rows = tuple[dict[str, Any], ...]
"""One collection of a state: JSON-ready dicts in the collection's order."""
_COLLECTIONS = (
    "constraints",
    "decisions",
    "hypotheses",
    "notes",
    "questions",
    "actions",
    "criteria",
    "requirements",
    "files",
    "commands",
    "evidence",
    "failures",
    "processes",
    "blockers",
    "disproofs",
)

# What each rendered section lists, read from the live reducer (oldest first) ...
_LIVE: dict[str, Callable[[SessionReducer], Any]] = {
    "constraints": lambda r: r.active_constraints.values(),
    "decisions": lambda r: r.active_decisions.values(),
    "evidence": lambda r: r.observations.values(),
    "failures": lambda r: r.active_failures.values(),
    "external": lambda r: sorted(r.external),
    "criteria": lambda r: r.criteria.values(),
    "requirements": lambda r: r.requirements.values(),
    "actions": lambda r: r.actions.values(),
    "questions": lambda r: r.questions.values(),
    "hypotheses": lambda r: r.hypotheses.values(),
    "notes": lambda r: r.notes.values(),
    "commands": lambda r: r.commands.values(),
    "running": lambda r: sorted(r.running.values(), key=itemgetter("order")),
}
# ... or from the collections of a frozen state.
_FROZEN: dict[str, Callable[[dict[str, _Rows]], Any]] = {
    "constraints": lambda d: [c for c in d["constraints"] if c["active"]],
    "decisions": lambda d: [x for x in d["decisions"] if x["active"]],
    "failures": lambda d: [f for f in d["failures"] if f["active"]],
    "external": lambda d: sorted(f["path"] for f in d["files"] if f["external_change"]),
    "working_files": lambda d: sorted(d["files"], key=lambda f: f["touched"]),
    "running": lambda d: [p for p in d["processes"] if p["running"]],
}


class _Core:
    """What one revision of a session's state shows (shared by every :class:`CanonicalState` of it).

    Scalars, the certification and the disproofs are taken at creation; the
    collections are read from the reducer when first needed, or what the reducer
    holds is copied out by :meth:`freeze` before it changes (O(what it holds)).
    The commands and failure streaks the reducer let go are derived again from
    the log only when asked for (:meth:`_let_go`).
    """

    def __init__(
        self,
        ledger: Ledger,
        store: EventLog,
        red: SessionReducer,
        ws: Workspace,
        until: int,
        generation: int,
        revision: int,
    ):
        self.lock = ledger.lock
        self.red: SessionReducer | None = red
        self._ledger, self._log = ledger, _log_number(store)
        self.command_count = red.command_count
        self._partial = bool(red.command_runs or red.failures_dropped)  # the reducer let some go
        self._held: dict[str, _Rows] | None = None  # a frozen state's copy of what the reducer held
        self._older: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None
        self.ws = ws
        self.session_id = red.session_id
        self.revision = revision
        self.generation = generation
        self.end: Pos = (until, END)
        self.tombstoned = red.tombstoned
        first = red.first_instruction
        self.goal = red.goal["text"] if red.goal else first["text"] if first else None
        self.goal_source = "set_goal" if red.goal else "user" if first else None
        self.goal_revisions = tuple(dict(r) for r in red.revisions)
        self.latest_instruction = dict(red.revisions[-1]) if red.revisions else dict(first) if first else None
        self.instructions = red.instructions
        self.mutations = red.mutations
        self.validation_runs = red.validation_runs
        last = red.blockers[-1] if red.blockers else None
        blocker = last if last is not None and last["generation"] == generation else None
        self.blocker = blocker
        attempts = red.blocker_streak if blocker else 0
        self.blocker_lineage = (
            None
            if blocker is None
            else {
                "tool": "writer_blocker",
                "signature": blocker["signature"],
                "count": attempts,
                "first_seq": red.blockers[-attempts]["seq"],
                "last_seq": blocker["seq"],
                "actions": [blocker["command"]] if blocker["command"] else [],
                "active": True,
                "excerpt": blocker["blocker"],
            }
        )
        self.certification, self.shown_reasons = _certification(red, generation, attempts, self.blocker)
        self.disproofs = tuple(
            _disproof_json(d, self.end) for d in ledger.visible_disproofs(store, red.session_id, until)
        )
        self.show_certification = bool(red.observations or red.requirements or red.processes or red.blockers)
        self.is_empty = self.goal is None and not (
            red.active_constraints
            or red.active_decisions
            or red.hypotheses
            or red.notes
            or red.questions
            or red.actions
            or red.criteria
            or red.requirements
            or red.observations
            or red.active_failures
            or red.external
            or self.show_certification
            or self.disproofs
            or red.files
            or red.commands
        )
        self._data: dict[str, _Rows] | None = None
        self._renders: dict[tuple[int, Any, bool], str] = {}
        self._update_key: str | None = None
        self._passes: frozenset[str] | None = None

    def freeze(self) -> None:
        """Copy what the reducer holds out of it (called before it changes): O(what it holds), not the history."""
        with self.lock:
            self._base()
            self.red = None

    def _base(self) -> dict[str, _Rows]:
        """The collections as the reducer holds them at this revision (the let-go commands and failure streaks left
        out): copied out once, O(what it holds)."""
        if self._held is None:
            with self.lock:
                if self._held is None:
                    self._held = self._realize()
        return self._held

    def collection(self, name: str) -> _Rows:
        """One collection, complete (see :meth:`collections`; only ``commands`` and ``failures`` can need the log)."""
        if self._partial and name in ("commands", "failures"):
            return self.collections()[name]
        return self._base()[name]

    def collections(self) -> dict[str, _Rows]:
        """Every collection as a tuple of JSON-ready dicts (O(state), once per revision; when the reducer let
        commands or failure streaks go, O(the session's history): they are derived again from the log)."""
        if self._data is None:
            with self.lock:
                if self._data is None:
                    data = self._base()
                    if self._partial:
                        commands, failures = self._let_go()
                        data = {
                            **data,
                            "commands": tuple(dict(c) for c in commands),
                            "failures": self._failures(failures),
                        }
                    self._data = data
        return self._data

    def _let_go(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(commands, failure streaks)`` as of this revision, all of them, oldest first: derived again from the log
        (O(the session's history), once per revision; call under ``lock``)."""
        if self._older is None:
            store = _LOGS.get(self._log)
            if store is None:
                raise ValueError(f"session {self.session_id}: its store is gone; its older commands cannot be derived")
            red = SessionReducer(self.session_id, bounded=False)
            for pos, fact in self._ledger.derived(store, self.session_id, self.end[0]):
                red._apply(pos, fact, self.ws)
            self._older = list(red.commands.values()), red.failures
        return self._older

    def _older_commands(self, held: int) -> Iterator[dict[str, Any]]:
        """The commands older than the newest ``held``, newest first (derived again from the log when first
        pulled; call under ``lock``)."""
        if held >= self.command_count:
            return
        commands = self._let_go()[0]
        yield from reversed(commands[: len(commands) - held])

    def _failures(self, failures: list[dict[str, Any]]) -> _Rows:
        """JSON-ready streaks: an open one copied, a closed one (never changed again) shared."""
        rows = [dict(lin, actions=list(lin["actions"])) if lin["active"] else lin for lin in failures]
        if self.blocker_lineage is not None:
            rows.append(dict(self.blocker_lineage, actions=list(self.blocker_lineage["actions"])))
        return tuple(rows)

    def _realize(self) -> dict[str, _Rows]:
        """What the reducer holds as JSON-ready collections (the commands and failure streaks it let go left out)."""
        red, ws, end, g = self.red, self.ws, self.end, self.generation
        assert red is not None, "a frozen state has its collections"
        files = []
        touched = {path: i for i, path in enumerate(red.touched)}
        for f in red.files.values():
            entry = {k: v for k, v in f.items() if k not in ("last_read", "last_write", "external_change")}
            entry["last_read_seq"] = f["last_read"][0] if f["last_read"] else None
            entry["last_write_seq"] = f["last_write"][0] if f["last_write"] else None
            entry["changed_since_read"] = (
                bool(f["last_read"]) and ws.changed_after(f["path"], f["last_read"], end) is not None
            )
            entry["external_change"] = "external_change" in f
            entry["touched"] = touched[f["path"]]
            files.append(entry)
        processes = [
            {
                "process_id": p["process_id"],
                "command": p["command"],
                "started_seq": p["started"][0],
                "exited_seq": p["exited"][0] if p["exited"] else None,
                "exit_code": p["exit_code"],
                "running": p["exited"] is None,
            }
            for p in red.processes.values()
        ]
        copies = {
            name: tuple(dict(x) for x in getattr(red, name).values())
            for name in (
                "constraints",
                "decisions",
                "hypotheses",
                "notes",
                "questions",
                "actions",
                "criteria",
                "requirements",
            )
        }
        return {
            **copies,
            "commands": tuple(red.commands.values()),  # shared: a command's entry is replaced, never changed
            "files": tuple(files),
            "processes": tuple(processes),
            "evidence": tuple(dict(_strip(o), current=o["generation"] == g) for o in red.observations.values()),
            "failures": self._failures(red.failures),
            "blockers": tuple(dict(b) for b in red.blockers),
            "disproofs": tuple(dict(d) for d in self.disproofs),
        }

    def section(self, name: str) -> tuple[int, Iterable[dict[str, Any]]]:
        """``(count, entries newest first)`` of what rendered section ``name`` lists (call under ``lock``)."""
        if name == "disproofs":
            items: Any = self.disproofs
        elif name == "working_files" and self.red is not None:  # newest first in O(lines taken)
            red = self.red
            return len(red.touched), (red.files[p] for p in reversed(red.touched))
        elif self.red is not None:
            items = _LIVE[name](self.red)
        else:
            data = self._base()
            items = _FROZEN[name](data) if name in _FROZEN else data[name]
        if name == "commands":  # the held ones, then (only when a render reaches past them) the ones let go
            return self.command_count, chain(reversed(items), self._older_commands(len(items)))
        if name == "failures" and self.red is not None and self.blocker_lineage is not None:
            return len(items) + 1, chain((self.blocker_lineage,), reversed(items))
        return len(items), reversed(items)

    def recent_files(self, n: int) -> list[str]:
        """The ``n`` newest file paths (first-seen order), oldest first: O(n)."""
        with self.lock:
            if self.red is not None:
                return list(islice(reversed(self.red.files), n))[::-1]
            return [f["path"] for f in self._base()["files"][-n:]] if n > 0 else []

    def update_key(self) -> str:
        if self._update_key is None:
            with self.lock:
                self._update_key = update_key(self)
        return self._update_key

    def current_passes(self) -> frozenset[str]:
        if self._passes is None:
            with self.lock:
                self._passes = current_passes(self)
        return self._passes

    def render(self, budget_tokens: int, estimate: Callable[[str], int], goal_stated: bool = False) -> str:
        key = (budget_tokens, estimate, goal_stated)
        text = self._renders.get(key)
        if text is None:
            with self.lock:
                text = render_state(self, budget_tokens, estimate, goal_stated=goal_stated)
            if len(self._renders) >= 8:
                self._renders.clear()
            self._renders[key] = text
        return text


def _collection(name: str) -> property:
    return property(
        lambda self: self._core.collection(name),
        doc=f"``{name}``: a tuple of JSON-ready dicts (built on first access, O(state)).",
    )


class CanonicalState:
    """The complete canonical state of one session at ``revision`` (see :func:`canonical_state`).

    ``generation`` is the workspace generation at ``until_seq``, counting once each possibly-mutating tool
    call that has no result yet at ``until_seq`` (a crash mid-call can only over-count). The collections
    (``constraints``, ``decisions``, ``hypotheses``, ``notes``, ``questions``,
    ``actions``, ``criteria``, ``requirements``, ``files``, ``commands`` (shell commands run: ``command``,
    ``status`` ok/failed, ``excerpt``, ``runs``, ``seq``; newest last), ``evidence``,
    ``failures``, ``processes``, ``blockers``, ``disproofs``) are tuples of
    JSON-ready dicts in first-seen order (``evidence`` by latest run, stale
    first); :meth:`to_json` returns everything, :meth:`render` the
    deterministic text of the canonical core. Every collection is complete: the
    commands and closed failure streaks the reducer let go (past :data:`COMMANDS_HELD`
    and :data:`FAILURES_HELD`) are derived again from the log on first access, O(the
    session's history) once per revision.
    """

    __slots__ = ("_core", "until_seq")

    def __init__(self, core: _Core, until_seq: int):
        self._core = core
        self.until_seq = until_seq

    session_id = property(lambda self: self._core.session_id)
    revision = property(lambda self: self._core.revision)
    generation = property(lambda self: self._core.generation)
    tombstoned = property(lambda self: self._core.tombstoned)
    goal = property(
        lambda self: self._core.goal,
        doc="The goal: ``set_goal``'s text, else the session's first user instruction, else ``None``.",
    )
    goal_source = property(
        lambda self: self._core.goal_source,
        doc='``"set_goal"``, ``"user"`` (derived from the first instruction) or ``None``.',
    )
    goal_revisions = property(
        lambda self: self._core.goal_revisions,
        doc="Later user instructions that changed the task, ``{text, seq, truncated}`` "
        "dicts, newest last, at most :data:`GOAL_REVISIONS`.",
    )
    latest_instruction = property(
        lambda self: self._core.latest_instruction,
        doc="The newest user instruction ``{text, seq, truncated}``, else ``None``.",
    )
    mutations = property(lambda self: self._core.mutations)
    validation_runs = property(lambda self: self._core.validation_runs)
    certification = property(
        lambda self: self._core.certification, doc="``{certified, requirements, reasons, failed_attempts}``."
    )
    constraints = _collection("constraints")
    decisions = _collection("decisions")
    hypotheses = _collection("hypotheses")
    notes = _collection("notes")
    questions = _collection("questions")
    actions = _collection("actions")
    criteria = _collection("criteria")
    requirements = _collection("requirements")
    files = _collection("files")
    commands = _collection("commands")
    evidence = _collection("evidence")
    failures = _collection("failures")
    processes = _collection("processes")
    blockers = _collection("blockers")
    disproofs = property(lambda self: self._core.disproofs)

    @property
    def is_empty(self) -> bool:
        """True when the canonical core has nothing to render (no goal, and no line in any section)."""
        return self._core.is_empty

    @property
    def active_failures(self) -> list[dict[str, Any]]:
        return [f for f in self.failures if f["active"]]

    def repeated_failures(self, at_least: int) -> list[dict[str, Any]]:
        """The active failure lineages (the unchanged writer blocker's included) that failed ``at_least`` times
        or more, oldest first: ``{tool, signature, count, first_seq, excerpt}`` dicts. O(active lineages)."""
        with self._core.lock:
            _, items = self._core.section("failures")
            found = [
                {
                    "tool": f["tool"],
                    "signature": f["signature"],
                    "count": f["count"],
                    "first_seq": f["first_seq"],
                    "excerpt": f.get("excerpt") or "",
                }
                for f in items
                if f["count"] >= at_least
            ]
        return sorted(found, key=lambda f: (f["first_seq"], f["tool"], f["signature"]))

    def recent_files(self, n: int = 8) -> list[str]:
        """The paths of the ``n`` files seen last (first-seen order, oldest first), in O(n)."""
        return self._core.recent_files(n)

    def to_json(self) -> dict[str, Any]:
        """Everything as JSON-ready data (keys include revision, generation, files, evidence, failures, ...), its
        commands and failure streaks copied: the caller may change them."""
        data = self._core.collections()
        return {
            "session_id": self.session_id,
            "until_seq": self.until_seq,
            "revision": self.revision,
            "generation": self.generation,
            "tombstoned": self.tombstoned,
            "goal": self.goal,
            "goal_source": self.goal_source,
            "goal_revisions": [dict(r) for r in self.goal_revisions],
            "latest_instruction": dict(self.latest_instruction) if self.latest_instruction else None,
            "instructions": self._core.instructions,
            **{name: list(data[name]) for name in _COLLECTIONS},
            # the state shares its command entries and closed streaks between revisions: the caller gets copies
            "commands": [dict(c) for c in data["commands"]],
            "failures": [dict(f, actions=list(f["actions"])) for f in data["failures"]],
            "certification": dict(self.certification),
            "mutations": self.mutations,
            "validation_runs": self.validation_runs,
        }

    @property
    def update_key(self) -> str:
        """A digest (64 hex characters) of what this state says that the conversation does not show
        (:func:`latch.kernel.render.update_key`): equal keys mean a state update would only repeat what
        the conversation since the earlier state carries (spec: "Cache epochs and working memory")."""
        return self._core.update_key()

    @property
    def goal_line(self) -> str:
        """The ``Goal:`` line :meth:`render` writes (continuation lines indented)."""
        return goal_line(self.goal)

    @property
    def current_passes(self) -> frozenset[str]:
        """The requirement keys whose latest evidence passed at the current workspace generation: the
        ``passed: … (current)`` lines of :meth:`render`. A pass that drops out of this set went stale (or
        failed since), which a state update must say (spec: "Cache epochs and working memory")."""
        return self._core.current_passes()

    def render(self, budget_tokens: int, estimate: Callable[[str], int], *, goal_stated: bool = False) -> str:
        """Deterministic text of the canonical core within ``budget_tokens`` (as counted by ``estimate``).

        ``goal_stated``: the goal line only says it is unchanged
        (:data:`~latch.kernel.render.GOAL_STATED`), for a state update whose epoch's snapshot states it.

        The text names no revision or generation number, so it changes only when
        what it says does. Lines drop lowest priority first: the working set's commands and files,
        then notes, hypotheses, questions, plan, decisions, disproofs, running background processes,
        externally changed files, failure lineages, evidence, certification, then validation
        requirements and criteria, oldest line first within a section (:mod:`latch.kernel.render`).
        The working set (files read or changed, shell commands run) lists newest first.
        The goal (``set_goal``'s, else the first user instruction) and the latest user instruction (when it
        is a later one) are always rendered, each at most
        :data:`~latch.kernel.derive.INSTRUCTION_CHARS` characters. Goal, latest instruction and
        constraints never drop: when they alone exceed the budget,
        :class:`StateOverflow` is raised. An empty state renders ``""``. Cached
        per (budget, estimator); the cost is bounded by the rendered text, not by
        the history.
        """
        return self._core.render(budget_tokens, estimate, goal_stated)


def canonical_state(
    store: EventLog, session_id: str, until_seq: int | None = None, *, cache: KernelCache | None = None
) -> CanonicalState:
    """The canonical state of ``session_id`` (id or unique prefix) as of global ``until_seq`` (``None``: now).

    ``cache`` is the :class:`~latch.kernel.ledger.KernelCache` holding the derived facts and the
    rules they are derived with (default: :func:`~latch.kernel.ledger.default_cache`, the
    built-in rules; the host passes :func:`latch.host.kernel.kernel_cache`, which adds the plugins'
    rules). Incremental: the cached reducer of (store object, session) is extended by new
    facts; an ``until_seq`` earlier than its watermark rebuilds it. The revision
    is the number of state changes plus the workspace generation plus the
    visible and the stale disproofs, all as of ``until_seq``; states of equal
    revision share one :class:`_Core`. Raises ``KeyError`` for an unknown session.
    """
    ledger = ledger_for(store, cache, until_seq)
    sid = session_id if session_id in ledger.info else store.session(session_id).id
    with ledger.lock:
        until = ledger.watermark if until_seq is None else until_seq
        red = ledger.reducers.get(sid)
        if red is None or until < red.until:
            red = ledger.reducers[sid] = SessionReducer(sid)
            ledger.restore(store, sid)  # the facts an earlier reducer applied, derived again
        ws = ledger.workspace(store, sid)
        first, facts = ledger.held_facts(sid)
        red.advance(facts, ws, until, first=first)
        ledger.applied(sid, red.index)
        generation = ws.generation((until, END)) + ws.pending(until)
        visible, stale = ledger.disproof_counts(store, sid, until)
        revision = red.changes + generation + visible + stale
        core = red.core
        if core is None or core.revision != revision:
            core = red.issue(_Core(ledger, store, red, ws, until, generation, revision))
        return CanonicalState(core, until)


def workspace_generation(
    store: EventLog, session_id: str, until_seq: int | None = None, *, cache: KernelCache | None = None
) -> int:
    """The workspace generation :func:`canonical_state` reports as of global ``until_seq`` (``None``: now),
    without reducing the session's state: an earlier ``until_seq`` rebuilds nothing. Raises ``KeyError`` for an
    unknown session."""
    ledger = ledger_for(store, cache, until_seq)
    sid = session_id if session_id in ledger.info else store.session(session_id).id
    with ledger.lock:
        until = ledger.watermark if until_seq is None else until_seq
        ws = ledger.workspace(store, sid)
        return ws.generation((until, END)) + ws.pending(until)
