"""Jobs per second: ``latch bench``'s local process pool against a 2-worker Dask cluster, in the same run.

The same plan (continuity over six generated scenario sessions of 150 events, one budget: 6 jobs) runs
through :func:`latch.bench.runner.run_bench` twice: locally (``jobs=2``, a fresh process per job) and on a
real ``dask scheduler`` with two single-threaded ``dask worker`` processes on 127.0.0.1
(``scheduler="tcp://..."``, each job in its own child process of the worker). Both use this machine's two
cores, so the cluster cannot be faster here; the benchmark measures what the cluster path costs on top.
Goal: cluster jobs/s at least half the local jobs/s (``extra_info["cluster_to_local"]`` >= 0.5, asserted when
timings are collected, not under ``--benchmark-disable``);
the rows are the same (timings and peak memory aside).

Run: ``python -m pytest benchmarks/test_bench_cluster_rate.py --benchmark-only``
"""

from __future__ import annotations

import time

import pytest
from dask_support import dask_cluster

from latch.bench.runner import Budget, SessionSource, run_bench

pytest.importorskip("distributed", reason="pip install 'latch[cluster]'")

SESSIONS = [SessionSource(name=f"scenario-{seed}-150", seed=seed, events=150) for seed in range(6)]
BUDGETS = [Budget("32k:4k:8k", 32_000, 4_000, 8_000)]
TARGET = 0.5


def _timed(**kw):
    start = time.perf_counter()
    rows = run_bench(["continuity"], SESSIONS, BUDGETS, jobs=2, **kw)
    return rows, time.perf_counter() - start


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "peak_mb")} for r in rows]


def test_jobs_per_second_local_vs_cluster(benchmark, tmp_path):
    local, local_s = _timed()
    with dask_cluster(tmp_path, 2) as (address, _):
        cluster, cluster_s = benchmark.pedantic(_timed, kwargs={"scheduler": address}, rounds=1, iterations=1)
    assert [r["error"] for r in local + cluster if "error" in r] == []
    assert _strip(cluster) == _strip(local)
    n = len(local)
    ratio = (n / cluster_s) / (n / local_s)
    benchmark.extra_info.update(
        jobs=n,
        local_jobs_per_s=round(n / local_s, 3),
        cluster_jobs_per_s=round(n / cluster_s, 3),
        cluster_to_local=round(ratio, 3),
        target=TARGET,
    )
    print(f"\n{n} jobs: local {n / local_s:.2f} jobs/s, 2-worker cluster {n / cluster_s:.2f} jobs/s ({ratio:.2f}x)")
    if not benchmark.disabled:
        assert ratio >= TARGET
