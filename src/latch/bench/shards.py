"""``latch stress --shards K``: one stress run split into K independent shards, on local processes or a Dask cluster.

Shard ``i`` (0-based) is an ordinary :func:`~latch.bench.stress.run_stress` run in its own temporary store and
its own session, with the run's ``every``, ``burst``, ``batch`` and budget, and:

* **events**: ``ceil(events / K)`` for the first ``events % K`` shards, ``floor(events / K)`` for the others
  (:func:`shard_events`; they sum to ``events``; at least one each, so ``events >= K``);
* **seed** (:func:`shard_seed`): shard 0 uses ``--seed`` itself (so ``--shards 1`` is the unsharded run);
  shard ``i >= 1`` uses the first 8 bytes of ``sha256("latch-stress-shard:{seed}:{i}")`` read as a big-endian
  integer with the top bit cleared (``0 .. 2**63 - 1``, a valid ``--seed``). Every shard row names its seed:
  ``latch stress --seed SEED --events EVENTS`` (same ``--every``/``--burst``/``--batch``) re-runs that shard
  alone with the same events and checks;
* **producer**: ``--inline``/``--producer`` as given, else a producer process when the largest shard has at
  least :data:`~latch.bench.stress.PARALLEL_MIN_EVENTS` events (the same choice for every shard).

The shards run through :func:`latch.bench.executor.run_tasks`, the machinery of ``latch bench``: each in a
fresh process (a local process pool of ``jobs``, or a fresh child process of a Dask worker with ``scheduler``),
so its peak memory is its own; a shard whose worker is lost is re-run from scratch on another worker and
counted once. Each shard's report comes back to the client (:func:`run_shard`), then :func:`aggregate` builds
one report with every field of the unsharded report (:meth:`~latch.bench.stress.StressReport.to_json`):

* ``ok`` and each check: passes only when it passes in every shard; a failure's evidence names the shard
  (``shard 1 (seed S): ...``), ``failures`` is the total over shards; a shard that raised fails every check;
* ``events``, ``stored_events``, ``materializations``, ``rotations``, ``db_mb``: totals over shards;
  ``append_seconds`` and ``materialize_seconds``: seconds summed over shards (work, not wall time);
* ``seconds``: the wall time of the whole run on the client (seconds); ``events_per_second``: the total over
  that wall time; ``materializations_per_second`` keeps its unsharded meaning, views per second of materialize
  time (summed over shards); ``wall_materializations_per_second`` (sharded only) is the views over the wall time,
  the throughput of shards running at once;
* ``materialize_p50_ms``/``p99_ms`` and ``by_history``: over every view of every shard;
* ``peak_rss_mb``, ``producer_peak_rss_mb``, ``max_total_tokens``, ``hard_limit_tokens``: the maximum over
  shards (MB, tokens);
* ``config``: the run's (total events, ``--seed``, ...) plus ``shards`` (K);
* ``shards``: one row per shard, in shard order: ``shard`` (index), ``seed``, ``host`` and ``pid`` (where it
  ran) and that shard's own report (its ``config`` holds its events), or ``error`` for a shard that raised.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .executor import run_tasks, sigterm_unwinds
from .stress import CHECKS, PARALLEL_MIN_EVENTS, Check, StressConfig, StressReport, run_stress

__all__ = ["shard_events", "shard_seed", "plan_shards", "run_shard", "aggregate", "run_sharded"]

_SEED_MASK = 2**63 - 1


def shard_events(events: int, shards: int) -> list[int]:
    """Events per shard: ``ceil(events / shards)`` for the first ``events % shards``, ``floor`` for the rest.

    ``ValueError`` unless ``1 <= shards <= events``."""
    if shards < 1:
        raise ValueError(f"--shards must be at least 1, got {shards}")
    if events < shards:
        raise ValueError(f"--shards {shards} needs at least {shards} events (one per shard), got {events}")
    q, r = divmod(events, shards)
    return [q + 1 if i < r else q for i in range(shards)]


def shard_seed(seed: int, index: int) -> int:
    """Shard ``index``'s scenario seed: ``seed`` for shard 0, else the first 8 bytes of
    ``sha256("latch-stress-shard:{seed}:{index}")`` as a big-endian integer, top bit cleared (``0 .. 2**63-1``)."""
    if index == 0:
        return seed
    digest = hashlib.sha256(f"latch-stress-shard:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & _SEED_MASK


def plan_shards(cfg: StressConfig, shards: int) -> list[StressConfig]:
    """The :class:`~latch.bench.stress.StressConfig` of every shard (see the module docstring); ``ValueError``
    for ``shards < 1``, fewer events than shards, or a kept database (``cfg.db``: each shard has its own
    temporary store)."""
    if cfg.db is not None:
        raise ValueError(
            "--db keeps one run's database; it cannot be used with --shards or --scheduler "
            "(each shard has its own temporary store)"
        )
    counts = shard_events(cfg.events, shards)
    parallel = cfg.parallel if cfg.parallel is not None else max(counts) >= PARALLEL_MIN_EVENTS
    return [replace(cfg, events=n, seed=shard_seed(cfg.seed, i), parallel=parallel) for i, n in enumerate(counts)]


def run_shard(index: int, cfg: StressConfig) -> dict[str, Any]:
    """Run shard ``index`` of plan entry ``cfg`` (a task, in its own process): its report's JSON document plus
    ``shard``, ``seed``, ``host``, ``pid`` and ``timings`` (``[history events, seconds, rotated]`` per view, for the aggregate's
    percentiles; :func:`aggregate` moves them out of the row). SIGTERM ends it through run_stress's cleanup
    (its temporary store removed)."""
    with sigterm_unwinds():
        report = run_stress(cfg)
    return {
        "shard": index,
        "seed": cfg.seed,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **report.to_json(),
        "timings": [list(t) for t in report.timings],
    }


def _merge_checks(rows: Sequence[Mapping[str, Any]]) -> dict[str, Check]:
    merged = {}
    for name in CHECKS:
        check = Check(name)
        failed = []
        for r in rows:
            where = f"shard {r['shard']} (seed {r['seed']})"
            if "error" in r:
                failed.append(where)
                check.fail(f"{where} did not finish: {r['error']}")
                continue
            got = r["checks"].get(name)
            if got is None or not got["ok"]:
                failed.append(where)
                check.fail(f"{where}: {got['detail'] if got else 'not checked'}")
                check.failures += max(0, (got or {}).get("failures", 1) - 1)
        if check.ok:
            first = rows[0]["checks"][name]["detail"] if rows else ""
            check.detail = f"all {len(rows)} shards (shard 0: {first})"
        elif len(failed) > 1:
            check.detail += f"; also failed in {', '.join(failed[1:])}"
        merged[name] = check
    return merged


def aggregate(cfg: StressConfig, rows: Sequence[Mapping[str, Any]], seconds: float) -> dict[str, Any]:
    """The aggregate report of shard results ``rows`` (from :func:`run_shard`, or ``{"shard", "seed", "error"}``)
    after ``seconds`` of wall time: the JSON document described in the module docstring."""
    done = [r for r in rows if "error" not in r]
    report = StressReport(
        config={
            "events": cfg.events,
            "seed": cfg.seed,
            "every": cfg.every,
            "burst": cfg.burst,
            "batch": cfg.batch,
            "parallel": bool(done) and all(r["config"]["parallel"] for r in done),
            "shards": len(rows),
        }
    )
    report.seconds = seconds
    for key in (
        "events",
        "stored_events",
        "append_seconds",
        "materialize_seconds",
        "materializations",
        "rotations",
        "db_mb",
    ):
        setattr(report, key, sum(r[key] for r in done))
    for key in ("max_total_tokens", "hard_limit_tokens", "peak_rss_mb"):
        setattr(report, key, max((r[key] for r in done), default=0))
    producers = [r["producer_peak_rss_mb"] for r in done if r["producer_peak_rss_mb"] is not None]
    report.producer_peak_rss_mb = max(producers) if producers else None
    report.timings = [(int(h), float(s), bool(rot)) for r in done for h, s, rot in r["timings"]]
    report.checks = _merge_checks(rows)
    doc = report.to_json()
    doc["wall_materializations_per_second"] = round(report.materializations / seconds, 2) if seconds else 0.0
    doc["shards"] = [{k: v for k, v in r.items() if k != "timings"} for r in rows]
    return doc


def run_sharded(
    cfg: StressConfig,
    shards: int,
    *,
    jobs: int = 2,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run ``cfg`` as ``shards`` shards (see the module docstring) on ``jobs`` local processes, or on the Dask
    cluster of ``scheduler`` (``tcp://HOST:PORT`` or ``local:N``); ``progress(shards done, shards)`` after each.

    Returns the aggregate JSON document (:func:`aggregate`; ``doc["ok"]`` tells whether every check passed in
    every shard). ``ValueError`` for a bad plan (:func:`plan_shards`, :func:`latch.bench.stress.run_stress`'s
    parameters); :class:`~latch.bench.executor.SchedulerError` for an unusable scheduler."""
    for name in ("every", "burst", "batch"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"stress: {name} must be a positive integer, got {getattr(cfg, name)}")
    plan = plan_shards(cfg, shards)
    tasks = [({"shard": i, "seed": c.seed}, (i, c)) for i, c in enumerate(plan)]
    start = time.perf_counter()
    rows = run_tasks(run_shard, tasks, jobs=jobs, scheduler=scheduler, progress=progress)
    return aggregate(cfg, rows, time.perf_counter() - start)
