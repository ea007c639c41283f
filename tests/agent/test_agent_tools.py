"""The agent's built-in tools: real files in tmp_path, a real store, real subprocesses.

Each call goes through the loop's order (``notes/agent_contract.md``): the assistant message holding the
call is appended, the tool runs (``run_tool``), then its ToolResult is appended.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from latch import hotpaths
from latch.agent.tools import ToolContext, ToolOutcome, builtin_tools, run_tool
from latch.agent.tools.processes import OUTPUT_LIMIT_BYTES, OUTPUT_LIMIT_TOKENS, ProcessManager
from latch.events import (
    AssistantMessage,
    ExternalChange,
    FileObservation,
    Mutation,
    ProcessExited,
    ProcessStarted,
    ToolCall,
    ToolResult,
    UserMessage,
    ValidationEvidence,
    canonical_json,
)
from latch.kernel.files import PAGE_LIMIT_BYTES
from latch.kernel.ledger import ledger_for
from latch.kernel.state import canonical_state
from latch.kernel.tools import KERNEL_TOOLS
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

ROOT = Path(__file__).resolve().parents[2]


class Agent:
    """A session of format ``latch`` (what ``latch run`` creates) and the loop's append order."""

    def __init__(self, tmp_path: Path):
        self.ws = (tmp_path / "ws").resolve()
        self.ws.mkdir()
        self.store = EventStore(tmp_path / "latch.db")
        self.sid = self.store.create_session(workspace=str(self.ws), source="latch run", format="latch")
        self.processes = ProcessManager(self.store, self.sid, self.ws, log_dir=tmp_path / "logs")
        self.ctx = ToolContext(
            workspace=self.ws,
            store=self.store,
            session_id=self.sid,
            processes=self.processes,
            estimate=hotpaths.estimate_tokens,
        )
        self.tools = builtin_tools()
        self.n = 0

    def propose(self, name: str, args) -> ToolCall:
        self.n += 1
        call = ToolCall(f"c{self.n}", name, args if isinstance(args, str) else json.dumps(args))
        self.store.append(self.sid, [AssistantMessage("", tool_calls=(call,))])
        return call

    def finish(self, call: ToolCall, out: ToolOutcome) -> None:
        self.store.append(
            self.sid, [ToolResult(call.id, out.content, is_error=out.is_error, name=call.name, exit_code=out.exit_code)]
        )

    def call(self, name: str, args) -> ToolOutcome:
        call = self.propose(name, args)
        out = run_tool(self.tools, call, self.ctx)
        self.finish(call, out)
        return out

    def stored(self, cls) -> list:
        return [s.event for s in self.store.events(self.sid, kinds=[cls.KIND])]

    def facts(self, cls) -> list:
        """The facts the kernel reduces (explicit records and derived ones) of one kind."""
        return [f for _, f in ledger_for(self.store).session_facts(self.sid) if isinstance(f, cls)]

    def state(self):
        return canonical_state(self.store, self.sid)


@pytest.fixture
def agent(tmp_path):
    a = Agent(tmp_path)
    yield a
    a.processes.close()
    a.store.close()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- schemas
SCHEMA_DUMP = (
    "import json; from latch.agent.tools import builtin_tools; print(json.dumps([t.SCHEMA for t in builtin_tools()]))"
)


def test_schemas_are_constant_in_a_fixed_order_and_byte_identical_across_processes():
    tools = builtin_tools()
    names = [t.NAME for t in tools]
    assert names == [
        "read_file",
        "write_file",
        "edit_file",
        "shell",
        "process_output",
        "search_history",
        "compact",
        "read_artifact",
        *[t["name"] for t in KERNEL_TOOLS],
    ]
    assert [t.SCHEMA["name"] for t in tools] == names
    assert all(list(t.SCHEMA) == ["name", "description", "input_schema"] for t in tools)
    first = json.dumps([t.SCHEMA for t in builtin_tools()])  # insertion order, as a provider SDK sends it
    assert first == json.dumps([t.SCHEMA for t in builtin_tools()])
    assert canonical_json([t.SCHEMA for t in tools]) == canonical_json([t.SCHEMA for t in builtin_tools()])
    env = dict(os.environ, PYTHONHASHSEED="123")
    other = subprocess.run(
        [sys.executable, "-c", SCHEMA_DUMP], capture_output=True, text=True, env=env, check=True, cwd=ROOT
    ).stdout.rstrip("\n")
    assert other == first
    assert [t.MUTATES for t in tools[:8]] == [False, True, True, True, False, False, False, False]
    assert not any(t.MUTATES for t in tools[8:])
    kernel_schemas = [t.SCHEMA for t in tools[8:]]
    assert kernel_schemas == KERNEL_TOOLS


# ----------------------------------------------------------------------------- run_tool
def test_bad_calls_are_error_outcomes_naming_the_field(agent):
    cases = [
        ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
        ("read_file", {}, "field 'path' is required"),
        ("read_file", {"path": 3}, "field 'path' must be a string"),
        ("read_file", {"path": "a", "offset": "1"}, "field 'offset' must be an integer"),
        ("read_file", {"path": "a", "offset": -1}, "field 'offset' must be at least 0"),
        ("read_file", {"path": "a", "mode": "r"}, "unknown field 'mode'"),
        ("shell", {"command": "true", "timeout": True}, "field 'timeout' must be an integer"),
        ("read_file", "not json", "arguments must be a JSON object"),
        ("record_decision", {}, "record_decision: field 'decision' is required"),
        ("record_decision", {"decision": "x", "supersedes": "D9"}, "field 'supersedes': no such id 'D9'"),
    ]
    for name, args, message in cases:
        before = agent.store.max_seq()
        call = ToolCall("x", name, args if isinstance(args, str) else json.dumps(args))
        out = run_tool(agent.tools, call, agent.ctx)
        assert out.is_error and message in out.content, (name, out.content)
        assert "\n" not in out.content
        assert agent.store.max_seq() == before  # nothing appended


def test_kernel_tools_dispatch_to_the_kernel(agent):
    assert not agent.call("set_goal", {"goal": "Fix the rounding bug"}).is_error
    out = agent.call("record_decision", {"decision": "Use Decimal", "rationale": "exact cents"})
    assert not out.is_error and out.content.startswith("record_decision: recorded")
    out = agent.call("require_validation", {"requirement": "unit tests pass", "command": "pytest -q"})
    assert not out.is_error
    st = agent.state()
    assert st.goal == "Fix the rounding bug"
    assert [d["text"] for d in st.decisions] == ["Use Decimal"]
    assert [r["requirement"] for r in st.requirements] == ["unit tests pass"]
    bad = agent.call("reject_hypothesis", {"hypothesis": "H1", "reason": "no"})
    assert bad.is_error and "field 'hypothesis'" in bad.content


# ----------------------------------------------------------------------------- paths
def test_paths_outside_the_workspace_are_refused(agent, tmp_path):
    (tmp_path / "secret.txt").write_text("top secret\n")
    (agent.ws / "link").symlink_to(tmp_path / "secret.txt")
    (agent.ws / "dirlink").symlink_to(tmp_path)
    before = agent.store.max_seq()
    for name, args in [
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": str(tmp_path / "secret.txt")}),
        ("read_file", {"path": "link"}),
        ("read_file", {"path": "dirlink/secret.txt"}),
        ("write_file", {"path": "../evil.txt", "content": "x"}),
        ("write_file", {"path": "/tmp/latch-evil.txt", "content": "x"}),
        ("edit_file", {"path": "link", "old_string": "top", "new_string": "no"}),
    ]:
        out = run_tool(agent.tools, ToolCall("x", name, json.dumps(args)), agent.ctx)
        assert out.is_error and "outside the workspace" in out.content, (args, out.content)
    assert agent.store.max_seq() == before
    assert (tmp_path / "secret.txt").read_text() == "top secret\n"
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/latch-evil.txt").exists()
    # an absolute path inside the workspace is fine
    (agent.ws / "ok.txt").write_text("fine\n")
    assert agent.call("read_file", {"path": str(agent.ws / "ok.txt")}).content == "fine\n"


# ----------------------------------------------------------------------------- read_file
def test_one_read_is_exactly_one_observation_with_hash_and_size(agent):
    data = b"alpha\nbeta\n"
    (agent.ws / "a.txt").write_bytes(data)
    out = agent.call("read_file", {"path": "a.txt"})
    assert out == ToolOutcome("alpha\nbeta\n")
    (obs,) = agent.stored(FileObservation)
    assert (obs.path, obs.sha256, obs.size, obs.offset, obs.length) == ("a.txt", _sha(data), len(data), 0, len(data))
    assert agent.facts(FileObservation) == [obs]  # no derived copy from the read_file call
    (f,) = [f for f in agent.state().files if f["path"] == "a.txt"]
    assert f["reads"] == 1 and f["sha256"] == _sha(data)


def test_read_file_pages_a_large_file(agent):
    data = b"".join(b"line %06d of the big file\n" % i for i in range(5000))  # 130 KB
    (agent.ws / "big.txt").write_bytes(data)
    first = agent.call("read_file", {"path": "big.txt"})
    assert len(first.content.encode()) <= PAGE_LIMIT_BYTES
    assert first.content.startswith("line 000000 of the big file\n")
    nxt = int(first.content.rsplit("continue with offset=", 1)[1].rstrip("]"))
    second = agent.call("read_file", {"path": "big.txt", "offset": nxt})
    assert data[nxt : nxt + 40].decode() == second.content[:40]
    obs = agent.stored(FileObservation)
    assert [(o.offset, o.sha256, o.size) for o in obs] == [(0, None, len(data)), (nxt, None, len(data))]
    assert agent.call("read_file", {"path": "big.txt", "offset": len(data) + 1}).is_error
    missing = agent.call("read_file", {"path": "nope.txt"})
    assert missing.is_error and "no such file" in missing.content
    (agent.ws / "sub").mkdir()
    assert "is a directory" in agent.call("read_file", {"path": "sub"}).content
    # a large file read in pages has no whole-file hash: a write cannot be guarded, so it is refused
    refused = agent.call("edit_file", {"path": "big.txt", "old_string": "line 000000", "new_string": "x"})
    assert refused.is_error and "larger than 64 KiB" in refused.content and (agent.ws / "big.txt").read_bytes() == data


# ----------------------------------------------------------------------------- writes
def test_one_edit_advances_the_generation_by_exactly_one(agent):
    (agent.ws / "m.py").write_text("x = 1\ny = 2\n")
    agent.call("read_file", {"path": "m.py"})
    g0 = agent.state().generation
    out = agent.call("edit_file", {"path": "m.py", "old_string": "y = 2", "new_string": "y = 3"})
    assert out == ToolOutcome("m.py: replaced 1 occurrence")
    assert (agent.ws / "m.py").read_text() == "x = 1\ny = 3\n"
    assert agent.state().generation == g0 + 1
    (mut,) = agent.facts(Mutation)
    assert mut.paths == ("m.py",) and mut.sha256_after == _sha(b"x = 1\ny = 3\n")
    assert mut.sha256_before == _sha(b"x = 1\ny = 2\n")
    # the next edit is guarded by the hash of our own write (no re-read needed)
    out = agent.call("edit_file", {"path": "m.py", "old_string": "x = 1", "new_string": "x = 0"})
    assert not out.is_error and agent.state().generation == g0 + 2 and len(agent.facts(Mutation)) == 2


def test_write_file_creates_and_replaces_guarded(agent):
    g0 = agent.state().generation
    out = agent.call("write_file", {"path": "new/dir/f.txt", "content": "héllo\n"})
    assert out == ToolOutcome("new/dir/f.txt: created, 7 bytes")
    assert (agent.ws / "new/dir/f.txt").read_text(encoding="utf-8") == "héllo\n"
    assert agent.state().generation == g0 + 1
    same = agent.call("write_file", {"path": "new/dir/f.txt", "content": "héllo\n"})
    assert same.content.endswith("unchanged (same bytes), 7 bytes") and agent.state().generation == g0 + 1
    (agent.ws / "old.txt").write_text("keep me\n")
    refused = agent.call("write_file", {"path": "old.txt", "content": "gone\n"})
    assert refused.is_error and "was not read in this session" in refused.content
    assert (agent.ws / "old.txt").read_text() == "keep me\n"
    agent.call("read_file", {"path": "old.txt"})
    assert agent.call("write_file", {"path": "old.txt", "content": "new\n"}).content == "old.txt: updated, 4 bytes"
    assert agent.state().generation == g0 + 2 and len(agent.facts(Mutation)) == 2


def test_external_edit_between_read_and_edit_is_rejected(agent):
    path = agent.ws / "cfg.ini"
    path.write_text("mode = fast\n")
    agent.call("read_file", {"path": "cfg.ini"})
    g0 = agent.state().generation
    path.write_text("mode = safe\n")  # someone else edits the file
    out = agent.call("edit_file", {"path": "cfg.ini", "old_string": "mode = fast", "new_string": "mode = slow"})
    assert out.is_error and "changed outside the agent" in out.content and "re-read it with read_file" in out.content
    assert path.read_text() == "mode = safe\n"  # untouched
    (change,) = agent.stored(ExternalChange)
    assert (change.path, change.expected_sha256, change.actual_sha256) == (
        "cfg.ini",
        _sha(b"mode = fast\n"),
        _sha(b"mode = safe\n"),
    )
    assert agent.facts(ExternalChange) == [change] and agent.facts(Mutation) == []
    assert agent.state().generation == g0
    # write_file is guarded the same way; after a re-read the edit goes through
    assert "changed outside the agent" in agent.call("write_file", {"path": "cfg.ini", "content": "x\n"}).content
    assert len(agent.stored(ExternalChange)) == 2
    agent.call("read_file", {"path": "cfg.ini"})
    assert not agent.call("edit_file", {"path": "cfg.ini", "old_string": "safe", "new_string": "slow"}).is_error
    assert path.read_text() == "mode = slow\n" and agent.state().generation == g0 + 1


def test_edit_file_old_string_missing_or_ambiguous_leaves_the_file(agent):
    path = agent.ws / "t.txt"
    path.write_text("a b a b a\n")
    agent.call("read_file", {"path": "t.txt"})
    out = agent.call("edit_file", {"path": "t.txt", "old_string": "zzz", "new_string": "y"})
    assert out.is_error and "old_string not found" in out.content
    out = agent.call("edit_file", {"path": "t.txt", "old_string": "a", "new_string": "y"})
    assert out.is_error and "occurs 3 times" in out.content and "replace_all" in out.content
    assert path.read_text() == "a b a b a\n" and agent.stored(Mutation) == [] and agent.state().generation == 0
    out = agent.call("edit_file", {"path": "t.txt", "old_string": "a", "new_string": "y", "replace_all": True})
    assert out.content == "t.txt: replaced 3 occurrences" and path.read_text() == "y b y b y\n"
    assert agent.state().generation == 1


# ----------------------------------------------------------------------------- before execution
def test_a_call_with_no_result_already_counts_its_possible_mutation(agent):
    (agent.ws / "f.txt").write_text("one\n")
    agent.call("read_file", {"path": "f.txt"})
    g0 = agent.state().generation
    # a mutating shell command: counted from the moment the call is stored, before it runs
    call = agent.propose("shell", {"command": "rm -f f.txt"})
    assert agent.state().generation == g0 + 1
    out = run_tool(agent.tools, call, agent.ctx)
    assert agent.state().generation == g0 + 1  # still once while it has no result
    agent.finish(call, out)
    assert agent.state().generation == g0 + 1 and not (agent.ws / "f.txt").exists()  # once after the result
    # a write: counted while pending, exactly once after
    call = agent.propose("write_file", {"path": "g.txt", "content": "two\n"})
    assert agent.state().generation == g0 + 2
    agent.finish(call, run_tool(agent.tools, call, agent.ctx))
    assert agent.state().generation == g0 + 2
    # a crash mid-call: the repaired (missing) result keeps the possible mutation
    call = agent.propose("shell", {"command": "touch h.txt"})
    assert agent.state().generation == g0 + 3
    agent.store.append(agent.sid, [ToolResult(call.id, "[interrupted]", is_error=True, name="shell", missing=True)])
    assert agent.state().generation == g0 + 3
    # a read-only command counts nothing, and a refused edit gives its provisional count back
    call = agent.propose("shell", {"command": "ls"})
    assert agent.state().generation == g0 + 3
    agent.finish(call, run_tool(agent.tools, call, agent.ctx))
    call = agent.propose("edit_file", {"path": "g.txt", "old_string": "nope", "new_string": "x"})
    assert agent.state().generation == g0 + 4
    out = run_tool(agent.tools, call, agent.ctx)
    agent.finish(call, out)
    assert out.is_error and agent.state().generation == g0 + 3


# ----------------------------------------------------------------------------- shell, foreground
def test_shell_exit_codes_and_output(agent):
    out = agent.call("shell", {"command": "echo hi; echo err >&2"})
    assert out == ToolOutcome("hi\nerr\nExit code: 0", exit_code=0)
    out = agent.call("shell", {"command": "sh -c 'exit 3'"})
    assert out == ToolOutcome("Exit code: 3", is_error=True, exit_code=3)
    out = agent.call("shell", {"command": "pwd"})
    assert out.content.splitlines()[0] == str(agent.ws)


def test_shell_timeout_kills_the_process_group(agent, tmp_path):
    marker = tmp_path / "survived"
    t0 = time.monotonic()
    out = agent.call("shell", {"command": f"(sleep 3; touch {marker}) & sleep 30", "timeout": 1})
    elapsed = time.monotonic() - t0
    assert out.is_error and out.exit_code is None and "timed out after 1 s" in out.content
    assert elapsed < 5
    time.sleep(3.5)
    assert not marker.exists()  # the whole group died, the backgrounded child too


def test_shell_output_is_bounded_head_and_tail(agent):
    script = "import sys\nfor i in range(200000): print(f'row {i}')\n"
    (agent.ws / "spam.py").write_text(script)
    out = agent.call("shell", {"command": f"{sys.executable} spam.py"})
    assert out.exit_code == 0
    assert len(out.content.encode()) <= OUTPUT_LIMIT_BYTES + 40
    assert hotpaths.estimate_tokens(out.content) <= OUTPUT_LIMIT_TOKENS + 20
    assert out.content.startswith("row 0\nrow 1\n")
    assert out.content.endswith("row 199999\nExit code: 0")
    assert "bytes of output omitted …]" in out.content


def test_a_validation_command_is_evidence_once_at_the_current_generation(agent):
    (agent.ws / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    out = agent.call("shell", {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider test_ok.py"})
    assert out.exit_code == 0, out.content
    (ev,) = agent.facts(ValidationEvidence)  # derived from the call + result, never also appended
    assert agent.stored(ValidationEvidence) == []
    assert ev.status == "passed" and ev.exit_code == 0
    st = agent.state()
    (obs,) = st.evidence
    assert obs["status"] == "passed" and obs["current"] and obs["generation"] == st.generation
    out = agent.call("shell", {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider missing_test.py"})
    assert out.is_error and out.exit_code == 4
    assert [e.status for e in agent.facts(ValidationEvidence)] == ["passed", "failed"]


# ----------------------------------------------------------------------------- shell, background
def _wait_for(agent, cls, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = agent.stored(cls)
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {cls.__name__} within {timeout} s")


def test_background_exit_is_committed_without_polling(agent):
    t0 = time.monotonic()
    out = agent.call("shell", {"command": "sleep 0.5; echo done", "background": True})
    assert time.monotonic() - t0 < 0.4 and not out.is_error
    (started,) = agent.stored(ProcessStarted)
    assert started.command == "sleep 0.5; echo done" and started.process_id in out.content
    assert agent.stored(ProcessExited) == []
    assert [p["process_id"] for p in agent.state().processes if p["running"]] == [started.process_id]
    (exited,) = _wait_for(agent, ProcessExited)  # only waiting: no tool call, no poll
    assert exited == ProcessExited(process_id=started.process_id, exit_code=0)
    assert agent.facts(ProcessStarted) == [started] and agent.facts(ProcessExited) == [exited]  # each once
    (proc,) = agent.state().processes
    assert not proc["running"] and proc["exit_code"] == 0 and proc["exited_seq"] > proc["started_seq"]
    log = agent.call("process_output", {"process_id": started.process_id})
    assert log.content == f"[process {started.process_id}: exited with code 0; 5 bytes of output]\ndone\n"
    assert "no background process 'p000000'" in agent.call("process_output", {"process_id": "p000000"}).content


def test_background_validation_lands_as_evidence_at_its_exit(agent):
    (agent.ws / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_ok.py"
    out = agent.call("shell", {"command": cmd, "background": True})
    assert not out.is_error and agent.facts(ValidationEvidence) == []  # nothing until it exits
    (ev,) = _wait_for(agent, ValidationEvidence)
    assert (ev.command, ev.status, ev.exit_code) == (cmd, "passed", 0) and "passed" in ev.summary
    assert agent.facts(ValidationEvidence) == [ev]
    (obs,) = agent.state().evidence
    assert obs["current"] and obs["status"] == "passed"


def test_close_kills_running_background_processes_and_records_their_exit(agent):
    out = agent.call("shell", {"command": "sleep 60", "background": True})
    assert not out.is_error
    t0 = time.monotonic()
    agent.processes.close()
    assert time.monotonic() - t0 < 5
    (exited,) = agent.stored(ProcessExited)
    assert exited.exit_code is None
    assert agent.processes.errors == []


# ----------------------------------------------------------------------------- search_history
def test_search_history_newest_matches_shown_oldest_first(agent):
    agent.store.append(agent.sid, [UserMessage(f"note {i}: the flux capacitor is at {i}") for i in range(8)])
    agent.store.append(agent.sid, [UserMessage("unrelated words")])
    out = agent.call("search_history", {"query": "flux capacitor", "limit": 3})
    lines = out.content.splitlines()
    assert lines[0] == "[3 of the newest matches, oldest first]"
    assert [line.split(": ", 1)[1] for line in lines[1:]] == [
        f"note {i}: the flux capacitor is at {i}" for i in (5, 6, 7)
    ]
    seqs = [int(line.split()[0][1:]) for line in lines[1:]]
    assert seqs == sorted(seqs)
    assert all(" user_message: " in line for line in lines[1:])  # the search call itself is no hit
    assert agent.call("search_history", {"query": "zebra"}).content == "no match for 'zebra' in this session"
    agent.store.append(agent.sid, [UserMessage("flux " + "word " * 3000) for _ in range(50)])
    big = agent.call("search_history", {"query": "flux", "limit": 50})
    assert len(big.content.encode()) <= 16 * 1024 and "older ones left out" in big.content.splitlines()[0]
