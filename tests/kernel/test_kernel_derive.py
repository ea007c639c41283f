"""Derivation rules: facts from the tool calls of every imported format."""

from __future__ import annotations

import json

import pytest
from kernel_support import by, session, state, turn

from latch.events import ToolCall, ToolResult
from latch.kernel import canonical_state
from latch.kernel.derive import (
    DerivationContext,
    DerivationRule,
    Mutation,
    ToolSuccess,
    builtin_rules,
    error_signature,
    patch_paths,
    register_rule,
    unregister_rule,
)
from latch.kernel.ledger import KernelCache
from latch.kernel.shell import classify_command, command_text


# ------------------------------------------------------------------ shell classification
@pytest.mark.parametrize(
    "script, kinds",
    [
        ("pytest -q tests/test_x.py", [("validate", "pytest -q tests/test_x.py")]),
        ("uv run python -m pytest -k 'a and b'", [("validate", "python -m pytest -k 'a and b'")]),
        (
            "cargo fmt --all && cargo test --workspace",
            [("mutate", "cargo fmt --all"), ("validate", "cargo test --workspace")],
        ),
        ("npm run build 2>&1 | tail -5", [("validate", "npm run build"), ("other", "tail -5")]),
        ("go test ./... ; make -j4 check", [("validate", "go test ./..."), ("validate", "make -j4 check")]),
        ("mvn -q verify", [("validate", "mvn -q verify")]),
        ("./gradlew test", [("validate", "./gradlew test")]),
        ("tox -e py311", [("validate", "tox -e py311")]),
        ("black --check . && black .", [("validate", "black --check ."), ("mutate", "black .")]),
        ("npm run lint:fix", [("mutate", "npm run lint:fix")]),
        ("python reproduce.py", [("other", "python reproduce.py")]),
        ("pip install -e .[dev]", [("other", "pip install -e '.[dev]'")]),
        ("git status && git diff", [("other", "git status"), ("other", "git diff")]),
    ],
)
def test_segments_are_classified(script, kinds):
    assert [(s.kind, s.text) for s in classify_command(script)] == kinds


@pytest.mark.parametrize(
    "script, paths",
    [
        ("rm a.py b.py", ("a.py", "b.py")),
        ("mv old.py new.py", ("old.py", "new.py")),
        ("cp src.txt dst.txt", ("dst.txt",)),
        ("sed -i 's/x/y/' f1 f2", ("f1", "f2")),
        ("perl -pi -e 's/x/y/' a.txt", ("a.txt",)),
        ("echo hi > out.txt 2>/dev/null", ("out.txt",)),
        ("cat <<'EOF' > gen.py\nimport os && print(1)\nEOF", ("gen.py",)),
        ("git checkout -- a.py", ()),  # files unknown: the whole workspace
        ("cargo fmt", ()),
    ],
)
def test_mutation_paths(script, paths):
    (seg,) = [s for s in classify_command(script) if s.kind == "mutate"]
    assert seg.paths == paths


def test_reads_and_argv_commands():
    assert [(s.kind, s.paths) for s in classify_command("sed -n '1,80p' src/a.rs; head -n 20 README.md")] == [
        ("read", ("src/a.rs",)),
        ("read", ("README.md",)),
    ]
    assert command_text(["bash", "-lc", "pytest -q"]) == "pytest -q"
    assert command_text(["git", "commit", "-m", "two words"]) == "git commit -m 'two words'"
    assert command_text({"not": "a command"}) is None


def test_error_signature_normalizes_volatile_parts():
    a = error_signature("Traceback...\nFileNotFoundError: [Errno 2] No such file: '/tmp/x/1.txt' at 0x7f3a")
    b = error_signature("Traceback...\nFileNotFoundError: [Errno 2] No such file: '/home/u/22.txt' at 0x0")
    assert a == b == "FileNotFoundError: [Errno <n>] No such file: <q> at <hex>"
    assert (
        error_signature("\x1b[31merror[E0433]\x1b[0m: cannot find crate `uuid`\nmore")
        == "error[E<n>]: cannot find crate <q>"
    )


def test_patch_paths():
    patch = (
        "*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n*** Move to: c.py\n@@\n-y\n+z\n"
        "*** Delete File: d.py\n*** End Patch"
    )
    assert patch_paths(patch) == ("a.py", "b.py", "c.py", "d.py")


# ------------------------------------------------------------------ Claude Code
def test_claude_code_read_edit_bash_todo(store):
    sid = session(store, "/home/u/app", fmt="claude-code")
    turn(store, sid, "Read", {"file_path": "/home/u/app/src/x.py"}, "     1→x = 1")
    turn(store, sid, "Bash", {"command": "pytest -q"}, "3 passed in 0.1s")
    turn(
        store,
        sid,
        "Edit",
        {"file_path": "/home/u/app/src/x.py", "old_string": "1", "new_string": "2"},
        "The file has been updated.",
    )
    turn(
        store,
        sid,
        "Edit",
        {"file_path": "/home/u/app/src/y.py", "old_string": "q", "new_string": "r"},
        "<tool_use_error>String to replace not found in file.</tool_use_error>",
        is_error=True,
    )
    turn(store, sid, "Bash", {"command": "pytest -q"}, "1 failed, 2 passed", is_error=True)
    turn(
        store,
        sid,
        "TodoWrite",
        {
            "todos": [
                {"content": "Fix x", "status": "completed", "activeForm": "Fixing"},
                {"content": "Ship", "status": "in_progress", "activeForm": "Shipping"},
            ]
        },
        "Todos have been modified successfully.",
    )
    s = state(store, sid)
    files = by(s.files, "path")
    assert (files["src/x.py"]["reads"], files["src/x.py"]["writes"]) == (1, 1)
    assert "src/y.py" not in files  # the failed Edit changed nothing
    assert s.mutations == s.generation == 1
    (obs,) = s.evidence
    assert (obs["requirement"], obs["status"], obs["generation"], obs["attempts"]) == ("pytest -q", "failed", 1, 2)
    lineages = {(f["tool"], f["active"]) for f in s.failures}
    assert lineages == {("Edit", True), ("Bash", True)}
    assert [(a["text"], a["status"]) for a in s.actions] == [("Fix x", "done"), ("Ship", "in_progress")]
    turn(store, sid, "Edit", {"file_path": "/home/u/app/src/y.py", "old_string": "p", "new_string": "r"}, "updated")
    assert {(f["tool"], f["active"]) for f in state(store, sid).failures} == {("Edit", False), ("Bash", True)}


def test_claude_code_clean_bash_result_means_exit_zero(store):
    sid = session(store, fmt="claude-code")
    turn(store, sid, "Bash", {"command": "npm run build"}, "done")
    assert state(store, sid).evidence[0]["status"] == "passed"
    other = session(store)  # a format that does not flag every non-zero exit
    turn(store, other, "bash", {"command": "npm run build"}, "done")
    assert state(store, other).evidence[0]["status"] == "unknown"


def test_claude_code_background_shell_is_a_managed_process(store):
    sid = session(store, fmt="claude-code")
    turn(
        store,
        sid,
        "Bash",
        {"command": "pytest -q", "run_in_background": True},
        "Command running in background with ID: bash_1",
    )
    s = state(store, sid)
    assert [(p["process_id"], p["running"]) for p in s.processes] == [("bash_1", True)]
    assert s.evidence == ()  # the validation waits for the exit
    turn(
        store,
        sid,
        "BashOutput",
        {"bash_id": "bash_1"},
        "<status>completed</status>\n<exit_code>0</exit_code>\n<stdout>5 passed</stdout>",
    )
    s = state(store, sid)
    assert not s.processes[0]["running"] and s.processes[0]["exit_code"] == 0
    assert [(o["requirement"], o["status"]) for o in s.evidence] == [("pytest -q", "passed")]


# ------------------------------------------------------------------ Codex
def test_codex_function_calls(store):
    sid = session(store, "/repo", fmt="codex")
    turn(
        store,
        sid,
        "shell",
        {"command": ["bash", "-lc", "cargo test"]},
        json.dumps({"output": "test result: FAILED", "metadata": {"exit_code": 101}}),
    )
    turn(store, sid, "exec_command", {"cmd": "cargo test"}, "Process exited with code 0\nOutput:\ntest result: ok")
    turn(
        store,
        sid,
        "apply_patch",
        {"input": "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** End Patch"},
        "Success. Updated the following files:\nM src/lib.rs",
    )
    turn(store, sid, "update_plan", {"plan": [{"step": "Port", "status": "completed"}]}, "Plan updated")
    turn(store, sid, "exec_command", {"cmd": "npm run dev"}, "Process running with session ID 7")
    s = state(store, sid)
    assert [(o["requirement"], o["status"], o["exit_code"], o["attempts"]) for o in s.evidence] == [
        ("cargo test", "passed", 0, 2)
    ]
    assert [f["path"] for f in s.files] == ["src/lib.rs"] and s.generation == 1
    assert [(a["text"], a["status"]) for a in s.actions] == [("Port", "done")]
    assert [(p["process_id"], p["running"]) for p in s.processes] == [("session:7", True)]
    turn(store, sid, "write_stdin", {"session_id": 7, "chars": ""}, "Process exited with code 0\nOutput:\n")
    assert not state(store, sid).processes[0]["running"]


def test_codex_exec_cells(store):
    sid = session(store, "/repo", fmt="codex")
    cell = (
        'const patch = "*** Begin Patch\\n*** Update File: crates/a.rs\\n@@\\n-x\\n+y\\n*** End Patch";\n'
        "await tools.apply_patch(patch);\n"
        'const r = await tools.exec_command({"cmd":"cargo fmt --all && cargo test","workdir":"/repo"});\n'
        "text(r.output);"
    )
    turn(store, sid, "exec", {"input": cell}, "Script running with cell ID 3\nWall time 10.0 seconds\nOutput:\n")
    s = state(store, sid)
    assert s.generation == 2  # the patch and cargo fmt commit before the run ends
    assert [(p["process_id"], p["command"], p["running"]) for p in s.processes] == [
        ("cell:3", "cargo fmt --all && cargo test", True)
    ]
    assert s.evidence == ()
    turn(
        store,
        sid,
        "wait",
        {"cell_id": "3"},
        "Script completed\nWall time 2.0 seconds\nOutput:\ntest result: ok. 4 passed",
    )
    s = state(store, sid)
    assert [(o["requirement"], o["status"], o["generation"], o["current"]) for o in s.evidence] == [
        ("cargo test", "passed", 2, True)
    ]
    assert s.certification["certified"]  # the run that proved it is the process that exited
    rejected = (
        'const patch = "*** Begin Patch\\n*** Update File: crates/b.rs\\n@@\\n-q\\n*** End Patch";\n'
        "await tools.apply_patch(patch);"
    )
    turn(
        store,
        sid,
        "exec",
        {"input": rejected},
        "Script failed\nWall time 0.1 seconds\nOutput:\nScript error:\napply_patch verification failed: "
        "Failed to find expected lines in /repo/crates/b.rs:\nq",
        is_error=True,
    )
    s = state(store, sid)
    assert s.generation == 2
    (lin,) = [f for f in s.failures if f["active"]]
    assert (lin["tool"], lin["actions"]) == ("apply_patch", ["crates/b.rs"])
    server = 'const r = await tools.exec_command({"cmd":"cargo run -- serve","tty":true}); if (r.session_id) text(`SESSION_ID=${r.session_id}`);'
    turn(
        store,
        sid,
        "exec",
        {"input": server},
        "Script completed\nWall time 1.0 seconds\nOutput:\nlistening\nSESSION_ID=42",
    )
    stop = 'const r = await tools.write_stdin({"session_id":42,"chars":"\\u0003"}); text(r.output);'
    assert by(state(store, sid).processes, "process_id")["session:42"]["running"]
    turn(store, sid, "exec", {"input": stop}, "Script completed\nWall time 1.0 seconds\nOutput:\n^C")
    assert not by(state(store, sid).processes, "process_id")["session:42"]["running"]


# ------------------------------------------------------------------ SWE-agent, OpenHands, Aider
def test_swe_agent_editor_and_open_file(store):
    sid = session(store, "/testbed", fmt="swe-agent")
    turn(store, sid, "str_replace_editor", {"command": "view", "path": "/testbed/src/m.py"}, "1 import os")
    turn(
        store,
        sid,
        "str_replace_editor",
        {"command": "view", "path": "/testbed"},
        "Here's the files and directories up to 2 levels deep in /testbed",
    )
    turn(
        store,
        sid,
        "str_replace_editor",
        {"command": "str_replace", "path": "/testbed/src/m.py", "old_str": "a", "new_str": "b"},
        "The file /testbed/src/m.py has been edited.",
    )
    turn(
        store,
        sid,
        "str_replace_editor",
        {"command": "str_replace", "path": "/testbed/src/m.py", "old_str": "zz", "new_str": "b"},
        "No replacement was performed, old_str `zz` did not appear verbatim in /testbed/src/m.py.",
    )
    turn(store, sid, "open", {"path": "setup.py"}, "[File: setup.py (9 lines total)]\n(Open file: /testbed/setup.py)")
    turn(store, sid, "edit", {"search": "a", "replace": "b"}, "Text replaced.\n(Open file: /testbed/setup.py)")
    turn(store, sid, "create", {"command": "create notes.txt"}, "[File: /testbed/notes.txt (1 lines total)]")
    s = state(store, sid)
    files = by(s.files, "path")
    assert (files["src/m.py"]["reads"], files["src/m.py"]["writes"]) == (1, 1)
    assert (files["setup.py"]["reads"], files["setup.py"]["writes"]) == (1, 1)
    assert files["notes.txt"]["writes"] == 1 and "." not in files
    assert s.generation == 3
    assert [(f["tool"], f["actions"], f["active"]) for f in s.failures] == [("str_replace_editor", ["src/m.py"], True)]


def test_openhands_still_running_command_is_a_process(store):
    sid = session(store, "/workspace", fmt="openhands")
    turn(
        store,
        sid,
        "execute_bash",
        {"command": "python3 -m http.server 8000"},
        "Serving HTTP on 0.0.0.0 port 8000 ...\n[The command has no new output after 30 seconds. You may wait longer]",
        is_error=True,
        exit_code=-1,
    )
    s = state(store, sid)
    assert s.failures == () and [p["running"] for p in s.processes] == [True]
    turn(store, sid, "execute_bash", {"command": "C-c"}, "^C", exit_code=130)
    turn(store, sid, "execute_bash", {"command": "pytest"}, "2 passed", exit_code=0)
    s = state(store, sid)
    assert [p["running"] for p in s.processes] == [False]
    assert [(o["requirement"], o["status"]) for o in s.evidence] == [("pytest", "passed")]
    turn(
        store,
        sid,
        "execute_bash",
        {"command": "npm test"},
        "[The command has no new output after 30 seconds.]",
        exit_code=-1,
    )
    turn(store, sid, "execute_bash", {"command": "", "is_input": True}, "Tests: 1 failed", exit_code=1)
    s = state(store, sid)
    assert [p["running"] for p in s.processes] == [False, False]
    assert by(s.evidence, "requirement")["npm test"]["status"] == "failed"  # its output came with the poll


def test_aider_synthesized_edits(store):
    sid = session(store, None, fmt="aider")
    turn(store, sid, "edit", {"path": "src/a.py", "search": "x", "replace": "y"}, "Applied edit to src/a.py")
    turn(
        store,
        sid,
        "edit",
        {"path": "src/a.py", "search": "q", "replace": "y"},
        "# 1 SEARCH/REPLACE block failed to match!",
        is_error=True,
    )
    turn(store, sid, "edit", {"path": "./src/b.py", "content": "print(1)\n"}, "Applied edit to ./src/b.py")
    s = state(store, sid)
    assert [(f["path"], f["writes"]) for f in s.files] == [("src/a.py", 1), ("src/b.py", 1)]
    assert s.generation == 2 and [f["actions"] for f in s.failures] == [["src/a.py"]]


def test_missing_result_counts_as_a_possible_mutation_but_no_failure(store):
    sid = session(store)
    turn(
        store,
        sid,
        "Write",
        {"file_path": "/ws/a.txt", "content": "x"},
        "[no result: turn aborted]",
        is_error=True,
        missing=True,
    )
    s = state(store, sid)
    assert s.generation == 1 and s.failures == ()


def test_orphan_error_result_is_a_failure(store):
    sid = session(store)
    store.append(sid, [ToolResult(call_id="gone", content="Error: boom", is_error=True, orphan=True, name="Bash")])
    assert [(f["tool"], f["signature"]) for f in state(store, sid).failures] == [("Bash", "Error: boom")]


# ------------------------------------------------------------------ plugin rules
class _DeployRule(DerivationRule):
    PLUGIN_NAME = "test_deploy"
    tools = frozenset({"deploy_site"})

    def derive(self, call, result, ctx):
        return [Mutation(paths=("public/index.html",), tool=call.name)]


def test_a_plugin_rule_extends_the_cache_it_is_given(store):
    # was test_a_plugin_rule_extends_and_invalidates_cached_reductions (register_rule, a process-wide
    # registry, is gone: rules belong to the KernelCache the host builds from the hook)
    sid = session(store)
    turn(store, sid, "deploy_site", {"target": "prod"}, "ok")
    assert state(store, sid).generation == 0
    cache = KernelCache([_DeployRule(), *builtin_rules()])
    assert cache.rules[0].name == "test_deploy"
    assert canonical_state(store, sid, cache=cache).generation == 1  # this cache derives with the rule
    assert state(store, sid).generation == 0  # the default cache never sees it
    with pytest.raises(ValueError, match="'test_deploy' is used twice"):
        KernelCache([_DeployRule(), _DeployRule()])
    with pytest.raises(RuntimeError, match="latch_register_derivation_rules"):
        register_rule(_DeployRule())
    with pytest.raises(RuntimeError, match="latch_register_derivation_rules"):
        unregister_rule("test_deploy")


def test_rules_see_context_paths():
    ctx = DerivationContext("s", None, "/home/u/app/")
    assert ctx.path("/home/u/app/src/../lib/x.py") == "lib/x.py"
    assert ctx.path("/etc/hosts") == "/etc/hosts"
    assert ctx.path("./a.py") == "a.py"
    rule = next(r for r in builtin_rules() if r.name == "file_tools")
    call = ToolCall("c", "Write", json.dumps({"file_path": "/home/u/app/w.txt", "content": "z"}))
    assert rule.derive(call, ToolResult(call_id="c", content="ok"), ctx) == [
        Mutation(paths=("w.txt",), tool="Write"),
        ToolSuccess("Write", ("w.txt",)),
    ]


def test_a_deriver_takes_subclassed_events_by_their_base_and_a_repeated_call_id_by_its_newest_call():
    from latch.events import AssistantMessage, SystemNote, Usage, UserMessage
    from latch.kernel.derive import SessionDeriver, UserInstruction
    from latch.kernel.events import FileObservation

    class Reply(AssistantMessage):
        pass

    class Said(UserMessage):  # another kind is never the user's instruction (instruction_text)
        KIND = "said_message"

    class Seen(FileObservation):
        pass

    d = SessionDeriver(DerivationContext("s", "claude-code", "/ws"))
    edit = ToolCall("c1", "Edit", json.dumps({"file_path": "/ws/a.py", "old_string": "1", "new_string": "2"}))
    rm = ToolCall("c1", "Bash", json.dumps({"command": "rm b.py"}))
    assert d.feed(Reply(tool_calls=(edit,))) == [] and d.opened == 1
    assert d.feed(AssistantMessage(tool_calls=(rm,))) == [] and d.opened == 0  # the same id, still pending
    assert d.feed(Usage(input_tokens=1, output_tokens=1)) == [] and d.feed(SystemNote(text="x")) == []
    facts = d.feed(ToolResult("c1", "", name="Bash", exit_code=0))
    assert d.closed == 1
    assert facts == [Mutation(paths=("b.py",), tool="Bash"), ToolSuccess("Bash", ("rm b.py",))]
    assert d.feed(Said(text="fix the tests")) == []
    assert d.feed(UserMessage(text="fix the tests")) == [UserInstruction("fix the tests", False)]
    seen = Seen(path="a.py")
    assert d.feed(seen) == [seen]


def test_a_contexts_paths_follow_its_current_folder():
    ctx = DerivationContext("s", "swe-agent", None)
    ctx.cwd = "/repo"
    assert ctx.path("/repo/a.py") == "a.py" and ctx.path(" /repo/src/../b.py ") == "b.py"
    ctx.cwd = "/other"  # SWE-agent changed folder: the same raw path is no longer inside it
    assert ctx.path("/repo/a.py") == "/repo/a.py" and ctx.path("/other/c.py") == "c.py"
    ctx.cwd = "/repo"
    assert ctx.path("/repo/a.py") == "a.py"


class _ShadowBashRule(DerivationRule):
    PLUGIN_NAME = "test_shadow_bash"
    tools = frozenset({"Bash"})

    def derive(self, call, result, ctx):
        return [ToolSuccess("shadow", (call.id,))]


class _ByArgumentRule(DerivationRule):
    PLUGIN_NAME = "test_by_argument"

    def matches(self, call):
        return '"deploy"' in call.arguments

    def derive(self, call, result, ctx):
        return [ToolSuccess("by-argument", (call.id,))]


def test_a_call_takes_the_first_rule_that_matches_it_by_name_or_by_its_own_test():
    from latch.events import AssistantMessage
    from latch.kernel.derive import SessionDeriver

    ls = ToolCall("c1", "Bash", json.dumps({"command": "ls"}))
    deploy = ToolCall("c2", "Bash", json.dumps({"command": "deploy"}))
    for rules, want in (
        ([_ShadowBashRule(), *builtin_rules()], ["shadow", "shadow"]),
        ([*builtin_rules(), _ShadowBashRule()], ["Bash", "Bash"]),
        ([_ByArgumentRule(), *builtin_rules()], ["Bash", "by-argument"]),
        ([*builtin_rules(), _ByArgumentRule()], ["Bash", "Bash"]),
    ):
        d = SessionDeriver(DerivationContext("s", "claude-code", "/ws"), rules)
        assert d.feed(AssistantMessage(tool_calls=(ls, deploy))) == []
        assert [d.feed(ToolResult(c.id, "", exit_code=0))[-1].tool for c in (ls, deploy)] == want, rules
