"""Each local task runs in a process of its own, forked from a long-lived warm worker: its peak memory is its own,
and a task whose process is killed is an error row while the others still count. The worker waits for each task
process to end: none is left behind."""

from __future__ import annotations

import os
import resource
import signal
import time

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
