"""The durable run lifecycle of ``latch run`` (``run_started`` / ``run_ended``, latch.host.runs) and
what the UIs derive from it: a real CLI subprocess against the loopback OpenAI server, a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_providers import Reply, ToolUse, serve_openai
from sandbox_support import end_shell_group
from test_agent_run import _env, latch, session_id

from latch.events import AssistantMessage, RunEnded, RunStarted, ToolCall, ToolStarted, UserMessage
from latch.host import reducers as R
from latch.host.runs import RunRecord, process_alive, process_start, session_liveness
from latch.store import EventStore
from latch.ui.web.app import snapshot

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


def _runs(db: Path, sid: str) -> list[dict]:
    with EventStore(db) as store:
        return R.runs(store.events(sid))


def test_a_finished_run_records_its_start_and_its_end(tmp_path, ws):
    with serve_openai([Reply("Nothing to do.", usage={"prompt_tokens": 500, "completion_tokens": 4})]) as server:
        r = latch(
            tmp_path,
            "run",
            "say hi",
            "--provider",
            "openai-compatible",
            "--model",
            "local",
            "--base-url",
            server.base_url,
            cwd=ws,
        )
    assert r.returncode == 0, r.stderr + r.stdout
    sid = session_id(tmp_path)
    (run,) = _runs(tmp_path / "latch.db", sid)
    assert run["host"] == socket.gethostname() and run["pid"] > 0 and run["pid"] != os.getpid()
    assert run["started_at"].endswith("Z") and run["ended"] is True
    assert (run["outcome"], run["exit_code"]) == ("done", 0) and run["ended_at"] >= run["started_at"]
    with EventStore(tmp_path / "latch.db") as store:
        kinds = [e.kind for e in store.events(sid)]
        live, status = session_liveness(store.events(sid), observed=True)
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert (live, status["phase"], status["runs"]) == (False, "ended", 1)  # ended: never live, however observed


def test_a_provider_error_ends_the_run_with_outcome_error(tmp_path, ws):
    r = latch(
        tmp_path,
        "run",
        "the task",
        "--provider",
        "openai-compatible",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        cwd=ws,
    )
    assert r.returncode == 1
    (run,) = _runs(tmp_path / "latch.db", session_id(tmp_path))
    assert (run["outcome"], run["exit_code"]) == ("error", 1) and run["detail"]


def test_a_sigkilled_run_is_interrupted_never_live_or_completed(tmp_path, ws):
    marker = ws / "pid"
    slow = f"echo $$ > {marker}; sleep 60"
    db = tmp_path / "latch.db"
    with serve_openai(
        [
            Reply(
                tool_calls=(ToolUse("k1", "shell", json.dumps({"command": slow, "timeout": 120})),),
                usage={"prompt_tokens": 800, "completion_tokens": 12},
            )
        ]
    ) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "latch",
                "--db",
                str(db),
                "run",
                "a slow job",
                "--provider",
                "openai-compatible",
                "--model",
                "local",
                "--base-url",
                server.base_url,
                "--yes",
            ],
            cwd=ws,
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert marker.exists(), "the shell call never started"
            sid = session_id(tmp_path)
            with EventStore(db) as store:
                live, status = session_liveness(store.events(sid))
                snap = snapshot(store, sid)
            assert (live, status["phase"]) == (True, "running") and status["run"]["pid"] == proc.pid
            assert snap["live"] is True and snap["activity"]["tools"][0]["status"] == "running"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            end_shell_group(marker)  # a shell a SIGKILLed agent left behind, ended like a reboot would
    with EventStore(db) as store:
        live, status = session_liveness(store.events(sid), observed=True)
        snap = snapshot(store, sid, live=True)  # even an observer that saw it append does not call it live
    assert (live, status["phase"]) == (False, "interrupted") and status["run"]["ended"] is False
    assert snap["live"] is False and snap["session"]["run"]["phase"] == "interrupted"
    assert [(t["call_id"], t["status"]) for t in snap["activity"]["tools"]] == [("k1", "interrupted")]


def test_run_status_reducer_is_pure_over_events():
    with EventStore(":memory:") as store:
        sid = store.create_session(format="test")
        assert R.run_status(store.events(sid), alive=lambda run: True) == {"phase": None, "run": None, "runs": 0}
        record = RunRecord(store, sid)
        started = record.start()
        store.append(
            sid,
            [
                UserMessage(text="t"),
                AssistantMessage(text="", tool_calls=(ToolCall("c", "x", "{}"),)),
                ToolStarted(call_id="c", name="x"),
            ],
        )
        evs = list(store.events(sid))
        assert R.run_status(evs, alive=lambda run: True)["phase"] == "running"
        assert R.run_status(evs, alive=lambda run: False)["phase"] == "interrupted"
        assert session_liveness(evs) == (True, R.run_status(evs, alive=lambda run: True))  # this process runs it
        record.end("stopped", 0)
        evs = list(store.events(sid))
        st = R.run_status(evs, alive=lambda run: True)
        assert st["phase"] == "ended" and st["run"]["outcome"] == "stopped" and st["run"]["run_id"] == started.run_id
        with pytest.raises(ValueError, match="unknown run outcome"):
            RunRecord(store, sid).end("finished")
        # a second run starts a new phase; only the latest counts
        store.append(sid, [RunStarted("r2", 999_999_999, socket.gethostname(), "2026-01-01T00:00:00.000Z")])
        st = R.run_status(list(store.events(sid)), alive=process_alive)
        assert (st["phase"], st["runs"]) == ("interrupted", 2)  # no such pid
        store.append(sid, [RunEnded("r2", "done", "2026-01-01T00:00:01.000Z", 0)])
        assert R.run_status(list(store.events(sid)), alive=process_alive)["phase"] == "ended"


def test_process_alive_tells_a_reused_pid_and_another_host_apart():
    me = {"pid": os.getpid(), "host": socket.gethostname(), "process_start": process_start(os.getpid())}
    assert process_alive(me) is True
    assert process_alive({**me, "host": socket.gethostname() + "-elsewhere"}) is False
    if me["process_start"] is not None:  # Linux: a pid now held by a process started at another time
        assert process_alive({**me, "process_start": me["process_start"] + 1}) is False
