"""A SIGKILLed ``latch stress`` (or a Dask worker lost mid-shard) cannot remove its ``latch-stress-*`` folder; the
next run removes such orphans, and only those: a folder whose run is alive stays (``bench.stress`` owner lock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from latch.bench.stress import StressConfig, run_stress, sweep_orphaned_scratch


def _start(scratch: Path, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    before = set(scratch.glob("latch-stress-*"))
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "TMPDIR": str(scratch)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "latch", "stress", "--events", "2000000", "--inline"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while True:
        new = [p for p in set(scratch.glob("latch-stress-*")) - before if (p / "stress.db").exists()]
        if new:
            return proc, new[0]
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)


def test_a_killed_runs_folder_is_swept_and_a_live_runs_is_not(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    live, alive = _start(scratch, tmp_path)  # first: a run sweeps orphans as it starts
    killed, orphan = _start(scratch, tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    assert (orphan / "stress.db").exists() and (orphan / ".owner").exists()  # SIGKILL: nothing could clean up
    legacy = scratch / "latch-stress-legacy"  # no .owner: being created, or from an older Latch
    legacy.mkdir()
    try:
        assert sweep_orphaned_scratch(str(scratch)) == [str(orphan)]
        assert not orphan.exists()
        assert (alive / "stress.db").exists() and legacy.is_dir()
        assert sweep_orphaned_scratch(str(scratch)) == []  # idempotent; the live run still holds its lock
    finally:
        live.send_signal(signal.SIGTERM)
        live.communicate(timeout=60)
    assert not alive.exists()  # its own run removed it on SIGTERM, as before
    assert legacy.is_dir()


def test_a_new_stress_run_removes_an_orphan_before_it_starts(tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    killed, orphan = _start(scratch, tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    report = run_stress(StressConfig(events=300, seed=1))
    assert report.ok
    assert list(scratch.glob("latch-stress-*")) == []  # the orphan swept, the run's own folder removed
