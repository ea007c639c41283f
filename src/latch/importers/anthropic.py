"""Anthropic Messages JSON: a conversation in the Messages API shape.

Accepted documents: ``{"model"?, "system"?, "messages": [...]}`` (a request
body) or a bare array of messages. ``content`` is a string or an array of
blocks: ``text``, ``thinking``/``redacted_thinking`` (set ``reasoning_reported``;
their text and signatures are dropped), ``tool_use`` (``input`` becomes the
call's JSON ``arguments``), ``tool_result`` (``content`` string or text/image
blocks, ``is_error``), ``image`` (``source`` ``base64`` → artifact; ``url`` → a
text reference), and server tools (``server_tool_use`` with its
``*_tool_result`` block in the same message).

Response-log style: an assistant element may be a whole Messages API response
(``{"id": "msg_...", "type": "message", "role": "assistant", "model", "content",
"usage"}``); its ``usage`` becomes one :class:`Usage` (Anthropic semantics:
``input_tokens`` is uncached, ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` are disjoint from it).

``system`` → ``SystemNote(subtype="system_prompt")``; ``tools`` (the request's tool schemas) →
``SystemNote(subtype="tools")`` after the conversation (their canonical JSON; ``latch replay`` sends
them as the request's tools). A call still unanswered when
the next assistant message starts gets a ``missing`` result; one unanswered at the
end of the document is pending (no result: the conversation stops before it).

``external_key`` is ``"anthropic-messages:sha256:<hash of the parsed document>"``.
A whole JSON document, written at once and rewritten rather than appended to, so a
content hash is a sound identity (a re-saved, longer document is another session;
growth-stable identities are for the JSONL/markdown logs agents append to).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..events import MediaRef, SystemNote, ToolCall, UserMessage
from ._common import (
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    anthropic_usage,
    chat_features,
    content_hash_key,
    decode_base64,
    dump_json,
    json_type,
    tool_schemas_note,
)
from .base import Importer, ParsedSession, decode_text, load_json

__all__ = ["AnthropicMessagesImporter", "IMPORTERS"]

FORMAT = "anthropic-messages"


class AnthropicMessagesImporter(Importer):
    """Anthropic Messages JSON → Latch events."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = 'Anthropic Messages JSON ({"system", "messages": [...]} or a bare array; response objects too)'

    def sniff(self, path: Path, head: bytes) -> int:
        """85 for messages with Anthropic content blocks; 40 with a top-level ``system``; 25 for plain chat."""
        found, keys = chat_features(head)
        if "chat" not in found:
            return 0
        if "anthropic" in found:
            return 85 if "openai" not in found else 40
        if "openai" in found:
            return 0
        return 40 if "system" in keys else 25

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse the whole document; ``TranscriptError`` names ``messages[i]`` and the field."""
        text = decode_text(path, data)
        doc = load_json(path, text)
        top = Loc(path, "top level")
        system: Any = None
        model = None
        tools = None
        if isinstance(doc, dict):
            messages = top.list(doc, "messages", required=True)
            model = top.str(doc, "model")
            system = doc.get("system")
            tools = tool_schemas_note(top, doc.get("tools"), "tools")
        elif isinstance(doc, list):
            messages = doc
        else:
            raise top.fail(f"expected an object with 'messages' or an array, got {json_type(doc)}")
        b = SessionBuilder(path, FORMAT)
        if system is not None:
            b.add(SystemNote(text=_system_text(top, system), subtype="system_prompt"), "system", None)
        for i, msg in enumerate(messages):
            loc = Loc(path, f"messages[{i}]")
            ref = f"messages[{i}]"
            if not isinstance(msg, dict):
                raise loc.fail(f"expected a message object, got {json_type(msg)}")
            role = loc.str(msg, "role", required=True)
            content = loc.text_or_list(msg, "content", required=True)
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for j in range(len(blocks)):
                _check_block(loc, loc.item_obj(blocks, j, "content"), f"content[{j}]")
            if role == "assistant":
                b.close_open("the next assistant message came before the tool result")
                _assistant(b, loc, msg, blocks, ref, model)
            elif role == "user":
                _user(b, loc, blocks, ref)
            else:
                raise loc.fail(f"unknown role {role!r} (expected user or assistant; 'system' is a top-level field)")
        if tools is not None:  # after the conversation: see tool_schemas_note
            b.add(tools, "tools", None)
        meta = {"model": model} if model else {}
        return b.finish(external_key=content_hash_key(FORMAT, doc), meta=meta)


def _system_text(loc: Loc, system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        parts = []
        for j in range(len(system)):
            block = loc.item_obj(system, j, "system")
            parts.append(loc.str(block, "text", f"system[{j}]", required=True))
        return "\n".join(parts)
    raise loc.fail(f"field 'system' must be a string or an array of text blocks, got {json_type(system)}")


def _check_block(loc: Loc, block: JSONObject, label: str) -> None:
    kind = loc.str(block, "type", label, required=True)
    if kind == "text":
        loc.str(block, "text", label, required=True)
    elif kind in ("tool_use", "server_tool_use"):
        loc.str(block, "id", label, required=True)
        loc.str(block, "name", label, required=True)
        loc.obj(block, "input", label)
    elif kind == "tool_result" or kind.endswith("_tool_result"):
        loc.str(block, "tool_use_id", label, required=True)
        loc.bool(block, "is_error", label)
        if kind == "tool_result":
            inner = block.get("content")
            if inner is not None and not isinstance(inner, (str, list)):
                raise loc.fail(f"field '{label}.content' must be a string or an array, got {json_type(inner)}")
            if isinstance(inner, list):
                for j in range(len(inner)):
                    _check_block(loc, loc.item_obj(inner, j, f"{label}.content"), f"{label}.content[{j}]")
    elif kind == "image":
        source = loc.obj(block, "source", label, required=True)
        stype = loc.str(source, "type", f"{label}.source", required=True)
        if stype == "base64":
            loc.str(source, "data", f"{label}.source", required=True)
            loc.str(source, "media_type", f"{label}.source")
        elif stype == "url":
            loc.str(source, "url", f"{label}.source", required=True)


def _image(b: SessionBuilder, loc: Loc, block: JSONObject, label: str) -> MediaRef | str:
    source = block["source"]
    if source["type"] == "base64":
        return b.media(decode_base64(loc, source["data"], f"{label}.source.data"), source.get("media_type"))
    return f"[image: {source.get('url') or source['type']}]"


def _assistant(b: SessionBuilder, loc: Loc, msg: JSONObject, blocks: JSONArray, ref: str, model: str | None) -> None:
    texts: list[str] = []
    calls: list[ToolCall] = []
    inline_results: list[tuple[str, str, bool]] = []
    reasoning = False
    for j, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            texts.append(block["text"])
        elif kind in ("thinking", "redacted_thinking"):
            reasoning = True
        elif kind in ("tool_use", "server_tool_use"):
            arguments = dump_json(loc, block.get("input") or {}, f"content[{j}].input")
            calls.append(ToolCall(id=block["id"], name=block["name"], arguments=arguments))
        elif kind.endswith("_tool_result"):  # a server tool's result, in the same response
            inline_results.append(
                (
                    block["tool_use_id"],
                    dump_json(loc, block.get("content"), f"content[{j}].content"),
                    block.get("is_error") is True,
                )
            )
        else:
            texts.append(f"[{kind}]")
    msg_model = loc.str(msg, "model") or model
    slot = b.assistant(
        ref, None, text="\n".join(t for t in texts if t), calls=calls, reasoning=reasoning, model=msg_model
    )
    usage = loc.obj(msg, "usage")
    if usage is not None:
        b.set_usage(
            slot,
            anthropic_usage(loc, usage, "usage", model=msg_model, request_id=loc.str(msg, "id")),
            f"{ref}#usage",
            None,
        )
    for call_id, content, is_error in inline_results:
        b.result(call_id, content, ref, None, is_error=is_error)


def _user(b: SessionBuilder, loc: Loc, blocks: JSONArray, ref: str) -> None:
    texts: list[str] = []
    media: list[MediaRef] = []
    for j, block in enumerate(blocks):
        kind = block["type"]
        label = f"content[{j}]"
        if kind == "tool_result":
            rtexts: list[str] = []
            rmedia: list[MediaRef] = []
            inner = block.get("content")
            for k, item in enumerate([{"type": "text", "text": inner}] if isinstance(inner, str) else inner or ()):
                if item["type"] == "text":
                    rtexts.append(item["text"])
                elif item["type"] == "image":
                    got = _image(b, loc, item, f"{label}.content[{k}]")
                    if isinstance(got, MediaRef):
                        rmedia.append(got)
                    else:
                        rtexts.append(got)
                else:
                    rtexts.append(f"[{item['type']}]")
            b.result(
                block["tool_use_id"],
                "\n".join(rtexts),
                ref,
                None,
                is_error=block.get("is_error") is True,
                media=tuple(rmedia),
            )
        elif kind == "text":
            texts.append(block["text"])
        elif kind == "image":
            got = _image(b, loc, block, label)
            if isinstance(got, MediaRef):
                media.append(got)
            else:
                texts.append(got)
        else:
            texts.append(f"[{kind}]")
    if texts or media:
        b.add(UserMessage(text="\n".join(texts), media=tuple(media)), ref, None)


IMPORTERS = [AnthropicMessagesImporter]
