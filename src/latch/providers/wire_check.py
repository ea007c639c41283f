"""The wire-format violations of a run of views (a replay's, a bench job's): each view rendered as the three request
bodies and each body validated, as far as it is new.

Within a cache epoch each view repeats the previous one's messages (the same :class:`~latch.port.ViewMessage`
objects) and adds a few. :class:`WireCheck` renders each item of :func:`latch.providers._wire.group` (a message,
or a tool-call turn with its results) once per format, keyed by the identity of its messages (frozen, so the same
object is the same content), builds each body from those renderings, and validates each body with a
:class:`~latch.providers._wire.ScanResume`: the body's leading messages that are the same objects as the previous
body's are not checked again. Every message after the first one that differs is checked in its place, and the
checks of the whole body (tools, calls never answered, the end of the body) run every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..port import ContextView, ViewMessage
from ._wire import ScanResume, Turn, group, nonempty, wire_tools
from .anthropic.messages import (
    MessagesScan,
    continuation_message,
    item_parts,
    validate_anthropic_messages,
)
from .anthropic.messages import tool_entries as anthropic_tools
from .openai.chat import ChatScan, system_message, validate_openai_chat
from .openai.chat import render_item as chat_item
from .openai.chat import tool_entries as chat_tools
from .openai.responses import ENCRYPTED_REASONING, ResponsesScan, validate_responses
from .openai.responses import render_item as responses_item
from .openai.responses import tool_entries as responses_tools

__all__ = ["WireCheck", "MAX_KEPT_ITEMS"]

MAX_KEPT_ITEMS = 4096
"""Rendered items (and merged Messages messages) a :class:`WireCheck` keeps (all dropped past it; the next view is
then rendered and checked whole)."""

_Parts = list[tuple[str, list[dict[str, Any]]]]


class WireCheck:
    """The wire-format violations of each view of a run, in order.

    ``problems(view)`` is the list ``validate_openai_chat(to_openai_chat(view, known_tools=known_tools))``, then
    ``validate_anthropic_messages(to_anthropic_messages(view, max_tokens=max_tokens, known_tools=known_tools))``,
    then ``validate_responses(to_responses(view, model=model, known_tools=known_tools))`` (``[]`` when all three
    bodies are valid), and raises what those raise (``ValueError`` for a message with an unknown role or a tool
    schema without a name). No artifact loader: images are their text placeholders, as in those calls without one.
    """

    def __init__(
        self, *, model: str | None = None, max_tokens: int | None = None, known_tools: Sequence[str] = ()
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.known_tools = tuple(known_tools)
        # item key -> (the item, kept alive so its ids stay its own; chat messages; Messages parts; Responses items)
        self._items: dict[Any, tuple[Any, list[dict[str, Any]], _Parts, list[dict[str, Any]]]] = {}
        # (role, ids of the parts' block lists) -> (the merged message, the block lists, kept alive)
        self._merged: dict[tuple[Any, ...], tuple[dict[str, Any], tuple[list[dict[str, Any]], ...]]] = {}
        self._system: dict[str, Any] | None = None
        self._note = continuation_message()
        self._chat: ScanResume[ChatScan] = ScanResume(ChatScan)
        self._anthropic: ScanResume[MessagesScan] = ScanResume(MessagesScan)
        self._responses: ScanResume[ResponsesScan] = ScanResume(ResponsesScan)

    def problems(self, view: ContextView) -> list[str]:
        """The violations of ``view``'s three bodies (see the class)."""
        if len(self._items) > MAX_KEPT_ITEMS or len(self._merged) > MAX_KEPT_ITEMS:
            self._items.clear()
            self._merged.clear()
        chat: list[dict[str, Any]] = []
        if nonempty(view.system):
            chat.append(self._system_message(view.system))
        parts: _Parts = []
        inputs: list[dict[str, Any]] = []
        for item in group(view):
            _, chat_part, item_part, input_part = self._rendered(item)
            chat += chat_part
            parts += item_part
            inputs += input_part
        declared = wire_tools(view, self.known_tools)

        body: dict[str, Any] = {"messages": chat}
        if declared:
            body["tools"] = chat_tools(declared)
        out = validate_openai_chat(body, resume=self._chat)

        body = {}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if nonempty(view.system):
            body["system"] = view.system
        body["messages"] = self._merge(parts)
        if declared:
            body["tools"] = anthropic_tools(declared)
        out += validate_anthropic_messages(body, resume=self._anthropic)

        body = {}
        if self.model is not None:
            body["model"] = self.model
        if nonempty(view.system):
            body["instructions"] = view.system
        body["input"] = inputs
        if declared:
            body["tools"] = responses_tools(declared)
        body["store"] = False
        body["include"] = [ENCRYPTED_REASONING]
        out += validate_responses(body, resume=self._responses)
        return out

    def _system_message(self, system: str) -> dict[str, Any]:
        kept = self._system
        if kept is None or type(system) is not str or kept["content"] != system:
            kept = self._system = system_message(system)
        return kept

    def _rendered(self, item: ViewMessage | Turn) -> tuple[Any, list[dict[str, Any]], _Parts, list[dict[str, Any]]]:
        key: Any = (id(item.call), *map(id, item.results)) if isinstance(item, Turn) else id(item)
        found = self._items.get(key)
        if found is None:
            found = self._items[key] = (item, chat_item(item), item_parts(item), responses_item(item))
        return found

    def _merge(self, parts: _Parts) -> list[dict[str, Any]]:
        """The Messages body's messages of ``parts`` (as :func:`latch.providers.to_anthropic_messages` merges
        them), each merged message kept per run of block lists, so an unchanged run gives the same object."""
        runs: list[tuple[str, list[list[dict[str, Any]]]]] = []
        for role, blocks in parts:
            if not blocks:
                continue
            if runs and runs[-1][0] == role:
                runs[-1][1].append(blocks)
            else:
                runs.append((role, [blocks]))
        messages = []
        for role, lists in runs:
            key = (role, *map(id, lists))
            found = self._merged.get(key)
            if found is None:
                content = [b for blocks in lists for b in blocks]
                found = self._merged[key] = ({"role": role, "content": content}, tuple(lists))
            messages.append(found[0])
        if messages and messages[0]["role"] == "assistant":
            messages.insert(0, self._note)
        return messages
