"""``latch stress`` memory: the peak RSS of the process that materializes, and how much more it takes per 10^5 events.

The goal (spec: "Stress guarantees" at the spec's volume): a run of 10^6 events peaks at most :data:`PEAK_GOAL_MB`,
so what the engine, the request loop and the checks keep must be bounded by the window, not the history. This
benchmark runs the real command twice in subprocesses, both with a producer process (as every run from 50,000
events does), at :data:`SIZES` events (``LATCH_BENCH_FULL=1``: :data:`FULL_SIZES`), and reports in ``extra_info``:

* ``peak_rss_mb_<N>``: the command's own peak RSS (``peak_rss_mb`` of its JSON; the producer is apart);
* ``growth_mb_per_1e5_events``: ``(peak at the larger N - peak at the smaller N)`` per 10^5 events;
* ``projected_peak_mb_at_1e6``: the larger run's peak plus that growth up to 10^6 events (not asserted; the goal
  is :data:`PEAK_GOAL_MB`).

Always asserted (no timing): both runs pass every check of ``latch stress``.

Measured on this shared 2-core machine (heavily loaded), the two commits back to back at 20,000 and 60,000 events:
before, peak 94.9 MB and 122.5 MB, 69.0 MB per 10^5 events; after (the request loop's line cache holds the last
view's messages only, its unit map only units of several events), 92.9 MB and 117.4 MB, 61.2 MB per 10^5 events. The
rest grows with the engine's episode index (closed episodes' term ids), the kernel ledger's facts and the canonical
state's command table, and the recall cache up to its 16,384 rendered originals.

Run: ``python -m pytest benchmarks/test_bench_stress_memory.py --benchmark-only``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
SIZES = (20_000, 60_000)
FULL_SIZES = (100_000, 300_000)
SMOKE_SIZES = (2_000, 6_000)
"""With ``--benchmark-disable`` (CI runs every benchmark once): the same command and checks, small."""
PEAK_GOAL_MB = 500
"""Peak RSS of ``latch stress --events 1000000`` the issue asks for (reported against, not asserted)."""


def _stress(events: int, out: Path) -> dict:
    res = subprocess.run(
        [sys.executable, "-m", "latch", "stress", "--events", str(events), "--producer", "--json-out", str(out)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["ok"] is True and doc["stored_events"] >= events
    return doc


def _runs(tmp: Path, sizes: tuple[int, int]) -> dict[int, dict]:
    return {n: _stress(n, tmp / f"stress-{n}.json") for n in sizes}


def test_stress_memory_growth(benchmark, tmp_path):
    sizes = FULL_SIZES if FULL else SMOKE_SIZES if benchmark.disabled else SIZES
    docs = benchmark.pedantic(_runs, args=(tmp_path, sizes), rounds=1, iterations=1)
    (small, a), (large, b) = sorted(docs.items())
    growth = (b["peak_rss_mb"] - a["peak_rss_mb"]) * 100_000 / (large - small)
    benchmark.extra_info.update(
        {f"peak_rss_mb_{n}": d["peak_rss_mb"] for n, d in docs.items()},
        **{f"seconds_{n}": d["seconds"] for n, d in docs.items()},
        growth_mb_per_1e5_events=round(growth, 1),
        projected_peak_mb_at_1e6=round(b["peak_rss_mb"] + growth * (1_000_000 - large) / 100_000),
        peak_goal_mb=PEAK_GOAL_MB,
    )
