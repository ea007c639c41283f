"""``latch bench --scheduler`` on a real Dask cluster.

A real ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1 (ephemeral ports; workers started
with ``DASK_DISTRIBUTED__WORKER__DAEMON=False`` so each job runs in its own process), then ``latch bench``
in a subprocess, locally and with ``--scheduler``, over a subset of the corpus (four sessions of three
formats, two engines; about 40 s): the JSON rows are the same, timings and peak memory aside. In the second run one
worker is SIGKILLed (its whole process group) while it runs a job: the bench still completes, every job
counted once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_support import REPO
from dask_support import BIN, dask_cluster, kill_when_busy, spawn

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

if os.environ.get("CI") and not shutil.which("dask", path=str(Path(sys.executable).parent)):
    pytest.fail("CI is set but dask[distributed] is not installed (the [test] extra has it)", pytrace=False)
distributed = pytest.importorskip("distributed", reason="pip install '.[cluster]' in the Latch checkout")

CORPUS = REPO.parent / "shared" / "corpus"
SUBSET = [
    "claude-code/claude-reliability_python-to-rust-port.jsonl",
    "swe-agent/ctf_i_got_id_demo.traj",
    "gemini-cli/entire_session.json",
    "gemini-cli/vibecodingtracker_session.jsonl",
]
ENGINES = "continuity,sliding-window"
TIMING = ("seconds", "peak_mb")  # the only fields that differ between two runs of the same job


@pytest.fixture
def cluster(tmp_path):
    """``(address, {name: worker process})``: a scheduler and two single-threaded workers on loopback."""
    with dask_cluster(tmp_path, 2) as got:
        yield got


def _bench(tmp_path: Path, out: str, *extra: str) -> subprocess.Popen:
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        for rel in SUBSET:
            (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(CORPUS / rel, corpus / rel)
        (tmp_path / "no-examples").mkdir()
    return spawn(
        [
            str(BIN / "latch"),
            "bench",
            "--engines",
            ENGINES,
            "--corpus",
            str(corpus),
            "--examples",
            str(tmp_path / "no-examples"),
            "--scenario-events",
            "0",
            "--budgets",
            "32k:4k:8k",
            "--out",
            str(tmp_path / out),
            "--jobs",
            "2",
            *extra,
        ],
        tmp_path / f"{out}.log",
        LATCH_HOME=str(tmp_path / "home"),
    )


def _rows(tmp_path: Path, out: str) -> list[dict]:
    jobs = json.loads((tmp_path / out / "report.json").read_text())["jobs"]
    return [{k: v for k, v in job.items() if k not in TIMING} for job in jobs]


def test_the_cluster_gives_the_local_rows_and_survives_a_lost_worker(tmp_path, cluster):
    if not all((CORPUS / rel).is_file() for rel in SUBSET):
        pytest.skip(f"the corpus subset is not under {CORPUS}")
    address, workers = cluster
    local = _bench(tmp_path, "local")
    assert local.wait(timeout=300) == 0, (tmp_path / "local.log").read_text()

    run = _bench(tmp_path, "cluster", "--scheduler", address)
    killed_while = kill_when_busy(address, workers["w0"], "w0", run)  # the worker, its nanny and the job's process
    assert run.wait(timeout=300) == 0, (tmp_path / "cluster.log").read_text()
    assert killed_while, "w0 was never seen running a job"
    assert workers["w0"].wait(timeout=10) == -signal.SIGKILL

    want, got = _rows(tmp_path, "local"), _rows(tmp_path, "cluster")
    keys = [(r["engine"], r["session"], r["budget"]) for r in got]
    assert len(keys) == len(set(keys)) == 2 * len(SUBSET)  # every job once, none twice
    assert not any("error" in r for r in got)
    assert got == want  # the same rows, in the same (engine, session, budget) order
    assert all(r["peak_mb"] is not None for r in json.loads((tmp_path / "cluster" / "report.json").read_text())["jobs"])


def test_a_bad_scheduler_is_one_clear_line(tmp_path):
    for spec, message in (("nowhere", "expected tcp://HOST:PORT or local:N"), ("tcp://127.0.0.1:9", "cannot connect")):
        proc = subprocess.run(
            [
                str(BIN / "latch"),
                "bench",
                "--scenario-events",
                "50",
                "--examples",
                str(tmp_path),
                "--engines",
                "continuity",
                "--out",
                str(tmp_path / "out"),
                "--scheduler",
                spec,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "LATCH_HOME": str(tmp_path / "home"), "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},
        )
        assert proc.returncode == 1, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
