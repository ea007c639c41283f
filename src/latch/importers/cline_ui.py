"""A Cline / Roo Code ``ui_messages.json`` read on its own, when no ``api_conversation_history.json`` sits beside
it (FORMATS.md section 6). The rows are cline/cline ``apps/vscode/src/shared/ExtensionMessage.ts``
``ClineMessage`` objects: ``{ts, type: "say"|"ask", say?, ask?, text?, reasoning?, images?, partial?}``; a
``partial`` row is a streaming snapshot, and the last row of a ``ts`` wins.

The conversation is rebuilt from what the UI showed:

* a :class:`SystemNote` (``subtype="history_absent"``) first: the API history was absent, so tool results other
  than command, MCP and browser output are not recorded and each request's exact input is unknown;
* ``say: "task"`` and ``say: "user_feedback"`` → :class:`UserMessage` (``images`` data URLs its media);
* ``say: "api_req_started"`` starts one model request; its ``text`` is ``ClineApiReqInfo`` JSON and its
  ``tokensIn`` / ``tokensOut`` / ``cacheReads`` / ``cacheWrites`` the request's :class:`Usage` (Cline's
  ``tokensIn`` is the uncached input; Roo's the total, the cache counts are taken off it), ``cost`` summed into
  ``meta["reported_cost_usd"]``; a request nothing of the answer shows is left out (a failed or cancelled one);
* the answer: ``say: "text"`` / ``"completion_result"`` and ``ask: "followup"`` / ``"plan_mode_respond"`` /
  ``"completion_result"`` text, ``say: "reasoning"`` (``reasoning_reported``, its text dropped); tool calls:
  ``say``/``ask`` ``"tool"`` (``ClineSayTool`` JSON: the call is named by its ``tool``), ``"command"``
  (``execute_command``), ``"use_mcp_server"`` and ``"browser_action_launch"``/``"browser_action"``;
* results: ``command_output`` for the command, ``mcp_server_response`` and ``browser_action_result`` for theirs;
  a call with no recorded result gets a ``missing`` one when the next request starts;
* ``say: "error"`` and ``ask: "api_req_failed"`` → ``SystemNote(subtype="cline_error")``.

Identity: ``"cline:<taskId>"`` (the folder name), else a hash of the first row, the same as the history's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..events import SystemNote, ToolCall, Usage, UserMessage, canonical_json
from ._common import (
    AssistantSlot,
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    count_field,
    data_url_bytes,
    json_type,
    str_value,
)
from .base import JSONNestingError, ParsedSession, TranscriptError, content_key, json_loads

__all__ = ["epoch_ms_iso", "is_ui_messages", "parse_ui_messages"]

HISTORY_ABSENT = (
    "api_conversation_history.json was absent: the conversation is rebuilt from ui_messages.json, "
    "what the UI showed (tool results other than command, MCP and browser output are not "
    "recorded; each request's exact input is unknown)"
)
_ANSWER_SAY = ("text", "completion_result")
_ANSWER_ASK = ("followup", "plan_mode_respond", "act_mode_respond", "completion_result")
_CALLS = {
    "tool": None,
    "command": "execute_command",
    "use_mcp_server": "use_mcp_server",
    "browser_action_launch": "browser_action",
    "browser_action": "browser_action",
}
_RESULTS = {
    "command_output": "execute_command",
    "mcp_server_response": "use_mcp_server",
    "browser_action_result": "browser_action",
}


def epoch_ms_iso(ms: int | float) -> str:
    """``ms`` (Unix epoch milliseconds) as ISO-8601 UTC with milliseconds (``2026-01-02T10:00:00.000Z``)."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_ui_messages(items: JSONArray) -> bool:
    """Whether ``items`` (a document's first elements) are ``ClineMessage`` rows: ``ts`` and ``type`` say/ask."""
    return bool(items) and all(isinstance(r, dict) and r.get("type") in ("say", "ask") and "ts" in r for r in items)


def parse_ui_messages(path: Path, rows: JSONArray, *, roo: bool, task_id: str | None, fmt: str) -> ParsedSession:
    """The session ``rows`` (the parsed ``ui_messages.json`` at ``path``) show. ``TranscriptError`` names
    ``ui_messages[i]`` and the field of the first problem."""
    return _Ui(path, rows, roo).run(task_id, fmt)


class _Ui:
    def __init__(self, path: Path, rows: JSONArray, roo: bool):
        self.path, self.rows, self.roo = path, rows, roo
        self.b = SessionBuilder(path, "cline")
        self.slot: AssistantSlot | None = None
        self.usage: tuple[Usage, str, str] | None = None  # the started request's, until its answer shows
        self.model_pending = False
        self.open: dict[str, str] = {}  # call name -> id of the newest open call of that name
        self.cost: float | None = None

    def run(self, task_id: str | None, fmt: str) -> ParsedSession:
        last: dict[Any, int] = {}
        for i, row in enumerate(self.rows):
            if not isinstance(row, dict):
                raise TranscriptError(self.path, f"ui_messages[{i}]", f"expected a JSON object, got {json_type(row)}")
            ts = row.get("ts")
            last[ts if isinstance(ts, (int, float, str)) else ("row", i)] = i
        self.b.add(SystemNote(text=HISTORY_ABSENT, subtype="history_absent"), "history_absent", None)
        for i, row in enumerate(self.rows):
            ts = row.get("ts")
            if last[ts if isinstance(ts, (int, float, str)) else ("row", i)] != i:
                continue  # a streaming snapshot the same ts later replaced
            loc = Loc(self.path, f"ui_messages[{i}]")
            ts_ms = row.get("ts")
            if isinstance(ts_ms, bool) or not isinstance(ts_ms, (int, float)):
                raise loc.fail(f"field 'ts' must be a number (epoch milliseconds), got {json_type(ts_ms)}")
            kind = loc.str(row, "type", required=True)
            if kind not in ("say", "ask"):
                raise loc.fail(f"field 'type' must be 'say' or 'ask', got a {len(kind)}-character string")
            sub = loc.str(row, kind, required=True)
            self.row(loc, f"ui_messages[{i}]", epoch_ms_iso(ts_ms), kind, sub, row)
        meta: dict[str, Any] = {
            "harness": "roo-code" if self.roo else "cline",
            "ui_messages": str(self.path),
            "api_history": "absent",
        }
        if task_id:
            meta["task_id"] = task_id
        if self.cost is not None:
            meta["reported_cost_usd"] = round(self.cost, 6)
        if task_id:
            key = f"{fmt}:{task_id}"
        else:
            first = canonical_json(self.rows[0]) if self.rows else ""
            key = f"{fmt}:sha256:{content_key(first.encode('utf-8', 'surrogatepass'))}"
        return self.b.finish(external_key=key, meta=meta, growing=True)

    def row(self, loc: Loc, ref: str, ts: str, kind: str, sub: str, row: JSONObject) -> None:
        text = loc.str(row, "text") or ""
        if kind == "say" and sub in ("task", "user_feedback"):
            self.end_request("the user spoke before the tool result", ts)
            media = tuple(
                self.b.media(*got)
                for j, url in enumerate(loc.list(row, "images") or ())
                if (got := data_url_bytes(loc, url if isinstance(url, str) else "", f"images[{j}]")) is not None
            )
            self.b.add(UserMessage(text=text, media=media), ref, ts)
        elif kind == "say" and sub == "api_req_started":
            self.end_request("ui_messages.json records no result of this tool", ts)
            self.started(loc, ref, ts, text)
        elif (kind == "say" and sub in _ANSWER_SAY) or (kind == "ask" and sub in _ANSWER_ASK):
            if kind == "ask" and sub == "followup" and text.startswith("{"):
                info = _json(loc, text)
                text = str_value(info, "question", text)
            if text:
                self.b.extend(self.answer(ref, ts), text=text)
        elif kind == "say" and sub == "reasoning":
            self.b.extend(self.answer(ref, ts), reasoning=True)
        elif sub in _CALLS:
            name = _CALLS[sub]
            if sub == "tool":
                info = _json(loc, text)
                name = info.get("tool") if isinstance(info.get("tool"), str) else "tool"
                args = canonical_json({k: v for k, v in info.items() if k != "tool"})
            else:
                args = canonical_json({"command": text} if sub == "command" else {"request": text})
            call = ToolCall(id=f"ui:{ref}", name=name or sub, arguments=args)
            self.b.extend(self.answer(ref, ts), calls=[call])
            self.open[call.name] = call.id
        elif sub in _RESULTS:
            call_id = self.open.pop(_RESULTS[sub], None)
            if call_id is not None:
                self.b.result(call_id, text, ref, ts, name=_RESULTS[sub])
        elif (kind == "say" and sub == "error") or (kind == "ask" and sub == "api_req_failed"):
            self.b.add(SystemNote(text=text, subtype="cline_error"), ref, ts)

    def started(self, loc: Loc, ref: str, ts: str, text: str) -> None:
        self.slot, self.usage = None, None
        if not text:
            return
        info = _json(loc, text)
        c = info.get("cost")
        if c is not None:
            if isinstance(c, bool) or not isinstance(c, (int, float)):
                raise loc.fail(f"field 'text.cost' must be a number, got {json_type(c)}")
            self.cost = (self.cost or 0.0) + c
        counts = [count_field(loc, info, k, "text") for k in ("tokensIn", "tokensOut", "cacheReads", "cacheWrites")]
        if all(v is None for v in counts):
            return
        tokens_in = counts[0]
        if self.roo and tokens_in is not None and tokens_in >= (counts[2] or 0) + (counts[3] or 0):
            tokens_in -= (counts[2] or 0) + (counts[3] or 0)
        self.usage = (
            Usage(
                input_tokens=tokens_in,
                output_tokens=counts[1],
                cache_read_tokens=counts[2],
                cache_write_tokens=counts[3],
            ),
            f"{ref}#usage",
            ts,
        )

    def answer(self, ref: str, ts: str) -> AssistantSlot:
        """The started request's answer (begun at the first row that shows it)."""
        if self.slot is None:
            self.slot = self.b.assistant(ref, ts)
            if self.usage is not None:
                self.b.set_usage(self.slot, *self.usage)
        return self.slot

    def end_request(self, reason: str, ts: str) -> None:
        if self.open:
            self.b.close_open(reason, ts)
            self.open.clear()
        self.slot = None


def _json(loc: Loc, text: str) -> JSONObject:
    try:
        value = json_loads(text)
    except (ValueError, JSONNestingError):
        raise loc.fail("field 'text' must hold a JSON object, and is not valid JSON") from None
    if not isinstance(value, dict):
        raise loc.fail(f"field 'text' must hold a JSON object, got {json_type(value)}")
    return value
