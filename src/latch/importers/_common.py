"""Shared machinery for the chat-style importers (Claude Code, Codex, OpenAI chat, Anthropic).

* :class:`Loc`: typed field access whose errors name the file, the line or record
  and the field path (``TranscriptError``), so a wrong field type never escapes as
  ``AttributeError``/``TypeError``.
* :class:`SessionBuilder`: collects events in transcript order and applies the
  importer conventions: one :class:`~latch.events.AssistantMessage` per provider
  response, immediately followed by its :class:`~latch.events.Usage`, then the
  :class:`~latch.events.ToolResult` s answering its calls in call order; orphan
  results and missing-result placeholders are kept and marked; ``stats`` counts;
  the *open tail* a growing file may still change is marked (``settled``).
* :func:`image_size` / :func:`head_text` / :func:`peek_json`: image dimensions
  from PNG/JPEG/GIF/WebP headers, and cheap sniffing over a file's first bytes.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import hashlib
import json
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, overload

from ..events import (
    AssistantMessage,
    Event,
    MediaRef,
    PendingEvent,
    SystemNote,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    canonical_arguments,
    canonical_json,
)
from ..records import dataclass
from .base import JSONNestingError, ParsedSession, TranscriptError, json_decode, json_loads

__all__ = [
    "JSONObject",
    "JSONArray",
    "JSONLines",
    "Loc",
    "str_value",
    "list_value",
    "obj_value",
    "SessionBuilder",
    "AssistantSlot",
    "image_size",
    "sniff_media_type",
    "head_text",
    "peek_json",
    "json_type",
    "openai_usage",
    "anthropic_usage",
    "litellm_usage",
    "data_url_bytes",
    "decode_base64",
    "compute_stats",
    "content_hash_key",
    "head_key",
    "head_jsonl",
    "chat_features",
    "dump_json",
    "TOOLS_SUBTYPE",
    "tool_schemas_note",
]


JSONObject = dict[str, Any]
"""A JSON object as the transcript holds it: its values are whatever the JSON says (checked where read)."""
JSONArray = list[Any]
"""A JSON array as the transcript holds it."""
JSONLines = Iterable[tuple[int, JSONObject]]
"""A JSONL transcript's objects with their line numbers, as :func:`~latch.importers.base.iter_jsonl` yields them."""


@overload
def str_value(obj: JSONObject, key: str) -> str | None: ...
@overload
def str_value(obj: JSONObject, key: str, default: str) -> str: ...
def str_value(obj: JSONObject, key: str, default: str | None = None) -> str | None:
    """``obj[key]`` when it is a string, else ``default`` (absent, null or another JSON type): for optional
    fields whose wrong type is not an error."""
    value = obj.get(key)
    return value if isinstance(value, str) else default


def obj_value(obj: JSONObject, key: str) -> JSONObject:
    """``obj[key]`` when it is an object, else ``{}`` (absent, null or another JSON type)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def list_value(obj: JSONObject, key: str) -> JSONArray:
    """``obj[key]`` when it is an array, else ``[]`` (absent, null or another JSON type)."""
    value = obj.get(key)
    return value if isinstance(value, list) else []


def json_type(value: Any) -> str:
    """The JSON name of a Python value's type (``"number"``, ``"array"``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class Loc:
    """A location in a transcript (``"line 12"``, ``"messages[3]"``) with typed getters.

    Every getter raises :class:`TranscriptError` ``FILE:LOCATION: field 'a.b' must
    be ..., got ...`` when the value has the wrong JSON type. ``prefix`` is the
    field path of ``obj`` (``"message"`` makes ``content`` read ``message.content``).
    """

    __slots__ = ("path", "where")

    def __init__(self, path: str | Path, where: str):
        self.path = path
        self.where = where

    def fail(self, reason: str) -> TranscriptError:
        return TranscriptError(self.path, self.where, reason)

    def _get(
        self,
        obj: dict[builtins.str, Any],
        key: builtins.str,
        prefix: builtins.str,
        kinds: tuple[type, ...],
        expected: builtins.str,
        required: builtins.bool,
    ) -> Any:
        value = obj.get(key)
        if value is None:
            if required:
                raise self.fail(f"missing field {_dotted(prefix, key)!r} ({expected})")
            return None
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.fail(f"field {_dotted(prefix, key)!r} must be {expected}, got {json_type(value)}")
        return value

    # Each getter returns the field's value, ``None`` when it is absent or null; with ``required=True`` a
    # missing field is an error, so the value is never ``None`` (the overloads say so).
    @overload
    def str(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", *, required: Literal[True]
    ) -> builtins.str: ...
    @overload
    def str(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> builtins.str | None: ...
    def str(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> builtins.str | None:
        value: builtins.str | None = self._get(obj, key, prefix, (str,), "a string", required)
        return value

    @overload
    def int(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", *, required: Literal[True]
    ) -> builtins.int: ...
    @overload
    def int(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> builtins.int | None: ...
    def int(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> builtins.int | None:
        value: builtins.int | None = self._get(obj, key, prefix, (int,), "an integer", required)
        return value

    def bool(self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "") -> builtins.bool:
        return builtins.bool(self._get(obj, key, prefix, (bool,), "a boolean", False))

    @overload
    def obj(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", *, required: Literal[True]
    ) -> JSONObject: ...
    @overload
    def obj(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> JSONObject | None: ...
    def obj(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> JSONObject | None:
        value: JSONObject | None = self._get(obj, key, prefix, (dict,), "an object", required)
        return value

    @overload
    def list(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", *, required: Literal[True]
    ) -> JSONArray: ...
    @overload
    def list(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> JSONArray | None: ...
    def list(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> JSONArray | None:
        value: JSONArray | None = self._get(obj, key, prefix, (list,), "an array", required)
        return value

    @overload
    def text_or_list(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", *, required: Literal[True]
    ) -> builtins.str | JSONArray: ...
    @overload
    def text_or_list(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> builtins.str | JSONArray | None: ...
    def text_or_list(
        self, obj: JSONObject, key: builtins.str, prefix: builtins.str = "", required: builtins.bool = False
    ) -> builtins.str | JSONArray | None:
        value: builtins.str | JSONArray | None = self._get(
            obj, key, prefix, (str, list), "a string or an array", required
        )
        return value

    def item_obj(self, items: JSONArray, i: builtins.int, prefix: builtins.str) -> JSONObject:
        value = items[i]
        if not isinstance(value, dict):
            raise self.fail(f"field '{prefix}[{i}]' must be an object, got {json_type(value)}")
        return value


def dump_json(loc: Loc, value: Any, label: str) -> str:
    """``value`` as a tool call's ``arguments`` text (:func:`latch.events.canonical_arguments`, whose docstring
    says when an importer encodes and when it keeps the transcript's string); NaN/Infinity are a
    ``TranscriptError``."""
    try:
        return canonical_arguments(value)
    except ValueError:
        raise loc.fail(f"field {label!r} holds NaN or Infinity, which JSON cannot carry") from None


TOOLS_SUBTYPE = "tools"
"""``SystemNote.subtype`` of the harness's tool schemas: ``text`` is their canonical JSON array."""


def tool_schemas_note(loc: Loc, value: Any, label: str) -> SystemNote | None:
    """The harness's tool schemas ``value`` (a transcript's ``tools``: a JSON array of objects, kept as the
    format records them, OpenAI ``{"type": "function", ...}`` or Anthropic ``{"name", "input_schema"}``) as a
    ``SystemNote(subtype="tools")`` whose text is their canonical JSON (:func:`latch.events.canonical_json`),
    so a re-import stores the same bytes; ``None`` when ``value`` is ``None`` or empty. Raises
    :class:`TranscriptError` naming ``label`` when it is not an array of objects or holds NaN/Infinity.
    An importer appends the note after the conversation (a store written before tools were captured then
    takes it as one new event on re-import instead of refusing the file)."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise loc.fail(f"field {label!r} must be an array of tool schemas, got {json_type(value)}")
    for i in range(len(value)):
        loc.item_obj(value, i, label)
    try:
        text = canonical_json(value)
    except ValueError:
        raise loc.fail(f"field {label!r} holds NaN or Infinity, which JSON cannot carry") from None
    return SystemNote(text=text, subtype=TOOLS_SUBTYPE)


def _dotted(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


# ----------------------------------------------------------------------------- usage
def count_field(loc: Loc, obj: JSONObject, key: str, prefix: str) -> int | None:
    """``obj[key]`` as a token/row count: ``None`` when absent, else a non-negative int; anything else is a
    ``TranscriptError`` at ``loc`` naming the field (``'prefix.key' must be a non-negative integer``)."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise loc.fail(f"field {_dotted(prefix, key)!r} must be a non-negative integer, got {json_type(value)}")
    return value


def anthropic_usage(
    loc: Loc, usage: JSONObject, prefix: str, *, model: str | None = None, request_id: str | None = None
) -> Usage:
    """Anthropic/Claude Code ``usage``: ``input_tokens`` is already uncached, cache fields disjoint."""
    return Usage(
        input_tokens=count_field(loc, usage, "input_tokens", prefix),
        output_tokens=count_field(loc, usage, "output_tokens", prefix),
        cache_read_tokens=count_field(loc, usage, "cache_read_input_tokens", prefix),
        cache_write_tokens=count_field(loc, usage, "cache_creation_input_tokens", prefix),
        model=model,
        request_id=request_id,
    )


def openai_usage(
    loc: Loc,
    prompt: int | None,
    cached: int | None,
    output: int | None,
    *,
    model: str | None = None,
    request_id: str | None = None,
) -> Usage:
    """OpenAI/Codex usage: ``cached`` is a subset of ``prompt``, so uncached input = prompt - cached.

    OpenAI reports no cache writes: ``cache_write_tokens`` stays ``None``.
    """
    if prompt is not None and cached is not None and cached > prompt:
        raise loc.fail(f"cached input tokens ({cached}) exceed input tokens ({prompt})")
    uncached = prompt - cached if prompt is not None and cached is not None else prompt
    return Usage(
        input_tokens=uncached,
        output_tokens=output,
        cache_read_tokens=cached,
        cache_write_tokens=None,
        model=model,
        request_id=request_id,
    )


def litellm_usage(
    loc: Loc, usage: JSONObject, prefix: str, *, model: str | None = None, request_id: str | None = None
) -> Usage:
    """LiteLLM's normalized chat-completion ``usage`` (OpenHands' ``model_response``, mini-SWE-agent's
    ``extra.response``): ``prompt_tokens`` includes the cache reads (``prompt_tokens_details.cached_tokens``,
    else ``cache_read_input_tokens``) and, for Anthropic models, the cache writes
    (``cache_creation_input_tokens``), so ``input_tokens = prompt - cached - cache_write``; when that would be
    negative (a provider that excludes writes) only ``cached`` is subtracted. Counts in tokens; a field of the
    wrong type, or cache reads above the prompt, is a ``TranscriptError`` at ``loc`` naming ``prefix``."""
    prompt = count_field(loc, usage, "prompt_tokens", prefix)
    details = loc.obj(usage, "prompt_tokens_details", prefix) or {}
    cached = count_field(loc, details, "cached_tokens", f"{prefix}.prompt_tokens_details")
    if cached is None:
        cached = count_field(loc, usage, "cache_read_input_tokens", prefix)
    written = count_field(loc, usage, "cache_creation_input_tokens", prefix)
    uncached = prompt
    if prompt is not None:
        uncached = prompt - (cached or 0) - (written or 0)
        if uncached < 0:
            uncached = prompt - (cached or 0)
        if uncached < 0:
            raise loc.fail(f"cached prompt tokens ({cached}) exceed prompt tokens ({prompt})")
    return Usage(
        input_tokens=uncached,
        output_tokens=count_field(loc, usage, "completion_tokens", prefix),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        model=model,
        request_id=request_id,
    )


# ----------------------------------------------------------------------------- media
def sniff_media_type(data: bytes) -> str | None:
    """The image media type from magic bytes (PNG, JPEG, GIF, WebP), else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_size(data: bytes) -> tuple[int | None, int | None]:
    """Pixel ``(width, height)`` read from PNG/JPEG/GIF/WebP headers; ``(None, None)`` when unknown."""
    try:
        kind = sniff_media_type(data)
        if kind == "image/png" and data[12:16] == b"IHDR":
            return struct.unpack(">II", data[16:24])
        if kind == "image/gif":
            return struct.unpack("<HH", data[6:10])
        if kind == "image/webp":
            chunk = data[12:16]
            if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
                w, h = struct.unpack("<HH", data[26:30])
                return w & 0x3FFF, h & 0x3FFF
            if chunk == b"VP8L" and data[20] == 0x2F:
                bits = int.from_bytes(data[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8X":
                return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
        if kind == "image/jpeg":
            i = 2
            while i + 9 < len(data):
                if data[i] != 0xFF:
                    return None, None
                marker = data[i + 1]
                if marker == 0xFF:
                    i += 1
                    continue
                if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                    i += 2
                    continue
                (length,) = struct.unpack(">H", data[i + 2 : i + 4])
                if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                    return w, h
                i += 2 + length
    except (struct.error, IndexError):
        pass
    return None, None


_DATA_URL = re.compile(r"data:([\w.+/-]+);base64,", re.ASCII)


def data_url_bytes(loc: Loc, url: str, label: str) -> tuple[bytes, str] | None:
    """Decode a ``data:<type>;base64,`` URL; ``None`` for other URLs (remote images)."""
    m = _DATA_URL.match(url)
    if not m:
        return None
    return decode_base64(loc, url[m.end() :], label), m.group(1)


def decode_base64(loc: Loc, text: str, label: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise loc.fail(f"field {label!r} is not valid base64") from None


# ----------------------------------------------------------------------------- sniffing
def head_text(head: bytes) -> str:
    """Best-effort text of a file's first bytes (BOM and UTF-16 aware, never raises)."""
    if head.startswith(b"\xef\xbb\xbf"):
        return head[3:].decode("utf-8", "ignore")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return head[: len(head) // 2 * 2].decode("utf-16", "ignore")
    return head.decode("utf-8", "ignore")


def head_jsonl(head: bytes, limit: int = 8) -> list[JSONObject]:
    """The first complete JSONL objects in ``head`` (at most ``limit``; blank lines skipped)."""
    out: list[JSONObject] = []
    lines = head_text(head).split("\n")
    for line in lines[:-1] if len(lines) > 1 else lines:
        s = line.strip()
        if not s:
            continue
        try:
            obj = json_loads(s)
        except (ValueError, JSONNestingError):  # the parser names the line
            break
        if not isinstance(obj, dict):
            break
        out.append(obj)
        if len(out) >= limit:
            break
    return out


_WS = re.compile(r"\s*")


def peek_json(head: bytes, list_key: str = "messages") -> tuple[str | None, dict[str, Any], list[Any]]:
    """Look into a possibly truncated JSON document without parsing all of it.

    Returns ``(top, keys, items)``: ``top`` is ``"object"``, ``"array"`` or ``None``;
    ``keys`` maps the top-level keys read so far to their values (a value cut by
    the end of ``head`` is ``...``); ``items`` are the complete leading elements of
    the top-level array, or of the object's ``list_key`` array. Raises
    :class:`~latch.importers.base.JSONNestingError` when a value is nested too deeply to parse.
    """
    text = head_text(head)

    def ws(i: int) -> int:
        m = _WS.match(text, i)  # \s* matches (the empty string) at every index
        return m.end() if m else i

    def array_items(i: int) -> list[Any]:
        items: list[Any] = []
        i = ws(i + 1)
        while i < len(text) and text[i] != "]":
            try:
                value, i = json_decode(text, i)
            except ValueError:
                break
            items.append(value)
            i = ws(i)
            if i < len(text) and text[i] == ",":
                i = ws(i + 1)
        return items

    i = ws(0)
    if text.startswith("[", i):
        return "array", {}, array_items(i)
    if not text.startswith("{", i):
        return None, {}, []
    keys: dict[str, Any] = {}
    items: list[Any] = []
    i = ws(i + 1)
    while i < len(text) and text[i] == '"':
        try:
            key, i = json_decode(text, i)
        except ValueError:
            break
        i = ws(i)
        if not text.startswith(":", i):
            break
        i = ws(i + 1)
        if key == list_key and text.startswith("[", i):
            items = array_items(i)
        try:
            keys[key], i = json_decode(text, i)
        except ValueError:
            keys[key] = ...
            break
        i = ws(i)
        if text.startswith(",", i):
            i = ws(i + 1)
    return "object", keys, items


# ----------------------------------------------------------------------------- builder
@dataclass
class AssistantSlot:
    """One provider response under construction (mutable until :meth:`SessionBuilder.finish`)."""

    ref: str
    ts: str | None
    text_parts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: bool = False
    model: str | None = None
    usage: PendingEvent | None = None
    results: list[tuple[int, PendingEvent]] = field(default_factory=list)
    after: list[PendingEvent] = field(default_factory=list)
    hold: str | None = None  # "message" or "usage": not settled yet (SessionBuilder.hold)


class SessionBuilder:
    """Collects a transcript's events in order and links tool calls to their results.

    Results answering an open call are placed right after that call's assistant
    message, in call order, whatever came in between; a result answering no open
    call is kept in place with ``orphan=True``; :meth:`close_open` appends a
    ``missing=True`` placeholder for every call still unanswered, which an
    importer calls only when the transcript proves the result will never come
    (the turn ended or was aborted, the next prompt or request came first).

    A call still unanswered at the end of the file is *pending*: no placeholder,
    its result may follow when the file grows. For such files
    (``finish(growing=True)``) the builder also computes the open tail: the
    events from the first unanswered call's result position, from a slot the
    importer marked with :meth:`hold`, or from :meth:`open_here` on, whichever
    comes first; everything before it is settled.
    """

    def __init__(self, path: str | Path, fmt: str):
        self.path = Path(path)
        self.format = fmt
        self._items: list[PendingEvent | AssistantSlot] = []
        self._open: dict[str, tuple[AssistantSlot, int]] = {}
        self._refs: set[str] = set()
        self._artifacts: dict[str, tuple[bytes, str, int | None, int | None]] = {}
        self._open_at: int | None = None  # index in _items where open_here() started the open tail

    # -- references
    def ref(self, base: str) -> str:
        """A ``source_ref`` unique in this session: ``base``, then ``base#1``, ``base#2``..."""
        ref, k = base, 0
        while ref in self._refs:
            k += 1
            ref = f"{base}#{k}"
        self._refs.add(ref)
        return ref

    # -- events
    def add(self, event: Event, ref: str, ts: str | None) -> None:
        """Append a non-assistant, non-result event (user message, note, marker)."""
        self._items.append(PendingEvent(event, self.ref(ref), ts))

    def assistant(
        self,
        ref: str,
        ts: str | None,
        *,
        text: str = "",
        calls: Sequence[ToolCall] = (),
        reasoning: bool = False,
        model: str | None = None,
    ) -> AssistantSlot:
        """Start one provider response; more text/calls may be added with :meth:`extend`."""
        slot = AssistantSlot(ref=self.ref(ref), ts=ts, model=model)
        self._items.append(slot)
        self.extend(slot, text=text, calls=calls, reasoning=reasoning)
        return slot

    def extend(
        self, slot: AssistantSlot, *, text: str = "", calls: Sequence[ToolCall] = (), reasoning: bool = False
    ) -> None:
        if text:
            slot.text_parts.append(text)
        slot.reasoning = slot.reasoning or reasoning
        for call in calls:
            self._open[call.id] = (slot, len(slot.calls))
            slot.calls.append(call)

    def set_usage(self, slot: AssistantSlot, usage: Usage, ref: str, ts: str | None) -> None:
        """Attach the usage of ``slot``'s request (replaces an earlier one: never summed)."""
        if slot.usage is not None:
            self._refs.discard(slot.usage.source_ref)
        slot.usage = PendingEvent(usage, self.ref(ref), ts)

    def after_results(self, slot: AssistantSlot, event: Event, ref: str, ts: str | None) -> None:
        """Place ``event`` (e.g. a :class:`SubagentMarker`) right after ``slot``'s results."""
        slot.after.append(PendingEvent(event, self.ref(ref), ts))

    def is_open(self, call_id: str) -> bool:
        return call_id in self._open

    def hold(self, slot: AssistantSlot, part: str = "message") -> None:
        """Mark ``slot`` as not settled yet by a growing file: ``"message"`` when more blocks of the
        response may still be written (the slot and all after it are the open tail), ``"usage"``
        when its usage may still be reported (all after its message is)."""
        if part not in ("message", "usage"):
            raise ValueError(f"hold part must be 'message' or 'usage', not {part!r}")
        slot.hold = part

    def open_here(self) -> None:
        """Start the open tail at the next event added (a block the file may still extend)."""
        if self._open_at is None:
            self._open_at = len(self._items)

    def result(
        self,
        call_id: str,
        content: str,
        ref: str,
        ts: str | None,
        *,
        is_error: bool = False,
        name: str | None = None,
        media: tuple[MediaRef, ...] = (),
        exit_code: int | None = None,
    ) -> None:
        """Record a tool result: linked to its open call, else kept in place as an orphan."""
        opened = self._open.pop(call_id, None)
        if opened is None:
            ev = ToolResult(
                call_id=call_id,
                content=content,
                is_error=is_error,
                name=name,
                orphan=True,
                media=tuple(media),
                exit_code=exit_code,
            )
            self._items.append(PendingEvent(ev, self.ref(ref), ts))
            return
        slot, index = opened
        ev = ToolResult(
            call_id=call_id,
            content=content,
            is_error=is_error,
            name=name or slot.calls[index].name,
            media=tuple(media),
            exit_code=exit_code,
        )
        slot.results.append((index, PendingEvent(ev, self.ref(ref), ts)))

    def close_open(self, reason: str, ts: str | None = None) -> int:
        """Append a ``missing`` placeholder for every unanswered call; returns how many."""
        n = 0
        for call_id, (slot, index) in list(self._open.items()):
            ev = ToolResult(
                call_id=call_id,
                content=f"[no result: {reason}]",
                is_error=True,
                name=slot.calls[index].name,
                missing=True,
            )
            slot.results.append((index, PendingEvent(ev, self.ref(f"missing:{call_id}"), ts)))
            n += 1
        self._open.clear()
        return n

    # -- media
    def media(self, data: bytes, media_type: str | None) -> MediaRef:
        """Store image/file bytes as an artifact and return its reference (dimensions from headers)."""
        media_type = sniff_media_type(data) or media_type or "application/octet-stream"
        width, height = image_size(data) if media_type.startswith("image/") else (None, None)
        sha = hashlib.sha256(data).hexdigest()
        self._artifacts.setdefault(sha, (data, media_type, width, height))
        return MediaRef(sha256=sha, media_type=media_type, byte_size=len(data), width=width, height=height)

    # -- output
    def events(self) -> tuple[list[PendingEvent], int]:
        """``(events, settled)``: all events in order, and how many leading ones are settled."""
        out: list[PendingEvent] = []
        settled: int | None = None
        for i, item in enumerate(self._items):
            if i == self._open_at and settled is None:
                settled = len(out)
            if isinstance(item, PendingEvent):
                out.append(item)
                continue
            if item.hold == "message" and settled is None:
                settled = len(out)
            msg = AssistantMessage(
                text="\n".join(item.text_parts),
                tool_calls=tuple(item.calls),
                reasoning_reported=item.reasoning,
                model=item.model,
            )
            out.append(PendingEvent(msg, item.ref, item.ts))
            if item.usage is not None:
                out.append(item.usage)
            elif item.hold == "usage" and settled is None:
                settled = len(out)
            answered = dict(item.results)
            for index in range(len(item.calls)):
                if index in answered:
                    out.append(answered[index])
                elif settled is None:  # pending: the results after it may still change order
                    settled = len(out)
            out.extend(item.after)
        return out, len(out) if settled is None else settled

    def finish(
        self,
        *,
        external_key: str,
        workspace: str | None = None,
        meta: dict[str, Any] | None = None,
        growing: bool = False,
    ) -> ParsedSession:
        """The parsed session. Calls still unanswered stay pending (no placeholder).

        ``growing=True`` for formats that agents append to: ``ParsedSession.settled`` then marks the
        open tail (see the class docstring); whole-document formats leave it ``None``.
        """
        events, settled = self.events()
        return ParsedSession(
            external_key=external_key,
            format=self.format,
            source=str(self.path.resolve()),
            events=events,
            workspace=workspace,
            meta=meta or {},
            artifacts=list(self._artifacts.values()),
            stats=compute_stats(events),
            settled=settled if growing and settled < len(events) else None,
        )


def compute_stats(events: list[PendingEvent]) -> dict[str, Any]:
    """Importer ``stats``: message/tool counts and usage totals over ``events``.

    ``tool_results`` counts results found in the transcript (orphans included,
    missing-result placeholders excluded); ``tool_errors`` counts those with
    ``is_error``. Usage totals are ``None`` when no request reported that field.
    """
    stats: dict[str, Any] = dict(
        user_messages=0,
        assistant_messages=0,
        tool_calls=0,
        tool_results=0,
        tool_errors=0,
        orphan_results=0,
        missing_results=0,
    )
    totals: dict[str, int | None] = dict(
        input_tokens=None, output_tokens=None, cache_read_tokens=None, cache_write_tokens=None
    )
    requests = 0
    for pe in events:
        ev = pe.event
        if isinstance(ev, UserMessage):
            stats["user_messages"] += 1
        elif isinstance(ev, AssistantMessage):
            stats["assistant_messages"] += 1
            stats["tool_calls"] += len(ev.tool_calls)
        elif isinstance(ev, ToolResult):
            if ev.missing:
                stats["missing_results"] += 1
                continue
            stats["tool_results"] += 1
            stats["tool_errors"] += ev.is_error
            stats["orphan_results"] += ev.orphan
        elif isinstance(ev, Usage):
            requests += 1
            for k in totals:
                v = getattr(ev, k)
                if v is not None:
                    totals[k] = (totals[k] or 0) + v
    stats["usage"] = {**totals, "requests": requests}
    return stats


def content_hash_key(fmt: str, doc: Any) -> str:
    """``"<format>:sha256:<hex>"`` over the sorted-key JSON of a parsed document (encoding-independent).

    For whole-document formats only: the hash changes with any change of the document.
    """
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return f"{fmt}:sha256:{hashlib.sha256(text.encode('ascii')).hexdigest()}"


def head_key(fmt: str, text: str) -> str:
    """``"<format>:sha256:<hex>"`` over the first non-blank line of a decoded transcript.

    The identity of a file that grows by appended lines and has no session id of its own: the first
    line is written once and never changes, so every prefix of the file has the same key.
    """
    first = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
    return f"{fmt}:sha256:{hashlib.sha256(first.encode('utf-8', 'surrogatepass')).hexdigest()}"


_OPENAI_ROLES = ("tool", "function", "developer", "system")
_OPENAI_PARTS = ("image_url", "input_audio", "refusal")
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document")


def chat_features(head: bytes) -> tuple[set[str], dict[str, Any]]:
    """Sniff a chat ``messages`` document: ``({"chat", "openai", "anthropic"} subset, top-level keys)``.

    ``"chat"``: a ``messages`` array (or a bare array) of ``{role, ...}`` objects;
    ``"openai"``: OpenAI-only traits (``tool``/``system`` roles, ``tool_calls``,
    ``image_url`` parts, completion objects); ``"anthropic"``: Anthropic-only
    content blocks (``tool_use``, ``tool_result``, ``thinking``, ``image.source``).
    """
    top, keys, items = peek_json(head)
    if top is None or (top == "object" and "messages" not in keys):
        return set(), keys
    found: set[str] = set()
    if items and all(isinstance(m, dict) and ("role" in m or "choices" in m) for m in items):
        found.add("chat")
        for m in items:
            if "choices" in m or m.get("role") in _OPENAI_ROLES or "tool_calls" in m or "tool_call_id" in m:
                found.add("openai")
            content = m.get("content")
            for part in content if isinstance(content, list) else ():
                kind = part.get("type") if isinstance(part, dict) else None
                if kind in _OPENAI_PARTS:
                    found.add("openai")
                elif kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in part):
                    found.add("anthropic")
    elif top == "array" and not items or top == "object" and keys.get("messages") in (..., []):
        # the first message is longer than the head (a large image, a long paste): look at its start
        text = head_text(head)
        if _ROLE.search(text):
            found.add("chat")
            found.update(kind for kind, pattern in _TRAITS if pattern.search(text))
    return found, keys


_ROLE = re.compile(r'"role"\s*:\s*"')
_TRAITS = (
    ("openai", re.compile(r'"(tool_calls|tool_call_id|image_url)"\s*:|"role"\s*:\s*"(tool|system|developer)"')),
    (
        "anthropic",
        re.compile(
            r'"type"\s*:\s*"(tool_use|tool_result|thinking|redacted_thinking)"'
            r'|"source"\s*:\s*\{\s*"type"\s*:\s*"(base64|url)"'
        ),
    ),
)
