"""Derivation reads arguments a transcript wrote, whatever their JSON types: every built-in rule, on every tool
name it answers, derives facts (or none) from arguments of any shape and never raises."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from latch.events import AssistantMessage, ToolCall, ToolResult
from latch.kernel.derive import BUILTIN_RULES, DerivationContext, SessionDeriver

TOOL_NAMES = sorted({name for rule in BUILTIN_RULES for name in getattr(rule, "tools", ())} | {"bash", "exec"})
"""Every tool name a built-in rule names, and two it answers by shape."""

KEYS = (
    "command", "cmd", "path", "file_path", "input", "patch", "todos", "plan", "content", "subject", "description",
    "status", "taskId", "task_id", "id", "shellId", "shell_id", "bash_id", "background", "run_in_background",
    "is_input", "mode", "chars", "old_str", "new_str", "step", "text",
)  # fmt: skip

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=800, deadline=None)
@given(
    name=st.sampled_from(TOOL_NAMES),
    arguments=st.fixed_dictionaries({}, optional=dict.fromkeys(KEYS, JSON)) | JSON,
    content=st.sampled_from(["", "ok", "Error: no such file", "1 failed, 2 passed", "(Open file: a.py)"]),
    is_error=st.booleans(),
    fmt=st.sampled_from([None, "claude-code", "codex", "swe-agent", "latch"]),
)
@example(name="str_replace_editor", arguments={"command": []}, content="ok", is_error=False, fmt=None)
def test_arguments_of_any_json_shape_never_raise(name: str, arguments: Any, content: str, is_error: bool, fmt: Any):
    deriver = SessionDeriver(DerivationContext("s", fmt, "/work"))
    call = ToolCall("c1", name, json.dumps(arguments))
    deriver.feed(AssistantMessage("", (call,)))
    facts = deriver.feed(ToolResult("c1", content, is_error=is_error))
    assert isinstance(facts, list)
