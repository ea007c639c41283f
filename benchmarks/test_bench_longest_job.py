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

``test_longest_job_count_cache``: the longest job (``LATCH_BENCH_FULL=1``: continuity on the Codex session at
``256k:32k:64k``, whose model gets the exact o200k estimator; else the example session at ``32k:4k:8k`` with
``o200k`` forced), each run in a fresh interpreter as a job process starts (``run_job``'s CPU seconds, the process's
imports aside), three ways in turn (the order reversed every other round), :data:`CACHE_ROUNDS` rounds: ``none`` without a count-cache file (what a job
did before ``latch bench`` passed its own); ``cold`` with an empty file (a first ``latch bench``: every text
counted, the vocabulary loaded, the counts written at the end); ``warm`` with the file ``cold`` wrote (a later
``latch bench``: no text counted, no vocabulary loaded; the file written by the benchmark's own run, a cold one). ``extra_info``: ``cpu_seconds_*`` (median), ``ratio_warm``
and ``ratio_cold`` (over ``none``), ``vocabulary_loaded_*`` (whether quicktok was imported), ``kept_counts``; every
row is asserted the same (all fields but the timings and peak memory).

Run: ``python -m pytest benchmarks/test_bench_longest_job.py --benchmark-only`` (``LATCH_BENCH_FULL=1``: the
scenario's 3,000 events and the Codex session; else a 600-event scenario)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
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


CACHE_ROUNDS = 3 if FULL else 1
_JOB_PROCESS = """
import hashlib, json, sys, time
from latch.bench.runner import SessionSource, parse_budgets, run_job
spec = json.loads(sys.argv[1])
kwargs = {"count_cache": spec["count_cache"]} if spec["count_cache"] else {}
t = time.process_time()
row = run_job("continuity", SessionSource(**spec["source"]), parse_budgets(spec["budget"])[0], spec["estimator"], **kwargs)
cpu = time.process_time() - t
row.pop("seconds"); row.pop("peak_mb")
digest = hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()
print(json.dumps({"cpu": cpu, "row": digest, "loaded": "quicktok" in sys.modules, "estimator": row["estimator"]}))
"""


def _fresh_job(spec: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _JOB_PROCESS, json.dumps(spec)], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_longest_job_count_cache(benchmark, tmp_path):
    pytest.importorskip("latch_tiktoken.o200k")
    if FULL:
        source, budget, estimator = _source("codex"), "256k:32k:64k", None
    else:
        example = Path(__file__).resolve().parents[1] / "examples" / "invoice-rounding.claude.jsonl"
        source, budget, estimator = SessionSource(name="invoice", path=str(example)), "32k:4k:8k", "o200k"
    spec = {"source": {"name": source.name, "path": source.path}, "budget": budget, "estimator": estimator}
    warm = tmp_path / "warm.json"
    # the benchmark's own run: a cold job writing the file the warm ones read
    benchmark.pedantic(_fresh_job, args=({**spec, "count_cache": str(warm)},), rounds=1, iterations=1)
    cpu: dict[str, list[float]] = {"none": [], "cold": [], "warm": []}
    seen: dict[str, dict[str, Any]] = {}
    for k in range(CACHE_ROUNDS):
        for way in ("none", "cold", "warm") if k % 2 == 0 else ("warm", "cold", "none"):
            path = {"none": None, "cold": str(tmp_path / f"cold-{k}.json"), "warm": str(warm)}[way]
            seen[way] = _fresh_job({**spec, "count_cache": path})
            cpu[way].append(seen[way]["cpu"])
    assert seen["none"]["estimator"] == "o200k"
    assert seen["none"]["row"] == seen["cold"]["row"] == seen["warm"]["row"]
    assert seen["cold"]["loaded"] and not seen["warm"]["loaded"]
    med = {way: statistics.median(s) for way, s in cpu.items()}
    benchmark.extra_info.update(
        session=source.name,
        budget=budget,
        **{f"cpu_seconds_{way}": round(v, 3) for way, v in med.items()},
        **{f"vocabulary_loaded_{way}": seen[way]["loaded"] for way in cpu},
        ratio_warm=round(med["warm"] / med["none"], 3),
        ratio_cold=round(med["cold"] / med["none"], 3),
        kept_counts=len(json.loads(warm.read_text(encoding="utf-8"))["counts"]),
    )
