"""Gemini CLI transcripts (FORMATS.md sections 3 and 4), all three layouts in one importer.

**Chat session, single JSON document** (``~/.gemini/tmp/<projectHash>/chats/session-*.json``, rewritten in
place): ``{sessionId, projectHash, startTime, lastUpdated, kind?, summary?, directories?, messages[]}``.

**Chat session, JSONL** (``session-*.jsonl``, appended; packages/core chatRecordingService): a metadata
line ``{sessionId, projectHash, startTime, lastUpdated, kind?}``, then one record a line, read as the
harness reads it: a message record (a string ``id``) is upserted by id (a later line with the same id
replaces the message but keeps its place: Gemini CLI writes a response first without, then with its
tool calls and tokens); ``{"$set": {...}}`` updates the session record (``$set.messages`` is a checkpoint
that replaces every message); ``{"$rewindTo": id}`` drops that message and all after it (all of them
when the id is unknown). A one-line document (metadata with ``messages``) is read like the JSON layout.

Messages of both chat layouts (``source_ref`` ``"msg:<id>"``, the same in both layouts, so a legacy
``.json`` and the ``.jsonl`` Gemini CLI migrates it to on resume share their events; ``ts`` = ``timestamp``):

* ``user`` → :class:`UserMessage` with the text the model received (``content``: a string or Gemini
  parts; text parts joined, ``inlineData`` images stored as artifacts, ``fileData`` as ``[file: URI]``).
  ``displayContent`` is what the user saw: a slash command (``/init``) whose ``content`` is the expanded
  prompt stays a user turn; a continuation with no typed text (``System: Please continue.`` shown as a
  ``functionResponse``) is ``is_meta``.
* ``gemini`` (one model request) → :class:`AssistantMessage` (``content`` text, ``model``; non-empty
  ``thoughts`` set ``reasoning_reported``: Gemini records summarised thinking, never its text), its
  :class:`Usage`, then one :class:`ToolResult` per ``toolCalls[]`` entry (results are embedded:
  ``result[].functionResponse.response.output`` or ``.error``, nested or sibling ``inlineData`` as
  media). ``is_error`` when ``status`` is ``error`` or ``cancelled`` or a shell ``Exit Code: N`` is
  non-zero (``exit_code``). A call with no result yet is pending in the last message, else it gets a
  ``missing`` placeholder.
* ``info`` / ``error`` / ``warning`` → :class:`SystemNote` with that ``subtype``.

Usage (``tokens``, per gemini message; packages/core ``recordMessageTokens`` copies Gemini's
``usageMetadata``): ``input`` = ``promptTokenCount``, which *includes* ``cached``
(``cachedContentTokenCount``); ``tool`` = ``toolUsePromptTokenCount`` is more prompt; ``output`` =
``candidatesTokenCount`` excludes ``thoughts`` (``thoughtsTokenCount``), billed as output; ``total`` is
their sum. So ``Usage(input_tokens=input + tool - cached, cache_read_tokens=cached, output_tokens=output +
thoughts)``; Gemini reports no cache writes (``None``). ``tokens`` null or all zero means no usage was
recorded: no :class:`Usage`.

**Headless ``stream-json``** (stdout of ``gemini -p … --output-format stream-json``; ``source_ref``
``"line:<n>"``): ``init`` gives the session id and model; user ``message`` → :class:`UserMessage`
(a user line without ``timestamp`` before ``init`` was prepended by a capturing harness: dropped when it
repeats the first real prompt, else ``is_meta``); consecutive assistant ``delta`` chunks and the
``tool_use`` events after them are one :class:`AssistantMessage` (a ``tool_result`` or user message ends
the request); ``tool_result`` answers its ``tool_id`` (``status: error`` → ``is_error``); ``error`` →
``SystemNote(subtype=severity)``; ``result.stats`` (session totals, not per request) → ``meta["stats"]``.
Any ``ts`` field (a harness's local time) is ignored.

``external_key`` is ``"gemini-cli:<sessionId>"`` for both chat layouts and
``"gemini-cli:stream:<session_id>"`` for stream-json (Gemini CLI records a chat session for a headless
run too, with other records); a file without an id falls back to a hash of its first line.
``workspace`` is the first of ``directories`` when the session records it (the project root itself is
only hashed). Files grow while Gemini CLI works: the last gemini message (its tool results and tokens
may still be written) and an unfinished stream-json request are the open tail.
Errors raise :class:`TranscriptError` naming the file, ``line N`` or ``messages[i]``, and the field.
"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path
from typing import Any

from ..events import SystemNote, ToolCall, Usage, UserMessage
from ..records import dataclass
from ._common import (
    AssistantSlot,
    JSONLines,
    JSONObject,
    Loc,
    SessionBuilder,
    count_field,
    decode_base64,
    dump_json,
    head_jsonl,
    head_key,
    head_text,
    json_type,
    peek_json,
)
from .base import Importer, JSONNestingError, ParsedSession, decode_text, iter_jsonl, json_loads, load_json

__all__ = ["GeminiCliImporter", "IMPORTERS", "PLUGIN_gemini_cli"]

PLUGIN_gemini_cli = "gemini-cli"
FORMAT = PLUGIN_gemini_cli
_MESSAGE_TYPES = ("user", "gemini", "info", "error", "warning")
_NOTE_TYPES = ("info", "error", "warning")
_STREAM_TYPES = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
_ERROR_STATUSES = ("error", "cancelled")
_EXIT = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)
_META_LINE = re.compile(r'\s*\{\s*"sessionId"\s*:\s*"[^"]*"\s*,\s*"projectHash"\s*:')


# ----------------------------------------------------------------------------- parsed message records
@dataclass
class _Media:
    data: bytes
    media_type: str | None


@dataclass
class _Call:
    id: str
    name: str
    arguments: str
    status: str
    ts: str | None
    has_result: bool
    output: str = ""
    media: list[_Media] = field(default_factory=list)


@dataclass
class _Message:
    """One validated message record (the last one read for its id)."""

    loc: Loc
    id: str
    type: str
    ts: str | None
    text: str
    media: list[_Media]
    display: str | None = None  # displayContent text ("" when it holds no text part)
    model: str | None = None
    thoughts: int = 0
    usage: Usage | None = None
    calls: list[_Call] = field(default_factory=list)


def _parts_text(loc: Loc, value: Any, label: str, media: list[_Media] | None) -> str:
    """Text of a Gemini ``PartListUnion`` (a string, a part, or a list of them); images go to ``media``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    parts = value if isinstance(value, list) else [value]
    if not isinstance(value, (list, dict)):
        raise loc.fail(f"field {label!r} must be a string, an object or an array, got {json_type(value)}")
    texts: list[str] = []
    for i, part in enumerate(parts):
        where = f"{label}[{i}]" if isinstance(value, list) else label
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise loc.fail(f"field {where!r} must be an object or a string, got {json_type(part)}")
        if "text" in part:
            if part.get("thought") is True:
                continue  # a thought part: reasoning, not text
            texts.append(loc.str(part, "text", where) or "")
        elif "inlineData" in part:
            inline = loc.obj(part, "inlineData", where, required=True)
            mime = loc.str(inline, "mimeType", f"{where}.inlineData")
            data = decode_base64(
                loc, loc.str(inline, "data", f"{where}.inlineData", required=True) or "", f"{where}.inlineData.data"
            )
            if media is None:
                texts.append(f"[{mime or 'binary'} data]")
            else:
                media.append(_Media(data, mime))
        elif "fileData" in part:
            fd = loc.obj(part, "fileData", where, required=True)
            texts.append(f"[file: {loc.str(fd, 'fileUri', f'{where}.fileData') or ''}]")
        elif "functionResponse" in part:
            texts.append(_function_response(loc, part, where, media))
        elif "functionCall" in part:
            fc = loc.obj(part, "functionCall", where, required=True)
            texts.append(f"[call {loc.str(fc, 'name', f'{where}.functionCall') or ''}]")
    return "".join(texts)


def _function_response(loc: Loc, part: JSONObject, where: str, media: list[_Media] | None) -> str:
    fr = loc.obj(part, "functionResponse", where, required=True)
    prefix = f"{where}.functionResponse"
    response = loc.obj(fr, "response", prefix) or {}
    out = []
    for key in ("output", "error"):
        value = response.get(key)
        if value is None:
            continue
        out.append(value if isinstance(value, str) else dump_json(loc, value, f"{prefix}.response.{key}"))
    nested = loc.list(fr, "parts", prefix)
    if nested:
        extra = _parts_text(loc, nested, f"{prefix}.parts", media)
        if extra:
            out.append(extra)
    return "\n".join(out)


def _count(loc: Loc, obj: JSONObject, key: str, prefix: str) -> int:
    return count_field(loc, obj, key, prefix) or 0  # an absent Gemini token count is 0


def _usage(loc: Loc, msg: JSONObject, prefix: str, model: str | None) -> Usage | None:
    """The :class:`Usage` of a gemini message's ``tokens`` (module docstring), ``None`` when unrecorded."""
    tokens = loc.obj(msg, "tokens", prefix)
    if tokens is None:
        return None
    p = f"{prefix}.tokens" if prefix else "tokens"
    n = {k: _count(loc, tokens, k, p) for k in ("input", "output", "cached", "thoughts", "tool", "total")}
    if not any(n.values()):
        return None
    prompt = n["input"] + n["tool"]
    if n["cached"] > prompt:
        raise loc.fail(f"cached input tokens ({n['cached']}) exceed input tokens ({prompt})")
    return Usage(
        input_tokens=prompt - n["cached"],
        output_tokens=n["output"] + n["thoughts"],
        cache_read_tokens=n["cached"],
        cache_write_tokens=None,
        model=model,
    )


def _message(loc: Loc, msg: JSONObject, prefix: str = "") -> _Message:
    """Validate one message record (``prefix``: its field path, ``"messages[3]"`` or ``""``)."""

    def lbl(key: str) -> str:
        return f"{prefix}.{key}" if prefix else key

    mid = loc.str(msg, "id", prefix, required=True)
    kind = loc.str(msg, "type", prefix, required=True)
    if kind not in _MESSAGE_TYPES:
        raise loc.fail(f"field {lbl('type')!r} must be one of {', '.join(_MESSAGE_TYPES)}, got {kind!r}")
    ts = loc.str(msg, "timestamp", prefix)
    media: list[_Media] = []
    text = _parts_text(loc, msg.get("content"), lbl("content"), media if kind == "user" else None)
    out = _Message(loc=loc, id=mid, type=kind, ts=ts, text=text, media=media)
    if "displayContent" in msg and msg["displayContent"] is not None:
        out.display = _display_text(loc, msg["displayContent"], lbl("displayContent"))
    if kind != "gemini":
        return out
    out.model = loc.str(msg, "model", prefix)
    thoughts = loc.list(msg, "thoughts", prefix) or []
    for i in range(len(thoughts)):
        loc.item_obj(thoughts, i, lbl("thoughts"))
    out.thoughts = len(thoughts)
    out.usage = _usage(loc, msg, prefix, out.model)
    calls = loc.list(msg, "toolCalls", prefix) or []
    for j in range(len(calls)):
        out.calls.append(_call(loc, loc.item_obj(calls, j, lbl("toolCalls")), f"{lbl('toolCalls')}[{j}]"))
    return out


def _display_text(loc: Loc, value: Any, label: str) -> str:
    """The typed text of ``displayContent`` (text parts only; ``""`` when it holds none)."""
    if isinstance(value, str):
        return value
    parts = value if isinstance(value, list) else [value]
    if not isinstance(value, (list, dict)):
        raise loc.fail(f"field {label!r} must be a string, an object or an array, got {json_type(value)}")
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _call(loc: Loc, tc: JSONObject, prefix: str) -> _Call:
    cid = loc.str(tc, "id", prefix, required=True)
    name = loc.str(tc, "name", prefix, required=True)
    args = tc.get("args")
    if args is not None and not isinstance(args, dict):
        raise loc.fail(f"field '{prefix}.args' must be an object, got {json_type(args)}")
    status = loc.str(tc, "status", prefix) or ""
    result = tc.get("result")
    call = _Call(
        id=cid,
        name=name,
        arguments=dump_json(loc, args or {}, f"{prefix}.args"),
        status=status,
        ts=loc.str(tc, "timestamp", prefix),
        has_result=result is not None,
    )
    if result is not None:
        call.output = _parts_text(loc, result, f"{prefix}.result", call.media)
    elif status in _ERROR_STATUSES or status == "success":
        call.has_result = True  # finished, with nothing recorded
    return call


# ----------------------------------------------------------------------------- importer
class GeminiCliImporter(Importer):
    """Gemini CLI chat sessions (JSON document and JSONL) and headless stream-json → Latch events."""

    PLUGIN_NAME = PLUGIN_gemini_cli
    DESCRIPTION = (
        "Gemini CLI chat session (~/.gemini/tmp/<hash>/chats/session-*.json or .jsonl) and headless "
        "`--output-format stream-json` output"
    )

    def sniff(self, path: Path, head: bytes) -> int:
        """95 for a chat session (a JSON document or a first JSONL line with ``sessionId`` + ``projectHash``,
        or JSONL message records typed user/gemini/info/error/warning) and for stream-json with an ``init``
        event; 80 for stream-json events without it; else 0."""
        top, keys, items = peek_json(head)
        if top == "object" and "sessionId" in keys and "projectHash" in keys:
            return 95
        if (
            top == "object"
            and items
            and all(
                isinstance(m, dict)
                and m.get("type") in _MESSAGE_TYPES
                and isinstance(m.get("id"), str)
                and "role" not in m
                for m in items
            )
        ):
            return 90
        rows = head_jsonl(head, limit=8)
        if not rows:
            return 90 if _META_LINE.match(head_text(head)) else 0
        first = rows[0]
        if isinstance(first.get("sessionId"), str) and isinstance(first.get("projectHash"), str):
            return 95
        if all(isinstance(r.get("id"), str) and r.get("type") in _MESSAGE_TYPES and "timestamp" in r for r in rows):
            return 85
        if all(r.get("type") in _STREAM_TYPES for r in rows):
            if any(r["type"] == "init" and "session_id" in r for r in rows):
                return 95
            if any(r["type"] in ("tool_use", "tool_result") and "tool_id" in r for r in rows) or any(
                r["type"] == "message" and r.get("role") in ("user", "assistant") for r in rows
            ):
                return 80
        return 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """A session's metadata without all of it: a JSON object or first JSONL line with two of ``sessionId``,
        ``projectHash``, ``startTime``, ``lastUpdated``."""
        try:
            top, keys, _ = peek_json(head)
        except Exception:  # noqa: BLE001 - never raises
            return False
        rows = head_jsonl(head, limit=1)
        first = keys if top == "object" and not rows else rows[0] if rows else {}
        return sum(k in first for k in ("sessionId", "projectHash", "startTime", "lastUpdated")) >= 2

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse the whole file (layout from its first line); ``TranscriptError`` names line/record and field."""
        text = decode_text(path, data)
        first = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
        try:
            head = json_loads(first)
        except (ValueError, JSONNestingError):  # not one complete JSON line: a JSON document
            head = None
        if not isinstance(head, dict):
            doc = load_json(path, text)
            if not isinstance(doc, dict):
                raise Loc(path, "top level").fail(
                    f"expected a JSON object (a Gemini CLI session), got {json_type(doc)}"
                )
            return _Chat(path, "json").document(doc, text)
        if head.get("type") in _STREAM_TYPES and "sessionId" not in head and not isinstance(head.get("id"), str):
            return _Stream(path).run(iter_jsonl(path, text, live=self.live), text)
        return _Chat(path, "jsonl").lines(iter_jsonl(path, text, live=self.live), text)


class _Chat:
    """The chat-session layouts: build the message map as Gemini CLI's loader does, then emit events."""

    def __init__(self, path: Path, layout: str):
        self.path = path
        self.layout = layout
        self.meta: dict[str, Any] = {}
        self.messages: dict[str, _Message] = {}  # insertion order = conversation order

    def _meta(self, loc: Loc, record: JSONObject, prefix: str) -> None:
        for key in ("sessionId", "projectHash", "startTime", "lastUpdated", "summary", "kind"):
            if key in record and record[key] is not None:
                self.meta[key] = loc.str(record, key, prefix)
        dirs = loc.list(record, "directories", prefix)
        if dirs is not None:
            for i, d in enumerate(dirs):
                if not isinstance(d, str):
                    raise loc.fail(
                        f"field '{prefix + '.' if prefix else ''}directories[{i}]' must be a string, got {json_type(d)}"
                    )
            self.meta["directories"] = list(dirs)

    def document(self, doc: JSONObject, text: str) -> ParsedSession:
        top = Loc(self.path, "top level")
        self._meta(top, doc, "")
        items = top.list(doc, "messages", required=True)
        for i in range(len(items)):
            loc = Loc(self.path, f"messages[{i}]")
            msg = _message(loc, loc.item_obj(items, i, "messages"))
            self.messages[msg.id] = msg
        return self.finish(text)

    def lines(self, rows: JSONLines, text: str) -> ParsedSession:
        for n, rec in rows:
            loc = Loc(self.path, f"line {n}")
            if "$rewindTo" in rec:
                target = loc.str(rec, "$rewindTo", required=True)
                if target in self.messages:
                    ids = list(self.messages)
                    for mid in ids[ids.index(target) :]:
                        del self.messages[mid]
                else:
                    self.messages.clear()
            elif "id" in rec:
                msg = _message(loc, rec)
                self.messages[msg.id] = msg  # upsert: a known id keeps its place, with the newest content
            elif "$set" in rec:
                update = loc.obj(rec, "$set", required=True)
                items = loc.list(update, "messages", "$set")
                if items is not None:
                    self.messages.clear()
                    for i in range(len(items)):
                        msg = _message(loc, loc.item_obj(items, i, "$set.messages"), f"$set.messages[{i}]")
                        self.messages[msg.id] = msg
                self._meta(loc, update, "$set")
            elif "sessionId" in rec:
                loc.str(rec, "sessionId", required=True)
                self._meta(loc, rec, "")
                items = loc.list(rec, "messages")
                if items is not None:
                    for i in range(len(items)):
                        msg = _message(loc, loc.item_obj(items, i, "messages"), f"messages[{i}]")
                        self.messages[msg.id] = msg
            else:
                raise loc.fail("not a Gemini CLI session record (no 'id', '$set', '$rewindTo' or 'sessionId')")
        return self.finish(text)

    def finish(self, text: str) -> ParsedSession:
        b = SessionBuilder(self.path, FORMAT)
        msgs = list(self.messages.values())
        slot = None
        thoughts = 0
        for k, m in enumerate(msgs):
            ref = f"msg:{m.id}"
            if m.type == "user":
                b.close_open("the next user message came first", m.ts)
                is_meta = m.display is not None and not m.display.strip()
                media = tuple(b.media(x.data, x.media_type) for x in m.media)
                b.add(UserMessage(text=m.text, media=media, is_meta=is_meta), ref, m.ts)
            elif m.type in _NOTE_TYPES:
                b.add(SystemNote(text=m.text, subtype=m.type), ref, m.ts)
            else:
                b.close_open("the next model request came first", m.ts)
                thoughts += m.thoughts
                calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in m.calls]
                slot = b.assistant(ref, m.ts, text=m.text, calls=calls, reasoning=m.thoughts > 0, model=m.model)
                if m.usage is not None:
                    b.set_usage(slot, m.usage, f"{ref}#usage", m.ts)
                for c in m.calls:
                    if not c.has_result:
                        continue  # still running: pending, or closed by the next message
                    exit_code = None
                    if c.name == "run_shell_command":
                        codes = _EXIT.findall(c.output)
                        exit_code = int(codes[-1]) if codes else None
                    media = tuple(b.media(x.data, x.media_type) for x in c.media)
                    b.result(
                        c.id,
                        c.output,
                        f"{ref}/call:{c.id}",
                        c.ts or m.ts,
                        name=c.name,
                        media=media,
                        exit_code=exit_code,
                        is_error=c.status in _ERROR_STATUSES or exit_code not in (None, 0),
                    )
                if k == len(msgs) - 1:
                    b.hold(slot, "message")  # its tool results and tokens may still be written
        sid = self.meta.get("sessionId")
        meta = {"layout": self.layout, "messages": len(msgs), "thoughts": thoughts}
        for key, name in (
            ("sessionId", "session_id"),
            ("projectHash", "project_hash"),
            ("kind", "kind"),
            ("startTime", "start_time"),
            ("lastUpdated", "last_updated"),
            ("summary", "summary"),
        ):
            if key in self.meta:
                meta[name] = self.meta[key]
        dirs = self.meta.get("directories") or []
        key = f"{FORMAT}:{sid}" if sid else head_key(FORMAT, text)
        return b.finish(external_key=key, workspace=dirs[0] if dirs else None, meta=meta, growing=True)


class _Stream:
    """Headless ``stream-json`` events, in order."""

    def __init__(self, path: Path):
        self.path = path
        self.b = SessionBuilder(path, FORMAT)
        self.slot: AssistantSlot | None = None  # the open request (assistant deltas and tool_use events)
        self.slot_text: list[str] = []
        self.model: str | None = None

    def close(self) -> None:
        if self.slot is not None and self.slot_text:
            self.b.extend(self.slot, text="".join(self.slot_text))
        self.slot, self.slot_text = None, []

    def run(self, rows: JSONLines, text: str) -> ParsedSession:
        b = self.b
        session_id = None
        meta: dict[str, Any] = {"layout": "stream-json"}
        harness: list[tuple[str, str, Loc]] = []  # user lines without timestamp before init
        prompts = 0
        seen_init = False
        for n, ev in rows:
            loc = Loc(self.path, f"line {n}")
            kind = loc.str(ev, "type", required=True)
            ref = f"line:{n}"
            ts = loc.str(ev, "timestamp")  # the harness's "ts" is ignored
            if kind == "init":
                seen_init = True
                session_id = loc.str(ev, "session_id", required=True)
                self.model = loc.str(ev, "model") or self.model
            elif kind == "message":
                role = loc.str(ev, "role", required=True)
                content = loc.str(ev, "content") or ""
                if role == "user":
                    self.close()
                    if ts is None and not seen_init:
                        harness.append((content, ref, loc))
                        continue
                    for h_content, h_ref, _ in harness:  # the harness's copy of the first prompt is dropped
                        if h_content != content:
                            b.add(UserMessage(text=h_content, is_meta=True), h_ref, None)
                    harness = []
                    prompts += 1
                    b.close_open("the next user message came first", ts)
                    b.add(UserMessage(text=content), ref, ts)
                elif role == "assistant":
                    if self.slot is None or self.slot.results:
                        self.close()
                        b.close_open("the next model request came first", ts)
                        self.slot = b.assistant(ref, ts, model=self.model)
                    self.slot_text.append(content)
                else:
                    raise loc.fail(f"field 'role' must be 'user' or 'assistant', got {role!r}")
            elif kind == "tool_use":
                params = ev.get("parameters")
                if params is not None and not isinstance(params, dict):
                    raise loc.fail(f"field 'parameters' must be an object, got {json_type(params)}")
                call = ToolCall(
                    id=loc.str(ev, "tool_id", required=True),
                    name=loc.str(ev, "tool_name", required=True),
                    arguments=dump_json(loc, params or {}, "parameters"),
                )
                if self.slot is None or self.slot.results:
                    self.close()
                    b.close_open("the next model request came first", ts)
                    self.slot = b.assistant(ref, ts, model=self.model)
                b.extend(self.slot, calls=[call])
            elif kind == "tool_result":
                tool_id = loc.str(ev, "tool_id", required=True)
                status = loc.str(ev, "status") or ""
                output = loc.str(ev, "output") or ""
                err = loc.obj(ev, "error")
                if err is not None and not output:
                    output = loc.str(err, "message", "error") or ""
                if self.slot is not None and self.slot_text:
                    b.extend(self.slot, text="".join(self.slot_text))
                    self.slot_text = []
                b.result(tool_id, output, ref, ts, is_error=status == "error")
            elif kind == "error":
                self.close()
                severity = loc.str(ev, "severity") or "error"
                b.add(SystemNote(text=loc.str(ev, "message") or "", subtype=severity), ref, ts)
            elif kind == "result":
                self.close()
                stats = loc.obj(ev, "stats")
                if stats is not None:
                    meta["stats"] = stats
                outcome = loc.str(ev, "status")
                if outcome is not None:
                    meta["status"] = outcome
                err = loc.obj(ev, "error")
                if err is not None:
                    b.add(SystemNote(text=loc.str(err, "message", "error") or "", subtype="error"), ref, ts)
            else:
                raise loc.fail(f"field 'type' must be one of {', '.join(sorted(_STREAM_TYPES))}, got {kind!r}")
        for h_content, h_ref, _ in harness:
            b.add(UserMessage(text=h_content, is_meta=True), h_ref, None)
        open_slot = self.slot
        finished = "result" in meta or "stats" in meta
        self.close()
        if open_slot is not None and not finished:
            b.hold(open_slot, "message")  # more deltas or calls of this request may follow
        if session_id:
            meta["session_id"] = session_id
        key = f"{FORMAT}:stream:{session_id}" if session_id else head_key(FORMAT, text)
        return b.finish(external_key=key, meta=meta, growing=True)


IMPORTERS = [GeminiCliImporter]
