"""OpenCode SQLite storage importer (sst/opencode ``packages/opencode/src/session/``: ``session.sql.ts``
tables, ``message-v2.ts`` schemas; OpenCode 1.18.13 in the corpus, ``~/.local/share/opencode/opencode.db``).

A container: one SQLite file holds every OpenCode session. :meth:`OpenCodeImporter.parse_all` returns
one :class:`ParsedSession` per row of ``session`` that has messages (ordered by ``time_created``, then
``id``); :meth:`OpenCodeImporter.parse` returns the one with the most events (ties: the earliest).

Per session: ``external_key`` ``"opencode:<session.id>"`` (``ses_…``), ``workspace`` = ``directory``,
``parent_key`` ``"opencode:<parent_id>"`` for a sub-agent session (``parent_session_id`` in ``meta``
too, with ``title``, ``slug``, ``version``, ``agent``, the model and the session's token and cost
totals). Messages (table ``message``, ``data`` a JSON ``MessageV2.Info`` without its ids) are read in
``(time_created, id)`` order, their parts (table ``part``, ``data`` a JSON ``MessageV2.Part``) in ``id``
order, as OpenCode itself loads them; ``source_ref`` ``"message:<id>"``, ``ts`` from ``time_created``
(Unix milliseconds) as ISO 8601 UTC.

* a ``user`` message: its ``text`` parts (``ignored`` ones left out; only ``synthetic`` text, which
  OpenCode wrote, makes an ``is_meta`` message) → one ``UserMessage``; ``file`` parts with a ``data:``
  URL → media artifacts (``text/plain`` files and directories are already synthetic text parts), other
  files → ``[file: NAME]``; a ``compaction`` part → ``CompactionMarker(trigger="auto"|"manual")``; a
  ``subtask`` part → ``SystemNote(subtype="opencode_subtask")``.
* an ``assistant`` message → one ``AssistantMessage`` per step (``step-start`` … ``step-finish``: one
  model request each; a message without step parts is one step): ``text`` parts joined, ``reasoning``
  sets ``reasoning_reported``, ``tool`` parts are calls (``callID``, ``tool``, ``state.input``) and hold
  their own result: ``completed`` → ``output`` (``attachments`` with ``data:`` URLs as media),
  ``error`` → ``error`` with ``is_error`` (an interrupted call's partial ``metadata.output`` first),
  ``pending`` / ``running`` → no result yet (a missing-result placeholder when the next user message
  comes first, pending at the end of the session). ``step-finish.tokens`` → ``Usage``: OpenCode's
  ``tokens.input`` is already the uncached input, disjoint from ``cache.read`` / ``cache.write``
  (``Session.getUsage``); the message's own ``tokens`` are used only when it has no ``step-finish``
  and is complete (``time.completed``).
  ``patch`` parts (files a step changed) → ``SystemNote(subtype="opencode_patch")`` listing them;
  ``retry`` parts and the message's ``error`` → ``SystemNote(subtype="api_error")``. ``step-start``
  snapshots, ``snapshot`` and ``agent`` parts carry no conversation and are not imported.
"""

from __future__ import annotations

import sqlite3
from dataclasses import field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from ..events import CompactionMarker, MediaRef, SystemNote, ToolCall, Usage, UserMessage
from ..records import dataclass
from ._common import (
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    data_url_bytes,
    dump_json,
    head_text,
    json_type,
    obj_value,
    peek_json,
    str_value,
)
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
from .base import ParsedSession, TranscriptError, decode_text, load_json

__all__ = ["OpenCodeImporter", "IMPORTERS"]

_WHAT = "an OpenCode database"
_TABLES = {
    "session": ("id", "directory", "slug"),
    "message": ("id", "session_id", "time_created", "data"),
    "part": ("id", "message_id", "session_id", "data"),
}


def _iso_ms(ms: Any) -> str | None:
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return None


def _count(loc: Loc, obj: JSONObject, key: str, prefix: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise loc.fail(f"field '{prefix}.{key}' must be a non-negative integer, got {json_type(value)}")
    return int(value)


def _usage(loc: Loc, tokens: JSONObject, prefix: str, model: str | None, request_id: str) -> Usage:
    cache = loc.obj(tokens, "cache", prefix) or {}
    return Usage(
        input_tokens=_count(loc, tokens, "input", prefix),
        output_tokens=_count(loc, tokens, "output", prefix),
        cache_read_tokens=_count(loc, cache, "read", f"{prefix}.cache"),
        cache_write_tokens=_count(loc, cache, "write", f"{prefix}.cache"),
        model=model,
        request_id=request_id,
    )


def _media(loc: Loc, b: SessionBuilder, files: JSONArray, label: str) -> list[MediaRef]:
    out = []
    for j in range(len(files)):
        f = loc.item_obj(files, j, label)
        url = loc.str(f, "url", f"{label}[{j}]") or ""
        decoded = data_url_bytes(loc, url, f"{label}[{j}].url")
        if decoded is not None:
            out.append(b.media(decoded[0], loc.str(f, "mime", f"{label}[{j}]") or decoded[1]))
    return out


def _schema_tables(path: Path) -> dict[str, set[str]]:
    """Table -> columns of the database at ``path``, read without locks or sidecar files (``immutable``)."""
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except (sqlite3.Error, OSError, ValueError):
        return {}
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: table_columns(db, n) for n in names if n in _TABLES}
    except sqlite3.Error:
        return {}
    finally:
        db.close()


def _json_object(data: bytes) -> bool:
    """``data`` starts a JSON object (an ``opencode export`` document), not a database or other bytes."""
    return head_text(data[:4096]).lstrip(" \t\r\n").startswith("{")


class _Message(NamedTuple):
    """One message as :meth:`OpenCodeImporter._build` reads it, from a database row or an export document."""

    loc: Loc
    id: str
    created: int | float
    """Unix milliseconds."""
    doc: JSONObject
    """The ``MessageV2.Info`` object."""
    parts: list[tuple[Loc, JSONObject]]
    """Each ``MessageV2.Part`` object with its location, in OpenCode's order."""


_Part = tuple[Loc, JSONObject, str]
"""A part with its location and its ``type``."""


@dataclass
class _Step:
    """One model request of an assistant message: its parts and the part that finished it (a ``step-finish``,
    or the message's own ``tokens`` as a ``message-tokens`` part), ``None`` while it runs."""

    parts: list[_Part] = field(default_factory=list)
    finish: _Part | None = None


def _looks_exported(head: bytes) -> bool:
    """``head`` starts an ``opencode export`` document: ``info`` with a ``ses_`` id, or ``{info, parts}`` messages."""
    try:
        top, keys, items = peek_json(head)
    except Exception:  # noqa: BLE001 - a sniffer never raises: the parser names the problem
        return False
    if top != "object" or "messages" not in keys:
        return False
    info = keys.get("info")
    if isinstance(info, dict) and isinstance(info.get("id"), str) and info["id"].startswith("ses_"):
        return True
    return bool(items) and isinstance(items[0], dict) and set(items[0]) >= {"info", "parts"}


class OpenCodeImporter(SqliteSessionsImporter):
    """OpenCode ``opencode.db`` (SQLite): every session of the file (see the module docstring)."""

    PLUGIN_NAME = "opencode"
    WHAT = _WHAT
    TABLES = _TABLES
    MESSAGE_TABLE = "message"
    DESCRIPTION = (
        "OpenCode opencode.db (SQLite: session, message and part tables; every session of the file) "
        "or an `opencode export` JSON document"
    )

    def sniff(self, path: Path, head: bytes) -> int:
        """95 for an OpenCode database (its three tables), 90 for an ``opencode export`` JSON document (an
        object whose ``info`` is a session with a ``ses_`` id, or whose first message is ``{info, parts}``)."""
        if not is_sqlite(head):
            return 90 if _looks_exported(head) else 0
        if all(schema_mentions(head, t, *cols) for t, cols in _TABLES.items()):
            return 95
        # OpenCode's schema grows by migrations: its table definitions may lie past the head's pages
        try:
            if not Path(path).is_file():
                return 0
        except OSError:
            return 0
        tables = _schema_tables(path)
        if all(t in tables and set(cols) <= tables[t] for t, cols in _TABLES.items()):
            return 95
        return 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """A JSON object with ``messages`` whose ``info`` has an ``id``, or whose first message has ``info`` or
        ``parts``: an ``opencode export`` document missing what :meth:`sniff` looks for."""
        if is_sqlite(head):
            return False
        try:
            top, keys, items = peek_json(head)
        except Exception:  # noqa: BLE001 - never raises
            return False
        if top != "object" or "messages" not in keys:
            return False
        info = keys.get("info")
        return (isinstance(info, dict) and "id" in info) or (
            bool(items) and isinstance(items[0], dict) and bool({"info", "parts"} & set(items[0]))
        )

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """The session of an ``opencode export`` document, or the database's session with the most events."""
        if _json_object(data):
            return self._export(path, data)
        return super().parse(path, data)

    def parse_all(self, path: Path, data: bytes) -> list[ParsedSession]:
        """Every session of a database, or the one session of an ``opencode export`` document."""
        if _json_object(data):
            return [self._export(path, data)]
        return super().parse_all(path, data)

    def _export(self, path: Path, data: bytes) -> ParsedSession:
        """An ``opencode export`` document (``cli/cmd/export.ts``: ``{info: Session.Info, messages: [{info:
        MessageV2.Info, parts: MessageV2.Part[]}], todos}``): the same session as its database rows, the same
        ``external_key``. Errors name ``messages[i].info`` or ``messages[i].parts[j]``; field names inside
        read as in the database's ``data`` column."""
        doc = load_json(path, decode_text(path, data))
        top = Loc(path, "top level")
        if not isinstance(doc, dict):
            raise top.fail(f"expected an opencode export object with 'info' and 'messages', got {json_type(doc)}")
        info = top.obj(doc, "info", required=True)
        sid = top.str(info, "id", "info", required=True)
        rows = top.list(doc, "messages", required=True)
        messages: list[_Message] = []
        for i in range(len(rows)):
            m = top.item_obj(rows, i, "messages")
            loc = Loc(path, f"messages[{i}].info")
            minfo = Loc(path, f"messages[{i}]").obj(m, "info", required=True)
            mid = loc.str(minfo, "id", "data", required=True)
            created = (loc.obj(minfo, "time", "data", required=True) or {}).get("created")
            if isinstance(created, bool) or not isinstance(created, (int, float)):
                raise loc.fail(f"field 'time.created' must be a number of milliseconds, got {json_type(created)}")
            parts = Loc(path, f"messages[{i}]").list(m, "parts") or []
            items: list[tuple[Loc, JSONObject]] = []
            for j in range(len(parts)):
                items.append(
                    (Loc(path, f"messages[{i}].parts[{j}]"), Loc(path, f"messages[{i}]").item_obj(parts, j, "parts"))
                )
            messages.append(_Message(loc, mid, created, minfo, items))
        if not messages:
            raise top.fail("field 'messages' is empty: the exported session has no message")
        times = top.obj(info, "time", "info") or {}
        columns = {
            "parent_id": top.str(info, "parentID", "info"),
            "title": top.str(info, "title", "info"),
            "version": top.str(info, "version", "info"),
            "slug": top.str(info, "slug", "info"),
            "directory": top.str(info, "directory", "info"),
            "time_created": times.get("created"),
        }
        return self._build(path, sid, columns, {}, messages)

    def parse_rows(self, path: Path, db: sqlite3.Connection) -> list[ParsedSession]:
        """One :class:`ParsedSession` per session with messages, in ``time_created`` order.

        Raises :class:`TranscriptError` naming the file, ``table T row id ID`` and the reason (a column
        of the wrong SQLite type, invalid JSON in ``data``, a field of the wrong shape, a message or
        part naming no session or message), or the file alone when it is not a readable OpenCode database.
        """
        opt = present_columns(
            db,
            "session",
            (
                "parent_id",
                "title",
                "version",
                "agent",
                "model",
                "cost",
                "tokens_input",
                "tokens_output",
                "tokens_reasoning",
                "tokens_cache_read",
                "tokens_cache_write",
                "time_created",
            ),
        )
        order = "time_created, id" if "time_created" in opt else "rowid"
        sessions: list[tuple[str, str, dict[str, Any]]] = []
        for r in db.execute(
            f"SELECT id, directory, slug, {', '.join(opt) or 'NULL'} FROM session ORDER BY {order}"
        ).fetchall():
            where = f"table session row id {r[0]!r}"
            sid = row_text(where, path, r[0], "id")
            info = dict(zip(opt, r[3:], strict=False))
            info["directory"] = row_text(where, path, r[1], "directory", required=False)
            info["slug"] = row_text(where, path, r[2], "slug", required=False)
            if info.get("parent_id") is not None:
                info["parent_id"] = row_text(where, path, info["parent_id"], "parent_id")
            sessions.append((sid, where, info))
        known = {s[0] for s in sessions}
        messages: dict[str, list[Row]] = {}
        owner: dict[str, str] = {}
        for m in db.execute("SELECT id, session_id, time_created, data FROM message ORDER BY time_created, id"):
            where = f"table message row id {m[0]!r}"
            mid = row_text(where, path, m[0], "id")
            sess = row_text(where, path, m[1], "session_id")
            if sess not in known:
                raise TranscriptError(path, where, f"session_id {sess!r} names no row of table session")
            messages.setdefault(sess, []).append(m)
            owner[mid] = sess
        parts: dict[str, list[Row]] = {}
        for p in db.execute("SELECT id, message_id, data FROM part ORDER BY message_id, id"):
            where = f"table part row id {p[0]!r}"
            row_text(where, path, p[0], "id")
            msg = row_text(where, path, p[1], "message_id")
            if msg not in owner:
                raise TranscriptError(path, where, f"message_id {msg!r} names no row of table message")
            parts.setdefault(msg, []).append(p)
        return [
            self._session(path, sid, where, info, messages[sid], parts)
            for sid, where, info in sessions
            if sid in messages
        ]

    def _session(
        self, path: Path, sid: str, where: str, info: dict[str, Any], rows: list[Row], parts: dict[str, list[Row]]
    ) -> ParsedSession:
        model_doc = json_column(path, where, info.pop("model", None), "model", required=False)
        messages: list[_Message] = []
        for mid, _, created, data in rows:
            mwhere = f"table message row id {mid!r}"
            doc = json_column(path, mwhere, data, "data")
            if isinstance(created, bool) or not isinstance(created, (int, float)):
                raise Loc(path, mwhere).fail(
                    "column 'time_created' must be an integer, got "
                    f"{'NULL' if created is None else type(created).__name__}"
                )
            items: list[tuple[Loc, JSONObject]] = []
            for pid, _, pdata in parts.get(mid, []):
                pwhere = f"table part row id {pid!r}"
                items.append((Loc(path, pwhere), json_column(path, pwhere, pdata, "data")))
            messages.append(_Message(Loc(path, mwhere), mid, created, doc, items))
        return self._build(path, sid, info, model_doc, messages)

    def _build(
        self, path: Path, sid: str, info: dict[str, Any], model_doc: JSONObject, messages: list[_Message]
    ) -> ParsedSession:
        """One session from ``messages``: ``(loc, message id, created (Unix ms), MessageV2.Info object,
        [(part loc, MessageV2.Part object)])`` in OpenCode's order; ``info`` the session's columns."""
        session_model = model_doc.get("id") if isinstance(model_doc.get("id"), str) else None
        b = SessionBuilder(path, self.PLUGIN_NAME)
        models: list[str] = []
        for loc, mid, created, doc, parts in messages:
            items = [(ploc, part, ploc.str(part, "type", "data", required=True)) for ploc, part in parts]
            role = loc.str(doc, "role", "data", required=True)
            ts, ref = _iso_ms(created), f"message:{mid}"
            if role == "user":
                self._user(b, items, ref, ts)
            elif role == "assistant":
                model = loc.str(doc, "modelID", "data") or session_model
                if model and model not in models:
                    models.append(model)
                self._assistant(b, loc, doc, items, mid, ref, ts, model)
            else:
                raise loc.fail(f"field 'data.role' must be 'user' or 'assistant', got {role!r}")
        parent = info.get("parent_id")
        meta: dict[str, Any] = {
            k: v for k, v in info.items() if k not in ("directory", "parent_id", "time_created") and v is not None
        }
        meta.update(
            opencode_session_id=sid, model=session_model or (models[0] if models else None), messages=len(messages)
        )
        if parent:
            meta["parent_session_id"] = parent
        parsed = b.finish(external_key=f"{self.PLUGIN_NAME}:{sid}", workspace=info.get("directory") or None, meta=meta)
        if parent:
            parsed.parent_key = f"{self.PLUGIN_NAME}:{parent}"
        return parsed

    @staticmethod
    def _user(b: SessionBuilder, items: list[_Part], ref: str, ts: str | None) -> None:
        texts: list[str] = []
        media: list[MediaRef] = []
        synthetic_only = True
        later: list[CompactionMarker | SystemNote] = []
        for ploc, part, kind in items:
            if kind == "text":
                if ploc.bool(part, "ignored", "data"):
                    continue
                texts.append(ploc.str(part, "text", "data") or "")
                synthetic_only = synthetic_only and ploc.bool(part, "synthetic", "data")
            elif kind == "file":
                mime = ploc.str(part, "mime", "data") or ""
                got = _media(ploc, b, [part], "data")
                if got:
                    media.extend(got)
                elif mime not in ("text/plain", "application/x-directory"):
                    texts.append(f"[file: {ploc.str(part, 'filename', 'data') or ploc.str(part, 'url', 'data')}]")
                    synthetic_only = False
            elif kind == "compaction":
                later.append(CompactionMarker(trigger="auto" if ploc.bool(part, "auto", "data") else "manual"))
            elif kind == "subtask":
                later.append(
                    SystemNote(
                        text=f"{ploc.str(part, 'agent', 'data') or ''}: {ploc.str(part, 'prompt', 'data') or ''}",
                        subtype="opencode_subtask",
                    )
                )
        if texts or media:
            b.close_open("the next user message arrived first")
            b.add(
                UserMessage(text="\n".join(texts), media=tuple(media), is_meta=bool(texts) and synthetic_only), ref, ts
            )
        for n, ev in enumerate(later):
            b.add(ev, f"{ref}#{ev.KIND}:{n}", ts)

    def _assistant(
        self,
        b: SessionBuilder,
        loc: Loc,
        doc: JSONObject,
        items: list[_Part],
        mid: str,
        ref: str,
        ts: str | None,
        model: str | None,
    ) -> None:
        steps = [_Step()]
        for item in items:
            kind = item[2]
            if kind == "step-start" and (steps[-1].parts or steps[-1].finish is not None):
                steps.append(_Step())
            elif kind == "step-finish":
                steps[-1].finish = item
            elif kind != "step-start":
                if steps[-1].finish is not None and kind in ("text", "reasoning", "tool"):
                    steps.append(_Step())  # content after a step-finish: a new step
                steps[-1].parts.append(item)  # a patch follows its step's step-finish
        if not any(s.finish for s in steps):
            tokens = loc.obj(doc, "tokens", "data")
            done = (loc.obj(doc, "time", "data") or {}).get("completed") is not None
            if tokens and done:  # an unfinished message's tokens are still OpenCode's zeros
                steps[-1].finish = (loc, {"tokens": tokens}, "message-tokens")
        for k, step in enumerate(steps):
            sref = ref if k == 0 else f"{ref}#step:{k}"
            self._step(b, step, sref, ts, model, mid if k == 0 else f"{mid}#{k}")
        error = loc.obj(doc, "error", "data")
        if error:
            name = str_value(error, "name", "error")
            msg = str_value(obj_value(error, "data"), "message", "")
            b.add(SystemNote(text=f"{name}: {msg}" if msg else name, subtype="api_error"), f"{ref}#error", ts)

    @staticmethod
    def _step(b: SessionBuilder, step: _Step, ref: str, ts: str | None, model: str | None, request_id: str) -> None:
        texts: list[str] = []
        calls: list[ToolCall] = []
        # (call id, content, is_error, media, timestamp) of each result, in the step's order
        results: list[tuple[str, str, bool, tuple[MediaRef, ...], str | None]] = []
        notes: list[SystemNote] = []
        reasoning = False
        for ploc, part, kind in step.parts:
            if kind == "text":
                if not ploc.bool(part, "ignored", "data"):
                    texts.append(ploc.str(part, "text", "data") or "")
            elif kind == "reasoning":
                reasoning = True
            elif kind == "tool":
                call_id = ploc.str(part, "callID", "data", required=True)
                state = ploc.obj(part, "state", "data", required=True)
                status = ploc.str(state, "status", "data.state", required=True)
                if status not in ("pending", "running", "completed", "error"):
                    raise ploc.fail(
                        "field 'data.state.status' must be 'pending', 'running', 'completed' or "
                        f"'error', got {status!r}"
                    )
                args = state.get("input")
                if args is not None and not isinstance(args, dict):
                    raise ploc.fail(f"field 'data.state.input' must be an object, got {json_type(args)}")
                calls.append(
                    ToolCall(
                        id=call_id,
                        name=ploc.str(part, "tool", "data", required=True),
                        arguments=dump_json(ploc, args or {}, "data.state.input"),
                    )
                )
                times = ploc.obj(state, "time", "data.state") or {}
                rts = _iso_ms(times.get("end")) or ts
                if status == "completed":
                    media = _media(
                        ploc, b, ploc.list(state, "attachments", "data.state") or [], "data.state.attachments"
                    )
                    results.append((call_id, ploc.str(state, "output", "data.state") or "", False, tuple(media), rts))
                elif status == "error":
                    meta = ploc.obj(state, "metadata", "data.state") or {}
                    error = ploc.str(state, "error", "data.state") or ""
                    partial = meta.get("output") if meta.get("interrupted") is True else None
                    content = f"{partial}\n{error}" if isinstance(partial, str) and partial else error
                    results.append((call_id, content, True, (), rts))
            elif kind == "patch":
                files = ploc.list(part, "files", "data") or []
                names = [f for f in files if isinstance(f, str)]
                notes.append(SystemNote(text="files changed: " + ", ".join(names), subtype="opencode_patch"))
            elif kind == "retry":
                err = ploc.obj(part, "error", "data") or {}
                msg = str_value(obj_value(err, "data"), "message", "")
                notes.append(SystemNote(text=f"retry {part.get('attempt')}: {msg}".rstrip(": "), subtype="api_error"))
        finish = step.finish
        if texts or calls or reasoning:
            slot = b.assistant(ref, ts, text="\n".join(texts), calls=calls, reasoning=reasoning, model=model)
            if finish is not None:
                floc, fpart, fkind = finish
                prefix = "data.tokens"
                tokens = floc.obj(fpart, "tokens", "data", required=True)
                b.set_usage(slot, _usage(floc, tokens, prefix, model, request_id), f"{ref}#usage", ts)
            for call_id, content, is_error, result_media, rts in results:
                b.result(call_id, content, f"{ref}#result:{call_id}", rts, is_error=is_error, media=result_media)
        for n, note in enumerate(notes):
            b.add(note, f"{ref}#note:{n}", ts)


IMPORTERS = [OpenCodeImporter]
