"""Event kinds as typed records, and the one canonical JSON encoding.

Every durable fact in Latch is an *event*: an immutable record appended to the
session's log (spec: "Sessions & continuity", L3 raw store). This module defines
the conversation kinds importers and the agent loop append, and the single
canonical encoding used for storage, hashing, prefix comparison and tests:
JSON with sorted keys, compact separators, UTF-8, no ASCII escaping. Lone
surrogates (possible in Python ``str``) are escaped as ``\\udXXX`` so the bytes
are always valid UTF-8.

Shapes follow the OpenAI/Anthropic message vocabulary:

* :class:`UserMessage`       a ``user`` turn (text plus optional :class:`MediaRef`)
* :class:`AssistantMessage`  an ``assistant`` turn: text, ``reasoning_reported``
  (never its text), and :class:`ToolCall` s
* :class:`ToolResult`        the answer to one tool call, linked by ``call_id``
* :class:`SystemNote`        harness/system notes (``subtype`` names the source)
* :class:`Usage`             provider-reported token usage of one request
* :class:`CompactionMarker`  a compaction imported from a foreign transcript
* :class:`SubagentMarker`    a sub-agent spawned through a tool call
* :class:`MediaRef`          a content-addressed artifact reference (image, file)

The kernel's records (:class:`StateUpdate`, :class:`FileObservation`, :class:`Mutation`,
:class:`ExternalChange`, :class:`ValidationEvidence`, :class:`ProcessStarted`,
:class:`ProcessExited`, :class:`WriterBlocker`, :class:`Tombstone`; documented and
re-exported by :mod:`latch.kernel.events`) and the agent's steering markers
(:class:`SteeringQueued`, :class:`SteeringDelivered`; re-exported by
:mod:`latch.agent.steering`) and child-agent records (:class:`AgentProfile`, :class:`AgentReport`;
used by :mod:`latch.agent.children`) are declared here too, so :data:`EVENT_KINDS` is one
explicit table of every kind Latch writes, complete as soon as this module is
imported: a process decodes any stored event without importing the kernel or the
agent (and this module imports nothing from ``latch`` but :mod:`latch.records`, which declares its classes).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from .records import dataclass

try:
    from . import _native  # the optional C++ extension (no Python layer): the canonical text of an event's fields
except ImportError:  # pragma: no cover - depends on build
    _native = None

_T = TypeVar("_T")

__all__ = [
    "slot_constructor",
    "EventClassTable",
    "PendingEvent",
    "Event",
    "UserMessage",
    "AssistantMessage",
    "ToolCall",
    "ToolResult",
    "SystemNote",
    "ATTACHMENT_NOTE",
    "Usage",
    "CompactionMarker",
    "SubagentMarker",
    "AgentProfile",
    "AgentReport",
    "AgentValidation",
    "AgentLifecycle",
    "AgentNotificationDelivered",
    "GroupTaskCreated",
    "GroupTaskClaimed",
    "GroupTaskCompleted",
    "GroupTaskLeaseRenewed",
    "GroupMemberJoined",
    "GroupMessageQueued",
    "GroupMessageDelivered",
    "RunStarted",
    "RunEnded",
    "RUN_OUTCOMES",
    "RunCommandQueued",
    "RunCommandApplied",
    "RUN_COMMANDS",
    "MediaRef",
    "canonical_json",
    "canonical_bytes",
    "canonical_arguments",
    "canonical_payload",
    "json_loads",
    "JSONNestingError",
    "RawArguments",
    "parse_arguments",
    "argument_paths",
    "PATH_KEYS",
    "same_event",
    "decode_event",
    "register_kind",
    "EVENT_KINDS",
    "BUILTIN_KINDS",
    "HarnessPrompt",
    "EVIDENCE_STATUSES",
    "AGENT_REPORT_STATUSES",
    "StateUpdate",
    "FileObservation",
    "Mutation",
    "ExternalChange",
    "ValidationEvidence",
    "ProcessStarted",
    "ProcessExited",
    "WriterBlocker",
    "Tombstone",
    "SteeringQueued",
    "SteeringDelivered",
    "ToolStarted",
    "EstimateCorrection",
    "SkillEntry",
    "SkillsListed",
    "McpToolEntry",
    "McpToolsListed",
]

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""The encoder of :func:`canonical_json`, made once (``json.dumps`` with options builds one per call)."""


def _surrogates_escaped(text: str) -> str:
    """``text`` with each lone surrogate written as ``\\uXXXX`` (so its UTF-8 encoding is valid)."""
    if not text.isascii() and _SURROGATE_RE.search(text):
        text = _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def canonical_json(obj: Any) -> str:
    """Return the canonical JSON text of ``obj``.

    Sorted keys, ``(",", ":")`` separators, non-ASCII kept as-is, lone
    surrogates escaped as ``\\uXXXX`` so that :func:`canonical_bytes` is always
    valid UTF-8. ``NaN``/``Infinity`` are rejected (``ValueError``).
    """
    items = _str_items(obj)
    if items is not None:  # the common argument object: written here, the same text as the encoder's
        items.sort()
        return _surrogates_escaped("{" + ",".join([_quote_str(k) + ":" + _quote_str(v) for k, v in items]) + "}")
    return _surrogates_escaped(_CANONICAL.encode(obj))


def _str_items(obj: Any) -> list[tuple[str, str]] | None:
    """The items of ``obj`` when it is a ``dict`` whose keys and values are all exactly ``str`` (no subclass), in
    insertion order; else ``None``."""
    if type(obj) is not dict:
        return None
    items = list(obj.items())
    for key, value in items:
        if type(key) is not str or type(value) is not str:
            return None
    return items


def canonical_bytes(obj: Any) -> bytes:
    """The canonical encoding as UTF-8 bytes (see :func:`canonical_json`)."""
    return canonical_json(obj).encode("utf-8")


def canonical_arguments(obj: Any) -> str:
    """The ``arguments`` text of a :class:`ToolCall` that Latch builds from a parsed object: its
    :func:`canonical_json` (sorted keys, compact, non-ASCII kept). Raises ``ValueError`` for NaN/Infinity.

    The rule for every stored tool argument: an importer that finds the model's arguments as a *string*
    in the transcript (OpenAI ``function.arguments``, Codex ``function_call.arguments``, ...) stores that
    string verbatim, never re-encoded (the raw store keeps what the model sent); arguments the importer,
    the agent loop or a kernel tool builds or receives as an *object* (Anthropic ``input``, an OpenHands
    action's ``args``, an Aider edit block, a synthesized ``{"command": ...}``) are stored as
    ``canonical_arguments(obj)``, so the same arguments are the same bytes whatever the source.
    Stores written before this rule hold some objects in other encodings; :func:`same_event` compares
    tool calls by their parsed arguments so that a re-import of such a transcript still matches.
    """
    return canonical_json(obj)


class JSONNestingError(Exception):
    """A JSON value nested deeper than the parser can follow (Python's recursion limit).

    Not a ``ValueError``: a sniffer that treats unparseable text as "not mine" lets it reach
    :func:`latch.importers.detect`, which then names the real problem.
    """


def _integer_too_long(text: str, start: int) -> json.JSONDecodeError:
    """The ``JSONDecodeError`` for an integer longer than Python converts (``sys.get_int_max_str_digits()``),
    placed at the first such digit run."""
    limit = sys.get_int_max_str_digits()
    run = re.compile(rf"\d{{{limit + 1},}}").search(text, start) if limit else None
    return json.JSONDecodeError("integer too long", text, run.start() if run else start)


def json_loads(text: str | bytes) -> Any:
    """``json.loads`` for transcript text: ``json.JSONDecodeError`` as usual (also ``integer too long`` for
    an integer of more digits than Python converts), :class:`JSONNestingError` instead of ``RecursionError``.
    The one safe JSON loader: importers, sniffers and :func:`parse_arguments` parse through it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise _integer_too_long(text if isinstance(text, str) else text.decode("utf-8", "replace"), 0) from None
    except RecursionError:
        raise JSONNestingError("JSON nested too deeply") from None


class RawArguments(str):
    """The fallback of :func:`parse_arguments`: the ``arguments`` text itself (a ``str``), returned when it
    is not JSON. Tell it apart from a JSON string value with ``isinstance(value, RawArguments)``."""

    __slots__ = ()


def parse_arguments(arguments: str) -> Any:
    """A tool call's ``arguments`` text parsed with :func:`json_loads`: ``dict``, ``list``, ``str``, ``int``,
    ``float``, ``bool`` or ``None`` as the JSON says.

    Never raises: text that is not JSON (also empty or blank text, JSON nested deeper than the parser
    follows, an integer too long to convert, a value that is not a ``str`` at all) comes back as
    :class:`RawArguments` holding the text unchanged (``str(arguments)``). The result may be shared (see
    :meth:`ToolCall.args`): do not mutate it.
    """
    if not isinstance(arguments, str):
        return RawArguments(arguments)
    try:
        return json_loads(arguments)
    except (ValueError, JSONNestingError):  # JSONDecodeError is a ValueError
        return RawArguments(arguments)


PATH_KEYS: tuple[str, ...] = ("file_path", "filePath", "notebook_path", "path", "filename", "file", "target_file")
"""The argument keys that name a file, in priority order (:func:`argument_paths`): the union of the key
lists the kernel, the engine, the bench and the baselines used before ``ToolCall.paths`` (Claude Code
``file_path``/``notebook_path``, OpenCode ``filePath``, OpenHands/SWE-agent ``path``, Aider ``path``,
Gemini/Cline ``file``/``target_file``/``filename``). Only string values count: list forms (``paths``, ``edits``) are not read."""


def argument_paths(value: Any, keys: tuple[str, ...] = PATH_KEYS) -> tuple[str, ...]:
    """The file paths a parsed arguments ``value`` names: for each of ``keys`` in order, its value when
    that is a string that is not blank, unchanged (not stripped), without repeats; ``()`` when ``value``
    is not a ``dict``."""
    if not isinstance(value, dict):
        return ()
    found: dict[str, None] = {}
    for key in keys:
        v = value.get(key)
        if isinstance(v, str) and v.strip():
            found[v] = None
    return tuple(found)


EVENT_KINDS: dict[str, type[Event]] = {}
"""``{KIND: class}`` for :func:`decode_event`: every class of :data:`BUILTIN_KINDS`, filled when this
module is imported (no lazy import, no import of the kernel), plus any :func:`register_kind` additions."""


def register_kind(cls: type[Event]) -> type[Event]:
    """Register ``cls`` (an :class:`Event` subclass with a ``KIND``) for :func:`decode_event`; returns ``cls``.

    Every kind Latch writes is already in :data:`BUILTIN_KINDS`; this is for an event kind defined
    outside Latch, whose module must then be imported before such an event is decoded. Raises
    ``ValueError`` when another class already owns the kind.
    """
    kind = cls.KIND
    other = EVENT_KINDS.get(kind)
    if other is not None and other is not cls:
        raise ValueError(
            f"event kind {kind!r} registered twice: {other.__module__}.{other.__qualname__} and {cls.__module__}.{cls.__qualname__}"
        )
    EVENT_KINDS[kind] = cls
    return cls


class Event:
    """Base of every event record. Subclasses are frozen dataclasses with ``KIND``."""

    KIND: ClassVar[str] = ""

    def to_payload(self) -> dict[str, Any]:
        """The JSON-ready payload (no ``kind``); ``None`` fields are kept (unknown ≠ 0)."""
        payload: dict[str, Any] = _to_plain(self)
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Event:
        event: Event = _from_plain(cls, payload)
        return event

    def encode(self) -> bytes:
        """Canonical bytes of ``{"kind": KIND, **payload}``."""
        return canonical_bytes({"kind": self.KIND, **self.to_payload()})

    def searchable_text(self) -> str:
        """Text indexed by FTS5 (never reasoning text, signatures or base64)."""
        return ""


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event about to be appended: ``source_ref`` (e.g. ``"line:12"``) makes re-imports idempotent."""

    event: Event
    source_ref: str | None = None
    ts: str | None = None


_FIELDS: dict[type, tuple[tuple[str, type | None], ...] | None] = {}
"""Per class: its dataclass fields' names and nested dataclass (``None``: plain), in order, or ``None`` when the
class is no dataclass; read once per class (emptied by register_nested)."""


def _fields(cls: type) -> tuple[tuple[str, type | None], ...] | None:
    try:
        return _FIELDS[cls]
    except KeyError:
        got = _FIELDS[cls] = (
            tuple((f.name, _NESTED.get((cls.__name__, f.name))) for f in dataclasses.fields(cls))
            if dataclasses.is_dataclass(cls)
            else None
        )
        return got


def _to_plain(obj: Any) -> Any:
    fields = _fields(type(obj))  # a class itself is no instance: its type is not a dataclass
    if fields is not None:
        return {name: _to_plain(getattr(obj, name)) for name, _ in fields}
    if isinstance(obj, (list, tuple)):
        return [_to_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _to_plain(v) for k, v in obj.items()}
    return obj


def _from_plain(cls: type, data: Mapping[str, Any]) -> Any:
    """``cls`` rebuilt from its plain ``data`` (:func:`_from_plain_generic`), by the class's made decoder."""
    try:
        decode = _DECODERS[cls]
    except KeyError:
        decode = _DECODERS[cls] = _decoder(cls)
    return decode(data)


def _from_plain_generic(cls: type, data: Mapping[str, Any]) -> Any:
    """``cls(**fields)`` from the fields ``data`` holds (others ignored): lists become tuples, and a nested
    dataclass field's dicts its instances. Raises ``TypeError`` when ``cls`` is no dataclass or a field without
    a default is missing."""
    fields = _fields(cls)
    if fields is None:
        raise TypeError(f"cannot decode into {cls.__name__}: not a dataclass")
    kwargs = {}
    for name, sub in fields:
        if name not in data:
            continue
        value = data[name]
        if sub is not None and value is not None:
            if isinstance(value, list):
                value = tuple(_from_plain(sub, v) for v in value)
            else:
                value = _from_plain(sub, value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


_DECODERS: dict[type, Callable[[Mapping[str, Any]], Any]] = {}
"""Per class: the function :func:`_from_plain` calls (emptied by register_nested)."""


def _field_setter(cls: type, name: str) -> Callable[[Any, Any], None] | None:
    """The ``__set__`` of the slot that holds field ``name`` (it sets a frozen instance's field), or ``None``."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found.__set__ if isinstance(found, types.MemberDescriptorType) else None
    return None


def _decoder(cls: type) -> Callable[[Mapping[str, Any]], Any]:
    """A function doing what :func:`_from_plain_generic` does for ``cls``, made for the class: for a frozen
    dataclass with slots whose ``__init__`` is the one ``dataclasses`` makes (no ``__post_init__``), one that
    fills a new instance's slots straight from a ``dict``, falling back to the generic path for anything else
    (another mapping, a missing field, which then raises as ``cls(...)`` does). Same instances either way
    (tests/invariants/test_event_codec_parity.py)."""
    generic = functools.partial(_from_plain_generic, cls)
    fields = _fields(cls)
    init = getattr(getattr(cls, "__init__", None), "__code__", None)
    if fields is None or hasattr(cls, "__post_init__") or init is None or init.co_filename != "<string>":
        return generic
    if getattr(cls, "__new__", None) is not object.__new__:
        return generic
    env: dict[str, Any] = {"new": object.__new__, "cls": cls, "M": dataclasses.MISSING, "generic": generic}
    lines = ["def decode(data):", "    if type(data) is not dict:", "        return generic(data)"]
    lines += ["    get = data.get", "    obj = new(cls)"]
    for i, (f, (name, sub)) in enumerate(zip(dataclasses.fields(cls), fields, strict=True)):
        setter = _field_setter(cls, name)
        if setter is None or not f.init or f.name != name:
            return generic
        env[f"set{i}"] = setter
        lines += [f"    v = get({name!r}, M)", "    if v is M:"]
        if f.default is not dataclasses.MISSING:
            env[f"default{i}"] = f.default
            lines.append(f"        v = default{i}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"factory{i}"] = f.default_factory
            lines.append(f"        v = factory{i}()")
        else:
            lines.append("        return generic(data)")
        if sub is None:
            lines += ["    elif isinstance(v, list):", "        v = tuple(v)"]
        else:
            env[f"sub{i}"] = functools.partial(_from_plain, sub)
            lines += [
                "    elif v is not None:",
                f"        v = tuple(map(sub{i}, v)) if isinstance(v, list) else sub{i}(v)",
            ]
        lines.append(f"    set{i}(obj, v)")
    lines.append("    return obj")
    exec("\n".join(lines), env)  # noqa: S102 - the text is made here from the class's field names
    made: Callable[[Mapping[str, Any]], Any] = env["decode"]
    return made


_V = TypeVar("_V")


class EventClassTable(dict[type, _V]):
    """A value per event class: ``table[cls]`` is the value of the first ``(base, value)`` of ``bases`` with
    ``issubclass(cls, base)`` (``base`` a class or a tuple of classes), else ``default``. So a subclass of an event
    class reads as that class, in the order given. Worked out once per class met, then a plain dict lookup (the
    dispatch of code that handles each event by its class). Raises nothing for any class."""

    __slots__ = ("bases", "default")

    def __init__(self, bases: Sequence[tuple[type | tuple[type, ...], _V]], default: _V):
        super().__init__()
        self.bases = tuple(bases)
        self.default = default

    def __missing__(self, cls: type) -> _V:
        value = next((v for base, v in self.bases if issubclass(cls, base)), self.default)
        self[cls] = value
        return value


def slot_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A function taking ``cls``'s fields as its ``__init__`` does (positionally or by name, the same defaults) and
    returning the instance ``cls(...)`` returns. For a frozen dataclass with slots whose ``__init__`` is the one
    ``dataclasses`` makes (every field in ``__init__``, no ``__post_init__``, no default factory, the plain
    ``object.__new__``), it fills a new instance's slots directly: a frozen ``__init__`` sets each field through
    ``object.__setattr__``, about twice the cost per field. For any other class it is ``cls`` itself. Made once per
    class (a hot path keeps it); tests/invariants/test_slot_constructor.py holds it to ``cls(...)``."""
    fields = _fields(cls)
    init = getattr(getattr(cls, "__init__", None), "__code__", None)
    if (
        fields is None
        or not getattr(cls, "__dataclass_params__", None)
        or not cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        or hasattr(cls, "__post_init__")
        or init is None
        or init.co_filename != "<string>"
        or getattr(cls, "__new__", None) is not object.__new__
    ):
        return cls
    env: dict[str, Any] = {"new": object.__new__, "cls": cls}
    params, body = [], ["    obj = new(cls)"]
    for i, f in enumerate(dataclasses.fields(cls)):  # type: ignore[arg-type]
        setter = _field_setter(cls, f.name)
        if (
            setter is None
            or not f.init
            or f.kw_only
            or f.default_factory is not dataclasses.MISSING
            or f.name in ("new", "cls", "obj")
            or f.name.startswith(("set", "default"))
        ):
            return cls
        env[f"set{i}"] = setter
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            env[f"default{i}"] = f.default
            params.append(f"{f.name}=default{i}")
        body.append(f"    set{i}(obj, {f.name})")
    code = "\n".join([f"def make({', '.join(params)}):", *body, "    return obj"])
    exec(code, env)  # noqa: S102 - the text is made here from the class's field names
    made: Callable[..., _T] = env["make"]
    made.__name__ = made.__qualname__ = f"make_{cls.__name__}"
    return made


# ------------------------------------------------------------------ fast canonical text and decoding of events
# The store encodes every appended event and decodes every event it reads. canonical_payload writes the text of
# ``canonical_json(event.to_payload())`` from a per-class table made on first use, and a stored payload is parsed
# by the JSON scanner directly (tests/invariants/test_event_codec_parity.py holds both to the generic path;
# benchmarks/test_bench_event_codec.py times the two).

_quote_str = json.encoder.encode_basestring
"""A JSON string literal as :func:`canonical_json` writes it (non-ASCII kept): the C function when built."""
_WRITERS: dict[type, tuple[tuple[str, str], ...] | None] = {}
"""Per dataclass: ``(key text, field name)`` in sorted key order, each key text the ``{"name":`` or ``,"name":``
that precedes the field's value; ``None`` for a class that is no dataclass. Emptied by register_nested."""


def _writer(cls: type) -> tuple[tuple[str, str], ...] | None:
    try:
        return _WRITERS[cls]
    except KeyError:
        fields = _fields(cls)
        names = sorted(name for name, _ in fields) if fields is not None else None
        got = _WRITERS[cls] = (
            tuple((("{" if i == 0 else ",") + _quote_str(name) + ":", name) for i, name in enumerate(names))
            if names is not None
            else None
        )
        return got


def _fields_json(obj: Any, writer: tuple[tuple[str, str], ...], parts: list[str]) -> None:
    """Append to ``parts`` the canonical JSON text of dataclass ``obj``'s fields (``_to_plain(obj)``): plain
    strings, numbers, booleans, ``None`` and tuples of strings or dataclasses written here, any other value
    (a dict, a subclass of ``str``) by :data:`_CANONICAL` from its ``_to_plain``."""
    add = parts.append
    for key, name in writer:
        add(key)
        value = getattr(obj, name)
        kind = type(value)
        if kind is str:
            add(_quote_str(value))
        elif value is None:
            add("null")
        elif kind is bool:
            add("true" if value else "false")
        elif kind is int:
            add(int.__repr__(value))
        elif (kind is tuple or kind is list) and not value:
            add("[]")
        elif kind is tuple or kind is list:
            first = True
            for item in value:
                add("[" if first else ",")
                first = False
                if type(item) is str:
                    add(_quote_str(item))
                elif (item_writer := _writer(type(item))) is not None:
                    _fields_json(item, item_writer, parts)
                else:
                    add(_generic_text(item))
            add("]")
        else:  # floats (NaN is refused there), dicts, subclasses of str or int: the generic encoder
            add(_generic_text(value))
    if not writer:
        add("{")
    add("}")


def _generic_text(value: Any) -> str:
    """The text :func:`_fields_json` writes for a value it does not write itself: the json module's."""
    return _CANONICAL.encode(_to_plain(value))


def _fields_text_py(obj: Any, writer: tuple[tuple[str, str], ...]) -> str:
    """The canonical JSON text of dataclass ``obj``'s fields as ``writer`` (:func:`_writer`) lists them, lone
    surrogates escaped: the reference of the native ``CanonicalFields``
    (``tests/parity/test_canonical_fields_parity.py``)."""
    parts: list[str] = []
    _fields_json(obj, writer, parts)
    return _surrogates_escaped("".join(parts))


def _native_entry(name: str) -> Any:
    """The native module's ``name``, or ``None`` when ``LATCH_IMPL=python``, the extension is not built or lacks it."""
    if _native is None or os.environ.get("LATCH_IMPL", "auto").strip().lower() == "python":
        return None
    return getattr(_native, name, None)


def _fields_backend() -> Callable[[Any, tuple[tuple[str, str], ...]], str]:
    """The native writer of :func:`_fields_text_py`'s text, unless ``LATCH_IMPL=python`` or the extension is not
    built: the reference."""
    make = _native_entry("CanonicalFields")
    if make is None:
        return _fields_text_py
    native: Callable[[Any, tuple[tuple[str, str], ...]], str] = make(_WRITERS, _writer, _generic_text)
    return native


_fields_text = _fields_backend()


def canonical_payload(event: Event) -> str:
    """The canonical JSON text of ``event``'s payload: ``canonical_json(event.to_payload())``, the same text,
    written from the event's fields without building the payload (a class that overrides
    :meth:`Event.to_payload` goes through it), by the native module when it is built. What the store keeps of an
    event. Raises ``ValueError`` for NaN or Infinity and ``TypeError`` for a value JSON cannot hold, as
    :func:`canonical_json` does."""
    cls = type(event)
    writer = _writer(cls) if cls.to_payload is Event.to_payload else None
    if writer is None:
        return canonical_json(event.to_payload())
    return _fields_text(event, writer)


_SCAN: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The JSON scanner of ``json.loads`` (the C one when built), called without ``loads``' wrappers."""


def _loads_object(text: str | bytes) -> Any:
    """``json.loads(text)``: the same value and the same errors, the scanner called directly when ``text`` is
    a ``str`` that starts with ``{`` (a stored payload)."""
    if type(text) is str and text[:1] == "{":
        try:
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError, RecursionError):
            return json.loads(text)  # raises as json.loads does
        if end == len(text):
            return value
    return json.loads(text)


@dataclass(frozen=True, slots=True)
class MediaRef:
    """A reference to a content-addressed artifact (bytes live in the store).

    ``sha256`` is the hex digest of the bytes; ``width``/``height`` are pixels
    (``None`` when unknown: estimators then use a conservative fallback).
    """

    sha256: str
    media_type: str
    byte_size: int
    width: int | None = None
    height: int | None = None


class _ParsedSlot:
    """A slot outside the dataclass fields for :meth:`ToolCall.args`' cache: not compared, hashed,
    pickled, copied, printed or encoded (those all go through the fields only)."""

    __slots__ = ("_parsed",)
    _parsed: Any


_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class ToolCall(_ParsedSlot):
    """One tool call: ``id`` links it to its :class:`ToolResult`; ``arguments`` is a JSON string
    (stored as the transcript had it, or :func:`canonical_arguments` when built from an object)."""

    id: str
    name: str
    arguments: str

    def args(self) -> Any:
        """The parsed :attr:`arguments` (:func:`parse_arguments`: a ``dict`` usually; :class:`RawArguments`,
        the text itself, when it is not JSON), parsed on first use and kept on this instance. The value
        is shared between calls: do not mutate it (copy it first)."""
        try:
            return self._parsed
        except AttributeError:
            value = parse_arguments(self.arguments)
            object.__setattr__(self, "_parsed", value)
            return value

    def paths(self, keys: tuple[str, ...] = PATH_KEYS) -> tuple[str, ...]:
        """The file paths the arguments name: :func:`argument_paths` of :meth:`args` (the non-blank string
        values of :data:`PATH_KEYS`, in that order, unchanged, no repeats); ``()`` for arguments that are
        not a JSON object. ``keys`` narrows or reorders the list for a caller that must."""
        return argument_paths(self.args(), keys)


@dataclass(frozen=True, slots=True)
class UserMessage(Event):
    """A ``user`` turn. ``is_meta`` marks harness-injected text (still a user turn)."""

    KIND: ClassVar[str] = "user_message"
    text: str
    media: tuple[MediaRef, ...] = ()
    is_meta: bool = False

    def searchable_text(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class AssistantMessage(Event):
    """An ``assistant`` turn: visible text, whether reasoning was reported, tool calls."""

    KIND: ClassVar[str] = "assistant_message"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning_reported: bool = False
    model: str | None = None

    def searchable_text(self) -> str:
        parts = [self.text] if self.text else []
        for c in self.tool_calls:
            parts.append(f"{c.name} {_readable_arguments(c)}")
        return "\n".join(parts)


def _readable_arguments(call: ToolCall) -> str:
    """Tool-call ``arguments`` as FTS5 should see them: JSON re-serialized with its ``\\u`` escapes
    decoded (``"\\u8fde\\u63a5"`` indexes as ``"连接"``); text that is not JSON stays as it is."""
    if _readable_flat is not None:  # a flat object of strings, the common arguments: written without parsing
        text = _readable_flat(call.arguments)
        if text is not None:
            return text
    value = call.args()
    if isinstance(value, RawArguments):
        return call.arguments
    items = _str_items(value)
    if items is not None:  # the common arguments: written here, the same text as the encoder's
        return "{" + ", ".join([_quote_str(k) + ": " + _quote_str(v) for k, v in items]) + "}"
    try:
        return _READABLE.encode(value)
    except (ValueError, RecursionError):
        return call.arguments


_READABLE = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(value, ensure_ascii=False)``'s encoder, made once."""
_readable_flat: Callable[[str], str | None] | None = _native_entry("readable_str_object")
"""The native text of :func:`_readable_arguments` for arguments that are one JSON object of strings (``None``
for other arguments; ``tests/parity/test_canonical_fields_parity.py``), unless ``LATCH_IMPL=python`` or the
extension is not built."""


@dataclass(frozen=True, slots=True)
class ToolResult(Event):
    """The result of one tool call.

    ``orphan`` marks a result whose call is missing from the transcript;
    ``missing`` marks a placeholder appended by an importer for a call whose
    result never came (an aborted turn). Both are kept, never dropped.
    :attr:`eof_placeholder` tells apart the one kind of placeholder a later
    event may supersede.
    """

    KIND: ClassVar[str] = "tool_result"
    call_id: str
    content: str
    is_error: bool = False
    name: str | None = None
    orphan: bool = False
    missing: bool = False
    media: tuple[MediaRef, ...] = ()
    exit_code: int | None = None

    def searchable_text(self) -> str:
        return self.content

    @property
    def eof_placeholder(self) -> bool:
        """True for the ``missing`` placeholder earlier importers stored for a call still pending at
        the end of a growing transcript. The real result may be stored later (after a re-import of
        the grown file), so readers treat such a placeholder as "no result yet" and never as a failure.
        Importers no longer write it: a call pending at the end of the file simply has no result yet.
        """
        return self.missing and self.content == EOF_PLACEHOLDER_TEXT


EOF_PLACEHOLDER_TEXT = "[no result: the transcript ends before the tool result]"
"""Content of the legacy end-of-file placeholder (see :attr:`ToolResult.eof_placeholder`)."""


ATTACHMENT_NOTE = "attachment:"
"""Prefix of the :class:`SystemNote` subtype of text a harness injected as an attachment the transcript keeps
only there (Claude Code's deferred-tool, MCP-instruction, skill and agent listings: ``attachment:skill_listing``).
Such a note is indexed for full-text search (``latch search``, an explicit recall query) like every note, and like
every note it is not provider-visible conversation; the engine's own recall never brings it back and the episode
index takes no terms from it, so importing it changes no view's messages. The harness sent the listings with
every request: their tokens are part of the overhead a replay infers from provider usage."""


@dataclass(frozen=True, slots=True)
class SystemNote(Event):
    """A harness/system note.

    ``subtype`` vocabulary used by the importers: ``system_prompt`` (the
    harness's system prompt), ``developer`` (OpenAI/Codex developer messages),
    ``system`` (later system messages), ``api_error``, ``session_start``,
    ``aider_output``, ``cost``, ``note``, and ``attachment:<type>`` (:data:`ATTACHMENT_NOTE`).
    """

    KIND: ClassVar[str] = "system_note"
    text: str
    subtype: str = "note"

    def searchable_text(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Usage(Event):
    """Provider-reported usage of one model request, normalized to Anthropic semantics.

    ``input_tokens`` is the *uncached* input; ``cache_read_tokens`` and
    ``cache_write_tokens`` are disjoint from it, so the prompt size is their
    sum (:attr:`prompt_tokens`). Unknown categories stay ``None``, never 0.
    """

    KIND: ClassVar[str] = "usage"
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    model: str | None = None
    request_id: str | None = None

    @property
    def prompt_tokens(self) -> int | None:
        """input + cache_read + cache_write, or ``None`` when input is unknown."""
        if self.input_tokens is None:
            return None
        return self.input_tokens + (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)


@dataclass(frozen=True, slots=True)
class CompactionMarker(Event):
    """A compaction that happened in a foreign harness (imported, never Latch's own)."""

    KIND: ClassVar[str] = "compaction_marker"
    trigger: str | None = None
    pre_tokens: int | None = None
    post_tokens: int | None = None
    summary: str = ""

    def searchable_text(self) -> str:
        return self.summary


@dataclass(frozen=True, slots=True)
class SubagentMarker(Event):
    """A sub-agent spawned by the tool call ``call_id`` (its report is that call's result)."""

    KIND: ClassVar[str] = "subagent_marker"
    call_id: str
    agent_id: str | None = None
    agent_type: str | None = None
    description: str = ""

    def searchable_text(self) -> str:
        return self.description


# ------------------------------------------------------------------- kernel kinds (latch.kernel.events)
EVIDENCE_STATUSES = ("passed", "failed", "unknown")
"""``passed`` / ``failed`` from an exit status or unambiguous output; ``unknown`` otherwise."""


@dataclass(frozen=True, slots=True)
class StateUpdate(Event):
    """One kernel tool call: ``tool`` (a name in ``KERNEL_TOOLS``) and its validated ``arguments``.

    The text FTS indexes is ``"<tool>: <the argument values>"``, so decisions,
    constraints and disproofs are found by exact recall.
    """

    KIND: ClassVar[str] = "state_update"
    tool: str
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)

    def searchable_text(self) -> str:
        parts: list[str] = []
        for key in sorted(self.arguments):
            value = self.arguments[key]
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, (list, tuple)):
                parts.extend(str(v) for v in value)
        return f"{self.tool}: " + " | ".join(parts)


@dataclass(frozen=True, slots=True)
class FileObservation(Event):
    """A read of ``path`` (workspace-relative when inside the workspace).

    ``sha256``/``size`` (bytes) describe the whole file and are set only when it
    is at most 64 KiB; larger files are read in pages (``offset``/``length`` in
    bytes) with no whole-file hash.
    """

    KIND: ClassVar[str] = "file_observation"
    path: str
    sha256: str | None = None
    size: int | None = None
    offset: int = 0
    length: int | None = None


@dataclass(frozen=True, slots=True)
class Mutation(Event):
    """A change to the workspace; every mutation advances the workspace generation by one.

    ``paths`` empty means the changed files are unknown (a formatter run over
    the tree): it stales everything a file-scoped record relies on.
    ``sha256_before``/``sha256_after`` are set by guarded writes of one file.
    """

    KIND: ClassVar[str] = "mutation"
    paths: tuple[str, ...] = ()
    tool: str = ""
    sha256_before: str | None = None
    sha256_after: str | None = None

    def searchable_text(self) -> str:
        return "mutation " + " ".join(self.paths) if self.paths else ""


@dataclass(frozen=True, slots=True)
class ExternalChange(Event):
    """``path`` changed outside the agent: its bytes no longer hash to ``expected_sha256``.

    ``actual_sha256`` is ``None`` when the file is gone. The model must re-read it.
    """

    KIND: ClassVar[str] = "external_change"
    path: str
    expected_sha256: str | None = None
    actual_sha256: str | None = None

    def searchable_text(self) -> str:
        return f"external change {self.path}"


@dataclass(frozen=True, slots=True)
class ValidationEvidence(Event):
    """The outcome of one proving ``command`` for its exact ``requirements`` (a validation set).

    ``status`` is one of :data:`EVIDENCE_STATUSES`. The workspace generation it
    checked is the generation at this event's ``seq`` (computed by replay, never
    trusted from the payload). ``requirements`` empty means the command itself.
    """

    KIND: ClassVar[str] = "validation_evidence"
    command: str
    status: str
    requirements: tuple[str, ...] = ()
    exit_code: int | None = None
    summary: str = ""

    def searchable_text(self) -> str:
        return f"validation {self.status}: {self.command}\n{self.summary}".rstrip()


@dataclass(frozen=True, slots=True)
class ProcessStarted(Event):
    """A managed process ``process_id`` started running ``command``; it blocks certification until it exits.

    Where it runs, when Latch started it (all ``None`` for a process derived from a transcript; ``None`` fields
    are left out of the payload): ``pgid`` its process group (the group leader's pid; the process has a session
    of its own), ``pgid_start`` the leader's start time (clock ticks after boot, Linux ``/proc/PID/stat``
    field 22: a reused process group id is told apart), ``owner_pid`` / ``owner_start`` the Latch process whose
    watcher records the exit, and ``host`` (the hostname). A resumed run reconciles a process whose owner is gone
    (:meth:`latch.agent.tools.processes.ProcessManager.reconcile`)."""

    KIND: ClassVar[str] = "process_started"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("pgid", "pgid_start", "owner_pid", "owner_start", "host")
    process_id: str
    command: str = ""
    pgid: int | None = None
    pgid_start: int | None = None
    owner_pid: int | None = None
    owner_start: int | None = None
    host: str | None = None

    def to_payload(self) -> dict[str, Any]:
        return {k: v for k, v in _to_plain(self).items() if not (k in self.OPTIONAL and v is None)}

    def searchable_text(self) -> str:
        return f"process {self.process_id} started: {self.command}"


@dataclass(frozen=True, slots=True)
class ProcessExited(Event):
    """Managed process ``process_id`` exited (``exit_code`` ``None`` when killed or unknown).

    ``unknown`` (left out of the payload when false): the exit was not observed. The watcher that would have
    recorded it died with its run (SIGKILL, a crash), and a later run reconciled the process: it killed what was
    left of its process group or found it gone. ``exit_code`` is then ``None``."""

    KIND: ClassVar[str] = "process_exited"
    process_id: str
    exit_code: int | None = None
    unknown: bool = False

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = _to_plain(self)
        if not self.unknown:
            del payload["unknown"]
        return payload


@dataclass(frozen=True, slots=True)
class WriterBlocker(Event):
    """The writer reported ``blocker`` instead of finishing.

    Repeats of the same blocker with no workspace change in between are failed
    certification attempts, whatever ``command`` and ``command_passed`` say.
    """

    KIND: ClassVar[str] = "writer_blocker"
    blocker: str
    command: str | None = None
    command_passed: bool | None = None

    def searchable_text(self) -> str:
        return f"writer blocker: {self.blocker}"


@dataclass(frozen=True, slots=True)
class Tombstone(Event):
    """The session's history was deleted: normal history and resume selectors omit it.

    Raw events, child sessions, artifacts, mutations and the generation are untouched.
    """

    KIND: ClassVar[str] = "tombstone"
    reason: str = ""


# ------------------------------------------------------------- agent kinds (latch.agent.steering)
@dataclass(frozen=True, slots=True)
class SteeringQueued(Event):
    """A user message waiting for the next safe boundary (not provider-visible)."""

    KIND: ClassVar[str] = "steering_queued"
    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class SteeringDelivered(Event):
    """Dedupe marker: ``message_id`` was delivered as the preceding ``UserMessage``."""

    KIND: ClassVar[str] = "steering_delivered"
    message_id: str


@dataclass(frozen=True, slots=True)
class ToolStarted(Event):
    """The agent began executing tool call ``call_id`` (after its permission ``decision``: ``allow``, or
    ``ask`` answered yes). Appended before the tool runs, after the assistant message that holds the call:
    a ``ToolStarted`` with no :class:`ToolResult` after it is a call interrupted mid-execution (spec:
    "commit before execution"). Not provider-visible."""

    KIND: ClassVar[str] = "tool_started"
    call_id: str
    name: str = ""
    decision: str = "allow"


@dataclass(frozen=True, slots=True)
class EstimateCorrection(Event):
    """The provider counted ``provider_tokens`` for a request Latch estimated at ``estimated_tokens``
    (spec: "Bounded materialization": provider usage is authoritative). Later views of the session are
    budgeted with the largest such ratio, so the same shape of text never overflows twice. ``source`` is
    ``usage`` (a reported prompt size) or ``overflow`` (the provider refused the request). Not
    provider-visible."""

    KIND: ClassVar[str] = "estimate_correction"
    provider_tokens: int
    estimated_tokens: int
    source: str = "usage"


@dataclass(frozen=True, slots=True)
class HarnessPrompt(Event):
    """What Latch's own agent (``latch run``) sent with a session's requests besides the conversation: the
    ``system_prompt`` (the provider system field), ``tools`` (the canonical JSON text of the neutral tool
    schemas ``[{"name", "description", "input_schema"}, ...]``, in request order) and the session context
    (spec: "Port boundary": ``workspace``, ``repository_instructions``, skills listing included, and ``mode``)
    rendered as the first provider-visible message. Appended once per session, in the transaction of its first
    committed request (:class:`latch.agent.loop.AgentLoop`), and again only when a resumed run sends a
    different one; :mod:`latch.host.harness` reads it so ``latch view`` and ``latch replay`` of the session
    send what the provider got. Not provider-visible itself, not indexed for search."""

    KIND: ClassVar[str] = "harness_prompt"
    system_prompt: str = ""
    tools: str = "[]"
    workspace: str | None = None
    repository_instructions: str = ""
    mode: str = "default"


@dataclass(frozen=True, slots=True)
class SkillEntry:
    """One Agent Skill of a session's list: its ``name``, one-line ``description``, the absolute ``path`` of
    its folder (the one holding ``SKILL.md``) and ``source`` (``workspace``, ``user`` or ``claude``)."""

    name: str
    description: str
    path: str
    source: str = "workspace"


@dataclass(frozen=True, slots=True)
class SkillsListed(Event):
    """The Agent Skills a session offers, fixed when it starts (spec: "Agent Skills and MCP"): their names and
    descriptions form part of the session context, in this order (sorted by name), for the whole session and
    on resume; a skill added or edited later changes nothing already sent. Not provider-visible itself."""

    KIND: ClassVar[str] = "skills_listed"
    skills: tuple[SkillEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class McpToolEntry:
    """One MCP tool offered in a session: the provider-visible ``name`` (``mcp__SERVER__TOOL``), the
    ``server`` and its own ``tool`` name, and ``schema`` (the canonical JSON text of the neutral tool schema
    ``{"name", "description", "input_schema"}``, exactly what every request of the session offers).
    ``read_only`` is the server's ``readOnlyHint`` (only ``true`` makes a call not a possible mutation)."""

    name: str
    server: str
    tool: str
    schema: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class McpToolsListed(Event):
    """The MCP tools a session offers, listed once when it starts and retained for the whole session (spec:
    "Disconnect retains MCP schemas"): a server that restarts or re-lists its tools differently never changes
    the request's tools. ``servers`` names every configured server, ``failed`` those that could not be listed
    then (with the one-line reason). Not provider-visible itself."""

    KIND: ClassVar[str] = "mcp_tools_listed"
    tools: tuple[McpToolEntry, ...] = ()
    servers: tuple[str, ...] = ()
    failed: dict[str, str] = dataclasses.field(default_factory=dict)


# ----------------------------------------------------------- child agents (latch.agent.children)
@dataclass(frozen=True, slots=True)
class AgentProfile(Event):
    """The durable profile of a child agent session, its first event (spec: "Port boundary", child sessions).

    ``parent_session_id`` and ``call_id`` name the parent's ``spawn_agent`` call; ``brief`` is the
    delegation brief (also the child's first user message); ``model`` the child's model id; ``engine``
    the engine plugin name the child policy built it with; ``config`` the effective config (a JSON
    object); ``tools`` the tool names offered, in request order. Spawn, worker reconstruction and resume
    all build the child's engine from this record. ``background``: the parent's call returned at once and
    the report arrives as an :class:`AgentNotificationDelivered`. Not provider-visible.
    """

    KIND: ClassVar[str] = "agent_profile"
    parent_session_id: str
    call_id: str
    brief: str
    model: str | None = None
    engine: str | None = None
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    tools: tuple[str, ...] = ()
    background: bool = False


@dataclass(frozen=True, slots=True)
class AgentValidation:
    """One validation a child ran: ``command``, ``status`` (``passed``/``failed``/``unknown``) and its
    ``exit_code`` (``None`` when unknown). Informational: never evidence of the parent."""

    command: str
    status: str
    exit_code: int | None = None


AGENT_REPORT_STATUSES = ("completed", "max_turns", "failed")
"""How a child ended: answered without a tool call, ran out of turns, or stopped on an error."""


@dataclass(frozen=True, slots=True)
class AgentReport(Event):
    """The typed result of a child agent, its last event: ``status`` (one of
    :data:`AGENT_REPORT_STATUSES`), ``summary`` (the child's final text, or the error), the
    workspace-relative ``files_touched`` (in first-touch order), the ``validations`` it ran and the
    number of model ``turns``. The report is the only thing a parent receives (as the result of its
    ``spawn_agent`` call); its validations never become parent evidence. Not provider-visible."""

    KIND: ClassVar[str] = "agent_report"
    status: str
    summary: str = ""
    files_touched: tuple[str, ...] = ()
    validations: tuple[AgentValidation, ...] = ()
    turns: int = 0


AGENT_LIFECYCLE_PHASES = ("spawned", "completed")


@dataclass(frozen=True, slots=True)
class AgentLifecycle(Event):
    """Bookkeeping in the parent's session: child ``child_session_id`` (of call ``call_id``) was
    ``spawned`` or ``completed`` (with the report's ``status``). Never provider-visible, never indexed for
    recall (spec: "Cache epochs": asynchronous child lifecycle events are hidden)."""

    KIND: ClassVar[str] = "agent_lifecycle"
    child_session_id: str
    call_id: str
    phase: str
    status: str | None = None


@dataclass(frozen=True, slots=True)
class AgentNotificationDelivered(UserMessage):
    """A background child's report delivered to its parent at a safe model boundary: a user-role turn
    (``text`` is the rendered report, so it is provider-visible and appended to the current cache epoch
    like any user turn) and the durable dedupe marker of ``child_session_id`` (each report is delivered
    exactly once, across restarts)."""

    KIND: ClassVar[str] = "agent_notification_delivered"
    child_session_id: str = ""
    call_id: str = ""


# ------------------------------------------------------------------ agent groups (latch.agent.group)
@dataclass(frozen=True, slots=True)
class GroupTaskCreated(Event):
    """A task of the agent group rooted in this session: ``task_id`` (unique in the group), ``title``,
    the ``brief`` a worker's child starts from, and the ``depends_on`` task ids that must complete first."""

    KIND: ClassVar[str] = "group_task_created"
    task_id: str
    title: str
    brief: str = ""
    depends_on: tuple[str, ...] = ()

    def searchable_text(self) -> str:
        return f"task {self.task_id}: {self.title}"


@dataclass(frozen=True, slots=True)
class GroupTaskClaimed(Event):
    """``agent`` owns ``task_id``. Stored with the source ref ``group-claim:<task_id>`` (``attempt`` 0)
    or ``group-claim:<task_id>:<attempt>`` (a reclaim) in the root session, so the one transaction that
    appends it decides the owner: a second claim of one attempt adds nothing. ``lease_seconds`` (``None``:
    the claim never expires) and ``at`` (Unix seconds when it was claimed): once ``lease_seconds`` pass
    after ``at`` or the owner's last :class:`GroupTaskLeaseRenewed` with no completion, attempt
    ``attempt + 1`` may reclaim the task."""

    KIND: ClassVar[str] = "group_task_claimed"
    task_id: str
    agent: str
    attempt: int = 0
    lease_seconds: float | None = None
    at: float | None = None


@dataclass(frozen=True, slots=True)
class GroupTaskLeaseRenewed(Event):
    """The owner of claim ``attempt`` of ``task_id`` is alive at ``at`` (Unix seconds): its lease runs
    ``lease_seconds`` from here. Not provider-visible."""

    KIND: ClassVar[str] = "group_task_lease_renewed"
    task_id: str
    agent: str
    attempt: int = 0
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class GroupTaskCompleted(Event):
    """``agent`` finished ``task_id`` with ``status`` (``completed``/``failed``) and a ``summary``."""

    KIND: ClassVar[str] = "group_task_completed"
    task_id: str
    agent: str
    status: str = "completed"
    summary: str = ""
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMemberJoined(Event):
    """``agent`` joined the group; its own session is ``session_id`` (``None``: not running yet)."""

    KIND: ClassVar[str] = "group_member_joined"
    agent: str
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMessageQueued(Event):
    """Information from ``sender`` for ``recipient``, pending until the recipient's next safe boundary."""

    KIND: ClassVar[str] = "group_message_queued"
    message_id: str
    sender: str
    recipient: str
    text: str


@dataclass(frozen=True, slots=True)
class GroupMessageDelivered(UserMessage):
    """A group message delivered in the recipient's own session: one compact user-role observation
    (``text``) and, through its source ref ``group-delivered:<message_id>``, its own delivery marker
    (exactly once across restarts). Information only: never evidence."""

    KIND: ClassVar[str] = "group_message_delivered"
    message_id: str = ""
    sender: str = ""
    recipient: str = ""
    root_session_id: str = ""


# ------------------------------------------------------------------ run lifecycle and commands (latch.host.runs)
RUN_OUTCOMES = ("done", "max_turns", "stopped", "error", "interrupted")
"""How a run ends (:class:`RunEnded` ``outcome``): an answer without tool calls, ``--max-turns`` reached, a
``stop`` command applied, a provider or view error, a keyboard interrupt."""


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    """``latch run`` began executing this session (spec: "Transient interface activity": the durable run
    lifecycle the UIs combine with activity): run ``run_id`` in process ``pid`` on ``host`` (the hostname),
    at ``started_at`` (ISO-8601 UTC). ``process_start`` is the process's start time in clock ticks after boot
    (Linux ``/proc/PID/stat`` field 22; ``None`` elsewhere), so a reused pid is told apart. A ``RunStarted``
    without a :class:`RunEnded` whose process is gone is a run that was killed: interrupted, never live or
    completed. Not provider-visible."""

    KIND: ClassVar[str] = "run_started"
    run_id: str
    pid: int
    host: str
    started_at: str
    process_start: int | None = None


@dataclass(frozen=True, slots=True)
class RunEnded(Event):
    """Run ``run_id`` ended at ``ended_at`` (ISO-8601 UTC) with ``outcome`` (one of :data:`RUN_OUTCOMES`) and
    the process ``exit_code``; ``detail`` is a one-line reason (the error). Not provider-visible."""

    KIND: ClassVar[str] = "run_ended"
    run_id: str
    outcome: str
    ended_at: str
    exit_code: int | None = None
    detail: str = ""


RUN_COMMANDS = ("stop", "compact")
"""The run commands besides steering (which is a :class:`SteeringQueued`): ``stop`` ends the run at its next
safe boundary, ``compact`` requests a rotation at its next request."""


@dataclass(frozen=True, slots=True)
class RunCommandQueued(Event):
    """A ``command`` (one of :data:`RUN_COMMANDS`) for the session's running agent, with its receipt
    ``command_id``, from ``source`` (``web``, ``tui``). Stored with the source ref ``command:<command_id>`` (a
    retried request adds nothing). Pending until a run applies it at a safe boundary. Never
    provider-visible, never memory or cache-epoch input (spec: "Browser observation and reconnect")."""

    KIND: ClassVar[str] = "run_command_queued"
    command_id: str
    command: str
    source: str = "web"


@dataclass(frozen=True, slots=True)
class RunCommandApplied(Event):
    """Run ``run_id`` applied command ``command_id`` (``result`` ``applied``), or ended before it could
    (``result`` ``moot``: a ``stop`` that arrived after the run's last boundary). Stored with the source ref
    ``command-applied:<command_id>``, so each command is applied once. Not provider-visible."""

    KIND: ClassVar[str] = "run_command_applied"
    command_id: str
    command: str
    run_id: str = ""
    result: str = "applied"


BUILTIN_KINDS: tuple[type[Event], ...] = (
    UserMessage,
    AssistantMessage,
    ToolResult,
    SystemNote,
    Usage,
    CompactionMarker,
    SubagentMarker,
    StateUpdate,
    FileObservation,
    Mutation,
    ExternalChange,
    ValidationEvidence,
    ProcessStarted,
    ProcessExited,
    WriterBlocker,
    Tombstone,
    SteeringQueued,
    SteeringDelivered,
    ToolStarted,
    EstimateCorrection,
    HarnessPrompt,
    SkillsListed,
    McpToolsListed,
    AgentProfile,
    AgentReport,
    AgentLifecycle,
    AgentNotificationDelivered,
    GroupTaskCreated,
    GroupTaskClaimed,
    GroupTaskCompleted,
    GroupTaskLeaseRenewed,
    GroupMemberJoined,
    GroupMessageQueued,
    GroupMessageDelivered,
    RunStarted,
    RunEnded,
    RunCommandQueued,
    RunCommandApplied,
)
"""Every event kind Latch writes, in one explicit list: conversation, kernel, agent."""

for _cls in BUILTIN_KINDS:
    register_kind(_cls)
del _cls


_NESTED: dict[tuple[str, str], type] = {
    ("UserMessage", "media"): MediaRef,
    ("ToolResult", "media"): MediaRef,
    ("AssistantMessage", "tool_calls"): ToolCall,
    ("SkillsListed", "skills"): SkillEntry,
    ("McpToolsListed", "tools"): McpToolEntry,
    ("AgentReport", "validations"): AgentValidation,
}


def decode_event(kind: str, payload: Mapping[str, Any] | str | bytes) -> Event:
    """Rebuild an event from its ``kind`` and payload (dict or canonical JSON).

    Raises ``KeyError`` naming the known kinds for a kind not in :data:`EVENT_KINDS`.
    """
    if isinstance(payload, (str, bytes)):
        data = _loads_object(payload)  # a new dict: "kind" is taken out of it only when there
        copy = type(data) is not dict or "kind" in data
    else:
        data, copy = payload, True
    cls = EVENT_KINDS.get(kind)
    if cls is None:
        raise KeyError(f"unknown event kind {kind!r}; known: {', '.join(sorted(EVENT_KINDS))}")
    if copy:
        data = {k: v for k, v in data.items() if k != "kind"}
    try:
        decode = _KIND_DECODERS[cls]
    except KeyError:
        decode = _KIND_DECODERS[cls] = _kind_decoder(cls)
    return decode(data)  # type: ignore[no-any-return]


_KIND_DECODERS: dict[type, Callable[[Mapping[str, Any]], Any]] = {}
"""Per event class: what ``cls.from_payload`` does, without its two calls when the class keeps
:meth:`Event.from_payload` (the class's made decoder, :func:`_decoder`). Emptied by register_nested."""


def _kind_decoder(cls: type) -> Callable[[Mapping[str, Any]], Any]:
    if getattr(cls.from_payload, "__func__", None) is not Event.from_payload.__func__:  # type: ignore[attr-defined]
        return cls.from_payload  # type: ignore[attr-defined, no-any-return]
    try:
        return _DECODERS[cls]
    except KeyError:
        decode = _DECODERS[cls] = _decoder(cls)
        return decode


def register_nested(owner: str, field_name: str, cls: type) -> None:
    """Declare that ``owner.field_name`` holds dataclass(es) of ``cls`` (for decoding)."""
    _NESTED[(owner, field_name)] = cls
    _FIELDS.clear()
    _WRITERS.clear()
    _DECODERS.clear()
    _KIND_DECODERS.clear()


def same_event(a: Event, b: Event) -> bool:
    """Whether ``a`` and ``b`` are the same event, reading tool-call ``arguments`` by value.

    ``a == b``, or both are :class:`AssistantMessage` s equal but for the bytes of their tool calls'
    arguments, each pair having the same ``id`` and ``name`` and arguments that parse to the same JSON
    (equal :func:`canonical_json`). An import identity must not depend on the argument encoding: a store
    written before :func:`canonical_arguments` holds some arguments unsorted or ASCII-escaped, and a
    re-import of the same transcript must still match them. Text that is not JSON compares as bytes.
    """
    if a == b:
        return True
    if not (isinstance(a, AssistantMessage) and isinstance(b, AssistantMessage)):
        return False
    if len(a.tool_calls) != len(b.tool_calls) or dataclasses.replace(a, tool_calls=()) != dataclasses.replace(
        b, tool_calls=()
    ):
        return False
    return all(
        x.id == y.id and x.name == y.name and _same_arguments(x, y)
        for x, y in zip(a.tool_calls, b.tool_calls, strict=False)
    )


def _same_arguments(x: ToolCall, y: ToolCall) -> bool:
    if x.arguments == y.arguments:
        return True
    u, v = x.args(), y.args()
    if isinstance(u, RawArguments) or isinstance(v, RawArguments):
        return False
    try:
        return canonical_json(u) == canonical_json(v)
    except (ValueError, RecursionError):  # NaN/Infinity, or too deep to encode
        return False
