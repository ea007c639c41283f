"""Tool calls a killed process left without a result (spec: "Sessions & continuity": commit before execution).

A process killed mid-tool leaves a call with a :class:`~latch.events.ToolStarted` and no result.
:func:`repair_interrupted` (run when a session resumes) appends, for each call without a result, a marked placeholder
result (``missing=True``, ``is_error=True``) that says the outcome is unknown: never an invented outcome.
"""

from __future__ import annotations

from ..events import AssistantMessage, ToolCall, ToolResult, ToolStarted
from ..store import EventLog

__all__ = ["repair_interrupted"]


def repair_interrupted(store: EventLog, session_id: str) -> list[ToolCall]:
    """Close every tool call of the session that has no result: append a marked placeholder result per call
    (``missing=True``, ``is_error=True``; the text says whether the call had started and that its outcome is
    unknown). Returns the calls repaired, in order (empty when nothing was interrupted)."""
    calls: dict[str, ToolCall] = {}
    started: set[str] = set()
    for s in store.events(session_id, kinds=["assistant_message", "tool_result", ToolStarted.KIND]):
        e = s.event
        if isinstance(e, AssistantMessage):
            for c in e.tool_calls:
                calls[c.id] = c
        elif isinstance(e, ToolStarted):
            started.add(e.call_id)
        elif isinstance(e, ToolResult) and not e.eof_placeholder:
            calls.pop(e.call_id, None)
    if not calls:
        return []
    out = []
    for c in calls.values():
        what = (
            "the agent stopped while this call was running; its outcome is unknown (it may have partly run)"
            if c.id in started
            else "the agent stopped before running this call; it did not run"
        )
        out.append(ToolResult(c.id, f"[interrupted: {what}]", is_error=True, name=c.name, missing=True))
    store.append(session_id, out)
    return list(calls.values())
