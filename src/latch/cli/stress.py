"""``latch stress --events N --seed S [--json OUT] [--shards K [--jobs J | --scheduler tcp://HOST:PORT|local:N]]``:
the spec's stress guarantees at volume.

Runs :func:`latch.bench.stress.run_stress` in a fresh temporary store (or ``--db``), shows a
progress bar, then the report: every check with its evidence, throughput (events/s,
materializations/s), materialize p50/p99 by history size, peak memory. Exit status 1 when a check
fails. The run materializes in this process with the garbage collector set for a long run
(:func:`run_collector`, :data:`RUN_GC_THRESHOLDS`), given back as it was afterwards.

With ``--shards K`` (K > 1, or any K with ``--scheduler``) the run is K independent shards, each its own
temporary store and session (:mod:`latch.bench.shards`: the event split, the seed rule, the aggregate), on
``--jobs`` local processes or a Dask cluster (``--scheduler``, the machinery of ``latch bench``); the report
is the aggregate, with one row per shard. ``--shards 1`` without ``--scheduler`` is the unsharded run.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console

from ..bench.executor import SchedulerError, sigterm_unwinds
from ..bench.shards import run_sharded
from ..bench.stress import StressConfig, run_stress
from ..textsafe import Table, console, dumps, write_text
from .outputs import output_file
from .params import MAX_SEED, Count
from .progress import progress

__all__ = ["register", "print_report", "DEFAULT_EVENTS", "RUN_GC_THRESHOLDS", "run_collector"]

DEFAULT_EVENTS = 20_000
"""Events of ``latch stress`` without ``--events``: about 25 s on a busy two-core machine."""
RUN_GC_THRESHOLDS = (50_000, 10, 10)
"""The garbage collector's thresholds while a run materializes in this process (Python's default: 700, 10, 10).
A view reads thousands of events, and each decoded event, unit and fact allocates containers that mostly die by
reference count: at the default the collector ran about 7 young collections per thousand events and a full one (which
traverses every object the run keeps: the decoded rows, the epoch's units, the episode index, the kernel's facts) per
17,000, about 14% of the viewing process's CPU at 3 x 10^5 events. Cycles are still collected, about 70 times less
often (peak RSS unchanged)."""


@contextlib.contextmanager
def run_collector(thresholds: tuple[int, int, int] = RUN_GC_THRESHOLDS) -> Iterator[None]:
    """Within the block: what is loaded so far frozen out of the collector's reach (``gc.freeze``: the modules and
    plugins; no collection traverses them again) and the collector's thresholds at ``thresholds``; both restored
    after it, however it ends (a process that had frozen objects before keeps them, and these, frozen)."""
    previous, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        if not frozen:
            gc.unfreeze()


def print_report(con: Console, doc: dict[str, Any]) -> None:
    """The human-readable report of a :meth:`~latch.bench.stress.StressReport.to_json` document."""
    cfg = doc["config"]
    shards = f" in {cfg['shards']} shards" if "shards" in cfg else ""
    con.print(
        f"[bold]latch stress[/bold] · {doc['events']:,} events{shards} · seed {cfg['seed']} · a burst of "
        f"{cfg['burst']} views every {cfg['every']:,} events · "
        f"{'producer process' if cfg['parallel'] else 'inline appends'}"
    )
    checks = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    checks.add_column("")
    checks.add_column("check")
    checks.add_column("evidence")
    for name, c in doc["checks"].items():
        checks.add_row(
            "[green]✓[/green]" if c["ok"] else "[red]✗[/red]",
            name.replace("_", " "),
            c["detail"] + (f" ({c['failures']} failures)" if c["failures"] > 1 else ""),
        )
    con.print(checks)
    work = " summed over shards" if shards else ""
    con.print(
        f"\n{doc['seconds']:,.1f} s total · {doc['events_per_second']:,} events/s · appends "
        f"{doc['append_seconds']:,.1f} s{work} · {doc['materializations']:,} views in "
        f"{doc['materialize_seconds']:,.1f} s{work} ({doc['materializations_per_second']:,.2f}/s"
        + (f", {doc['wall_materializations_per_second']:,.2f}/s of wall time" if shards else "")
        + f", {doc['rotations']:,} rotations) · p50 "
        f"{doc['materialize_p50_ms']} ms, p99 {doc['materialize_p99_ms']} ms"
    )
    producer = f", producer {doc['producer_peak_rss_mb']:,.0f} MB" if doc["producer_peak_rss_mb"] is not None else ""
    con.print(
        f"peak memory {doc['peak_rss_mb']:,.0f} MB (max RSS{producer}{' of a shard' if shards else ''}) · "
        f"database {doc['db_mb']:,.0f} MB · "
        f"largest view {doc['max_total_tokens']:,} of {doc['hard_limit_tokens']:,} tokens"
    )
    t = Table(
        title="materialize latency by history size (a rotation includes ingesting the events since the previous view)",
        title_justify="left",
        box=None,
        pad_edge=False,
        header_style="bold",
    )
    for col in ("history (events)", "kind", "views", "p50 ms", "p99 ms"):
        t.add_column(col, justify="left" if col in ("history (events)", "kind") else "right")
    for b in doc["by_history"]:
        t.add_row(b["history_events"], b["kind"], f"{b['count']:,}", f"{b['p50_ms']:,}", f"{b['p99_ms']:,}")
    con.print(t)
    if "shards" in doc:
        _print_shards(con, doc["shards"])


def _print_shards(con: Console, rows: list[dict[str, Any]]) -> None:
    t = Table(
        title="shards (each its own store and session)",
        title_justify="left",
        box=None,
        pad_edge=False,
        header_style="bold",
    )
    for col in ("shard", "", "seed", "events", "views", "seconds", "events/s", "peak MB", "ran on"):
        t.add_column(col, justify="left" if col in ("", "ran on") else "right")
    for r in rows:
        if "error" in r:
            t.add_row(str(r["shard"]), "[red]✗[/red]", str(r["seed"]), "–", "–", "–", "–", "–", r["error"])
            continue
        t.add_row(
            str(r["shard"]),
            "[green]✓[/green]" if r["ok"] else "[red]✗[/red]",
            str(r["seed"]),
            f"{r['events']:,}",
            f"{r['materializations']:,}",
            f"{r['seconds']:,.1f}",
            f"{r['events_per_second']:,}",
            f"{r['peak_rss_mb']:,.0f}",
            f"{r['host']} pid {r['pid']}",
        )
    con.print(t)


def register(cli: click.Group) -> None:
    @cli.command("stress")
    @click.option(
        "--events",
        type=Count(min=1),
        default=DEFAULT_EVENTS,
        show_default=True,
        help="Scenario events to push after the planted facts (the default finishes in well under a "
        "minute; the spec's volume is 1m).",
    )
    @click.option(
        "--seed",
        type=click.IntRange(min=-MAX_SEED, max=MAX_SEED),
        default=0,
        show_default=True,
        help="Scenario seed (same seed, same events).",
    )
    @click.option(
        "--every",
        type=Count(min=1),
        default=5_000,
        show_default=True,
        help="Events between bursts of materializations.",
    )
    @click.option(
        "--burst",
        type=Count(min=1),
        default=4,
        show_default=True,
        help="Consecutive model requests materialized per burst.",
    )
    @click.option("--batch", type=Count(min=1), default=5_000, show_default=True, help="Events per append transaction.")
    @click.option(
        "--inline/--producer",
        "inline",
        default=None,
        help="Append in this process, or from a producer process (default: a producer from 50,000 events).",
    )
    @click.option(
        "--db",
        type=click.Path(dir_okay=False),
        default=None,
        help="Keep the run's database at this new path (default: a temporary one, removed; not with "
        "--shards or --scheduler).",
    )
    @click.option(
        "--shards",
        type=Count(min=1),
        default=None,
        help="Split the run into N independent shards, each its own temporary store and session of "
        "EVENTS/N events (rounded; shard 0 keeps --seed, shard i>0 a seed derived from --seed and i, "
        "named in its row); one aggregate report (default: 1, the unsharded run).",
    )
    @click.option(
        "--jobs",
        type=Count(min=1),
        default=2,
        show_default=True,
        help="Local worker processes for --shards without --scheduler.",
    )
    @click.option(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:PORT|local:N",
        help="Run the shards on a Dask cluster, as latch bench does: a running `dask scheduler` "
        "(workers started with DASK_DISTRIBUTED__WORKER__DAEMON=False) or a local cluster of N "
        "workers; needs pip install '.[cluster]' in the Latch checkout (default: local processes).",
    )
    @click.option(
        "--json",
        "json_out",
        type=click.Path(dir_okay=False, allow_dash=True),
        default=None,
        is_flag=False,
        flag_value="-",
        metavar="[FILE]",
        callback=output_file,
        help="Print the report as JSON to stdout instead of the table (like every command's --json); "
        "`--json FILE` is kept as an alias of --json-out FILE.",
    )
    @click.option(
        "-o",
        "--json-out",
        "json_file",
        type=click.Path(dir_okay=False, allow_dash=True),
        default=None,
        callback=output_file,
        help="Also write the report as JSON to this file ('-': stdout).",
    )
    def stress_cmd(
        events: int,
        seed: int,
        every: int,
        burst: int,
        batch: int,
        inline: bool | None,
        db: str | None,
        shards: int | None,
        jobs: int,
        scheduler: str | None,
        json_out: str | None,
        json_file: str | None,
    ) -> None:
        """Plant early facts, push EVENTS realistic events, verify every stress guarantee."""
        cfg = StressConfig(
            events=events,
            seed=seed,
            every=every,
            burst=burst,
            batch=batch,
            db=db,
            parallel=None if inline is None else not inline,
        )
        sharded = scheduler is not None or (shards or 1) > 1
        try:
            unit = "shards" if sharded else "events"
            # SIGTERM ends the run as Ctrl-C does: through run_stress's cleanup (its temporary database removed)
            with sigterm_unwinds(), progress("stress", unit, (shards or 1) if sharded else events) as advance:
                if sharded:
                    doc = run_sharded(cfg, shards or 1, jobs=jobs, scheduler=scheduler, progress=advance)
                else:
                    with run_collector():
                        doc = run_stress(cfg, progress=advance).to_json()
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        except SchedulerError as exc:
            raise click.ClickException(str(exc)) from None
        if json_out not in (None, "-"):  # `--json FILE`: the alias of --json-out FILE
            json_out, json_file = None, json_file or json_out
        # the file first: a reader that stops reading stdout (`| head -1`) ends the command at the next print
        if json_file not in (None, "-"):
            write_text(json_file, dumps(doc, indent=2) + "\n")
        if "-" in (json_out, json_file):
            click.echo(dumps(doc, indent=2))
        else:
            print_report(console(highlight=False), doc)
        if not doc["ok"]:
            sys.exit(1)
