"""A view as an Anthropic Messages request body, and its validator.

Shape of :func:`to_anthropic_messages`::

    {"model": ..., "max_tokens": ...,              # only when given
     "system": view.system,                        # when non-empty
     "messages": [{"role": "user", "content": [blocks]},
                  {"role": "assistant", "content": [text?, {"type": "tool_use", "id", "name", "input"}, ...]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id", "content": [blocks],
                                                "is_error": bool}, ..., later user blocks]}, ...],
     "tools": [{"name", "description", "input_schema"}]}                  # when any

Rules:

* roles alternate: consecutive same-role messages are merged into one
  message's content blocks (a ``tool`` message is user-role); a view that
  would start with the assistant gets a first user message
  :data:`CONTINUATION_NOTE`;
* each tool-call turn's ``tool_use`` blocks are in the assistant message and
  ALL their ``tool_result`` blocks open the immediately following user message,
  in call order, each with ``is_error``; an empty result is ``(no output)``;
* a ``tool`` message whose call is not in the view becomes a user text note;
* tool call ids outside ``[A-Za-z0-9_-]`` (e.g. ``call_1#2``) are rewritten
  deterministically (invalid characters → ``_`` plus 8 hex digits of the
  id's SHA-256) in both the ``tool_use`` and its ``tool_result``;
* arguments that are not a JSON object become ``{"arguments": <the string>}``;
* images (png, jpeg, gif, webp) are ``image`` blocks with a base64 source when
  ``artifact_loader`` is given, else text placeholders; other media are placeholders;
* messages without visible content are left out.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...events import MediaRef, parse_arguments
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

__all__ = [
    "to_anthropic_messages",
    "validate_anthropic_messages",
    "wire_tool_id",
    "add_cache_breakpoints",
    "CONTINUATION_NOTE",
    "MAX_CACHE_BREAKPOINTS",
]

CONTINUATION_NOTE = "(earlier conversation is not shown; it continues below)"
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ID_RE = re.compile(r"[A-Za-z0-9_-]+")


def wire_tool_id(call_id: str) -> str:
    """``call_id`` if it is a valid Anthropic tool id, else its deterministic rewrite."""
    if _ID_RE.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[:56] + "_" + digest


def _media_block(ref: MediaRef, loader: ArtifactLoader | None) -> dict[str, Any]:
    data = image_data(ref, loader) if is_image(ref) and ref.media_type in IMAGE_TYPES else None
    if data is None:
        return {"type": "text", "text": image_placeholder(ref)}
    return {"type": "image", "source": {"type": "base64", "media_type": ref.media_type, "data": data}}


def _blocks(text: str, media: tuple[MediaRef, ...], loader: ArtifactLoader | None) -> list[dict[str, Any]]:
    blocks = [{"type": "text", "text": text}] if nonempty(text) else []
    return blocks + [_media_block(ref, loader) for ref in media]


def _tool_input(arguments: str) -> dict[str, Any]:
    value = parse_arguments(arguments)  # a fresh value (not ToolCall.args' shared one): the payload may be edited
    return value if isinstance(value, dict) else {"arguments": arguments}


def _turn(turn: Turn, loader: ArtifactLoader | None) -> list[tuple[str, list[dict[str, Any]]]]:
    call: ViewMessage = turn.call
    uses = [
        {"type": "tool_use", "id": wire_tool_id(c.id), "name": c.name, "input": _tool_input(c.arguments)}
        for c in call.tool_calls
    ]
    out = [("assistant", _blocks(call.content, (), loader) + uses)]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": wire_tool_id(r.tool_call_id or ""),
            "content": _blocks(result_text(r), r.media, loader),
            "is_error": bool(r.is_error),
        }
        for r in turn.results
    ]
    if results:
        out.append(("user", results))
    return out


def to_anthropic_messages(
    view: ContextView,
    artifact_loader: ArtifactLoader | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    known_tools: Sequence[str] = (),
) -> dict[str, Any]:
    """The Messages API request body of ``view`` (see the module docstring for the shape).

    A view without tool schemas whose messages call tools declares minimal derived ones
    (:func:`latch.providers._wire.wire_tools`; ``known_tools``: the session's tool names, for a list that stays
    the same from request to request).

    ``artifact_loader(sha256) -> bytes`` supplies image bytes (its errors
    propagate). ``ValueError`` for a message with an unknown role or a tool
    schema without a name.
    """
    parts: list[tuple[str, list[dict[str, Any]]]] = []
    for item in group(view):
        parts.extend(item_parts(item, artifact_loader))
    messages: list[dict[str, Any]] = []
    for role, blocks in parts:
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, continuation_message())
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if nonempty(view.system):
        body["system"] = view.system
    body["messages"] = messages
    declared = wire_tools(view, known_tools)
    if declared:
        body["tools"] = tool_entries(declared)
    return body


def item_parts(
    item: ViewMessage | Turn, artifact_loader: ArtifactLoader | None = None
) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(role, blocks)`` of one item of :func:`latch.providers._wire.group`, fresh lists, the same whatever comes
    before or after it: a tool-call turn's assistant blocks then its results' user blocks, a message's blocks
    (``[]`` blocks: nothing visible). :func:`to_anthropic_messages` merges the parts of consecutive items of one
    role into one message and leaves out empty ones."""
    if isinstance(item, Turn):
        return _turn(item, artifact_loader)
    if item.role == "tool":
        return [("user", _blocks(orphan_note(item), item.media, artifact_loader))]
    return [(item.role, _blocks(item.content, item.media if item.role == "user" else (), artifact_loader))]


def continuation_message() -> dict[str, Any]:
    """The user message put first when a view would start with the assistant (:data:`CONTINUATION_NOTE`)."""
    return {"role": "user", "content": [{"type": "text", "text": CONTINUATION_NOTE}]}


def tool_entries(declared: Sequence[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The body's ``tools`` of :func:`latch.providers._wire.wire_tools`'s ``(name, description, schema)``."""
    tools = []
    for name, description, params in declared:
        tool: dict[str, Any] = {"name": name}
        if description:
            tool["description"] = description
        tool["input_schema"] = params
        tools.append(tool)
    return tools


# ------------------------------------------------------------------------------------------ prompt caching
MAX_CACHE_BREAKPOINTS = 4
"""Anthropic's limit on ``cache_control`` breakpoints in one request."""
_EPHEMERAL = {"type": "ephemeral"}
_UNCACHEABLE = ("thinking", "redacted_thinking")


def _strip_cache_control(blocks: Any) -> None:
    for b in blocks if isinstance(blocks, list) else ():
        if isinstance(b, dict):
            b.pop("cache_control", None)
            if b.get("type") == "tool_result":
                _strip_cache_control(b.get("content"))


def _as_blocks(holder: dict[str, Any], key: str) -> list[Any]:
    """``holder[key]`` as a list of blocks (a string becomes one text block; ``[]`` when blank)."""
    value = holder.get(key)
    if isinstance(value, str):
        value = [{"type": "text", "text": value}] if value.strip() else []
        holder[key] = value
    return value if isinstance(value, list) else []


def _mark_last(blocks: list[Any]) -> bool:
    for b in reversed(blocks):
        if isinstance(b, dict) and b.get("type") not in _UNCACHEABLE:
            b["cache_control"] = dict(_EPHEMERAL)
            return True
    return False


def add_cache_breakpoints(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the Messages request ``body`` with ``cache_control: {"type": "ephemeral"}`` breakpoints
    where Latch's cache epochs make the prompt stable (at most :data:`MAX_CACHE_BREAKPOINTS`):

    1. the last ``tools`` entry and 2. the last ``system`` block (a string system becomes one text
       block): the end of the stable prefix (tools, then system, in Anthropic's prompt order);
    3. the last block of the last message: the epoch's growing end, which the next request of the
       same epoch extends and so reads from the cache;
    4. the last block of the latest user message before the last assistant message: where the
       previous request of the epoch ended, so it is read even when the newest turn added more
       blocks than the cache looks back over (20).

    ``cache_control`` already in ``body`` is removed first; a message whose last block is
    ``thinking`` puts the breakpoint on its last other block. The result still passes
    :func:`validate_anthropic_messages` when ``body`` did; ``body`` is not modified.
    """
    out = copy.deepcopy(dict(body))
    tools = found if isinstance(found := out.get("tools"), list) else []
    _strip_cache_control(tools)
    system = _as_blocks(out, "system") if "system" in out else []
    if "system" in out and not system:
        del out["system"]
    _strip_cache_control(system)
    messages = listed if isinstance(listed := out.get("messages"), list) else []
    for m in messages:
        if isinstance(m, dict):
            _strip_cache_control(m.get("content"))
    used = 0
    if tools and isinstance(tools[-1], dict):
        tools[-1]["cache_control"] = dict(_EPHEMERAL)
        used += 1
    if system and _mark_last(system):
        used += 1
    targets: list[int] = []
    if messages:
        targets.append(len(messages) - 1)
        last_assistant = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if isinstance(messages[i], Mapping) and messages[i].get("role") == "assistant"
            ),
            None,
        )
        if last_assistant is not None:
            prev_user = next(
                (
                    i
                    for i in range(last_assistant - 1, -1, -1)
                    if isinstance(messages[i], Mapping) and messages[i].get("role") == "user"
                ),
                None,
            )
            if prev_user is not None and prev_user not in targets:
                targets.append(prev_user)
    for i in targets:
        if used >= MAX_CACHE_BREAKPOINTS:
            break
        m = messages[i]
        if isinstance(m, dict) and _mark_last(_as_blocks(m, "content")):
            used += 1
    return out


# ------------------------------------------------------------------------------------------ validation
def _block_problem(b: Any, role: str, where: str) -> str | None:
    if not isinstance(b, Mapping):
        return f"{where}: not an object"
    kind = b.get("type")
    if kind == "text":
        if not isinstance(b.get("text"), str) or not b["text"].strip():
            return f"{where}: text blocks must be non-empty"
    elif kind == "image":
        src = b.get("source")
        if not isinstance(src, Mapping) or src.get("type") not in ("base64", "url"):
            return f"{where}: image needs a base64 or url source"
        if src["type"] == "base64" and (src.get("media_type") not in IMAGE_TYPES or not src.get("data")):
            return f"{where}: base64 image needs media_type in {', '.join(IMAGE_TYPES)} and data"
    elif kind == "tool_use":
        if role != "assistant":
            return f"{where}: tool_use outside an assistant message"
        if not isinstance(b.get("id"), str) or not _ID_RE.fullmatch(b["id"]):
            return f"{where}: tool_use id must match [A-Za-z0-9_-]+"
        if not isinstance(b.get("name"), str) or not b["name"]:
            return f"{where}: tool_use needs a name"
        if not isinstance(b.get("input"), Mapping):
            return f"{where}: tool_use input must be an object"
    elif kind == "tool_result":
        if role != "user":
            return f"{where}: tool_result outside a user message"
        if not isinstance(b.get("tool_use_id"), str):
            return f"{where}: tool_result needs a tool_use_id"
        if "is_error" in b and not isinstance(b["is_error"], bool):
            return f"{where}: is_error must be a boolean"
        content = b.get("content")
        if isinstance(content, list):
            for j, inner in enumerate(content):
                if not isinstance(inner, Mapping) or inner.get("type") not in ("text", "image"):
                    return f"{where}.content[{j}]: tool_result content holds text and image blocks only"
                problem = _block_problem(inner, role, f"{where}.content[{j}]")
                if problem:
                    return problem
        elif content is not None and not isinstance(content, str):
            return f"{where}: tool_result content must be a string or a list of blocks"
    elif kind not in ("thinking", "redacted_thinking", "document"):
        return f"{where}: unknown block type {kind!r}"
    return None


def validate_anthropic_messages(
    body: Mapping[str, Any], *, require_model: bool = False, resume: ScanResume[MessagesScan] | None = None
) -> list[str]:
    """Violations of Messages API rules in ``body`` (``[]`` when valid).

    Checked: ``messages`` is a non-empty list starting with a user message;
    roles are user/assistant and alternate; content is a non-empty string or
    list of well-formed blocks (no empty text); ``tool_use`` only in assistant
    and ``tool_result`` only in user messages; tool ids valid and unique in the
    request; every ``tool_use`` is answered in the immediately following user
    message, each once, in call order, with its ``tool_result`` blocks before
    any other block; no ``tool_result`` without its ``tool_use`` in the
    preceding assistant message; ``system`` is a string or text blocks; ``tools``
    entries are unique names with an ``input_schema`` object.
    With ``require_model``, ``model`` must be a non-empty string (what the provider needs to accept the body).
    ``resume``: a ``ScanResume(MessagesScan)`` kept from body to body, for bodies whose message objects are never
    changed in place (:class:`latch.providers._wire.ScanResume`): the same list of violations.
    """
    out: list[str] = []
    if require_model and not (isinstance(body.get("model"), str) and body["model"]):
        out.append("model: missing (every request names its model)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*out, "messages: must be a non-empty list"]
    system = body.get("system")
    if system is not None and not isinstance(system, (str, list)):
        out.append("system: must be a string or a list of text blocks")
    if resume is None:
        scan = MessagesScan()
        for i, m in enumerate(messages):
            scan.step(i, m)
    else:
        scan = resume.scan(messages)
    out += scan.out
    if scan.pending:
        out.append(
            f"messages[{len(messages) - 1}]: tool_use {[c for c, _ in scan.pending]} never answered "
            "(the request ends after the assistant message)"
        )
    tools = body.get("tools")
    out.extend(_tools_problems(tools) if resume is None else resume.field(tools, _tools_problems))
    out.extend(undeclared_calls(scan.called, body.get("tools")))
    return out


class MessagesScan:
    """:func:`validate_anthropic_messages`'s state part way through a body's ``messages``
    (:class:`latch.providers._wire.Scan`): the violations so far, the tool ids seen, the last assistant
    message's open ``tool_use`` blocks, the last role, whether any message has a ``tool_use`` block."""

    __slots__ = ("out", "seen_ids", "pending", "prev_role", "called")

    def __init__(self, key: object = None) -> None:
        """``key``: unused (a :class:`latch.providers._wire.ScanResume`'s; no body field changes this scan)."""
        self.out: list[str] = []
        self.seen_ids: set[str] = set()
        self.pending: list[tuple[str, str]] = []  # (id, name) of the previous assistant message's tool_use blocks
        self.prev_role: str | None = None
        self.called = False

    def copy(self) -> MessagesScan:
        new = MessagesScan()
        new.out, new.seen_ids, new.pending = self.out.copy(), self.seen_ids.copy(), self.pending.copy()
        new.prev_role, new.called = self.prev_role, self.called
        return new

    def step(self, i: int, m: Any) -> None:
        """Check message ``i`` (``m``)."""
        out = self.out
        if (
            not self.called
            and isinstance(m, Mapping)
            and isinstance(m.get("content"), list)
            and any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in m["content"])
        ):
            self.called = True
        role = m.get("role") if isinstance(m, Mapping) else None
        if role not in ("user", "assistant"):
            out.append(f"messages[{i}]: role must be user or assistant, not {role!r}")
            return
        if i == 0 and role != "user":
            out.append("messages[0]: the first message must be a user message")
        if role == self.prev_role:
            out.append(f"messages[{i}]: two {role} messages in a row (roles must alternate)")
        self.prev_role = role
        content = m.get("content")
        if isinstance(content, str):
            blocks: list[Any] = []
            if not content.strip():
                out.append(f"messages[{i}]: empty content")
        elif isinstance(content, list) and content:
            blocks = content
        else:
            out.append(f"messages[{i}]: content must be a non-empty string or list of blocks")
            blocks = []
        for j, b in enumerate(blocks):
            problem = _block_problem(b, role, f"messages[{i}].content[{j}]")
            if problem:
                out.append(problem)
        results = [(j, b) for j, b in enumerate(blocks) if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        pending = self.pending
        if role == "user":
            expected = [cid for cid, _ in pending]
            got: list[str] = []
            for j, b in results:
                rid = b.get("tool_use_id")
                if rid not in expected:
                    out.append(
                        f"messages[{i}].content[{j}]: tool_result for {rid!r} without its tool_use in the "
                        "preceding assistant message (orphan)"
                    )
                elif rid in got:
                    out.append(f"messages[{i}].content[{j}]: second tool_result for {rid!r}")
                else:
                    got.append(rid)
            if got != [cid for cid in expected if cid in got]:
                out.append(f"messages[{i}]: tool_result blocks {got} do not follow tool_use order {expected}")
            for cid, name in pending:
                if cid not in got:
                    out.append(f"messages[{i}]: tool_use {cid!r} ({name}) has no tool_result in this message")
            first_other = next(
                (j for j, b in enumerate(blocks) if not (isinstance(b, Mapping) and b.get("type") == "tool_result")),
                len(blocks),
            )
            if any(j > first_other for j, _ in results):
                out.append(f"messages[{i}]: tool_result blocks must come before other content")
            self.pending = []
        else:
            if pending:
                out.append(
                    f"messages[{i}]: tool_use {[c for c, _ in pending]} not answered before this assistant message"
                )
            pending = self.pending = []
            for j, b in enumerate(blocks):
                if isinstance(b, Mapping) and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                    if b["id"] in self.seen_ids:
                        out.append(f"messages[{i}].content[{j}]: duplicate tool_use id {b['id']!r}")
                    self.seen_ids.add(b["id"])
                    pending.append((b["id"], str(b.get("name"))))


def _tool_schema(t: Any) -> tuple[str | None, Any]:
    return (t.get("name"), t.get("input_schema")) if isinstance(t, Mapping) else (None, None)


def _tools_problems(tools: Any) -> list[str]:
    return tools_problems(tools, _tool_schema, "needs a name", "input_schema")
