"""Invariant tier: the store's event encoding and decoding equal the generic ones (DESIGN: "Durability rules").

:func:`~latch.events.canonical_payload` writes an event's canonical JSON from its fields; it must give the
same text as ``canonical_json(event.to_payload())`` (the durable format, byte for byte) or fail the same way,
for every kind and any field values, also values of other types than declared. A stored payload parsed by
:func:`~latch.events.decode_event` must give an event equal to ``from_payload`` of ``json.loads``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.events import (
    BUILTIN_KINDS,
    EVENT_KINDS,
    AgentValidation,
    AssistantMessage,
    McpToolEntry,
    MediaRef,
    RawArguments,
    SkillEntry,
    ToolCall,
    ToolResult,
    UserMessage,
    _fields,
    canonical_json,
    canonical_payload,
    decode_event,
)
from latch.store import EventStore


def reference_payload(event):
    """The generic encoding the store used before :func:`canonical_payload`."""
    return canonical_json(event.to_payload())


def reference_from_plain(cls, data):
    """The generic decoding into ``cls`` the store used before the per-class decoders."""
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
                value = tuple(reference_from_plain(sub, v) for v in value)
            else:
                value = reference_from_plain(sub, value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def reference_decode(kind, text):
    """The generic decoding the store used before the scanner was called directly."""
    data = json.loads(text)
    return reference_from_plain(EVENT_KINDS[kind], {k: v for k, v in data.items() if k != "kind"})


def same_decoding(a, b):
    """Equal outcomes, and equal events whose fields have the same types (``True`` is not ``1`` here)."""
    return type(a) is type(b) and repr(a) == repr(b)  # (repr: a NaN field equals itself)


def outcome(f):
    try:
        return "ok", f()
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        return "error", type(exc)


class Level(enum.IntEnum):
    LOW = 1


_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_text = st.text(max_size=30) | st.text(
    st.characters() | _surrogate | st.sampled_from('"\\\n\t\x00\x7f\u2028'), max_size=30
)
_scalar = st.none() | st.booleans() | st.integers() | st.floats() | _text
_json = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_text | st.integers(-3, 3) | st.booleans() | st.none(), inner, max_size=4)
    ),
    max_leaves=12,
)
_NESTED = (MediaRef, ToolCall, SkillEntry, McpToolEntry, AgentValidation)
_odd = (
    _json
    | _text.map(RawArguments)
    | st.just(Level.LOW)
    | st.lists(_json | _text, max_size=3).map(tuple)
    | st.lists(_json, max_size=3)
    | st.just(frozenset({1}))
    | st.just((MediaRef("ab" * 32, "image/png", 3), {"k": (1, 2)}, UserMessage("nested")))
    | st.just(MediaRef("cd" * 32, "image/jpeg", 9, 2, 3))
)


def _for_type(hint: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_for_type(a) for a in typing.get_args(hint)))
    if hint is type(None):
        return st.none()
    if origin is tuple:
        (item, _) = typing.get_args(hint)
        return st.lists(_for_type(item), max_size=3).map(tuple)
    if origin is dict:
        return st.dictionaries(_text, _json, max_size=4)
    if hint in _NESTED:
        return _dataclass(hint, odd=False)
    return {str: _text, int: st.integers(), bool: st.booleans(), float: st.floats()}.get(hint, _json)


def _dataclass(cls: type, *, odd: bool) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _for_type(hints[f.name]) for f in dataclasses.fields(cls)}
    if odd:
        fields = {name: s | _odd for name, s in fields.items()}
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


_events = st.sampled_from(BUILTIN_KINDS).flatmap(lambda cls: _dataclass(cls, odd=False) | _dataclass(cls, odd=True))


@settings(max_examples=400, deadline=None)
@given(event=_events)
def test_canonical_payload_equals_the_generic_encoding(event):
    got = outcome(lambda: canonical_payload(event))
    assert got == outcome(lambda: reference_payload(event))
    if got[0] == "ok":
        text = got[1]
        assert text.encode("utf-8")  # valid UTF-8: lone surrogates escaped
        assert same_decoding(
            outcome(lambda: decode_event(event.KIND, text)), outcome(lambda: reference_decode(event.KIND, text))
        )


@pytest.mark.parametrize("cls", BUILTIN_KINDS, ids=lambda c: c.KIND)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_kind_round_trips_as_before(cls, data):
    event = data.draw(_dataclass(cls, odd=False).filter(lambda e: outcome(lambda: reference_payload(e))[0] == "ok"))
    text = canonical_payload(event)
    assert text == reference_payload(event)
    decoded = decode_event(cls.KIND, text)
    assert same_decoding(decoded, reference_decode(cls.KIND, text))
    assert type(decoded) is cls and canonical_payload(decoded) == text


def _payloads(cls):
    names = [f.name for f in dataclasses.fields(cls)]
    keys = st.sampled_from([*names, "kind", "extra"])
    return st.dictionaries(keys, _json | st.lists(st.dictionaries(st.sampled_from(["sha256", "id", "x"]), _json)))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), cls=st.sampled_from(BUILTIN_KINDS))
def test_any_payload_decodes_as_before(data, cls):
    """Missing fields, unknown keys, values of any type, nested fields that hold no objects: the same event or
    the same error, from the text and from a mapping."""
    payload = data.draw(_payloads(cls))
    assert same_decoding(
        outcome(lambda: decode_event(cls.KIND, payload)),
        outcome(lambda: reference_from_plain(cls, {k: v for k, v in payload.items() if k != "kind"})),
    )
    text = json.dumps(payload)
    assert same_decoding(
        outcome(lambda: decode_event(cls.KIND, text)), outcome(lambda: reference_decode(cls.KIND, text))
    )


def test_payload_pins():
    calls = (ToolCall("c1", "Bash", '{"command":"ls"}'), ToolCall("c2", "Read", RawArguments("not json")))
    assert canonical_payload(AssistantMessage("é\ud800", calls, model="m")) == (
        '{"model":"m","reasoning_reported":false,"text":"é\\ud800","tool_calls":[{"arguments":"{\\"command\\":\\"ls\\"}",'
        '"id":"c1","name":"Bash"},{"arguments":"not json","id":"c2","name":"Read"}]}'
    )
    with pytest.raises(ValueError):
        canonical_payload(ToolResult("c", "x", exit_code=float("nan")))  # type: ignore[arg-type]


def test_decoding_a_payload_that_is_not_one_json_object_fails_as_json_loads_does():
    for text in ('{"text": "a"} x', '{"text": ', "[1]", ' {"text": "a"}', '{"text": "a"}  '):
        assert same_decoding(
            outcome(lambda t=text: decode_event("user_message", t)),
            outcome(lambda t=text: reference_decode("user_message", t)),
        )
    assert decode_event("user_message", '{"kind":"user_message","text":"a"}') == UserMessage("a")


def test_the_store_keeps_the_generic_text(tmp_path):
    events = [
        UserMessage("fix 金额 \ud800", media=(MediaRef("ab" * 32, "image/png", 12, 4, 5),)),
        AssistantMessage("ok", (ToolCall("c1", "Bash", '{"command":"ls"}'),)),
        ToolResult("c1", 'a "quoted"\n\tline\\', exit_code=0),
    ]
    with EventStore(tmp_path / "s.db") as store:
        sid = store.create_session(external_key="k")
        store.append(sid, events)
        rows = store._rows("SELECT kind, payload FROM events ORDER BY seq")
        assert [r[1] for r in rows] == [reference_payload(e) for e in events]
        assert [s.event for s in store.events(sid)] == [reference_decode(k, p) for k, p in rows]


def _generic_json(obj: Any, **options: Any) -> str:
    return re.sub(
        "[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", json.dumps(obj, ensure_ascii=False, **options)
    )


_str_dicts = st.dictionaries(_text | st.text(min_size=48), _text | st.text(max_size=300), max_size=5)


@settings(max_examples=300, deadline=None)
@given(obj=_str_dicts | st.dictionaries(_text, _json, max_size=4))
def test_canonical_json_of_an_object_is_the_encoders_text(obj):
    generic = outcome(lambda: _generic_json(obj, sort_keys=True, separators=(",", ":"), allow_nan=False))
    assert outcome(lambda: canonical_json(obj)) == generic


@settings(max_examples=300, deadline=None)
@given(obj=_str_dicts | st.dictionaries(_text, _json, max_size=4), name=st.sampled_from(["Bash", "Edit"]))
def test_the_indexed_text_of_a_call_is_its_arguments_as_the_json_module_writes_them(obj, name):
    for arguments in (outcome(lambda: canonical_json(obj))[1], json.dumps(obj, default=str)):
        if not isinstance(arguments, str):
            continue  # keys that do not sort
        readable = json.dumps(json.loads(arguments), ensure_ascii=False)  # lone surrogates back as they were
        assert AssistantMessage("", (ToolCall("c1", name, arguments),)).searchable_text() == f"{name} {readable}"


def test_an_object_with_a_value_that_is_not_a_plain_str_is_written_by_the_encoder():
    class Name(str):
        pass

    for obj in ({"b": "x", "a": 1}, {"a": Name("n")}, {"a": "x", "b": None}, {"k": ["v"]}, {}):
        assert canonical_json(obj) == _generic_json(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
    assert canonical_json({"b": "\ud800", "a": "é" * 60}) == '{"a":"' + "é" * 60 + '","b":"\\ud800"}'
