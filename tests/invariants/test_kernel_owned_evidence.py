"""Invariant tier: kernel-owned evidence (spec: "Sessions & continuity", "Port boundary").

Evidence is derived by the kernel from durable tool calls and results, never taken from what a
model or a child says: a pass at workspace generation G is shown stale at G+1 in the provider-
visible state and stops certifying; a child's report, however confident, is a tool result of the
parent, not parent evidence, and the child's own evidence stays in the child session.
"""

from __future__ import annotations

import json
import re

from invariant_helpers import continuity, new_session, request

from latch.events import AssistantMessage, SubagentMarker, ToolCall, ToolResult, UserMessage
from latch.kernel import apply_kernel_tool, canonical_state

_STATE = re.compile(r'<canonical-state revision="\d+">\n(.*?)\n</canonical-state>', re.S)


def _call(store, sid, cid, name, args, result, *, is_error=False, exit_code=None):
    return store.append(
        sid,
        [
            AssistantMessage(tool_calls=(ToolCall(cid, name, json.dumps(args)),)),
            ToolResult(cid, result, is_error=is_error, name=name, exit_code=exit_code),
        ],
    )


def _state_text(view) -> str:
    return [b for m in view.messages if m.kind == "kernel_context" for b in _STATE.findall(m.content)][-1]


def test_a_pass_at_generation_g_is_stale_at_g_plus_1_in_the_view(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    apply_kernel_tool(store, sid, "require_validation", {"requirement": "python -m pytest -q"})
    _call(
        store,
        sid,
        "c1",
        "Edit",
        {"file_path": "/work/shop/src/tax.py", "old_string": "a", "new_string": "b"},
        "The file /work/shop/src/tax.py has been updated.",
    )
    _call(store, sid, "c2", "Bash", {"command": "python -m pytest -q"}, "12 passed in 0.3s", exit_code=0)
    store.append(sid, [UserMessage("are we done?")])
    text = _state_text(engine.materialize(request(sid)))
    assert "- passed: python -m pytest -q (current)" in text
    assert "- certified" in text
    s = canonical_state(store, sid)
    assert s.generation == 1 and s.certification["certified"]

    _call(
        store,
        sid,
        "c3",
        "Edit",
        {"file_path": "/work/shop/src/tax.py", "old_string": "b", "new_string": "c"},
        "The file /work/shop/src/tax.py has been updated.",
    )
    store.append(sid, [UserMessage("and now?")])
    text = _state_text(engine.materialize(request(sid)))
    assert "- passed: python -m pytest -q (STALE: the workspace changed since)" in text
    assert "- certified" not in text and "not certified" in text
    s = canonical_state(store, sid)
    assert s.generation == 2 and not s.certification["certified"]


def test_a_child_report_never_becomes_parent_evidence(store):
    parent = new_session(store, "parent")
    child = store.create_session(parent_id=parent, source="test")
    apply_kernel_tool(store, parent, "require_validation", {"requirement": "python -m pytest -q"})
    # The child really runs the tests: that is evidence of the child session only.
    store.append(child, [UserMessage("Brief: run the test suite and report.")])
    _call(store, child, "k1", "Bash", {"command": "python -m pytest -q"}, "40 passed in 1.2s", exit_code=0)
    assert canonical_state(store, child).evidence[0]["status"] == "passed"
    # The parent receives a compact report claiming success, as the result of its Task call.
    store.append(
        parent,
        [
            AssistantMessage(tool_calls=(ToolCall("t1", "Task", json.dumps({"prompt": "run the tests"})),)),
            SubagentMarker(call_id="t1", agent_id=child, agent_type="general", description="run the tests"),
            ToolResult("t1", "AgentReport: validation python -m pytest -q passed (40 passed); all green.", name="Task"),
        ],
    )
    s = canonical_state(store, parent)
    assert s.evidence == () and s.validation_runs == 0
    assert s.certification["certified"] is False
    assert s.certification["reasons"] == ["V1 python -m pytest -q: never validated"]
