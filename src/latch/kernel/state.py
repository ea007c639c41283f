"""L1 canonical state: a pure reduction of the event log (spec: "Sessions & continuity").

:func:`canonical_state` reduces one session's kernel records and derived facts
(goal, constraints, decisions, hypotheses, notes, questions, actions, criteria,
validation requirements, files, evidence, failure lineages, managed processes,
writer blockers) together with its workspace's generation and disproofs into a
:class:`CanonicalState` snapshot. Each snapshot is the complete current state
at its ``revision``; a higher revision is current truth.

Incremental: one :class:`SessionReducer` per (store path, session) is cached
with a ``seq`` watermark and only extended by newer facts; asking for an
earlier ``until_seq`` rebuilds it from the log.

Certification (spec: "Sessions & continuity", "Port boundary"): only a Passed
observation at the *current* workspace generation certifies a requirement;
a managed process that was running at or after that observation blocks it until
the process exits and validation is rerun; an unchanged writer blocker (same
text, no mutation since) is a failed certification attempt whatever its command said.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.port import ContextOverflow
from .derive import ActionsReplaced, ToolFailure, ToolSuccess
from .events import (ExternalChange, FileObservation, Mutation, ProcessExited, ProcessStarted, StateUpdate,
                     Tombstone, ValidationEvidence, WriterBlocker)
from .ledger import END, Disproof, Ledger, Workspace, ledger_for

__all__ = ["CanonicalState", "StateOverflow", "SessionReducer", "canonical_state", "requirement_key"]


class StateOverflow(ContextOverflow):
    """Goal and constraints alone exceed the state budget; ``breakdown`` has their tokens."""


def requirement_key(text: str) -> str:
    """The exact-requirement key of a command or requirement text (whitespace collapsed)."""
    return " ".join(text.split())


def _sig(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


class SessionReducer:
    """The accumulated state of one session through ``self.until`` (a global seq)."""

    def __init__(self, session_id: str):
        self.session_id = session_id
        self.index = 0
        self.until = 0
        self.changes = 0
        self.tombstoned = False
        self.counters: dict[str, int] = {}
        self.goal: dict[str, Any] | None = None
        self.constraints: dict[str, dict[str, Any]] = {}
        self.decisions: dict[str, dict[str, Any]] = {}
        self.hypotheses: dict[str, dict[str, Any]] = {}
        self.notes: dict[str, dict[str, Any]] = {}
        self.questions: dict[str, dict[str, Any]] = {}
        self.actions: dict[str, dict[str, Any]] = {}
        self.criteria: dict[str, dict[str, Any]] = {}
        self.requirements: dict[str, dict[str, Any]] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.observations: dict[str, dict[str, Any]] = {}
        self.validation_runs = 0
        self.mutations = 0
        self.failures: list[dict[str, Any]] = []  # every streak, in the order it started
        self.streak: dict[tuple[str, str], dict[str, Any]] = {}  # the latest streak of each (tool, signature)
        self.processes: dict[str, dict[str, Any]] = {}
        self.blockers: list[dict[str, Any]] = []
        self.last_set: tuple[int, int] | None = None

    def _id(self, prefix: str) -> str:
        self.counters[prefix] = self.counters.get(prefix, 0) + 1
        return f"{prefix}{self.counters[prefix]}"

    def advance(self, facts: list[tuple[tuple[int, int], Any]], ws: Workspace, until: int) -> None:
        """Apply the facts with ``seq <= until`` not applied yet."""
        while self.index < len(facts) and facts[self.index][0][0] <= until:
            pos, fact = facts[self.index]
            if self._apply(pos, fact, ws):
                self.changes += 1
            self.index += 1
        self.until = max(self.until, until)

    # ------------------------------------------------------------------- apply
    def _apply(self, pos, fact, ws: Workspace) -> bool:
        if isinstance(fact, StateUpdate):
            return self._tool(pos, fact.tool, fact.arguments)
        if isinstance(fact, FileObservation):
            f = self._file(fact.path, pos)
            f["reads"] += 1
            f["last_read"] = pos
            if fact.sha256 is not None:
                f["sha256"], f["size"] = fact.sha256, fact.size
            f.pop("external_change", None)
            return True
        if isinstance(fact, Mutation):
            self.mutations += 1
            for path in fact.paths:
                f = self._file(path, pos)
                f["writes"] += 1
                f["last_write"] = pos
                f["written_generation"] = ws.generation(pos) + 1
                if fact.sha256_after is not None:
                    f["sha256"] = fact.sha256_after
            return True
        if isinstance(fact, ExternalChange):
            self._file(fact.path, pos)["external_change"] = pos
            return True
        if isinstance(fact, ValidationEvidence):
            self.validation_runs += 1
            generation = ws.generation(pos)
            for req in fact.requirements or (fact.command,):
                key = requirement_key(req)
                prev = self.observations.get(key)
                self.observations[key] = {
                    "requirement": key, "command": fact.command, "status": fact.status, "exit_code": fact.exit_code,
                    "generation": generation, "seq": pos[0], "pos": pos, "summary": fact.summary,
                    "attempts": (prev["attempts"] if prev else 0) + 1}
            self.last_set = pos
            return True
        if isinstance(fact, ToolFailure):
            key = (fact.tool, fact.signature)
            lin = self.streak.get(key)
            if lin is None or not lin["active"]:
                lin = self.streak[key] = {"tool": fact.tool, "signature": fact.signature, "count": 0,
                                          "first_seq": pos[0], "actions": [], "active": True}
                self.failures.append(lin)
            lin["count"] += 1
            lin["last_seq"] = pos[0]
            lin["excerpt"] = fact.excerpt
            lin["actions"].extend(a for a in fact.actions if a not in lin["actions"])
            return True
        if isinstance(fact, ToolSuccess):
            closed = False
            for lin in self.streak.values():
                if lin["active"] and lin["tool"] == fact.tool and any(a in lin["actions"] for a in fact.actions):
                    lin["active"], lin["closed_seq"] = False, pos[0]
                    closed = True
            return closed
        if isinstance(fact, ActionsReplaced):
            for key in [k for k, a in self.actions.items() if a["source"] == fact.source]:
                del self.actions[key]
            for text, status in fact.items:
                aid = self._id("A")
                self.actions[aid] = {"id": aid, "text": text, "status": status, "source": fact.source, "seq": pos[0]}
            return True
        if isinstance(fact, ProcessStarted):
            self.processes[fact.process_id] = {"process_id": fact.process_id, "command": fact.command,
                                               "started": pos, "exited": None, "exit_code": None}
            return True
        if isinstance(fact, ProcessExited):
            proc = self.processes.get(fact.process_id)
            if proc is None or proc["exited"] is not None:
                return False
            proc["exited"], proc["exit_code"] = pos, fact.exit_code
            return True
        if isinstance(fact, WriterBlocker):
            self.blockers.append({"blocker": fact.blocker, "signature": _sig(fact.blocker), "command": fact.command,
                                  "command_passed": fact.command_passed, "generation": ws.generation(pos),
                                  "seq": pos[0]})
            return True
        if isinstance(fact, Tombstone):
            self.tombstoned = True
            return True
        return False

    def _file(self, path: str, pos) -> dict[str, Any]:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = {"path": path, "reads": 0, "writes": 0, "first_seq": pos[0], "last_read": None,
                                    "last_write": None, "sha256": None, "size": None, "written_generation": None}
        return f

    def _tool(self, pos, tool: str, args: dict[str, Any]) -> bool:
        seq = pos[0]
        if tool == "set_goal":
            self.goal = {"text": args.get("goal", ""), "seq": seq}
        elif tool == "add_constraint":
            old = self.constraints.get(args.get("replaces", ""))
            cid = self._id("C")
            self.constraints[cid] = {"id": cid, "text": args.get("constraint", ""), "seq": seq, "active": True}
            if old:
                old["active"], old["replaced_by"] = False, cid
        elif tool == "record_decision":
            old = self.decisions.get(args.get("supersedes", ""))
            did = self._id("D")
            self.decisions[did] = {"id": did, "text": args.get("decision", ""), "rationale": args.get("rationale"),
                                   "seq": seq, "active": True}
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
                a = self.actions[aid] = {"id": aid, "text": args.get("action", ""), "status": "pending",
                                         "source": "plan_action", "seq": seq}
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
            if any(r["requirement"] == req for r in self.requirements.values()):
                return False
            vid = self._id("V")
            command = args.get("command")
            self.requirements[vid] = {"id": vid, "requirement": req, "seq": seq,
                                      "command": requirement_key(command) if command else None}
        elif tool != "record_disproof":  # disproofs live in the workspace ledger
            return False
        return True

    def find_hypothesis(self, ref: str) -> dict[str, Any] | None:
        """A hypothesis by id (``H3``) or exact text."""
        h = self.hypotheses.get(ref)
        if h is None:
            h = next((x for x in self.hypotheses.values() if x["text"] == ref), None)
        return h


# --------------------------------------------------------------------------- snapshot
def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "pos"}


@dataclass(frozen=True)
class CanonicalState:
    """The complete canonical state of one session at ``revision`` (see :func:`canonical_state`).

    ``generation`` is the workspace generation at ``until_seq``. Collections are
    JSON-ready dicts/lists in first-seen order; :meth:`to_json` returns them,
    :meth:`render` the deterministic text of the canonical core.
    """

    session_id: str
    until_seq: int
    revision: int
    generation: int
    tombstoned: bool = False
    goal: str | None = None
    constraints: tuple[dict[str, Any], ...] = ()
    decisions: tuple[dict[str, Any], ...] = ()
    hypotheses: tuple[dict[str, Any], ...] = ()
    notes: tuple[dict[str, Any], ...] = ()
    questions: tuple[dict[str, Any], ...] = ()
    actions: tuple[dict[str, Any], ...] = ()
    criteria: tuple[dict[str, Any], ...] = ()
    requirements: tuple[dict[str, Any], ...] = ()
    files: tuple[dict[str, Any], ...] = ()
    evidence: tuple[dict[str, Any], ...] = ()
    failures: tuple[dict[str, Any], ...] = ()
    processes: tuple[dict[str, Any], ...] = ()
    blockers: tuple[dict[str, Any], ...] = ()
    disproofs: tuple[dict[str, Any], ...] = ()
    certification: dict[str, Any] = field(default_factory=dict)
    mutations: int = 0
    validation_runs: int = 0

    @property
    def is_empty(self) -> bool:
        """True when there is nothing to render (no goal and every collection empty)."""
        return self.goal is None and not any((self.constraints, self.decisions, self.hypotheses, self.notes,
                                              self.questions, self.actions, self.criteria, self.requirements,
                                              self.files, self.evidence, self.failures, self.processes,
                                              self.blockers, self.disproofs))

    @property
    def active_failures(self) -> list[dict[str, Any]]:
        return [f for f in self.failures if f["active"]]

    def to_json(self) -> dict[str, Any]:
        """Everything as JSON-ready data (keys include revision, generation, files, evidence, failures, ...)."""
        return {
            "session_id": self.session_id, "until_seq": self.until_seq, "revision": self.revision,
            "generation": self.generation, "tombstoned": self.tombstoned, "goal": self.goal,
            "constraints": list(self.constraints), "decisions": list(self.decisions),
            "hypotheses": list(self.hypotheses), "notes": list(self.notes), "questions": list(self.questions),
            "actions": list(self.actions), "criteria": list(self.criteria), "requirements": list(self.requirements),
            "files": list(self.files), "evidence": list(self.evidence), "failures": list(self.failures),
            "processes": list(self.processes), "blockers": list(self.blockers), "disproofs": list(self.disproofs),
            "certification": dict(self.certification), "mutations": self.mutations,
            "validation_runs": self.validation_runs,
        }

    def render(self, budget_tokens: int, estimate: Callable[[str], int]) -> str:
        """Deterministic text of the canonical core within ``budget_tokens`` (as counted by ``estimate``).

        Lines drop lowest priority first: notes, hypotheses, files, questions,
        plan, decisions, disproofs, failure lineages, evidence, certification,
        then validation requirements and criteria, oldest line first within a
        section (:mod:`latch.kernel.render`). Goal and constraints never drop: when they alone exceed the
        budget, :class:`StateOverflow` is raised. An empty state renders ``""``.
        """
        from .render import render_state

        return render_state(self, budget_tokens, estimate)


def _certification(red: SessionReducer, generation: int, blockers: tuple[int, dict[str, Any] | None]) -> dict[str, Any]:
    """The verdict: certified only when every required observation passed at ``generation`` after
    every managed process exited, and no writer blocker is unchanged."""
    if red.requirements:
        keys = [(r["id"], r["command"] or r["requirement"]) for r in red.requirements.values()]
    elif red.last_set is not None:
        keys = [(None, k) for k, o in red.observations.items() if o["pos"] == red.last_set]
    else:
        keys = []
    reasons: list[str] = [] if keys else ["no validation evidence"]
    blocking: set[str] = set()
    for rid, key in keys:
        obs = red.observations.get(key)
        label = f"{rid} {key}" if rid else key
        if obs is None:
            reasons.append(f"{label}: never validated")
        elif obs["status"] != "passed":
            reasons.append(f"{label}: {obs['status']} at generation {obs['generation']}")
        elif obs["generation"] != generation:
            reasons.append(f"{label}: passed at generation {obs['generation']}, stale at generation {generation}")
        else:
            blocking.update(p["process_id"] for p in red.processes.values()
                            if p["exited"] is None or p["exited"] > obs["pos"])
    for p in red.processes.values():
        if p["exited"] is None:
            reasons.append(f"managed process {p['process_id']} is running")
        elif p["process_id"] in blocking:
            reasons.append(f"managed process {p['process_id']} exited after the validation; rerun it")
    attempts, blocker = blockers
    if blocker is not None:
        reasons.append(f"writer blocker unchanged ({attempts} failed certification attempt"
                       f"{'s' if attempts != 1 else ''}): {blocker['blocker']}")
    return {"certified": not reasons, "requirements": [k for _, k in keys], "reasons": reasons,
            "failed_attempts": attempts}


def _blocker_streak(red: SessionReducer, generation: int) -> tuple[int, dict[str, Any] | None]:
    """``(attempts, blocker)`` of the unchanged writer-blocker streak still active at ``generation``."""
    if not red.blockers or red.blockers[-1]["generation"] != generation:
        return 0, None
    last = red.blockers[-1]
    attempts = 0
    for b in reversed(red.blockers):
        if b["signature"] != last["signature"] or b["generation"] != generation:
            break
        attempts += 1
    return attempts, last


def snapshot(ledger: Ledger, store, red: SessionReducer, ws: Workspace, until: int) -> CanonicalState:
    generation = ws.generation((until, END))
    end = (until, END)
    files = []
    for f in red.files.values():
        entry = {k: v for k, v in f.items() if k not in ("last_read", "last_write", "external_change")}
        entry["last_read_seq"] = f["last_read"][0] if f["last_read"] else None
        entry["last_write_seq"] = f["last_write"][0] if f["last_write"] else None
        changed = ws.changed_after(f["path"], f["last_read"], end) if f["last_read"] else None
        entry["changed_since_read"] = changed is not None
        entry["external_change"] = "external_change" in f
        files.append(entry)
    evidence = sorted((dict(_strip(o), current=o["generation"] == generation) for o in red.observations.values()),
                      key=lambda o: (o["current"], o["seq"]))
    processes = [{"process_id": p["process_id"], "command": p["command"], "started_seq": p["started"][0],
                  "exited_seq": p["exited"][0] if p["exited"] else None, "exit_code": p["exit_code"],
                  "running": p["exited"] is None} for p in red.processes.values()]
    attempts, blocker = _blocker_streak(red, generation)
    failures = [dict(lin, actions=list(lin["actions"])) for lin in red.failures]
    if blocker is not None:
        failures.append({"tool": "writer_blocker", "signature": blocker["signature"], "count": attempts,
                         "first_seq": red.blockers[-attempts]["seq"], "last_seq": blocker["seq"],
                         "actions": [blocker["command"]] if blocker["command"] else [], "active": True,
                         "excerpt": blocker["blocker"]})
    disproofs = [_disproof_json(d, end, ws) for d in ledger.visible_disproofs(store, red.session_id, until)]
    revision = red.changes + generation + len(disproofs)
    return CanonicalState(
        session_id=red.session_id, until_seq=until, revision=revision, generation=generation,
        tombstoned=red.tombstoned, goal=red.goal["text"] if red.goal else None,
        constraints=tuple(dict(c) for c in red.constraints.values()),
        decisions=tuple(dict(d) for d in red.decisions.values()),
        hypotheses=tuple(dict(h) for h in red.hypotheses.values()),
        notes=tuple(dict(n) for n in red.notes.values()),
        questions=tuple(dict(q) for q in red.questions.values()),
        actions=tuple(dict(a) for a in red.actions.values()),
        criteria=tuple(dict(k) for k in red.criteria.values()),
        requirements=tuple(dict(r) for r in red.requirements.values()),
        files=tuple(files), evidence=tuple(evidence), failures=tuple(failures), processes=tuple(processes),
        blockers=tuple(dict(b) for b in red.blockers), disproofs=tuple(disproofs),
        certification=_certification(red, generation, (attempts, blocker)),
        mutations=red.mutations, validation_runs=red.validation_runs)


def _disproof_json(d: Disproof, end, ws: Workspace) -> dict[str, Any]:
    stale = d.stale_pos is not None and d.stale_pos <= end
    return {"id": d.id, "claim": d.claim, "reason": d.reason, "evidence": list(d.evidence), "files": list(d.files),
            "generation": d.generation, "session_id": d.session_id, "seq": d.pos[0], "stale": stale,
            "stale_seq": d.stale_pos[0] if stale else None,
            "stale_path": d.stale_path if stale else None}


def canonical_state(store, session_id: str, until_seq: int | None = None) -> CanonicalState:
    """The canonical state of ``session_id`` (id or unique prefix) as of global ``until_seq`` (``None``: now).

    Incremental: the cached reducer of (store path, session) is extended by new
    facts; an ``until_seq`` earlier than its watermark rebuilds it. Raises
    ``KeyError`` for an unknown session.
    """
    ledger = ledger_for(store)
    sid = session_id if session_id in ledger.info else store.session(session_id).id
    with ledger.lock:
        until = ledger.watermark if until_seq is None else until_seq
        red = ledger.reducers.get(sid)
        if red is None or until < red.until:
            red = ledger.reducers[sid] = SessionReducer(sid)
        ws = ledger.workspace(store, sid)
        red.advance(ledger.session_facts(sid), ws, until)
        return snapshot(ledger, store, red, ws, until)
