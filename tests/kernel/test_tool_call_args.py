"""``ToolCall.args()`` / ``ToolCall.paths()`` and ``canonical_arguments``."""

from __future__ import annotations

import copy
import json
import pickle
import sys

import pytest
from corpus_support import CORPUS, require_corpus

from latch.events import (
    PATH_KEYS,
    AssistantMessage,
    RawArguments,
    ToolCall,
    canonical_arguments,
    decode_event,
    parse_arguments,
    same_event,
)
from latch.host.ingest import parse_file


def test_args_is_parsed_once_and_changes_nothing_else():
    a = ToolCall("c1", "Read", '{"file_path": "src/a.py", "limit": 3}')
    b = ToolCall("c1", "Read", '{"file_path": "src/a.py", "limit": 3}')
    msg_b = AssistantMessage("x", (b,))
    before = (msg_b.encode(), pickle.dumps(b), repr(b), hash(b))
    assert a.args() == {"file_path": "src/a.py", "limit": 3}
    assert a.args() is a.args()  # cached on the instance
    b.args()
    assert (msg_b.encode(), pickle.dumps(b), repr(b), hash(b)) == before
    assert a == b and hash(a) == hash(b)
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    assert decode_event("assistant_message", msg_b.encode()) == msg_b


@pytest.mark.parametrize("text", ["", "  ", "not json", "{'a': 1}", "[" * (sys.getrecursionlimit() + 10), "1" * 5000])
def test_args_fallback_is_the_text_itself(text):
    value = ToolCall("c", "t", text).args()
    assert isinstance(value, RawArguments) and value == text
    assert ToolCall("c", "t", text).paths() == ()


def test_a_json_string_value_is_not_the_fallback():
    value = parse_arguments('"ls -la"')
    assert value == "ls -la" and not isinstance(value, RawArguments)


def test_paths_one_key_list():
    assert PATH_KEYS == ("file_path", "filePath", "notebook_path", "path", "filename", "file", "target_file")
    assert ToolCall("c", "write", json.dumps({"filePath": "src/orders.py", "content": "x"})).paths() == (
        "src/orders.py",
    )  # OpenCode's camelCase key
    call = ToolCall(
        "c",
        "Edit",
        json.dumps(
            {
                "path": "b.py",
                "target_file": "c.py",
                "file_path": "a.py",
                "filename": "a.py",
                "file": "  ",
                "notebook_path": 7,
            }
        ),
    )
    assert call.paths() == ("a.py", "b.py", "c.py")  # key order, no repeats, blank and non-strings skipped
    assert call.paths(("path",)) == ("b.py",)
    assert ToolCall("c", "Edit", '["a.py"]').paths() == ()


def test_canonical_arguments():
    assert canonical_arguments({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    with pytest.raises(ValueError):
        canonical_arguments({"a": float("nan")})


def test_same_event_reads_arguments_by_value():
    old = AssistantMessage("t", (ToolCall("c", "edit", '{"path": "a.py", "search": "\\u00e9"}'),))
    new = AssistantMessage("t", (ToolCall("c", "edit", '{"path":"a.py","search":"é"}'),))
    assert old != new and same_event(old, new)
    assert not same_event(old, AssistantMessage("t", (ToolCall("c", "edit", '{"path":"b.py","search":"é"}'),)))
    assert not same_event(old, AssistantMessage("u", new.tool_calls))
    assert not same_event(
        AssistantMessage("", (ToolCall("c", "x", '{"a": 1}'),)),
        AssistantMessage("", (ToolCall("c", "x", '{"a": true}'),)),
    )


@pytest.mark.parametrize("name", ["aider/monochromatic.aider.chat.history.md", "swe-agent/ctf_i_got_id_demo.traj"])
def test_importer_built_arguments_are_canonical(name):
    require_corpus()
    parsed = parse_file(CORPUS / name)
    calls = [c for pe in parsed.events if isinstance(pe.event, AssistantMessage) for c in pe.event.tool_calls]
    assert calls
    assert [c.arguments for c in calls] == [canonical_arguments(json.loads(c.arguments)) for c in calls]
