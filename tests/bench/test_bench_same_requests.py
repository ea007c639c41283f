"""``latch bench`` compares engines like for like: besides each engine's own figures, coverage and dollars over the
requests every engine at that budget answered (a request one engine refused counts for none)."""

from __future__ import annotations

import pytest
from corpus_support import REPO

from latch.bench.report import verdicts
from latch.bench.runner import Budget, SessionSource, run_job
from latch.bench.summary import summarize

EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
BUDGET = Budget("32k:4k:8k", 32_000, 4_000, 8_000)


def _refuse(job: dict, i: int) -> dict:
    """``job`` as run_job reports a request its engine refused (no view: no tokens, cost or coverage)."""
    job = {**job, **{k: list(job[k]) for k in ("tokens", "cost", "coverage", "coverage_counts", "cacheability")}}
    job["cost_usd"] -= job["cost"][i]
    for key in ("tokens", "cost", "coverage", "coverage_counts", "cacheability"):
        job[key][i] = None
    job["refused"] += 1
    return job


def test_coverage_and_dollars_are_also_compared_on_the_requests_every_engine_answered():
    pytest.importorskip("latch_baselines")
    source = SessionSource(name="invoice", path=str(EXAMPLE))
    mine = _refuse(run_job("continuity", source, BUDGET), 20)
    other = run_job("sliding-window", source, BUDGET)
    assert mine["refused"] == 1 and other["refused"] == 0
    rows = {r["engine"]: r for r in summarize([mine, other])}
    common = [i for i in range(28) if i != 20]
    for job in (mine, other):
        row = rows[job["engine"]]
        needed = sum(job["coverage_counts"][i][0] for i in common)
        present = sum(job["coverage_counts"][i][1] for i in common)
        assert row["same_requests"] == 27
        assert row["coverage_same_requests"] == round(present / needed, 3)
        assert row["cost_usd_same_requests"] == round(sum(job["cost"][i] for i in common), 6)
    # the request continuity refused is out of both sides: the baseline's own total still counts it
    assert rows["sliding-window"]["cost_usd_same_requests"] < rows["sliding-window"]["cost_usd_total"]
    assert rows["continuity"]["cost_usd_same_requests"] == pytest.approx(rows["continuity"]["cost_usd_total"])
    (line,) = verdicts(list(rows.values()))
    c, s = rows["continuity"], rows["sliding-window"]
    assert line.endswith(
        f"Like for like, on the 27 requests every engine answered: "
        f"{100 * c['coverage_same_requests']:.1f}% vs {100 * s['coverage_same_requests']:.1f}%, at "
        f"{c['cost_usd_same_requests'] / s['cost_usd_same_requests']:.0%} of its dollars."
    )
