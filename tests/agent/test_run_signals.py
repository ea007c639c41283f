"""Signals and managed processes of ``latch run`` (spec: "an active managed process blocks certification until it
exits"): SIGTERM and SIGHUP end a run like Ctrl-C (``run_ended`` recorded, its processes stopped, its temporary
folder removed), and a resumed run reconciles the background processes a SIGKILLed run left (killed by their
recorded process group, their exit recorded as unknown, the model told), so the session can certify again.
Real ``latch run`` processes against the loopback OpenAI server, real signals, ``--sandbox off`` so the pids a
shell writes are the host's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_providers import Reply, ToolUse, serve_openai
from process_support import alive
from test_agent_run import _env, session_id

from latch.agent.tools.processes import LOG_DIR_PREFIX, remove_stale_log_dirs
from latch.events import ProcessExited, ProcessStarted, RunEnded
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


def _wait_for(path: Path, seconds: float = 60) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            time.sleep(0.05)
    raise AssertionError(f"{path.name} never appeared")


def _gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def _start(tmp_path: Path, ws: Path, server, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "latch",
            "--db",
            str(tmp_path / "latch.db"),
            "run",
            *args,
            "--provider",
            "openai-compatible",
            "--model",
            "local",
            "--base-url",
            server.base_url,
            "--yes",
            "--sandbox",
            "off",
        ],
        cwd=ws,
        env=_env(tmp_path, TMPDIR=str(tmp_path / "tmp")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _call(cid: str, command: str, **more) -> Reply:
    return Reply(
        tool_calls=(ToolUse(cid, "shell", json.dumps({"command": command, **more})),),
        usage={"prompt_tokens": 800, "completion_tokens": 12},
    )


def _log_dirs(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").glob(LOG_DIR_PREFIX + "*"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_terminated_run_records_its_end_and_stops_its_processes(tmp_path, ws, sig):
    (tmp_path / "tmp").mkdir()
    background, foreground = ws / "bg.pid", ws / "fg.pid"
    script = [
        _call("b1", f"echo $$ > {background}; sleep 300", background=True),
        _call("f1", f"echo $$ > {foreground}; sleep 300", timeout=600),
    ]
    with serve_openai(script) as server:
        proc = _start(tmp_path, ws, server, "start a server, then a long job")
        try:
            bg, fg = _wait_for(background), _wait_for(foreground)
            assert _log_dirs(tmp_path), "the run keeps its background logs in a temporary folder"
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert proc.returncode == 128 + sig, (proc.returncode, err[-800:])
    assert "Traceback" not in err and f"{sig.name}: the run ended" in err
    assert _gone(bg) and _gone(fg), "the background and foreground shells outlived the run"
    sid = session_id(tmp_path)
    with EventStore(tmp_path / "latch.db") as store:
        events = [s.event for s in store.events(sid)]
    (ended,) = [e for e in events if isinstance(e, RunEnded)]
    assert (ended.outcome, ended.exit_code, ended.detail) == ("interrupted", 128 + sig, f"terminated by {sig.name}")
    (started,) = [e for e in events if isinstance(e, ProcessStarted)]
    assert started.pgid == bg and started.owner_pid == proc.pid
    assert [(e.process_id, e.exit_code, e.unknown) for e in events if isinstance(e, ProcessExited)] == [
        (started.process_id, None, False)
    ]  # the watcher saw the exit it caused
    assert _log_dirs(tmp_path) == [], "the run left its temporary folder behind"


def test_a_resumed_run_reconciles_the_processes_a_killed_run_left(tmp_path, ws):
    (tmp_path / "tmp").mkdir()
    background = ws / "bg.pid"
    script = [_call("b1", f"echo $$ > {background}; exec sleep 300", background=True), Reply("still working", delay=30)]
    db = tmp_path / "latch.db"
    with serve_openai(script) as server:
        proc = _start(tmp_path, ws, server, "start a server")
        try:
            bg = _wait_for(background)
            sid = session_id(tmp_path)
            deadline = time.monotonic() + 30
            while len(server.requests) < 2 and time.monotonic() < deadline:  # the exit watcher is running
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    try:
        assert alive(bg), "a SIGKILLed run's background process is an orphan until something reconciles it"
        stale = _log_dirs(tmp_path)
        assert len(stale) == 1 and stale[0].startswith(f"{LOG_DIR_PREFIX}{proc.pid}.")
        blocked = subprocess.run(
            [sys.executable, "-m", "latch", "--db", str(db), "evidence", sid],
            cwd=ws,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "is running" in blocked.stdout + blocked.stderr

        with serve_openai([Reply("The server was lost; nothing else to do.")]) as server:
            resumed = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "latch",
                    "--db",
                    str(db),
                    "run",
                    "--resume",
                    sid,
                    "--base-url",
                    server.base_url,
                    "--sandbox",
                    "off",
                ],
                cwd=ws,
                env=_env(tmp_path, TMPDIR=str(tmp_path / "tmp")),
                capture_output=True,
                text=True,
                timeout=120,
            )
            sent = json.dumps(server.requests[0].body) if server.requests else ""
        assert resumed.returncode == 0, resumed.stderr[-800:] + resumed.stdout[-800:]
        assert _gone(bg), "the orphan survived the resume"
        assert "killed, exit code unknown" in resumed.stdout
        assert "[process notification]" in sent and "was still running and was killed" in sent  # the model told
        with EventStore(db) as store:
            events = [s.event for s in store.events(sid)]
        (started,) = [e for e in events if isinstance(e, ProcessStarted)]
        assert [e for e in events if isinstance(e, ProcessExited)] == [
            ProcessExited(started.process_id, None, unknown=True)
        ]
        assert _log_dirs(tmp_path) == [], "the killed run's temporary folder was not removed"
        after = subprocess.run(
            [sys.executable, "-m", "latch", "--db", str(db), "evidence", sid],
            cwd=ws,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert after.returncode == 0 and f"managed process {started.process_id} is running" in blocked.stdout
        assert "managed process" not in after.stdout, after.stdout  # certification is no longer blocked
    finally:
        if alive(bg):
            os.killpg(bg, signal.SIGKILL)


def test_stale_log_folders_of_live_or_foreign_processes_are_kept(tmp_path):
    mine = tmp_path / f"{LOG_DIR_PREFIX}{os.getpid()}.1-abc"  # our pid, another start time: a dead run's
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        from latch.host.runs import process_start

        kept = tmp_path / f"{LOG_DIR_PREFIX}{live.pid}.{process_start(live.pid)}-xyz"
        old_style = tmp_path / f"{LOG_DIR_PREFIX}q8w7e6r5"
        for d in (mine, kept, old_style):
            d.mkdir()
            (d / "p1.log").write_text("output")
        assert remove_stale_log_dirs(tmp_path) == [mine]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kept.name, old_style.name])
    finally:
        live.kill()
        live.wait()
