"""Invariant tier: :func:`latch.events.slot_constructor` makes the instance the class's ``__init__`` makes.

A hot path (the decoded rows' :class:`~latch.store.event_store.StoredEvent`, the segmentation's view messages)
builds frozen dataclasses through it; the instance must be the same as ``cls(...)`` gives for any field values,
passed by position or by name, defaults left out, and a class it cannot serve must get ``cls`` itself.
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.events import (
    BUILTIN_KINDS,
    EVENT_KINDS,
    AssistantMessage,
    Event,
    MediaRef,
    ToolCall,
    UserMessage,
    decode_event,
    register_kind,
    slot_constructor,
)
from latch.port import ViewMessage, ViewToolCall
from latch.store.event_store import StoredEvent

SERVED = (ViewMessage, ViewToolCall, StoredEvent, MediaRef, ToolCall, UserMessage, AssistantMessage)
"""Plain frozen dataclasses with slots: served by a made constructor (the others may get the class itself)."""
CLASSES = (*SERVED, *(c for c in BUILTIN_KINDS if c not in SERVED))

_value = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.lists(st.integers(), max_size=3).map(tuple)
    | st.just(MediaRef("ab" * 32, "image/png", 3, 2, 1))
    | st.just(UserMessage("nested"))
    | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
)


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    for f in dataclasses.fields(type(a)):
        assert getattr(a, f.name) is getattr(b, f.name), f.name
    assert a == b and repr(a) == repr(b)
    assert pickle.loads(pickle.dumps(a)) == b


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_it_makes_what_init_makes(cls, data):
    make = slot_constructor(cls)
    if cls in SERVED:
        assert make is not cls
    fields = dataclasses.fields(cls)
    values = [data.draw(_value, label=f.name) for f in fields]
    _same(make(*values), cls(*values))
    by_name = {f.name: v for f, v in zip(fields, values, strict=True)}
    _same(make(**by_name), cls(**by_name))
    required = [f for f in fields if f.default is dataclasses.MISSING]
    left = {f.name: by_name[f.name] for f in required}
    _same(make(**left), cls(**left))  # defaults: the very default objects
    if fields:
        hashable = outcome_of(lambda: hash(cls(*values)))
        assert outcome_of(lambda: hash(make(*values))) == hashable


def outcome_of(f: Any) -> tuple[str, Any]:
    try:
        return "ok", f()
    except TypeError as exc:
        return "error", type(exc)


def test_wrong_arguments_raise_type_error_as_init_does():
    make = slot_constructor(ViewMessage)
    with pytest.raises(TypeError):
        make()
    with pytest.raises(TypeError):
        make("user", "x", nope=1)
    with pytest.raises(TypeError):
        make("user", "x", "conversation", (), None, False, (), 1, "one too many")
    made = make("user", "x", seq=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.seq = 4  # type: ignore[misc]


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("negative")


@dataclasses.dataclass(slots=True)
class _Mutable:
    n: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Factory:
    items: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _KeywordOnly:
    n: int


@dataclasses.dataclass(frozen=True)
class _NoSlots:
    n: int


@dataclasses.dataclass(frozen=True, slots=True)
class _NamedLikeItsLocals:
    new: int
    cls: int


class _Plain:
    def __init__(self, n: int) -> None:
        self.n = n


@pytest.mark.parametrize("cls", [_Checked, _Mutable, _Factory, _KeywordOnly, _NoSlots, _NamedLikeItsLocals, _Plain])
def test_a_class_it_cannot_serve_gets_the_class_itself(cls):
    assert slot_constructor(cls) is cls


def test_decoding_keeps_a_kinds_own_from_payload():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Shouted(Event):
        KIND = "test_shouted_slot_constructor"
        text: str = ""

        @classmethod
        def from_payload(cls, payload):
            return cls(text=str(payload.get("text", "")).upper())

    register_kind(Shouted)
    try:
        assert decode_event(Shouted.KIND, '{"text":"quiet"}') == Shouted("QUIET")
        assert decode_event(Shouted.KIND, {"kind": Shouted.KIND, "text": "low"}) == Shouted("LOW")
    finally:
        del EVENT_KINDS[Shouted.KIND]
    assert decode_event(
        "assistant_message", '{"text":"hi","tool_calls":[{"id":"c","name":"Bash","arguments":"{}"}]}'
    ) == (AssistantMessage("hi", (ToolCall("c", "Bash", "{}"),)))
