"""Gemini CLI importer: corpus counts checked by hand, the three layouts, their traps, malformed input."""

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
    json_document_corruptions,
    mutated_json,
    ref_kinds,
    tiny_png,
    write_jsonl,
)

from latch.events import AssistantMessage, SystemNote, ToolResult, Usage, UserMessage
from latch.host.ingest import import_file
from latch.importers import parse_file

ENTIRE = "gemini-cli/entire_session.json"
VCT_JSON = "gemini-cli/vibecodingtracker_session.json"
VCT_JSONL = "gemini-cli/vibecodingtracker_session.jsonl"

# Counts checked by hand over the raw files with a Python script that does not import latch (the JSONL
# messages upserted by id as Gemini CLI's loadConversationRecord does: a dict keyed by `id`, last line wins):
#   user         type=="user": 1, 1, 3 (the JSONL's "System: Please continue." shows a functionResponse as
#                displayContent: is_meta; its "/init" prompt keeps displayContent [{"text":"/init"}])
#   assistant    type=="gemini", one per model request: 11, 3, 6 (entire: 5b9afa41 is the rm call of the
#                response e5a71c36, split by the "update available" info message; its tokens are all 0)
#   tool calls   len(toolCalls) summed: 9, 7, 12, each with an embedded result, all status "success"; no
#                shell "Exit Code:" other than 0, so no errors; no orphans, nothing missing
#   usage        messages whose tokens are not all zero: 10, 3, 6; input = sum(input + tool - cached),
#                cache_read = sum(cached), output = sum(output + thoughts) (tool is 0 everywhere; in every
#                message total == input + output + thoughts + tool and cached <= input)
#   notes        type=="info": 1, 0, 2 ("Gemini CLI update available…"; "Empty GEMINI.md created…",
#                "Request cancelled.")
EXPECTED = {
    ENTIRE: dict(
        user_messages=1,
        assistant_messages=11,
        tool_calls=9,
        tool_results=9,
        tool_errors=0,
        orphan_results=0,
        missing_results=0,
        usage=dict(
            input_tokens=17521, output_tokens=1812, cache_read_tokens=113854, cache_write_tokens=None, requests=10
        ),
    ),
    VCT_JSON: dict(
        user_messages=1,
        assistant_messages=3,
        tool_calls=7,
        tool_results=7,
        tool_errors=0,
        orphan_results=0,
        missing_results=0,
        usage=dict(
            input_tokens=36522, output_tokens=20941, cache_read_tokens=39826, cache_write_tokens=None, requests=3
        ),
    ),
    VCT_JSONL: dict(
        user_messages=3,
        assistant_messages=6,
        tool_calls=12,
        tool_results=12,
        tool_errors=0,
        orphan_results=0,
        missing_results=0,
        usage=dict(
            input_tokens=153635, output_tokens=4293, cache_read_tokens=48951, cache_write_tokens=None, requests=6
        ),
    ),
}
SESSION_IDS = {
    ENTIRE: "f7633853-6663-4dbb-bbf4-6159afa29df8",
    VCT_JSON: "8a20078e-2d5e-4f81-a640-9b879bbb7e6d",
    VCT_JSONL: "0ab84937-9fe7-4284-986a-33c832af0b6a",
}
NOTES = {ENTIRE: 1, VCT_JSON: 0, VCT_JSONL: 2}
WITH_THOUGHTS = {ENTIRE: 10, VCT_JSON: 3, VCT_JSONL: 5}  # gemini messages with a non-empty `thoughts` list


def events_of(parsed, kind):
    return [pe.event for pe in parsed.events if isinstance(pe.event, kind)]


@pytest.mark.corpus
@pytest.mark.parametrize("name", [ENTIRE, VCT_JSON, VCT_JSONL])
def test_corpus_counts(corpus_dir, name):
    path = corpus_dir / name
    assert detected(path) == "gemini-cli"
    parsed = parse_file(path)
    assert parsed.stats == EXPECTED[name]
    assert parsed.external_key == f"gemini-cli:{SESSION_IDS[name]}"
    assert len(events_of(parsed, SystemNote)) == NOTES[name]
    assert sum(m.reasoning_reported for m in events_of(parsed, AssistantMessage)) == WITH_THOUGHTS[name]
    assert parsed.workspace is None  # the chat records only a hash of the project root
    assert_shape(parsed.events)


@pytest.mark.corpus
def test_entire_details(corpus_dir):
    parsed = parse_file(corpus_dir / ENTIRE)
    msgs = events_of(parsed, AssistantMessage)
    assert {m.model for m in msgs} == {"gemini-2.5-flash"}
    first = parsed.events[1:4]
    assert first[0].event.text == (
        "I will create a markdown file `docs/blue.md` and add content about the color blue to it."
    )
    assert first[0].event.tool_calls[0].name == "write_file"
    # tokens {input 12207, output 105, cached 2558, thoughts 153, tool 0, total 12465}
    assert first[1].event == Usage(
        input_tokens=12207 - 2558, output_tokens=105 + 153, cache_read_tokens=2558, model="gemini-2.5-flash"
    )
    assert first[1].event.prompt_tokens == 12207
    assert first[2].event.content.startswith("Successfully created and wrote to new file: ")
    shell = [r for r in events_of(parsed, ToolResult) if r.name == "run_shell_command"]
    assert [r.exit_code for r in shell] == [0] * 6 and not any(r.is_error for r in shell)
    note = events_of(parsed, SystemNote)[0]
    assert note.subtype == "info" and note.text.startswith("Gemini CLI update available! 0.23.0")
    # the all-zero tokens of 5b9afa41 are no usage: its message is followed directly by its result
    i = next(i for i, pe in enumerate(parsed.events) if pe.source_ref.startswith("msg:5b9afa41-"))
    assert parsed.events[i].event.text == "" and parsed.events[i].event.tool_calls[0].name == "run_shell_command"
    assert isinstance(parsed.events[i + 1].event, ToolResult)
    assert not parsed.events[i].event.reasoning_reported


@pytest.mark.corpus
def test_jsonl_upserts_set_lines_init_and_two_models(corpus_dir):
    parsed = parse_file(corpus_dir / VCT_JSONL)
    assert parsed.meta["layout"] == "jsonl" and parsed.meta["messages"] == 11
    # the $set lines updated the session record: the last one (line 28) is the final lastUpdated
    assert parsed.meta["last_updated"] == "2026-04-23T12:58:35.591Z"
    assert parsed.meta["start_time"] == "2026-04-23T12:52:52.759Z" and parsed.meta["kind"] == "main"
    msgs = events_of(parsed, AssistantMessage)
    # lines 6 and 8 hold message 52e62e67 (first without, then with its 5 tool calls): one request, 5 calls
    assert [len(m.tool_calls) for m in msgs] == [5, 3, 1, 1, 0, 2]
    assert [m.model for m in msgs] == ["gemini-3-flash-preview"] * 5 + ["gemini-3.1-pro-preview"]
    users = events_of(parsed, UserMessage)
    assert users[0].text.startswith("\nYou are an AI agent that brings the power of Gemini")  # /init, expanded
    assert not users[0].is_meta
    assert (users[1].text, users[1].is_meta) == ("System: Please continue.", True)
    assert (users[2].text, users[2].is_meta) == (
        "幫我做一個小修改 請幫我將上面確保執行時要透過 uv run 來執行 避免環境有問題",
        False,
    )
    notes = events_of(parsed, SystemNote)
    assert [(n.subtype, n.text) for n in notes] == [
        ("info", "Empty GEMINI.md created. Now analyzing the project to populate it."),
        ("info", "Request cancelled."),
    ]
    assert parsed.events[0].event == notes[0]  # line 2 comes before the first prompt
    usage = next(pe.event for pe in parsed.events if isinstance(pe.event, Usage))
    assert usage == Usage(
        input_tokens=13906, output_tokens=185 + 306, cache_read_tokens=0, model="gemini-3-flash-preview"
    )


@pytest.mark.corpus
def test_user_parts_are_joined(corpus_dir):
    parsed = parse_file(corpus_dir / VCT_JSON)
    user = events_of(parsed, UserMessage)[0]
    assert user.text.startswith("請幫我依照專案實際狀況更新 README.md README.zh-CN.md README.zh-TW.md")
    assert events_of(parsed, AssistantMessage)[-1].text.startswith("已經幫你整理好囉！")


@pytest.mark.corpus
@pytest.mark.parametrize("name", [ENTIRE, VCT_JSON, VCT_JSONL])
def test_reimport_adds_nothing(corpus_dir, store, name):
    sid, parsed = assert_reimport_adds_nothing(store, corpus_dir / name)
    assert parsed.external_key == f"gemini-cli:{SESSION_IDS[name]}"
    # a last gemini message is the open tail (its tool results and tokens may still be written); the
    # JSONL ends with an info note after it. A final import stores the rest.
    open_tail = {ENTIRE: 2, VCT_JSON: 2, VCT_JSONL: 0}[name]  # the last answer and its usage (no calls)
    assert len(parsed.settled_events) == len(parsed.events) - open_tail
    sid2, _, seqs = import_file(store, corpus_dir / name, final=True)
    assert sid2 == sid and len(list(store.events(sid))) == len(parsed.events)


@pytest.mark.corpus
def test_jsonl_utf16_variant(corpus_dir, tmp_path):
    check_utf16_variant(tmp_path, corpus_dir / VCT_JSONL, "gemini-cli")


@pytest.mark.corpus
def test_jsonl_malformed_copies(corpus_dir, store, tmp_path):
    # line 11: message a4173396 again, now with its 3 read_file calls (a superseded line 9 is checked too)
    check_jsonl_corruptions(
        store,
        tmp_path,
        corpus_dir / VCT_JSONL,
        middle=11,
        wrong_type=lambda o: o.update(tokens="many"),
        wrong_type_reason="field 'tokens' must be an object, got string",
        fmt="gemini-cli",
    )
    data = (corpus_dir / VCT_JSONL).read_bytes()
    lines = data.split(b"\n")
    rec = json.loads(lines[8])
    rec["toolCalls"] = {"id": "x"}  # line 9 is superseded by line 11, and still validated
    lines[8] = json.dumps(rec, ensure_ascii=False).encode()
    assert_rejected(
        store,
        tmp_path / "superseded.jsonl",
        b"\n".join(lines),
        where="line 9",
        reason="field 'toolCalls' must be an array, got object",
    )


@pytest.mark.corpus
@pytest.mark.parametrize(
    "case",
    [
        "cut",
        "garbage",
        "empty",
        "binary",
        "top_array",
        "calls_string",
        "args_array",
        "tokens_string",
        "bad_type",
        "no_id",
        "cached_over",
    ],
)
def test_document_malformed_copies(corpus_dir, store, tmp_path, case):
    src = corpus_dir / ENTIRE
    raw = json.loads(src.read_text("utf-8"))
    assert_reimport_adds_nothing(store, src)
    msgs = lambda d: d["messages"]  # noqa: E731
    variants = {
        **json_document_corruptions(src.read_bytes()),
        "top_array": (json.dumps(raw["messages"]).encode(), "top level", "expected a JSON object"),
        "calls_string": (
            mutated_json(raw, lambda d: msgs(d)[1].update(toolCalls="x")),
            "messages[1]",
            "field 'toolCalls' must be an array, got string",
        ),
        "args_array": (
            mutated_json(raw, lambda d: msgs(d)[1]["toolCalls"][0].update(args=[1])),
            "messages[1]",
            "field 'toolCalls[0].args' must be an object, got array",
        ),
        "tokens_string": (
            mutated_json(raw, lambda d: msgs(d)[2]["tokens"].update(input="12")),
            "messages[2]",
            "field 'tokens.input' must be a non-negative integer, got string",
        ),
        "bad_type": (
            mutated_json(raw, lambda d: msgs(d)[3].update(type="model")),
            "messages[3]",
            "field 'type' must be one of user, gemini, info, error, warning, got 'model'",
        ),
        "no_id": (mutated_json(raw, lambda d: msgs(d)[4].pop("id")), "messages[4]", "missing field 'id'"),
        "cached_over": (
            mutated_json(raw, lambda d: msgs(d)[1]["tokens"].update(cached=99999)),
            "messages[1]",
            "cached input tokens (99999) exceed input tokens (12207)",
        ),
    }
    blob, where, reason = variants[case]
    assert_rejected(store, tmp_path / "entire_session.json", blob, where=where, reason=reason, fmt="gemini-cli")


# ----------------------------------------------------------------------------- synthetic fixtures
META = {
    "sessionId": "s-1",
    "projectHash": "ab" * 32,
    "startTime": "2026-01-01T00:00:00.000Z",
    "lastUpdated": "2026-01-01T00:00:00.000Z",
    "kind": "main",
}


def user(mid, text, **kw):
    return {"id": mid, "timestamp": "2026-01-01T00:00:01.000Z", "type": "user", "content": [{"text": text}], **kw}


def gemini(mid, text="", calls=(), tokens=None, thoughts=(), model="gemini-x"):
    m = {
        "id": mid,
        "timestamp": "2026-01-01T00:00:02.000Z",
        "type": "gemini",
        "content": text,
        "model": model,
        "thoughts": list(thoughts),
        "tokens": tokens,
    }
    if calls:
        m["toolCalls"] = list(calls)
    return m


def call(cid, name="read_file", status="success", output="ok", args=None, result=True, **response):
    c = {
        "id": cid,
        "name": name,
        "args": args or {"file_path": "a.txt"},
        "status": status,
        "timestamp": "2026-01-01T00:00:03.000Z",
    }
    if result:
        c["result"] = [{"functionResponse": {"id": cid, "name": name, "response": response or {"output": output}}}]
    return c


TOKENS = {"input": 1000, "output": 20, "cached": 600, "thoughts": 30, "tool": 5, "total": 1055}


def test_rewind_and_checkpoint_lines(tmp_path):
    rows = [
        META,
        user("u1", "first"),
        gemini("g1", "one", tokens=TOKENS),
        user("u2", "second"),
        gemini("g2", "two"),
        {"$rewindTo": "u2"},
        user("u3", "third"),
        gemini("g3", "three"),
        {"$set": {"summary": "a summary", "lastUpdated": "2026-01-01T01:00:00.000Z"}},
    ]
    parsed = parse_file(write_jsonl(tmp_path / "session-x.jsonl", rows))
    assert [pe.source_ref for pe in parsed.events] == ["msg:u1", "msg:g1", "msg:g1#usage", "msg:u3", "msg:g3"]
    assert parsed.meta["summary"] == "a summary" and parsed.meta["last_updated"] == "2026-01-01T01:00:00.000Z"
    # Usage: input includes cached, tool is more prompt, thoughts are output
    assert parsed.events[2].event == Usage(
        input_tokens=1000 + 5 - 600, output_tokens=50, cache_read_tokens=600, model="gemini-x"
    )
    rows += [
        {"$set": {"messages": [user("c1", "checkpointed"), gemini("c2", "kept")]}},
        {"$rewindTo": "nope"},
        user("u9", "after a rewind to an unknown id"),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "session-y.jsonl", rows))
    assert ref_kinds(parsed.events) == [("msg:u9", "UserMessage")]
    rows[-2:] = []
    parsed = parse_file(write_jsonl(tmp_path / "session-z.jsonl", rows))
    assert [pe.source_ref for pe in parsed.events] == ["msg:c1", "msg:c2"]


def test_errors_notes_images_and_pending_calls(tmp_path):
    png = tiny_png(4, 3)
    b64 = base64.b64encode(png).decode()
    shell_out = "Command: false\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: 1\nSignal: 0"
    img_result = call("c3", name="read_file", output="Binary content provided (1 item(s)).")
    img_result["result"][0]["functionResponse"]["parts"] = [{"inlineData": {"mimeType": "image/png", "data": b64}}]
    rows = [
        META,
        user(
            "u1",
            "look",
        ),
        {
            "id": "u1",
            "timestamp": "2026-01-01T00:00:01.000Z",
            "type": "user",
            "content": [{"text": "look at "}, {"inlineData": {"mimeType": "image/png", "data": b64}}],
        },
        gemini(
            "g1",
            calls=[
                call("c1", status="error", error="File not found."),
                call("c2", name="run_shell_command", output=shell_out, args={"command": "false"}),
                img_result,
                call("c4", status="cancelled", error="[Operation Cancelled]"),
                call("c5", status="executing", result=False),
            ],
            thoughts=[{"subject": "S", "description": "D", "timestamp": "t"}],
        ),
        {"id": "w1", "timestamp": "t", "type": "warning", "content": "low disk"},
        {"id": "e1", "timestamp": "t", "type": "error", "content": "[API Error: quota]"},
        gemini("g2", calls=[call("c6", status="scheduled", result=False)], tokens=None),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "session-e.jsonl", rows))
    assert_shape(parsed.events)
    u = events_of(parsed, UserMessage)[0]
    assert u.text == "look at " and [(m.media_type, m.width, m.height) for m in u.media] == [("image/png", 4, 3)]
    results = {r.call_id: r for r in events_of(parsed, ToolResult)}
    assert (results["c1"].is_error, results["c1"].content) == (True, "File not found.")
    assert (results["c2"].is_error, results["c2"].exit_code) == (True, 1)
    assert results["c3"].media[0].sha256 == u.media[0].sha256 and not results["c3"].is_error
    assert results["c4"].is_error
    assert results["c5"].missing  # the session moved on without it
    assert "c6" not in results  # the last message's call may still finish: pending
    assert [(n.subtype, n.text) for n in events_of(parsed, SystemNote)] == [
        ("warning", "low disk"),
        ("error", "[API Error: quota]"),
    ]
    msgs = events_of(parsed, AssistantMessage)
    assert msgs[0].reasoning_reported and not msgs[1].reasoning_reported
    assert parsed.stats["usage"]["requests"] == 0 and len(parsed.artifacts) == 1
    assert parsed.settled == len(parsed.events) - 1  # the last gemini message is the open tail


def test_legacy_json_and_its_jsonl_migration_share_events(tmp_path, store):
    """Gemini CLI resumes a legacy ``.json`` as ``.jsonl`` (same messages, then more): one session."""
    msgs = [user("u1", "hi"), gemini("g1", "hello", tokens=TOKENS), user("u2", "more")]
    doc = {**META, "messages": msgs}
    legacy = tmp_path / "session-a.json"
    legacy.write_text(json.dumps(doc, indent=2), "utf-8")
    assert detected(legacy) == "gemini-cli"
    rows = [
        META,
        *msgs,
        {"$set": {"lastUpdated": "x"}},
        gemini("g2", "again", calls=[call("k1")], tokens=TOKENS),
        user("u3", "bye"),
    ]
    migrated = write_jsonl(tmp_path / "session-a.jsonl", rows)
    sid, _, seqs = import_file(store, legacy)
    sid2, parsed, seqs2 = import_file(store, migrated)
    assert sid2 == sid and len(seqs) == 4 and len(seqs2) == 4 == len(parsed.events) - 4
    one_line = tmp_path / "one-line.jsonl"
    one_line.write_text(json.dumps(doc) + "\n", "utf-8")
    assert [pe.event for pe in parse_file(one_line).events] == [pe.event for pe in parse_file(legacy).events]


def test_jsonl_growth_is_append_only(tmp_path, store):
    rows = [META, user("u1", "go"), gemini("g1", "")]
    path = write_jsonl(tmp_path / "session-g.jsonl", rows)
    _, parsed, seqs = import_file(store, path)
    assert len(seqs) == 1  # the prompt; g1 is still being written
    rows += [
        gemini("g1", "reading", calls=[call("c1")], tokens=TOKENS),
        {"$set": {"lastUpdated": "y"}},
        gemini("g2", "done", tokens=TOKENS),
        user("u2", "thanks"),
    ]
    write_jsonl(path, rows)
    sid, parsed, seqs = import_file(store, path)
    assert len(seqs) == len(parsed.events) - 1 == 6
    assert [e.source_ref for e in store.events(sid)] == [
        "msg:u1",
        "msg:g1",
        "msg:g1#usage",
        "msg:g1/call:c1",
        "msg:g2",
        "msg:g2#usage",
        "msg:u2",
    ]


STREAM = [
    {"type": "message", "role": "user", "content": "Build the page", "ts": "2026-01-30T07:00:00.000001"},
    {
        "type": "init",
        "timestamp": "2026-01-30T06:00:00.000Z",
        "session_id": "g-1",
        "model": "gemini-x",
        "ts": "2026-01-30T07:00:00.000002",
    },
    {"type": "message", "timestamp": "2026-01-30T06:00:00.100Z", "role": "user", "content": "Build the page"},
    {
        "type": "message",
        "timestamp": "2026-01-30T06:00:01.000Z",
        "role": "assistant",
        "content": "Reading ",
        "delta": True,
    },
    {
        "type": "message",
        "timestamp": "2026-01-30T06:00:01.100Z",
        "role": "assistant",
        "content": "first.",
        "delta": True,
    },
    {
        "type": "tool_use",
        "timestamp": "2026-01-30T06:00:04.000Z",
        "tool_name": "read_file",
        "tool_id": "read_file-1769700004000-ab12",
        "parameters": {"file_path": "README.md"},
    },
    {
        "type": "tool_use",
        "timestamp": "2026-01-30T06:00:04.001Z",
        "tool_name": "run_shell_command",
        "tool_id": "run_shell_command-1769700004001-cd34",
        "parameters": {"command": "ls"},
    },
    {
        "type": "tool_result",
        "timestamp": "2026-01-30T06:00:04.050Z",
        "tool_id": "read_file-1769700004000-ab12",
        "status": "error",
        "output": "",
        "error": {"type": "file_not_found", "message": "File not found"},
    },
    {
        "type": "tool_result",
        "timestamp": "2026-01-30T06:00:04.060Z",
        "tool_id": "run_shell_command-1769700004001-cd34",
        "status": "success",
        "output": "index.html",
    },
    {"type": "error", "timestamp": "2026-01-30T06:00:05.000Z", "severity": "warning", "message": "Loop detected"},
    {
        "type": "message",
        "timestamp": "2026-01-30T06:05:00.000Z",
        "role": "assistant",
        "content": "Done. ",
        "delta": True,
    },
    {"type": "message", "timestamp": "2026-01-30T06:05:00.100Z", "role": "assistant", "content": "Bye.", "delta": True},
    {
        "type": "result",
        "timestamp": "2026-01-30T06:05:01.000Z",
        "status": "success",
        "stats": {
            "total_tokens": 52000,
            "input_tokens": 51000,
            "output_tokens": 1000,
            "cached": 30000,
            "input": 21000,
            "duration_ms": 300000,
            "tool_calls": 2,
        },
    },
]


def test_stream_json(tmp_path, store):
    path = write_jsonl(tmp_path / "run.jsonl", STREAM)
    assert detected(path) == "gemini-cli"
    parsed = parse_file(path)
    assert parsed.external_key == "gemini-cli:stream:g-1" and parsed.meta["stats"]["cached"] == 30000
    assert ref_kinds(parsed.events) == [
        ("line:3", "UserMessage"),
        ("line:4", "AssistantMessage"),
        ("line:8", "ToolResult"),
        ("line:9", "ToolResult"),
        ("line:10", "SystemNote"),
        ("line:11", "AssistantMessage"),
    ]
    first, last = (parsed.events[1].event, parsed.events[5].event)
    assert first.text == "Reading first." and [c.name for c in first.tool_calls] == ["read_file", "run_shell_command"]
    assert first.model == "gemini-x" and last.text == "Done. Bye."
    assert json.loads(first.tool_calls[1].arguments) == {"command": "ls"}
    r1, r2 = parsed.events[2].event, parsed.events[3].event
    assert (r1.is_error, r1.content, r2.is_error, r2.content) == (True, "File not found", False, "index.html")
    assert parsed.events[4].event == SystemNote(text="Loop detected", subtype="warning")
    assert parsed.events[0].ts == "2026-01-30T06:00:00.100Z"  # the real prompt; the harness copy is dropped
    assert parsed.settled is None
    assert_shape(parsed.events)
    assert_reimport_adds_nothing(store, path)
    # a harness line that differs from the prompt is kept as meta; an unfinished request is the open tail
    rows = [dict(STREAM[0], content="[harness] run the eval"), *STREAM[1:5]]
    parsed = parse_file(write_jsonl(tmp_path / "run2.jsonl", rows))
    assert [(type(pe.event).__name__, getattr(pe.event, "is_meta", None)) for pe in parsed.events] == [
        ("UserMessage", True),
        ("UserMessage", False),
        ("AssistantMessage", None),
    ]
    assert parsed.settled == 2


def test_stream_json_malformed(tmp_path, store):
    path = write_jsonl(tmp_path / "run.jsonl", STREAM)
    import_file(store, path)
    bad = [dict(r) for r in STREAM]
    bad[5]["parameters"] = "README.md"
    assert_rejected(
        store,
        tmp_path / "bad.jsonl",
        "".join(json.dumps(r) + "\n" for r in bad).encode(),
        where="line 6",
        reason="field 'parameters' must be an object, got string",
    )
    bad = [dict(r) for r in STREAM]
    bad[7]["tool_id"] = 7
    assert_rejected(
        store,
        tmp_path / "bad2.jsonl",
        "".join(json.dumps(r) + "\n" for r in bad).encode(),
        where="line 8",
        reason="field 'tool_id' must be a string, got number",
    )
    bad = [dict(r) for r in STREAM]
    bad[9]["type"] = "telemetry"
    assert_rejected(
        store,
        tmp_path / "bad3.jsonl",
        "".join(json.dumps(r) + "\n" for r in bad).encode(),
        where="line 10",
        reason="field 'type' must be one of",
    )


def test_unknown_jsonl_record_is_rejected(tmp_path, store):
    rows = [META, user("u1", "x"), {"foo": 1}]
    assert_rejected(
        store,
        write_jsonl(tmp_path / "session-q.jsonl", rows),
        where="line 3",
        reason="not a Gemini CLI session record",
        fmt="gemini-cli",
    )
