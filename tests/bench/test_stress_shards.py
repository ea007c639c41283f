"""``latch stress --shards K [--scheduler ...]``: a stress run split into independent shards.

The plan (event split, seed rule) and the aggregate of real shard reports run in-process in a second or two.
The cluster test starts a real ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1
(:func:`dask_support.dask_cluster`, as ``tests/bench/test_bench_dask.py``), runs ``latch stress --events 20000
--shards 2`` locally (a process pool) and then with ``--scheduler`` while one worker is SIGKILLed mid-shard:
both pass, the shard rows agree but for timings, each shard is counted once, and the aggregate is the sum/max
of the rows (about 45 s). A bad scheduler address is one line; SIGTERM ends local shards with their cleanup.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from dask_support import BIN, dask_cluster, kill_when_busy, spawn

from latch.bench.shards import aggregate, plan_shards, run_shard, shard_events, shard_seed
from latch.bench.stress import CHECKS, StressConfig, run_stress
from latch.cli import _load_commands, cli
from latch.engine.continuity import ContinuityEngine

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

TIMING = {
    "seconds",
    "events_per_second",
    "append_seconds",
    "materialize_seconds",
    "materializations_per_second",
    "wall_materializations_per_second",
    "materialize_p50_ms",
    "materialize_p99_ms",
    "peak_rss_mb",
    "producer_peak_rss_mb",
    "db_mb",
    "by_history",
    "host",
    "pid",
}  # what differs between two runs of the same shard


def test_events_split_by_ceil_then_floor_and_seeds_follow_the_documented_rule():
    assert shard_events(20_000, 2) == [10_000, 10_000]
    assert shard_events(10, 4) == [3, 3, 2, 2]
    assert shard_events(5, 5) == [1] * 5
    with pytest.raises(ValueError, match="needs at least 3 events"):
        shard_events(2, 3)
    assert shard_seed(42, 0) == 42  # --shards 1 is the unsharded run
    # sha256("latch-stress-shard:0:1")[:8], big-endian, top bit cleared
    assert shard_seed(0, 1) == 7_670_946_861_259_704_579
    seeds = [shard_seed(-3, i) for i in range(8)]
    assert len(set(seeds)) == 8 and all(0 <= s < 2**63 for s in seeds[1:])
    plan = plan_shards(StressConfig(events=100_001, seed=5, every=100), 2)
    assert [(c.events, c.seed, c.parallel, c.every) for c in plan] == [
        (50_001, 5, True, 100),
        (50_000, shard_seed(5, 1), True, 100),
    ]  # one producer choice for every shard
    with pytest.raises(ValueError, match="--db"):
        plan_shards(StressConfig(events=10, db="kept.db"), 2)


def test_a_check_failing_in_one_shard_fails_the_aggregate_naming_that_shard(monkeypatch):
    plan = plan_shards(StressConfig(events=1_000, seed=1, every=500, burst=2, parallel=False), 2)
    good = run_shard(0, plan[0])
    monkeypatch.setattr(ContinuityEngine, "recall", lambda self, query, **kw: [])
    bad = run_shard(1, plan[1])
    doc = aggregate(StressConfig(events=1_000, seed=1, every=500, burst=2), [good, bad], seconds=2.0)
    assert good["ok"] and not bad["ok"] and not doc["ok"]
    assert [k for k, c in doc["checks"].items() if not c["ok"]] == ["exact_raw_recall"]
    assert doc["checks"]["exact_raw_recall"]["detail"] == (
        f"shard 1 (seed {plan[1].seed}): engine.recall('INV-2024-0917 7f3a9c1e') did not return seq 7 verbatim, "
        "and the final view does not hold it"
    )
    assert doc["checks"]["bounded_tokens"]["detail"].startswith("all 2 shards (shard 0: max ")
    assert doc["events"] == 1_000 and doc["wall_materializations_per_second"] == round(doc["materializations"] / 2.0, 2)
    assert doc["materializations_per_second"] == round(doc["materializations"] / doc["materialize_seconds"], 2)
    # a shard that raised fails every check, and its error is the evidence
    doc = aggregate(StressConfig(events=1_000), [good, {"shard": 1, "seed": 9, "error": "RuntimeError: boom"}], 2.0)
    assert not doc["ok"] and doc["events"] == 500
    assert {c["detail"] for c in doc["checks"].values()} == {"shard 1 (seed 9) did not finish: RuntimeError: boom"}


def test_one_shard_is_the_unsharded_run_and_its_row_reruns_alone():
    plan = plan_shards(StressConfig(events=1_200, seed=3, every=400, burst=2, parallel=False), 2)
    row = run_shard(1, plan[1])
    again = run_stress(
        StressConfig(events=row["events"], seed=row["seed"], every=400, burst=2, parallel=False)
    ).to_json()  # latch stress --seed SEED --events EVENTS
    assert {k: v for k, v in row.items() if k not in TIMING | {"shard", "seed", "timings"}} == {
        k: v for k, v in again.items() if k not in TIMING
    }
    _load_commands()
    res = CliRunner().invoke(
        cli, ["stress", "--events", "600", "--every", "300", "--shards", "1", "--inline", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert "shards" not in json.loads(res.stdout)  # today's report, no shard rows


def test_usage_mistakes_are_one_line(tmp_path):
    _load_commands()
    for args, message in (
        (["--shards", "0"], "0 is not in the range x>=1"),
        (["--events", "2", "--shards", "3"], "--shards 3 needs at least 3 events"),
        (["--shards", "2", "--db", str(tmp_path / "k.db")], "--db keeps one run's database"),
    ):
        res = CliRunner().invoke(cli, ["stress", *args])
        assert res.exit_code == 2, res.output
        assert message in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_a_bad_scheduler_is_one_line_naming_it(tmp_path):
    pytest.importorskip("distributed", reason="pip install '.[cluster]' in the Latch checkout")
    for spec, message in (
        ("nowhere", "--scheduler 'nowhere': expected tcp://HOST:PORT or local:N"),
        ("tcp://127.0.0.1:9", "--scheduler tcp://127.0.0.1:9: cannot connect"),
    ):
        proc = subprocess.run(
            [str(BIN / "latch"), "stress", "--events", "100", "--shards", "2", "--scheduler", spec],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},
        )
        assert proc.returncode == 1, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("signals", [1, 3])
def test_sigterm_ends_local_shards_and_removes_their_temporary_stores(tmp_path, signals):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen(
        [str(BIN / "latch"), "stress", "--events", "2000000", "--shards", "2", "--inline"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    deadline = time.monotonic() + 60
    while sum((p / "stress.db").exists() for p in scratch.glob("latch-stress-*")) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)
    time.sleep(1.0)  # both shards well into their runs
    for _ in range(signals):  # a second SIGTERM while the shards unwind does not cut their cleanup short
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60)  # not the hours the shards would take
    assert proc.returncode == 143, (proc.returncode, err[-500:])
    assert "Traceback" not in err
    assert list(scratch.glob("latch-stress-*")) == []


@pytest.fixture
def cluster(tmp_path):
    """``(address, {name: worker process})``: a scheduler and two single-threaded workers on loopback."""
    pytest.importorskip("distributed", reason="pip install '.[cluster]' in the Latch checkout")
    if os.environ.get("CI") and not shutil.which("dask", path=str(Path(sys.executable).parent)):
        pytest.fail("CI is set but dask[distributed] is not installed (the [test] extra has it)", pytrace=False)
    with dask_cluster(tmp_path, 2) as got:
        yield got


def _stress(tmp_path: Path, name: str, *extra: str) -> subprocess.Popen:
    return spawn(
        [
            str(BIN / "latch"),
            "stress",
            "--events",
            "20000",
            "--shards",
            "2",
            "--json-out",
            str(tmp_path / f"{name}.json"),
            *extra,
        ],
        tmp_path / f"{name}.log",
    )


def _same(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in TIMING}


def test_shards_on_the_cluster_match_the_local_shards_and_survive_a_lost_worker(tmp_path, cluster):
    address, workers = cluster
    local = _stress(tmp_path, "local")
    assert local.wait(timeout=300) == 0, (tmp_path / "local.log").read_text()

    run = _stress(tmp_path, "cluster", "--scheduler", address)
    killed = kill_when_busy(address, workers["w0"], "w0", run, after=1.0)  # mid-shard: its store is filling
    assert run.wait(timeout=300) == 0, (tmp_path / "cluster.log").read_text()
    assert killed, "w0 was never seen running a shard"
    assert workers["w0"].wait(timeout=10) == -signal.SIGKILL

    want = json.loads((tmp_path / "local.json").read_text())
    doc = json.loads((tmp_path / "cluster.json").read_text())
    rows = doc["shards"]
    assert [r["shard"] for r in rows] == [0, 1] and [r["events"] for r in rows] == [10_000, 10_000]
    assert [r["seed"] for r in rows] == [0, shard_seed(0, 1)]
    assert [_same(r) for r in rows] == [_same(r) for r in want["shards"]]  # same events, views and checks
    assert len({r["pid"] for r in rows}) == 2
    assert doc["ok"] and want["ok"] and set(doc["checks"]) == set(CHECKS)
    assert all(c["ok"] and c["detail"].startswith("all 2 shards") for c in doc["checks"].values())

    # the aggregate is the sum / max of the rows: nothing counted twice after the re-run
    for key in ("events", "stored_events", "materializations", "rotations"):
        assert doc[key] == sum(r[key] for r in rows), key
    assert doc["events"] == 20_000 and doc["stored_events"] == 2 * (10_000 + 10)
    for key in ("append_seconds", "materialize_seconds", "db_mb"):
        assert doc[key] == pytest.approx(sum(r[key] for r in rows), abs=0.02), key
    for key in ("peak_rss_mb", "max_total_tokens", "hard_limit_tokens"):
        assert doc[key] == max(r[key] for r in rows), key
    assert doc["events_per_second"] == pytest.approx(doc["events"] / doc["seconds"], rel=0.01)
    # rates are rounded to 2 decimals: under load a rate near 0.2 views/s is off by up to 0.005 from rounding alone
    assert doc["wall_materializations_per_second"] == pytest.approx(
        doc["materializations"] / doc["seconds"], rel=0.02, abs=0.006
    )
    assert doc["materializations_per_second"] == pytest.approx(
        doc["materializations"] / doc["materialize_seconds"], rel=0.02, abs=0.006
    )
    assert sum(b["count"] for b in doc["by_history"]) == doc["materializations"]
    assert (
        doc["config"]
        == {**want["config"], "shards": 2}
        == {"events": 20_000, "seed": 0, "every": 5_000, "burst": 4, "batch": 5_000, "parallel": False, "shards": 2}
    )
    # every unsharded field, and the wall-time rate of the shards together
    assert set(rows[0]) - {"shard", "seed", "host", "pid"} == set(doc) - {"shards", "wall_materializations_per_second"}
