"""A view as an OpenAI Responses API request body, and its validator.

Shape of :func:`to_responses`::

    {"model": ...,
     "instructions": view.system,                                    # when non-empty
     "input": [{"type": "message", "role": "user", "content": "..." | [parts]},
               {"type": "message", "role": "assistant", "content": "..."},
               {"type": "function_call", "call_id", "name", "arguments"},
               {"type": "function_call_output", "call_id", "output": "..." | [parts]}, ...],
     "tools": [{"type": "function", "name", "description", "parameters", "strict": false}],   # when any
     "store": false,
     "include": ["reasoning.encrypted_content"]}

Latch owns the context: every request carries the whole view as ``input``, ``store`` is false (the provider
keeps nothing) and ``previous_response_id`` is never sent. Reasoning items come back encrypted
(``include``) and are sent again before the function calls they led to (:func:`insert_reasoning`, done by
:class:`latch.providers.OpenAIResponsesProvider`, which holds them; a view rendered from a transcript has none).

Rules:

* each tool-call turn is the assistant text (when any) as a message item, then one ``function_call`` item per
  call, then one ``function_call_output`` per result, in call order; a result that returned images carries
  them as ``input_image`` parts of its output;
* an error result's output starts with ``[error] `` (the format has no error flag); an empty result is
  ``(no output)``;
* a ``tool`` message whose call is not in the view becomes a ``user`` note;
* ``function_call`` items carry no ``id`` (an ``fc_`` id makes the API require the reasoning item that preceded
  the call, which a replayed or resumed session no longer has);
* function tools are sent with ``strict: false`` (the API's default is strict, which needs schemas Latch's
  tools do not follow);
* images are ``input_image`` parts with a ``data:`` URL when ``artifact_loader`` is given, else a deterministic
  text placeholder; messages without visible content are left out.
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

__all__ = ["to_responses", "validate_responses", "insert_reasoning", "ENCRYPTED_REASONING"]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value that makes a stateless (``store: false``) response return its reasoning items encrypted,
so they can be sent back."""


def _media_part(ref: MediaRef, loader: ArtifactLoader | None) -> dict[str, Any]:
    data = image_data(ref, loader) if is_image(ref) else None
    if data is None:
        return {"type": "input_text", "text": image_placeholder(ref)}
    return {"type": "input_image", "image_url": f"data:{ref.media_type};base64,{data}", "detail": "auto"}


def _content(text: str, media: tuple[MediaRef, ...], loader: ArtifactLoader | None) -> str | list[dict[str, Any]]:
    if not media:
        return text
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if nonempty(text) else []
    return parts + [_media_part(ref, loader) for ref in media]


def _message(role: str, content: str | list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


def _output(m: ViewMessage, loader: ArtifactLoader | None) -> str | list[dict[str, Any]]:
    text = result_text(m) or "(image output)"
    text = f"[error] {text}" if m.is_error else text
    return _content(text, m.media, loader)


def to_responses(
    view: ContextView,
    artifact_loader: ArtifactLoader | None = None,
    *,
    model: str | None = None,
    known_tools: Sequence[str] = (),
) -> dict[str, Any]:
    """The Responses API request body of ``view`` (see the module docstring for the shape and rules).

    A view without tool schemas whose messages call tools declares minimal derived ones
    (:func:`latch.providers._wire.wire_tools`; ``known_tools``: the session's tool names). ``model`` is left out
    when ``None`` (:func:`validate_responses` then reports it). ``artifact_loader(sha256) -> bytes`` supplies
    image bytes (its errors propagate). ``ValueError`` for a message with an unknown role or a tool schema
    without a name.
    """
    items: list[dict[str, Any]] = []
    for item in group(view):
        items.extend(render_item(item, artifact_loader))
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    if nonempty(view.system):
        body["instructions"] = view.system
    body["input"] = items
    declared = wire_tools(view, known_tools)
    if declared:
        body["tools"] = tool_entries(declared)
    body["store"] = False
    body["include"] = [ENCRYPTED_REASONING]
    return body


def render_item(item: ViewMessage | Turn, artifact_loader: ArtifactLoader | None = None) -> list[dict[str, Any]]:
    """The input items of one item of :func:`latch.providers._wire.group` (a tool-call turn: its text, its
    ``function_call`` items, its ``function_call_output`` items; a message: ``[]`` when it has nothing visible),
    fresh dicts, the same whatever comes before or after it."""
    if isinstance(item, Turn):
        items = [_message("assistant", item.call.content)] if nonempty(item.call.content) else []
        items.extend(
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
            for c in item.call.tool_calls
        )
        items.extend(
            {"type": "function_call_output", "call_id": r.tool_call_id, "output": _output(r, artifact_loader)}
            for r in item.results
        )
        return items
    if item.role == "tool":
        return [_message("user", _content(orphan_note(item), item.media, artifact_loader))]
    if item.role == "user":
        if nonempty(item.content) or item.media:
            return [_message("user", _content(item.content, item.media, artifact_loader))]
        return []
    return [_message("assistant", item.content)] if nonempty(item.content) else []


def tool_entries(declared: Sequence[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The body's ``tools`` of :func:`latch.providers._wire.wire_tools`'s ``(name, description, schema)``."""
    tools = []
    for name, description, params in declared:
        tool: dict[str, Any] = {"type": "function", "name": name}
        if description:
            tool["description"] = description
        tool["parameters"] = params
        tool["strict"] = False
        tools.append(tool)
    return tools


def insert_reasoning(items: Sequence[Any], reasoning: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Any]:
    """``items`` (a body's ``input``) with the reasoning items of each model turn put back where the API wants them.

    ``reasoning`` maps a call id to the reasoning items of the response that made that call (every call of one
    response maps to the same items). They are inserted once, before the turn's first ``function_call`` that has
    them, or before the assistant message right in front of that call (the response's text came after its
    reasoning). Calls without an entry are left as they are. ``items`` is not modified.
    """
    out: list[Any] = []
    done: set[int] = set()
    for item in items:
        call_id = item.get("call_id") if isinstance(item, Mapping) and item.get("type") == "function_call" else None
        found = reasoning.get(call_id) if isinstance(call_id, str) else None
        if found and id(found) not in done:
            done.add(id(found))
            at = len(out)
            prev = out[-1] if out else None
            if (
                isinstance(prev, Mapping)
                and prev.get("type", "message") == "message"
                and prev.get("role") == "assistant"
            ):
                at -= 1
            out[at:at] = [dict(r) for r in found]
        out.append(item)
    return out


# ------------------------------------------------------------------------------------------ validation
def _part_problem(part: Any, role: str) -> str | None:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind in ("input_text", "output_text"):
        if kind == "output_text" and role != "assistant":
            return "output_text parts belong to assistant messages"
        return None if isinstance(part.get("text"), str) and part["text"].strip() else "empty text"
    if kind == "input_image":
        url = part.get("image_url")
        if (
            isinstance(url, str)
            and url.startswith(("data:", "http://", "https://"))
            or isinstance(part.get("file_id"), str)
        ):
            return None
        return "input_image needs a data: or http(s) image_url, or a file_id"
    if kind == "refusal" and role == "assistant":
        return None
    return f"unknown part type {kind!r}"


def _content_problem(content: Any, role: str) -> str | None:
    if isinstance(content, str):
        return None if content.strip() else "empty content"
    if not isinstance(content, list) or not content:
        return "content must be a non-empty string or a non-empty list of parts"
    for j, part in enumerate(content):
        problem = _part_problem(part, role)
        if problem:
            return f"part {j}: {problem}"
    return None


def validate_responses(body: Mapping[str, Any], *, resume: ScanResume[ResponsesScan] | None = None) -> list[str]:
    """Violations of the Responses API's rules in ``body`` (``[]`` when valid).

    Checked: ``model`` is a non-empty string; ``input`` is a non-empty list of items; message items have a role
    (user/assistant/system/developer) and non-empty content (text, or input_text / input_image parts; output_text
    only for the assistant); ``function_call`` items have a ``call_id`` (unique), a ``name`` and string
    ``arguments``; every ``function_call_output`` answers an earlier call, once; every call is answered; a
    ``reasoning`` item has a ``summary`` list, is followed by the turn it led to (not last, not before a user
    message), and carries ``encrypted_content`` when ``store`` is false (the provider kept nothing to refer to);
    no ``previous_response_id`` (Latch sends the whole context); ``tools`` entries are unique named functions
    with a JSON schema, and are declared when the input calls functions.
    ``resume``: a ``ScanResume(ResponsesScan)`` kept from body to body, for bodies whose item objects are never
    changed in place (:class:`latch.providers._wire.ScanResume`): the same list of violations.
    """
    out: list[str] = []
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        out.append("model: missing (a Responses request names its model)")
    if body.get("previous_response_id") is not None:
        out.append("previous_response_id: set, but Latch sends the whole context (store is false)")
    if "instructions" in body and not isinstance(body["instructions"], str):
        out.append("instructions: must be a string")
    items = body.get("input")
    if not isinstance(items, list) or not items:
        return out + ["input: must be a non-empty list of items"]
    stateless = body.get("store") is False
    if resume is None:
        scan = ResponsesScan(stateless)
        for i, item in enumerate(items):
            scan.step(i, item)
    else:
        scan = resume.scan(items, key=stateless)
    out += scan.end()
    tools = body.get("tools")
    out.extend(_tools_problems(tools) if resume is None else resume.field(tools, _tools_problems))
    out.extend(undeclared_calls(bool(scan.calls), body.get("tools")))
    return out


class ResponsesScan:
    """:func:`validate_responses`'s state part way through a body's ``input``
    (:class:`latch.providers._wire.Scan`): the violations so far, the calls and the calls answered, a
    ``reasoning`` item whose next item is not seen yet. ``stateless``: the body's ``store`` is false."""

    __slots__ = ("out", "stateless", "calls", "answered", "reasoning_at")

    def __init__(self, stateless: bool) -> None:
        self.out: list[str] = []
        self.stateless = stateless
        self.calls: dict[str, str] = {}  # call id -> name
        self.answered: set[str] = set()
        self.reasoning_at: int | None = None

    def copy(self) -> ResponsesScan:
        new = ResponsesScan(self.stateless)
        new.out, new.calls, new.answered = self.out.copy(), self.calls.copy(), self.answered.copy()
        new.reasoning_at = self.reasoning_at
        return new

    def _followed(self, nxt: Any) -> None:
        """Check the ``reasoning`` item before ``nxt`` (``None``: the input ends), if any."""
        if self.reasoning_at is None:
            return
        follows = nxt.get("type", "message") if isinstance(nxt, Mapping) else None
        if (
            nxt is None
            or (follows == "message" and nxt.get("role") != "assistant")
            or follows in ("function_call_output", None)
        ):
            self.out.append(f"input[{self.reasoning_at}] (reasoning): not followed by the output item it led to")
        self.reasoning_at = None

    def end(self) -> list[str]:
        """The violations once the input ends here."""
        self._followed(None)
        for cid, name in self.calls.items():
            if cid not in self.answered:
                self.out.append(f"input: function_call {cid!r} ({name}) has no function_call_output")
        return self.out

    def step(self, i: int, item: Any) -> None:
        """Check input item ``i`` (``item``)."""
        self._followed(item)
        out = self.out
        if not isinstance(item, Mapping):
            out.append(f"input[{i}]: not an object")
            return
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                out.append(f"input[{i}]: unknown role {role!r}")
                return
            problem = _content_problem(item.get("content"), str(role))
            if problem:
                out.append(f"input[{i}] ({role}): {problem}")
        elif kind == "function_call":
            cid, name = item.get("call_id"), item.get("name")
            if not isinstance(cid, str) or not cid:
                out.append(f"input[{i}] (function_call): missing call_id")
                return
            if not isinstance(name, str) or not name:
                out.append(f"input[{i}] (function_call): missing name")
            if not isinstance(item.get("arguments"), str):
                out.append(f"input[{i}] (function_call): arguments must be a JSON string")
            if cid in self.calls:
                out.append(f"input[{i}] (function_call): duplicate call_id {cid!r}")
                return
            self.calls[cid] = str(name)
        elif kind == "function_call_output":
            cid = item.get("call_id")
            if not isinstance(item.get("output"), (str, list)):
                out.append(f"input[{i}] (function_call_output): output must be a string or a list of parts")
            if cid not in self.calls:
                out.append(
                    f"input[{i}] (function_call_output): output for {cid!r} without an earlier function_call (orphan)"
                )
            elif cid in self.answered:
                out.append(f"input[{i}] (function_call_output): second output for call {cid!r}")
            else:
                self.answered.add(cid)
        elif kind == "reasoning":
            if not isinstance(item.get("summary"), list):
                out.append(f"input[{i}] (reasoning): summary must be a list")
            if self.stateless and not isinstance(item.get("encrypted_content"), str):
                out.append(
                    f"input[{i}] (reasoning): no encrypted_content, and store is false (the provider kept "
                    "nothing this item could refer to)"
                )
            self.reasoning_at = i
        else:
            out.append(f"input[{i}]: unknown item type {kind!r}")


def _tools_problems(tools: Any) -> list[str]:
    return tools_problems(tools, _function_schema, "must be {'type': 'function', 'name': ...}", "parameters")


def _function_schema(t: Any) -> tuple[str | None, Any]:
    if isinstance(t, Mapping) and t.get("type") == "function":
        return t.get("name"), t.get("parameters", {})
    return None, None
