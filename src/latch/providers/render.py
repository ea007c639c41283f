"""A view as a request body of one wire format, with the output cap and ``tool_choice`` (:func:`render_request`),
for the OpenAI chat-completions, Anthropic Messages and OpenAI Responses wires (:data:`WIRE_FORMATS`); the other
direction, a response body as an assistant message and its usage, is :mod:`.parse`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..port import ContextView
from .anthropic.messages import to_anthropic_messages
from .openai.chat import to_openai_chat
from .openai.responses import to_responses

__all__ = ["WIRE_FORMATS", "render_request", "tool_choice_body"]

WIRE_FORMATS = ("openai-chat", "anthropic-messages", "openai-responses")
"""The wire formats a provider speaks (``Provider.wire``)."""

_NAMED = ("auto", "required", "none")


def tool_choice_body(wire: str, choice: str) -> Any:
    """``choice`` (``"auto"``, ``"required"``, ``"none"`` or a tool name to force) as ``wire`` spells it."""
    if wire == "anthropic-messages":
        return (
            {"type": {"required": "any"}.get(choice, choice)} if choice in _NAMED else {"type": "tool", "name": choice}
        )
    if choice in _NAMED:
        return choice
    if wire == "openai-responses":
        return {"type": "function", "name": choice}
    return {"type": "function", "function": {"name": choice}}


def render_request(
    view: ContextView,
    wire: str,
    loader: Callable[[str], bytes] | None = None,
    *,
    model: str | None = None,
    max_output_tokens: int | None = None,
    tool_choice: str | None = None,
) -> dict[str, Any]:
    """``view`` as a ``wire`` request body (images inlined through ``loader(sha256) -> bytes``): the output cap
    is ``max_output_tokens`` (tokens; Anthropic's required ``max_tokens`` defaults to the view's reserve), and
    ``tool_choice`` is set when given and the view declares tools. Raises ``ValueError`` for an unknown wire."""
    if wire == "openai-chat":
        body = to_openai_chat(view, loader, model=model)
        if max_output_tokens is not None:
            body["max_tokens"] = max_output_tokens
    elif wire == "openai-responses":
        body = to_responses(view, loader, model=model)
        if max_output_tokens is not None:
            body["max_output_tokens"] = max_output_tokens
    elif wire == "anthropic-messages":
        body = to_anthropic_messages(
            view, loader, model=model, max_tokens=max_output_tokens or view.budget.reserve_tokens
        )
    else:
        raise ValueError(f"unknown wire format {wire!r} (known: {', '.join(WIRE_FORMATS)})")
    if tool_choice and view.tools:
        body["tool_choice"] = tool_choice_body(wire, tool_choice)
    return body
