"""The longest ``latch bench`` jobs, per request: the continuity engine on the generated scenario at ``32k:4k:8k`` (the
job that bounds a run's makespan at 16 workers) and on the Codex corpus session at ``256k:32k:64k``, with the kept
rows and schemas a job now uses (``path="kept"``: each request body's tool schemas unmarshalled from the form kept per
tool list, :data:`latch.providers._wire.KEEP_TOOLS`; recall's listed rows' lower-cased texts and call/result partners
kept per engine, :data:`latch.engine.recall.KEEP_ROWS`; an AND whose terms' fully fetched rows share none answered
without its store search, :data:`latch.engine.recall_search.AND_FROM_KEPT`) against the path before
(``path="per_request"``: every body's schemas copied by ``_plain``, every row's text and partners made again at every
recall, every such AND searched), in one run.

Both paths give the same row (every field but the timings and peak memory: asserted), and both rebuild the scenario's
text pools per job (:func:`latch.bench.scenario.scenario_pools` emptied first, as in a fresh job process);
``pools_seconds`` is that build alone. The paths alternate, :data:`ROUNDS` rounds each. ``extra_info``:
``request_ms_*`` (a job's CPU seconds over its requests, median round), ``ratio_to_per_request`` (kept over
per_request), ``requests``.

On this 2-core box shared with other work (load 1.6-2.7; one run, ``LATCH_BENCH_FULL=1``): the scenario at
``32k:4k:8k`` 6.79 -> 5.74 ms per request (ratio 0.845, 896 requests), Codex at ``256k:32k:64k`` 8.71 -> 8.06 ms
(0.926, 174 requests); the pools 0.10 s (drawn by the ``random.Random`` calls one line at a time: 0.18 s).

What the flags cannot switch off (the store's kept match expressions and phrases, the plan's order of checks, the
coverage probe's word skip, the pools' drawing) is in a comparison with the base commit 79795a5 in its own install:
the job's CPU seconds (``run_job`` in a fresh interpreter), base then this branch, three rounds back to back, median:
the scenario at ``32k:4k:8k`` 6.82 -> 5.92 s (0.87), Codex at ``256k:32k:64k`` 2.42 -> 1.97 s (0.81, each including
the 0.5 s load of the o200k vocabulary), every row identical (all fields but the timings and peak memory).

Run: ``python -m pytest benchmarks/test_bench_longest_job.py --benchmark-only`` (``LATCH_BENCH_FULL=1``: the
scenario's 3,000 events and the Codex session; else a 600-event scenario)
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from latch import hotpaths
from latch.bench import scenario
from latch.bench.runner import SessionSource, parse_budgets, run_job
from latch.engine import recall, recall_search
from latch.providers import _wire

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
ROUNDS = 2
CORPUS = (Path(__file__).resolve().parents[1].parent / "shared" / "corpus").resolve()
CODEX = CORPUS / "codex" / "edgerunner_codex-session.jsonl"
JOBS = [("scenario", "32k:4k:8k")] + ([("codex", "256k:32k:64k")] if FULL else [])


def _source(name: str) -> SessionSource:
    if name == "scenario":
        events = 3_000 if FULL else 600
        return SessionSource(name=f"scenario-0-{events}", seed=0, events=events)
    if not CODEX.is_file():
        pytest.skip(f"needs the corpus session {CODEX}")
    return SessionSource(name="codex/edgerunner_codex-session.jsonl", path=str(CODEX))


def _set_path(path: str) -> None:
    kept = path == "kept"
    _wire.KEEP_TOOLS = kept
    recall.KEEP_ROWS = kept
    recall_search.AND_FROM_KEPT = kept


def _job(source: SessionSource, budget: str) -> tuple[dict[str, Any], float]:
    scenario.scenario_pools.cache_clear()  # (a fresh job process builds the pools)
    t = time.process_time()
    row = run_job("continuity", source, parse_budgets(budget)[0])
    cpu = time.process_time() - t
    row.pop("seconds")
    row.pop("peak_mb")
    return row, cpu


@pytest.mark.parametrize(("session", "budget"), JOBS)
def test_longest_job_per_request(benchmark, session, budget, monkeypatch):
    source = _source(session)
    monkeypatch.setattr(_wire, "KEEP_TOOLS", _wire.KEEP_TOOLS)
    monkeypatch.setattr(recall, "KEEP_ROWS", recall.KEEP_ROWS)
    monkeypatch.setattr(recall_search, "AND_FROM_KEPT", recall_search.AND_FROM_KEPT)
    # the benchmark's row first: it loads what a job loads once per process (an exact estimator's vocabulary)
    _set_path("kept")
    benchmark.pedantic(_job, args=(source, budget), rounds=1, iterations=1)
    seconds: dict[str, list[float]] = {"per_request": [], "kept": []}
    rows: dict[str, dict[str, Any]] = {}
    for _ in range(ROUNDS):
        for path in seconds:
            _set_path(path)
            rows[path], cpu = _job(source, budget)
            seconds[path].append(cpu)
    assert rows["kept"] == rows["per_request"] and rows["kept"]["requests"] > 0
    requests = rows["kept"]["requests"]
    pools = 0.0
    if source.seed is not None:
        t = time.process_time()
        scenario.scenario_pools.__wrapped__(source.seed, scenario.ScenarioModel.POOL_CHARS)
        pools = time.process_time() - t
    ms = {path: round(statistics.median(s) / requests * 1e3, 3) for path, s in seconds.items()}
    benchmark.extra_info.update(
        session=source.name,
        budget=budget,
        backend=hotpaths.BACKEND,
        requests=requests,
        request_ms_per_request=ms["per_request"],
        request_ms_kept=ms["kept"],
        ratio_to_per_request=round(statistics.median(seconds["kept"]) / statistics.median(seconds["per_request"]), 3),
        pools_seconds=round(pools, 3),
    )
