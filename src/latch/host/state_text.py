"""The canonical state and its validation evidence as ``latch state`` and ``latch evidence`` print them, for the
CLI, the TUI and the web alike (spec: "Sessions & continuity").

* :func:`state_summary`: the state's counts (``latch.host.reducers`` re-exports it);
* :func:`summary_line`: the state's counts on one line, numbers with thousands separators;
* :func:`state_lines`: what ``latch state SESSION`` prints: a head line, the counts, then the rendered state
  (:meth:`latch.kernel.state.CanonicalState.render`: goal, evidence, certification, failures, working set);
* :func:`evidence_status` / :func:`evidence_lines`: what ``latch evidence SESSION`` prints: each requirement
  (newest set first) with its status, generation, current or STALE and the set (the seq of the run that proved
  it), the command of each set, the managed processes still running, and the verdict (``CERTIFIED`` or ``NOT
  CERTIFIED`` with its reasons).

Strings are raw transcript text: make them :func:`latch.textsafe.safe` before printing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import hotpaths  # the backend resolves at first use, not at import

__all__ = [
    "canonical_view",
    "state_summary",
    "summary_line",
    "state_lines",
    "evidence_status",
    "evidence_lines",
    "CERTIFIED",
    "NOT_CERTIFIED",
]

CERTIFIED = "verdict: CERTIFIED (every required validation passed at the current generation)"
NOT_CERTIFIED = "verdict: NOT CERTIFIED"
WHOLE_STATE_TOKENS = 10**9
"""The render budget of :func:`state_lines` without one: everything."""


def state_summary(state: Any) -> dict[str, Any]:
    """The counts of a canonical state (:func:`latch.kernel.canonical_state`, or its ``to_json()`` dict as
    ``latch state --json`` prints it): ``{"goal", "revision", "generation", "files", "files_observed",
    "files_written", "mutations", "validation_runs", "requirements", "requirements_current", "failures",
    "failures_active", "processes", "processes_running", "tombstoned"}``."""

    def get(name: str) -> Any:
        return state[name] if isinstance(state, Mapping) else getattr(state, name)

    files, evidence_, failures, processes = get("files"), get("evidence"), get("failures"), get("processes")
    return {
        "goal": get("goal"),
        "revision": get("revision"),
        "generation": get("generation"),
        "files": len(files),
        "files_observed": sum(1 for f in files if f["reads"]),
        "files_written": sum(1 for f in files if f["writes"]),
        "mutations": get("mutations"),
        "validation_runs": get("validation_runs"),
        "requirements": len(evidence_),
        "requirements_current": sum(1 for o in evidence_ if o["current"]),
        "failures": len(failures),
        "failures_active": sum(1 for f in failures if f["active"]),
        "processes": len(processes),
        "processes_running": sum(1 for p in processes if p["running"]),
        "tombstoned": bool(get("tombstoned")),
    }


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def summary_line(state: Any) -> str:
    """The derived-state counts of one session on one line (:func:`state_summary`)."""
    s = state_summary(state)
    return (
        f"files {s['files']:,} ({s['files_observed']:,} observed, {s['files_written']:,} written) · mutations "
        f"{s['mutations']:,} · generation {s['generation']:,} · validations "
        f"{_plural(s['validation_runs'], 'run')}, {_plural(s['requirements'], 'requirement')} "
        f"({s['requirements_current']:,} current) · failures {_plural(s['failures'], 'lineage')} "
        f"({s['failures_active']:,} active) · processes {s['processes']:,} ({s['processes_running']:,} running)"
    )


def state_lines(state: Any, budget: int | None = None) -> list[str]:
    """The lines ``latch state`` prints for ``state`` (a :class:`latch.kernel.state.CanonicalState`):
    ``session ID · revision N`` (`` · TOMBSTONED``), :func:`summary_line`, then the state rendered within
    ``budget`` estimated tokens (everything when ``None``; ``(empty state)`` when it renders nothing). Raises
    :class:`latch.kernel.StateOverflow` when the state does not fit ``budget``."""
    head = f"session {state.session_id} · revision {state.revision:,}" + (" · TOMBSTONED" if state.tombstoned else "")
    text = state.render(budget or WHOLE_STATE_TOKENS, hotpaths.estimate_tokens)
    return [head, summary_line(state), *(text.splitlines() if text.strip() else ["(empty state)"])]


def evidence_status(state: Any) -> dict[str, Any]:
    """``latch evidence``'s content: ``{"generation", "requirements": [{"requirement", "status", "generation",
    "current", "set"}] (newest first), "sets": [{"seq", "command"}] (by seq; the command's whitespace collapsed),
    "running": [{"process_id", "started_seq", "command"}], "certified", "verdict", "reasons"}``."""
    rows: list[dict[str, Any]] = []
    sets: dict[int, str] = {}
    for o in reversed(state.evidence):
        rows.append(
            {
                "requirement": o["requirement"],
                "status": o["status"],
                "generation": o["generation"],
                "current": bool(o["current"]),
                "set": o["seq"],
            }
        )
        sets.setdefault(o["seq"], " ".join(o["command"].split()))
    cert = state.certification
    return {
        "generation": state.generation,
        "requirements": rows,
        "sets": [{"seq": seq, "command": cmd} for seq, cmd in sorted(sets.items())],
        "running": [
            {"process_id": p["process_id"], "started_seq": p["started_seq"], "command": p["command"]}
            for p in state.processes
            if p["running"]
        ],
        "certified": bool(cert["certified"]),
        "verdict": CERTIFIED if cert["certified"] else NOT_CERTIFIED,
        "reasons": [] if cert["certified"] else list(cert["reasons"]),
    }


def evidence_lines(report: dict[str, Any]) -> list[str]:
    """:func:`evidence_status` as plain lines (the requirements one a line, not ``latch evidence``'s table):
    ``evidence · workspace generation N``, ``- REQUIREMENT: STATUS at generation G, current|STALE (set S)``, or
    ``(no validation recorded)``, then ``set S proved by: COMMAND``, the running processes, the verdict and its
    reasons."""
    out = [f"evidence · workspace generation {report['generation']:,}"]
    out += [
        f"- {r['requirement']}: {r['status']} at generation {r['generation']:,}, "
        f"{'current' if r['current'] else 'STALE'} (set {r['set']})"
        for r in report["requirements"]
    ]
    if not report["requirements"]:
        out.append("(no validation recorded)")
    out += [f"set {s['seq']} proved by: {s['command']}" for s in report["sets"]]
    out += [
        f"managed process {p['process_id']} running since seq {p['started_seq']}: {p['command']}"
        for p in report["running"]
    ]
    out.append(report["verdict"])
    out += [f"  - {reason}" for reason in report["reasons"]]
    return out


def canonical_view(state: Any) -> dict[str, Any]:
    """What the TUI and the web show of the canonical state: ``{"lines": state_lines(state), "evidence":
    evidence_status(state)}`` (:func:`latch.host.reducers.session_view`'s ``canonical``)."""
    return {"lines": state_lines(state), "evidence": evidence_status(state)}
