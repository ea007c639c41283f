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

import marshal
from collections.abc import Sequence
from typing import Any, cast

from ..port import ContextView, ViewMessage
from ._wire import ScanResume, Turn, grouped, nonempty, wire_tools
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
        self._tools_key: bytes | None = None
        self._tools: tuple[list[dict[str, Any]], ...] | None = None
        self._chat_scan: ScanResume[ChatScan] = ScanResume(ChatScan)
        self._anthropic_scan: ScanResume[MessagesScan] = ScanResume(MessagesScan)
        self._responses_scan: ScanResume[ResponsesScan] = ScanResume(ResponsesScan)
        self._start()

    def _start(self) -> None:
        """Forget the last view (the next one is rendered whole)."""
        self._messages: Sequence[ViewMessage] = ()
        # per step of grouped() over the last view: (its first message's index, then the lengths of the lists
        # below before it)
        self._steps: list[tuple[int, int, int, int]] = []
        self._chat: list[dict[str, Any]] = []  # the last view's chat messages (its system message aside)
        self._parts: _Parts = []
        self._inputs: list[dict[str, Any]] = []
        self._runs: list[tuple[int, str, list[list[dict[str, Any]]]]] = []  # (first part, role, block lists)
        self._run_messages: list[dict[str, Any]] = []  # each run's merged message

    def problems(self, view: ContextView) -> list[str]:
        """The violations of ``view``'s three bodies (see the class)."""
        if len(self._items) > MAX_KEPT_ITEMS or len(self._merged) > MAX_KEPT_ITEMS:
            self._items.clear()
            self._merged.clear()
            self._start()
        try:
            self._render(view.messages)
        except BaseException:
            self._start()
            raise
        tools = self._tool_lists(view)

        chat = [self._system_message(view.system), *self._chat] if nonempty(view.system) else list(self._chat)
        body: dict[str, Any] = {"messages": chat}
        if tools is not None:
            body["tools"] = tools[0]
        out = validate_openai_chat(body, resume=self._chat_scan)

        body = {}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if nonempty(view.system):
            body["system"] = view.system
        merged = self._run_messages
        body["messages"] = [self._note, *merged] if merged and merged[0]["role"] == "assistant" else list(merged)
        if tools is not None:
            body["tools"] = tools[1]
        out += validate_anthropic_messages(body, resume=self._anthropic_scan)

        body = {}
        if self.model is not None:
            body["model"] = self.model
        if nonempty(view.system):
            body["instructions"] = view.system
        body["input"] = list(self._inputs)
        if tools is not None:
            body["tools"] = tools[2]
        body["store"] = False
        body["include"] = [ENCRYPTED_REASONING]
        out += validate_responses(body, resume=self._responses_scan)
        return out

    def _render(self, messages: Sequence[ViewMessage]) -> None:
        """Bring the kept lists to ``messages``: from the last step of the last view that began before its first
        message that is not the same object (the steps before are the same), group and render again."""
        prev, n = self._messages, min(len(messages), len(self._messages))
        same = 0
        while same < n and messages[same] is prev[same]:
            same += 1
        steps = self._steps
        k = len(steps)
        while k and steps[k - 1][0] >= same:
            k -= 1
        if k:  # the step at steps[k - 1] may take more tool messages now: it is grouped again
            start, chats, parts, inputs = steps[k - 1]
            del steps[k - 1 :]
        else:
            start, chats, parts, inputs = 0, 0, 0, 0
            steps.clear()
        items = grouped(messages, start)  # (raises before anything kept changes)
        del self._chat[chats:], self._parts[parts:], self._inputs[inputs:]
        at = -1
        for first, item in items:
            if first != at:
                at = first
                steps.append((first, len(self._chat), len(self._parts), len(self._inputs)))
            _, chat_part, item_part, input_part = self._rendered(item)
            self._chat += chat_part
            self._parts += item_part
            self._inputs += input_part
        self._messages = messages
        self._merge(parts)

    def _system_message(self, system: str) -> dict[str, Any]:
        kept = self._system
        if kept is None or type(system) is not str or kept["content"] != system:
            kept = self._system = system_message(system)
        return kept

    def _tool_lists(self, view: ContextView) -> tuple[list[dict[str, Any]], ...] | None:
        """The three bodies' ``tools`` (``None``: none declared); kept while the view's schemas marshal to the
        same bytes (their content: :func:`latch.providers._wire.wire_tools` keeps them the same way)."""
        key = None
        if view.tools:
            try:
                key = marshal.dumps(cast(Any, view.tools), 2)
            except ValueError:  # (not plain JSON-like values: not kept)
                key = None
            if key is not None and key == self._tools_key:
                return self._tools
        declared = wire_tools(view, self.known_tools)
        tools = (chat_tools(declared), anthropic_tools(declared), responses_tools(declared)) if declared else None
        if key is not None:
            self._tools_key, self._tools = key, tools
        return tools

    def _rendered(self, item: ViewMessage | Turn) -> tuple[Any, list[dict[str, Any]], _Parts, list[dict[str, Any]]]:
        key: Any = (id(item.call), *map(id, item.results)) if isinstance(item, Turn) else id(item)
        found = self._items.get(key)
        if found is None:
            found = self._items[key] = (item, chat_item(item), item_parts(item), responses_item(item))
        return found

    def _merge(self, kept_parts: int) -> None:
        """Bring the merged Messages messages to the kept parts, of which the first ``kept_parts`` are the last
        view's (as :func:`latch.providers.to_anthropic_messages` merges them: consecutive parts of one role, empty
        ones left out); each merged message kept per run of block lists, so an unchanged run gives the same
        object."""
        runs, merged = self._runs, self._run_messages
        k = len(runs)
        while k and runs[k - 1][0] >= kept_parts:
            k -= 1
        if k:  # the last run that began before may go on past the kept parts: merged again
            k -= 1
            first = runs[k][0]
        else:
            first = 0
        del runs[k:], merged[k:]
        parts = self._parts
        for i in range(first, len(parts)):
            role, blocks = parts[i]
            if not blocks:
                continue
            if len(runs) > k and runs[-1][1] == role:
                runs[-1][2].append(blocks)
            else:
                runs.append((i, role, [blocks]))
        for _, role, lists in runs[k:]:
            key = (role, *map(id, lists))
            found = self._merged.get(key)
            if found is None:
                content = [b for blocks in lists for b in blocks]
                found = self._merged[key] = ({"role": role, "content": content}, tuple(lists))
            merged.append(found[0])
