"""Run independent tasks, each in a fresh process: a local process pool, or a Dask cluster (``--scheduler``).

The machinery shared by ``latch bench`` (a task is one engine × session × budget job,
:mod:`latch.bench.runner`) and ``latch stress --shards`` (a task is one shard, :mod:`latch.bench.shards`).

A *task* is a module-level function ``fn`` (picklable by reference), its arguments and a *label* (a small
dict naming the task, e.g. ``{"shard": 1}``); the function returns a JSON-ready dict. :func:`run_tasks` runs
every task once, each in its own fresh process, so a task's peak memory (``ru_maxrss``) is its own:

* locally (``scheduler=None``): a process pool of ``jobs`` long-lived workers forked from a server that loaded what
  every job needs (:func:`mp_context`, :mod:`latch.bench.warm`); each worker forks each of its tasks a process of
  its own (:func:`forked`): a task's fixed cost is one fork of a warm, idle worker, made by that worker beside the
  others (not a new pool process started, one after another, by the pool's single manager thread); each worker first
  keeps its C heap's free chunks (:func:`hold_free_heap`), so a task's process writes fewer of the worker's pages,
  and ends itself (its running task first) once the process that made the pool has ended, SIGKILL too
  (:func:`die_with`);
* with ``scheduler`` (``tcp://HOST:PORT`` of a running ``dask scheduler``, or ``local:N`` for a local Dask
  cluster of N single-threaded workers): Dask tasks through ``Client.get_executor()``, each running the
  function in a fresh child process of its worker (:func:`in_own_process`; the worker must not be daemonic,
  ``distributed.worker.daemon: False``, :data:`DAEMON_HINT`). A task whose worker is lost mid-run is re-run
  by the scheduler on another worker; its result is stored by its place in the plan, so each task is counted
  once.

What a command pays once, whatever its tasks (the task server's warm-up, a Dask cluster's start and close), need not
wait for the plan: :class:`Backend` starts it in the background while the caller finds its tasks (``latch bench``'s
discovery), runs the tasks (:func:`run_tasks` with ``backend=``) and closes in the background while the caller
writes its report.

A task that raises, or whose process dies, comes back as ``{**label, "error": "Type: message"}``; the other
tasks still count.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import multiprocessing as mp
import os
import pickle
import re
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

__all__ = [
    "Backend",
    "SchedulerError",
    "DAEMON_HINT",
    "SCHEDULER_RE",
    "mp_context",
    "connect",
    "end_launcher",
    "die_with",
    "forked",
    "guarded",
    "hold_free_heap",
    "in_own_process",
    "pool_worker",
    "run_tasks",
    "sigterm_unwinds",
    "start_task_server",
    "terminated",
]

PRELOAD = ["latch.bench._preload"]
"""What the fork server imports once (:mod:`latch.bench.warm`: Latch, numpy, the price table, the plugins'
modules), so every fresh task process starts warm."""


class SchedulerError(Exception):
    """``--scheduler`` could not be used: dask is not installed, the address is malformed or unreachable."""


DAEMON_HINT = (
    "the Dask worker is daemonic and cannot start the task's own process: start workers with "
    "DASK_DISTRIBUTED__WORKER__DAEMON=False (config distributed.worker.daemon: False)"
)

SCHEDULER_RE = re.compile(r"^(?:(?P<local>local):(?P<n>[1-9][0-9]*)|(?P<addr>(?:tcp|tls|inproc|ws|wss)://\S+))$")


def mp_context() -> Any:
    """Fresh task processes: forked from a server that loaded Latch, numpy, the price table and the plugins
    (:data:`PRELOAD`; spawn where there is no forkserver)."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return mp.get_context("spawn")  # pragma: no cover - Windows


def start_task_server() -> None:
    """Start the local task server (:func:`mp_context`) now and return at once: its warm-up (about a second of
    imports and one small job, :mod:`latch.bench.warm`) then runs while this process does something else, and the
    first task process forks from a ready server. Nothing to do where there is no forkserver."""
    if mp_context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _error(label: Mapping[str, Any], exc: BaseException) -> dict[str, Any]:
    return {**label, "error": f"{type(exc).__name__}: {exc}"}


def guarded(fn: Callable[..., dict[str, Any]], label: Mapping[str, Any], *args: Any) -> dict[str, Any]:
    """``fn(*args)``; an exception comes back as ``{**label, "error": "Type: message"}``, so an
    exception the parent could not unpickle never breaks the pool and the other tasks."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - one broken task is reported, the others still count
        return _error(label, exc)


def terminated(signum: int, frame: object) -> None:
    """A SIGTERM handler that unwinds (every ``finally`` and ``with`` runs: a run's workers and task processes ended,
    a stress run's temporary store removed) with ``SystemExit(128 + signum)``, 143 for SIGTERM; a second ``signum``
    while it unwinds is ignored, not raised in its cleanup."""
    signal.signal(signum, signal.SIG_IGN)
    raise SystemExit(128 + signum)


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM ends the process as Ctrl-C does, through its cleanup (:func:`terminated`): a
    ``latch bench`` or ``latch stress`` command and a stress shard's task. Off the main thread (where Python cannot
    set a handler) it changes nothing. After a SIGTERM the handler is left ignoring further ones while the process
    unwinds; else the one before is put back."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminated) if main else None
    try:
        yield
    finally:
        if main and signal.getsignal(signal.SIGTERM) is terminated:
            signal.signal(signal.SIGTERM, previous)


def _load_libc() -> Any:
    """The C library (``ctypes.CDLL(None)``) on Linux, else ``None``: loaded once per process at import (the task
    server imports this module, so every task process has it), not in each task's process (a ``CDLL`` builds a class
    of its own: about 100 page faults and 0.3 ms in a fresh task process)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no C library to load
        return None


_libc = _load_libc()
_prctl = getattr(_libc, "prctl", None)


_held = [0, 0]
"""The C heap's chunks :func:`hold_free_heap` took in this process, kept and never freed: ``[last, count]``, the
address of the last chunk taken (each chunk's first 8 bytes hold the address of the one taken before it, 0 for the
first) and how many. A chain through the chunks themselves: keeping their addresses in a growing Python list would
``realloc`` its buffer on the C heap while chunks are being taken, and the old buffer, freed, would be free memory
nobody takes."""


TCACHE_MOST = 256 * 1024
"""What glibc's per-thread caches of freed chunks (tcache) hold at most by default, in bytes: 7 chunks of each of
its 64 sizes (32 to 1,040 bytes)."""


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def hold_free_heap() -> int:
    """Take every free chunk of the C library's main heap and keep it, so what the processes this one forks next
    allocate with ``malloc`` comes from the heap's top, page after fresh page, not from free chunks scattered over
    this process's pages, each a page a task's process copies on its first write (fork's copy-on-write). A pool's
    worker runs it once, before it forks any task's process (the pool's ``initializer``): a small bench job's task
    process then takes about 600 fewer minor page faults (of about 2,800; its in-memory store's SQLite connection and
    schema most of them) and 2-3 ms less CPU.

    Returns how many chunks it has taken in this process, this call and earlier ones (kept for the process's life,
    the free bytes outside the heap's top, about
    0.3-1 MB in a worker); 0 where the C library is not glibc 2.33 or later (no ``mallinfo2``). Never raises."""
    try:
        mallinfo2, malloc, free, sbrk = _libc.mallinfo2, _libc.malloc, _libc.free, _libc.sbrk
    except AttributeError:  # not Linux, not glibc, or glibc older than 2.33
        return 0
    mallinfo2.restype, mallinfo2.argtypes = _MallInfo2, []
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.restype, free.argtypes = None, [ctypes.c_void_p]
    sbrk.restype, sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
    info = mallinfo2()
    end = sbrk(0)
    if not end or info.keepcost > end:
        return 0
    top = end - info.keepcost  # the main heap's top chunk: [top, end)
    # at most what is taken: the free bytes outside it, and what the per-size caches can hold (``mallinfo2`` counts
    # their chunks as in use: at most 7 of each size up to 1,032 bytes, under 256 KiB)
    budget = max(0, info.fordblks - info.keepcost) + TCACHE_MOST
    taken = 0
    # the biggest requests first (each takes a free chunk of at least its size), then every small chunk size (16 bytes
    # apart), which empties the per-size caches (tcache, fast bins) and whatever small chunks the big requests left
    for size in [(1 << k) - 8 for k in range(20, 10, -1)] + list(range(1032, 0, -16)):
        while taken + size <= budget:
            chunk = malloc(size)
            if not chunk or chunk >= top:  # from the top chunk (or a mapping of its own): no free chunk this size
                free(chunk)
                break
            ctypes.c_void_p.from_address(chunk).value = _held[0] or None
            _held[0] = chunk
            _held[1] += 1
            taken += size
    return _held[1]


def die_with(command: int) -> None:
    """In a pool's worker (forked by the task server, not by the process that made the pool): end this worker with
    SIGTERM once process ``command`` (the pool's maker: ``latch bench``, ``latch stress``, a Dask worker) has ended
    however it ended, SIGKILL too, so a worker and its running task (:func:`_end_with`) are not left behind for
    good: the task server keeps a worker alive, and a worker waits for work from a pool nobody holds any more.
    A daemon thread waits on a pidfd of ``command`` (Linux 5.3 or later; elsewhere nothing is watched). If
    ``command`` has already ended, the worker ends at once."""
    try:
        pidfd = os.pidfd_open(command)
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGTERM)
        return
    except (AttributeError, OSError):  # pragma: no cover - not Linux, or a kernel before 5.3
        return

    def wait() -> None:
        select.select([pidfd], [], [])  # readable once ``command`` has ended
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="latch-die-with", daemon=True).start()


def pool_worker(command: int) -> None:
    """The local pool's worker initializer: :func:`die_with` the pool's maker ``command``, then
    :func:`hold_free_heap`."""
    die_with(command)
    hold_free_heap()


def _die_with_parent(parent: int) -> None:
    """In a task's process: ask Linux to send it SIGTERM when the worker that forked it ends however it ends (a
    killed worker leaves no task running behind it; a stress shard still removes its temporary store); nothing
    elsewhere."""
    if _prctl is not None:
        _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the worker ended before prctl
        os._exit(1)


def _end_with(pid: int, signum: int) -> None:
    """In a worker: send ``signum`` to its task's process ``pid``, wait until it has ended (a stress shard removes
    its temporary store), then end as the signal would have ended the worker. A second ``signum`` meanwhile (the pool
    ending its workers again as the caller exits) is ignored: passed on, it would cut the task's cleanup short."""
    signal.signal(signum, signal.SIG_IGN)
    try:
        os.kill(pid, signum)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    os._exit(128 + signum)


def forked(fn: Callable[..., dict[str, Any]], label: Mapping[str, Any], *args: Any) -> dict[str, Any]:
    """One task in a process of its own, forked from this (warm, idle) process: :func:`guarded` in the child, its
    result back through a pipe, so the task's peak memory (``ru_maxrss``) is its own. A child that dies before
    its result is complete (a signal, ``os._exit``, a result that does not pickle) comes back as
    ``{**label, "error": ...}`` naming how it ended. POSIX (``os.fork``); the local pool's workers run it."""
    parent = os.getpid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the task's process: never returns
        code = 1
        try:
            os.close(read)
            _die_with_parent(parent)
            data = pickle.dumps(guarded(fn, label, *args), protocol=pickle.HIGHEST_PROTOCOL)
            with open(write, "wb") as out:
                out.write(data)
            code = 0
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001, S110 - a closed stream: nothing to flush
                    pass
            os._exit(code)
    os.close(write)
    forwarding = threading.current_thread() is threading.main_thread()
    if forwarding:  # SIGTERM to this worker (the caller ending its pool) ends the task first, and waits for it
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: _end_with(pid, signum))
    try:
        with open(read, "rb") as inp:
            data = inp.read()
        _, status = os.waitpid(pid, 0)
    finally:
        if forwarding:
            signal.signal(signal.SIGTERM, previous)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and data:
        return cast(dict[str, Any], pickle.loads(data))
    how = (
        f"killed by signal {os.WTERMSIG(status)} ({signal.Signals(os.WTERMSIG(status)).name})"
        if os.WIFSIGNALED(status)
        else f"exit status {os.waitstatus_to_exitcode(status)}"
    )
    return {**label, "error": f"TaskProcessDied: the task's process ended before its result ({how})"}


_launcher: cf.ProcessPoolExecutor | None = None
_launcher_lock = threading.Lock()


def _launch(fn: Callable[..., dict[str, Any]], label: Mapping[str, Any], *args: Any) -> dict[str, Any]:
    """:func:`forked` in this process's launcher: a pool of long-lived processes forked from the task server, kept
    from task to task (a new one after a launcher process died)."""
    global _launcher
    with _launcher_lock:
        if _launcher is None:
            _launcher = cf.ProcessPoolExecutor(
                max_workers=os.cpu_count() or 1,
                mp_context=mp_context(),
                initializer=pool_worker,
                initargs=(os.getpid(),),
            )
        pool = _launcher
    try:
        return pool.submit(forked, fn, label, *args).result()
    except cf.process.BrokenProcessPool:
        with _launcher_lock:
            if _launcher is pool:
                _launcher = None
        raise


def end_launcher() -> None:
    """End this process's launcher (:func:`in_own_process`), if any, and wait for it: run on every Dask worker
    before the client closes (:class:`Backend`), so a closing worker has no pool left to wait for."""
    global _launcher
    with _launcher_lock:
        pool, _launcher = _launcher, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def in_own_process(fn: Callable[..., dict[str, Any]], label: Mapping[str, Any], *args: Any) -> dict[str, Any]:
    """One task as a Dask task: :func:`guarded` in a fresh process of its own, forked by a long-lived launcher
    process of the worker (:func:`forked`; the launchers start from the worker's task server and are kept from task
    to task), so the task's peak memory is its own as in a local run (the worker must not be daemonic:
    :data:`DAEMON_HINT`)."""
    if mp.current_process().daemon:
        return {**label, "error": DAEMON_HINT}
    if not hasattr(os, "fork"):  # pragma: no cover - Windows: a new pool per task
        try:
            with cf.ProcessPoolExecutor(max_workers=1, mp_context=mp_context()) as pool:
                return pool.submit(guarded, fn, label, *args).result()
        except Exception as exc:  # noqa: BLE001 - the task's process died (BrokenProcessPool)
            return _error(label, exc)
    try:
        return _launch(fn, label, *args)
    except Exception as exc:  # noqa: BLE001 - the launcher died (BrokenProcessPool)
        return _error(label, exc)


def connect(scheduler: str) -> tuple[Any, Any]:
    """``(client, cluster or None)`` for ``tcp://HOST:PORT`` (a running scheduler; the connect timeout is
    ``distributed.comm.timeouts.connect``) or ``local:N`` (a local cluster of N single-threaded, non-daemonic
    worker processes). :class:`SchedulerError` (a one-line message naming ``scheduler``) for a malformed or
    unreachable address, or when dask.distributed is not installed."""
    m = SCHEDULER_RE.match(scheduler.strip())
    if m is None:
        raise SchedulerError(f"--scheduler {scheduler!r}: expected tcp://HOST:PORT or local:N")
    try:  # optional dependency (the cluster extra): imported only when a scheduler is asked for
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise SchedulerError(
            "--scheduler needs dask.distributed: pip install '.[cluster]' in the Latch checkout"
        ) from None
    cluster = None
    try:
        if m.group("local"):
            with dask.config.set({"distributed.worker.daemon": False}):
                cluster = LocalCluster(
                    n_workers=int(m.group("n")), threads_per_worker=1, processes=True, dashboard_address=None
                )
            return Client(cluster), cluster
        return Client(m.group("addr")), None
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise SchedulerError(f"--scheduler {scheduler}: cannot connect ({reason})") from None


def _connect_and_warm(scheduler: str) -> tuple[Any, Any]:
    """:func:`connect`, then start every worker's task server (:func:`start_task_server`), so its warm-up runs
    while the caller finds its tasks, not before each worker's first task. A worker that cannot start it only
    starts its tasks colder."""
    client, cluster = connect(scheduler)
    try:
        client.run(start_task_server)
    except Exception:  # noqa: BLE001, S110 - the first task starts the server instead
        pass
    return client, cluster


class Backend:
    """Where :func:`run_tasks` runs its tasks, started before the tasks are known and closed in the background.

    ``Backend(jobs, scheduler)`` starts at once, without blocking: locally the task server
    (:func:`start_task_server`), with ``scheduler`` the Dask connection (:func:`connect`, in a thread: a ``local:N``
    cluster takes about two seconds to start its workers) and then every worker's task server. :meth:`connection` waits for it (and raises
    :class:`SchedulerError` as :func:`connect` does); :meth:`close_in_background` starts closing the client and the
    cluster it started in a thread, :meth:`close` closes and waits. A context manager: ``with Backend(...)`` closes
    (and waits) on exit."""

    def __init__(self, jobs: int = 2, scheduler: str | None = None) -> None:
        self.jobs = jobs
        self.scheduler = scheduler
        self._connecting: cf.Future[tuple[Any, Any]] | None = None
        self._closing: threading.Thread | None = None
        if scheduler is None:
            start_task_server()
        else:
            starter = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="latch-dask-connect")
            self._connecting = starter.submit(_connect_and_warm, scheduler)
            starter.shutdown(wait=False)

    def connection(self) -> tuple[Any, Any]:
        """``(client, cluster or None)`` once connected (``(None, None)`` locally); :class:`SchedulerError` for an
        unusable scheduler."""
        return self._connecting.result() if self._connecting is not None else (None, None)

    def _close(self) -> None:
        try:
            client, cluster = self.connection()
        except Exception:  # noqa: BLE001 - never connected: nothing to close
            return
        if client is not None:
            try:
                client.run(end_launcher)
            except Exception:  # noqa: BLE001, S110 - a lost worker: nothing of it to end
                pass
            client.close()
        if cluster is not None:
            cluster.close()

    def close_in_background(self) -> None:
        """Start closing the Dask client and the local cluster (a no-op locally, or when already closing)."""
        if self._closing is None:
            self._closing = threading.Thread(target=self._close, name="latch-dask-close")
            self._closing.start()

    def close(self) -> None:
        """Close (:meth:`close_in_background`) and wait until closed."""
        self.close_in_background()
        assert self._closing is not None
        self._closing.join()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_tasks(
    fn: Callable[..., dict[str, Any]],
    tasks: Sequence[tuple[Mapping[str, Any], tuple[Any, ...]]],
    *,
    jobs: int = 2,
    scheduler: str | None = None,
    order: Sequence[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    backend: Backend | None = None,
    on_result: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """``fn(*args)`` for every ``(label, args)`` of ``tasks``, each once in a fresh process (see the module
    docstring); the results in the order of ``tasks``.

    ``order``: the indices of ``tasks`` in submission order (default: as given; e.g. the biggest first).
    ``progress(done, total)`` after each task; ``on_result(i, result)`` as task ``i``'s result comes in (in this
    thread, before ``progress``). A failed task's result is ``{**label, "error": ...}``.
    ``backend``: an open :class:`Backend` to run on (its ``jobs`` and ``scheduler`` replace these; the caller
    closes it); without it one is opened for these tasks and closed before returning.
    :class:`SchedulerError` for an unusable ``scheduler``, before anything runs."""
    if backend is None:
        with Backend(jobs, scheduler) as own:
            return run_tasks(fn, tasks, order=order, progress=progress, backend=own, on_result=on_result)
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    local = backend.scheduler is None
    if local:
        if hasattr(os, "fork"):  # long-lived workers, each forking its tasks' processes
            pool: Any = cf.ProcessPoolExecutor(
                max_workers=backend.jobs, mp_context=mp_context(), initializer=pool_worker, initargs=(os.getpid(),)
            )
            runner: Callable[..., dict[str, Any]] = forked
        else:  # pragma: no cover - Windows: a new pool process per task
            pool = cf.ProcessPoolExecutor(max_workers=backend.jobs, mp_context=mp_context(), max_tasks_per_child=1)
            runner = guarded
    else:
        client, _ = backend.connection()
        pool, runner = client.get_executor(pure=False), in_own_process
    done = 0
    with pool:
        try:
            futures = {
                pool.submit(runner, fn, dict(tasks[i][0]), *tasks[i][1]): i
                for i in (order if order is not None else range(len(tasks)))
            }
            for fut in cf.as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as exc:  # noqa: BLE001 - a crashed worker (BrokenProcessPool, KilledWorker)
                    results[i] = _error(tasks[i][0], exc)
                if on_result:
                    on_result(i, cast(dict[str, Any], results[i]))
                done += 1
                if progress:
                    progress(done, len(tasks))
        except BaseException:  # Ctrl-C, SIGTERM's SystemExit: end the local task processes, not wait for them
            procs = list((pool._processes or {}).values()) if local else []
            pool.shutdown(wait=False, cancel_futures=True)  # forgets its processes: listed first
            for proc in procs:
                proc.terminate()
            raise
    return [r for r in results if r is not None]
