"""Writer blockers from real refused writes (spec: "Repeated unchanged writer blockers are supervised as failed
certification attempts, including across resume, even if their commands pass").

The agent loop, its real tools, permission policy, sandbox and kernel: a write refused by the permission
policy, by the guard of an edit (stale since the last read) or by the sandbox's read-only file system, and
then refused again with the workspace unchanged, appends a WriterBlocker; the kernel then refuses to certify
the session, across a resume in a new process too, until the workspace changes.
"""

from __future__ import annotations

import json

import pytest
from sandbox_support import require_bwrap
from test_agent_loop import oa

from latch.agent.blockers import refused_write
from latch.agent.context import session_context
from latch.agent.loop import AgentLoop
from latch.agent.permissions import PermissionPolicy
from latch.agent.sandbox import choose
from latch.agent.tools import ToolContext, builtin_tools
from latch.agent.tools.processes import ProcessManager
from latch.host.loop import build_engine
from latch.kernel.events import ValidationEvidence
from latch.kernel.ledger import clear_cache
from latch.kernel.state import canonical_state
from latch.port import ContextBudget
from latch.providers import ScriptedProvider
from latch.store import EventStore

BUDGET = ContextBudget(64_000, 4_000, 16_000)


class Run:
    """One process of ``latch run`` on the store at ``tmp_path/latch.db``: its own store handle, engine and loop."""

    def __init__(self, tmp_path, responses, *, sid=None, mode="default", sandbox=None, **kw):
        self.ws = tmp_path / "ws"
        self.ws.mkdir(exist_ok=True)
        clear_cache()  # a new process: no kernel state carried over in memory
        self.store = EventStore(tmp_path / "latch.db")
        self.sid = sid or self.store.create_session(workspace=str(self.ws), source="latch run", format="latch")
        setup = build_engine(self.store, self.sid, stream="continuity:main", model="gpt-4.1")
        self.processes = ProcessManager(self.store, self.sid, self.ws, **({"sandbox": sandbox} if sandbox else {}))
        ctx = ToolContext(
            workspace=self.ws,
            store=self.store,
            session_id=self.sid,
            processes=self.processes,
            estimate=setup.counter.text,
        )
        sc, _ = session_context(self.ws)
        self.loop = AgentLoop(
            self.store,
            self.sid,
            ScriptedProvider(responses, model="gpt-4.1"),
            setup=setup,
            budget=BUDGET,
            tools=builtin_tools(),
            tool_context=ctx,
            session_context=sc,
            policy=PermissionPolicy(mode),
            **kw,
        )

    def turns(self, n: int) -> None:
        for _ in range(n):
            self.loop.turn()

    def blockers(self) -> list[str]:
        return [s.event.blocker for s in self.store.events(self.sid, kinds=["writer_blocker"])]

    def certification(self) -> dict:
        return canonical_state(self.store, self.sid).certification

    def close(self) -> None:
        self.processes.close()
        self.store.close()


def write(i: int, path: str = "src/gen.rs", content: str = "fn main() {}\n"):
    return oa(calls=[(f"w{i}", "write_file", {"path": path, "content": content})])


def passed(store, sid):
    store.append(sid, [ValidationEvidence(command="cargo test", status="passed", exit_code=0)])


def test_a_write_denied_twice_unchanged_is_a_writer_blocker_and_supervised_across_resume(tmp_path):
    blocker = "write_file src/gen.rs: [denied: read-only mode]"
    run = Run(tmp_path, [write(1), write(2), oa("done")], mode="read_only")
    passed(run.store, run.sid)
    run.turns(1)
    assert run.blockers() == []  # one refusal is only its error result
    assert run.certification()["certified"]
    run.turns(1)
    assert run.blockers() == [blocker]
    cert = run.certification()
    assert not cert["certified"] and cert["failed_attempts"] == 1
    assert cert["reasons"] == [f"writer blocker unchanged (1 failed certification attempt): {blocker}"]
    sid = run.sid
    run.close()
    # a new process resumes the session: the same refusal once more is a repeat, and the streak goes on
    resumed = Run(tmp_path, [write(3), oa("done")], sid=sid, mode="read_only")
    passed(resumed.store, sid)  # a passing command does not clear an unchanged blocker
    resumed.turns(1)
    assert resumed.blockers() == [blocker, blocker]
    cert = resumed.certification()
    assert not cert["certified"] and cert["failed_attempts"] == 2
    resumed.close()
    # the workspace changes: the blocker is no longer unchanged
    after = Run(tmp_path, [write(4, content="fn main() { run() }\n"), oa("done")], sid=sid, mode="accept_edits")
    after.turns(1)
    assert (after.ws / "src/gen.rs").read_text() == "fn main() { run() }\n"
    passed(after.store, sid)
    cert = after.certification()
    assert cert["certified"] and cert["failed_attempts"] == 0
    after.close()


def test_a_different_refusal_in_between_is_no_repeat(tmp_path):
    run = Run(tmp_path, [write(1), write(2, path="src/other.rs"), write(3), oa("done")], mode="read_only")
    run.turns(3)
    assert run.blockers() == []
    run.close()


def test_a_guarded_edit_refused_as_stale_twice_is_a_writer_blocker(tmp_path):
    edit = {"path": "lib.py", "old_string": "x = 1", "new_string": "x = 2"}
    run = Run(
        tmp_path,
        [
            oa(calls=[("r1", "read_file", {"path": "lib.py"})]),
            oa(calls=[("e1", "edit_file", edit)]),
            oa(calls=[("e2", "edit_file", edit)]),
        ],
        mode="accept_edits",
    )
    (run.ws / "lib.py").write_text("x = 1\n")
    run.turns(1)
    (run.ws / "lib.py").write_text("x = 1\ny = 0\n")  # changed outside the agent after its read
    run.turns(2)
    results = [s.event for s in run.store.events(run.sid, kinds=["tool_result"])][-2:]
    assert all(r.is_error and "changed outside the agent" in r.content for r in results)
    assert (run.ws / "lib.py").read_text() == "x = 1\ny = 0\n"
    assert run.blockers() == [f"edit_file lib.py: {results[-1].content}"]
    assert run.certification()["failed_attempts"] == 1
    run.close()


def test_a_write_the_sandbox_refuses_twice_is_a_writer_blocker(tmp_path):
    require_bwrap()
    (tmp_path / "ws").mkdir(exist_ok=True)
    sandbox, _ = choose("read-only", tmp_path / "ws")
    shell = {"command": "echo hi > out.txt"}
    run = Run(
        tmp_path,
        [oa(calls=[("s1", "shell", shell)]), oa(calls=[("s2", "shell", shell)]), oa("done")],
        mode="bypass",
        sandbox=sandbox,
    )
    run.turns(2)
    assert not (run.ws / "out.txt").exists()
    (blocker,) = run.blockers()
    assert blocker.startswith("shell `echo hi > out.txt`: ") and "Read-only file system" in blocker
    run.close()


@pytest.mark.parametrize(
    "name,args,content,is_error,expected",
    [
        ("write_file", {"path": "a.py"}, "[denied: read-only mode]", True, "write_file a.py: [denied: read-only mode]"),
        (
            "edit_file",
            {"path": "a.py"},
            "[not run: the user declined this call]",
            True,
            "edit_file a.py: [not run: the user declined this call]",
        ),
        (
            "write_file",
            {"path": "a.py"},
            "a.py: exists and was not read in this session; read it with read_file first (nothing was written)",
            True,
            "write_file a.py: a.py: exists and was not read in this session; read it with "
            "read_file first (nothing was written)",
        ),
        ("write_file", {"path": "a.py"}, "wrote 12 bytes", False, None),
        ("edit_file", {"path": "a.py"}, "a.py: old_string not found (the file is unchanged; re-read it)", True, None),
        ("read_file", {"path": "a.py"}, "[denied: read-only mode]", True, None),
        ("shell", {"command": "pytest"}, "1 failed", True, None),
        (
            "shell",
            {"command": "touch /usr/x"},
            "touch: cannot touch '/usr/x': Read-only file system",
            True,
            "shell `touch /usr/x`: touch: cannot touch '/usr/x': Read-only file system",
        ),
    ],
)
def test_what_counts_as_a_refused_write(name, args, content, is_error, expected):
    assert refused_write(name, json.dumps(args), content, is_error) == expected
