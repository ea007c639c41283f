"""The fixed cost of one ``latch bench`` job: a job in its own fresh process against the same job in a warm one.

``latch bench`` and ``latch stress --shards`` run every task in a fresh process
(:func:`latch.bench.executor.run_tasks`), so a task's peak memory is its own. What a fresh process pays before the
job's own work (imports, numpy, the price table, the estimator's vocabulary, the engine's first view) is paid once
per job, and decides how far the bench scales with workers. Measured on one small job (the ``continuity`` engine
on the corpus's OpenHands session ``basic_gui_mode.json``, 5 requests, budget ``32k:4k:8k``), in ``extra_info``
(seconds, medians of :data:`ROUNDS`):

* ``cold_seconds``: per job, :func:`~latch.bench.executor.run_tasks` of :data:`ROUNDS` copies of the job with one
  worker (each in its own process, forked by the pool's worker, itself forked from the task server; the job, its
  result back), once the task server runs (started before, untimed: ``server_start_seconds``);
  ``single_run_seconds``: ``run_tasks`` of the one job (a new pool too);
* ``cold_marginal_seconds``: what one more job adds to a run: ``run_tasks`` of ``2 * ROUNDS`` copies less that of
  ``ROUNDS`` copies, over ``ROUNDS`` (the pool's start, paid once per command, cancels out), and
  ``cold_marginal_over_warm``;
* ``warm_seconds``: :func:`latch.bench.runner.run_job` again in this process (everything loaded);
* ``cold_over_warm`` = ``cold_seconds / warm_seconds``; goal at most :data:`COLD_TARGET`;
* page faults (minor: a page first written after the fork, copied from the warm process's or new) and CPU seconds
  (user and system), medians of :data:`ROUNDS`: ``cold_task_minor_faults`` and ``cold_task_cpu_seconds``, a task
  process's own from its fork to the end of its job (``getrusage`` in the task: the fork's copy-on-write of what the
  job touches, not the fork in the worker nor the task process's end), against ``warm_job_minor_faults`` and
  ``warm_job_cpu_seconds``, one warm job's in this process;
* a job for one session of a file of many (:data:`MANY`, the corpus's Aider history of 34 sessions), warm in this
  process: ``one_of_many_whole_file_seconds`` importing the whole file as each job did
  (:func:`~latch.bench.runner.run_job` without ``part``), ``one_of_many_parsed_once_seconds`` given the session
  parsed once at discovery (``part``, :func:`~latch.bench.runner.session_part`), and their ratio
  ``one_of_many_speedup``.

Always asserted (no timing): the cold job's row equals the warm one's (timings and memory aside).

Run: ``python -m pytest benchmarks/test_bench_job_start.py --benchmark-only``
"""

from __future__ import annotations

import resource
import statistics
import time
from pathlib import Path

import pytest

from latch.bench.executor import run_tasks
from latch.bench.runner import SessionSource, discover_sessions, parse_budgets, run_job, session_part

COLD_TARGET = 2.0
"""A job in a fresh task process may take at most this many times the same job in a warm process."""
ROUNDS = 5
SESSION = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "openhands" / "basic_gui_mode.json"
ENGINE = "continuity"
MANY = SESSION.parents[1] / "aider" / "opencoder.aider.chat.history.md"


def _stable(row: dict) -> dict:
    """A job's row without what differs from run to run (timings, memory)."""
    return {k: v for k, v in row.items() if not k.endswith(("_ms", "_mb", "seconds")) and "rss" not in k}


def _task() -> tuple[dict, tuple]:
    source = SessionSource(name=SESSION.name, path=str(SESSION))
    budget = parse_budgets("32k:4k:8k")[0]
    return {"engine": ENGINE, "session": source.name, "budget": budget.name}, (ENGINE, source, budget, None, {})


def _job_and_faults(*args: object) -> dict:
    """:func:`run_job` in a task process; its row with the process's minor page faults since its fork."""
    row = run_job(*args)  # type: ignore[arg-type]
    used = resource.getrusage(resource.RUSAGE_SELF)
    return {**row, "minor_faults": used.ru_minflt, "cpu_seconds": used.ru_utime + used.ru_stime}


def _faults(label: dict, args: tuple) -> dict[str, float]:
    rows = run_tasks(_job_and_faults, [(label, args)] * ROUNDS, jobs=1)
    assert all("error" not in r for r in rows), rows
    faults, cpu = [], []
    for _ in range(ROUNDS):
        before = resource.getrusage(resource.RUSAGE_SELF)
        run_job(*args)
        after = resource.getrusage(resource.RUSAGE_SELF)
        faults.append(after.ru_minflt - before.ru_minflt)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "cold_task_minor_faults": statistics.median(r["minor_faults"] for r in rows),
        "warm_job_minor_faults": statistics.median(faults),
        "cold_task_cpu_seconds": statistics.median(r["cpu_seconds"] for r in rows),
        "warm_job_cpu_seconds": statistics.median(cpu),
    }


def _measure() -> dict[str, float]:
    label, args = _task()
    start = time.perf_counter()
    first = run_tasks(run_job, [(label, args)], jobs=1)[0]  # starts the task server
    server = time.perf_counter() - start
    assert "error" not in first, first
    single: list[float] = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        row = run_tasks(run_job, [(label, args)], jobs=1)[0]
        single.append(time.perf_counter() - start)
    start = time.perf_counter()
    rows = run_tasks(run_job, [(label, args)] * ROUNDS, jobs=1)
    cold = (time.perf_counter() - start) / ROUNDS
    assert len({r["peak_mb"] is not None for r in rows}) == 1 and all("error" not in r for r in rows)
    start = time.perf_counter()
    run_tasks(run_job, [(label, args)] * (2 * ROUNDS), jobs=1)
    marginal = (time.perf_counter() - start - cold * ROUNDS) / ROUNDS
    run_job(*args)  # this process warms up
    warm: list[float] = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        local = run_job(*args)
        warm.append(time.perf_counter() - start)
    assert _stable(row) == _stable(local)
    return {
        **_faults(label, args),
        **_one_of_many(),
        "server_start_seconds": server,
        "cold_seconds": cold,
        "cold_marginal_seconds": marginal,
        "single_run_seconds": statistics.median(single),
        "warm_seconds": statistics.median(warm),
    }


def _one_of_many() -> dict[str, float]:
    if not MANY.is_file():
        return {}
    many = [s for s in discover_sessions(MANY.parent, None, scenario_events=0) if s.path == str(MANY)]
    source = many[len(many) // 2]
    part = session_part(source)
    budget = parse_budgets("32k:4k:8k")[0]
    figures = {}
    for key, given in (("one_of_many_whole_file_seconds", None), ("one_of_many_parsed_once_seconds", part)):
        run_job(ENGINE, source, budget, part=given)
        times = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            run_job(ENGINE, source, budget, part=given)
            times.append(time.perf_counter() - start)
        figures[key] = statistics.median(times)
    figures["one_of_many_speedup"] = (
        figures["one_of_many_whole_file_seconds"] / figures["one_of_many_parsed_once_seconds"]
    )
    return figures


@pytest.mark.skipif(not SESSION.is_file(), reason=f"no corpus session {SESSION}")
def test_job_start_cost(benchmark):
    figures = benchmark.pedantic(_measure, rounds=1, iterations=1)
    ratio = figures["cold_seconds"] / figures["warm_seconds"]
    benchmark.extra_info.update(
        {k: round(v, 4) for k, v in figures.items()},
        cold_over_warm=round(ratio, 2),
        cold_marginal_over_warm=round(figures["cold_marginal_seconds"] / figures["warm_seconds"], 2),
        cold_target=COLD_TARGET,
    )
