"""OpenHands V0 event-stream importer on the real corpus, edge cases, re-import and malformed input.

Counts were checked by hand with jq over basic_gui_mode.json (commands in the comments).
"""

from __future__ import annotations

import copy
import json

import pytest
from _importer_checks import (
    assert_reimport_adds_nothing,
    assert_rejected,
    detected,
    json_document_corruptions,
    mutated_json,
)

from latch.events import AssistantMessage, SystemNote, ToolResult, Usage, UserMessage
from latch.importers import parse_file

NAME = "basic_gui_mode.json"


@pytest.fixture
def src(corpus_dir):
    return corpus_dir / "openhands" / NAME


@pytest.fixture
def raw(src):
    return json.loads(src.read_text("utf-8"))


def _parse(tmp_path, doc, name="case.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc), "utf-8")
    return parse_file(path, "openhands")


def test_detect_picks_openhands(src):
    assert detected(src) == "openhands"


def test_counts(src):
    parsed = parse_file(src)
    assert parsed.stats == {
        "user_messages": 1,  # jq '[.[]|select(.source=="user" and .action=="message")]|length'
        # 4 distinct model_response.id on actions (jq '[.[]|select(.action and .tool_call_metadata.model_response)
        # |.tool_call_metadata.model_response.id]|unique|length') + the final agent `message` action (id 15)
        "assistant_messages": 5,
        "tool_calls": 4,  # jq '...|unique_by(.id)|map(.choices[0].message.tool_calls|length)|add'
        "tool_results": 4,  # observations whose `cause` is an action with tool_call_metadata (8, 10, 12, 14)
        "tool_errors": 1,  # jq '[.[]|select(.observation and (.extras.metadata.exit_code//0)!=0)]' → id 14, -1
        "orphan_results": 0,
        "missing_results": 0,
        # per distinct response: prompt 17297 = uncached 22 + cached 11793 + cache_creation 5482; completion 2024
        "usage": {
            "input_tokens": 22,
            "output_tokens": 2024,
            "cache_read_tokens": 11793,
            "cache_write_tokens": 5482,
            "requests": 4,
        },
    }
    assert parsed.workspace == "/workspace"


def test_usage_normalized_per_response(src, raw):
    """LiteLLM prompt_tokens includes cache reads AND writes: the normalized prompt equals it exactly."""
    events = parse_file(src).events
    usages = [pe.event for pe in events if isinstance(pe.event, Usage)]
    responses = {
        e["tool_call_metadata"]["model_response"]["id"]: e["tool_call_metadata"]["model_response"]
        for e in raw
        if "action" in e and "tool_call_metadata" in e
    }
    assert [u.request_id for u in usages] == list(responses)
    for u in usages:
        reported = responses[u.request_id]["usage"]
        assert u.prompt_tokens == reported["prompt_tokens"]
        assert u.cache_read_tokens == reported["prompt_tokens_details"]["cached_tokens"]
        assert u.cache_write_tokens == reported["cache_creation_input_tokens"]
        assert u.model == "claude-3-5-sonnet-20241022"
    assert [(u.input_tokens, u.output_tokens) for u in usages] == [(4, 104), (6, 1142), (6, 693), (6, 85)]
    for i, pe in enumerate(events):  # each Usage directly follows its AssistantMessage
        if isinstance(pe.event, Usage):
            assert isinstance(events[i - 1].event, AssistantMessage)
            assert pe.source_ref == events[i - 1].source_ref + "#usage"


def test_results_exit_codes_and_notes(src):
    events = parse_file(src).events
    results = [pe.event for pe in events if isinstance(pe.event, ToolResult)]
    assert [(r.name, r.exit_code, r.is_error) for r in results] == [
        ("execute_bash", 0, False),
        ("str_replace_editor", None, False),
        ("str_replace_editor", None, False),
        ("execute_bash", -1, True),
    ]
    assert results[0].content == "\n[The command completed with exit code 0.]"  # content "" + metadata.suffix
    assert results[3].content.startswith("Serving HTTP on 0.0.0.0 port 8000")
    assert results[1].content.startswith("--- /workspace/todo-app/index.html")
    calls = [c for pe in events if isinstance(pe.event, AssistantMessage) for c in pe.event.tool_calls]
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert json.loads(calls[0].arguments) == {"command": "mkdir -p /workspace/todo-app"}
    # agent_state_changed observations (ids 0, 3, 5, 17) are notes; `null` observations (2, 6, 16) are skipped
    notes = [(pe.source_ref, pe.event.text) for pe in events if isinstance(pe.event, SystemNote)]
    assert notes == [
        ("event:0", "agent state: loading"),
        ("event:3", "agent state: init"),
        ("event:5", "agent state: running"),
        ("event:17", "agent state: awaiting_user_input"),
    ]
    last = events[-2].event
    assert isinstance(last, AssistantMessage) and last.text.startswith("I've created a complete Vue.js todo")
    assert [pe.source_ref for pe in events[:5]] == ["event:0", "event:3", "event:4", "event:5", "event:7"]
    assert isinstance(events[2].event, UserMessage) and events[2].ts == "2025-01-20T20:29:32.262843"


def test_python_repr_metadata_is_parsed_never_evaluated(tmp_path, raw, monkeypatch):
    doc = copy.deepcopy(raw)
    doc[8]["extras"]["metadata"] = "{'exit_code': 2, 'pid': -1, 'working_dir': '/work', 'suffix': '', 'prefix': ''}"
    doc[14]["extras"]["metadata"] = "__import__('os').system('exit 3')"
    called = []
    monkeypatch.setattr("os.system", lambda *a: called.append(a))
    parsed = _parse(tmp_path, doc)
    results = [pe.event for pe in parsed.events if isinstance(pe.event, ToolResult)]
    assert (results[0].exit_code, results[0].is_error) == (2, True)
    assert (results[3].exit_code, results[3].is_error) == (None, False)
    assert called == [] and parsed.workspace == "/work"


def test_parallel_calls_share_one_message_and_one_usage(tmp_path, raw):
    """Two actions answering one model response (total_calls_in_response 2) → ONE AssistantMessage, ONE Usage."""
    doc = copy.deepcopy(raw)
    first, second = doc[7], doc[13]
    response = first["tool_call_metadata"]["model_response"]
    response["choices"][0]["message"]["tool_calls"].append(
        second["tool_call_metadata"]["model_response"]["choices"][0]["message"]["tool_calls"][0]
    )
    second["tool_call_metadata"]["model_response"] = response
    by_id = {e["id"]: e for e in doc}
    order = [0, 1, 2, 3, 4, 5, 6, 7, 13, 8, 14, 9, 10, 11, 12, 15, 16, 17]  # both actions, then both results
    doc = [by_id[i] for i in order]
    parsed = _parse(tmp_path, doc)
    assert parsed.stats["assistant_messages"] == 4 and parsed.stats["tool_calls"] == 4
    assert parsed.stats["usage"]["requests"] == 3 and parsed.stats["missing_results"] == 0
    refs = [pe.source_ref for pe in parsed.events]
    at = refs.index("event:7")
    assert refs[at : at + 5] == ["event:7", "event:7#usage", "event:8", "event:14", "event:9"]
    msg = parsed.events[at].event
    assert [c.id for c in msg.tool_calls] == ["toolu_01W9Z8jBctr8X2frZV9p1RYs", "toolu_01DwihWr4ooPZS1CGTLAWrFP"]


def test_missing_and_orphan_results_are_kept(tmp_path, raw):
    doc = [e for e in raw if e["id"] != 14]  # the http.server run never reports back
    orphan = copy.deepcopy(raw[10])
    orphan.update(id=99, cause=98)
    orphan["tool_call_metadata"]["tool_call_id"] = "toolu_unknown"
    doc.append(orphan)
    parsed = _parse(tmp_path, doc)
    assert parsed.stats["missing_results"] == 1 and parsed.stats["orphan_results"] == 1
    results = {pe.event.call_id: pe.event for pe in parsed.events if isinstance(pe.event, ToolResult)}
    missing = results["toolu_01DwihWr4ooPZS1CGTLAWrFP"]
    assert missing.missing and missing.is_error and missing.content.startswith("[no result:")
    assert results["toolu_unknown"].orphan


def test_finish_is_a_text_reply_not_a_tool_call(tmp_path, raw):
    doc = copy.deepcopy(raw)
    doc[15].update(
        action="finish",
        message="All done",
        args={"final_thought": "The todo app is ready.", "outputs": {}, "thought": ""},
    )
    finish_call = {
        "id": "toolu_fin",
        "type": "function",
        "function": {"name": "finish", "arguments": '{"message": "The todo app is ready."}'},
    }
    doc[15]["tool_call_metadata"] = {
        "function_name": "finish",
        "tool_call_id": "toolu_fin",
        "total_calls_in_response": 1,
        "model_response": {
            "id": "chatcmpl-fin",
            "model": "claude-x",
            "choices": [{"message": {"role": "assistant", "content": "Finishing up.", "tool_calls": [finish_call]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 90}},
        },
    }
    parsed = _parse(tmp_path, doc)
    msg = next(pe.event for pe in parsed.events if pe.source_ref == "event:15")
    assert msg == AssistantMessage(text="Finishing up.\n\nThe todo app is ready.", model="claude-x")
    usage = next(pe.event for pe in parsed.events if pe.source_ref == "event:15#usage")
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (10, 90, None)
    assert parsed.stats["missing_results"] == 0 and parsed.stats["tool_calls"] == 4
    del doc[15]["tool_call_metadata"]  # a non-function-calling agent: the final thought alone
    msg = next(pe.event for pe in _parse(tmp_path, doc).events if pe.source_ref == "event:15")
    assert msg == AssistantMessage(text="The todo app is ready.")


def test_user_images(tmp_path, raw):
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    doc = copy.deepcopy(raw)
    doc[4]["args"]["image_urls"] = [f"data:image/png;base64,{png}", "https://example.com/mock.png"]
    parsed = _parse(tmp_path, doc)
    user = next(pe.event for pe in parsed.events if isinstance(pe.event, UserMessage))
    (ref,) = user.media
    assert (ref.media_type, ref.width, ref.height, ref.byte_size) == ("image/png", 1, 1, 70)
    assert user.text.endswith("\n[image: https://example.com/mock.png]")
    assert [(len(a[0]), a[1]) for a in parsed.artifacts] == [(70, "image/png")]


def test_reimport_adds_nothing(src, store):
    sid, parsed = assert_reimport_adds_nothing(store, src)
    assert parsed.external_key.startswith("openhands:sha256:")


@pytest.mark.parametrize(
    "case",
    ["cut", "garbage", "object", "args_string", "content_number", "id_string", "event_string", "empty", "binary"],
)
def test_malformed_is_rejected_and_store_unchanged(src, raw, store, tmp_path, case):
    assert_reimport_adds_nothing(store, src)  # a non-empty store
    variants = {
        **json_document_corruptions(src.read_bytes()),
        "object": (json.dumps({"events": raw}).encode(), "top level", "expected a JSON array of events, got object"),
        "args_string": (
            mutated_json(raw, lambda d: d[7].update(args="mkdir")),
            "record 7 (event id 7)",
            "field 'args' must be an object, got string",
        ),
        "content_number": (
            mutated_json(raw, lambda d: d[8].update(content=3)),
            "record 8 (event id 8)",
            "field 'content' must be a string, got number",
        ),
        "id_string": (
            mutated_json(raw, lambda d: d[4].update(id="4")),
            "record 4",
            "field 'id' must be an integer, got string",
        ),
        "event_string": (
            mutated_json(raw, lambda d: d.__setitem__(2, "oops")),
            "record 2",
            "field 'events[2]' must be an object, got string",
        ),
    }
    blob, where, reason = variants[case]
    assert_rejected(store, tmp_path / NAME, blob, where=where, reason=reason, fmt="openhands")
