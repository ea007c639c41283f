"""OpenAI chat-completions ``messages`` JSON, FORMATS.md section 11.

Accepted documents: ``{"messages": [...], "model"?, ...}`` (including the
converter's ``{"format": "openai-chat", ...}``) or a bare array of messages.
Roles: ``system``/``developer`` → :class:`SystemNote` (``"system_prompt"`` for the
system prompt before the first turn, ``"developer"`` for developer messages,
``"system"`` later; a ``"[compact_boundary] ..."`` system message is a converter's
compaction → :class:`CompactionMarker`); ``user`` → :class:`UserMessage` (text and
``image_url`` parts; ``data:`` images become artifacts); ``assistant`` →
:class:`AssistantMessage` with ``tool_calls`` (``function.arguments`` kept as
the JSON string it is) or a legacy ``function_call``; ``tool`` (``tool_call_id``)
and legacy ``function`` (linked by name) → :class:`ToolResult`.

Reasoning: ``reasoning_content``/``reasoning`` fields and a leading
``<thinking>...</thinking>`` block (the converter inlines thinking that way) set
``reasoning_reported``; their text is dropped. Usage: an assistant message may
carry ``usage`` (``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``),
and an element may be a whole ``chat.completion`` response object (its first
choice's message and its usage). Consecutive assistant messages with no user, tool or system message
between them are one response, one request (a converter writes each block of a response as a message): one
:class:`AssistantMessage` with their text and calls; a later message with usage of its own that differs is a
request of its own (a continuation the harness asked for). A call still unanswered when the next user or
assistant message arrives gets a ``missing`` result; one unanswered at the end of
the document is pending (no result: the conversation stops before it).

The request's ``tools`` (the harness's tool schemas) → ``SystemNote(subtype="tools")`` after the
conversation (their canonical JSON; ``latch replay`` sends them as the request's tools).

``external_key`` is ``"openai-chat:sha256:<hash of the parsed document>"``.
A whole JSON document, written at once and rewritten rather than appended to, so a
content hash is a sound identity (a re-saved, longer document is another session;
growth-stable identities are for the JSONL/markdown logs agents append to).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..events import CompactionMarker, MediaRef, SystemNote, ToolCall, Usage, UserMessage
from ._common import (
    JSONObject,
    Loc,
    SessionBuilder,
    chat_features,
    content_hash_key,
    data_url_bytes,
    dump_json,
    json_type,
    openai_usage,
    tool_schemas_note,
)
from .base import Importer, ParsedSession, decode_text, load_json

__all__ = ["OpenAIChatImporter", "IMPORTERS", "message_content"]

FORMAT = "openai-chat"
_THINKING = re.compile(r"\A\s*<thinking>.*?</thinking>\s*", re.S)
_COMPACT = "[compact_boundary]"
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


class OpenAIChatImporter(Importer):
    """OpenAI chat-completions messages JSON → Latch events."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = 'OpenAI chat-completions messages JSON ({"messages": [...]} or a bare array)'

    def sniff(self, path: Path, head: bytes) -> int:
        """95 for ``"format": "openai-chat"``; 80 for messages with OpenAI-only traits; 30 for plain chat."""
        found, keys = chat_features(head)
        if keys.get("format") == FORMAT:
            return 95
        if "chat" not in found or ("anthropic" in found and "openai" not in found):
            return 0
        return 80 if "openai" in found else 30

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse the whole document; ``TranscriptError`` names ``messages[i]`` and the field."""
        text = decode_text(path, data)
        doc = load_json(path, text)
        tools = None
        if isinstance(doc, dict):
            messages = Loc(path, "top level").list(doc, "messages", required=True)
            model = Loc(path, "top level").str(doc, "model")
            tools = tool_schemas_note(Loc(path, "top level"), doc.get("tools"), "tools")
        elif isinstance(doc, list):
            messages, model = doc, None
        else:
            raise Loc(path, "top level").fail(f"expected an object with 'messages' or an array, got {json_type(doc)}")
        b = SessionBuilder(path, FORMAT)
        legacy: dict[str, str] = {}  # function name -> open legacy call id
        started = False
        slot = None  # the response the next assistant message continues (no user, tool or system turn since)
        slot_usage: JSONObject | None = None
        for i, raw in enumerate(messages):
            loc = Loc(path, f"messages[{i}]")
            ref = f"messages[{i}]"
            if not isinstance(raw, dict):
                raise loc.fail(f"expected a message object, got {json_type(raw)}")
            msg, usage = _unwrap(loc, raw)
            role = loc.str(msg, "role", required=True)
            if role != "assistant":
                slot = None
            if role in ("system", "developer"):
                body = message_content(b, loc, msg)[0]
                if role == "system" and body.startswith(_COMPACT):
                    b.add(CompactionMarker(summary=body[len(_COMPACT) :].strip()), ref, None)
                else:
                    subtype = "developer" if role == "developer" else "system" if started else "system_prompt"
                    b.add(SystemNote(text=body, subtype=subtype), ref, None)
            elif role == "user":
                started = True
                b.close_open("the next message came before the tool result")
                body, media = message_content(b, loc, msg)
                b.add(UserMessage(text=body, media=media), ref, None)
            elif role == "assistant":
                started = True
                msg_model = loc.str(msg, "model") or loc.str(raw, "model") or model
                body, _ = message_content(b, loc, msg)
                reasoning = bool(loc.str(msg, "reasoning_content") or loc.str(msg, "reasoning"))
                stripped = _THINKING.sub("", body, count=1)
                reasoning = reasoning or stripped != body
                text = stripped or loc.str(msg, "refusal") or ""
                if slot is not None and (usage is None or slot_usage is None or usage == slot_usage):
                    # the same response split into messages (a converter writes each block as one): one request
                    b.extend(slot, text=text, calls=_calls(loc, msg, i, legacy), reasoning=reasoning)
                else:
                    b.close_open("the next message came before the tool result")
                    legacy.clear()
                    slot = b.assistant(
                        ref, None, text=text, calls=_calls(loc, msg, i, legacy), reasoning=reasoning, model=msg_model
                    )
                    slot_usage = None
                if usage is not None and slot_usage is None:
                    slot_usage = usage
                    b.set_usage(slot, _usage(loc, usage, msg_model, raw), f"{ref}#usage", None)
            elif role == "tool":
                call_id = loc.str(msg, "tool_call_id", required=True)
                body, media = message_content(b, loc, msg)
                b.result(call_id, body, ref, None, name=loc.str(msg, "name"), media=media)
            elif role == "function":
                name = loc.str(msg, "name", required=True)
                body, media = message_content(b, loc, msg)
                b.result(legacy.pop(name, f"function:{name}"), body, ref, None, name=name, media=media)
            else:
                raise loc.fail(f"unknown role {role!r} (expected system, developer, user, assistant, tool)")
        if tools is not None:  # after the conversation: see tool_schemas_note
            b.add(tools, "tools", None)
        meta = {"model": model} if model else {}
        return b.finish(external_key=content_hash_key(FORMAT, doc), meta=meta)


def _unwrap(loc: Loc, raw: JSONObject) -> tuple[JSONObject, JSONObject | None]:
    """A message and its usage; a ``chat.completion`` object yields its first choice's message."""
    if "choices" in raw:
        choices = loc.list(raw, "choices", required=True)
        if not choices:
            raise loc.fail("field 'choices' is empty")
        choice = loc.item_obj(choices, 0, "choices")
        return loc.obj(choice, "message", "choices[0]", required=True), loc.obj(raw, "usage")
    return raw, loc.obj(raw, "usage")


def message_content(b: SessionBuilder, loc: Loc, msg: JSONObject) -> tuple[str, tuple[MediaRef, ...]]:
    """``(text, images)`` of an OpenAI chat message's ``content``: a string, null, or a list of ``text`` /
    ``input_text`` / ``output_text`` / ``refusal`` / ``image_url`` parts (data URLs stored through ``b``, other
    URLs kept as text); another part type is a ``[type]`` marker, an Anthropic block a one-line error at ``loc``."""
    content = msg.get("content")
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise loc.fail(f"field 'content' must be a string, an array of parts or null, got {json_type(content)}")
    texts: list[str] = []
    media: list[MediaRef] = []
    for j in range(len(content)):
        part = loc.item_obj(content, j, "content")
        label = f"content[{j}]"
        kind = loc.str(part, "type", label, required=True)
        if kind in ("text", "input_text", "output_text"):
            texts.append(loc.str(part, "text", label, required=True))
        elif kind == "refusal":
            texts.append(loc.str(part, "refusal", label) or "")
        elif kind == "image_url":
            image = part.get("image_url")
            url = (
                image
                if isinstance(image, str)
                else loc.str(image, "url", f"{label}.image_url", required=True)
                if isinstance(image, dict)
                else None
            )
            if url is None:
                raise loc.fail(
                    f"field '{label}.image_url' must be an object with 'url' or a string, got {json_type(image)}"
                )
            decoded = data_url_bytes(loc, url, f"{label}.image_url.url")
            if decoded is None:
                texts.append(f"[image: {url}]")
            else:
                media.append(b.media(*decoded))
        elif kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in part):
            raise loc.fail(
                f"content[{j}] is an Anthropic {kind!r} block, not an OpenAI part "
                f"(import with --format anthropic-messages)"
            )
        else:
            texts.append(f"[{kind}]")
    return "\n".join(texts), tuple(media)


def _calls(loc: Loc, msg: JSONObject, i: int, legacy: dict[str, str]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for j, tc in enumerate(loc.list(msg, "tool_calls") or ()):
        label = f"tool_calls[{j}]"
        if not isinstance(tc, dict):
            raise loc.fail(f"field {label!r} must be an object, got {json_type(tc)}")
        fn = loc.obj(tc, "function", label, required=True)
        calls.append(
            ToolCall(
                id=loc.str(tc, "id", label, required=True),
                name=loc.str(fn, "name", f"{label}.function", required=True),
                arguments=_arguments(loc, fn, f"{label}.function"),
            )
        )
    fc = loc.obj(msg, "function_call")
    if fc is not None:
        name = loc.str(fc, "name", "function_call", required=True)
        call_id = legacy[name] = f"function:{name}:messages[{i}]"
        calls.append(ToolCall(id=call_id, name=name, arguments=_arguments(loc, fc, "function_call")))
    return calls


def _arguments(loc: Loc, fn: JSONObject, label: str) -> str:
    args: Any = fn.get("arguments")
    if args is None:
        return "{}"
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        return dump_json(loc, args, f"{label}.arguments")
    raise loc.fail(f"field '{label}.arguments' must be a JSON string, got {json_type(args)}")


def _usage(loc: Loc, usage: JSONObject, model: str | None, raw: JSONObject) -> Usage:
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise loc.fail(f"field 'usage.{key}' must be an integer, got {json_type(value)}")
    details = loc.obj(usage, "prompt_tokens_details", "usage")
    cached = loc.int(details, "cached_tokens", "usage.prompt_tokens_details") if details else None
    request_id = raw.get("id") if isinstance(raw.get("id"), str) and "choices" in raw else None
    return openai_usage(
        loc, usage.get("prompt_tokens"), cached, usage.get("completion_tokens"), model=model, request_id=request_id
    )


IMPORTERS = [OpenAIChatImporter]
