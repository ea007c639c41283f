"""``latch bench``: compare context engines on the same sessions under the same budgets.

``latch bench [--engines a,b,c] [--corpus DIR] [--budgets ...] [--out DIR] [--jobs N]
[--scheduler tcp://HOST:PORT|local:N] [--plot OUT.png]`` runs every engine over every session (the corpus transcripts,
``examples/*.jsonl``, a generated stress scenario) under every budget in a process pool, or on a Dask
cluster with ``--scheduler`` (:mod:`latch.bench.runner`), then writes
``report.md`` (the table), ``report.json`` (every job, with per-request series) and PNG plots
(tokens per request along each session per engine; cacheability per engine) into ``--out``, and with
``--plot OUT.png`` one PNG comparing the engines (:func:`latch.bench.plots.engine_plot`, with its cost-vs-coverage
frontier panel).
matplotlib is required (``pip install '.[bench]'`` in the Latch checkout).
A job that fails (e.g. a malformed transcript) is listed with its error; the command then exits 1.

Stdout gets a narrow table (:data:`latch.bench.report.NARROW_COLUMNS`: engine, budget, frontier, requests,
tokens/request, coverage, refused, dollars; every column is in ``report.md``) and one ``verdict BUDGET: ...`` line
per budget (:func:`latch.bench.report.budget_verdicts`). Progress goes to stderr: a bar on a terminal, one line now
and then in a pipe (:mod:`latch.cli.progress`).

What runs once per command overlaps other work: the local task server starts first (before this module loads:
:func:`latch.__main__.run`; here again, a no-op then, for a caller of :func:`latch.cli.main.main`), warming up while
the command's modules, the configuration and the plugins load and the sessions are discovered, and a Dask cluster
while the sessions are discovered (:class:`latch.bench.executor.Backend`), the plot workers import matplotlib while
the jobs run and draw each session's tokens panel once its jobs are done, each job's entry of ``report.json`` is
written as its row comes in (:class:`latch.bench.report.JobsJson`), and the figures draw in those workers while the
report is written (:class:`latch.bench.plots.Plotter`) and the Dask cluster closes.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ..bench.executor import SCHEDULER_RE, Backend, SchedulerError, sigterm_unwinds, start_task_server
from ..bench.plots import Plotter
from ..bench.report import NARROW_COLUMNS, JobsJson, budget_verdicts, markdown_table, write_report
from ..bench.runner import Budget, SessionSource, check_plugins, discover_sessions, parse_budgets, run_bench
from ..bench.summary import summarize
from ..count_cache import count_cache_file
from ..plugins import PluginError, registered_engines
from ..textsafe import console, echo, markup, safe
from .main import AppContext, pass_app
from .outputs import folder_outputs, output_file
from .params import Count
from .progress import progress

__all__ = ["register"]


def _default_examples() -> Path | None:
    here = Path.cwd() / "examples"
    return here if here.is_dir() else None


def register(cli: click.Group) -> None:
    @cli.command("bench")
    @click.option("--engines", default=None, help="Comma-separated engine names (default: every registered engine).")
    @click.option(
        "--corpus",
        type=click.Path(file_okay=False),
        default=None,
        help="Folder of transcripts, searched recursively (default: none).",
    )
    @click.option(
        "--examples",
        type=click.Path(file_okay=False),
        default=None,
        help="Folder whose *.jsonl sessions are included (default: ./examples when present).",
    )
    @click.option(
        "--scenario-events",
        type=Count(min=0),
        default=3_000,
        show_default=True,
        help="Events of the generated stress scenario session (0: none).",
    )
    @click.option(
        "--budgets",
        default="256k:32k:64k,32k:4k:8k",
        show_default=True,
        help="Comma-separated WINDOW:RESERVE:RECENT token budgets (k/m suffixes).",
    )
    @click.option(
        "--out",
        "out",
        type=click.Path(file_okay=False),
        default="bench-out",
        show_default=True,
        is_eager=True,
        callback=folder_outputs(("report.json", "report.md")),
        help="Output folder for report.md, report.json and the plots.",
    )
    @click.option("--jobs", type=Count(min=1), default=2, show_default=True, help="Worker processes.")
    @click.option(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:PORT|local:N",
        help="Run the jobs on a Dask cluster: a running `dask scheduler` (workers started with "
        "DASK_DISTRIBUTED__WORKER__DAEMON=False) or a local cluster of N workers; needs "
        "pip install '.[cluster]' in the Latch checkout (default: the local process pool of --jobs).",
    )
    @click.option(
        "--plot",
        "plot",
        type=click.Path(dir_okay=False),
        default=None,
        callback=output_file,
        help="Also write one PNG comparing the engines: per engine and budget, boxes of tokens and of "
        "dollars per request, n per box, the budgets' hard limits as lines; and total dollars "
        "against needed-context coverage, one marker per engine, budget as its shape.",
    )
    @click.option(
        "--estimator",
        "estimator",
        default=None,
        help="Estimator plugin by name for every job, e.g. tiktoken, heuristic-openai (default: the one "
        "the plugins select for each session's model).",
    )
    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config TOML passed to every engine (default: $LATCH_HOME/config.toml or the user config folder).",
    )
    @pass_app
    def bench_cmd(
        app: AppContext,
        engines: str | None,
        corpus: str | None,
        examples: str | None,
        scenario_events: int,
        budgets: str,
        out: str,
        jobs: int,
        scheduler: str | None,
        plot: str | None,
        estimator: str | None,
        config_path: str | None,
    ) -> None:
        """Run every engine over every session under every budget; write a table, JSON and plots."""
        if importlib.util.find_spec("matplotlib") is None:
            raise click.ClickException(
                "latch bench draws its plots with matplotlib, which is not installed; "
                "install it with: pip install '.[bench]' in the Latch checkout"
            )
        if scheduler is None:  # the task server warms up while the config, plugins and sessions load
            start_task_server()
        config = app.config(config_path)
        try:
            chosen_budgets = parse_budgets(budgets)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--budgets") from None
        names = [e.strip() for e in engines.split(",") if e.strip()] if engines else sorted(registered_engines())
        if not names:
            raise click.BadParameter("no engine named", param_hint="--engines")
        try:
            check_plugins(names, estimator)
        except PluginError as exc:
            raise click.UsageError(str(exc)) from None
        err = console(stderr=True)
        sessions, results, paths, seconds = _run(
            names,
            chosen_budgets,
            corpus=corpus,
            examples=examples if examples is not None else _default_examples(),
            scenario_events=scenario_events,
            out=out,
            jobs=jobs,
            scheduler=scheduler,
            plot=plot,
            estimator=estimator,
            config=config,
        )
        rows = summarize(results)
        echo(safe(markdown_table(rows, NARROW_COLUMNS), multiline=True))
        con = console(highlight=False)
        con.print(f"every column: {markup(str(paths['markdown']))}", highlight=False)
        for line in budget_verdicts(rows):
            con.print(f"verdict {markup(line)}", highlight=False)
        failed = [r for r in results if "error" in r]
        grouped: dict[tuple[str, str], list[str]] = {}  # one line per (session, error): a bad file fails every job
        for r in failed:
            grouped.setdefault((r["session"], r["error"]), []).append(f"{r['engine']} ({r['budget']})")
        for (session, error), runs in grouped.items():
            con.print(f"[red]✗[/red] {markup(f'{session}: {error}')} [dim]{markup('; '.join(runs))}[/dim]")
        con.print(f"\n{len(results)} jobs in {seconds:,.0f} s → " + markup(", ".join(str(p) for p in paths.values())))
        if failed:
            err.print(f"[red]{len(failed)} of {len(results)} jobs failed[/red]")
            raise SystemExit(1)


def _local(scheduler: str | None) -> bool:
    """Whether the jobs run on this machine: no scheduler, or a local Dask cluster (``local:N``, :data:`SCHEDULER_RE`)."""
    return scheduler is None or ((m := SCHEDULER_RE.match(scheduler.strip())) is not None and m["local"] is not None)


def _run(
    names: list[str],
    chosen_budgets: list[Budget],
    *,
    corpus: str | None,
    examples: str | os.PathLike[str] | None,
    scenario_events: int,
    out: str,
    jobs: int,
    scheduler: str | None,
    plot: str | None,
    estimator: str | None,
    config: Mapping[str, Any],
) -> tuple[list[SessionSource], list[dict[str, Any]], dict[str, Path], float]:
    """Discover the sessions, run the jobs, write the report and the plots: ``(sessions, results, paths, seconds of
    the jobs)``. Click errors for a bad folder, plugin or scheduler."""
    # SIGTERM ends the command as Ctrl-C does: its workers, task processes and plot workers ended, none left running
    with sigterm_unwinds(), Backend(jobs, scheduler) as backend:  # starts while the sessions are discovered
        try:
            sessions = discover_sessions(corpus, examples, scenario_events=scenario_events)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        if not sessions:
            raise click.UsageError("no session to bench: pass --corpus, --examples or --scenario-events")
        figures = len(chosen_budgets) * 2 + (1 if plot else 0)
        with Plotter(max(1, min(figures, os.cpu_count() or 1)), spawn=scheduler is not None) as plotter:
            jobs_json = JobsJson()  # report.json's entries, written as the rows come in
            watch = plotter.watch(names)

            def on_row(row: dict[str, Any]) -> None:
                watch(row)
                jobs_json(row)

            start = time.perf_counter()
            try:
                with progress("bench", "jobs", len(names) * len(sessions) * len(chosen_budgets)) as update:
                    results = run_bench(
                        names,
                        sessions,
                        chosen_budgets,
                        estimator=estimator,
                        config=config,
                        backend=backend,
                        progress=update,
                        on_row=on_row,
                        # this command's exact token counts (its data folder's): a job whose texts were counted
                        # before loads no tokenizer vocabulary; not for a remote scheduler's workers
                        count_cache=count_cache_file() if _local(scheduler) else None,
                    )
            except PluginError as exc:
                raise click.UsageError(str(exc)) from None
            except SchedulerError as exc:
                raise click.ClickException(str(exc)) from None
            seconds = time.perf_counter() - start
            backend.close_in_background()
            drawing = plotter.write_plot(plot, results, chosen_budgets) if plot else None
            paths = write_report(
                out,
                results,
                engines=names,
                sessions=sessions,
                budgets=chosen_budgets,
                seconds=seconds,
                plotter=plotter,
                jobs=jobs_json,
            )
            if drawing is not None:
                try:
                    paths["plot"] = drawing.result()
                except (OSError, ValueError) as exc:
                    raise click.ClickException(f"--plot {plot}: {exc}") from None
    return sessions, results, paths, seconds
