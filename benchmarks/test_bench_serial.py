"""The serial part of ``latch bench`` and its fixed cost per job: what decides how far it scales with workers.

By Amdahl's law a run of serial seconds ``S`` (start-up, discovery, the task server's warm-up, report, plots) and
job work ``P`` (the jobs' own seconds plus each job's fixed cost) takes ``S + P / N`` on ``N`` workers; its
efficiency is ``(S + P) / (N * (S + P / N))``. This box has two cores, so efficiency at 8 or 16 workers cannot be
measured here; what is measured here, in one run, is ``S`` and ``P`` (seconds, in ``extra_info``), over
:data:`SUBSET` (two engines, budget ``32k:4k:8k``; ``LATCH_BENCH_FULL=1``: every corpus session, two budgets;
``LATCH_BENCH_SCENARIO_EVENTS=N``: also the generated scenario of ``N`` events that ``latch bench`` adds by default,
``3000``, whose jobs are the longest; default ``0``, none):

* ``startup_seconds``: a fresh interpreter importing ``latch bench``'s command (``latch.cli.main``,
  ``latch.cli.bench``);
* ``discovery_seconds``: :func:`~latch.bench.runner.discover_sessions`;
* ``server_seconds``: the task server's start and warm-up until its first task has run (a fresh server);
  ``server_and_discovery_seconds``: the same with the server started first (:class:`~latch.bench.executor.Backend`)
  and the sessions discovered while it warms up, as ``latch bench`` does;
* ``until_first_task_server_at_launch_seconds``: a fresh interpreter from importing the command to its first
  task's result, as ``latch bench`` runs: the task server started first, before the command's modules load
  (:func:`latch.__main__.run`), then the configuration and the plugins loaded (``app.config``, the engines checked)
  and the sessions discovered while it warms up, then one trivial task;
  ``until_first_task_server_first_seconds``: the same with the server started once the command's modules are
  loaded, and ``until_first_task_server_after_plugins_seconds`` after the configuration and plugins (the command's
  orders before), side by side in the same run (each the median of :data:`FIRST_TASK_ROUNDS`, the orders in turn);
* ``server_warm_up_cpu_seconds``: the CPU seconds (user and system) of a fresh interpreter doing what the task server
  does before its first fork (``import latch.bench._preload``: :func:`latch.bench.warm.warm_up`), and
  ``command_until_jobs_cpu_seconds`` those of a fresh interpreter doing the command's side before its first task
  (importing the command, the configuration and the plugins, the sessions discovered): the two run side by side from
  the launch, so the larger one bounds the time to the first task; CPU seconds, unlike the wall times above, hardly
  move with the load of a shared box (each the median of :data:`FIRST_TASK_ROUNDS`, the two in turn);
* ``per_job_fixed_seconds``: per task, a trivial task (``dict()``, nothing to import) through
  :func:`~latch.bench.executor.run_tasks` on one local worker (its own process forked by the worker, its arguments
  and result); ``dask_per_task_seconds``: the same on a one-worker local Dask
  cluster (:func:`~latch.bench.executor.in_own_process`); ``dask_start_seconds``/``dask_close_seconds``: the
  cluster's start and close;
* ``jobs_seconds``: the jobs of the subset run one at a time (:func:`~latch.bench.runner.run_bench`, one worker;
  ``LATCH_BENCH_COUNTS_KEPT=1``: with a count-cache file a first run of the same jobs filled, as a later ``latch
  bench`` runs them, :data:`COUNTS_KEPT`);
* ``report_seconds``: :func:`~latch.bench.report.write_report` without its figures, each job's entry of
  ``report.json`` written before as the command writes it while the jobs run (:class:`~latch.bench.report.JobsJson`;
  that work beside the jobs, in the command's own process: ``report_beside_jobs_seconds``); each figure drawn alone in
  this process: ``plots_sum_seconds`` their sum (the plots' serial time when one process draws them all) and
  ``plots_critical_seconds`` the longest (their serial time once each figure has a worker of its own,
  :class:`~latch.bench.plots.Plotter`);
* a tokens figure's panels (:mod:`latch.bench.panels`) draw in the plot workers as each session's jobs finish
  (:meth:`~latch.bench.plots.Plotter.watch`): ``panels_seconds``, every such panel drawn here one after another, is
  work beside the jobs (taking cores in the N-worker schedule below); what is left once the jobs are done, each figure alone here:
  ``plots_after_jobs_critical_seconds`` the longest (a tokens figure: its assembly; its title strip and the legend's
  panel of each session that led the panel order once its jobs were done, in the one-worker run's order,
  ``early_first_panels`` in all, are panels' work beside the jobs; the engine plot, ``engine_plot_after_jobs_seconds``: its longest part and their stacking, where it is
  drawn in parts, else whole, ``engine_plot_seconds``; the other figures whole;
  ``plots_after_jobs_critical_seconds_without_plot`` the same without the engine plot, which only ``--plot`` draws);
* ``report_and_plots_in_workers_seconds``: the report and every figure as ``latch bench`` writes them once its jobs
  are done, every tokens panel drawn beside them (a :class:`~latch.bench.plots.Plotter` as the command has it: its
  workers started, warmed up by their initializer and having watched the rows; on this box's two cores).

Then ``serial_seconds_one_process`` (start-up, discovery and server one after the other, report, every figure in
turn) and ``serial_seconds`` (``until_first_task_server_at_launch_seconds``, the report, and the figures' tail after
the jobs: panels beside the jobs, figures beside each other; ``serial_seconds_server_first`` and
``serial_seconds_server_after_plugins`` with the other orders; ``serial_seconds_without_plot`` without ``--plot``),
the serial fraction of each, and the efficiency at 8 and 16 workers they project: **projections from measured seconds,
not measurements**, since this box has two cores.

* ``amdahl_efficiency_8``/``_16`` (and ``projected_efficiency_8_one_process``/``_16_one_process``): Amdahl's law,
  the job work ``jobs_seconds`` assumed to divide evenly over the workers. It does not: one job can be a large share
  of the work (``longest_job_seconds``, ``longest_job_share``; ``longest_job``: its engine, session and budget), and no number of workers finishes before it.
* ``projected_efficiency_8``/``_16``: each job's own seconds (measured in the one-worker run: the time between one
  job's row and the next, its fork included) replayed on ``N`` cores in the order :func:`~latch.bench.runner.run_bench`
  submits them (:func:`~latch.bench.runner.submission_order`: the costliest first by an estimate made before
  running), each core taking the next job once free, and each tokens panel taking a core once its session's
  jobs are done (the plot workers share the cores with the jobs): ``jobs_makespan_N_seconds``. Efficiency is
  ``T1 / (N * TN)`` with ``TN = serial_seconds + jobs_makespan_N_seconds`` and ``T1 = serial_seconds +
  jobs_seconds``: the panels cost the N-worker run cores but are no work of the one-worker run's (its plot workers
  draw them on other cores), so they never raise the efficiency. The jobs are timed without plot workers beside
  them (they would stretch the jobs on this box's two cores and so inflate the work); the figures after the jobs
  are assumed to find free cores (at 8 or 16 workers, once the jobs are done, they do). Beside it, the same
  replay in two other orders: ``jobs_makespan_N_seconds_by_size`` the biggest sessions first (their file size
  alone, engine and budget aside), ``jobs_makespan_N_seconds_by_measured`` the longest first by the measured
  seconds (what no estimate made before running can beat by ordering), and their efficiencies
  ``projected_efficiency_N_by_size``/``_by_measured``.

With ``LATCH_BENCH_COUNTS_KEPT=1`` the Codex session's jobs find every count and load no o200k vocabulary.

Run: ``python -m pytest benchmarks/test_bench_serial.py --benchmark-only``
"""

from __future__ import annotations

import concurrent.futures as cf
import heapq
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from multiprocessing import forkserver
from pathlib import Path

import pytest

from latch.bench import executor, panels, plots, runner
from latch.bench.panels import assemble, draw_panel, panel_lines, panel_order
from latch.bench.plots import Plotter, budget_plot_files, draw_budget_figure, write_plot
from latch.bench.report import JobsJson, write_report
from latch.bench.runner import discover_sessions, parse_budgets, run_bench

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SUBSET = [
    "claude-code/claude-reliability_python-to-rust-port.jsonl",
    "swe-agent/ctf_i_got_id_demo.traj",
    "gemini-cli/entire_session.json",
    "openhands/basic_gui_mode.json",
]
FULL = os.environ.get("LATCH_BENCH_FULL") == "1"
COUNTS_KEPT = os.environ.get("LATCH_BENCH_COUNTS_KEPT") == "1"
"""The timed jobs read a count-cache file that a first run of the same jobs filled (:func:`run_bench`'s
``count_cache``, as ``latch bench`` passes its data folder's): no exact estimator loads its vocabulary."""
SCENARIO_EVENTS = int(os.environ.get("LATCH_BENCH_SCENARIO_EVENTS", "0"))
ENGINES = ["continuity", "sliding-window"]
TRIVIAL_TASKS = 8
FIRST_TASK_ROUNDS = 3
"""Fresh interpreters timed per order of :data:`_UNTIL_FIRST_TASK` (the median is kept)."""


class _NoPlots:
    """A :class:`~latch.bench.plots.Plotter` that draws nothing: the report's own work alone."""

    def budget_plots(self, folder, results, engines):
        done = {}
        for key, (_, _, path, _) in budget_plot_files(folder, results).items():
            done[key] = cf.Future()
            done[key].set_result(path)
        return done


_UNTIL_FIRST_TASK = """
import sys, time
start = time.perf_counter()
if sys.argv[1] == "server-at-launch":
    from latch.bench import executor
    executor.start_task_server()
import latch.cli.main, latch.cli.bench
from latch.bench import executor
from latch.bench.runner import discover_sessions
if sys.argv[1] == "server-first":
    executor.start_task_server()
from latch import plugins
from latch.config import load_config
from latch.bench.runner import check_plugins
plugins.configure(load_config(None))
check_plugins(sorted(plugins.registered_engines()))
backend = executor.Backend(1)
discover_sessions(sys.argv[2], None, scenario_events=int(sys.argv[3]))
assert executor.run_tasks(dict, [({"t": 0}, ())], backend=backend) == [{}]
print(time.perf_counter() - start)
"""
"""A fresh interpreter, from importing ``latch bench``'s command to its first task: the configuration and the plugins
(``app.config``, the engines checked), the task server started, the sessions discovered, one trivial task run;
``server-at-launch`` starts the server before the command's modules load, as the ``latch`` command does
(:func:`latch.__main__.run`); ``server-first`` once they are loaded, before the configuration and plugins;
``server-after-plugins`` after them."""


_COMMAND_UNTIL_JOBS = """
import sys
import latch.cli.main, latch.cli.bench
from latch import plugins
from latch.config import load_config
from latch.bench.runner import check_plugins, discover_sessions
plugins.configure(load_config(None))
check_plugins(sorted(plugins.registered_engines()))
discover_sessions(sys.argv[1], None, scenario_events=int(sys.argv[2]))
"""
"""The command's side of :data:`_UNTIL_FIRST_TASK` without the task server: what runs beside the server's warm-up."""


def _cpu_of(code: str, *args: str) -> float:
    """CPU seconds (user and system) of a fresh interpreter running ``code`` with ``args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code, *args], check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _start_cpu(corpus: Path) -> dict[str, float]:
    """``server_warm_up_cpu_seconds`` and ``command_until_jobs_cpu_seconds`` (see the module docstring)."""
    server, command = [], []
    for _ in range(FIRST_TASK_ROUNDS):  # the two in turn, each round
        server.append(_cpu_of("import latch.bench._preload"))
        command.append(_cpu_of(_COMMAND_UNTIL_JOBS, str(corpus), str(SCENARIO_EVENTS)))
    return {
        "server_warm_up_cpu_seconds": statistics.median(server),
        "command_until_jobs_cpu_seconds": statistics.median(command),
    }


def _until_first_task(order: str, corpus: Path) -> float:
    subprocess.run([sys.executable, "-c", "import latch.cli.main, latch.cli.bench"], check=True)  # warm file cache
    out = subprocess.run(
        [sys.executable, "-c", _UNTIL_FIRST_TASK, order, str(corpus), str(SCENARIO_EVENTS)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip())


def _per_task(run) -> float:
    run(1)
    start = time.perf_counter()
    run(TRIVIAL_TASKS)
    return (time.perf_counter() - start) / TRIVIAL_TASKS


def _stop_server() -> None:
    forkserver._forkserver._stop()  # a fresh server next time: its warm-up is what is measured


def _first_task() -> None:
    rows = executor.run_tasks(dict, [({"t": 0}, ())], jobs=1)
    assert rows == [{}], rows


def _dask_costs() -> dict[str, float]:
    pytest.importorskip("distributed", reason="pip install '.[cluster]' in the Latch checkout")
    start = time.perf_counter()
    backend = executor.Backend(1, "local:1")
    backend.connection()
    started = time.perf_counter() - start
    tasks = [({"t": i}, ()) for i in range(TRIVIAL_TASKS)]
    per_task = _per_task(lambda k: executor.run_tasks(dict, tasks[:k], backend=backend))
    start = time.perf_counter()
    backend.close()
    return {
        "dask_start_seconds": started,
        "dask_close_seconds": time.perf_counter() - start,
        "dask_per_task_seconds": per_task,
    }


def _kept_counts(tmp: Path, sessions, budgets) -> Path | None:
    """With :data:`COUNTS_KEPT`, a count-cache file filled by a first run of the jobs (not timed), as a later
    ``latch bench`` has its data folder's; else ``None``."""
    if not COUNTS_KEPT:
        return None
    counts = tmp / "token-counts.json"
    run_bench(ENGINES, sessions, budgets, jobs=2, count_cache=counts)
    return counts


def _measure(tmp: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import latch.cli.main, latch.cli.bench"], check=True)
    figures["startup_seconds"] = time.perf_counter() - start

    if FULL:
        corpus = CORPUS
        budgets = parse_budgets("256k:32k:64k,32k:4k:8k")
    else:
        corpus = tmp / "corpus"
        for rel in SUBSET:
            (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(CORPUS / rel, corpus / rel)
        budgets = parse_budgets("32k:4k:8k")
    start = time.perf_counter()
    sessions = discover_sessions(corpus, None, scenario_events=SCENARIO_EVENTS)
    figures["discovery_seconds"] = time.perf_counter() - start

    _stop_server()
    start = time.perf_counter()
    _first_task()
    figures["server_seconds"] = time.perf_counter() - start
    _stop_server()
    start = time.perf_counter()
    executor.start_task_server()
    discover_sessions(corpus, None, scenario_events=SCENARIO_EVENTS)
    _first_task()
    figures["server_and_discovery_seconds"] = time.perf_counter() - start
    orders = ("server-after-plugins", "server-first", "server-at-launch")
    firsts: dict[str, list[float]] = {order: [] for order in orders}
    for _ in range(FIRST_TASK_ROUNDS):  # the orders in turn, each round: the box's load shared alike
        for order in orders:
            firsts[order].append(_until_first_task(order, corpus))
    for order in orders:
        figures[f"until_first_task_{order.replace('-', '_')}_seconds"] = statistics.median(firsts[order])
    figures.update(_start_cpu(corpus))

    figures["per_job_fixed_seconds"] = _per_task(
        lambda k: executor.run_tasks(dict, [({"t": i}, ()) for i in range(k)], jobs=1)
    )
    figures.update(_dask_costs())

    counts = _kept_counts(tmp, sessions, budgets)
    stamps: list[tuple[float, tuple[str, str, str]]] = []
    start = time.perf_counter()
    results = run_bench(
        ENGINES,
        sessions,
        budgets,
        jobs=1,
        on_row=lambda row: stamps.append((time.perf_counter(), (row["engine"], row["session"], row["budget"]))),
        count_cache=counts,
    )
    figures["jobs_seconds"] = time.perf_counter() - start
    assert results and not any("error" in r for r in results)
    figures["jobs"] = len(results)
    ends = [start] + [at for at, _ in stamps]  # one worker: each job's own seconds, its row the one after the last
    seconds_of = {key: ends[k + 1] - ends[k] for k, (_, key) in enumerate(stamps)}
    figures["longest_job_seconds"] = max(seconds_of.values())
    figures["longest_job"] = " ".join(max(seconds_of, key=lambda k: seconds_of[k]))  # type: ignore[assignment]
    plan = [(e, s, b) for e in ENGINES for s in sessions for b in budgets]  # run_bench's plan, in its order
    keys = [(e, s.name, b.name) for e, s, b in plan]
    by_size = [keys[i] for i in sorted(range(len(plan)), key=lambda i: -plan[i][1].weight)]
    # the runner's order (a runner that orders by session size alone has no submission_order)
    submitted = [keys[i] for i in runner.submission_order(plan)] if hasattr(runner, "submission_order") else by_size
    by_measured = sorted(keys, key=lambda k: -seconds_of[k])

    per_figure = []
    (tmp / "figures").mkdir()
    for kind, budget, path, rs in budget_plot_files(tmp / "figures", results).values():
        start = time.perf_counter()
        draw_budget_figure(kind, budget, path, rs, ENGINES)
        per_figure.append(time.perf_counter() - start)
    start = time.perf_counter()
    write_plot(tmp / "plot.png", results, budgets)
    per_figure.append(time.perf_counter() - start)
    figures["engine_plot_seconds"] = per_figure[-1]
    figures["engine_plot_after_jobs_seconds"] = _engine_plot_tail(tmp, results, budgets)
    tails = [figures["engine_plot_after_jobs_seconds"]]
    panels_work = 0.0
    panel_seconds: dict[tuple[str, str], float] = {}
    finished = [key for _, key in stamps]  # (engine, session, budget) in the order the jobs finished
    (tmp / "tails").mkdir()
    for kind, budget, path, rs in budget_plot_files(tmp / "tails", results).values():
        if kind != "tokens":
            start = time.perf_counter()
            draw_budget_figure(kind, budget, path, rs, ENGINES)
            tails.append(time.perf_counter() - start)
            continue
        tail, work = _tokens_tail(path, budget, rs, finished, figures, panel_seconds)
        tails.append(tail)
        panels_work += work
    jobs_json = JobsJson()  # the command writes each job's entry of report.json as its row comes in
    start = time.perf_counter()
    for row in results:
        jobs_json(row)
    figures["report_beside_jobs_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    write_report(
        tmp / "out",
        results,
        engines=ENGINES,
        sessions=sessions,
        budgets=budgets,
        seconds=1.0,
        plotter=_NoPlots(),
        jobs=jobs_json,
    )
    figures["report_seconds"] = time.perf_counter() - start
    with Plotter(min(len(per_figure), os.cpu_count() or 1)) as plotter:
        (tmp / "beside-jobs").mkdir()
        watch = plotter.watch(ENGINES)
        for row in results:
            watch(row)
        for figure in plotter.budget_plots(tmp / "beside-jobs", results, ENGINES).values():
            figure.result()  # the panels, drawn beside the jobs in a run
        start = time.perf_counter()
        drawing = plotter.write_plot(tmp / "plot2.png", results, budgets)
        write_report(
            tmp / "out2",
            results,
            engines=ENGINES,
            sessions=sessions,
            budgets=budgets,
            seconds=1.0,
            plotter=plotter,
            jobs=jobs_json,
        )
        drawing.result()
        figures["report_and_plots_in_workers_seconds"] = time.perf_counter() - start
    figures["plots_sum_seconds"] = sum(per_figure)
    figures["plots_critical_seconds"] = max(per_figure)
    figures["panels_seconds"] = panels_work
    figures["plots_after_jobs_critical_seconds"] = max(tails)
    figures["plots_after_jobs_critical_seconds_without_plot"] = max(tails[1:])  # no --plot: latch bench's default
    for n in (8, 16):
        for name, order in (("", submitted), ("_by_size", by_size), ("_by_measured", by_measured)):
            jobs = [(seconds_of[k], (k[2], k[1])) for k in order]
            figures[f"jobs_makespan_{n}_seconds{name}"] = _makespan(jobs, panel_seconds, n)
    return figures


def _tokens_tail(
    path: Path,
    budget: str,
    rs: list,
    finished: list[tuple[str, str, str]],
    figures: dict[str, float],
    panel_seconds: dict[tuple[str, str], float],
) -> tuple[float, float]:
    """A tokens figure drawn here as the plot workers draw it: ``(seconds left once the jobs are done, seconds of
    panels' work beside them)``, each panel's seconds into ``panel_seconds`` (the early ones in the last leader's)."""
    names = panel_order(rs)
    tiles, work = {}, 0.0
    for name in names:
        start = time.perf_counter()
        tiles[name] = draw_panel(name, panel_lines(rs, name))
        panel_seconds[(budget, name)] = time.perf_counter() - start
        work += panel_seconds[(budget, name)]
    start = time.perf_counter()
    tiles[names[0]] = draw_panel(names[0], panel_lines(rs, names[0]), legend=True)
    leading = time.perf_counter() - start
    # beside the jobs: the title strip, and the legend's panel of each session that led the order when its rows came
    # in (the one-worker run's order), as work of the last of them
    start = time.perf_counter()
    header = panels.title_strip(budget, panels.row_pixels(min(panels.COLUMNS, len(names))))
    leads = _leads(finished, budget, rs)
    early = time.perf_counter() - start + leading * len(leads)
    figures["early_first_panels"] = figures.get("early_first_panels", 0) + len(leads)
    panel_seconds[(budget, leads[-1])] += early
    start = time.perf_counter()
    assemble(path, budget, names, tiles, header=header)
    return time.perf_counter() - start, work + early


def _leads(finished: list[tuple[str, str, str]], budget: str, rs: list) -> list[str]:
    """The sessions that led :func:`~latch.bench.panels.panel_order` at ``budget`` when their rows were all in, the
    jobs finishing in the order ``finished``: each one's panel with the legend is drawn beside the jobs
    (:meth:`~latch.bench.plots.Plotter.watch`), the last one's is the figure's first panel."""
    requests = {r["session"]: max(x["requests"] for x in rs if x["session"] == r["session"]) for r in rs}
    left = {name: sum(1 for r in rs if r["session"] == name) for name in requests}
    leads: list[str] = []
    best: tuple[int, str] | None = None
    for _, session, at in finished:
        if at != budget or session not in left:
            continue
        left[session] -= 1
        if not left[session] and (best is None or (-requests[session], session) < best):
            best = (-requests[session], session)
            leads.append(session)
    return leads


def _engine_plot_tail(tmp: Path, results: list, budgets: list) -> float:
    """The engine plot's seconds after the jobs, a core free for each of its parts: its longest part and their
    stacking (:func:`~latch.bench.plots.engine_tile`, :func:`~latch.bench.plots.stack_tiles`); the whole figure
    where it is drawn in one piece."""
    if not hasattr(plots, "engine_tile"):
        start = time.perf_counter()
        write_plot(tmp / "whole.png", results, budgets)
        return time.perf_counter() - start
    tiles, seconds = [], []
    for part in plots.ENGINE_TILES:
        start = time.perf_counter()
        tiles.append(plots.engine_tile(part, results, budgets))
        seconds.append(time.perf_counter() - start)
    start = time.perf_counter()
    plots.stack_tiles(tmp / "stacked.png", tiles, plots.engine_pixels_width(results, budgets))
    return max(seconds) + time.perf_counter() - start


def _makespan(jobs: list[tuple[float, tuple[str, str]]], panels: dict[tuple[str, str], float], workers: int) -> float:
    """Seconds until the last of ``jobs`` (``(seconds, (budget, session))`` in submission order) and ``panels``
    (seconds per ``(budget, session)``) is done on ``workers`` cores, as the pool runs them: each core, once free,
    takes a panel whose session's jobs are all done (the plot workers share the cores), else the next job."""
    left: dict[tuple[str, str], int] = {}
    for _, key in jobs:
        left[key] = left.get(key, 0) + 1
    queue = list(reversed(jobs))
    free = [0.0] * workers
    ready: list[tuple[float, float]] = []  # (when its session's jobs are done, its seconds)
    end = 0.0
    while queue or ready:
        at = heapq.heappop(free)
        if queue and not (ready and ready[0][0] <= at):
            seconds, key = queue.pop()
            done = at + seconds
            left[key] -= 1
            if not left[key] and key in panels:
                heapq.heappush(ready, (done, panels[key]))
        else:
            since, seconds = heapq.heappop(ready)
            done = max(at, since) + seconds
        heapq.heappush(free, done)
        end = max(end, done)
    return end


def _amdahl(serial: float, work: float, n: int) -> float:
    return (serial + work) / (n * (serial + work / n))


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no corpus at {CORPUS}")
def test_serial_part_and_fixed_cost_per_job(benchmark, tmp_path):
    figures = benchmark.pedantic(_measure, args=(tmp_path,), rounds=1, iterations=1)
    before = (
        figures["startup_seconds"]
        + figures["discovery_seconds"]
        + figures["server_seconds"]
        + figures["report_seconds"]
        + figures["plots_sum_seconds"]
    )
    after = (
        figures["until_first_task_server_at_launch_seconds"]
        + figures["report_seconds"]
        + figures["plots_after_jobs_critical_seconds"]
    )
    after_server_after_plugins = after + (
        figures["until_first_task_server_after_plugins_seconds"] - figures["until_first_task_server_at_launch_seconds"]
    )
    without_plot = after - (
        figures["plots_after_jobs_critical_seconds"] - figures["plots_after_jobs_critical_seconds_without_plot"]
    )
    after_server_first = after + (
        figures["until_first_task_server_first_seconds"] - figures["until_first_task_server_at_launch_seconds"]
    )
    work_one = work = figures["jobs_seconds"]  # the panels are no work of the jobs' (see the module docstring)

    def scheduled(n: int, serial: float = after, order: str = "") -> float:
        return (serial + work) / (n * (serial + figures[f"jobs_makespan_{n}_seconds{order}"]))

    benchmark.extra_info.update({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()})
    benchmark.extra_info.update(
        counts_kept=COUNTS_KEPT,
        serial_seconds_one_process=round(before, 3),
        serial_seconds=round(after, 3),
        serial_seconds_server_after_plugins=round(after_server_after_plugins, 3),
        serial_seconds_server_first=round(after_server_first, 3),
        serial_seconds_without_plot=round(without_plot, 3),
        serial_fraction_one_process=round(before / (before + work_one), 3),
        serial_fraction=round(after / (after + work), 3),
        longest_job_share=round(figures["longest_job_seconds"] / work_one, 3),
        per_job_fixed_over_job=round(figures["per_job_fixed_seconds"] / (work_one / figures["jobs"]), 3),
        projection="from the measured serial seconds and each job's measured seconds; not a measurement",
        projected_efficiency_8_one_process=round(_amdahl(before, work_one, 8), 3),
        projected_efficiency_16_one_process=round(_amdahl(before, work_one, 16), 3),
        amdahl_efficiency_8=round(_amdahl(after, work, 8), 3),
        amdahl_efficiency_16=round(_amdahl(after, work, 16), 3),
        projected_efficiency_8=round(scheduled(8), 3),
        projected_efficiency_16=round(scheduled(16), 3),
        projected_efficiency_8_by_size=round(scheduled(8, order="_by_size"), 3),
        projected_efficiency_16_by_size=round(scheduled(16, order="_by_size"), 3),
        projected_efficiency_8_by_measured=round(scheduled(8, order="_by_measured"), 3),
        projected_efficiency_16_by_measured=round(scheduled(16, order="_by_measured"), 3),
        projected_efficiency_8_server_after_plugins=round(scheduled(8, after_server_after_plugins), 3),
        projected_efficiency_16_server_after_plugins=round(scheduled(16, after_server_after_plugins), 3),
        projected_efficiency_8_without_plot=round(scheduled(8, without_plot), 3),
        projected_efficiency_16_without_plot=round(scheduled(16, without_plot), 3),
        projected_efficiency_8_server_first=round(scheduled(8, after_server_first), 3),
        projected_efficiency_16_server_first=round(scheduled(16, after_server_first), 3),
    )
