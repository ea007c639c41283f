"""One live run per session: ``latch run`` holds a durable run lease (table ``run_leases``, latch.store.leases)
from before its first append to its ``run_ended``. A second ``latch run --resume`` of a session whose run is
live is refused with one line naming the session and the live run's pid and host, and appends nothing; a lease
left by a dead process (pid gone, or expired without renewal) is taken over. Real CLI processes against the
loopback OpenAI server, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from fake_providers import Reply, serve_openai
from test_agent_run import _env, session_id

from latch.events import UserMessage
from latch.host.runs import RunLeaseHeld, RunRecord, holder_alive, process_start
from latch.store import EventStore, LeaseLost, RunLease

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


def _rows(db) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT seq, kind, payload FROM events ORDER BY seq").fetchall()


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_second_resume_of_a_live_run_is_refused_and_a_killed_runs_lease_is_taken_over(tmp_path, ws):
    db = tmp_path / "latch.db"
    base = [sys.executable, "-m", "latch", "--db", str(db), "run"]
    env = _env(tmp_path)
    script = [Reply("late answer", delay=60), Reply("resumed and done")]
    with serve_openai(script) as server:
        first = subprocess.Popen(
            base + ["a long job", "--provider", "openai-compatible", "--model", "local", "--base-url", server.base_url],
            cwd=ws,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait(lambda: len(server.requests) >= 1, 60, "the first run's request")  # blocked inside it
            sid = session_id(tmp_path)
            before = _rows(db)
            second = subprocess.run(
                base + ["--resume", sid, "--base-url", server.base_url],
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            after_refusal = _rows(db)
            requests_after_refusal = len(server.requests)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait(10)
        third = subprocess.run(
            base + ["--resume", sid, "--base-url", server.base_url],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert second.returncode == 2, second.stderr + second.stdout
    lines = second.stderr.strip().splitlines()
    assert lines == [
        f"Error: session {sid} is already running in another latch run (pid {first.pid} on "
        f"{socket.gethostname()}); wait for it to end or stop it, then resume"
    ], second.stderr
    assert "Traceback" not in second.stderr
    assert after_refusal == before  # nothing appended: no interrupted result, no run_started
    assert requests_after_refusal == 1  # and nothing asked of the model
    assert third.returncode == 0, third.stderr + third.stdout
    assert "resumed and done" in third.stdout
    with EventStore(db) as store:
        runs = [
            (s.kind, s.event.pid if s.kind == "run_started" else None)
            for s in store.events(sid)
            if s.kind in ("run_started", "run_ended")
        ]
        assert store.run_lease(sid) is None  # released with the run's end
    assert runs[0] == ("run_started", first.pid) and runs[-1] == ("run_ended", None)
    assert [k for k, _ in runs] == ["run_started", "run_started", "run_ended"]  # the killed run never ended


def test_a_lease_is_taken_over_only_from_a_dead_or_expired_holder(tmp_path):
    here = socket.gethostname()
    me = os.getpid()
    with EventStore(tmp_path / "latch.db") as store:
        sid = store.create_session()
        sleeper = subprocess.Popen(["sleep", "30"])
        try:
            held = dict(pid=sleeper.pid, host=here, process_start=process_start(sleeper.pid), lease_seconds=30.0)
            assert store.acquire_run_lease(sid, "live", now=time.time(), holder_live=holder_alive, **held) is None
            record = RunRecord(store, sid)
            with pytest.raises(RunLeaseHeld, match=f"session {sid} is already running .*pid {sleeper.pid} on "):
                record.acquire()
            assert store.run_lease(sid).run_id == "live" and not record.acquired
            # the same live pid, but its lease expired without renewal (a paused process): taken over
            assert store.acquire_run_lease(sid, "live", now=time.time() - 100, holder_live=holder_alive, **held) is None
            record.acquire()
            assert store.run_lease(sid).run_id == record.run_id and store.run_lease(sid).pid == me
        finally:
            sleeper.kill()
            sleeper.wait()
        record.start()
        store.append(sid, [UserMessage("work")], fence=record.fence)
        record.end("done", 0)
        assert store.run_lease(sid) is None
        assert [s.kind for s in store.events(sid)] == ["run_started", "user_message", "run_ended"]
        # a pid that is gone, and a reused pid (another start time), do not hold a lease
        gone = RunLease(sid, "x", 999_999_999, here, None, 0.0, time.time(), 30.0)
        assert holder_alive(gone) is False
        reused = RunLease(sid, "x", me, here, (process_start(me) or 0) + 1, 0.0, time.time(), 30.0)
        assert holder_alive(reused) is (process_start(me) is None)
        elsewhere = RunLease(sid, "x", 999_999_999, here + "-elsewhere", None, 0.0, time.time(), 30.0)
        assert holder_alive(elsewhere) is True  # cannot be checked from here: alive until it expires


def test_a_run_whose_lease_was_taken_over_loses_its_guard_and_writes_nothing_more(tmp_path):
    with EventStore(tmp_path / "latch.db") as store:
        sid = store.create_session()
        old = RunRecord(store, sid)
        old.acquire(lease_seconds=0.3)
        old.start()
        killed = []
        old.guard.on_lost(lambda: killed.append(True))
        # another process takes the session over (as if this one had been paused past its lease)
        assert (
            store.acquire_run_lease(
                sid,
                "new",
                pid=os.getpid(),
                host=socket.gethostname(),
                process_start=None,
                lease_seconds=30,
                now=time.time() + 60,
                holder_live=lambda lease: True,
            )
            is None
        )
        _wait(lambda: old.guard.lost, 5, "the renewal to find the lease taken over")
        assert killed == [True]
        with pytest.raises(LeaseLost, match="taken over"):
            old.guard.check()
        n = store.count_events(sid)
        with pytest.raises(LeaseLost):
            store.fenced(old.fence).append(sid, [UserMessage("late")])
        old.end("done", 0)  # the end of a taken-over run is not written; the lease stays with its new holder
        assert store.count_events(sid) == n and store.run_lease(sid).run_id == "new"
