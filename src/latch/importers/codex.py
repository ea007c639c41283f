"""OpenAI Codex CLI rollout JSONL (``~/.codex/sessions/.../rollout-*.jsonl``), FORMATS.md section 2.

Every line is ``{timestamp, type, payload}``. The conversation is built from
``response_item`` lines only (``event_msg`` repeats user and assistant text):

* the output items of one model response (``reasoning``, assistant ``message``,
  ``function_call``, ``custom_tool_call``, ``local_shell_call``,
  ``web_search_call``) → one :class:`AssistantMessage`; a ``reasoning`` item sets
  ``reasoning_reported`` (a response made only of reasoning passes the flag to the
  next assistant message of the same turn); ``function_call.arguments`` is kept
  as is (already JSON), a custom tool's raw ``input`` becomes ``{"input": ...}``;
* ``event_msg/token_count``: ``info.last_token_usage`` of the request → one
  :class:`Usage` after that message (identical consecutive events are one;
  ``info: null`` is skipped; ``cached_input_tokens`` is a subset of
  ``input_tokens``, so ``input_tokens`` = input - cached);
* ``*_call_output`` → :class:`ToolResult` (``exit_code`` from ``Process exited
  with code N`` or a JSON ``metadata.exit_code``; ``is_error`` for a non-zero exit,
  ``Script failed``, ``aborted by ...``, a failed ``patch_apply_end``); a
  ``web_search_call`` is answered by the next ``event_msg/web_search_end``;
* user messages → :class:`UserMessage` (``<environment_context>``, AGENTS.md and
  other harness injections are ``is_meta``); developer messages →
  ``SystemNote(subtype="developer")``; ``session_meta.base_instructions`` →
  ``SystemNote(subtype="system_prompt")``; ``compacted`` (codex-rs ``RolloutItem::Compacted``,
  ``CompactedItem{message, replacement_history}``) → :class:`CompactionMarker` (``summary`` = ``message``,
  ``trigger`` = the payload's ``trigger`` where a build writes one, else ``None``, unknown: codex-rs
  ``core/src/compact.rs`` writes the same ``CompactedItem{message, replacement_history: None}`` from
  ``run_compact_task`` (``/compact``) and ``run_inline_auto_compact_task`` (automatic), both through
  ``run_compact_task_inner``, and the ``context_compacted`` event after it in both cases, so neither the
  item nor its neighbour tells the two apart);
  ``event_msg/context_compacted`` (``EventMsg::ContextCompacted``, an empty event that legacy-history
  rollouts persist, manual or automatic) joins the ``compacted`` item next to it (only ``token_count`` /
  ``turn_context`` lines between), and without one is a ``CompactionMarker()`` of its own (trigger and
  summary unknown); ``event_msg/error`` → ``SystemNote(subtype="error")``;
* ``turn_aborted``, ``task_complete`` and the next user prompt close the turn:
  calls still unanswered get a ``missing`` result. At the end of the file the
  turn is still running: an unanswered call is pending (no placeholder).

The file grows while Codex works, so the importer marks what a later line may
still change (``ParsedSession.settled``): a response whose items are still being
written (no ``token_count``, call output or turn event after it), and a response
whose ``token_count`` is not written yet (Codex writes it after the call outputs,
and the usage goes right after the message). A ``token_count`` attaches to the
previous response only until the next response starts or the turn ends.
``external_key`` is ``"codex:<session id>"`` (else a hash of the first line).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..events import CompactionMarker, MediaRef, SystemNote, ToolCall, UserMessage
from ._common import (
    AssistantSlot,
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    data_url_bytes,
    dump_json,
    head_jsonl,
    head_key,
    head_text,
    json_type,
    openai_usage,
)
from .base import Importer, ParsedSession, decode_text, iter_jsonl

__all__ = ["CodexImporter", "IMPORTERS"]

FORMAT = "codex"
_OUTPUT_ITEMS = ("reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_META_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<skills_instructions>",
    "<permissions instructions>",
    "<turn_aborted>",
    "<user_shell_command>",
)
_EXIT = re.compile(r"Process exited with code (-?\d+)")
_FAILED = ("Script failed", "aborted by ")
_SESSION_META = re.compile(r'\s*\{\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"type"\s*:\s*"session_meta"\s*,\s*"payload"')


class CodexImporter(Importer):
    """Codex CLI rollout JSONL → Latch events (built from ``response_item`` lines)."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = "OpenAI Codex CLI rollout JSONL (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)"

    def sniff(self, path: Path, head: bytes) -> int:
        """98 when the first line is ``{timestamp, type: session_meta, payload}``; 80 for such envelopes.

        A first line longer than the head (or cut) still scores 90 when it starts like a session_meta.
        """
        lines = head_jsonl(head, limit=4)
        envelopes = [isinstance(o.get("payload"), dict) and "type" in o and "timestamp" in o for o in lines]
        if envelopes and envelopes[0] and lines[0]["type"] == "session_meta":
            return 98
        if envelopes and all(envelopes):
            return 80
        return 90 if not lines and _SESSION_META.match(head_text(head)) else 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """One of the first JSONL lines has an object ``payload`` (Codex's envelope)."""
        return any(isinstance(o.get("payload"), dict) for o in head_jsonl(head, limit=4))

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse the whole file; ``TranscriptError`` names the line and field of the first problem."""
        text = decode_text(path, data)
        rows: list[_Row] = []
        failed_calls: set[str] = set()
        exit_codes: dict[str, int] = {}
        for n, obj in iter_jsonl(path, text, live=self.live):
            loc = Loc(path, f"line {n}")
            kind = loc.str(obj, "type", required=True)
            payload = loc.obj(obj, "payload", required=True)
            ptype = loc.str(payload, "type", "payload", required=kind in ("response_item", "event_msg"))
            rows.append((n, loc, kind, ptype, payload, loc.str(obj, "timestamp")))
            if ptype == "patch_apply_end" and payload.get("success") is False:
                failed_calls.add(loc.str(payload, "call_id", "payload", required=True))
            elif ptype == "exec_command_end" and loc.int(payload, "exit_code", "payload") is not None:
                exit_codes[loc.str(payload, "call_id", "payload", required=True)] = payload["exit_code"]
        return _Rollout(path, failed_calls, exit_codes).run(rows, text)


_Row = tuple[int, Loc, str, str | None, JSONObject, str | None]
"""A rollout line read by the first pass: ``(line number, location, type, payload.type, payload, timestamp)``."""


class _Rollout:
    """One pass over the rollout lines, holding the open response and turn state."""

    def __init__(self, path: Path, failed_calls: set[str], exit_codes: dict[str, int]):
        self.b = SessionBuilder(path, FORMAT)
        self.failed_calls = failed_calls
        self.exit_codes = exit_codes
        self.model: str | None = None
        self.group: list[tuple[int, Loc, JSONObject, str | None]] = []  # output items of the open response
        self.carry_reasoning = False
        self.last_slot: AssistantSlot | None = None  # the last response, while a token_count may still be its usage
        self.last_info: object = None
        self.searches: list[str] = []  # web_search_call ids awaiting their web_search_end
        self.search_ends: list[tuple[str, str | None, str]] = []  # web_search_end seen while the response is open
        self.unattached_usage = 0
        self.after_compacted = False  # the last compaction row was a `compacted` item, nothing since but bookkeeping
        self.pending_compaction: tuple[str, str | None] | None = None  # a context_compacted not yet placed

    def run(self, rows: list[_Row], text: str) -> ParsedSession:
        b = self.b
        session_id = cwd = None
        meta: JSONObject = {}
        for n, loc, kind, ptype, payload, ts in rows:
            ref = f"line:{n}"
            if self.pending_compaction is not None and kind != "compacted" and ptype != "token_count":
                self.flush_compaction()
            if kind not in ("compacted", "turn_context") and ptype not in ("token_count", "context_compacted"):
                self.after_compacted = False
            if kind == "session_meta":
                session_id = loc.str(payload, "id", "payload") or loc.str(payload, "session_id", "payload")
                cwd = loc.str(payload, "cwd", "payload")
                for key in ("cli_version", "originator", "model_provider", "source"):
                    if isinstance(payload.get(key), str):
                        meta[key] = payload[key]
                base = loc.obj(payload, "base_instructions", "payload")
                if base is not None and loc.str(base, "text", "payload.base_instructions"):
                    b.add(SystemNote(text=base["text"], subtype="system_prompt"), ref, ts)
            elif kind == "turn_context":
                self.model = loc.str(payload, "model", "payload") or self.model
            elif kind == "response_item":
                self.response_item(n, loc, ptype, payload, ts)
            elif kind == "event_msg":
                self.event(n, loc, ptype, payload, ts)
            elif kind == "compacted":
                self.close_group()
                self.pending_compaction = None  # the context_compacted just before was this compaction
                self.after_compacted = True
                summary = loc.str(payload, "message", "payload") or ""
                trigger = loc.str(payload, "trigger", "payload")  # absent: manual or automatic, unknown
                b.add(CompactionMarker(trigger=trigger, summary=summary), ref, ts)
        if self.pending_compaction is not None:  # its `compacted` item may still be written: open tail
            b.open_here()
            self.flush_compaction()
        # the end of the file: the turn is still running
        if self.group:
            before = self.last_slot
            self.close_group()
            if self.last_slot is not None and self.last_slot is not before:
                b.hold(self.last_slot, "message")  # more items of this response may follow
        elif self.last_slot is not None and self.last_slot.usage is None:
            b.hold(self.last_slot, "usage")  # its token_count may follow
        if session_id:
            meta["session_id"] = session_id
        if self.unattached_usage:
            meta["unattached_token_counts"] = self.unattached_usage
        key = f"{FORMAT}:{session_id}" if session_id else head_key(FORMAT, text)
        return b.finish(external_key=key, workspace=cwd, meta=meta, growing=True)

    # -- response items
    def response_item(self, n: int, loc: Loc, ptype: str | None, payload: JSONObject, ts: str | None) -> None:
        b = self.b
        ref = f"line:{n}"
        role = loc.str(payload, "role", "payload", required=True) if ptype == "message" else None
        if ptype in _OUTPUT_ITEMS or role == "assistant":
            self.check_output_item(loc, ptype, payload)
            self.group.append((n, loc, payload, ts))
            self.last_slot = None  # a new response started: the next token_count is its usage
            return
        self.close_group()
        if ptype == "message":
            text, media = self.content(loc, payload)
            if role == "user":
                is_meta = text.lstrip().startswith(_META_PREFIXES)
                if not is_meta:
                    self.close_turn("the user sent a new prompt before the tool returned", ts)
                b.add(UserMessage(text=text, media=media, is_meta=is_meta), ref, ts)
            else:
                b.add(SystemNote(text=text, subtype="system_prompt" if role == "system" else "developer"), ref, ts)
        elif ptype in ("function_call_output", "custom_tool_call_output"):
            call_id = loc.str(payload, "call_id", "payload", required=True)
            self.result(loc, call_id, payload, ref, ts)

    def check_output_item(self, loc: Loc, ptype: str | None, payload: JSONObject) -> None:
        if ptype == "message":
            self.content(loc, payload)
        elif ptype == "function_call":
            loc.str(payload, "call_id", "payload", required=True)
            loc.str(payload, "name", "payload", required=True)
            loc.str(payload, "arguments", "payload", required=True)
        elif ptype == "custom_tool_call":
            loc.str(payload, "call_id", "payload", required=True)
            loc.str(payload, "name", "payload", required=True)
            loc.str(payload, "input", "payload", required=True)
        elif ptype == "local_shell_call":
            loc.str(payload, "call_id", "payload", required=True)
            loc.obj(payload, "action", "payload")
        elif ptype == "web_search_call":
            loc.obj(payload, "action", "payload")

    def content(self, loc: Loc, payload: JSONObject) -> tuple[str, tuple[MediaRef, ...]]:
        parts = loc.text_or_list(payload, "content", "payload", required=True)
        if isinstance(parts, str):
            return parts, ()
        return self.parts(loc, parts, "payload.content")

    def parts(self, loc: Loc, parts: JSONArray, label: str) -> tuple[str, tuple[MediaRef, ...]]:
        texts: list[str] = []
        media: list[MediaRef] = []
        for i in range(len(parts)):
            part = loc.item_obj(parts, i, label)
            kind = loc.str(part, "type", f"{label}[{i}]", required=True)
            if kind in ("input_text", "output_text", "text"):
                texts.append(loc.str(part, "text", f"{label}[{i}]", required=True))
            elif kind == "refusal":
                texts.append(loc.str(part, "refusal", f"{label}[{i}]") or "")
            elif kind == "input_image":
                url = loc.str(part, "image_url", f"{label}[{i}]") or ""
                decoded = data_url_bytes(loc, url, f"{label}[{i}].image_url")
                if decoded is None:
                    texts.append(f"[image: {url}]")
                else:
                    media.append(self.b.media(*decoded))
            else:
                texts.append(f"[{kind}]")
        return "\n".join(texts), tuple(media)

    def close_group(self, usage: tuple[int, JSONObject, str | None, Loc] | None = None) -> None:
        """Turn the open response's output items into one AssistantMessage (+ its Usage)."""
        if not self.group:
            return
        group, self.group = self.group, []
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning = self.carry_reasoning
        for n, loc, p, _ts in group:
            ptype = p["type"]
            if ptype == "reasoning":
                reasoning = True
            elif ptype == "message":
                text, _ = self.content(loc, p)
                if text:
                    texts.append(text)
            elif ptype == "function_call":
                calls.append(ToolCall(id=p["call_id"], name=p["name"], arguments=p["arguments"]))
            elif ptype == "custom_tool_call":
                arguments = dump_json(loc, {"input": p["input"]}, "payload.input")
                calls.append(ToolCall(id=p["call_id"], name=p["name"], arguments=arguments))
            elif ptype == "local_shell_call":
                arguments = dump_json(loc, p.get("action") or {}, "payload.action")
                calls.append(ToolCall(id=p["call_id"], name="local_shell", arguments=arguments))
            elif ptype == "web_search_call":
                call_id = f"web_search:line:{n}"
                self.searches.append(call_id)
                arguments = dump_json(loc, p.get("action") or {}, "payload.action")
                calls.append(ToolCall(id=call_id, name="web_search", arguments=arguments))
        if not texts and not calls:
            self.carry_reasoning = reasoning  # reasoning-only response: flag the next message of the turn
            self.unattached_usage += usage is not None
            return
        self.carry_reasoning = False
        n0, _, _, ts0 = group[0]
        slot = self.b.assistant(
            f"line:{n0}", ts0, text="\n".join(texts), calls=calls, reasoning=reasoning, model=self.model
        )
        self.last_slot = slot
        if usage is not None:
            self.attach_usage(slot, *usage)
        ends, self.search_ends = self.search_ends, []
        for ref, ts, query in ends:
            self.search_result(ref, ts, query)

    def search_result(self, ref: str, ts: str | None, query: str) -> None:
        call_id = self.searches.pop(0)
        self.b.result(call_id, f"web search completed: {query}" if query else "web search completed", ref, ts)

    def attach_usage(self, slot: AssistantSlot, n: int, last: JSONObject, ts: str | None, loc: Loc) -> None:
        prefix = "payload.info.last_token_usage"
        for key in ("input_tokens", "cached_input_tokens", "output_tokens"):
            value = last.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise loc.fail(f"field '{prefix}.{key}' must be a non-negative integer, got {json_type(value)}")
        usage = openai_usage(
            loc, last.get("input_tokens"), last.get("cached_input_tokens"), last.get("output_tokens"), model=self.model
        )
        self.b.set_usage(slot, usage, f"line:{n}", ts)

    # -- results
    def result(self, loc: Loc, call_id: str, payload: JSONObject, ref: str, ts: str | None) -> None:
        output = loc.text_or_list(payload, "output", "payload", required=True)
        media: tuple[MediaRef, ...] = ()
        exit_code = self.exit_codes.get(call_id)
        if isinstance(output, list):
            text, media = self.parts(loc, output, "payload.output")
        else:
            text = output
            if text.startswith("{") and payload["type"] == "custom_tool_call_output":
                try:
                    wrapped = json.loads(text)
                except (ValueError, RecursionError):  # not JSON, or nested too deeply
                    wrapped = None
                if isinstance(wrapped, dict) and isinstance(wrapped.get("output"), str):
                    text = wrapped["output"]
                    md = wrapped.get("metadata")
                    if isinstance(md, dict) and isinstance(md.get("exit_code"), int):
                        exit_code = md["exit_code"]
        if exit_code is None:  # in the header ("Chunk ID/Wall time/Process exited"), not in the output itself
            m = _EXIT.search(text.split("\nOutput:", 1)[0])
            exit_code = int(m.group(1)) if m else None
        is_error = exit_code not in (None, 0) or text.startswith(_FAILED) or call_id in self.failed_calls
        self.b.result(call_id, text, ref, ts, is_error=is_error, media=media, exit_code=exit_code)

    # -- events
    def event(self, n: int, loc: Loc, ptype: str | None, payload: JSONObject, ts: str | None) -> None:
        ref = f"line:{n}"
        if ptype == "token_count":
            info = payload.get("info")
            if info is None:
                return
            if not isinstance(info, dict):
                raise loc.fail("field 'payload.info' must be an object or null")
            if info == self.last_info:
                return  # the same report twice in a row
            self.last_info = info
            last = loc.obj(info, "last_token_usage", "payload.info")
            if last is None:
                return
            if self.group:  # the request finished: its usage, then the next response starts
                self.close_group((n, last, ts, loc))
            elif self.last_slot is not None and self.last_slot.usage is None:
                self.attach_usage(self.last_slot, n, last, ts, loc)
            else:
                self.unattached_usage += 1
            self.last_slot = None
        elif ptype == "web_search_end":
            # pairs with a web_search_call item; ends without one come from inside a tool (an exec cell)
            query = loc.str(payload, "query", "payload") or ""
            if self.searches:
                self.search_result(ref, ts, query)
            elif sum(p["type"] == "web_search_call" for _, _, p, _ in self.group) > len(self.search_ends):
                self.search_ends.append((ref, ts, query))
        elif ptype == "turn_aborted":
            self.close_group()
            reason = loc.str(payload, "reason", "payload") or "aborted"
            self.close_turn(f"the turn was aborted ({reason})", ts)
        elif ptype == "task_complete":
            self.close_group()
            self.close_turn("the turn completed without it", ts)
        elif ptype == "context_compacted":
            self.close_group()
            if not self.after_compacted:  # right after its `compacted` item it is the same compaction
                self.pending_compaction = (ref, ts)
        elif ptype in ("error", "stream_error"):
            self.close_group()
            self.b.add(SystemNote(text=loc.str(payload, "message", "payload") or ptype, subtype="error"), ref, ts)

    def flush_compaction(self) -> None:
        """Place the pending ``context_compacted`` as a marker of its own (no ``compacted`` item joined it)."""
        assert self.pending_compaction is not None
        ref, ts = self.pending_compaction
        self.pending_compaction = None
        self.b.add(CompactionMarker(), ref, ts)

    def close_turn(self, reason: str, ts: str | None) -> None:
        self.b.close_open(reason, ts)
        self.last_slot = None
        self.carry_reasoning = False
        self.searches.clear()
        self.search_ends.clear()


IMPORTERS = [CodexImporter]
