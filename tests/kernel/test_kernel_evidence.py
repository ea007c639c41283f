"""Validation evidence, workspace generations and certification (spec: "Sessions & continuity", "Port boundary")."""

from __future__ import annotations

import json

from click.testing import CliRunner
from kernel_support import by, session, state, turn

from latch.cli import _load_commands, cli
from latch.kernel import apply_kernel_tool
from latch.kernel.events import Mutation, ProcessExited, ProcessStarted, ValidationEvidence, WriterBlocker
from latch.kernel.ledger import clear_cache
from latch.store import EventStore


def passed(command: str, *requirements: str) -> ValidationEvidence:
    return ValidationEvidence(command=command, status="passed", requirements=requirements, exit_code=0)


def test_passed_at_g_is_stale_at_g_plus_1_and_does_not_certify(store):
    sid = session(store)
    store.append(sid, [Mutation(paths=("a.py",), tool="Edit")])
    (proof,) = store.append(sid, [passed("pytest -q")])
    s = state(store, sid)
    assert s.generation == 1 and s.evidence[0]["generation"] == 1 and s.evidence[0]["current"]
    assert s.certification == {"certified": True, "requirements": ["pytest -q"], "reasons": [], "failed_attempts": 0}
    store.append(sid, [Mutation(paths=("b.py",), tool="Write")])
    s = state(store, sid)
    assert s.generation == 2
    (obs,) = s.evidence
    assert (obs["status"], obs["generation"], obs["current"], obs["seq"]) == ("passed", 1, False, proof)
    assert not s.certification["certified"]
    assert s.certification["reasons"] == ["pytest -q: passed, but the workspace changed since"]
    assert "- passed: pytest -q (STALE: the workspace changed since)" in s.render(10_000, len)
    assert store.get(proof).event.status == "passed"  # the historical entry stays in the log
    # resume: a fresh reduction (new process) agrees
    clear_cache()
    resumed = state(store, sid)
    assert resumed.to_json() == s.to_json()


def test_a_validation_set_stales_together(store):
    sid = session(store)
    command = "cargo fmt --check && cargo clippy -- -D warnings && cargo test"
    (proof,) = store.append(sid, [passed(command, "cargo fmt --check", "cargo clippy -- -D warnings", "cargo test")])
    s = state(store, sid)
    assert [(o["requirement"], o["command"], o["generation"], o["seq"], o["current"]) for o in s.evidence] == [
        ("cargo fmt --check", command, 0, proof, True),
        ("cargo clippy -- -D warnings", command, 0, proof, True),
        ("cargo test", command, 0, proof, True),
    ]
    assert s.certification["certified"] and len(s.certification["requirements"]) == 3
    store.append(sid, [Mutation(paths=("src/lib.rs",), tool="apply_patch")])
    s = state(store, sid)
    assert [o["current"] for o in s.evidence] == [False, False, False]
    assert len(s.certification["reasons"]) == 3


def test_derived_validation_set_from_one_shell_command(store):
    sid = session(store, fmt="claude-code")
    turn(store, sid, "Bash", {"command": "cargo fmt --all && cargo clippy && cargo test 2>&1"}, "test result: ok")
    s = state(store, sid)
    assert s.generation == 1  # cargo fmt committed before the checks ran
    assert [(o["requirement"], o["generation"], o["current"]) for o in s.evidence] == [
        ("cargo clippy", 1, True),
        ("cargo test", 1, True),
    ]
    turn(store, sid, "Edit", {"file_path": "/ws/src/lib.rs", "old_string": "a", "new_string": "b"}, "ok")
    assert [o["current"] for o in state(store, sid).evidence] == [False, False]


def test_explicit_requirements_need_a_current_pass_each(store):
    sid = session(store)
    apply_kernel_tool(store, sid, "require_validation", {"requirement": "unit tests pass", "command": "pytest -q"})
    apply_kernel_tool(store, sid, "require_validation", {"requirement": "mypy src"})
    store.append(sid, [passed("pytest -q")])
    s = state(store, sid)
    assert s.certification["reasons"] == ["V2 mypy src: never validated"]
    store.append(sid, [ValidationEvidence(command="mypy src", status="failed", exit_code=1)])
    assert state(store, sid).certification["reasons"] == ["V2 mypy src: failed"]
    store.append(sid, [passed("mypy src")])
    assert state(store, sid).certification["certified"]


def test_a_running_managed_process_blocks_certification_until_exit_and_rerun(store):
    sid = session(store)
    store.append(sid, [passed("pytest -q")])
    store.append(sid, [ProcessStarted(process_id="p1", command="npm run dev")])
    s = state(store, sid)
    assert s.evidence[0]["current"] and not s.certification["certified"]
    assert s.certification["reasons"] == ["managed process p1 is running"]
    # a natural exit commits as an event; nothing polls
    store.append(sid, [ProcessExited(process_id="p1", exit_code=0)])
    s = state(store, sid)
    assert not s.processes[0]["running"]
    assert s.certification["reasons"] == ["managed process p1 exited after the validation; rerun it"]
    store.append(sid, [passed("pytest -q")])
    assert state(store, sid).certification["certified"]


def test_writer_blockers_count_as_failed_attempts_across_resume(store, tmp_path):
    sid = session(store)
    store.append(sid, [passed("pytest -q")])
    blocker = "cannot write src/gen.rs: generated by build.rs"
    store.append(sid, [WriterBlocker(blocker=blocker, command="pytest -q", command_passed=True)])
    s = state(store, sid)
    assert s.certification["failed_attempts"] == 1 and not s.certification["certified"]
    store.append(sid, [WriterBlocker(blocker="Cannot write src/gen.rs:  generated by build.rs", command_passed=True)])
    store.close()
    clear_cache()  # a new process resumes the session
    resumed = EventStore(tmp_path / "latch.db")
    try:
        resumed.append(sid, [passed("pytest -q"), WriterBlocker(blocker=blocker, command_passed=True)])
        s = state(resumed, sid)
        assert s.certification["failed_attempts"] == 3
        assert s.certification["reasons"] == [f"writer blocker unchanged (3 failed certification attempts): {blocker}"]
        lineage = [f for f in s.failures if f["tool"] == "writer_blocker"]
        assert [(f["count"], f["active"]) for f in lineage] == [(3, True)]
        # the blocker is "unchanged" only while the workspace is: a mutation ends the streak
        resumed.append(sid, [Mutation(paths=("build.rs",), tool="Edit"), passed("pytest -q")])
        s = state(resumed, sid)
        assert s.certification["certified"] and s.certification["failed_attempts"] == 0
    finally:
        resumed.close()


def test_generation_is_shared_by_sessions_of_one_workspace(store):
    a = session(store, "/repo")
    b = session(store, "/repo/")
    other = session(store, "/elsewhere")
    child = session(store, None, parent=a)
    store.append(a, [passed("pytest")])
    store.append(b, [Mutation(paths=("x.py",), tool="Edit")])
    store.append(other, [Mutation(paths=("y.py",), tool="Edit")])
    assert state(store, a).generation == state(store, b).generation == state(store, child).generation == 1
    assert state(store, other).generation == 1
    assert not state(store, a).evidence[0]["current"]
    store.append(child, [Mutation(paths=("z.py",), tool="Write")])
    assert state(store, a).generation == 2 and state(store, other).generation == 1
    assert state(store, child).evidence == ()  # child evidence stays local to its session


def test_cli_evidence_shows_stale_entries_and_the_verdict(store, tmp_path):
    sid = session(store)
    store.append(sid, [passed("pytest -q"), Mutation(paths=("a.py",), tool="Edit")])
    store.close()
    _load_commands()
    out = CliRunner().invoke(cli, ["--db", str(tmp_path / "latch.db"), "evidence", sid[:6]])
    assert out.exit_code == 0, out.output
    assert "STALE" in out.output and "verdict: NOT CERTIFIED" in out.output
    assert "pytest -q: passed, but the workspace changed since" in out.output
    json_out = CliRunner().invoke(cli, ["--db", str(tmp_path / "latch.db"), "evidence", sid, "--json"])
    assert '"certified": false' in json_out.output


def test_state_json_has_the_derived_counts(store, tmp_path):
    sid = session(store, fmt="claude-code")
    turn(store, sid, "Read", {"file_path": "/ws/a.py"}, "x")
    turn(store, sid, "Bash", {"command": "pytest"}, "1 passed")
    store.close()
    _load_commands()
    out = CliRunner().invoke(cli, ["--db", str(tmp_path / "latch.db"), "state", sid, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert (len(data["files"]), data["generation"], data["validation_runs"]) == (1, 0, 1)
    text = CliRunner().invoke(cli, ["--db", str(tmp_path / "latch.db"), "state", sid]).output
    assert "files 1 (1 observed, 0 written) · mutations 0 · generation 0 · validations 1 run" in text
    bad = CliRunner().invoke(cli, ["--db", str(tmp_path / "latch.db"), "state", "nosuch"])
    assert bad.exit_code != 0 and "no session 'nosuch'" in bad.output and "Traceback" not in bad.output
    assert by(data["files"], "path")["a.py"]["reads"] == 1


def test_the_view_names_a_managed_process_only_when_it_is_what_blocks(store):
    sid = session(store)
    store.append(
        sid,
        [
            ValidationEvidence(command="pytest -q", status="failed", exit_code=1),
            ProcessStarted(process_id="p1", command="npm run dev"),
        ],
    )
    s = state(store, sid)
    assert s.certification["reasons"] == ["pytest -q: failed", "managed process p1 is running"]
    verdict, running = s.render(1_000, len).split("\nBackground processes running:\n")
    assert verdict.endswith("Certification:\n- not certified: pytest -q: failed")
    assert running.startswith("- [p1] `npm run dev` (started at seq ")  # the working set lists it apart
    store.append(sid, [passed("pytest -q")])
    s = state(store, sid)
    assert s.certification["reasons"] == ["managed process p1 is running"]
    verdict, running = s.render(1_000, len).split("\nBackground processes running:\n")
    assert verdict.endswith("Certification:\n- not certified: managed process p1 is running")
