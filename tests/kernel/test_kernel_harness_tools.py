"""The tool vocabularies of Gemini CLI, GitHub Copilot CLI and Goose derive like the others'.

Results are built the way each importer writes them: Gemini CLI's ``run_shell_command`` report
(``Command: … Exit Code: N …``, exit code and ``is_error`` set by the importer), Copilot CLI's
``<exited with exit code N>`` trailer (the importer sets ``exit_code``), Goose's developer shell
(an MCP error with ``Command exited with code N`` when it fails, nothing on success; no exit code).
"""

from __future__ import annotations

import pytest
from kernel_support import session, state, turn

from latch.kernel.derive import checklist_items


def _gemini_shell(command: str, output: str, code: int) -> str:
    return (
        f"Command: {command}\nDirectory: (root)\nOutput: {output}\nError: (none)\nExit Code: {code}\n"
        "Signal: 0\nBackground PIDs: (none)\nProcess Group PGID: 4242"
    )


def _files(s) -> list[tuple[str, int, int]]:
    return [(f["path"], f["reads"], f["writes"]) for f in s.files]


def _evidence(s) -> list[tuple[str, str, int | None]]:
    return [(o["command"], o["status"], o["exit_code"]) for o in s.evidence]


def _actions(s) -> list[tuple[str, str, str]]:
    return [(a["text"], a["status"], a["source"]) for a in s.actions]


def test_gemini_cli_tools(store):
    sid = session(store, "/home/u/app", fmt="gemini-cli")
    turn(store, sid, "read_file", {"file_path": "src/app.py"}, "def main():\n    return 1\n")
    turn(
        store,
        sid,
        "replace",
        {
            "file_path": "/home/u/app/src/app.py",
            "old_string": "return 1",
            "new_string": "return 0",
            "allow_multiple": False,
        },
        "Successfully modified file: /home/u/app/src/app.py (1 replacements).",
    )
    turn(
        store,
        sid,
        "write_file",
        {"file_path": "tests/test_app.py", "content": "def test_main(): ..."},
        "Successfully created and wrote to new file: /home/u/app/tests/test_app.py.",
    )
    cmd = "python -m pytest -q"
    turn(
        store,
        sid,
        "run_shell_command",
        {"command": cmd, "description": "Run the tests"},
        _gemini_shell(cmd, "F\n1 failed in 0.02s", 1),
        is_error=True,
        exit_code=1,
    )
    failed = state(store, sid)
    assert _evidence(failed) == [(cmd, "failed", 1)]
    assert [(f["tool"], f["active"]) for f in failed.failures] == [("run_shell_command", True)]
    turn(
        store,
        sid,
        "run_shell_command",
        {"command": cmd, "description": "Run the tests", "directory": "."},
        _gemini_shell(cmd, ".\n1 passed in 0.01s", 0),
        exit_code=0,
    )
    turn(
        store,
        sid,
        "write_todos",
        {
            "todos": [
                {"description": "Fix main", "status": "completed"},
                {"description": "Run the tests", "status": "in_progress"},
                {"description": "Update docs", "status": "pending"},
            ]
        },
        "Successfully updated the todo list.",
    )
    s = state(store, sid)
    assert _files(s) == [("src/app.py", 1, 1), ("tests/test_app.py", 0, 1)]
    assert (s.mutations, s.validation_runs) == (2, 2)
    assert _evidence(s) == [(cmd, "passed", 0)]
    assert [f["active"] for f in s.failures] == [False]  # the passing run closed the failure
    assert _actions(s) == [
        ("Fix main", "done", "write_todos"),
        ("Run the tests", "in_progress", "write_todos"),
        ("Update docs", "pending", "write_todos"),
    ]


def test_gemini_cli_exit_code_read_from_the_report_alone(store):
    """A result without the importer's exit code (another capture) still carries ``Exit Code: N``."""
    sid = session(store, "/ws", fmt="gemini-cli")
    turn(
        store,
        sid,
        "run_shell_command",
        {"command": "go test ./...", "description": "test"},
        _gemini_shell("go test ./...", "--- FAIL: TestX (0.00s)", 1),
    )
    assert _evidence(state(store, sid)) == [("go test ./...", "failed", 1)]


def test_copilot_cli_tools(store):
    sid = session(store, "/work", fmt="copilot-cli")
    turn(store, sid, "view", {"path": "/work/src/orders.py"}, "1.def average_item_price(cart):\n2.    ...")
    turn(
        store,
        sid,
        "edit",
        {"path": "/work/src/orders.py", "old_str": "...", "new_str": "return 0"},
        "File /work/src/orders.py updated with changes.",
    )
    turn(
        store,
        sid,
        "create",
        {"path": "/work/tests/test_orders.py", "file_text": "def test_empty(): ..."},
        "Created file /work/tests/test_orders.py with 20 characters",
    )
    turn(
        store,
        sid,
        "bash",
        {"command": "npm test", "description": "Run tests", "mode": "sync"},
        "FAIL src/orders.test.js\nTests: 1 failed, 3 passed\n<exited with exit code 1>",
        is_error=True,
        exit_code=1,
    )
    assert _evidence(state(store, sid)) == [("npm test", "failed", 1)]
    turn(
        store,
        sid,
        "bash",
        {"command": "cargo test", "description": "Run tests", "mode": "sync"},
        "test result: ok. 4 passed; 0 failed\n<exited with exit code 0>",
    )  # code from the trailer alone
    turn(
        store,
        sid,
        "update_todo",
        {"todos": "- [x] Handle empty carts\n- [ ] Add a test\n  - [-] Run npm test"},
        "TODO list updated",
    )
    s = state(store, sid)
    assert _files(s) == [("src/orders.py", 1, 1), ("tests/test_orders.py", 0, 1)]
    assert (s.mutations, s.validation_runs) == (2, 2)
    assert _evidence(s) == [("npm test", "failed", 1), ("cargo test", "passed", 0)]
    assert _actions(s) == [
        ("Handle empty carts", "done", "update_todo"),
        ("Add a test", "pending", "update_todo"),
        ("Run npm test", "in_progress", "update_todo"),
    ]


def test_goose_tools(store):
    sid = session(store, "/work", fmt="goose")
    turn(
        store,
        sid,
        "developer__text_editor",
        {"command": "view", "path": "/work/src/orders.py"},
        "def average_item_price(cart): ...",
    )
    turn(
        store,
        sid,
        "edit",
        {"path": "/work/src/orders.py", "before": "...", "after": "return 0"},
        "Edited /work/src/orders.py (1 lines -> 1 lines)",
    )
    turn(
        store,
        sid,
        "write",
        {"path": "/work/tests/test_orders.py", "content": "def test_empty(): ..."},
        "Created /work/tests/test_orders.py (1 lines)",
    )
    turn(
        store,
        sid,
        "developer__text_editor",
        {"command": "write", "path": "/work/README.md", "file_text": "x"},
        "Successfully wrote to /work/README.md",
    )
    turn(
        store,
        sid,
        "shell",
        {"command": "pytest -q tests/test_orders.py"},
        "F\n1 failed in 0.03s\n\nCommand exited with code 1",
        is_error=True,
    )
    assert _evidence(state(store, sid)) == [("pytest -q tests/test_orders.py", "failed", 1)]
    # success: Goose adds no exit code and sets no error, which for its shell means exit 0 (passed, code unknown)
    turn(store, sid, "developer__shell", {"command": "go build ./..."}, "(no output)")
    turn(store, sid, "shell", {"command": "pytest -q tests/test_orders.py"}, ".\n1 passed in 0.02s")
    turn(
        store,
        sid,
        "todo__todo_write",
        {"content": "- [x] Fix orders.py\n- [ ] Add a changelog entry"},
        "Updated (46 chars)",
    )
    s = state(store, sid)
    assert _files(s) == [("src/orders.py", 1, 1), ("tests/test_orders.py", 0, 1), ("README.md", 0, 1)]
    assert (s.mutations, s.validation_runs) == (3, 3)
    assert _evidence(s) == [("go build ./...", "passed", None), ("pytest -q tests/test_orders.py", "passed", None)]
    assert [f["active"] for f in s.failures] == [False]
    assert _actions(s) == [
        ("Fix orders.py", "done", "todo__todo_write"),
        ("Add a changelog entry", "pending", "todo__todo_write"),
    ]


def test_failed_file_calls_change_nothing(store):
    sid = session(store, "/work", fmt="copilot-cli")
    turn(store, sid, "view", {"file_path": "src/orders.py"}, '"path": Required', is_error=True)
    turn(
        store,
        sid,
        "replace",
        {"file_path": "a.py", "old_string": "x", "new_string": "y"},
        "Failed to edit, 0 occurrences found for old_string in a.py",
        is_error=True,
    )
    s = state(store, sid)
    assert (_files(s), s.mutations) == ([], 0)
    assert sorted(f["tool"] for f in s.failures) == ["replace", "view"]


@pytest.mark.parametrize(
    "text, items",
    [
        (
            "- [ ] a\n* [x] b\n1. [X] c\n  - [~] d\nnotes\n- not a task",
            [("a", "pending"), ("b", "done"), ("c", "done"), ("d", "in_progress")],
        ),
        ("", []),
    ],
)
def test_checklist_items(text, items):
    assert [(i["content"], i["status"]) for i in checklist_items(text)] == items
