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
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ...events import ProcessExited, ProcessStarted, ValidationEvidence
from ...kernel.files import Page, bounded_page
from ...kernel.shell import classify_command
from ..environment import tool_environment
from ..sandbox import NO_SANDBOX, Sandbox

__all__ = ["ProcessManager", "ManagedProcess", "RunResult", "OUTPUT_LIMIT_BYTES", "OUTPUT_LIMIT_TOKENS",
           "LOG_LIMIT_BYTES", "LOG_TAIL_BYTES", "KILL_GRACE_SECONDS", "bounded_output"]

OUTPUT_LIMIT_BYTES = 16 * 1024
OUTPUT_LIMIT_TOKENS = 4000
LOG_LIMIT_BYTES = 1024 * 1024
LOG_TAIL_BYTES = 64 * 1024
KILL_GRACE_SECONDS = 2.0
_CHUNK = 65536


def bounded_output(head: bytes, tail: bytes, total: int, estimate: Callable[[str], int],
                   limit_bytes: int = OUTPUT_LIMIT_BYTES, limit_tokens: int = OUTPUT_LIMIT_TOKENS) -> str:
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
        h = data_head[:keep // 2]
        t = data_tail[len(data_tail) - (keep - keep // 2):] if keep - keep // 2 else b""
        omitted = total - len(h) - len(t)
        return (h.decode("utf-8", "ignore") + f"\n[… {omitted:,} bytes of output omitted …]\n"
                + t.decode("utf-8", "ignore"))

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
                del self.tail[:len(self.tail) - self.limit]


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


def _validation_evidence(command: str, exit_code: int | None, signaled: bool, tail: str) -> list[Any]:
    validations = tuple(s.text for s in classify_command(command) if s.kind == "validate")
    if not validations:
        return []
    status = "passed" if exit_code == 0 else "failed" if exit_code is not None or signaled else "unknown"
    lines = [s.strip() for s in tail.splitlines() if s.strip()]
    summary = lines[-1][:200] if lines else ""
    return [ValidationEvidence(command=command, status=status, requirements=validations, exit_code=exit_code,
                               summary=summary)]


class ProcessManager:
    """The processes of session ``session_id`` in ``workspace`` (see the module docstring).

    ``log_dir`` holds the background logs (default: a new temporary folder, removed by nothing: logs
    outlive the session's process for a resumed session to read them while the OS keeps them). ``env`` is the
    environment of every process started (default: :func:`latch.agent.environment.tool_environment`, this
    process's environment without its secrets). ``sandbox`` (default: none) wraps every command
    (:class:`latch.agent.sandbox.Sandbox`: read-only system, no network, its own PID namespace).
    """

    def __init__(self, store: Any, session_id: str, workspace: str | os.PathLike[str], *,
                 log_dir: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                 sandbox: Sandbox | None = None):
        self.store = store
        self.env = dict(env) if env is not None else tool_environment()  # secrets never reach a tool process
        self.sandbox = sandbox if sandbox is not None else NO_SANDBOX
        self.session_id = store.session(session_id).id
        self.workspace = Path(workspace).resolve()
        self.log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="latch-processes-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._processes: dict[str, ManagedProcess] = {}
        self._watchers: list[threading.Thread] = []
        self._foreground: set[subprocess.Popen[bytes]] = set()
        self.errors: list[str] = []  # appends a watcher could not make (the store was closed under it)
        self.closed = False

    # ------------------------------------------------------------------ spawning
    def _spawn(self, command: str, stdout: int | IO[bytes]) -> subprocess.Popen[bytes]:
        if self.closed:
            raise RuntimeError("the process manager is closed")
        return subprocess.Popen(self.sandbox.command(["/bin/sh", "-c", command]), cwd=self.workspace,
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
                                start_new_session=True, env=self.sandbox.environment(self.env))

    def run(self, command: str, *, timeout: float, estimate: Callable[[str], int]) -> RunResult:
        """Run ``command`` in the foreground for at most ``timeout`` seconds (see the module docstring).

        Raises ``OSError`` when the shell cannot be started, ``RuntimeError`` after :meth:`close`."""
        start = time.monotonic()
        proc = self._spawn(command, subprocess.PIPE)
        with self._lock:
            self._foreground.add(proc)
        capture = _Capture(OUTPUT_LIMIT_BYTES)
        assert proc.stdout is not None
        out = proc.stdout

        def pump() -> None:
            for chunk in iter(lambda: out.read1(_CHUNK), b""):
                capture.add(chunk)

        reader = threading.Thread(target=pump, name="latch-shell-output", daemon=True)
        reader.start()
        timed_out = False
        try:
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
        try:
            proc = self._spawn(command, write_end)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        mp = ManagedProcess(process_id, command, log, proc.pid, proc)
        with self._lock:
            self._processes[process_id] = mp
        try:
            self.store.append(self.session_id, [ProcessStarted(process_id=process_id, command=command)])
        except BaseException:
            _kill_group(proc, 0.2)
            os.close(read_end)
            with self._lock:
                del self._processes[process_id]
            raise
        watcher = threading.Thread(target=self._watch, args=(mp, read_end), name=f"latch-process-{process_id}",
                                   daemon=True)
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
                        del tail[:len(tail) - LOG_TAIL_BYTES]
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

    def close(self, timeout: float = 10.0) -> None:
        """Kill every process still running (their exits are committed with ``exit_code`` ``None``) and wait
        up to ``timeout`` seconds for the watchers. Idempotent."""
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
