"""What a tool call did, in one line each: the call's command or path, the result's first line.

:func:`call_summary` names a call (``Bash(cargo test)``, ``Read(/src/lib.rs)``), :func:`result_line` sums up a
result's text in one line, and :func:`call_results` pairs every call of a session with its result. ``latch show``,
``latch export``, the TUI and the web transcript all use them. Every string returned is raw transcript text: pass
it through :func:`latch.textsafe.safe` before printing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..events import ToolResult

__all__ = ["COMMAND_KEYS", "call_summary", "result_line", "call_results", "excerpt"]

COMMAND_KEYS = (
    "command",
    "cmd",
    "file_path",
    "path",
    "filePath",
    "pattern",
    "query",
    "url",
    "description",
    "input",
    "code",
)
"""The argument keys that name what a call did, in the order :func:`call_summary` looks for them."""

CALL_CHARACTERS = 60
"""The most characters of a call's command or path :func:`call_summary` keeps."""
RESULT_CHARACTERS = 80
"""The most characters of a result's first line :func:`result_line` keeps."""


def excerpt(text: str, width: int = 100) -> str:
    """``text`` with its whitespace collapsed, cut to ``width`` characters with ``…``."""
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def call_summary(call: Any) -> str:
    """``name(command or path)`` of a tool call (a :class:`latch.events.ToolCall`): the first of
    :data:`COMMAND_KEYS` its arguments hold (a list joined by spaces), cut to :data:`CALL_CHARACTERS`
    characters; ``name`` alone when none does."""
    args = call.args()
    if isinstance(args, dict):
        for key in COMMAND_KEYS:
            v = args.get(key)
            if isinstance(v, list):
                v = " ".join(str(x) for x in v)
            if isinstance(v, str) and v.strip():
                return f"{call.name}({excerpt(v, CALL_CHARACTERS)})"
    return str(call.name)


def result_line(text: str, *, is_error: bool = False, missing: bool = False) -> str:
    """A tool result in one line: its first non-blank line (whitespace collapsed, cut to
    :data:`RESULT_CHARACTERS` characters), then ``(+N lines)`` (``(+1 line)``) when more non-blank lines follow; ``(empty)`` for
    no text; ``ERROR:`` before a failed call's line, ``(no result: interrupted)`` for a result the transcript
    lacks (``missing``)."""
    if missing:
        return "(no result: interrupted)"
    lines = [line for line in text.splitlines() if line.strip()]
    one = excerpt(lines[0], RESULT_CHARACTERS) if lines else "(empty)"
    extra = len(lines) - 1
    more = f" (+{extra:,} line{'s' if extra > 1 else ''})" if extra else ""
    return ("ERROR: " if is_error else "") + one + more


def call_results(events: Iterable[Any]) -> dict[str, str]:
    """``{call_id: result_line}`` for every tool result of ``events`` (stored events of one session; the last
    result of a call id wins)."""
    out: dict[str, str] = {}
    for ev in events:
        e = ev.event
        if isinstance(e, ToolResult):
            out[e.call_id] = result_line(e.content, is_error=bool(e.is_error), missing=bool(e.missing))
    return out
