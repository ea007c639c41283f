"""A signal that arrives while a managed process is being started (Ctrl-C's ``KeyboardInterrupt``, SIGTERM's
``Terminated`` in ``latch run``) never leaves its shell running: the process group is registered before the
signal's exception is raised, and ended. Real shells, real signals delivered to this process the moment the
shell exists (before ``Popen`` returns to its caller)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from process_support import alive

from latch import hotpaths
from latch.agent.session import Terminated, end_on_signals
from latch.agent.tools import processes
from latch.agent.tools.processes import ProcessManager
from latch.events import ProcessStarted
from latch.store import EventStore


@pytest.fixture
def manager(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    store = EventStore(tmp_path / "latch.db")
    sid = store.create_session(workspace=str(ws), source="latch run", format="latch")
    pm = ProcessManager(store, sid, ws, log_dir=tmp_path / "logs")
    yield pm
    pm.close()
    store.close()


@pytest.fixture
def handlers():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield saved
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
def signal_at_spawn(monkeypatch):
    """``arm(sig)``: the next shell started gets ``sig`` sent to this process as soon as it exists; returns the pids."""
    pids: list[int] = []

    def arm(sig: int) -> list[int]:
        class Signalled(subprocess.Popen):  # type: ignore[type-arg]
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                pids.append(self.pid)
                os.kill(os.getpid(), sig)

        monkeypatch.setattr(processes.subprocess, "Popen", Signalled)
        return pids

    return arm


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("where", ["foreground", "background"])
def test_a_signal_as_a_shell_starts_never_leaves_it_running(manager, handlers, signal_at_spawn, sig, where):
    if sig == signal.SIGTERM:
        end_on_signals()  # latch run's handler: Terminated
    pids = signal_at_spawn(sig)
    with pytest.raises(KeyboardInterrupt) as raised:
        if where == "foreground":
            manager.run("sleep 300; true", timeout=600, estimate=hotpaths.estimate_tokens)
        else:
            manager.start("sleep 300; true")
    assert isinstance(raised.value, Terminated) == (sig == signal.SIGTERM)
    (pid,) = pids
    assert not alive(pid), "the shell outlived the interrupted start"
    assert manager.processes() == [] and not manager._foreground
    assert [e for e in manager.store.events(manager.session_id) if isinstance(e.event, ProcessStarted)] == []
    manager.close()
    assert not alive(pid)


def test_starting_a_shell_leaves_the_signal_handlers_as_they_were(manager, handlers):
    end_on_signals()
    before = {sig: signal.getsignal(sig) for sig in handlers}
    manager.run("true", timeout=30, estimate=hotpaths.estimate_tokens)
    manager.wait(manager.start("true").process_id, 30)
    assert {sig: signal.getsignal(sig) for sig in handlers} == before
