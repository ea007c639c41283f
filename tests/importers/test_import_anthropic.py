"""Anthropic Messages JSON importer (no corpus file: a realistic fixture written here)."""

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

from latch.events import AssistantMessage, SystemNote, ToolResult, Usage, UserMessage
from latch.host.ingest import import_file
from latch.importers import TranscriptError, parse_file


def _png_block(width: int, height: int, level: int = 9) -> dict:
    data = base64.b64encode(tiny_png(width, height, level)).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def fixture_doc() -> dict:
    return {
        "model": "claude-x",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "This chart looks wrong, fix the test."}, _png_block(8, 8)],
            },
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-x-2",
                "content": [
                    {"type": "thinking", "thinking": "The axis is inverted.", "signature": "c2lnbmF0dXJl"},
                    {"type": "text", "text": "Let me run the test and read the plot code."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest -q"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "plot.py"}},
                ],
                "stop_reason": "tool_use",
                "usage": {
                    "input_tokens": 12,
                    "cache_read_input_tokens": 9000,
                    "cache_creation_input_tokens": 800,
                    "output_tokens": 95,
                },
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [{"type": "text", "text": "def plot(): ..."}, _png_block(2, 3)],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "Exit code 1\n1 failed",
                        "is_error": True,
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_9", "content": "result of an unknown call"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_3", "name": "Edit", "input": {"file_path": "plot.py"}}],
            },
            {"role": "user", "content": "Stop, I'll do it myself."},
            {
                "id": "msg_03",
                "type": "message",
                "role": "assistant",
                "model": "claude-x-2",
                "content": [{"type": "text", "text": "OK."}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 5, "output_tokens": 3},
            },
        ],
    }


# Counts by hand from fixture_doc(): 2 user messages (the chart prompt, "Stop..."; the tool-result-only
# message is not a user message), 3 assistant messages, 3 tool_use blocks, 3 tool_result blocks of which
# 1 is_error (toolu_1) and 1 orphan (toolu_9), 1 missing (toolu_3: the next assistant message came first),
# usage on 2 responses: input 12 + 5, output 95 + 3, cache_read 9000, cache_creation 800.
EXPECTED = dict(
    user_messages=2,
    assistant_messages=3,
    tool_calls=3,
    tool_results=3,
    tool_errors=1,
    orphan_results=1,
    missing_results=1,
    usage=dict(input_tokens=17, output_tokens=98, cache_read_tokens=9000, cache_write_tokens=800, requests=2),
)


def test_fixture_events(tmp_path, store):
    path = write_json(tmp_path / "messages.json", fixture_doc())
    assert detected(path) == "anthropic-messages"
    parsed = parse_file(path)
    assert parsed.stats == EXPECTED
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("system", "SystemNote"),
        ("messages[0]", "UserMessage"),
        ("messages[1]", "AssistantMessage"),
        ("messages[1]#usage", "Usage"),
        ("messages[2]#1", "ToolResult"),
        ("messages[2]", "ToolResult"),  # call order: toolu_1, toolu_2
        ("messages[2]#2", "ToolResult"),
        ("messages[3]", "AssistantMessage"),
        ("missing:toolu_3", "ToolResult"),
        ("messages[4]", "UserMessage"),
        ("messages[5]", "AssistantMessage"),
        ("messages[5]#usage", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert ev["system"] == SystemNote(text="You are a careful coding agent.", subtype="system_prompt")
    (chart,) = ev["messages[0]"].media
    assert (chart.width, chart.height) == (8, 8)
    first = ev["messages[1]"]
    assert first.text == "Let me run the test and read the plot code." and first.reasoning_reported
    assert first.model == "claude-x-2"
    assert [(c.id, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("toolu_1", {"command": "pytest -q"}),
        ("toolu_2", {"file_path": "plot.py"}),
    ]
    assert ev["messages[1]#usage"] == Usage(
        input_tokens=12,
        output_tokens=95,
        cache_read_tokens=9000,
        cache_write_tokens=800,
        model="claude-x-2",
        request_id="msg_01",
    )
    assert ev["messages[2]#1"] == ToolResult(
        call_id="toolu_1", content="Exit code 1\n1 failed", is_error=True, name="Bash"
    )
    (plot,) = ev["messages[2]"].media
    assert (ev["messages[2]"].content, plot.width, plot.height) == ("def plot(): ...", 2, 3)
    assert ev["messages[2]#2"] == ToolResult(call_id="toolu_9", content="result of an unknown call", orphan=True)
    assert ev["missing:toolu_3"].missing and ev["missing:toolu_3"].name == "Edit"
    assert ev["messages[5]"] == AssistantMessage(text="OK.", model="claude-x-2")
    assert ev["messages[5]#usage"].prompt_tokens == 5
    text = json.dumps([e.to_payload() for e in ev.values()])
    assert "The axis is inverted" not in text and "c2lnbmF0dXJl" not in text
    assert_reimport_adds_nothing(store, path)
    assert store.get_artifact(plot.sha256)[1] == tiny_png(2, 3)


def test_bare_list_and_utf16(tmp_path):
    doc = fixture_doc()
    bare = write_json(tmp_path / "bare.json", doc["messages"])
    assert detected(bare) == "anthropic-messages"
    assert parse_file(bare).stats == EXPECTED  # the same counts without the system prompt
    wide = check_utf16_variant(tmp_path, write_json(tmp_path / "messages.json", doc), "anthropic-messages")
    assert wide.stats == EXPECTED


def test_plain_request_with_system_is_anthropic(tmp_path):
    path = write_json(
        tmp_path / "req.json",
        {"model": "claude-x", "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert detected(path) == "anthropic-messages"
    assert [type(pe.event) for pe in parse_file(path).events] == [SystemNote, UserMessage]


def test_malformed_copies(tmp_path, store):
    good = write_json(tmp_path / "messages.json", fixture_doc())
    import_file(store, good)
    data = good.read_bytes()
    lines = data.split(b"\n")
    cut = data[: len(data) * 2 // 3]
    last_line = cut.count(b"\n") + 1
    assert_rejected(store, tmp_path / "cut.json", cut, where=f"line {last_line}", reason="invalid JSON")
    n = next(i for i, ln in enumerate(lines) if b'"toolu_9"' in ln)
    broken = b"\n".join(lines[:n] + [lines[n] + b" ]]"] + lines[n + 1 :])
    assert_rejected(store, tmp_path / "badjson.json", broken, where=f"line {n + 1}", reason="invalid JSON")
    doc = fixture_doc()
    doc["messages"][2]["content"] = 42
    assert_rejected(
        store,
        tmp_path / "type.json",
        json.dumps(doc).encode(),
        where="messages[2]",
        reason="field 'content' must be a string or an array, got number",
    )
    doc = fixture_doc()
    doc["messages"][1]["content"][2]["input"] = "pytest -q"
    assert_rejected(
        store,
        tmp_path / "input.json",
        json.dumps(doc).encode(),
        where="messages[1]",
        reason="field 'content[2].input' must be an object, got string",
    )
    doc = fixture_doc()
    doc["messages"][1]["content"][2]["input"] = {"timeout": float("nan")}  # json.dumps writes NaN
    assert_rejected(
        store,
        tmp_path / "nan.json",
        json.dumps(doc).encode(),
        where="messages[1]",
        reason="field 'content[2].input' holds NaN or Infinity",
    )
    doc = fixture_doc()
    doc["messages"][1]["usage"]["output_tokens"] = -1
    assert_rejected(
        store,
        tmp_path / "usage.json",
        json.dumps(doc).encode(),
        where="messages[1]",
        reason="field 'usage.output_tokens' must be a non-negative integer",
    )
    doc = fixture_doc()
    doc["messages"][0]["content"][1]["source"]["data"] = "not base64!"
    assert_rejected(
        store,
        tmp_path / "b64.json",
        json.dumps(doc).encode(),
        where="messages[0]",
        reason="field 'content[1].source.data' is not valid base64",
    )
    junk = b"\n".join(lines[:n] + [lines[n][:5] + JUNK + lines[n][5:]] + lines[n + 1 :])
    assert_rejected(store, tmp_path / "junk.json", junk, where=f"line {n + 1}", reason="not UTF-8 text")
    assert_rejected(store, tmp_path / "empty.json", b"", where=None, reason="file is empty", fmt="anthropic-messages")
    with pytest.raises(TranscriptError, match=r"messages\[0\]: unknown role 'system'"):
        parse_file(
            write_json(tmp_path / "role.json", [{"role": "system", "content": "x"}]), format="anthropic-messages"
        )


def test_first_message_longer_than_the_sniffed_head(tmp_path):
    doc = fixture_doc()
    doc["messages"][0]["content"].reverse()  # the image first: ~96 KB of base64 before any complete message
    doc["messages"][0]["content"][0] = _png_block(200, 120, level=0)
    path = write_json(tmp_path / "big.json", doc["messages"])
    assert path.stat().st_size > 65536
    assert detected(path) == "anthropic-messages"
    assert parse_file(path).stats == EXPECTED
    with pytest.raises(TranscriptError, match=r"messages\[0\]: content\[0\] is an Anthropic 'image' block"):
        parse_file(path, format="openai-chat")
