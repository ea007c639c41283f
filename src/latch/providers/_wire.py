"""Shared pieces of the per-vendor wire adapters (openai/chat.py, openai/responses.py, anthropic/messages.py):
message grouping, tool schemas, images, the validators' tools check and their scans resumed from body to body
(:class:`ScanResume`). Not part of :mod:`.render`, which imports those adapters (they import this)."""

from __future__ import annotations

import base64
import marshal
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar, cast

from ..events import MediaRef
from ..port import ContextView, ViewMessage
from ..records import dataclass

ArtifactLoader = Callable[[str], bytes]
"""``artifact_loader(sha256) -> bytes`` of a content-addressed artifact (e.g. ``store.get_artifact(h)[1]``)."""

ROLES = ("user", "assistant", "tool")
EMPTY_RESULT = "(no output)"


@dataclass(frozen=True, slots=True)
class Turn:
    """An assistant tool-call message and the results answering it, in call order."""

    call: ViewMessage
    results: tuple[ViewMessage, ...]


def group(view: ContextView) -> list[ViewMessage | Turn]:
    """The view's messages with each tool-call turn gathered with its results.

    A ``tool`` message belongs to a turn when it directly follows that turn's
    assistant message (after other results) and answers one of its calls not
    answered yet; results are put in call order. Any other ``tool`` message is
    an orphan and stays a bare ``ViewMessage`` (rendered as a user-role note),
    after the turn it interrupted. Calls left unanswered stay unanswered (the
    validators report them). ``ValueError`` names a message with an unknown role.
    """
    return [item for _, item in grouped(view.messages)]


def grouped(messages: Sequence[ViewMessage], start: int = 0) -> list[tuple[int, ViewMessage | Turn]]:
    """:func:`group`'s items of ``messages`` from index ``start`` on, each with the index of the message its step
    began at (a turn's orphans share the turn's). ``start`` must be such an index of the whole list (``0``, or one
    this gave): the items from a step on depend on the messages from that index on alone, and those before it on
    the messages before it and the one at it (a turn takes the ``tool`` messages that follow it up to the next
    message of another role)."""
    out: list[tuple[int, ViewMessage | Turn]] = []
    i, n = start, len(messages)
    while i < n:
        m = messages[i]
        if m.role not in ROLES:
            raise ValueError(f"view message {i}: unknown role {m.role!r} (expected one of {', '.join(ROLES)})")
        at = i
        i += 1
        if m.role != "assistant" or not m.tool_calls:
            out.append((at, m))
            continue
        ids = [c.id for c in m.tool_calls]
        answered: dict[str, ViewMessage] = {}
        orphans: list[ViewMessage] = []
        while i < n and messages[i].role == "tool":
            t = messages[i]
            if t.tool_call_id in ids and t.tool_call_id not in answered:
                answered[t.tool_call_id] = t
            else:
                orphans.append(t)
            i += 1
        out.append((at, Turn(m, tuple(answered[c] for c in ids if c in answered))))
        out.extend((at, o) for o in orphans)
    return out


def orphan_note(m: ViewMessage) -> str:
    """The user-role note carrying a tool result whose call is not in the view."""
    flag = " (error)" if m.is_error else ""
    return f"[tool result for call {m.tool_call_id} whose call is not in this view{flag}]\n{m.content}"


def tool_schema(schema: Mapping[str, Any], index: int) -> tuple[str, str, dict[str, Any]]:
    """``(name, description, JSON schema)`` of a tool in OpenAI, Anthropic or neutral shape.

    Accepted: ``{"type": "function", "function": {name, description, parameters}}``,
    ``{name, description, input_schema}`` and ``{name, description, parameters}``.
    ``ValueError`` names the tool index when there is no name.
    """
    spec = schema.get("function") if schema.get("type") == "function" else schema
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise ValueError(f"tool {index}: a tool schema needs a non-empty string 'name'")
    params = spec.get("parameters", spec.get("input_schema"))
    if params is None:
        params = {"type": "object", "properties": {}}
    return spec["name"], str(spec.get("description") or ""), _plain(params)


DERIVED_TOOL_DESCRIPTION = "(schema not recorded: derived from the calls in this request)"
"""The description of a tool schema derived from the calls of a view whose transcript did not record it."""


def wire_tools(view: Any, known_tools: Sequence[str] = ()) -> list[tuple[str, str, dict[str, Any]]]:
    """``(name, description, JSON schema)`` of every tool a request of ``view`` declares: its own schemas
    (:func:`tool_schema`); a view with none whose messages call tools (a transcript that recorded no schemas)
    gets a minimal schema per tool name instead, any object arguments, described as
    :data:`DERIVED_TOOL_DESCRIPTION`: the names of ``known_tools`` (the session's whole tool vocabulary, declared
    from its first request on, so the list stays the same and the provider's cached prefix holds), then any
    other name its messages call. Providers reject tool blocks without tools (Anthropic: "Requests which include tool_use or
    tool_result blocks must define tools")."""
    if view.tools:
        return _declared_tools(view.tools)
    called = [c.name for m in view.messages for c in m.tool_calls]
    return [(name, DERIVED_TOOL_DESCRIPTION, {"type": "object"}) for name in dict.fromkeys([*known_tools, *called])]


_KEPT_TOOLS: dict[bytes, tuple[list[tuple[str, str]], bytes]] = {}
MAX_KEPT_TOOLS = 64
"""Tool lists whose schemas are kept in their marshalled form (emptied past it)."""
KEEP_TOOLS = True
"""Keep a tool list's schemas marshalled (``False``: every request's schemas copied by :func:`_plain`, the same
values)."""
_JSON_LEAVES = (str, int, float, bool, type(None))


def _declared_tools(tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """``[tool_schema(s, i) for i, s in enumerate(tools)]``, each schema a fresh copy. A list of plain dicts,
    lists and JSON values (the same every request of a session) is converted once: its schemas are kept
    marshalled, keyed by the list's own marshalled bytes (its content, so a list changed in place is a new key),
    and each call unmarshals a copy (no container shared between two calls' results)."""
    if not KEEP_TOOLS:
        return [tool_schema(s, i) for i, s in enumerate(tools)]
    try:
        key = marshal.dumps(cast(Any, tools), 2)  # (version 2: no back-references, the same bytes for the same content;
        # dict subclasses, mapping proxies, str or int subclasses: ValueError)
    except ValueError:
        key = None
    kept = _KEPT_TOOLS.get(key) if key is not None else None
    if kept is None:
        declared = [tool_schema(s, i) for i, s in enumerate(tools)]
        if key is None or not all(_json_ready(p) for _, _, p in declared):
            return declared  # (a bytes-like leaf marshals as bytes: such a list is never kept)
        if len(_KEPT_TOOLS) >= MAX_KEPT_TOOLS:
            _KEPT_TOOLS.clear()
        _KEPT_TOOLS[key] = ([(n, d) for n, d, _ in declared], marshal.dumps([p for _, _, p in declared], 2))
        return declared
    names, frozen = kept
    return [(n, d, p) for (n, d), p in zip(names, marshal.loads(frozen), strict=True)]


def _json_ready(obj: Any) -> bool:
    """Whether ``obj`` is dicts, lists and JSON scalars alone (exact types; what :func:`_plain` makes of JSON)."""
    if type(obj) is dict:
        return all(type(k) is str and _json_ready(v) for k, v in obj.items())
    if type(obj) is list:
        return all(_json_ready(v) for v in obj)
    return type(obj) in _JSON_LEAVES


def undeclared_calls(called: bool, tools: Any) -> list[str]:
    """The violation of a body whose messages call tools (``called``) but whose ``tools`` declare none."""
    if called and not (isinstance(tools, list) and tools):
        return [
            "tools: the messages call tools but the body declares none (providers reject tool blocks without tools)"
        ]
    return []


def _plain(obj: Any) -> Any:
    """Mappings and sequences as dicts and lists (JSON-ready copies)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def image_data(ref: MediaRef, loader: ArtifactLoader | None) -> str | None:
    """Base64 of the artifact's bytes, or ``None`` without a loader."""
    if loader is None:
        return None
    return base64.b64encode(loader(ref.sha256)).decode("ascii")


def image_placeholder(ref: MediaRef) -> str:
    """Deterministic text standing in for an image whose bytes were not loaded."""
    size = f" {ref.width}x{ref.height}" if ref.width and ref.height else ""
    return f"[image {ref.media_type}{size}, {ref.byte_size} bytes, sha256 {ref.sha256[:16]}: not loaded]"


def is_image(ref: MediaRef) -> bool:
    return ref.media_type.startswith("image/")


def result_text(m: ViewMessage) -> str:
    return m.content if m.content else ("" if m.media else EMPTY_RESULT)


def nonempty(text: str) -> bool:
    return bool(text and text.strip())


def tools_problems(
    tools: Any, schema_of: Callable[[Any], tuple[str | None, Any]], shape: str, schema_field: str
) -> list[str]:
    """Violations of a request's ``tools`` list (shared by both validators).

    ``schema_of(tool)`` returns ``(name, schema)`` in the provider's shape (``None`` name when the
    entry is malformed); ``shape`` is the message for a malformed entry and ``schema_field`` names
    the schema key in messages. Checks: a list, a non-empty unique name each, a schema object each.
    """
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: must be a list"]
    out, seen = [], set()
    for i, t in enumerate(tools):
        name, schema = schema_of(t)
        if not isinstance(name, str) or not name:
            out.append(f"tools[{i}]: {shape}")
        elif name in seen:
            out.append(f"tools[{i}]: duplicate tool name {name!r}")
        else:
            seen.add(name)
            if not isinstance(schema, Mapping):
                out.append(f"tools[{i}]: {schema_field} must be a JSON schema object")
    return out


class Scan(Protocol):
    """A validator's state part way through a body's list of messages (or input items): :meth:`step` checks the
    next one, its violations appended to ``out``; :meth:`copy` is an independent copy (the state before the rest)."""

    out: list[str]

    def step(self, i: int, m: Any) -> None: ...

    def copy(self) -> Self: ...


S = TypeVar("S", bound=Scan)

KEPT_STATES = 8
"""How many of the last scanned positions :class:`ScanResume` keeps the state at (besides the start)."""


class ScanResume(Generic[S]):
    """A validator's scan kept from one body to the next: the messages that are the same objects, at the same
    positions, as the leading messages of the previous body scanned are not checked again; the scan resumes from
    its state after them (kept for the start and the last :data:`KEPT_STATES` positions; from the nearest kept
    position before, when the bodies part earlier).

    Sound only for message objects never changed in place between two scans (as
    :class:`latch.providers.WireCheck` renders its own): an object's identity stands for its content.
    ``start(key)`` makes the state at the start of a body; ``key`` (of :meth:`scan`) is whatever else the scan
    depends on (a body field), a different one starting over."""

    def __init__(self, start: Callable[[Any], S]) -> None:
        self._start = start
        self._key: Any = self
        self._seen: list[Any] = []
        self._after: dict[int, S] = {}  # position -> the state after that many messages of _seen
        self._field: tuple[Any, list[str]] | None = None

    def field(self, value: Any, check: Callable[[Any], list[str]]) -> list[str]:
        """``check(value)`` (a copy), kept while ``value`` is the same object as at the last call (a body field
        never changed in place, such as :class:`latch.providers.WireCheck`'s ``tools``)."""
        kept = self._field
        if kept is None or kept[0] is not value:
            kept = self._field = (value, check(value))
        return list(kept[1])

    def scan(self, messages: Sequence[Any], key: Any = None) -> S:
        """The state after every message of ``messages`` (a copy the caller may change)."""
        if key != self._key or not self._after:
            self._key, self._seen, self._after = key, [], {0: self._start(key)}
        seen, n = self._seen, min(len(messages), len(self._seen))
        j = 0
        while j < n and messages[j] is seen[j]:
            j += 1
        j = max(k for k in self._after if k <= j)
        del seen[j:]
        for k in [k for k in self._after if k > j]:
            del self._after[k]
        state = self._after[j].copy()
        keep_from = len(messages) - KEPT_STATES
        for i in range(j, len(messages)):
            state.step(i, messages[i])
            seen.append(messages[i])
            if i + 1 >= keep_from:
                self._after[i + 1] = state.copy()
        for k in [k for k in self._after if 0 < k < keep_from]:
            del self._after[k]
        return state
