"""Codex CLI rollout JSONL importer: corpus counts checked by hand, response grouping, usage, malformed input."""

from __future__ import annotations

import base64
import json

import pytest
from _importer_checks import (
    assert_reimport_adds_nothing,
    assert_rejected,
    assert_shape,
    check_jsonl_corruptions,
    check_utf16_variant,
    detected,
    mutate_line,
    ref_kinds,
    tiny_png,
    write_jsonl,
)

from latch.events import AssistantMessage, CompactionMarker, SystemNote, ToolResult, Usage, UserMessage
from latch.importers import TranscriptError, parse_file

EDGERUNNER = "codex/edgerunner_codex-session.jsonl"

# Counts checked by hand over the raw file with jq, independently of the importer (f = the file):
#   user messages  jq 'select(.type=="response_item" and .payload.type=="message" and .payload.role=="user")'
#                  → 7, of which 2 start with <environment_context> (meta); event_msg/user_message has the
#                  other 5 (the duplicated text is not imported twice)
#   assistant      one per model response = maximal runs of output items (reasoning, assistant message,
#                  *_call) between other response_items, keeping runs with a message or call:
#                  jq -r 'select(.type=="response_item") | if <output item> then "o" else "|" end' | tr -d '\n'
#                  | tr '|' '\n' | grep -c o  → 174; cross-check: 173 distinct token_count reports plus the
#                  last response (line 866-867), which the file ends before reporting
#   tool calls     function_call 18 + custom_tool_call 153 = 171; outputs 18 + 152 = 170
#   missing        0. call_j6mVdtsVii0CfgU26MVX5jdU on the last line (867) has no output, but it is PENDING, not
#                  missing: grep -n call_j6mV… → only line 867; the turn started on line 845 (task_started) and
#                  awk 'NR>=845' | grep -c '"task_complete"\|"turn_aborted"' → 0, no later user prompt or response:
#                  the file ends while the call runs (its output may still be appended). Orphans: 0
#   tool errors    outputs whose text starts with "Script failed" (5, apply_patch verification failures)
#                  or "aborted by user" (1, the interrupted turn): 6. No "Process exited with code"
#                  appears in this file; all 41 patch_apply_end events have success: true
#   usage          jq -c '.payload.info' of token_count events, | uniq (2 consecutive repeats, lines 164
#                  and 220; no info:null) → 173 requests; sum(last.input - last.cached) = 1646437,
#                  sum(cached) = 34132736, sum(output) = 98116. The last event's cumulative
#                  total_token_usage is exactly input 35779173 = 1646437 + 34132736, cached 34132736,
#                  output 98116, which confirms the de-duplication.
EXPECTED = dict(
    user_messages=7,
    assistant_messages=174,
    tool_calls=171,
    tool_results=170,
    tool_errors=6,
    orphan_results=0,
    missing_results=0,
    usage=dict(
        input_tokens=1646437, output_tokens=98116, cache_read_tokens=34132736, cache_write_tokens=None, requests=173
    ),
)


@pytest.mark.corpus
def test_corpus_counts(corpus_dir):
    path = corpus_dir / EDGERUNNER
    assert detected(path) == "codex"
    parsed = parse_file(path)
    assert parsed.stats == EXPECTED
    assert parsed.external_key == "codex:019f4ce9-5831-7e71-ab0a-24a9d7358aab"
    assert parsed.workspace == "/Users/user/Desktop/new"
    assert_shape(parsed.events)
    events = [pe.event for pe in parsed.events]
    assert sum(isinstance(e, UserMessage) and e.is_meta for e in events) == 2
    notes = [e for e in events if isinstance(e, SystemNote)]
    assert [n.subtype for n in notes] == ["system_prompt"] + ["developer"] * 7
    assert notes[0].text.startswith("You are Codex, a coding agent")
    # every response but the last is followed by its usage
    assert sum(isinstance(e, AssistantMessage) and e.reasoning_reported for e in events) > 150


@pytest.mark.corpus
def test_corpus_first_response(corpus_dir):
    parsed = parse_file(corpus_dir / EDGERUNNER)
    refs = {pe.source_ref: pe.event for pe in parsed.events}
    # lines 11-14: reasoning + assistant message + custom_tool_call exec = one response; usage on line 16
    first = refs["line:11"]
    assert first.reasoning_reported and first.text.startswith("I’ll first pull the hackathon brief")
    assert first.model == "gpt-5.6-sol"
    (call,) = first.tool_calls
    assert call.id == "call_UZKUyTF5KFRtKCgmWb5QumB9" and call.name == "exec"
    assert json.loads(call.arguments)["input"].startswith("const r = await tools.exec_command(")
    assert refs["line:16"] == Usage(
        input_tokens=22727 - 11008, output_tokens=299, cache_read_tokens=11008, model="gpt-5.6-sol"
    )
    order = [pe.source_ref for pe in parsed.events]
    assert order[order.index("line:11") : order.index("line:11") + 3] == ["line:11", "line:16", "line:15"]
    # line 496: the interrupted exec cell
    aborted = refs["line:496"]
    assert aborted.is_error and aborted.content.startswith("aborted by user after 77.1s")
    # the last response (lines 866-867) waits for its call: no result, and it is the open tail (its next item or
    # its token_count may still be written), so an import stores everything before it
    last = parsed.events[-1]
    assert last.source_ref == "line:866" and [c.id for c in last.event.tool_calls] == ["call_j6mVdtsVii0CfgU26MVX5jdU"]
    assert parsed.settled == len(parsed.events) - 1


@pytest.mark.corpus
def test_import_twice_keeps_one_copy(corpus_dir, store):
    assert_reimport_adds_nothing(store, corpus_dir / EDGERUNNER)


@pytest.mark.corpus
def test_malformed_copies(corpus_dir, store, tmp_path):
    # line 18 is a function_call (wait); its arguments must be a JSON string
    def wrong(obj):
        obj["payload"]["arguments"] = {"cell_id": "1"}

    check_jsonl_corruptions(
        store,
        tmp_path,
        corpus_dir / EDGERUNNER,
        middle=18,
        wrong_type=wrong,
        wrong_type_reason="field 'payload.arguments' must be a string, got object",
        fmt="codex",
    )


@pytest.mark.corpus
def test_message_content_as_number(corpus_dir, store, tmp_path):
    # line 123: the user message "Implement the plan."
    data = mutate_line((corpus_dir / EDGERUNNER).read_bytes(), 123, lambda obj: obj["payload"].update(content=5))
    assert_rejected(
        store,
        tmp_path / "bad.jsonl",
        data,
        where="line 123",
        reason="field 'payload.content' must be a string or an array, got number",
    )


@pytest.mark.corpus
def test_utf16_bom_crlf_copy_imports(corpus_dir, tmp_path):
    assert check_utf16_variant(tmp_path, corpus_dir / EDGERUNNER, "codex").stats == EXPECTED


# --------------------------------------------------------------------------- synthetic rollout
def _row(kind: str, payload: dict, second: int = 0) -> dict:
    return {"timestamp": f"2026-02-01T09:00:{second:02d}.000Z", "type": kind, "payload": payload}


def _item(**payload) -> dict:
    return _row("response_item", payload)


def _event(**payload) -> dict:
    return _row("event_msg", payload)


def _tokens(inp: int, cached: int, out: int, total: int) -> dict:
    last = {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": 0,
        "total_tokens": inp + out,
    }
    info = {
        "last_token_usage": last,
        "total_token_usage": {**last, "total_tokens": total},
        "model_context_window": 258400,
    }
    return _event(type="token_count", info=info, rate_limits={})


def synthetic_rows() -> list[dict]:
    png = base64.b64encode(tiny_png(4, 5)).decode()
    text = lambda s: [{"type": "input_text", "text": s}]  # noqa: E731
    return [
        _row(
            "session_meta",
            {
                "id": "0190-aaaa",
                "cwd": "/home/user/app",
                "cli_version": "0.130.0",
                "base_instructions": {"text": "You are Codex."},
            },
        ),
        _event(type="task_started", turn_id="t1"),
        _row("turn_context", {"turn_id": "t1", "model": "gpt-5.x"}),
        _item(type="message", role="developer", content=text("<permissions instructions>sandboxed")),
        _item(type="message", role="user", content=text("<environment_context>\n<cwd>/home/user/app</cwd>")),
        _item(
            type="message",
            role="user",
            content=text("what is on this screenshot? then run the tests")
            + [{"type": "input_image", "image_url": f"data:image/png;base64,{png}"}],
        ),  # line 6
        _event(type="user_message", message="what is on this screenshot? then run the tests", images=[]),
        _item(type="reasoning", summary=[], content=None, encrypted_content="gAAA"),  # line 8
        _item(type="message", role="assistant", content=[{"type": "output_text", "text": "Running the tests."}]),
        _event(type="agent_message", message="Running the tests."),
        _item(type="function_call", name="exec_command", arguments='{"cmd":"npm test"}', call_id="call_1"),
        _item(
            type="custom_tool_call",
            name="apply_patch",
            input="*** Begin Patch\n*** End Patch\n",
            call_id="call_2",
            status="completed",
        ),
        _tokens(9000, 6000, 120, 9120),  # line 13
        _tokens(9000, 6000, 120, 9120),  # line 14: the same report again
        _item(type="function_call_output", call_id="call_1", output="Process exited with code 1\nOutput:\n2 failing"),
        _event(type="patch_apply_end", call_id="call_2", success=False, stdout="", stderr="rejected", changes={}),
        _item(
            type="custom_tool_call_output",
            call_id="call_2",
            output='{"output":"patch rejected","metadata":{"exit_code":1,"duration_seconds":0.1}}',
        ),
        _event(type="token_count", info=None, rate_limits={"primary": {}}),  # line 18
        _item(type="web_search_call", status="completed", action={"type": "search", "query": "npm retry"}),
        _event(type="web_search_end", call_id="ws_1", query="npm retry", action={"type": "search"}),
        _item(type="message", role="assistant", content=[{"type": "output_text", "text": "Found the docs."}]),
        _tokens(10000, 9000, 50, 19170),  # line 22
        _item(type="function_call", name="shell", arguments='{"command":["sleep","99"]}', call_id="call_3"),
        _tokens(10100, 9900, 30, 29300),  # line 24
        _event(type="turn_aborted", turn_id="t1", reason="interrupted"),  # line 25
        _event(type="task_started", turn_id="t2"),
        _item(type="message", role="user", content=text("thanks")),  # line 27
        _item(type="function_call_output", call_id="call_999", output="stray"),  # line 28
        _item(type="reasoning", summary=[], encrypted_content="gAAB"),
        _item(type="message", role="assistant", content=[{"type": "output_text", "text": "You're welcome."}]),
        _tokens(10200, 10000, 5, 39505),  # line 31
        _row("compacted", {"message": "Summary of the work so far.", "replacement_history": []}),
        _event(type="task_complete", turn_id="t2", last_agent_message="You're welcome."),
    ]


def test_synthetic_rollout(tmp_path, store):
    path = write_jsonl(tmp_path / "rollout-2026-02-01T09-00-00-0190-aaaa.jsonl", synthetic_rows())
    assert detected(path) == "codex"
    parsed = parse_file(path)
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("line:1", "SystemNote"),
        ("line:4", "SystemNote"),
        ("line:5", "UserMessage"),
        ("line:6", "UserMessage"),
        ("line:8", "AssistantMessage"),
        ("line:13", "Usage"),
        ("line:15", "ToolResult"),
        ("line:17", "ToolResult"),
        ("line:19", "AssistantMessage"),
        ("line:22", "Usage"),
        ("line:20", "ToolResult"),
        ("line:23", "AssistantMessage"),
        ("line:24", "Usage"),
        ("missing:call_3", "ToolResult"),
        ("line:27", "UserMessage"),
        ("line:28", "ToolResult"),
        ("line:29", "AssistantMessage"),
        ("line:31", "Usage"),
        ("line:32", "CompactionMarker"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert ev["line:1"] == SystemNote(text="You are Codex.", subtype="system_prompt")
    assert ev["line:5"].is_meta and not ev["line:6"].is_meta
    (img,) = ev["line:6"].media
    assert (img.media_type, img.width, img.height) == ("image/png", 4, 5)
    first = ev["line:8"]
    assert first.text == "Running the tests." and first.reasoning_reported and first.model == "gpt-5.x"
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("call_1", "exec_command", '{"cmd":"npm test"}'),
        ("call_2", "apply_patch", '{"input":"*** Begin Patch\\n*** End Patch\\n"}'),
    ]
    assert ev["line:13"] == Usage(input_tokens=3000, output_tokens=120, cache_read_tokens=6000, model="gpt-5.x")
    assert (ev["line:15"].is_error, ev["line:15"].exit_code) == (True, 1)
    assert ev["line:17"] == ToolResult(
        call_id="call_2", content="patch rejected", is_error=True, name="apply_patch", exit_code=1
    )
    search = ev["line:19"]
    assert search.text == "Found the docs." and not search.reasoning_reported
    assert json.loads(search.tool_calls[0].arguments) == {"type": "search", "query": "npm retry"}
    assert ev["line:20"] == ToolResult(
        call_id="web_search:line:19", content="web search completed: npm retry", name="web_search"
    )
    assert ev["missing:call_3"] == ToolResult(
        call_id="call_3",
        is_error=True,
        name="shell",
        missing=True,
        content="[no result: the turn was aborted (interrupted)]",
    )
    assert ev["line:28"] == ToolResult(call_id="call_999", content="stray", orphan=True)
    assert ev["line:29"].reasoning_reported
    # no `trigger` in the item: Codex writes the same CompactedItem for /compact and auto-compaction (unknown)
    assert ev["line:32"] == CompactionMarker(trigger=None, summary="Summary of the work so far.")
    assert parsed.stats == dict(
        user_messages=3,
        assistant_messages=4,
        tool_calls=4,
        tool_results=4,
        tool_errors=2,
        orphan_results=1,
        missing_results=1,
        usage=dict(
            input_tokens=3000 + 1000 + 200 + 200,
            output_tokens=205,
            cache_read_tokens=6000 + 9000 + 9900 + 10000,
            cache_write_tokens=None,
            requests=4,
        ),
    )
    assert_reimport_adds_nothing(store, path)


@pytest.mark.parametrize(
    "line, change, reason",
    [
        (
            13,
            lambda p: p["info"]["last_token_usage"].update(input_tokens="9000"),
            "field 'payload.info.last_token_usage.input_tokens' must be a non-negative integer, got string",
        ),
        (
            13,
            lambda p: p["info"]["last_token_usage"].update(cached_input_tokens=9500),
            "cached input tokens (9500) exceed input tokens (9000)",
        ),
        (12, lambda p: p.update(input=None), "missing field 'payload.input' (a string)"),
        (
            15,
            lambda p: p.update(output={"text": "x"}),
            "field 'payload.output' must be a string or an array, got object",
        ),
        (4, lambda p: p.pop("role"), "missing field 'payload.role' (a string)"),
    ],
)
def test_wrong_field_types(tmp_path, store, line, change, reason):
    rows = synthetic_rows()
    change(rows[line - 1]["payload"])
    assert_rejected(store, write_jsonl(tmp_path / "bad.jsonl", rows), where=f"line {line}", reason=reason)


def test_envelope_without_payload_is_rejected(tmp_path):
    rows = synthetic_rows()
    rows[2] = {"timestamp": "2026-02-01T09:00:00.000Z", "type": "turn_context"}
    with pytest.raises(TranscriptError, match=r"line 3: missing field 'payload' \(an object\)"):
        parse_file(write_jsonl(tmp_path / "bad.jsonl", rows))


def test_session_meta_longer_than_the_sniffed_head(tmp_path):
    rows = synthetic_rows()
    rows[0]["payload"]["base_instructions"]["text"] = "You are Codex. " * 5000  # 75 KB > the 64 KiB head
    path = write_jsonl(tmp_path / "long.jsonl", rows)
    assert detected(path) == "codex"
    assert parse_file(path).stats["assistant_messages"] == 4


def test_context_compacted_events(tmp_path):
    """``event_msg/context_compacted`` (codex-rs ``EventMsg::ContextCompacted``, empty) right after its ``compacted``
    item is the same compaction; alone it is a marker of its own; one at the end may still get its item (open
    tail)."""

    def row(kind, payload, n):
        return {"timestamp": f"2026-02-01T09:00:{n:02d}.000Z", "type": kind, "payload": payload}

    rows = [
        row("session_meta", {"id": "0190-cccc", "cwd": "/w"}, 0),
        row("event_msg", {"type": "task_started", "turn_id": "t1"}, 1),
        row(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]},
            2,
        ),
        row(
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            3,
        ),
        row(
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "last_token_usage": {"input_tokens": 250000, "cached_input_tokens": 200000, "output_tokens": 10}
                },
            },
            4,
        ),
        row("compacted", {"message": "Summary one.", "replacement_history": []}, 5),  # line 6
        row("event_msg", {"type": "token_count", "info": None}, 6),
        row("event_msg", {"type": "context_compacted"}, 7),  # line 8: joins line 6
        row("event_msg", {"type": "task_complete", "turn_id": "t1"}, 8),
        row("event_msg", {"type": "context_compacted"}, 9),  # line 10: alone
        row("event_msg", {"type": "task_started", "turn_id": "t2"}, 10),
    ]
    path = write_jsonl(tmp_path / "rollout-2026-02-01T09-00-00-0190-cccc.jsonl", rows)
    parsed = parse_file(path)
    markers = [(pe.source_ref, pe.ts, pe.event) for pe in parsed.events if isinstance(pe.event, CompactionMarker)]
    assert markers == [
        ("line:6", "2026-02-01T09:00:05.000Z", CompactionMarker(trigger=None, summary="Summary one.")),
        ("line:10", "2026-02-01T09:00:09.000Z", CompactionMarker()),
    ]
    assert parsed.settled is None
    tail = write_jsonl(
        tmp_path / "rollout-2026-02-01T09-00-00-0190-dddd.jsonl",
        [*rows[:5], row("event_msg", {"type": "context_compacted"}, 5)],
    )
    grown = parse_file(tail)
    assert isinstance(grown.events[-1].event, CompactionMarker) and grown.settled == len(grown.events) - 1


def test_compacted_trigger_is_kept_when_written_and_unknown_when_absent(tmp_path):
    """codex-rs core/src/compact.rs writes one CompactedItem{message, replacement_history} for /compact and for
    auto-compaction alike: without a ``trigger`` field the marker's trigger is unknown (None), not "manual"."""

    def row(kind, payload, n):
        return {"timestamp": f"2026-02-01T09:00:{n:02d}.000Z", "type": kind, "payload": payload}

    path = write_jsonl(
        tmp_path / "rollout-2026-02-01T09-00-00-0190-eeee.jsonl",
        [
            row("session_meta", {"id": "0190-eeee", "cwd": "/w"}, 0),
            row("compacted", {"message": "Summary one.", "trigger": "auto"}, 1),
            row("event_msg", {"type": "context_compacted"}, 2),
            row("compacted", {"message": "Summary two."}, 3),
            row("event_msg", {"type": "context_compacted"}, 4),
        ],
    )
    markers = [pe.event for pe in parse_file(path).events if isinstance(pe.event, CompactionMarker)]
    assert markers == [
        CompactionMarker(trigger="auto", summary="Summary one."),
        CompactionMarker(trigger=None, summary="Summary two."),
    ]
