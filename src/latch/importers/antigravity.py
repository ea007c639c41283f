"""Google Antigravity step trajectory JSONL (an export of ``~/.gemini/antigravity/brain/<conversationId>/``),
FORMATS.md section 5.

Every line is one step ``{step_index, source, type, status, created_at, content?, thinking?, tool_calls?,
error?, truncated_fields?}``; ``type``/``source``/``status`` may also carry Antigravity's API prefixes
(``CORTEX_STEP_TYPE_``, ``CORTEX_STEP_SOURCE_``, ``CORTEX_STEP_STATUS_``), which are dropped.

* ``USER_INPUT`` → :class:`UserMessage` (the ``<USER_REQUEST>`` wrapper taken off);
* ``PLANNER_RESPONSE`` → one :class:`AssistantMessage` (``content``; ``thinking`` → ``reasoning_reported``);
  its ``tool_calls [{name, args}]`` have **no ids**, so each gets ``step:<step_index>:<k>``, and every
  ``args`` value is itself JSON-encoded text, decoded here (a value that is not JSON stays a string);
  ``invoke_subagent`` calls also get a :class:`SubagentMarker`;
* tool-execution steps (``RUN_COMMAND``, ``VIEW_FILE``, ``CODE_ACTION``, ... any other type) answer the
  open calls **positionally**, in order → :class:`ToolResult` (the ``Created At:``/``Completed At:`` header
  lines taken off; ``status: ERROR`` or ``Encountered error in step execution`` is ``is_error``); a step
  with no open call is an orphan result;
* a sub-agent's report (a ``SYSTEM_MESSAGE`` whose ``content`` starts ``sender=<conversationId>``) is what the
  model saw next, in the place it saw it → ``UserMessage(is_meta=True)`` (a user turn the harness wrote, not an
  instruction); the sender is the ``agent_id`` of the oldest sub-agent marker that has none yet (the child
  session with that ``meta.agent_id`` is that call's, where one is imported);
* another ``SYSTEM_MESSAGE`` → ``SystemNote(subtype="notification")``,
  ``ERROR_MESSAGE`` → ``SystemNote(subtype="error")`` (its ``error`` or ``content``), ``EPHEMERAL_MESSAGE`` →
  ``SystemNote(subtype="info")``, except that an ``ERROR_MESSAGE`` while a call is open (a bad tool call) is
  that call's ``is_error`` result; ``CHECKPOINT`` ("# Resuming from a compaction" and the summary) →
  ``CompactionMarker(trigger="checkpoint")``; ``CONVERSATION_HISTORY`` (an empty marker) is skipped.
* A new ``USER_INPUT`` or planner response closes calls still unanswered (``missing``); at the end of the
  file they are pending. No usage is recorded in the format.

``meta``: ``truncated_steps`` (steps whose ``truncated_fields`` says the exporter cut a field), ``skipped``
(counts by type). ``external_key`` is a hash of the first line (the format has no session id in its lines).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from ..events import CompactionMarker, SubagentMarker, SystemNote, ToolCall, UserMessage
from ._common import AssistantSlot, JSONObject, Loc, SessionBuilder, dump_json, head_jsonl, head_key
from .base import Importer, JSONNestingError, ParsedSession, decode_text, iter_jsonl, json_loads

__all__ = ["AntigravityImporter", "IMPORTERS"]

FORMAT = "antigravity"
_PREFIXES = ("CORTEX_STEP_TYPE_", "CORTEX_STEP_SOURCE_", "CORTEX_STEP_STATUS_")
_STEP_KEYS = ("step_index", "source", "type", "status", "created_at")
_NOT_TOOLS = {
    "USER_INPUT",
    "PLANNER_RESPONSE",
    "SYSTEM_MESSAGE",
    "ERROR_MESSAGE",
    "CONVERSATION_HISTORY",
    "CHECKPOINT",
    "EPHEMERAL_MESSAGE",
}
_NOTES = {"SYSTEM_MESSAGE": "notification", "ERROR_MESSAGE": "error", "EPHEMERAL_MESSAGE": "info"}
_STEP_ERROR = "Encountered error in step execution"
_SENDER = re.compile(r"sender=([^\s]+)\n")


def _bare(value: str) -> str:
    for prefix in _PREFIXES:
        if value.startswith(prefix):
            return value[len(prefix) :]
    return value


def _result_text(content: str) -> str:
    """A tool step's ``content`` without its ``Created At: …`` / ``Completed At: …`` header lines."""
    lines = content.split("\n")
    while lines and lines[0].startswith(("Created At:", "Completed At:")):
        lines.pop(0)
    return "\n".join(lines)


def _decode_args(args: JSONObject) -> JSONObject:
    """``args`` with each JSON-encoded value decoded (a value that is not JSON text is kept)."""
    out = {}
    for key, value in args.items():
        if isinstance(value, str):
            try:
                value = json_loads(value)
            except (ValueError, JSONNestingError):
                pass
        out[key] = value
    return out


class AntigravityImporter(Importer):
    """Antigravity step trajectory JSONL → Latch events (positional call/result linking)."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = "Google Antigravity step trajectory JSONL (an export of ~/.gemini/antigravity/brain/<id>/)"

    def sniff(self, path: Path, head: bytes) -> int:
        """95 when the first line is a step ``{step_index, source, type, status, created_at}`` (the parser
        checks the rest)."""
        lines = head_jsonl(head, limit=1)
        return 95 if lines and all(k in lines[0] for k in _STEP_KEYS) else 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """The first line has three of a step's five keys (``step_index``, ``source``, ``type``, ``status``,
        ``created_at``)."""
        lines = head_jsonl(head, limit=1)
        return bool(lines) and sum(k in lines[0] for k in _STEP_KEYS) >= 3

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse every step; ``TranscriptError`` names the line and field of the first problem."""
        text = decode_text(path, data)
        b = SessionBuilder(path, FORMAT)
        open_calls: list[str] = []
        slot: AssistantSlot | None = None
        truncated = 0
        skipped: dict[str, int] = {}
        # sub-agent markers no report has named yet: (the response, the marker's index in its ``after``, the marker)
        unlinked: list[tuple[AssistantSlot, int, SubagentMarker]] = []
        for n, obj in iter_jsonl(path, text, live=self.live):
            loc = Loc(path, f"line {n}")
            index = loc.int(obj, "step_index", required=True)
            kind = _bare(loc.str(obj, "type", required=True))
            status = _bare(loc.str(obj, "status") or "")
            loc.str(obj, "source")
            ts = loc.str(obj, "created_at")
            content = loc.str(obj, "content") or ""
            cut = loc.list(obj, "truncated_fields")
            truncated += bool(cut)
            ref = f"line:{n}"
            if kind == "USER_INPUT":
                b.close_open("the user sent a new message before the tool returned", ts)
                open_calls, slot = [], None
                inner = content.strip()
                if inner.startswith("<USER_REQUEST>") and inner.endswith("</USER_REQUEST>"):
                    inner = inner[len("<USER_REQUEST>") : -len("</USER_REQUEST>")].strip("\n")
                    content = inner
                b.add(UserMessage(text=content), ref, ts)
            elif kind == "PLANNER_RESPONSE":
                b.close_open("the next response came before the tool returned", ts)
                calls: list[ToolCall] = []
                raw_calls = loc.list(obj, "tool_calls") or []
                for k in range(len(raw_calls)):
                    entry = loc.item_obj(raw_calls, k, "tool_calls")
                    label = f"tool_calls[{k}]"
                    name = loc.str(entry, "name", label, required=True)
                    args = loc.obj(entry, "args", label) or {}
                    calls.append(
                        ToolCall(
                            id=f"step:{index}:{k}",
                            name=name,
                            arguments=dump_json(loc, _decode_args(args), f"{label}.args"),
                        )
                    )
                thinking = loc.str(obj, "thinking")
                slot = b.assistant(ref, ts, text=content, calls=calls, reasoning=bool(thinking))
                open_calls = [c.id for c in calls]
                for call in calls:
                    if call.name == "invoke_subagent":
                        args = json.loads(call.arguments)
                        prompt = next((v for v in args.values() if isinstance(v, str)), "")
                        marker = SubagentMarker(call_id=call.id, description=prompt[:200])
                        b.after_results(slot, marker, f"{ref}#subagent:{call.id}", ts)
                        unlinked.append((slot, len(slot.after) - 1, marker))
            elif kind == "CHECKPOINT":
                b.close_open("the conversation was compacted before the tool returned", ts)
                open_calls, slot = [], None
                b.add(CompactionMarker(trigger="checkpoint", summary=content), ref, ts)
            elif kind == "ERROR_MESSAGE" and open_calls:  # a bad tool call: the call's (failed) result
                b.result(open_calls.pop(0), loc.str(obj, "error") or content, ref, ts, is_error=True)
            elif kind == "SYSTEM_MESSAGE" and (sender := _SENDER.match(content)):
                if unlinked:
                    owner, k, named = unlinked.pop(0)
                    owner.after[k] = replace(owner.after[k], event=replace(named, agent_id=sender.group(1)))
                b.add(UserMessage(text=content, is_meta=True), ref, ts)
            elif kind in _NOTES:
                body = (loc.str(obj, "error") or content) if kind == "ERROR_MESSAGE" else content
                b.add(SystemNote(text=body, subtype=_NOTES[kind]), ref, ts)
            elif kind in _NOT_TOOLS:
                skipped[kind] = skipped.get(kind, 0) + 1
            else:  # a tool-execution step: the next open call's result
                body = _result_text(content)
                is_error = status == "ERROR" or body.lstrip().startswith(_STEP_ERROR)
                call_id = open_calls.pop(0) if open_calls else f"step:{index}"
                b.result(call_id, body, ref, ts, is_error=is_error, name=None if b.is_open(call_id) else kind.lower())
        meta: JSONObject = {}
        if truncated:
            meta["truncated_steps"] = truncated
        if skipped:
            meta["skipped"] = skipped
        return b.finish(external_key=head_key(FORMAT, text), meta=meta, growing=True)


IMPORTERS = [AntigravityImporter]
