"""Parity: the native writer of an event's canonical JSON (``latch._native.CanonicalFields``) gives exactly the text
of the reference (``latch.events._fields_text_py``), or fails with the same exception type: the stored bytes of an
event are the same whichever backend wrote them.

Skips when the native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import events
from latch.events import (
    BUILTIN_KINDS,
    AssistantMessage,
    MediaRef,
    RawArguments,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    canonical_json,
)

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

WRITE = native.CanonicalFields(events._WRITERS, events._writer, events._generic_text)


class Level(enum.IntEnum):
    LOW = 1


def outcome(f):
    try:
        return "ok", f()
    except (ValueError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
        return "error", type(exc)


def both(obj):
    writer = events._writer(type(obj))
    assert writer is not None
    return outcome(lambda: WRITE(obj, writer)), outcome(lambda: events._fields_text_py(obj, writer))


# Every character class the writer treats apart: ASCII kept, escaped ASCII, DEL, latin-1, BMP, lone surrogates
# (alone and as a pair of two), non-BMP, and runs long enough for the 16-byte scan to find them at any offset.
_char = st.one_of(
    st.characters(),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.sampled_from(
        ['"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "\x80", "é", "\u2028", "\U0001f600"]
    ),
)
_text = st.one_of(
    st.text(_char, max_size=40),
    st.text(st.sampled_from('ab "\\\n\x01'), max_size=80),
    st.tuples(st.integers(0, 40), st.text(_char, max_size=3), st.integers(0, 40)).map(
        lambda t: "x" * t[0] + t[1] + "y" * t[2]
    ),
)
_int = st.one_of(
    st.integers(),
    st.sampled_from([0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64, 10**30, -(10**40)]),
)
_float = st.one_of(st.floats(), st.sampled_from([1e16, -0.0, 0.1, 1e-7, float("inf"), float("nan")]))
_scalar = st.one_of(st.none(), st.booleans(), _int, _float, _text, _text.map(RawArguments), st.just(Level.LOW))
_json = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple) | st.dictionaries(_text, inner, max_size=3)
    ),
    max_leaves=10,
)
_nested = st.one_of(
    st.builds(ToolCall, _text, _text, _text | _json),
    st.builds(MediaRef, _text, _text, _int | _json, st.none() | _int, st.none() | _int),
)
_value = st.one_of(_json, st.lists(_nested | _text | _json, max_size=4).map(tuple), st.lists(_nested, max_size=3))


@st.composite
def _events(draw):
    cls = draw(st.sampled_from(BUILTIN_KINDS))
    values = {f.name: draw(_value) for f in dataclasses.fields(cls)}
    return cls(**values)


@settings(max_examples=1500, deadline=None)
@given(event=_events())
def test_native_fields_text_matches_the_reference(event):
    got, want = both(event)
    assert got == want
    if got[0] == "ok":
        got[1].encode("utf-8")  # lone surrogates escaped: valid UTF-8


@settings(max_examples=500, deadline=None)
@given(text=_text, content=st.text(_char, min_size=0, max_size=600), code=_int | st.none())
def test_native_strings_and_ints_match_the_reference(text, content, code):
    for event in (UserMessage(text), ToolResult(text, content, exit_code=code), SystemNoteLike(text)):
        got, want = both(event)
        assert got == want


def SystemNoteLike(text):  # noqa: N802 - a kind with a str field and a default
    return events.SystemNote(text, subtype=text[:3])


@pytest.mark.parametrize(
    ("event", "text"),
    [
        (
            AssistantMessage("é\ud800\x01\x7f\U0001f600", (ToolCall("c1", "Bash", '{"a":"\\n"}'),), model="m"),
            '{"model":"m","reasoning_reported":false,"text":"é\\ud800\\u0001\x7f\U0001f600","tool_calls":'
            '[{"arguments":"{\\"a\\":\\"\\\\n\\"}","id":"c1","name":"Bash"}]}',
        ),
        (
            ToolResult("c", "", exit_code=2**70),
            f'{{"call_id":"c","content":"","exit_code":{2**70},"is_error":false,'
            '"media":[],"missing":false,"name":null,"orphan":false}',
        ),
        (Usage(input_tokens=-(2**63)), None),
    ],
)
def test_pinned_texts(event, text):
    got, want = both(event)
    assert got == want
    assert got[1] == (text if text is not None else canonical_json(event.to_payload()))


def test_values_the_json_module_refuses_fail_as_in_the_reference():
    for bad in (float("nan"), float("inf"), {"k": math.nan}, object(), [math.nan], (1, object())):
        got, want = both(ToolResult("c", "x", exit_code=bad))  # type: ignore[arg-type]
        assert got == want and got[0] == "error", bad


def test_a_missing_field_fails_as_getattr_does():
    class Broken:
        pass

    writer = (('{"text":', "text"),)
    assert outcome(lambda: WRITE(Broken(), writer)) == outcome(lambda: events._fields_text_py(Broken(), writer))
    assert outcome(lambda: WRITE(Broken(), writer))[1] is AttributeError


def test_the_store_uses_the_native_writer_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("LATCH_IMPL", raising=False)
    assert isinstance(events._fields_backend(), native.CanonicalFields)
    monkeypatch.setenv("LATCH_IMPL", "python")
    assert events._fields_backend() is events._fields_text_py


# ---- the indexed text of a call's arguments (``readable_str_object``)

_key_text = st.text(_char, max_size=12)
_flat = st.dictionaries(_key_text, st.text(_char, max_size=40), max_size=5)
_any = st.dictionaries(_key_text, _json, max_size=3) | st.lists(_json, max_size=3) | _json


@st.composite
def _argument_texts(draw):
    """JSON texts of flat objects of strings as encoders write them (any separators, ASCII or not, escaped
    surrogates, JSON's whitespace), and texts near them: other values, repeated keys, cut or edited texts."""
    value = draw(_flat | _any)
    ensure_ascii = draw(st.booleans())
    try:
        text = json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t"), ("\r,", ":  ")])),
            sort_keys=draw(st.booleans()),
        )
    except (TypeError, ValueError):
        text = "{}"
    edit = draw(st.integers(0, 5))
    if edit == 1 and text:
        text = text[: draw(st.integers(0, len(text) - 1))]  # cut
    elif edit == 2 and isinstance(value, dict) and value:
        key = json.dumps(next(iter(value)))
        text = text[:-1] + ("," if len(value) else "") + key + ':"again"}'  # a repeated key
    elif edit == 3:
        at = draw(st.integers(0, len(text)))
        text = (
            text[:at]
            + draw(st.sampled_from(["\\", "\\u", "\\ud800", "\\udc00", "\x01", "\ufeff", " ", '"']))
            + text[at:]
        )
    elif edit == 4:
        text = draw(st.sampled_from([" ", "\n", "\ufeff", ""])) + text + draw(st.sampled_from([" ", "\r\n", "x", ""]))
    return text


def _reference_readable(text):
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or any(type(v) is not str for v in value.values()):
        return None
    return json.dumps(value, ensure_ascii=False)


@settings(max_examples=3000, deadline=None)
@given(text=_argument_texts())
def test_readable_arguments_match_the_json_module(text):
    got = native.readable_str_object(text)
    want = _reference_readable(text)
    if got is not None:
        assert got == want
    elif want is not None:  # declined: only a repeated key, which the json module folds
        keys = [k for k, _ in json.loads(text, object_pairs_hook=lambda pairs: pairs)]
        assert len(keys) != len(set(keys))


@settings(max_examples=500, deadline=None)
@given(text=_argument_texts(), name=st.sampled_from(["Bash", "Edit"]))
def test_indexed_text_of_a_call_is_the_same_either_way(text, name):
    event = AssistantMessage("hi", (ToolCall("c1", name, text), ToolCall("c2", name, RawArguments(text))))
    fast = event.searchable_text()
    saved = events._readable_flat
    events._readable_flat = None
    try:
        assert AssistantMessage(event.text, event.tool_calls).searchable_text() == fast
    finally:
        events._readable_flat = saved


def test_readable_arguments_of_many_members_decline_only_a_repeated_key():
    members = {f"k{i}": f"v{i}" for i in range(200)}
    text = json.dumps(members)
    assert native.readable_str_object(text) == json.dumps(members, ensure_ascii=False)
    for at in (0, 17, 199):
        assert native.readable_str_object(text[:-1] + f', "k{at}": "again"}}') is None
    assert native.readable_str_object(text[:-1] + ', "k200": "new"}') == json.dumps(
        {**members, "k200": "new"}, ensure_ascii=False
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"a":"b"}',
        ' {"x\\u00e9" : "\\ud83d\\ude00\\n\\"" , "b":"\\ud800"} ',
        '{"k":"\\ud83d\\u0041"}',
        '{"k":"\\udbff\\udfff\\ud800\\udc00"}',
        '{"k":"\\ud83d\\uzzzz"}',
        '{"k":"\\ud83d"}',
        "{}",
        '{"a":1}',
        '{"a":"b","a":"c"}',
        '{"a":"b",}',
        '{"a":"\x01"}',
        '{"a":"\\/\\b\\f\\r\\t\x7f"}',
        "[1]",
        "",
    ],
)
def test_readable_arguments_examples(text):
    got = native.readable_str_object(text)
    want = _reference_readable(text)
    assert got == (want if text != '{"a":"b","a":"c"}' else None)
