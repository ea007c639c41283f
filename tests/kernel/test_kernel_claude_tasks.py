"""Claude Code 2.1.x background tasks and task tools: TaskOutput/TaskStop polls, TaskCreate/TaskUpdate actions."""

from __future__ import annotations

from kernel_support import session, state, turn

from latch.kernel.derive import process_id_text
from latch.kernel.ledger import clear_cache

_STARTED = (
    "Command running in background with ID: {id}. Output is being written to: "
    "/tmp/claude-1000/-home-u-app/tasks/{id}.output"
)


def _task_output(pid: str, status: str, output: str, exit_code: int | None = None) -> str:
    """A TaskOutput result the way Claude Code 2.1.x writes it."""
    retrieval = "timeout" if status == "running" else "success"
    code = f"<exit_code>{exit_code}</exit_code>\n\n" if exit_code is not None else ""
    return (
        f"<retrieval_status>{retrieval}</retrieval_status>\n\n<task_id>{pid}</task_id>\n\n"
        f"<task_type>local_bash</task_type>\n\n<status>{status}</status>\n\n{code}<output>\n{output}\n</output>"
    )


def _background(store, sid: str, command: str, pid: str = "be613ab", **args) -> None:
    turn(store, sid, "Bash", {"command": command, "description": "Run tests", **args}, _STARTED.format(id=pid))


def _procs(s) -> list[tuple]:
    return [(p["process_id"], p["running"], p["exit_code"]) for p in s.processes]


# ------------------------------------------------------------------ background processes
def test_background_id_never_includes_trailing_punctuation(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    _background(store, sid, "mix test test/x_test.exs 2>&1", timeout=60000)  # auto-backgrounded after its timeout
    _background(store, sid, "npm run dev", pid="b7f00d1", run_in_background=True)
    assert _procs(state(store, sid)) == [("be613ab", True, None), ("b7f00d1", True, None)]
    assert [process_id_text(x) for x in ("be613ab.", " bash_1 ", "b1),", "shell_2")] == [
        "be613ab",
        "bash_1",
        "b1",
        "shell_2",
    ]


def test_task_output_still_running_keeps_the_process_running(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    _background(store, sid, "mix test 2>&1")
    turn(
        store,
        sid,
        "TaskOutput",
        {"task_id": "be613ab", "block": True, "timeout": 120000},
        _task_output("be613ab", "running", "Compiling 7 files (.ex)"),
    )
    s = state(store, sid)
    assert _procs(s) == [("be613ab", True, None)]
    assert s.evidence == () and s.validation_runs == 0  # the validation still waits for the exit
    assert not s.certification["certified"]


def test_task_output_completed_closes_the_process_and_lands_its_validation(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    _background(store, sid, "mix test test/x_test.exs 2>&1", timeout=60000)
    turn(
        store,
        sid,
        "TaskOutput",
        {"task_id": "be613ab", "block": True, "timeout": 120000},
        _task_output("be613ab", "running", "Compiling 7 files (.ex)"),
    )
    turn(
        store,
        sid,
        "TaskOutput",
        {"task_id": "be613ab", "block": True, "timeout": 600000},
        _task_output("be613ab", "completed", "Exit code 3 was printed by a fixture\n49 tests, 0 failures", exit_code=0),
    )
    s = state(store, sid)
    assert _procs(s) == [("be613ab", False, 0)]
    (obs,) = s.evidence
    assert (obs["requirement"], obs["status"], obs["exit_code"]) == ("mix test test/x_test.exs", "passed", 0)
    assert obs["summary"] == "49 tests, 0 failures"  # read from <output>, not the XML tags
    # the <exit_code> tag decides, not an "Exit code N" line of the output
    assert s.certification["certified"]


def test_task_output_failed_and_killed_and_task_stop(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    _background(store, sid, "pytest -q", pid="b1")
    _background(store, sid, "cargo test", pid="b2")
    _background(store, sid, "go test ./...", pid="b3")
    turn(store, sid, "TaskOutput", {"task_id": "b1"}, _task_output("b1", "failed", "1 failed, 2 passed", exit_code=1))
    turn(store, sid, "TaskOutput", {"task_id": "b2"}, _task_output("b2", "killed", "Compiling"))
    turn(store, sid, "TaskStop", {"task_id": "b3"}, "Successfully stopped task: b3 (go test ./...)")
    s = state(store, sid)
    assert _procs(s) == [("b1", False, 1), ("b2", False, None), ("b3", False, None)]
    assert [(o["requirement"], o["status"]) for o in s.evidence] == [
        ("pytest -q", "failed"),
        ("cargo test", "unknown"),
        ("go test ./...", "unknown"),
    ]


def test_older_bash_output_and_kill_shell_still_work(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    _background(store, sid, "pytest -q", pid="bash_1", run_in_background=True)
    _background(store, sid, "npm test", pid="bash_2", run_in_background=True)
    turn(
        store,
        sid,
        "BashOutput",
        {"bash_id": "bash_1"},
        "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\n5 passed in 0.2s\n</stdout>",
    )
    turn(store, sid, "KillShell", {"shell_id": "bash_2"}, "Successfully killed shell: bash_2 (npm test)")
    s = state(store, sid)
    assert _procs(s) == [("bash_1", False, 0), ("bash_2", False, None)]
    assert [(o["requirement"], o["status"], o["exit_code"]) for o in s.evidence] == [
        ("pytest -q", "passed", 0),
        ("npm test", "unknown", None),
    ]
    assert s.evidence[0]["summary"] == "5 passed in 0.2s"


# ------------------------------------------------------------------ TaskCreate / TaskUpdate
def _create(store, sid: str, n: int, subject: str) -> int:
    return turn(
        store,
        sid,
        "TaskCreate",
        {
            "subject": subject,
            "description": f"Details of {subject.lower()}.",
            "activeForm": f"Working on {subject.lower()}",
        },
        f"Task #{n} created successfully: {subject}",
    )


def test_task_create_and_update_maintain_the_actions(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    first = _create(store, sid, 1, "Add  EndedAt field")
    second = _create(store, sid, 2, "Run verification")
    s = state(store, sid)
    assert [dict(a) for a in s.actions] == [
        {"id": "A1", "text": "Add EndedAt field", "status": "pending", "source": "TaskCreate", "seq": first},
        {"id": "A2", "text": "Run verification", "status": "pending", "source": "TaskCreate", "seq": second},
    ]
    turn(store, sid, "TaskUpdate", {"taskId": "1", "status": "in_progress"}, "Updated task #1 status")
    assert [(a["id"], a["status"]) for a in state(store, sid).actions] == [("A1", "in_progress"), ("A2", "pending")]
    turn(store, sid, "TaskUpdate", {"taskId": "1", "status": "completed"}, "Updated task #1 status")
    done = state(store, sid)
    turn(store, sid, "TaskUpdate", {"taskId": "2", "status": "deleted"}, "Updated task #2 deleted")
    s = state(store, sid)
    assert [(a["id"], a["text"], a["status"]) for a in s.actions] == [("A1", "Add EndedAt field", "done")]
    assert [(a["id"], a["status"]) for a in done.actions] == [("A1", "done"), ("A2", "pending")]  # older state kept
    assert "- [done] Add EndedAt field" in s.render(2000, len)
    # an unknown id, a failed update and a TodoWrite list leave the task actions alone
    turn(store, sid, "TaskUpdate", {"taskId": "9", "status": "completed"}, "Task not found")
    turn(
        store,
        sid,
        "TaskUpdate",
        {"taskId": "1", "status": "pending"},
        "<tool_use_error>boom</tool_use_error>",
        is_error=True,
    )
    turn(
        store,
        sid,
        "TodoWrite",
        {"todos": [{"content": "Ship", "status": "pending", "activeForm": "Shipping"}]},
        "Todos have been modified successfully.",
    )
    assert [(a["id"], a["status"], a["source"]) for a in state(store, sid).actions] == [
        ("A1", "done", "TaskCreate"),
        ("A3", "pending", "TodoWrite"),
    ]


def test_task_update_subject_and_revision(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    _create(store, sid, 1, "Draft")
    before = state(store, sid).revision
    turn(store, sid, "TaskUpdate", {"taskId": "#1", "subject": "Final  text"}, "Updated task #1 subject")
    s = state(store, sid)
    assert [(a["text"], a["status"]) for a in s.actions] == [("Final text", "pending")]
    assert s.revision > before
    turn(store, sid, "TaskUpdate", {"taskId": "1", "subject": "Final text"}, "Updated task #1 subject")
    assert state(store, sid).revision == s.revision  # no change, no new revision


def test_task_actions_incremental_equals_a_rebuild(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    seqs = [_create(store, sid, 1, "One"), _create(store, sid, 2, "Two")]
    _background(store, sid, "pytest -q", pid="b9")
    seqs.append(turn(store, sid, "TaskUpdate", {"taskId": "1", "status": "completed"}, "Updated task #1 status"))
    seqs.append(turn(store, sid, "TaskOutput", {"task_id": "b9"}, _task_output("b9", "completed", "3 passed", 0)))
    seqs.append(turn(store, sid, "TaskUpdate", {"taskId": "2", "status": "deleted"}, "Updated task #2 deleted"))
    forward = [state(store, sid, seq).to_json() for seq in seqs]
    for seq, expected in zip(seqs, forward, strict=False):
        clear_cache()
        assert state(store, sid, seq).to_json() == expected
