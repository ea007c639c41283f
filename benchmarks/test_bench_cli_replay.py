"""``latch replay`` of the Codex corpus file with ``keep-last-units`` as a user runs it: a new process each time.

The goal: ``latch-example`` replays the Codex corpus transcript in under 2 s. Around the replay itself
(``test_bench_replay_host.py``, in one process) a command pays for its process: imports, the plugin host, the
import of the transcript into the store, the price table. This benchmark runs the real command in subprocesses,
``LATCH_HOME`` in a temporary folder (so the price cache starts empty), and reports in ``extra_info``:

* ``fresh_seconds``: the first replay into a new store (the file is parsed and stored, genai-prices is imported,
  every price computed and kept in ``LATCH_HOME/cache/genai-prices.json``);
* ``fresh_cached_seconds``: a replay into another new store once the prices are kept;
* ``second_seconds``: a replay of the same file into the same store (the import finds the file's fingerprint,
  nothing is parsed; every price is kept);
* ``in_process_seconds``: :func:`latch.cli.replay.run_replay` and the report's rendering in this process, on
  the same stored session (nothing imported), once this process has run it before (the estimator and its
  vocabulary loaded: the engine's own work); ``in_process_first_seconds``: the first such replay in this process;
  and ``overhead_ratio`` = ``second_seconds / in_process_seconds``: what the process adds (goal:
  :data:`OVERHEAD_GOAL`, not asserted); ``first_ratio`` = ``second_seconds / in_process_first_seconds``, asserted
  (only with ``--benchmark-only``) at most :data:`OVERHEAD_TARGET`;
* ``second_cpu_seconds`` and ``in_process_cpu_seconds``: the same two in CPU time (user + system of the command;
  this process's time), and ``overhead_ratio_cpu`` their ratio: what the process adds when the box is busy (other
  processes stretch the wall times, not the CPU times);
* the floors (medians of :data:`FLOOR_RUNS` processes): ``interpreter_seconds`` (``python -c pass``: the interpreter
  and its ``site``, the ``.pth`` files of site-packages included) and ``import_cli_seconds`` (``python -c "import
  latch.cli.main"``: the command group, click, rich, the store and the event classes, which every command needs);
  ``best_ratio`` = ``(import_cli_seconds + in_process_seconds) / in_process_seconds`` (``best_ratio_cpu`` in CPU
  time): the ``overhead_ratio`` a replay would reach if it imported nothing more than ``latch.cli.main``;
  ``libraries_cpu_seconds`` (``python -c "import click, rich.console, rich.table, pluggy"``: the libraries the command
  is built on, which it keeps) and ``libraries_ratio_cpu`` = ``(libraries_cpu_seconds + in_process_cpu_seconds) /
  in_process_cpu_seconds``: the ratio a replay would reach if Latch's own imports and start-up cost nothing.

The kept exact counts (``LATCH_HOME/cache/token-counts.json``, :mod:`latch.count_cache`) spare the
second replay the tokenizer's vocabulary (about 0.3 s for o200k) when the estimator loads it lazily.

Always asserted (no timing): the second replay prints the same report as the first and imports neither numpy nor
genai-prices (``sys.modules`` at exit).

Measured on this shared 2-core machine (medians of 7 runs of the command, ``.pyc`` files present): before,
fresh 1.91 s and second 1.76 s (2.72 s and 2.41 s with ``PYTHONDONTWRITEBYTECODE=1`` and no ``.pyc``); after, fresh
1.26 s (1.58 s with no kept prices) and second 0.73 s (1.64 s and 1.06 s without ``.pyc``).

What is installed (the plugins' entry points, genai-prices' version: ``latch.installed``) is kept in
``LATCH_HOME/cache`` too, and the patterns a replay does not use are compiled at first use (``latch.lazyre``). The
code before and after, back to back on a quiet 2-core box, two rounds each: ``second_seconds`` 0.391 and 0.379 ->
0.381 and 0.344; the in-process replay got faster too (event decoding, recall: 0.165 and 0.188 -> 0.138 and
0.141 s), so ``overhead_ratio`` did not fall (2.37 and 2.02 -> 2.76 and 2.44). What is left is about 0.15 s of
imports that registering the built-in plugins needs (the engine, the derivation rules, every provider class).

The built-in continuity engine and providers then registered by name (``latch.hookspecs.LazyClass``: the class is
imported at first use), ``latch.engine`` stopped importing the continuity engine with its submodules, and
``latch-llamacpp`` imports the providers' wire format when it counts: this replay no longer imports the continuity
engine, its episode index, nor ``latch.providers``. Back to back on a 2-core box at load average 7-8 (wall times
there are two to three times the CPU times, so CPU times are quoted), medians: this benchmark, 5 rounds of each
commit alternated, ``second_cpu_seconds`` 0.407 -> 0.376 and ``overhead_ratio_cpu`` 2.46 -> 2.22; 15 alternated
processes of the second replay alone, 0.390 -> 0.368 s of CPU. The floor stays: ``python -c pass`` takes 0.012 s
of CPU (frozen standard modules already; setuptools' ``distutils-precedence.pth`` adds under 0.001 s), ``import
latch.cli.main`` 0.15 s (click, rich, the store, the event classes), as much as the replay's own work
(``in_process_cpu_seconds`` 0.157), so ``best_ratio_cpu`` is 1.9: :data:`OVERHEAD_GOAL` needs that import itself
to shrink. Of the 0.06 s left between ``best_ratio`` and ``overhead_ratio``: the replay's own modules (the host, the
kernel's derivation rules, which it uses), the plugin host, and ``latch-tiktoken`` importing tiktoken (about
0.015 s) to answer ``latch_select_estimator`` from tiktoken's model table.

The imports themselves then got cheaper (``latch.records``, ``latch.lazyre``). Every data class Latch declares
(about 90 on a replay's path: the event kinds, the port's records, the kernel's facts) was made by
``dataclasses.dataclass``, which compiles each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and frozen
``__setattr__``/``__delattr__`` from source text when the module is imported (``latch.events`` alone took 23 ms of
CPU). :func:`latch.records.dataclass` makes the same classes (``tests/parity/test_records_parity.py``) and compiles
each method the first time it is used (a replay of the example constructs 7 of the 38 event kinds:
``tests/cli/test_replay_imports.py``). The FTS5 preparation's, recall's and the PostgreSQL store's patterns compile
at first use; an SQLite command no longer imports the PostgreSQL store (``latch.store.pg_url``), nor ``socket`` (the
replay scratch's host name is ``os.uname``'s); ``latch-tiktoken`` imports tiktoken only to count or to read its model
table, which a model Latch prices as o200k never needs (nor quicktok, until a count misses the kept ones). The two
commits back to back, alternated, 15 processes each, medians of CPU on a 2-core box at load average 6:
``import latch.cli.main`` 0.167 -> 0.115 s, the second replay 0.394 -> 0.318 s, against 0.13 s for the same replay
in process (both commits); this benchmark (medians as below), two rounds of each commit alternated:
``second_cpu_seconds`` 0.348 / 0.350 -> 0.292 / 0.297, ``import_cli_cpu_seconds`` 0.140 / 0.153 -> 0.104 / 0.104,
``overhead_ratio_cpu`` 1.98 / 2.20 -> 1.78 / 1.94 (the in-process replay 0.15-0.18 s on both). What stays: click
(about 15 ms), rich (about 22 ms), the interpreter (10 ms), the standard modules they and the store need
(``typing``, ``pathlib``, ``sqlite3``, ``hashlib``, ``inspect``: about 15 ms) and Latch's own modules and plugins on
the replay's path (about 30 ms); a new process also decodes the session's events, which the warm in-process replay
finds in the store's decoded-event cache. With the in-process work at 0.13 s, 1.3 leaves
0.04 s for all of it. ``import_cli_cpu_seconds`` and ``interpreter_cpu_seconds`` report the floors in CPU time, and
``second_*`` and ``in_process_*`` are now medians of :data:`REPEATS` runs each (one run of each moved
``overhead_ratio_cpu`` between 1.43 and 2.16 on the same commit at load average 6).

Then Latch's model table (``latch/data/models.toml``) was kept parsed in ``LATCH_HOME/cache/models.json`` under the
file's digest (a replay without a config file no longer imports ``tomllib``), ``latch-baselines`` registered its
engines by name, the plugin host stopped looking up a module plugin's classes and constants as hooks (pluggy's
``inspect.getattr_static``, about 300 names), and ``latch.textsafe`` compiled its message and JSON escapes at first
use. The two commits back to back on a 2-core box at load average 6, 25 alternated processes of each: the second
replay 282.3 -> 276.6 ms of CPU (0.980; before the escapes, 296.9 -> 291.5, 0.982), ``import latch.cli.main`` 103.7 ->
101.9 ms. This benchmark, four rounds of each commit alternated, twice: ``overhead_ratio_cpu`` medians 1.78 -> 1.70
and 1.75 -> 1.78 (one round's ratio ranges 1.41-1.92 on the same commit: a 2 % change is below what it resolves).
``libraries_cpu_seconds`` was 0.074-0.081 s against an in-process replay of 0.166-0.180 s: ``libraries_ratio_cpu``
1.44-1.46, so :data:`OVERHEAD_GOAL` (1.3) is below what the interpreter, click, rich and pluggy alone take to start,
before Latch imports anything of its own.

The commands here run with ``COLUMNS=200``, as on a terminal: ``latch replay`` then measures its table to choose its
columns. A plain table is measured from its plain cells (``latch.textsafe.Table``), not cell by cell by rich: the
report's printing went from 0.36-0.59 s to 0.13-0.20 s (the two commits back to back, a heavily loaded box), and the
process no longer imports the hot paths' pure-Python reference when the native module serves.

``test_cli_replay_readme_process_overhead`` reports the same figures for the README's first command (the example,
the default engine ``continuity``, ``--window 16000 --reserve 2000 --recent 3000``). Its 28 requests take about
0.035 s of CPU in process, so there the process is nearly the whole command: the ratio says what the start costs,
not the replay. What keeps that start small: the continuity engine imports no numpy (the episode index's columns are
``array("q")``, which the native scorer reads in place), the episode scanners' patterns compile at first use
(:mod:`latch.lazyre`), ``latch_tiktoken`` answers a model that no cl100k name starts like without importing tiktoken
(``latch_tiktoken.CL100K_LEADS``), and with both ``--window`` and ``--reserve`` given and no ``[models]`` entry the
transcript is not parsed a second time for its model's default window.

Run: ``python -m pytest benchmarks/test_bench_cli_replay.py --benchmark-only``
"""

from __future__ import annotations

import io
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from latch.cli.replay import _print, run_replay
from latch.host.ingest import import_file
from latch.store import EventStore
from latch.textsafe import PIPE_WIDTH

pytest.importorskip("latch_example", reason="pip install ./plugins/latch-example")

CODEX = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "codex"
ENGINE = "keep-last-units"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "invoice-rounding.claude.jsonl"
README_ARGS = ("--window", "16000", "--reserve", "2000", "--recent", "3000")
"""The options of the README's first command (``latch replay examples/invoice-rounding.claude.jsonl ...``)."""
README_OPTIONS: dict[str, object] = {"window": 16000, "reserve": 2000, "recent": 3000}
OVERHEAD_TARGET = 2.5
"""A second ``latch replay`` (a new process) may take at most this many times the first same replay in a process."""
OVERHEAD_GOAL = 1.3
"""Where that ratio should get to (reported in ``extra_info``, not asserted)."""
FLOOR_RUNS = 5
"""Processes timed for each start-up floor (``python -c pass``, ``python -c "import latch.cli.main"``)."""
REPEATS = 3
"""Second replays (new processes) and warm in-process replays timed; each figure is their median."""

LIBRARIES = "import click, rich.console, rich.table, pluggy"
"""The libraries every ``latch replay`` imports and keeps (the floor under ``import_cli_seconds``)."""


@pytest.fixture(scope="module")
def codex():
    files = sorted(CODEX.glob("*.jsonl")) if CODEX.is_dir() else []
    if not files:
        pytest.skip(f"no Codex corpus file under {CODEX}")
    return files[0]


# the command, then (at exit, on stderr) which of these modules it imported
MAIN = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write('\\nimported: ' + ' '.join(m for m in "
    "('latch.cli.replay', 'numpy', 'genai_prices') if m in sys.modules) + '\\n')); "
    "from latch.cli import main; main()"
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _replay(
    env: dict[str, str], db: Path, path: Path, args: tuple[str, ...]
) -> tuple[float, float, subprocess.CompletedProcess]:
    """The command's wall time, its CPU time (user + system) and its result."""
    start, cpu = time.perf_counter(), _children_cpu()
    res = subprocess.run(
        [sys.executable, "-c", MAIN, "replay", str(path), *args, "--db", str(db)],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    assert res.returncode == 0, res.stderr
    return seconds, cpu, res


def _commands(tmp: Path, path: Path, args: tuple[str, ...]) -> dict[str, float]:
    env = {**os.environ, "LATCH_HOME": str(tmp / "home"), "COLUMNS": "200"}
    env.pop("LATCH_DB", None)
    fresh, _, first = _replay(env, tmp / "a.db", path, args)
    fresh_cached, _, _ = _replay(env, tmp / "b.db", path, args)
    seconds = [_replay(env, tmp / "a.db", path, args) for _ in range(REPEATS)]
    second, second_cpu = statistics.median(r[0] for r in seconds), statistics.median(r[1] for r in seconds)
    again = seconds[-1][2]
    assert again.stdout == first.stdout  # the same report, nothing parsed, every price kept
    assert first.stderr.splitlines()[-1] == "imported: latch.cli.replay genai_prices"
    assert again.stderr.splitlines()[-1] == "imported: latch.cli.replay"  # neither numpy nor genai-prices
    return {
        "fresh_seconds": fresh,
        "fresh_cached_seconds": fresh_cached,
        "second_seconds": second,
        "second_cpu_seconds": second_cpu,
    }


def _floor(env: dict[str, str], code: str) -> tuple[float, float]:
    """The median wall and CPU seconds of ``python -c code`` over :data:`FLOOR_RUNS` processes."""
    walls, cpus = [], []
    for _ in range(FLOOR_RUNS):
        start, cpu = time.perf_counter(), _children_cpu()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def test_cli_replay_process_overhead(benchmark, codex, tmp_path):
    _overhead(benchmark, tmp_path, codex, ("--engine", ENGINE), {"engine": ENGINE})


def test_cli_replay_readme_process_overhead(benchmark, tmp_path):
    """The same figures for the README's first command: the example, the default engine (``continuity``)."""
    _overhead(benchmark, tmp_path, EXAMPLE, README_ARGS, README_OPTIONS)


def _overhead(benchmark, tmp_path: Path, path: Path, args: tuple[str, ...], options: dict[str, object]) -> None:
    figures = benchmark.pedantic(_commands, args=(tmp_path, path, args), rounds=1, iterations=1)
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home")}
    interpreter, interpreter_cpu = _floor(env, "pass")
    import_cli, import_cli_cpu = _floor(env, "import latch.cli.main")
    _, libraries_cpu = _floor(env, LIBRARIES)
    store = EventStore(tmp_path / "a.db")
    try:
        sid = import_file(store, path, final=True)[0]
        times, cpu_times = [], []
        for _ in range(1 + REPEATS):
            start, cpu = time.perf_counter(), time.process_time()
            doc, _ = run_replay(store, sid, **options)
            con = Console(file=io.StringIO(), width=PIPE_WIDTH, soft_wrap=True, color_system=None, highlight=False)
            _print(con, doc, str(path))
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu)
        in_process, in_process_cpu = statistics.median(times[1:]), statistics.median(cpu_times[1:])
    finally:
        store.close()
    assert doc["summary"]["violations"] == [] and doc["summary"]["requests"] > 20
    ratio = figures["second_seconds"] / in_process
    first_ratio = figures["second_seconds"] / times[0]
    benchmark.extra_info.update(
        {k: round(v, 3) for k, v in figures.items()},
        in_process_seconds=round(in_process, 3),
        in_process_first_seconds=round(times[0], 3),
        in_process_cpu_seconds=round(in_process_cpu, 3),
        overhead_ratio=round(ratio, 2),
        overhead_ratio_cpu=round(figures["second_cpu_seconds"] / in_process_cpu, 2),
        first_ratio=round(first_ratio, 2),
        overhead_target=OVERHEAD_TARGET,
        overhead_goal=OVERHEAD_GOAL,
        interpreter_seconds=round(interpreter, 3),
        import_cli_seconds=round(import_cli, 3),
        interpreter_cpu_seconds=round(interpreter_cpu, 3),
        import_cli_cpu_seconds=round(import_cli_cpu, 3),
        best_ratio=round((import_cli + in_process) / in_process, 2),
        best_ratio_cpu=round((import_cli_cpu + in_process_cpu) / in_process_cpu, 2),
        libraries_cpu_seconds=round(libraries_cpu, 3),
        libraries_ratio_cpu=round((libraries_cpu + in_process_cpu) / in_process_cpu, 2),
    )
    if not benchmark.disabled:
        assert first_ratio <= OVERHEAD_TARGET, benchmark.extra_info
