"""What ``latch bench`` pays once per command overlaps other work: the task server starts before the plan is known,
and the plots draw in worker processes, not the caller's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from multiprocessing import forkserver

import pytest
from click.testing import CliRunner
from corpus_support import REPO

from latch.bench import executor

pytestmark = pytest.mark.slow  # task servers, worker processes and a subprocess

EXAMPLES = REPO / "examples"


def _pids() -> dict:
    with open(f"/proc/{os.getppid()}/stat") as f:
        grandparent = int(f.read().rpartition(")")[2].split()[1])  # the worker's parent
    return {"pid": os.getpid(), "parent": os.getppid(), "worker_parent": grandparent}


def test_the_backend_starts_the_task_server_before_any_task_and_the_tasks_workers_fork_from_it():
    with executor.Backend(1) as backend:
        server = forkserver._forkserver._forkserver_pid
        assert server is not None
        os.kill(server, 0)  # running, before any task was asked for
        rows = executor.run_tasks(_pids, [({"t": i}, ()) for i in range(2)], backend=backend)
    assert [r["worker_parent"] for r in rows] == [server, server]  # forked by a worker the server forked
    assert rows[0]["pid"] != rows[1]["pid"] != os.getpid()


def test_a_bad_scheduler_is_a_scheduler_error_when_the_backend_is_used():
    with executor.Backend(1, "nowhere") as backend, pytest.raises(executor.SchedulerError, match="expected tcp://"):
        executor.run_tasks(_pids, [({"t": 0}, ())], backend=backend)


def test_the_report_and_its_plots_are_written_without_pyplot_in_the_caller(tmp_path):
    script = textwrap.dedent(
        f"""
        import json, sys
        from latch.bench.report import write_report
        from latch.bench.runner import SessionSource, discover_sessions, parse_budgets, run_job

        if __name__ == "__main__":
            sessions = discover_sessions(None, {str(EXAMPLES)!r}, scenario_events=0)[:1]
            budgets = parse_budgets("32k:4k:8k")
            results = [run_job("continuity", s, b) for s in sessions for b in budgets]
            paths = write_report({str(tmp_path / "out")!r}, results, engines=["continuity"], sessions=sessions,
                                 budgets=budgets, seconds=1.0)
            print(json.dumps({{"pyplot": "matplotlib.pyplot" in sys.modules,
                              "paths": {{k: str(p) for k, p in paths.items()}}}}))
        """
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.splitlines()[-1])
    assert got["pyplot"] is False  # drawn by the plot workers
    assert list(got["paths"]) == ["json", "markdown", "tokens 32k:4k:8k", "cacheability 32k:4k:8k"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.endswith(
        "Plots: [tokens_32k-4k-8k.png](tokens_32k-4k-8k.png), "
        "[cacheability_32k-4k-8k.png](cacheability_32k-4k-8k.png)\n"
    )
    for name in ("tokens_32k-4k-8k.png", "cacheability_32k-4k-8k.png"):
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_workers_for_a_dask_run_are_spawned_without_a_task_server_here(tmp_path):
    from latch.bench.plots import Plotter
    from latch.bench.runner import discover_sessions, parse_budgets, run_job

    session = discover_sessions(None, EXAMPLES, scenario_events=0)[0]
    budgets = parse_budgets("32k:4k:8k")
    results = [run_job("continuity", session, budgets[0])]
    server = forkserver._forkserver._forkserver_pid
    with Plotter(1, spawn=True) as plotter:
        path = plotter.write_plot(tmp_path / "plot.png", results, budgets).result()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert forkserver._forkserver._forkserver_pid == server  # no task server started for the plots


def test_the_task_server_starts_before_the_configuration_and_plugins_load(tmp_path):
    """Its warm-up overlaps the command's own loading: a command refused for its configuration file has already
    started it."""
    from latch.cli import _load_commands, cli

    _load_commands()
    forkserver._forkserver._stop()  # none running before the command
    bad = tmp_path / "config.toml"
    bad.write_text("[engine\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["bench", "--config", str(bad), "--scenario-events", "50", "--out", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "config.toml" in res.output and "Traceback" not in res.output
    server = forkserver._forkserver._forkserver_pid
    assert server is not None
    os.kill(server, 0)


@pytest.mark.parametrize(
    ("argv", "started"),
    [
        (["bench", "--budgets", "bad"], [False, True]),  # first before the command's modules, again (running) by it
        (["--db", "x.db", "bench", "--budgets", "bad"], [False, True]),
        (["bench", "--scheduler", "local:1", "--budgets", "bad"], []),  # the jobs run on Dask
        (["bench", "--help"], []),
        (["replay", "--help"], []),
    ],
)
def test_the_latch_command_starts_a_local_benchs_task_server_before_loading_its_own_modules(argv, started):
    """``latch bench`` starts the task server before ``latch.cli`` loads (whether it was loaded, each time the server
    is started); no other command, and no bench on Dask, starts it."""
    script = textwrap.dedent(
        f"""
        import sys
        from latch.bench import executor

        seen = []
        executor.start_task_server = lambda: seen.append("latch.cli.main" in sys.modules)
        sys.argv = ["latch", *{argv!r}]
        from latch.__main__ import run

        try:
            run()
        except SystemExit:
            pass
        print(seen, file=sys.stderr)
        """
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.stderr.strip().splitlines()[-1] == repr(started), res.stderr[-2000:]


def test_a_plot_worker_builds_what_the_last_figures_need_before_its_first_figure():
    """A plot worker's initializer draws a small figure with a logarithmic axis, so the mathtext parser its tick
    labels need is built while the jobs run (in a fresh interpreter: nothing built before)."""
    script = textwrap.dedent(
        """
        import os
        from matplotlib import mathtext
        from latch.bench import plots

        before = mathtext.MathTextParser._parser is not None
        plots._import_pyplot(os.getpid())
        print(before, mathtext.MathTextParser._parser is not None)
        """
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["False", "True"]
