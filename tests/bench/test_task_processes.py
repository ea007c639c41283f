"""Each local task runs in a process of its own, forked from a long-lived warm worker: its peak memory is its own,
and a task whose process is killed is an error row while the others still count. The worker waits for each task
process to end: none is left behind."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from latch.bench import executor

pytestmark = pytest.mark.slow  # task servers


def _allocate(mb: int) -> dict:
    """Touch ``mb`` MB; the process's peak RSS above its RSS at the start (MB), its pid and its parent's."""
    with open("/proc/self/statm") as f:
        rss0 = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    block = bytearray(mb * 1_000_000)
    block[::4096] = b"x" * len(block[::4096])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss0
    return {"peak_mb": peak, "pid": os.getpid(), "worker": os.getppid()}


def _killed(n: int) -> dict:
    if n == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"n": n}


def test_each_task_has_a_process_of_its_own_and_its_own_peak_memory():
    rows = executor.run_tasks(_allocate, [({"t": i}, (mb,)) for i, mb in enumerate((120, 0, 60))], jobs=1)
    assert len({r["pid"] for r in rows}) == 3 and os.getpid() not in {r["pid"] for r in rows}
    assert len({r["worker"] for r in rows}) == 1  # forked by one long-lived worker
    big, nothing, half = (r["peak_mb"] for r in rows)
    assert big > 100 and nothing < 20 and 50 < half < 100  # the 120 MB of the first task counted once


def test_a_task_whose_process_is_killed_is_an_error_row_and_the_others_count():
    rows = executor.run_tasks(_killed, [({"t": n}, (n,)) for n in range(3)], jobs=1)
    assert rows[0] == {"n": 0} and rows[2] == {"n": 2}
    assert rows[1]["t"] == 1 and "killed by signal 9 (SIGKILL)" in rows[1]["error"]


def _ended_siblings(n: int) -> dict:
    """The processes this process's parent forked that ended and were not reaped (zombies), by the last task."""
    worker, zombies = os.getppid(), 0
    if n == LAST:
        time.sleep(0.5)  # the earlier task processes have ended
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
                except (OSError, ValueError):  # ended meanwhile
                    continue
                zombies += int(ppid) == worker and state == "Z"
    return {"n": n, "zombies": zombies}


LAST = 20


def test_task_processes_that_ended_are_reaped():
    rows = executor.run_tasks(_ended_siblings, [({"t": n}, (n,)) for n in range(LAST + 1)], jobs=1)
    assert [r.get("n") for r in rows] == list(range(LAST + 1)), rows
    assert rows[-1]["zombies"] == 0


def _descendants(root: int) -> dict[int, int]:
    """Every live process below ``root`` (pid: depth), from /proc's parent links."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    depth = {root: 0}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in depth and pid not in depth:
                depth[pid] = depth[parent] + 1
                changed = True
    del depth[root]
    return depth


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(("sig", "signals"), [(signal.SIGTERM, 1), (signal.SIGTERM, 3), (signal.SIGKILL, 1)])
def test_latch_bench_ended_by_a_signal_leaves_no_process_it_started(tmp_path, sig, signals):
    empty = tmp_path / "no-examples"
    empty.mkdir()
    command = [str(Path(sys.executable).parent / "latch"), "bench", "--scenario-events", "40000"]
    command += ["--engines", "continuity", "--budgets", "32k:4k:8k,64k:8k:16k", "--examples", str(empty)]
    command += ["--out", str(tmp_path / "out"), "--jobs", "2"]
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    # the command, its task server, the server's workers, their task processes: running jobs
    while max(_descendants(proc.pid).values(), default=0) < 3:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.1)
    started = _descendants(proc.pid)
    for _ in range(signals):  # a second SIGTERM while it unwinds does not cut its cleanup short
        proc.send_signal(sig)
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60)  # not the minutes the jobs would take
    if sig == signal.SIGTERM:  # through its cleanup
        assert proc.returncode == 143, (proc.returncode, err[-500:])
        assert "Traceback" not in err
    else:  # no cleanup of its own: its workers end once it has ended, each ending its task first
        assert proc.returncode == -sig
    deadline = time.monotonic() + 30
    while (left := [pid for pid in started if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], [open(f"/proc/{pid}/cmdline").read()[:120] for pid in left if _alive(pid)]
