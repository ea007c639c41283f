"""A response body of one wire format as an assistant message and its usage (:func:`parse_response`), for the
wires :data:`.render.WIRE_FORMATS` names; the other direction, a view as a request body, is :mod:`.render`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..events import AssistantMessage, ToolCall, Usage, canonical_arguments
from .render import WIRE_FORMATS

__all__ = ["parse_response"]


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"provider response: {where} must be a non-negative integer, got {value!r}")
    return value


def parse_response(wire: str, response: Mapping[str, Any]) -> tuple[AssistantMessage, Usage | None]:
    """The assistant message and usage of a chat-completions, Messages API or Responses API response body.

    Usage is normalized: ``input_tokens`` uncached, ``cache_read_tokens`` and ``cache_write_tokens``
    disjoint from it; unknown stays ``None``. A Responses body's text is its ``message`` items' ``output_text``
    parts, its calls its ``function_call`` items (``call_id``, ``name``, ``arguments``), and a ``reasoning``
    item reports reasoning. ``ValueError`` naming the field for a malformed response
    (nothing is appended then).
    """
    if not isinstance(response, Mapping):
        raise ValueError(f"provider response must be a JSON object, got {type(response).__name__}")
    model = response.get("model") if isinstance(response.get("model"), str) else None
    if wire == "openai-chat":
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ValueError("provider response: choices[0] is missing")
        msg = choices[0].get("message")
        if not isinstance(msg, Mapping):
            raise ValueError("provider response: choices[0].message is missing")
        text = msg.get("content") or ""
        calls = []
        for i, c in enumerate(msg.get("tool_calls") or ()):
            fn = c.get("function") if isinstance(c, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(c.get("id"), str) or not isinstance(fn.get("name"), str):
                raise ValueError(f"provider response: choices[0].message.tool_calls[{i}] needs id and function.name")
            calls.append(ToolCall(c["id"], fn["name"], fn.get("arguments") or "{}"))
        reasoning = bool(msg.get("reasoning_content") or msg.get("reasoning"))
        u = response.get("usage")
        usage = None
        if isinstance(u, Mapping):
            prompt = _int(u.get("prompt_tokens"), "usage.prompt_tokens")
            details = found if isinstance(found := u.get("prompt_tokens_details"), Mapping) else {}
            cached = _int(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens")
            usage = Usage(
                input_tokens=prompt - cached if prompt is not None and cached is not None else prompt,
                output_tokens=_int(u.get("completion_tokens"), "usage.completion_tokens"),
                cache_read_tokens=cached,
                model=model,
                request_id=response.get("id"),
            )
    elif wire == "anthropic-messages":
        blocks = response.get("content")
        if not isinstance(blocks, list):
            raise ValueError("provider response: content must be a list of blocks")
        texts, calls, reasoning = [], [], False
        for i, b in enumerate(blocks):
            kind = b.get("type") if isinstance(b, Mapping) else None
            if kind == "text":
                texts.append(str(b.get("text", "")))
            elif kind == "tool_use":
                if not isinstance(b.get("id"), str) or not isinstance(b.get("name"), str):
                    raise ValueError(f"provider response: content[{i}] tool_use needs id and name")
                try:
                    arguments = canonical_arguments(b.get("input", {}))
                except ValueError:
                    raise ValueError(f"provider response: content[{i}] tool_use input holds NaN or Infinity") from None
                calls.append(ToolCall(b["id"], b["name"], arguments))
            elif kind in ("thinking", "redacted_thinking"):
                reasoning = True
        text = "".join(texts)
        u = response.get("usage")
        usage = None
        if isinstance(u, Mapping):
            usage = Usage(
                input_tokens=_int(u.get("input_tokens"), "usage.input_tokens"),
                output_tokens=_int(u.get("output_tokens"), "usage.output_tokens"),
                cache_read_tokens=_int(u.get("cache_read_input_tokens"), "usage.cache_read_input_tokens"),
                cache_write_tokens=_int(u.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens"),
                model=model,
                request_id=response.get("id"),
            )
    elif wire == "openai-responses":
        text, calls, reasoning, usage = _parse_responses(response, model)
    else:
        raise ValueError(f"unknown wire format {wire!r} (known: {', '.join(WIRE_FORMATS)})")
    if not isinstance(text, str):
        raise ValueError("provider response: the message content must be text")
    return AssistantMessage(text=text, tool_calls=tuple(calls), reasoning_reported=reasoning, model=model), usage


def _parse_responses(response: Mapping[str, Any], model: str | None) -> tuple[str, list[ToolCall], bool, Usage | None]:
    """``(text, calls, reasoning reported, usage)`` of a Responses API ``response`` object (see :func:`parse_response`).

    Usage: ``input_tokens`` counts the cached (``input_tokens_details.cached_tokens``) and cache-written
    (``input_tokens_details.cache_write_tokens``) tokens too, so both are taken out of the uncached input;
    ``output_tokens`` includes the reasoning tokens."""
    output = response.get("output")
    if not isinstance(output, list):
        raise ValueError("provider response: output must be a list of items")
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning = False
    for i, item in enumerate(output):
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "message":
            texts.extend(
                str(p.get("text", ""))
                for p in item.get("content") or ()
                if isinstance(p, Mapping) and p.get("type") == "output_text"
            )
        elif kind == "function_call":
            if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
                raise ValueError(f"provider response: output[{i}] function_call needs call_id and name")
            arguments = item.get("arguments")
            calls.append(
                ToolCall(item["call_id"], item["name"], arguments if isinstance(arguments, str) and arguments else "{}")
            )
        elif kind == "reasoning":
            reasoning = True
    u = response.get("usage")
    usage = None
    if isinstance(u, Mapping):
        prompt = _int(u.get("input_tokens"), "usage.input_tokens")
        found = u.get("input_tokens_details")
        details: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        cached = _int(details.get("cached_tokens"), "usage.input_tokens_details.cached_tokens")
        written = _int(details.get("cache_write_tokens"), "usage.input_tokens_details.cache_write_tokens")
        uncached = None if prompt is None else max(0, prompt - (cached or 0) - (written or 0))
        usage = Usage(
            input_tokens=uncached,
            output_tokens=_int(u.get("output_tokens"), "usage.output_tokens"),
            cache_read_tokens=cached,
            cache_write_tokens=written,
            model=model,
            request_id=response.get("id"),
        )
    return "".join(texts), calls, reasoning, usage
