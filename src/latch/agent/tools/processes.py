"""Managed processes of one agent session: foreground commands with a timeout and bounded output, and
background processes whose natural exit is committed durably without the model polling (spec: "Agent
Skills and MCP", "Kernel validation evidence").

Every command runs as ``/bin/sh -c COMMAND`` in the workspace, in its own process group (a new session),
stdin closed, stdout and stderr merged; inside the manager's :class:`~latch.agent.sandbox.Sandbox` when it has
one (there a command killed by a signal reports the shell's ``128 + N`` exit code).

* :meth:`ProcessManager.run` (foreground) waits up to ``timeout`` seconds; on timeout the whole process
  group is killed (SIGTERM, then SIGKILL after :data:`KILL_GRACE_SECONDS`). When the shell exits, what it
  left running in its group is killed too (use a background process for servers). The output kept is
  bounded: head and tail of at most :data:`OUTPUT_LIMIT_BYTES` bytes and :data:`OUTPUT_LIMIT_TOKENS`
  tokens in all, with a marker saying how many bytes were left out between them.
* :meth:`ProcessManager.start` (background) appends :class:`~latch.events.ProcessStarted` before it
  returns the process id (``p`` + 6 hex digits). A watcher thread waits for the exit and appends
  :class:`~latch.events.ProcessExited` (``exit_code`` ``None`` when a signal ended it) and, when the
  command validates (:func:`latch.kernel.shell.classify_command`), its
  :class:`~latch.events.ValidationEvidence` in the same transaction: the evidence is at the workspace
  generation of the exit. Its output goes to a log file (the first :data:`LOG_LIMIT_BYTES` bytes, then
  a marker and the last :data:`LOG_TAIL_BYTES` bytes at exit), read with the ``process_output`` tool.

Threading: the watcher appends through the session's own :class:`~latch.store.EventStore`, whose one
connection is opened with ``check_same_thread=False`` and every read and write transaction runs under the
store's lock, so an append from the watcher is one atomic transaction between the loop's own.
:meth:`ProcessManager.close` kills what still runs and waits for the watchers to commit their exits.

Signals: a ``KeyboardInterrupt`` (Ctrl-C) or a run's ``Terminated`` (SIGTERM, SIGHUP) that arrives while a shell
starts is raised only once its process group is registered, and that group is then killed: no exception lands
between the fork and the registration, so no shell outlives its run.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from ...records import dataclass

if TYPE_CHECKING:  # pragma: no cover
    import io

from ...events import ProcessExited, ProcessStarted, UserMessage, ValidationEvidence
from ...host import reducers as R
from ...host.runs import process_alive, process_start
from ...kernel.files import Page, bounded_page
from ...kernel.shell import classify_command
from ...store import EventLog
from ..environment import tool_environment
from ..sandbox import NO_SANDBOX, Sandbox

__all__ = [
    "ProcessManager",
    "ManagedProcess",
    "RunResult",
    "Reconciled",
    "OUTPUT_LIMIT_BYTES",
    "OUTPUT_LIMIT_TOKENS",
    "LOG_LIMIT_BYTES",
    "LOG_TAIL_BYTES",
    "KILL_GRACE_SECONDS",
    "LOG_DIR_PREFIX",
    "bounded_output",
    "remove_stale_log_dirs",
]

OUTPUT_LIMIT_BYTES = 16 * 1024
OUTPUT_LIMIT_TOKENS = 4000
LOG_LIMIT_BYTES = 1024 * 1024
LOG_TAIL_BYTES = 64 * 1024
KILL_GRACE_SECONDS = 2.0
LOG_DIR_PREFIX = "latch-processes-"
"""Temporary folders of the background logs: ``latch-processes-<pid>.<start>-<random>`` (the owning process and
its start time, so :func:`remove_stale_log_dirs` tells a dead owner's folder from a live one's)."""
_CHUNK = 65536
_LOG_DIR = re.compile(re.escape(LOG_DIR_PREFIX) + r"(\d+)\.(\d+)-[A-Za-z0-9_]+$")


def bounded_output(
    head: bytes,
    tail: bytes,
    total: int,
    estimate: Callable[[str], int],
    limit_bytes: int = OUTPUT_LIMIT_BYTES,
    limit_tokens: int = OUTPUT_LIMIT_TOKENS,
) -> str:
    """The text of an output of ``total`` bytes whose first bytes are ``head`` and last bytes ``tail``
    (``tail`` empty when ``head`` holds everything): whole when it fits both limits, else a head, a marker
    ``[… N bytes of output omitted …]`` and a tail, the largest that fit (invalid UTF-8 replaced)."""
    whole = head + tail if len(head) + len(tail) >= total else None
    if whole is not None:
        text = whole.decode("utf-8", "replace")
        if len(text.encode("utf-8")) <= limit_bytes and estimate(text) <= limit_tokens:
            return text
    data_head = head if whole is None else whole
    data_tail = tail if whole is None else whole

    def render(keep: int) -> str:
        h = data_head[: keep // 2]
        t = data_tail[len(data_tail) - (keep - keep // 2) :] if keep - keep // 2 else b""
        omitted = total - len(h) - len(t)
        return (
            h.decode("utf-8", "ignore") + f"\n[… {omitted:,} bytes of output omitted …]\n" + t.decode("utf-8", "ignore")
        )

    lo, hi = 0, min(limit_bytes, total)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        text = render(mid)
        if len(text.encode("utf-8")) <= limit_bytes and estimate(text) <= limit_tokens:
            lo = mid
        else:
            hi = mid - 1
    return render(lo)


class _Capture:
    """Keeps the first ``limit`` bytes and the last ``limit`` bytes of a stream, and its length."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]


@dataclass(frozen=True)
class RunResult:
    """A foreground run: ``output`` (bounded text), ``exit_code`` (``None`` on timeout or a signal),
    ``timed_out``, ``signal`` (the number of the signal that ended it, else ``None``), ``seconds``."""

    output: str
    exit_code: int | None
    timed_out: bool
    signal: int | None
    seconds: float


@dataclass
class ManagedProcess:
    """A background process: ``process_id``, ``command``, ``log`` (its output file), ``pid``, and once it
    ended ``exit_code`` (``None`` for a signal) and ``ended`` (True)."""

    process_id: str
    command: str
    log: Path
    pid: int
    popen: subprocess.Popen[bytes] = field(repr=False)
    exit_code: int | None = None
    signal: int | None = None
    ended: bool = False
    killed: bool = False
    done: threading.Event = field(default_factory=threading.Event, repr=False)


def _kill_group(proc: subprocess.Popen[bytes], grace: float = KILL_GRACE_SECONDS) -> None:
    """SIGTERM to the process group of ``proc``, then SIGKILL to what is left after ``grace`` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_now(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the process group of ``proc``, then reap it and close its output pipe (if any)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _signals_held() -> Iterator[None]:
    """In the main thread, the Python-level handlers of SIGINT, SIGTERM and SIGHUP (``KeyboardInterrupt``, a run's
    ``Terminated``) wait until the block ends, then run in the order the signals arrived: their exception cannot land
    between the fork of a child and its registration. Elsewhere a no-op (Python runs handlers in the main thread
    only). The child's signal mask and dispositions are untouched."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        if signum not in arrived:
            arrived.append(signum)

    saved: dict[int, Any] = {}
    try:
        for sig in _HELD_SIGNALS:
            handler = signal.getsignal(sig)
            if callable(handler):
                saved[sig] = signal.signal(sig, hold)
        yield
    finally:
        raised: BaseException | None = None
        for signum, handler in saved.items():
            while True:  # signal.signal first runs pending handlers: one already restored may raise
                try:
                    signal.signal(signum, handler)
                    break
                except BaseException as exc:
                    raised = raised or exc
        if raised is not None:
            raise raised
        for signum in arrived:
            signal.raise_signal(signum)


def _group_members(pgid: int, not_before: int | None) -> list[int]:
    """The live processes of process group ``pgid`` started at or after ``not_before`` (clock ticks after boot;
    ``None``: any), read from Linux ``/proc`` (``[]`` where there is none): a group id reused by an unrelated
    group started before the recorded leader is told apart by its start time."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            fields = stat[stat.rindex(")") + 2 :].split()
            state, pgrp, start = fields[0], int(fields[2]), int(fields[19])
        except (OSError, ValueError, IndexError):
            continue
        if pgrp == pgid and state not in ("Z", "X") and (not_before is None or start >= not_before):
            found.append(int(entry))
    return found


def _end_group(pgid: int, not_before: int | None, grace: float = KILL_GRACE_SECONDS) -> bool:
    """End what is left of process group ``pgid`` (see :func:`_group_members`): SIGTERM, then SIGKILL after
    ``grace`` seconds. True when something was still running."""
    if not _group_members(pgid, not_before):
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return True
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_members(pgid, not_before):
            time.sleep(0.05)
        if not _group_members(pgid, not_before):
            break
    return True


def remove_stale_log_dirs(folder: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the log folders (:data:`LOG_DIR_PREFIX`) in ``folder`` (default: the temporary folder) that this
    user's dead Latch processes left (a run killed before it could remove its own); returns those removed. A
    folder of a live process, another user's, or one not named ``latch-processes-<pid>.<start>-…`` is kept."""
    base = Path(folder if folder is not None else tempfile.gettempdir())
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    host = socket.gethostname()
    for entry in entries:
        m = _LOG_DIR.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        if not os.path.isdir(entry) or entry.is_symlink() or st.st_uid != os.getuid():
            continue
        if process_alive({"pid": int(m[1]), "host": host, "process_start": int(m[2])}):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@dataclass(frozen=True)
class Reconciled:
    """A managed process an earlier run left without a recorded exit: ``process_id``, ``command``, and whether
    something of its process group was still ``running`` (then killed)."""

    process_id: str
    command: str
    running: bool


def _validation_evidence(command: str, exit_code: int | None, signaled: bool, tail: str) -> list[Any]:
    validations = tuple(s.text for s in classify_command(command) if s.kind == "validate")
    if not validations:
        return []
    status = "passed" if exit_code == 0 else "failed" if exit_code is not None or signaled else "unknown"
    lines = [s.strip() for s in tail.splitlines() if s.strip()]
    summary = lines[-1][:200] if lines else ""
    return [
        ValidationEvidence(
            command=command, status=status, requirements=validations, exit_code=exit_code, summary=summary
        )
    ]


class ProcessManager:
    """The processes of session ``session_id`` in ``workspace`` (see the module docstring).

    ``log_dir`` holds the background logs (default: a new temporary folder named for this process,
    :data:`LOG_DIR_PREFIX`, removed by :meth:`close`; one a killed run left is removed by
    :func:`remove_stale_log_dirs`). ``env`` is the
    environment of every process started (default: :func:`latch.agent.environment.tool_environment`, this
    process's environment without its secrets). ``sandbox`` (default: none) wraps every command
    (:class:`latch.agent.sandbox.Sandbox`: read-only system, no network, its own PID namespace).
    """

    def __init__(
        self,
        store: EventLog,
        session_id: str,
        workspace: str | os.PathLike[str],
        *,
        log_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        sandbox: Sandbox | None = None,
    ):
        self.store = store
        self.env = dict(env) if env is not None else tool_environment()  # secrets never reach a tool process
        self.sandbox = sandbox if sandbox is not None else NO_SANDBOX
        self.session_id = store.session(session_id).id
        self.workspace = Path(workspace).resolve()
        self.owns_log_dir = log_dir is None
        me = os.getpid()
        self.log_dir = (
            Path(log_dir)
            if log_dir is not None
            else Path(tempfile.mkdtemp(prefix=f"{LOG_DIR_PREFIX}{me}.{process_start(me) or 0}-"))
        )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._processes: dict[str, ManagedProcess] = {}
        self._watchers: list[threading.Thread] = []
        self._foreground: set[subprocess.Popen[bytes]] = set()
        self.errors: list[str] = []  # appends a watcher could not make (the store was closed under it)
        self.closed = False

    # ------------------------------------------------------------------ spawning
    def _spawn(
        self, command: str, stdout: int | IO[bytes], register: Callable[[subprocess.Popen[bytes]], None]
    ) -> subprocess.Popen[bytes]:
        """Start the shell of ``command`` and ``register`` it for cleanup before a signal's exception
        (``KeyboardInterrupt``, a run's ``Terminated``) can land (:func:`_signals_held`): one arriving meanwhile
        is raised after ``register`` returned, so :meth:`close` ends the process group whatever happens."""
        if self.closed:
            raise RuntimeError("the process manager is closed")
        with _signals_held():
            proc = subprocess.Popen(
                self.sandbox.command(["/bin/sh", "-c", command]),
                cwd=self.workspace,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.sandbox.environment(self.env),
            )
            register(proc)
        return proc

    def run(self, command: str, *, timeout: float, estimate: Callable[[str], int]) -> RunResult:
        """Run ``command`` in the foreground for at most ``timeout`` seconds (see the module docstring).

        Raises ``OSError`` when the shell cannot be started, ``RuntimeError`` after :meth:`close`."""
        start = time.monotonic()
        spawned: list[subprocess.Popen[bytes]] = []

        def register(proc: subprocess.Popen[bytes]) -> None:
            spawned.append(proc)
            with self._lock:
                self._foreground.add(proc)

        try:
            proc = self._spawn(command, subprocess.PIPE, register)
        except BaseException:
            for proc in spawned:  # registered, then a signal's exception: end it here, not only at close
                _kill_now(proc)
                with self._lock:
                    self._foreground.discard(proc)
            raise
        capture = _Capture(OUTPUT_LIMIT_BYTES)
        assert proc.stdout is not None
        out = cast("io.BufferedReader", proc.stdout)  # Popen's binary pipe (buffered: it has read1)

        def pump() -> None:
            for chunk in iter(lambda: out.read1(_CHUNK), b""):
                capture.add(chunk)

        reader = threading.Thread(target=pump, name="latch-shell-output", daemon=True)
        timed_out = False
        try:
            reader.start()
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # what the shell left behind in its group
            except (ProcessLookupError, PermissionError):
                pass
            if reader.ident is not None:
                reader.join(KILL_GRACE_SECONDS)
            if not reader.is_alive():
                out.close()
            with self._lock:
                self._foreground.discard(proc)
        code = proc.returncode
        sig = -code if code is not None and code < 0 else None
        text = bounded_output(bytes(capture.head), bytes(capture.tail), capture.total, estimate)
        return RunResult(text, None if timed_out or sig else code, timed_out, sig, time.monotonic() - start)

    def start(self, command: str) -> ManagedProcess:
        """Start ``command`` in the background: :class:`~latch.events.ProcessStarted` is committed before
        this returns; the exit is committed by a watcher thread. Raises ``OSError`` when the shell cannot
        be started (nothing appended), ``RuntimeError`` after :meth:`close`."""
        process_id = "p" + secrets.token_hex(3)
        with self._lock:
            while process_id in self._processes:
                process_id = "p" + secrets.token_hex(3)
        log = self.log_dir / f"{process_id}.log"
        read_end, write_end = os.pipe()
        spawned: list[ManagedProcess] = []

        def register(proc: subprocess.Popen[bytes]) -> None:
            spawned.append(ManagedProcess(process_id, command, log, proc.pid, proc))
            with self._lock:
                self._processes[process_id] = spawned[0]

        try:
            proc = self._spawn(command, write_end, register)
        except BaseException:
            os.close(read_end)
            for mp in spawned:  # registered, then a signal's exception: nothing was appended, nothing runs
                _kill_now(mp.popen)
                with self._lock:
                    del self._processes[process_id]
            raise
        finally:
            os.close(write_end)
        mp = spawned[0]
        try:
            me = os.getpid()
            self.store.append(
                self.session_id,
                [
                    ProcessStarted(
                        process_id=process_id,
                        command=command,
                        pgid=proc.pid,
                        pgid_start=process_start(proc.pid),
                        owner_pid=me,
                        owner_start=process_start(me),
                        host=socket.gethostname(),
                    )
                ],
            )
        except BaseException:
            _kill_group(proc, 0.2)
            os.close(read_end)
            with self._lock:
                del self._processes[process_id]
            raise
        watcher = threading.Thread(
            target=self._watch, args=(mp, read_end), name=f"latch-process-{process_id}", daemon=True
        )
        with self._lock:
            self._watchers.append(watcher)
        watcher.start()
        return mp

    def _watch(self, mp: ManagedProcess, read_end: int) -> None:
        tail = bytearray()
        written = dropped = 0
        with open(read_end, "rb", buffering=0) as pipe, open(mp.log, "wb") as log:
            for chunk in iter(lambda: pipe.read(_CHUNK), b""):
                room = LOG_LIMIT_BYTES - written
                if room > 0:
                    log.write(chunk[:room])
                    log.flush()
                    written += min(room, len(chunk))
                    chunk = chunk[room:]
                if chunk:
                    tail += chunk
                    if len(tail) > LOG_TAIL_BYTES:
                        dropped += len(tail) - LOG_TAIL_BYTES
                        del tail[: len(tail) - LOG_TAIL_BYTES]
            code = mp.popen.wait()
            if tail:
                if dropped:
                    log.write(f"\n[… {dropped:,} bytes of output omitted …]\n".encode())
                log.write(bytes(tail))
        sig = -code if code < 0 else None
        exit_code = None if sig else code
        last = (bytes(tail) if tail else mp.log.read_bytes()[-LOG_TAIL_BYTES:]).decode("utf-8", "replace")
        events: list[Any] = [ProcessExited(process_id=mp.process_id, exit_code=exit_code)]
        if not mp.killed:
            events += _validation_evidence(mp.command, exit_code, sig is not None, last)
        try:
            self.store.append(self.session_id, events)
        except Exception as exc:  # the store went away under us: say so, never crash the thread silently
            self.errors.append(f"process {mp.process_id}: exit not recorded: {exc}")
        mp.exit_code, mp.signal, mp.ended = exit_code, sig, True
        mp.done.set()

    # ------------------------------------------------------------------ queries
    def get(self, process_id: str) -> ManagedProcess:
        """The background process ``process_id``; ``KeyError`` (naming the known ids) when unknown."""
        with self._lock:
            mp = self._processes.get(process_id.strip())
            known = ", ".join(self._processes) or "none"
        if mp is None:
            raise KeyError(f"no background process {process_id!r} in this session (known: {known})")
        return mp

    def processes(self) -> list[ManagedProcess]:
        """Every background process started by this manager, oldest first."""
        with self._lock:
            return list(self._processes.values())

    def output(self, process_id: str, offset: int = 0, estimate: Callable[[str], int] | None = None) -> Page:
        """One bounded page of the log of ``process_id`` from byte ``offset`` (``KeyError``, ``ValueError``)."""
        mp = self.get(process_id)
        data = mp.log.read_bytes() if mp.log.exists() else b""
        content, next_offset, tokens = bounded_page(data, offset, estimate, label="output")
        return Page(content, offset, next_offset, len(data), None, tokens)

    def wait(self, process_id: str, timeout: float | None = None) -> bool:
        """Wait until the exit of ``process_id`` is committed; False on timeout."""
        return self.get(process_id).done.wait(timeout)

    def reconcile(self) -> list[Reconciled]:
        """Close the managed processes of this session that an earlier run left without a recorded exit (its
        watcher died with it: SIGKILL, a crash): what is left of each one's recorded process group is killed
        (SIGTERM, then SIGKILL), and a :class:`~latch.events.ProcessExited` with ``unknown=True`` is appended
        with a meta user message telling the model, in one transaction. A process whose owner is a live
        process (another run's watcher will record its exit) is left alone, as is one without a recorded owner
        while a run of the session is live. Call it at a safe boundary (every tool call has its result).
        Returns the processes reconciled, oldest first."""
        started: dict[str, ProcessStarted] = {}
        events = list(self.store.events(self.session_id))
        for s in events:
            if isinstance(s.event, ProcessStarted):
                started[s.event.process_id] = s.event
            elif isinstance(s.event, ProcessExited):
                started.pop(s.event.process_id, None)
        with self._lock:
            mine = set(self._processes)
        another_run: bool | None = None
        out: list[Reconciled] = []
        for pid, ev in started.items():
            if pid in mine:
                continue
            if ev.owner_pid is None:
                if another_run is None:
                    another_run = R.run_status(events, alive=process_alive)["phase"] == "running"
                if another_run:
                    continue
            elif process_alive({"pid": ev.owner_pid, "host": ev.host, "process_start": ev.owner_start}):
                continue
            here = ev.host == socket.gethostname() and ev.pgid is not None and ev.pgid > 1
            running = _end_group(ev.pgid, ev.pgid_start) if here and ev.pgid is not None else False
            out.append(Reconciled(pid, ev.command, running))
        if out:
            notes = []
            for r in out:
                what = "was still running and was killed" if r.running else "had already ended"
                notes.append(
                    f"managed process {r.process_id} ({' '.join(r.command.split())[:200]}) {what}; "
                    f"its exit code is unknown and its output is gone"
                )
            text = (
                "[process notification] the previous run of this session ended without recording the exit of "
                "its background processes: " + "; ".join(notes) + ". Start a process again if you need it."
            )
            self.store.append(
                self.session_id,
                [*(ProcessExited(r.process_id, None, unknown=True) for r in out), UserMessage(text, is_meta=True)],
            )
        return out

    def close(self, timeout: float = 10.0) -> None:
        """Kill every process still running (their exits are committed with ``exit_code`` ``None``), wait
        up to ``timeout`` seconds for the watchers, then remove the log folder when this manager made it.
        Idempotent."""
        with self._lock:
            self.closed = True
            running = [mp for mp in self._processes.values() if not mp.ended]
            foreground = list(self._foreground)
            watchers = list(self._watchers)
        for mp in running:
            mp.killed = True
            _kill_group(mp.popen, 0.5)
        for proc in foreground:
            _kill_group(proc, 0.5)
        deadline = time.monotonic() + timeout
        for w in watchers:
            w.join(max(0.0, deadline - time.monotonic()))
        if self.owns_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)
