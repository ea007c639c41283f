"""Deterministic text rendering of the canonical core under a token budget.

Sections, top to bottom: title, goal, constraints (never dropped), success
criteria and required validations, validation evidence, certification, active
failure lineages, disproofs, decisions, plan, questions, files (least
recently touched first), hypotheses, notes. When the text exceeds the budget, lines drop lowest
priority first (notes, hypotheses, files, questions, plan, decisions,
disproofs, failures, evidence, certification, then criteria and requirements),
oldest line first within a section; a section header says how many lines it
lost, and a section that lost every line is named on a final ``Omitted`` line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .state import CanonicalState

__all__ = ["render_state"]


@dataclass
class _Section:
    tier: int
    title: str
    noun: str
    lines: list[str]


def _text(value: str) -> str:
    return value.strip().replace("\n", "\n  ")


def _fixed(state: "CanonicalState") -> tuple[list[str], list[str]]:
    head = [f"Canonical state (revision {state.revision}, workspace generation {state.generation})",
            f"Goal: {_text(state.goal) if state.goal else '(not set)'}"]
    active = [c for c in state.constraints if c["active"]]
    constraints = (["Constraints:"] + [f"- [{c['id']}] {_text(c['text'])}" for c in active]) if active else []
    return head, constraints


def _sections(s: "CanonicalState") -> list[_Section]:
    g = s.generation
    sections = [
        _Section(9, "Success criteria", "criteria",
                 [f"- [{k['id']}] [{'met' if k['met'] else ' '}] {_text(k['text'])}" for k in s.criteria]),
        _Section(9, "Required validations", "requirements",
                 [f"- [{r['id']}] {r['requirement']}" + (f" (command: {r['command']})"
                                                         if r["command"] and r["command"] != r["requirement"] else "")
                  for r in s.requirements]),
        _Section(7, f"Validation evidence (workspace at generation {g})", "evidence lines", [
            f"- {o['status']}: {o['requirement']} at generation {o['generation']}"
            + (" (current)" if o["current"] else f" (STALE: workspace is at generation {g})")
            + (f" — {o['summary']}" if o["status"] != "passed" and o["summary"] else "")
            for o in s.evidence]),
        _Section(8, "Certification", "certification lines",
                 ["- certified" if s.certification.get("certified") else
                  "- not certified: " + "; ".join(s.certification.get("reasons", []))]
                 if s.evidence or s.requirements or s.processes or s.blockers else []),
        _Section(6, "Active failure lineages", "failure lineages", [
            f"- {f['tool']} ×{f['count']}: {f['signature']}"
            + (f" — last: {f['excerpt']}" if f.get("excerpt") and f["excerpt"] != f["signature"] else "")
            for f in s.failures if f["active"]]),
        _Section(5, "Disproofs", "disproofs", [
            f"- [{d['id']}] {_text(d['claim'])} — not a real problem: {_text(d['reason'])}"
            + (f" (files: {', '.join(d['files'])})" if d["files"] else "")
            + (f" (evidence: {', '.join(d['evidence'])})" if d["evidence"] else "")
            + f" at generation {d['generation']}"
            + (f" — STALE: {d['stale_path'] or 'the workspace'} changed since" if d["stale"] else "")
            for d in s.disproofs]),
        _Section(4, "Decisions", "decisions", [
            f"- [{d['id']}] {_text(d['text'])}" + (f" (because {_text(d['rationale'])})" if d.get("rationale") else "")
            for d in s.decisions if d["active"]]),
        _Section(3, "Plan", "plan items", [f"- [{a['status']}] {_text(a['text'])}" for a in s.actions]),
        _Section(2, "Questions", "questions", [
            f"- [{q['id']}] {_text(q['text'])}" + (f" → answered: {_text(q['answer'])}" if q["answer"] else "")
            for q in s.questions]),
        _Section(1, "Files", "files", [_file_line(f) for f in sorted(s.files, key=_last_touch)]),
        _Section(0, "Hypotheses", "hypotheses", [
            f"- [{h['id']}] {_text(h['text'])}" if h["status"] == "active" else
            f"- [{h['id']}] REJECTED: {_text(h['text'])}" + (f" ({_text(h['reason'])})" if h.get("reason") else "")
            for h in s.hypotheses]),
        _Section(-1, "Notes", "notes", [f"- [{n['id']}] {_text(n['text'])}" for n in s.notes]),
    ]
    return [sec for sec in sections if sec.lines]


def _last_touch(f: dict) -> int:
    return max(f["last_read_seq"] or 0, f["last_write_seq"] or 0)


def _file_line(f: dict) -> str:
    parts = []
    if f["reads"]:
        parts.append(f"read ×{f['reads']}" + (f" (sha256 {f['sha256'][:12]}, {f['size']} bytes)"
                                               if f["sha256"] and f["size"] is not None else ""))
    if f["writes"]:
        parts.append(f"written ×{f['writes']}")
    if f["external_change"]:
        parts.append("EXTERNAL CHANGE: re-read before editing")
    elif f["changed_since_read"]:
        parts.append("changed since last read")
    return f"- {f['path']}: " + "; ".join(parts)


def _compose(head: list[str], constraints: list[str], sections: list[_Section], dropped: list[int],
             with_omitted: bool) -> str:
    out = head + constraints
    gone = []
    for sec, n in zip(sections, dropped):
        kept = sec.lines[n:]
        if not kept:
            gone.append(f"{len(sec.lines)} {sec.noun}")
            continue
        out.append(f"{sec.title} ({n} older omitted):" if n else f"{sec.title}:")
        out.extend(kept)
    if gone and with_omitted:
        out.append("Omitted for budget: " + ", ".join(gone))
    return "\n".join(out)


def render_state(state: "CanonicalState", budget_tokens: int, estimate: Callable[[str], int]) -> str:
    """See :meth:`latch.kernel.state.CanonicalState.render`."""
    from .state import StateOverflow

    if state.is_empty:
        return ""
    head, constraints = _fixed(state)
    fixed_tokens = estimate("\n".join(head + constraints))
    if fixed_tokens > budget_tokens:
        raise StateOverflow("goal and constraints alone exceed the state budget", {
            "goal_tokens": estimate(head[1]), "constraints_tokens": estimate("\n".join(constraints)),
            "budget_tokens": budget_tokens})
    sections = _sections(state)
    # the drop order: lowest tier first, oldest line first within a section
    order = [i for i in sorted(range(len(sections)), key=lambda i: sections[i].tier) for _ in sections[i].lines]

    def text_for(k: int, with_omitted: bool = True) -> str:
        dropped = [0] * len(sections)
        for i in order[:k]:
            dropped[i] += 1
        return _compose(head, constraints, sections, dropped, with_omitted)

    def fits(k: int) -> bool:
        return estimate(text_for(k)) <= budget_tokens

    if fits(0):
        return text_for(0)
    if not fits(len(order)):
        return text_for(len(order), with_omitted=False)  # head + constraints, which fit
    lo, hi = 0, len(order)  # fits(lo) is false, fits(hi) is true: find the fewest drops that fit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return text_for(hi)
