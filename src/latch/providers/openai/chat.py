"""A view as an OpenAI chat-completions request body, and its validator.

Shape of :func:`to_openai_chat`::

    {"model": ...,                                   # only when given
     "messages": [{"role": "system", "content": view.system},          # when non-empty
                  {"role": "user", "content": "..." | [parts]},
                  {"role": "assistant", "content": "..." | None,
                   "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]},
                  {"role": "tool", "tool_call_id": "...", "content": "..."}, ...],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}]}   # when any

Rules:

* each tool-call turn is the assistant message then one ``tool`` message per
  call, in call order; images a tool returned follow in one ``user`` message
  (tool messages carry text only);
* an error result's content starts with ``[error] `` (the format has no error
  flag); an empty result is ``(no output)``;
* a ``tool`` message whose call is not in the view becomes a ``user`` note;
* images are ``image_url`` parts with a ``data:`` URL when ``artifact_loader``
  is given, else a deterministic text placeholder; other media are placeholders;
* messages without visible content (blank text, no calls, no media) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...events import MediaRef
from ...port import ContextView, ViewMessage
from .._wire import (
    ArtifactLoader,
    ScanResume,
    Turn,
    group,
    image_data,
    image_placeholder,
    is_image,
    nonempty,
    orphan_note,
    result_text,
    tools_problems,
    undeclared_calls,
    wire_tools,
)

__all__ = ["to_openai_chat", "validate_openai_chat"]


def _media_part(ref: MediaRef, loader: ArtifactLoader | None) -> dict[str, Any]:
    data = image_data(ref, loader) if is_image(ref) else None
    if data is None:
        return {"type": "text", "text": image_placeholder(ref)}
    return {"type": "image_url", "image_url": {"url": f"data:{ref.media_type};base64,{data}"}}


def _user_content(text: str, media: tuple[MediaRef, ...], loader: ArtifactLoader | None) -> str | list[dict[str, Any]]:
    if not media:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if nonempty(text) else []
    return parts + [_media_part(ref, loader) for ref in media]


def to_openai_chat(
    view: ContextView,
    artifact_loader: ArtifactLoader | None = None,
    *,
    model: str | None = None,
    known_tools: Sequence[str] = (),
) -> dict[str, Any]:
    """The chat-completions request body of ``view`` (see the module docstring for the shape).

    A view without tool schemas whose messages call tools declares minimal derived ones
    (:func:`latch.providers._wire.wire_tools`; ``known_tools``: the session's tool names, for a list that stays
    the same from request to request).

    ``artifact_loader(sha256) -> bytes`` supplies image bytes (its errors
    propagate). ``ValueError`` for a message with an unknown role or a tool
    schema without a name.
    """
    messages: list[dict[str, Any]] = []
    if nonempty(view.system):
        messages.append(system_message(view.system))
    for item in group(view):
        messages.extend(render_item(item, artifact_loader))
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    body["messages"] = messages
    declared = wire_tools(view, known_tools)
    if declared:
        body["tools"] = tool_entries(declared)
    return body


def system_message(system: str) -> dict[str, Any]:
    """The ``system`` message of a view's system text."""
    return {"role": "system", "content": system}


def render_item(item: ViewMessage | Turn, artifact_loader: ArtifactLoader | None = None) -> list[dict[str, Any]]:
    """The chat messages of one item of :func:`latch.providers._wire.group` (a tool-call turn: its assistant
    message, its tool messages and a user message of their images; a message: ``[]`` when it has nothing
    visible), fresh dicts, the same whatever comes before or after it."""
    if isinstance(item, Turn):
        messages = [_assistant(item.call)]
        images: list[tuple[str, MediaRef]] = []
        for r in item.results:
            text = result_text(r) or "(image output)"
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": r.tool_call_id,
                    "content": f"[error] {text}" if r.is_error else text,
                }
            )
            images.extend((r.tool_call_id or "", ref) for ref in r.media)
        if images:
            ids = ", ".join(dict.fromkeys(cid for cid, _ in images))
            parts = [{"type": "text", "text": f"[media returned by tool call {ids}]"}]
            messages.append(
                {"role": "user", "content": parts + [_media_part(ref, artifact_loader) for _, ref in images]}
            )
        return messages
    if item.role == "tool":
        return [{"role": "user", "content": _user_content(orphan_note(item), item.media, artifact_loader)}]
    if item.role == "user":
        if nonempty(item.content) or item.media:
            return [{"role": "user", "content": _user_content(item.content, item.media, artifact_loader)}]
        return []
    return [{"role": "assistant", "content": item.content}] if nonempty(item.content) else []


def tool_entries(declared: Sequence[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The body's ``tools`` of :func:`latch.providers._wire.wire_tools`'s ``(name, description, schema)``."""
    tools = []
    for name, description, params in declared:
        fn: dict[str, Any] = {"name": name}
        if description:
            fn["description"] = description
        fn["parameters"] = params
        tools.append({"type": "function", "function": fn})
    return tools


def _assistant(m: ViewMessage) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": m.content if nonempty(m.content) else None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ],
    }


# ------------------------------------------------------------------------------------------ validation
def _content_problem(content: Any) -> str | None:
    if isinstance(content, str):
        return None if content.strip() else "empty content"
    if not isinstance(content, list) or not content:
        return "content must be a non-empty string or a non-empty list of parts"
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            if not isinstance(part.get("text"), str) or not part["text"].strip():
                return f"part {j}: empty text"
        elif kind == "image_url":
            url = part.get("image_url", {}).get("url") if isinstance(part.get("image_url"), Mapping) else None
            if not isinstance(url, str) or not url.startswith(("data:", "http://", "https://")):
                return f"part {j}: image_url needs a data: or http(s) url"
        else:
            return f"part {j}: unknown part type {kind!r}"
    return None


def validate_openai_chat(
    body: Mapping[str, Any], *, require_model: bool = False, resume: ScanResume[ChatScan] | None = None
) -> list[str]:
    """Violations of chat-completions rules in ``body`` (``[]`` when valid).

    Checked: ``messages`` is a non-empty list; roles are system/developer/user/
    assistant/tool; user and system content non-empty; an assistant message has
    content or tool calls; tool calls have an id, ``type: "function"``, a name
    and string arguments, ids unique within the message; every call is answered
    by the ``tool`` messages directly following its assistant message, each
    once and in call order; no ``tool`` message without its call; tool messages
    have string content; ``tools`` entries are unique named functions.
    With ``require_model``, ``model`` must be a non-empty string (what the provider needs to accept the body).
    ``resume``: a ``ScanResume(ChatScan)`` kept from body to body, for bodies whose message objects are never
    changed in place (:class:`latch.providers._wire.ScanResume`): the same list of violations.
    """
    out: list[str] = []
    if require_model and not (isinstance(body.get("model"), str) and body["model"]):
        out.append("model: missing (every request names its model)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*out, "messages: must be a non-empty list"]
    if resume is None:
        scan = ChatScan()
        for i, m in enumerate(messages):
            scan.step(i, m)
    else:
        scan = resume.scan(messages)
    out += scan.close(len(messages))
    tools = body.get("tools")
    out.extend(_tools_problems(tools) if resume is None else resume.field(tools, _tools_problems))
    out.extend(undeclared_calls(scan.called, body.get("tools")))
    return out


class ChatScan:
    """:func:`validate_openai_chat`'s state part way through a body's ``messages``
    (:class:`latch.providers._wire.Scan`): the violations so far, the open tool calls of the last assistant
    message, whether any message calls a function."""

    __slots__ = ("out", "expected", "answered", "owner", "called")

    def __init__(self, key: object = None) -> None:
        """``key``: unused (a :class:`latch.providers._wire.ScanResume`'s; no body field changes this scan)."""
        self.out: list[str] = []
        self.expected: dict[str, str] = {}  # call id -> function name, of the last assistant message, in call order
        self.answered: set[str] = set()
        self.owner = -1
        self.called = False

    def copy(self) -> ChatScan:
        new = ChatScan()
        new.out, new.expected, new.answered = self.out.copy(), self.expected.copy(), self.answered.copy()
        new.owner, new.called = self.owner, self.called
        return new

    def close(self, at: int) -> list[str]:
        """The violations so far once the tool messages after the last assistant message end at ``at`` (the
        next non-tool message's index, or the body's length)."""
        for cid, name in self.expected.items():
            if cid not in self.answered:
                self.out.append(
                    f"messages[{self.owner}]: tool call {cid!r} ({name}) is not answered by the tool "
                    f"messages that follow it (next non-tool message: {at})"
                )
        self.expected.clear()
        self.answered.clear()
        return self.out

    def step(self, i: int, m: Any) -> None:
        """Check message ``i`` (``m``)."""
        out = self.out
        if not isinstance(m, Mapping):
            out.append(f"messages[{i}]: not an object")
            return
        if any(isinstance(c, Mapping) and isinstance(c.get("function"), Mapping) for c in (m.get("tool_calls") or [])):
            self.called = True
        role = m.get("role")
        if role != "tool":
            self.close(i)
        if role in ("system", "developer", "user"):
            problem = _content_problem(m.get("content"))
            if problem:
                out.append(f"messages[{i}] ({role}): {problem}")
        elif role == "assistant":
            calls = m.get("tool_calls") or []
            content = m.get("content")
            if not calls and (content is None or _content_problem(content)):
                out.append(f"messages[{i}] (assistant): neither content nor tool_calls")
            expected = self.expected
            for j, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, Mapping) else None
                cid = c.get("id") if isinstance(c, Mapping) else None
                if not isinstance(cid, str) or not cid:
                    out.append(f"messages[{i}].tool_calls[{j}]: missing id")
                    continue
                if c.get("type") != "function" or not isinstance(fn, Mapping):
                    out.append(f"messages[{i}].tool_calls[{j}]: type must be 'function' with a function object")
                    continue
                if not isinstance(fn.get("name"), str) or not fn["name"]:
                    out.append(f"messages[{i}].tool_calls[{j}]: function.name missing")
                if not isinstance(fn.get("arguments"), str):
                    out.append(f"messages[{i}].tool_calls[{j}]: function.arguments must be a JSON string")
                if cid in expected:
                    out.append(f"messages[{i}].tool_calls[{j}]: duplicate call id {cid!r}")
                    continue
                expected[cid] = str(fn.get("name"))
            self.owner = i
        elif role == "tool":
            cid = m.get("tool_call_id")
            if not isinstance(m.get("content"), (str, list)):
                out.append(f"messages[{i}] (tool): content must be a string")
            if cid not in self.expected:
                out.append(
                    f"messages[{i}] (tool): result for {cid!r} without its call in the preceding "
                    "assistant message (orphan)"
                )
            elif cid in self.answered:
                out.append(f"messages[{i}] (tool): second result for call {cid!r}")
            else:
                first_open = next(x for x in self.expected if x not in self.answered)
                if cid != first_open:
                    out.append(
                        f"messages[{i}] (tool): result for {cid!r} before the result for {first_open!r} "
                        "(parallel results must follow call order)"
                    )
                self.answered.add(cid)
        else:
            out.append(f"messages[{i}]: unknown role {role!r}")


def _function_schema(t: Any) -> tuple[str | None, Any]:
    fn = t.get("function") if isinstance(t, Mapping) and t.get("type") == "function" else None
    return (fn.get("name"), fn.get("parameters", {})) if isinstance(fn, Mapping) else (None, None)


def _tools_problems(tools: Any) -> list[str]:
    return tools_problems(
        tools, _function_schema, "must be {'type': 'function', 'function': {'name': ...}}", "parameters"
    )
