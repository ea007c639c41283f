"""OpenAI chat-completions messages importer (no corpus file: a realistic fixture written here)."""

from __future__ import annotations

import base64
import json

import pytest
from _importer_checks import (
    JUNK,
    assert_reimport_adds_nothing,
    assert_rejected,
    assert_shape,
    check_utf16_variant,
    detected,
    ref_kinds,
    tiny_png,
    write_json,
)

from latch.events import AssistantMessage, CompactionMarker, SystemNote, ToolResult, Usage, UserMessage
from latch.host.ingest import import_file
from latch.importers import TranscriptError, parse_file


def fixture_doc() -> dict:
    png = base64.b64encode(tiny_png(6, 4)).decode()
    return {
        "format": "openai-chat",
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a coding agent. Use the tools."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "The test in this screenshot fails. Fix it."},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}", "detail": "low"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Look at the file first.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "tests/test_fetch.py"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "run", "arguments": '{"cmd": "pytest -q"}'},
                    },
                ],
                "usage": {
                    "prompt_tokens": 1200,
                    "completion_tokens": 40,
                    "prompt_tokens_details": {"cached_tokens": 1000},
                },
            },
            {"role": "tool", "tool_call_id": "call_b", "content": "1 failed, 3 passed"},
            {
                "role": "tool",
                "tool_call_id": "call_a",
                "content": [{"type": "text", "text": "def test_fetch():\n    assert fetch(retries=0)"}],
            },
            {"role": "tool", "tool_call_id": "call_zzz", "content": "output of a call nobody made"},
            {
                "id": "chatcmpl-9",
                "object": "chat.completion",
                "model": "gpt-4o-2024-08-06",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": "<thinking>\nretries=0 means no retry\n</thinking>\nThe test expects no retry.",
                            "tool_calls": [
                                {
                                    "id": "call_c",
                                    "type": "function",
                                    "function": {"name": "edit", "arguments": '{"path": "src/fetch.py"}'},
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 1500, "completion_tokens": 60, "total_tokens": 1560},
            },
            {"role": "system", "content": "[compact_boundary] Conversation compacted"},
            {"role": "user", "content": "never mind, thanks"},
            {"role": "assistant", "content": "You're welcome."},
        ],
    }


# Counts by hand from fixture_doc(): 2 user messages (the image prompt, "never mind"), 3 assistant
# messages (messages[2], the chat.completion object [6], [9]), 3 tool calls (a, b, c), 3 results
# (b, a, the orphan call_zzz), 0 errors (the format has no error flag), 1 orphan, 1 missing (call_c:
# the user spoke next), usage on 2 requests: input (1200 - 1000) + 1500, cached 1000, output 40 + 60.
EXPECTED = dict(
    user_messages=2,
    assistant_messages=3,
    tool_calls=3,
    tool_results=3,
    tool_errors=0,
    orphan_results=1,
    missing_results=1,
    usage=dict(input_tokens=1700, output_tokens=100, cache_read_tokens=1000, cache_write_tokens=None, requests=2),
)


def test_fixture_events(tmp_path, store):
    path = write_json(tmp_path / "chat.json", fixture_doc())
    assert detected(path) == "openai-chat"
    parsed = parse_file(path)
    assert parsed.stats == EXPECTED
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("messages[0]", "SystemNote"),
        ("messages[1]", "UserMessage"),
        ("messages[2]", "AssistantMessage"),
        ("messages[2]#usage", "Usage"),
        ("messages[4]", "ToolResult"),
        ("messages[3]", "ToolResult"),  # call order, not arrival order
        ("messages[5]", "ToolResult"),
        ("messages[6]", "AssistantMessage"),
        ("messages[6]#usage", "Usage"),
        ("missing:call_c", "ToolResult"),
        ("messages[7]", "CompactionMarker"),
        ("messages[8]", "UserMessage"),
        ("messages[9]", "AssistantMessage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert ev["messages[0]"] == SystemNote(text="You are a coding agent. Use the tools.", subtype="system_prompt")
    (img,) = ev["messages[1]"].media
    assert (img.media_type, img.width, img.height, img.byte_size) == ("image/png", 6, 4, len(tiny_png(6, 4)))
    first = ev["messages[2]"]
    assert first.reasoning_reported and first.text == "" and first.model == "gpt-4o"
    assert [c.arguments for c in first.tool_calls] == ['{"path": "tests/test_fetch.py"}', '{"cmd": "pytest -q"}']
    assert ev["messages[2]#usage"] == Usage(input_tokens=200, output_tokens=40, cache_read_tokens=1000, model="gpt-4o")
    assert ev["messages[4]"] == ToolResult(
        call_id="call_a", content="def test_fetch():\n    assert fetch(retries=0)", name="read_file"
    )
    assert ev["messages[5]"].orphan
    second = ev["messages[6]"]
    assert second == AssistantMessage(
        text="The test expects no retry.",
        tool_calls=second.tool_calls,
        reasoning_reported=True,
        model="gpt-4o-2024-08-06",
    )
    assert ev["messages[6]#usage"] == Usage(
        input_tokens=1500, output_tokens=60, model="gpt-4o-2024-08-06", request_id="chatcmpl-9"
    )
    assert ev["missing:call_c"].missing
    assert ev["messages[7]"] == CompactionMarker(summary="Conversation compacted")
    assert ev["messages[8]"] == UserMessage(text="never mind, thanks")
    assert "retries=0 means no retry" not in json.dumps([e.to_payload() for e in ev.values()])
    assert parsed.external_key.startswith("openai-chat:sha256:")
    sid, _ = assert_reimport_adds_nothing(store, path)
    ref, data = store.get_artifact(img.sha256)
    assert data == tiny_png(6, 4) and (ref.width, ref.height) == (6, 4)
    assert store.session(sid).format == "openai-chat"


def test_bare_list_and_utf16(tmp_path):
    doc = fixture_doc()
    bare = write_json(tmp_path / "bare.json", doc["messages"])
    assert detected(bare) == "openai-chat"
    assert parse_file(bare).stats == EXPECTED
    wide = check_utf16_variant(tmp_path, write_json(tmp_path / "chat.json", doc), "openai-chat")
    assert wide.stats == EXPECTED  # and the same external key and events as the UTF-8 file


def test_plain_chat_is_openai(tmp_path):
    path = write_json(
        tmp_path / "plain.json",
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    )
    assert detected(path) == "openai-chat"


def test_consecutive_assistant_messages_are_one_request(tmp_path, store):
    # a converter writes each block of one response as a message: thinking, text, then each tool call
    usage = {"prompt_tokens": 900, "completion_tokens": 30}
    doc = [
        {"role": "user", "content": "list the tests"},
        {"role": "assistant", "content": "<thinking>\nls first\n</thinking>", "usage": usage},
        {"role": "assistant", "content": "I'll look.", "usage": usage},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t2", "type": "function", "function": {"name": "wc", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "tests/"},
        {"role": "tool", "tool_call_id": "t2", "content": "12"},
        {"role": "assistant", "content": "Twelve.", "usage": {"prompt_tokens": 950, "completion_tokens": 5}},
        # usage of its own that differs: the harness asked again with the answer as a prefill
        {"role": "assistant", "content": " Done.", "usage": {"prompt_tokens": 960, "completion_tokens": 2}},
    ]
    path = write_json(tmp_path / "split.json", doc)
    parsed = parse_file(path, format="openai-chat")
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("messages[0]", "UserMessage"),
        ("messages[1]", "AssistantMessage"),
        ("messages[1]#usage", "Usage"),
        ("messages[5]", "ToolResult"),
        ("messages[6]", "ToolResult"),
        ("messages[7]", "AssistantMessage"),
        ("messages[7]#usage", "Usage"),
        ("messages[8]", "AssistantMessage"),
        ("messages[8]#usage", "Usage"),
    ]
    first = parsed.events[1].event
    assert (first.text, [c.id for c in first.tool_calls], first.reasoning_reported) == (
        "I'll look.",
        ["t1", "t2"],
        True,
    )
    assert [pe.event.missing for pe in parsed.events[3:5]] == [False, False]
    assert parsed.events[2].event.input_tokens == 900
    sid, _ = assert_reimport_adds_nothing(store, path)
    from latch.host.loop import model_requests

    assert [r.usage.input_tokens for r in model_requests(store.events(sid))] == [900, 950, 960]


def test_legacy_function_call(tmp_path):
    doc = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
        {"role": "function", "name": "weather", "content": "-3 C"},
    ]
    parsed = parse_file(write_json(tmp_path / "legacy.json", doc), format="openai-chat")
    assert_shape(parsed.events)
    call = parsed.events[1].event.tool_calls[0]
    assert parsed.events[2].event == ToolResult(call_id=call.id, content="-3 C", name="weather")


def test_malformed_copies(tmp_path, store):
    good = write_json(tmp_path / "chat.json", fixture_doc())
    import_file(store, good)
    data = good.read_bytes()
    lines = data.split(b"\n")
    # cut mid-document: the parser reports the line where the text ends
    cut = data[: len(data) // 2]
    last_line = cut.count(b"\n") + 1
    assert_rejected(store, tmp_path / "cut.json", cut, where=f"line {last_line}", reason="invalid JSON")
    # invalid JSON in the middle: drop the colon after the key on the line holding "tool_call_id": "call_b"
    n = next(i for i, ln in enumerate(lines) if b'"call_b"' in ln and b"tool_call_id" in ln)
    broken = b"\n".join(lines[:n] + [lines[n].replace(b'"tool_call_id":', b'"tool_call_id"')] + lines[n + 1 :])
    assert_rejected(store, tmp_path / "badjson.json", broken, where=f"line {n + 1}", reason="invalid JSON")
    doc = fixture_doc()
    doc["messages"][3]["content"] = 42
    assert_rejected(
        store,
        tmp_path / "type.json",
        json.dumps(doc).encode(),
        where="messages[3]",
        reason="field 'content' must be a string, an array of parts or null, got number",
    )
    doc = fixture_doc()
    doc["messages"][2]["tool_calls"][1]["function"]["arguments"] = 7
    assert_rejected(
        store,
        tmp_path / "args.json",
        json.dumps(doc).encode(),
        where="messages[2]",
        reason="field 'tool_calls[1].function.arguments' must be a JSON string, got number",
    )
    doc = fixture_doc()
    doc["messages"][4]["role"] = "robot"
    assert_rejected(
        store, tmp_path / "role.json", json.dumps(doc).encode(), where="messages[4]", reason="unknown role 'robot'"
    )
    junk = b"\n".join(lines[:5] + [lines[5][:10] + JUNK + lines[5][10:]] + lines[6:])
    assert_rejected(store, tmp_path / "junk.json", junk, where="line 6", reason="not UTF-8 text")
    assert_rejected(store, tmp_path / "empty.json", b"", where=None, reason="file is empty", fmt="openai-chat")
    assert_rejected(store, tmp_path / "empty2.json", b"  \n", where=None, reason="file is empty")
    with pytest.raises(TranscriptError, match="expected an object with 'messages' or an array, got string"):
        parse_file(write_json(tmp_path / "str.json", "hello"), format="openai-chat")
