"""``latch bench``'s results summed up: one row per (engine, budget) and the cost-vs-coverage frontier.

The rows' figures are those of the report table (:mod:`latch.bench.report`); the per-job fields they sum are
described in :mod:`latch.bench.runner`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

__all__ = ["summarize", "frontier_points", "frontier_order"]


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def summarize(results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (engine, budget): the figures of the report table (see :mod:`latch.bench.runner`), in
    :func:`frontier_order`."""
    results = list(results)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["engine"], r["budget"]), []).append(r)
    answered = _answered_by_all(results)
    rows = []
    for (engine, budget), rs in groups.items():
        ok = [r for r in rs if "error" not in r]
        same_needed = same_present = 0
        same_usd: float | None = None
        same_requests = 0
        for r in ok:
            common = answered.get((budget, r["session"]), set())
            same_requests += len(common)
            for i in common:
                c = (r.get("coverage_counts") or [None] * (i + 1))[i]
                if c is not None:
                    same_needed, same_present = same_needed + c[0], same_present + c[1]
                usd = r["cost"][i]
                if usd is not None:
                    same_usd = (same_usd or 0.0) + usd
        toks = [t for r in ok for t in r["tokens"] if t is not None]
        cache = [c for r in ok for c in r["cacheability"] if c is not None]
        secs = [s for r in ok for s in r["seconds"]]
        got = sum(r["survival"][k][0] for r in ok for k in r["survival"])
        checked = sum(r["survival"][k][1] for r in ok for k in r["survival"])
        peaks = [r["peak_mb"] for r in ok if r.get("peak_mb") is not None]
        needed_present = (sum(r.get("coverage_needed", 0) for r in ok), sum(r.get("coverage_present", 0) for r in ok))
        touched = sum(r.get("working_set_touched", 0) for r in ok)
        written = sum(r.get("cache_write_tokens", 0) for r in ok)
        paid = [r for r in ok if r.get("cost_usd") is not None]
        usd_total = sum(r["cost_usd"] for r in paid) if paid else None
        reads = sum(r["cost_cache_read_tokens"] for r in paid)
        prompt = sum(r["cost_input_tokens"] for r in paid)
        rows.append(
            {
                "engine": engine,
                "budget": budget,
                "estimators": ", ".join(sorted({r["estimator"] for r in ok if r.get("estimator")})) or None,
                "sessions": len(ok),
                "errors": len(rs) - len(ok),
                "requests": sum(r["requests"] for r in ok),
                "tokens_per_request": round(statistics.fmean(toks)) if toks else None,
                "tokens_total": sum(toks),
                "cacheability_median": round(statistics.median(cache), 3) if cache else None,
                "cacheability_p10": round(cast(float, _pct(cache, 0.10)), 3) if cache else None,
                "needle_survival": round(got / checked, 3) if checked else None,
                "needle_checks": checked,
                "coverage": round(needed_present[1] / needed_present[0], 3) if needed_present[0] else None,
                "coverage_needed": needed_present[0],
                "same_requests": same_requests,
                "coverage_same_requests": round(same_present / same_needed, 3) if same_needed else None,
                "cost_usd_same_requests": round(same_usd, 6) if same_usd is not None else None,
                "working_set_coverage": round(sum(r.get("working_set_named", 0) for r in ok) / touched, 3)
                if touched
                else None,
                "rewrite_waste": round(sum(r.get("rewrite_write_tokens", 0) for r in ok) / written, 3)
                if written
                else None,
                "tokens_per_session": round(sum(toks) / len(ok)) if ok else None,
                "protocol_invalid": sum(len(r["protocol_invalid"]) for r in ok),
                "budget_violations": sum(len(r["budget_violations"]) for r in ok),
                "refused": sum(r["refused"] for r in ok),
                "materialize_p50_ms": round(1000 * cast(float, _pct(secs, 0.5)), 2) if secs else None,
                "materialize_p99_ms": round(1000 * cast(float, _pct(secs, 0.99)), 2) if secs else None,
                "peak_mb": max(peaks) if peaks else None,
                "cost_usd_total": round(usd_total, 6) if usd_total is not None else None,
                "cost_usd_per_session": round(usd_total / len(paid), 6) if usd_total is not None else None,
                "cache_read_share": round(reads / prompt, 4) if prompt else None,
                "priced_sessions": len(paid),
            }
        )
    return frontier_order(rows, results)


def _answered_by_all(results: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], set[int]]:
    """``{(budget, session): request indices every engine's view answered}``: the like-for-like request set of a
    budget (a request one engine refused counts for none), over the sessions every engine ran without error."""
    runs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    engines: dict[str, set[str]] = {}
    for r in results:
        engines.setdefault(r["budget"], set()).add(r["engine"])
        if "error" not in r:
            runs.setdefault((r["budget"], r["session"]), []).append(r)
    out = {}
    for (budget, session), rs in runs.items():
        if {r["engine"] for r in rs} != engines[budget]:
            continue
        n = min(len(r["tokens"]) for r in rs)
        out[(budget, session)] = {i for i in range(n) if all(r["tokens"][i] is not None for r in rs)}
    return out


def frontier_order(rows: list[dict[str, Any]], results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (:func:`summarize`) with ``"frontier"`` set and sorted by it, budget by budget (in the order the
    budgets first appear): the cost-vs-coverage frontier's rows (:func:`frontier_points`: ``"yes"``) cheapest
    first, then the dominated ones (``"no"``), then those that refused more requests than the fewest any engine
    refused at that budget (``"refuses"``), then the
    unpriced or uncovered (``None``), each group by total dollars then engine."""
    points = {(p["engine"], p["budget"]): p for p in frontier_points(list(results))}
    order = {b: i for i, b in enumerate(dict.fromkeys(r["budget"] for r in rows))}
    rank = {"yes": 0, "no": 1, "refuses": 2, None: 3}
    for r in rows:
        p = points.get((r["engine"], r["budget"]))
        r["frontier"] = None if p is None else "yes" if p["pareto"] else "refuses" if p["refuses_more"] else "no"
    return sorted(
        rows,
        key=lambda r: (
            order[r["budget"]],
            rank[r["frontier"]],
            r["cost_usd_total"] if r["cost_usd_total"] is not None else math.inf,
            r["engine"],
        ),
    )


def frontier_points(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cost-vs-coverage frontier's points: one per (engine, budget) with a priced job and needed context,
    ``{"engine", "budget", "usd": total dollars over its sessions (cache-aware), "coverage": pooled needed-context
    coverage (present / needed identifiers, :mod:`latch.bench.coverage`), "sessions", "refused": requests refused
    with ContextOverflow, "refuses_more": it refused more than the fewest any engine refused at this budget,
    "pareto": not ``refuses_more`` and no other such point of the same budget has coverage at least as high for
    at most the dollars, one of them strictly better}``, in engine then budget order of appearance. A point that
    refuses more requests than another is never on the frontier: its dollars and coverage are over the requests
    it answered only (``raw-history`` once the conversation outgrows the budget); a request no engine can answer
    (a single tool result above the hard limit) disqualifies none. Failed jobs are left out."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        if "error" not in r:
            groups.setdefault((r["engine"], r["budget"]), []).append(r)
    points = []
    for (engine, budget), rs in groups.items():
        paid = [r["cost_usd"] for r in rs if r.get("cost_usd") is not None]
        needed = sum(r.get("coverage_needed", 0) for r in rs)
        if not paid or not needed:
            continue
        points.append(
            {
                "engine": engine,
                "budget": budget,
                "usd": float(sum(paid)),
                "coverage": sum(r.get("coverage_present", 0) for r in rs) / needed,
                "sessions": len(rs),
                "refused": sum(r.get("refused", 0) for r in rs),
            }
        )
    fewest: dict[str, int] = {}
    for p in points:
        fewest[p["budget"]] = min(fewest.get(p["budget"], p["refused"]), p["refused"])
    for p in points:
        p["refuses_more"] = p["refused"] > fewest[p["budget"]]
    answering = [p for p in points if not p["refuses_more"]]
    for p in points:
        p["pareto"] = not p["refuses_more"] and not any(
            q is not p
            and q["budget"] == p["budget"]
            and q["coverage"] >= p["coverage"]
            and q["usd"] <= p["usd"]
            and (q["coverage"], -q["usd"]) != (p["coverage"], -p["usd"])
            for q in answering
        )
    return sorted(points, key=lambda p: p["engine"])
