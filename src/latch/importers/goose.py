"""Goose ``sessions.db`` importer (block/goose, ``crates/goose/src/session/``; schema version 15 in the corpus).

A container: one SQLite file holds every Goose session. :meth:`GooseImporter.parse_all` returns one
:class:`ParsedSession` per row of ``sessions`` that has messages (ordered by ``created_at``, then
``id``); :meth:`GooseImporter.parse` returns the one with the most events (ties: the earliest), so a
one-session caller (``parse_file``, ``import_file``) still gets a session. ``latch import`` imports
them all (:func:`latch.host.ingest.import_all`).

Per session: ``external_key`` ``"goose:<sessions.id>"`` (``20260805_1``), ``workspace`` =
``working_dir``, the model from ``model_config_json.model_name`` (``provider_name`` in ``meta``, with
``name``, ``session_type``, ``parent_session_id`` and the session's accumulated token totals; ``title``: the
session's ``name`` (what Goose's session list shows), else its ``description``, absent when both are empty).

Messages (table ``messages``, in ``id`` order, which is insertion order; ``timestamp`` has only
second resolution) map by ``content_json``, a JSON array of Goose ``MessageContent`` items tagged by
``type`` (``conversation/message.rs``); ``source_ref`` ``"message:<id>"``, ``ts`` from
``created_timestamp`` (Unix seconds) as ISO 8601 UTC:

* a ``user`` row: its ``text`` items → one ``UserMessage`` (``image`` items, base64 ``data`` +
  ``mimeType``, stored as artifacts); its ``toolResponse`` items → ``ToolResult`` s linked to the
  ``toolRequest`` of the same ``id``: ``toolResult.status == "error"`` is an error whose content is
  ``error``; ``"success"`` carries an MCP ``CallToolResult`` (``value.content[]`` text joined,
  images as media, ``value.isError`` → ``is_error``).
* an ``assistant`` row → one ``AssistantMessage``: ``text`` items joined, ``toolRequest`` /
  ``frontendToolRequest`` items as calls (``toolCall.value.name`` / ``arguments``; a request whose
  ``toolCall.status`` is ``"error"`` becomes a call named ``invalid_tool_call`` with the error as its
  argument, so its error result still pairs); ``thinking`` / ``redactedThinking`` items set
  ``reasoning_reported`` (Goose streams thinking as one item per token: the text is not kept).
  ``metadata_json.usage`` (camelCase ``Usage``: ``inputTokens`` includes the cache reads and writes,
  as Goose's providers sum them) → ``Usage`` with ``input_tokens = input - cacheRead - cacheWrite``.
  Goose stores a further tool request of one model turn as its own row with a Goose-made ``msg_…`` id
  and no usage (corpus session ``20260805_3``, row 15, after the first request's result): it stays
  its own ``AssistantMessage``, without a ``Usage``.
* ``systemNotification`` → ``SystemNote(subtype="goose_<notificationType>")``;
  ``toolConfirmationRequest`` / ``actionRequired`` → ``SystemNote(subtype="goose_action_required")``.
* ``metadata_json.agentVisible == false`` (history Goose hid from the model after a compaction) and
  ``userVisible == false`` (a summary or an instruction only the model saw) are kept in order;
  a user row the user never saw is ``is_meta``.

A call still unanswered when the next user text arrives gets a missing-result placeholder; one at
the end of a session is pending. ``usage_ledger`` (one row per provider request, same counts as the
messages' usage in the corpus) is not read: the message's own usage is the request's.
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..events import MediaRef, SystemNote, ToolCall, Usage, UserMessage
from ._common import JSONArray, JSONObject, Loc, SessionBuilder, count_field, dump_json, json_type
from ._sqlite import (
    Row,
    SqliteSessionsImporter,
    is_sqlite,
    json_column,
    present_columns,
    row_text,
    schema_mentions,
    table_columns,
)
from .base import ParsedSession, TranscriptError

__all__ = ["GooseImporter", "IMPORTERS"]

_WHAT = "a Goose sessions.db"
_SESSION_COLUMNS = ("id", "working_dir")
_MESSAGE_COLUMNS = ("id", "session_id", "role", "content_json", "created_timestamp")


def _iso(ts: Any) -> str | None:
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def _usage(loc: Loc, meta: JSONObject, model: str | None, request_id: str | None) -> Usage | None:
    usage = loc.obj(meta, "usage", "metadata_json")
    if not usage:
        return None
    p = "metadata_json.usage"
    total_in = count_field(loc, usage, "inputTokens", p)
    read = count_field(loc, usage, "cacheReadInputTokens", p)
    write = count_field(loc, usage, "cacheWriteInputTokens", p)
    uncached = total_in
    if total_in is not None:
        uncached = total_in - (read or 0) - (write or 0)
        if uncached < 0:
            uncached = max(total_in - (read or 0), 0)
    return Usage(
        input_tokens=uncached,
        output_tokens=count_field(loc, usage, "outputTokens", p),
        cache_read_tokens=read,
        cache_write_tokens=write,
        model=model,
        request_id=request_id,
    )


def _image(loc: Loc, b: SessionBuilder, item: JSONObject, label: str) -> MediaRef:
    data = loc.str(item, "data", label, required=True)
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise loc.fail(f"field '{label}.data' is not valid base64") from None
    return b.media(raw, loc.str(item, "mimeType", label))


def _tool_result(loc: Loc, b: SessionBuilder, item: JSONObject, label: str) -> tuple[str, bool, tuple[MediaRef, ...]]:
    """``(content, is_error, media)`` of a ``toolResponse`` item."""
    result = loc.obj(item, "toolResult", label, required=True)
    rp = f"{label}.toolResult"
    status = loc.str(result, "status", rp, required=True)
    if status == "error":
        return loc.str(result, "error", rp) or "", True, ()
    if status != "success":
        raise loc.fail(f"field '{rp}.status' must be 'success' or 'error', got {status!r}")
    value = loc.obj(result, "value", rp, required=True)
    vp = f"{rp}.value"
    texts: list[str] = []
    media: list[MediaRef] = []
    content = loc.list(value, "content", vp) or []
    for j in range(len(content)):
        part = loc.item_obj(content, j, f"{vp}.content")
        kind = loc.str(part, "type", f"{vp}.content[{j}]")
        if kind == "text":
            texts.append(loc.str(part, "text", f"{vp}.content[{j}]") or "")
        elif kind == "image":
            media.append(_image(loc, b, part, f"{vp}.content[{j}]"))
        elif kind == "resource":
            res = loc.obj(part, "resource", f"{vp}.content[{j}]") or {}
            text = res.get("text")
            texts.append(text if isinstance(text, str) else f"[resource: {res.get('uri')}]")
        else:
            texts.append(f"[{kind} content]")
    return "\n".join(texts), loc.bool(value, "isError", vp), tuple(media)


def _tool_call(loc: Loc, item: JSONObject, label: str) -> ToolCall:
    call_id = loc.str(item, "id", label, required=True)
    call = loc.obj(item, "toolCall", label, required=True)
    cp = f"{label}.toolCall"
    status = loc.str(call, "status", cp, required=True)
    if status == "error":  # the model's call could not be parsed: Goose answers it with an error result
        return ToolCall(
            id=call_id,
            name="invalid_tool_call",
            arguments=dump_json(loc, {"error": loc.str(call, "error", cp) or ""}, f"{cp}.error"),
        )
    if status != "success":
        raise loc.fail(f"field '{cp}.status' must be 'success' or 'error', got {status!r}")
    value = loc.obj(call, "value", cp, required=True)
    args = value.get("arguments")
    if args is not None and not isinstance(args, dict):
        raise loc.fail(f"field '{cp}.value.arguments' must be an object, got {json_type(args)}")
    return ToolCall(
        id=call_id,
        name=loc.str(value, "name", f"{cp}.value", required=True),
        arguments=dump_json(loc, args or {}, f"{cp}.value.arguments"),
    )


class GooseImporter(SqliteSessionsImporter):
    """Goose ``sessions.db`` (SQLite): every session of the file (see the module docstring)."""

    PLUGIN_NAME = "goose"
    WHAT = _WHAT
    TABLES = {"sessions": _SESSION_COLUMNS, "messages": _MESSAGE_COLUMNS}
    MESSAGE_TABLE = "messages"
    DESCRIPTION = "Goose sessions.db (SQLite: sessions, messages with content_json; every session of the file)"

    def sniff(self, path: Path, head: bytes) -> int:
        if not is_sqlite(head):
            return 0
        if schema_mentions(head, "messages", "session_id", "content_json") and schema_mentions(
            head, "sessions", "working_dir"
        ):
            return 95
        return 0

    def parse_rows(self, path: Path, db: sqlite3.Connection) -> list[ParsedSession]:
        """One :class:`ParsedSession` per session with messages, in ``created_at`` order.

        Raises :class:`TranscriptError` naming the file, ``table T row id N`` and the reason (a column
        of the wrong SQLite type, invalid JSON in ``content_json``/``metadata_json``, a content item of
        the wrong shape), or the file alone when it is not a readable Goose database.
        """
        opt = present_columns(
            db,
            "sessions",
            (
                "name",
                "description",
                "session_type",
                "created_at",
                "provider_name",
                "model_config_json",
                "parent_session_id",
                "accumulated_input_tokens",
                "accumulated_output_tokens",
            ),
        )
        order = "created_at, id" if "created_at" in opt else "rowid"
        rows = db.execute(f"SELECT id, working_dir, {', '.join(opt) or 'NULL'} FROM sessions ORDER BY {order}")
        sessions: list[tuple[str, str, dict[str, Any]]] = []
        for r in rows.fetchall():
            where = f"table sessions row id {r[0]!r}"
            sid = row_text(where, path, r[0], "id")
            info = dict(zip(opt, r[2:], strict=False))
            info["working_dir"] = row_text(where, path, r[1], "working_dir", required=False)
            sessions.append((sid, where, info))
        mcols = table_columns(db, "messages")
        meta_col = "metadata_json" if "metadata_json" in mcols else "NULL"
        msg_id = "message_id" if "message_id" in mcols else "NULL"
        by_session: dict[str, list[Row]] = {}
        for m in db.execute(
            f"SELECT id, session_id, role, content_json, created_timestamp, {meta_col}, {msg_id} "
            "FROM messages ORDER BY id"
        ).fetchall():
            if not isinstance(m[1], str):
                raise TranscriptError(
                    path,
                    f"table messages row id {m[0]}",
                    f"column 'session_id' must be text, got {'NULL' if m[1] is None else type(m[1]).__name__}",
                )
            by_session.setdefault(m[1], []).append(m)
        known = {s[0] for s in sessions}
        stray = next((ms[0] for key, ms in by_session.items() if key not in known), None)
        if stray is not None:
            raise TranscriptError(
                path, f"table messages row id {stray[0]}", f"session_id {stray[1]!r} names no row of table sessions"
            )
        out: list[ParsedSession] = []
        for sid, where, info in sessions:
            if sid in by_session:
                out.append(self._session(path, sid, where, info, by_session[sid]))
        return out

    def _session(self, path: Path, sid: str, where: str, info: dict[str, Any], rows: list[Row]) -> ParsedSession:
        config = json_column(path, where, info.get("model_config_json"), "model_config_json", dict, required=False)
        model = config.get("model_name") if isinstance(config.get("model_name"), str) else None
        b = SessionBuilder(path, self.PLUGIN_NAME)
        for rid, _, role, content_json, created, meta_json, message_id in rows:
            rwhere = f"table messages row id {rid}"
            loc = Loc(path, rwhere)
            role = row_text(rwhere, path, role, "role")
            items = json_column(path, rwhere, content_json, "content_json", list, required=True)
            meta = json_column(path, rwhere, meta_json, "metadata_json", dict, required=False)
            if isinstance(created, bool) or not isinstance(created, (int, float)):
                raise loc.fail(
                    f"column 'created_timestamp' must be an integer, got "
                    f"{'NULL' if created is None else type(created).__name__}"
                )
            ts, ref = _iso(created), f"message:{rid}"
            if role == "user":
                self._user(b, loc, items, meta, ref, ts)
            elif role == "assistant":
                self._assistant(
                    b, loc, items, meta, ref, ts, model, message_id if isinstance(message_id, str) else None
                )
            else:
                raise loc.fail(f"column 'role' must be 'user' or 'assistant', got {role!r}")
        smeta = {
            k: v
            for k, v in info.items()
            if k not in ("model_config_json", "working_dir", "description") and v is not None
        }
        title = next(
            (t.strip() for t in (info.get("name"), info.get("description")) if isinstance(t, str) and t.strip()), None
        )
        if title is not None:
            smeta["title"] = title
        smeta.update(goose_session_id=sid, model=model, messages=len(rows))
        return b.finish(external_key=f"{self.PLUGIN_NAME}:{sid}", workspace=info.get("working_dir") or None, meta=smeta)

    @staticmethod
    def _notes(b: SessionBuilder, loc: Loc, item: JSONObject, kind: str, label: str, ref: str, ts: str | None) -> bool:
        if kind == "systemNotification":
            ntype = loc.str(item, "notificationType", label) or "notification"
            b.add(SystemNote(text=loc.str(item, "msg", label) or "", subtype=f"goose_{ntype}"), f"{ref}#note", ts)
            return True
        if kind in ("toolConfirmationRequest", "actionRequired"):
            b.add(
                SystemNote(text=json.dumps(item, ensure_ascii=False, sort_keys=True), subtype="goose_action_required"),
                f"{ref}#action",
                ts,
            )
            return True
        return False

    def _user(self, b: SessionBuilder, loc: Loc, items: JSONArray, meta: JSONObject, ref: str, ts: str | None) -> None:
        texts, media = [], []
        for j in range(len(items)):
            label = f"content_json[{j}]"
            item = loc.item_obj(items, j, "content_json")
            kind = loc.str(item, "type", label, required=True)
            if kind == "text":
                texts.append(loc.str(item, "text", label) or "")
            elif kind == "image":
                media.append(_image(loc, b, item, label))
            elif kind == "toolResponse":
                call_id = loc.str(item, "id", label, required=True)
                content, is_error, rmedia = _tool_result(loc, b, item, label)
                b.result(call_id, content, f"{ref}#result:{call_id}", ts, is_error=is_error, media=rmedia)
            elif not self._notes(b, loc, item, kind, label, ref, ts) and kind not in ("thinking", "redactedThinking"):
                texts.append(f"[{kind}]")
        if texts or media:
            b.close_open("the next user message arrived first")
            visible = meta.get("userVisible") is not False
            b.add(UserMessage(text="\n".join(texts), media=tuple(media), is_meta=not visible), ref, ts)

    def _assistant(
        self,
        b: SessionBuilder,
        loc: Loc,
        items: JSONArray,
        meta: JSONObject,
        ref: str,
        ts: str | None,
        model: str | None,
        message_id: str | None,
    ) -> None:
        texts, calls, reasoning = [], [], False
        for j in range(len(items)):
            label = f"content_json[{j}]"
            item = loc.item_obj(items, j, "content_json")
            kind = loc.str(item, "type", label, required=True)
            if kind == "text":
                texts.append(loc.str(item, "text", label) or "")
            elif kind in ("thinking", "redactedThinking"):
                reasoning = True
            elif kind in ("toolRequest", "frontendToolRequest"):
                calls.append(_tool_call(loc, item, label))
            elif kind == "image":
                texts.append("[image]")
            elif not self._notes(b, loc, item, kind, label, ref, ts):
                texts.append(f"[{kind}]")
        if not (texts or calls or reasoning):
            return
        slot = b.assistant(ref, ts, text="\n".join(texts), calls=calls, reasoning=reasoning, model=model)
        usage = _usage(loc, meta, model, message_id)
        if usage is not None:
            b.set_usage(slot, usage, f"{ref}#usage", ts)


IMPORTERS = [GooseImporter]
