"""A real Dask cluster on loopback for tests and benchmarks: ``dask scheduler`` and ``dask worker`` subprocesses.

Ephemeral ports (``--port 0``, the address read from ``--scheduler-file``), single-threaded workers started with
``DASK_DISTRIBUTED__WORKER__DAEMON=False`` (a bench job runs in its own child process of the worker), each in its
own process group so a test can SIGKILL one worker whole (nanny, worker and the job's process).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

BIN = Path(sys.executable).parent


def spawn(args: list[str], log: Path, **env: str) -> subprocess.Popen:
    """``args`` in a new session (process group), output to ``log``, cwd ``log``'s folder."""
    return subprocess.Popen(
        args,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **env},
        cwd=log.parent,
    )


@contextlib.contextmanager
def dask_cluster(folder: Path, workers: int = 2) -> Iterator[tuple[str, dict[str, subprocess.Popen]]]:
    """``(scheduler address, {"w0": process, ...})`` while the cluster runs; every process is ended after."""
    import distributed  # optional dependency: the callers skip without it

    file = folder / "scheduler.json"
    procs = [
        spawn(
            [
                str(BIN / "dask"),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(file),
            ],
            folder / "scheduler.log",
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not file.exists():
            if time.monotonic() > deadline:
                raise TimeoutError((folder / "scheduler.log").read_text())
            time.sleep(0.2)
        time.sleep(0.2)
        address = json.loads(file.read_text())["address"]
        named = {}
        for i in range(workers):
            name = f"w{i}"
            named[name] = spawn(
                [
                    str(BIN / "dask"),
                    "worker",
                    address,
                    "--name",
                    name,
                    "--nthreads",
                    "1",
                    "--nworkers",
                    "1",
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                ],
                folder / f"{name}.log",
                DASK_DISTRIBUTED__WORKER__DAEMON="False",
            )
            procs.append(named[name])
        with distributed.Client(address, timeout=30) as client:
            client.wait_for_workers(workers, timeout=60)
        yield address, named
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def kill_when_busy(
    address: str, worker: subprocess.Popen, name: str, run: subprocess.Popen, after: float = 0.0, timeout: float = 120
) -> list[str]:
    """While ``run`` runs, wait for worker ``name`` to be processing a task, wait ``after`` seconds, then SIGKILL
    its whole process group (nanny, worker and the task's process); the keys it was processing (``[]``: never
    seen busy before ``run`` ended or ``timeout``)."""
    import distributed  # optional dependency: the callers skip without it

    with distributed.Client(address, timeout=30) as client:
        deadline = time.monotonic() + timeout
        while run.poll() is None and time.monotonic() < deadline:
            names = {w["name"]: addr for addr, w in client.scheduler_info()["workers"].items()}
            busy = list(client.processing().get(names.get(name), ()))
            if busy:
                time.sleep(after)
                os.killpg(worker.pid, signal.SIGKILL)
                return busy
            time.sleep(0.05)
    return []
