"""Invariant tier: deterministic serialization (DESIGN: "Durability rules"; spec: "Context metrics").

The same events always encode to the same bytes, in the store and in the request serialization
cacheability is measured on.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from invariant_helpers import continuity, grow, new_session, request, wire

from latch.bench.scenario import ScenarioModel
from latch.engine import ComponentTokens, ContextBudget, ContextView, ViewMessage, ViewToolCall
from latch.events import (
    AssistantMessage,
    MediaRef,
    ToolCall,
    ToolResult,
    UserMessage,
    canonical_bytes,
    canonical_json,
    decode_event,
)
from latch.providers import canonical_request_bytes
from latch.store import EventStore


def test_canonical_json_pins():
    assert (
        canonical_json({"b": [1, 2.5, None, True], "a": {"z": "ü 中", "y": ""}})
        == '{"a":{"y":"","z":"ü 中"},"b":[1,2.5,null,true]}'
    )
    assert canonical_json("lone \ud800 surrogate") == '"lone \\ud800 surrogate"'
    assert canonical_bytes({"k": "é"}) == b'{"k":"\xc3\xa9"}'
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


def test_event_encoding_pins():
    ref = MediaRef(sha256="ab" * 32, media_type="image/png", byte_size=1234, width=640, height=480)
    assert UserMessage("Fix 金额 rounding", media=(ref,)).encode() == (
        b'{"is_meta":false,"kind":"user_message","media":[{"byte_size":1234,"height":480,"media_type":"image/png",'
        b'"sha256":"' + b"ab" * 32 + b'","width":640}],"text":"Fix \xe9\x87\x91\xe9\xa2\x9d rounding"}'
    )
    assert AssistantMessage(tool_calls=(ToolCall("c1", "Bash", '{"command":"ls"}'),)).encode() == (
        b'{"kind":"assistant_message","model":null,"reasoning_reported":false,"text":"",'
        b'"tool_calls":[{"arguments":"{\\"command\\":\\"ls\\"}","id":"c1","name":"Bash"}]}'
    )


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40) | st.text(max_size=10)


@settings(max_examples=100, deadline=None)
@given(text=_text, is_error=st.booleans(), code=st.none() | st.integers(-5, 300))
def test_encode_decode_encode_is_stable(text, is_error, code):
    for ev in (
        UserMessage(text),
        ToolResult("c1", text, is_error=is_error, exit_code=code),
        AssistantMessage(text=text, tool_calls=(ToolCall("c", text or "t", "{}"),)),
    ):
        data = ev.encode()
        again = decode_event(ev.KIND, data).encode()
        assert again == data


def test_the_same_events_give_the_same_rows_and_the_same_requests(tmp_path):
    outs = []
    for name in ("a.db", "b.db"):
        store = EventStore(tmp_path / name)
        sid = new_session(store, "determinism")
        engine = continuity(store, sid)
        views = grow(store, sid, engine, 12, model=ScenarioModel(4, workspace="/work/shop"))
        rows = [(e.seq, e.kind, e.event.encode()) for e in store.events(sid)]
        outs.append((rows, [wire(v) for v in views], wire(engine.materialize(request(sid)))))
        store.close()
    assert outs[0] == outs[1]


def test_canonical_request_bytes_pin():
    view = ContextView(
        session_id="s",
        system="sys",
        tools=({"name": "Bash"},),
        messages=(
            ViewMessage("user", "hi 你好", kind="session_context"),
            ViewMessage("assistant", "", tool_calls=(ViewToolCall("c1", "Bash", "{}"),), seq=3),
            ViewMessage("tool", "ok", tool_call_id="c1", is_error=True, seq=4),
        ),
        tokens=ComponentTokens(),
        budget=ContextBudget(),
    )
    assert canonical_request_bytes(view) == (
        b'{"system":"sys"}\n{"tools":[{"name":"Bash"}]}\n{"content":"hi \xe4\xbd\xa0\xe5\xa5\xbd","role":"user"}\n'
        b'{"content":"","role":"assistant","tool_calls":[{"arguments":"{}","id":"c1","name":"Bash"}]}\n'
        b'{"content":"ok","is_error":true,"role":"tool","tool_call_id":"c1"}\n'
    )
