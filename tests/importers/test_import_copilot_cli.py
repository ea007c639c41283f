"""GitHub Copilot CLI ``events.jsonl`` importer: corpus counts checked by hand, a synthetic log of every
event the corpus lacks, the open tail of a growing log, detection, re-import and malformed input."""

from __future__ import annotations

import base64
import json
from pathlib import Path

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
from corpus_support import corpus_files, corpus_format, corpus_name

from latch.engine.episodes import EpisodeIndex
from latch.events import (
    AssistantMessage,
    CompactionMarker,
    SubagentMarker,
    SystemNote,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    canonical_json,
)
from latch.host.ingest import import_file
from latch.importers import TranscriptError, parse_file
from latch.importers.copilot_cli import CopilotCliImporter
from latch.kernel import canonical_state
from latch.store import EventStore

LANTERN = "copilot-cli/lantern_events.jsonl"

# Counts checked by hand over the raw file (15 lines) with a Python script that does not import latch
# (json.loads per line, collections.Counter over `type`):
#   event types    session.start 1, session.model_change 1, system.message 1, user.message 1,
#                  assistant.turn_start 2, assistant.message 2, tool.execution_start 2,
#                  tool.execution_complete 2, assistant.turn_end 2, session.shutdown 1
#   user messages  1 (line 4; `content` is the 77-character prompt, `transformedContent` wraps it in
#                  <current_datetime> and <system_reminder>: not imported)
#   assistant      2 = the 2 assistant.message lines (6, 13), one per model call (apiCallId chatcmpl-427,
#                  chatcmpl-839, no chunkIndex/chunkCount); both name model qwen3:0.6b, as the
#                  model_change on line 2 does
#   tool calls     line 6 has 2 toolRequests (call_fpjobf9a, call_de798t9c, both `view` of src/orders.py),
#                  line 13 has none; the 2 tool.execution_complete lines (9, 10) carry those two ids:
#                  2 results, 0 orphans, 0 missing
#   tool errors    both completes have success: false, error.message '"path": Required' (code failure): 2
#   usage          outputTokens 470 + 508 = 978 over 2 requests; session.shutdown (line 15)
#                  modelMetrics["qwen3:0.6b"] = requests.count 2, usage.outputTokens 978, which confirms it;
#                  its inputTokens 4100 (a session total) has no per-request split in the log: input None
EXPECTED = dict(
    user_messages=1,
    assistant_messages=2,
    tool_calls=2,
    tool_results=2,
    tool_errors=2,
    orphan_results=0,
    missing_results=0,
    usage=dict(input_tokens=None, output_tokens=978, cache_read_tokens=None, cache_write_tokens=None, requests=2),
)


@pytest.mark.corpus
def test_corpus_counts(corpus_dir):
    path = corpus_dir / LANTERN
    assert detected(path) == "copilot-cli"
    parsed = parse_file(path)
    assert parsed.stats == EXPECTED
    assert parsed.external_key == "copilot-cli:049410b4-c1df-44ee-87a5-caa1c349091e"
    assert parsed.workspace == "/work"
    assert parsed.settled is None  # ends with session.shutdown: nothing open
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("line:3", "SystemNote"),
        ("line:4", "UserMessage"),
        ("line:6", "AssistantMessage"),
        ("line:6#usage", "Usage"),
        ("line:9", "ToolResult"),
        ("line:10", "ToolResult"),
        ("line:13", "AssistantMessage"),
        ("line:13#usage", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert ev["line:3"].subtype == "system_prompt" and ev["line:3"].text.startswith("You are the GitHub Copilot CLI")
    assert ev["line:4"] == UserMessage(
        text="In src/orders.py make average_item_price return 0 when the cart has no items."
    )
    first = ev["line:6"]
    assert (first.text, first.reasoning_reported, first.model) == ("", True, "qwen3:0.6b")
    assert first.tool_calls == (
        ToolCall(id="call_fpjobf9a", name="view", arguments='{"file_path":"src/orders.py"}'),
        ToolCall(id="call_de798t9c", name="view", arguments='{"file_path":"src/orders.py"}'),
    )
    assert ev["line:6#usage"] == Usage(output_tokens=470, model="qwen3:0.6b", request_id="chatcmpl-427")
    assert ev["line:9"] == ToolResult(call_id="call_fpjobf9a", content='"path": Required', is_error=True, name="view")
    assert ev["line:13"].text.startswith("The error indicates that the **`paths`** field is required")
    assert parsed.meta["shutdown"]["modelMetrics"]["qwen3:0.6b"]["usage"]["inputTokens"] == 4100
    assert parsed.meta["shutdown"]["shutdown_type"] == "routine"
    assert (parsed.meta["copilot_version"], parsed.meta["models"]) == ("1.0.78", ["qwen3:0.6b"])
    assert parsed.meta["ignored_events"] == {"assistant.turn_start": 2} and "unknown_events" not in parsed.meta


@pytest.mark.corpus
def test_import_twice_keeps_one_copy(corpus_dir, store):
    assert_reimport_adds_nothing(store, corpus_dir / LANTERN)


@pytest.mark.corpus
def test_malformed_copies(corpus_dir, store, tmp_path):
    # line 6 is the assistant.message with the two tool requests
    def wrong(obj):
        obj["data"]["toolRequests"] = {"toolCallId": "call_fpjobf9a"}

    check_jsonl_corruptions(
        store,
        tmp_path,
        corpus_dir / LANTERN,
        middle=6,
        wrong_type=wrong,
        wrong_type_reason="field 'data.toolRequests' must be an array, got object",
        fmt="copilot-cli",
    )


@pytest.mark.corpus
def test_malformed_result_names_line_and_field(corpus_dir, store, tmp_path):
    # line 9: the first tool.execution_complete
    data = mutate_line((corpus_dir / LANTERN).read_bytes(), 9, lambda obj: obj["data"].update(success="false"))
    assert_rejected(
        store, tmp_path / "bad.jsonl", data, where="line 9", reason="field 'data.success' must be a boolean, got string"
    )
    data = mutate_line((corpus_dir / LANTERN).read_bytes(), 9, lambda obj: obj["data"].update(toolCallId=9))
    assert_rejected(
        store,
        tmp_path / "bad2.jsonl",
        data,
        where="line 9",
        reason="field 'data.toolCallId' must be a string, got number",
    )


@pytest.mark.corpus
def test_binary_and_empty_files(store, tmp_path):
    assert_rejected(
        store,
        tmp_path / "events.jsonl",
        bytes(range(256)) * 4,
        where="line 2",
        reason="not UTF-8 text",
        fmt="copilot-cli",
    )
    assert_rejected(store, tmp_path / "events2.jsonl", b"", where=None, reason="file is empty", fmt="copilot-cli")


@pytest.mark.corpus
def test_utf16_bom_crlf_copy_imports(corpus_dir, tmp_path):
    assert check_utf16_variant(tmp_path, corpus_dir / LANTERN, "copilot-cli").stats == EXPECTED


@pytest.mark.corpus
def test_sniff_claims_no_other_corpus_file(corpus_dir):
    for p in corpus_files():
        if corpus_format(p) != "copilot-cli":
            assert CopilotCliImporter().sniff(p, p.read_bytes()[:65536]) == 0, corpus_name(p)


@pytest.mark.corpus
def test_every_prefix_then_the_whole_file_equals_one_import(corpus_dir, tmp_path):
    _check_growth(tmp_path, (corpus_dir / LANTERN).read_bytes())


# --------------------------------------------------------------------------- synthetic log
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _ev(kind: str, data: dict) -> dict:
    return {"type": kind, "data": data}


def _req(call_id: str, name: str, **arguments) -> dict:
    return {"toolCallId": call_id, "name": name, "arguments": arguments, "type": "function"}


def _msg(content: str = "", *requests, **extra) -> dict:
    return _ev(
        "assistant.message",
        {"messageId": f"m-{len(content)}-{len(requests)}", "content": content, "toolRequests": list(requests), **extra},
    )


def _done(call_id: str, content: str | None = None, *, error: str | None = None, **extra) -> dict:
    data = {"toolCallId": call_id, "success": error is None, **extra}
    if content is not None:
        data["result"] = {"content": content, "detailedContent": f"(display) {content}"}
    if error is not None:
        data["error"] = {"message": error, "code": "failure"}
    return _ev("tool.execution_complete", data)


def _start(call_id: str, name: str) -> dict:
    return _ev("tool.execution_start", {"toolCallId": call_id, "toolName": name, "arguments": {}})


def synthetic_rows() -> list[dict]:
    """A Copilot CLI log with every event the importer reads (written from the published schema,
    github/copilot-sdk session-events.schema.json); comments give line numbers."""
    metrics = {
        "gpt-5.1": {
            "requests": {"count": 5, "cost": 1},
            "usage": {
                "inputTokens": 52000,
                "outputTokens": 101,
                "cacheReadTokens": 40000,
                "cacheWriteTokens": 0,
                "reasoningTokens": 20,
            },
        }
    }
    rows = [
        _ev(
            "session.start",
            {
                "sessionId": "5e551011-aaaa",
                "version": 1,
                "producer": "copilot-agent",
                "copilotVersion": "0.0.400",
                "startTime": "2026-03-01T10:00:00.000Z",
                "context": {"cwd": "/home/user/app", "gitRoot": "/home/user/app", "branch": "main"},
            },
        ),
        _ev("session.model_change", {"newModel": "claude-sonnet-4.5"}),
        _ev("system.message", {"role": "system", "content": "You are the GitHub Copilot CLI."}),
        _ev("session.info", {"infoType": "folder_trust", "message": "Folder /home/user/app is trusted."}),
        _ev(
            "user.message",
            {
                "content": "fix the failing test, see the screenshot",
                "delivery": "idle",  # 5
                "transformedContent": "<current_datetime>…</current_datetime>\n\nfix the failing test",
                "attachments": [
                    {"type": "blob", "mimeType": "image/png", "data": _b64(tiny_png(4, 5))},
                    {"type": "file", "path": "/home/user/app/t.py", "displayName": "t.py"},
                ],
            },
        ),
        _ev("assistant.turn_start", {"turnId": "0"}),
        _ev("assistant.reasoning", {"reasoningId": "r1", "content": "Run the tests first."}),  # 7
        _msg(
            "Running the tests.",
            _req("c1", "bash", command="pytest", description="run tests"),  # 8
            _req("c2", "view", path="/home/user/app/t.py"),
            outputTokens=42,
            apiCallId="api-1",
            turnId="0",
        ),
        _start("c1", "bash"),
        _start("c2", "view"),
        _done("c2", "1. def test_x(): ..."),  # 11: the second call returns first
        _done("c1", "1 failed\n<exited with exit code 1>"),  # 12
        _ev("session.model_change", {"newModel": "gpt-5.1", "previousModel": "claude-sonnet-4.5"}),  # 13
        _msg(
            "",
            _req("c3", "edit", path="t.py", old_str="a", new_str="b"),
            chunkIndex=0,
            chunkCount=2,  # 14
            apiCallId="api-2",
            reasoningOpaque="opaque",
        ),
        _msg("Editing.", chunkIndex=1, chunkCount=2, apiCallId="api-2", outputTokens=30),  # 15: same model call
        _start("c3", "edit"),
        _done("c3", error="No match found for old_str"),  # 17
        _ev("session.warning", {"warningType": "rate_limit", "message": "Rate limit is near."}),  # 18
        _ev("tool.user_requested", {"toolCallId": "u1", "toolName": "bash"}),
        _done("u1", "hello"),  # 20: a user-run command no assistant message requested
        _msg(
            "",
            _req("c4", "task", agent_type="explore", prompt="find usages of foo"),
            outputTokens=12,  # 21
            model="gpt-5.1",
        ),
        _ev(
            "subagent.started",
            {
                "toolCallId": "c4",
                "agentName": "explore",
                "agentDisplayName": "Explore",
                "agentDescription": "Explores the codebase",
            },
        ),  # 22
        _msg(
            "",
            _req("c5", "grep", pattern="foo"),
            parentToolCallId="c4",
            outputTokens=5,  # 23
            model="claude-haiku-4.5",
        ),
        _done("c5", "a.py:1: foo", parentToolCallId="c4"),  # 24
        _ev("assistant.turn_end", {"turnId": "0"}),  # 25: whose turn? a sub-agent runs: nothing closed
        _msg("foo is used in a.py", parentToolCallId="c4", outputTokens=7, model="claude-haiku-4.5"),  # 26
        _ev("subagent.completed", {"toolCallId": "c4", "agentName": "explore", "agentDisplayName": "Explore"}),
        _done("c4", "foo is used in a.py"),  # 28
        _msg("", _req("c6", "bash", command="sleep 99"), outputTokens=3),  # 29
        _start("c6", "bash"),
        _ev("abort", {"reason": "user_initiated"}),  # 31
        _ev("assistant.turn_end", {"turnId": "0"}),
        _ev("session.compaction_start", {"trigger": "threshold"}),
        _ev(
            "session.compaction_complete",
            {
                "success": True,
                "trigger": "threshold",
                "preCompactionTokens": 90000,
                "postCompactionTokens": 12000,
                "summaryContent": "Summary so far.",
            },
        ),
        _ev("session.quantum_entanglement", {"qubits": [1, 2]}),  # 35: a type a newer CLI might add
        _ev("session.error", {"errorType": "model", "message": "500 from the model"}),  # 36
        _ev("user.message", {"content": "and the docs?", "delivery": "idle"}),  # 37
        _msg("", _req("c7", "view", path="README.md"), outputTokens=4),  # 38
        _ev("assistant.turn_end", {"turnId": "1"}),  # 39: c7 never ran
        _ev(
            "session.truncation",
            {
                "performedBy": "BasicTruncator",
                "tokenLimit": 128000,
                "preTruncationTokensInMessages": 130000,
                "postTruncationTokensInMessages": 100000,
                "preTruncationMessagesLength": 40,
                "postTruncationMessagesLength": 30,
                "messagesRemovedDuringTruncation": 10,
                "tokensRemovedDuringTruncation": 30000,
            },
        ),
        _ev(
            "session.binary_asset",
            {
                "assetId": "sha256:abc",
                "byteLength": 99,
                "mimeType": "image/png",  # 41
                "type": "image",
                "data": _b64(tiny_png(6, 7)),
            },
        ),
        _ev(
            "user.message",
            {
                "content": "this one",
                "delivery": "idle",  # 42
                "attachments": [{"type": "blob", "mimeType": "image/png", "assetId": "sha256:abc"}],
            },
        ),
        _ev("system.notification", {"content": "Shell 3 completed", "kind": {"type": "shell_completed"}}),  # 43
        _ev(
            "session.shutdown",
            {
                "shutdownType": "error",
                "errorReason": "out of memory",
                "modelMetrics": metrics,
                "codeChanges": {"linesAdded": 1, "linesRemoved": 1, "filesModified": ["t.py"]},
                "sessionStartTime": 1772359200000,
                "totalApiDurationMs": 9000,
                "totalPremiumRequests": 3,
            },
        ),  # 44
        _ev(
            "session.resume",
            {
                "resumeTime": "2026-03-01T11:00:00.000Z",
                "eventCount": 44,
                "context": {"cwd": "/home/user/app"},
                "selectedModel": "gpt-5.1-codex",
            },
        ),  # 45
        _ev("user.message", {"content": "continue", "delivery": "idle"}),  # 46
        _msg("", _req("c8", "bash", command="make"), outputTokens=9),  # 47
        _start("c8", "bash"),  # 48: still running when the file ends
    ]
    for i, row in enumerate(rows):
        row["id"] = f"e{i + 1}"
        row["timestamp"] = f"2026-03-01T10:{i // 60:02d}:{i % 60:02d}.000Z"
        row["parentId"] = f"e{i}" if i else None
    return rows


def test_synthetic_log(tmp_path, store):
    path = write_jsonl(tmp_path / "events.jsonl", synthetic_rows())
    assert detected(path) == "copilot-cli"
    parsed = parse_file(path)
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("line:3", "SystemNote"),
        ("line:4", "SystemNote"),
        ("line:5", "UserMessage"),
        ("line:8", "AssistantMessage"),
        ("line:8#usage", "Usage"),
        ("line:12", "ToolResult"),
        ("line:11", "ToolResult"),
        ("line:14", "AssistantMessage"),
        ("line:15#usage", "Usage"),
        ("line:17", "ToolResult"),
        ("line:18", "SystemNote"),
        ("line:20", "ToolResult"),
        ("line:21", "AssistantMessage"),
        ("line:21#usage", "Usage"),
        ("line:28", "ToolResult"),
        ("line:22", "SubagentMarker"),
        ("line:23", "AssistantMessage"),
        ("line:23#usage", "Usage"),
        ("line:24", "ToolResult"),
        ("line:26", "AssistantMessage"),
        ("line:26#usage", "Usage"),
        ("line:29", "AssistantMessage"),
        ("line:29#usage", "Usage"),
        ("missing:c6", "ToolResult"),
        ("line:31", "SystemNote"),
        ("line:34", "CompactionMarker"),
        ("line:36", "SystemNote"),
        ("line:37", "UserMessage"),
        ("line:38", "AssistantMessage"),
        ("line:38#usage", "Usage"),
        ("missing:c7", "ToolResult"),
        ("line:40", "CompactionMarker"),
        ("line:42", "UserMessage"),
        ("line:43", "SystemNote"),
        ("line:44", "SystemNote"),
        ("line:46", "UserMessage"),
        ("line:47", "AssistantMessage"),
        ("line:47#usage", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert ev["line:3"] == SystemNote(text="You are the GitHub Copilot CLI.", subtype="system_prompt")
    assert ev["line:4"] == SystemNote(text="Folder /home/user/app is trusted.", subtype="info")
    # the typed prompt (not transformedContent), the pasted image as an artifact, the file attachment named
    prompt = ev["line:5"]
    assert prompt.text == "fix the failing test, see the screenshot\n[attachment (file): t.py]" and not prompt.is_meta
    (img,) = prompt.media
    assert (img.media_type, img.width, img.height) == ("image/png", 4, 5)
    # the model of the model_change before it (the message names none); reasoning from assistant.reasoning
    first = ev["line:8"]
    assert (first.text, first.model, first.reasoning_reported) == ("Running the tests.", "claude-sonnet-4.5", True)
    assert first.tool_calls == (
        ToolCall("c1", "bash", '{"command":"pytest","description":"run tests"}'),
        ToolCall("c2", "view", '{"path":"/home/user/app/t.py"}'),
    )
    assert ev["line:8#usage"] == Usage(output_tokens=42, model="claude-sonnet-4.5", request_id="api-1")
    # results in call order whatever order they came in; the exit code trailer of the bash tool
    assert ev["line:12"] == ToolResult(
        call_id="c1", content="1 failed\n<exited with exit code 1>", is_error=True, name="bash", exit_code=1
    )
    assert ev["line:11"] == ToolResult(call_id="c2", content="1. def test_x(): ...", name="view")
    # two chunks of one model call (apiCallId api-2) are one message, on the later model (gpt-5.1)
    chunked = ev["line:14"]
    assert (chunked.text, chunked.model, chunked.reasoning_reported) == ("Editing.", "gpt-5.1", True)
    assert [c.id for c in chunked.tool_calls] == ["c3"]
    assert ev["line:15#usage"] == Usage(output_tokens=30, model="gpt-5.1", request_id="api-2")
    assert ev["line:17"] == ToolResult(call_id="c3", content="No match found for old_str", is_error=True, name="edit")
    assert ev["line:18"] == SystemNote(text="Rate limit is near.", subtype="warning")
    assert ev["line:20"] == ToolResult(call_id="u1", content="hello", orphan=True)
    # the sub-agent: a marker after the task call's result, its own requests inline with their own model
    assert ev["line:22"] == SubagentMarker(call_id="c4", agent_type="explore", description="Explores the codebase")
    assert ev["line:28"] == ToolResult(call_id="c4", content="foo is used in a.py", name="task")
    assert ev["line:23"].model == "claude-haiku-4.5" and ev["line:26"].text == "foo is used in a.py"
    assert ev["missing:c6"] == ToolResult(
        call_id="c6",
        content="[no result: the turn was aborted (user_initiated)]",
        is_error=True,
        name="bash",
        missing=True,
    )
    assert ev["line:31"] == SystemNote(text="aborted (user_initiated)", subtype="abort")
    assert ev["line:34"] == CompactionMarker(
        trigger="threshold", pre_tokens=90000, post_tokens=12000, summary="Summary so far."
    )
    assert ev["line:36"] == SystemNote(text="500 from the model", subtype="error")
    assert ev["missing:c7"].content == "[no result: the turn ended without it]"
    assert ev["line:40"] == CompactionMarker(trigger="truncation", pre_tokens=130000, post_tokens=100000)
    (asset,) = ev["line:42"].media  # an attachment interned as a session.binary_asset
    assert (ev["line:42"].text, asset.width, asset.height) == ("this one", 6, 7)
    assert ev["line:43"] == SystemNote(text="Shell 3 completed", subtype="notification")
    assert ev["line:44"] == SystemNote(text="out of memory", subtype="error")
    assert ev["line:47"].model == "gpt-5.1-codex"  # session.resume's selectedModel
    # 8 model calls (lines 8, 14+15, 21, 23, 26, 29, 38, 47); results of c1-c5 and u1 (c6, c7 missing, c8 running)
    assert parsed.stats == dict(
        user_messages=4,
        assistant_messages=8,
        tool_calls=8,
        tool_results=6,
        tool_errors=2,
        orphan_results=1,
        missing_results=2,
        usage=dict(
            input_tokens=None,
            output_tokens=42 + 30 + 12 + 5 + 7 + 3 + 4 + 9,
            cache_read_tokens=None,
            cache_write_tokens=None,
            requests=8,
        ),
    )
    assert parsed.external_key == "copilot-cli:5e551011-aaaa" and parsed.workspace == "/home/user/app"
    assert parsed.meta["unknown_events"] == {"session.quantum_entanglement": 1}
    assert parsed.meta["ignored_events"] == {
        "assistant.turn_start": 1,
        "session.compaction_start": 1,
        "tool.user_requested": 1,
    }
    assert parsed.meta["shutdown"]["modelMetrics"]["gpt-5.1"]["usage"]["cacheReadTokens"] == 40000
    assert (parsed.meta["resumes"], parsed.meta["models"]) == (1, ["claude-sonnet-4.5", "gpt-5.1"])
    assert len(parsed.artifacts) == 2
    # c8 is still running: pending (no placeholder); its result would append at the end, so all is settled
    assert parsed.settled is None and "c8" not in {
        pe.event.call_id for pe in parsed.events if isinstance(pe.event, ToolResult)
    }
    assert_reimport_adds_nothing(store, path)


def test_open_tail_of_a_growing_log(tmp_path):
    rows = synthetic_rows()
    # the file ends with the first of the two chunks of a model call (line 14): that message is the open tail
    parsed = parse_file(write_jsonl(tmp_path / "a.jsonl", rows[:14]))
    assert [pe.source_ref for pe in parsed.events[parsed.settled :]] == ["line:14"]
    # a call still executing (line 9: c1 started, c2 requested): everything after the message is open
    parsed = parse_file(write_jsonl(tmp_path / "b.jsonl", rows[:10]))
    assert ref_kinds(parsed.events)[-2:] == [("line:8", "AssistantMessage"), ("line:8#usage", "Usage")]
    assert parsed.settled is None  # results append after the usage: nothing stored can change
    # c2 answered first (line 11): its result must wait behind c1's, so it is open
    parsed = parse_file(write_jsonl(tmp_path / "c.jsonl", rows[:11]))
    assert [pe.source_ref for pe in parsed.events[parsed.settled :]] == ["line:11"]


def test_every_prefix_of_the_synthetic_log_then_the_whole(tmp_path):
    _check_growth(tmp_path, "".join(json.dumps(r) + "\n" for r in synthetic_rows()).encode())


def _check_growth(tmp_path, data: bytes) -> None:
    """Import each line prefix of ``data`` (live), then the whole file: the store equals one import."""
    lines = data.splitlines(keepends=True)
    live = tmp_path / "events.jsonl"
    live.write_bytes(data)
    one = EventStore(tmp_path / "one.db")
    one_sid, _, _ = import_file(one, live)
    expected = _log(one, one_sid)
    for keep in range(1, len(lines)):
        grown = EventStore(tmp_path / f"grown{keep}.db")
        live.write_bytes(b"".join(lines[:keep]))
        import_file(grown, live)
        live.write_bytes(data)
        sid, _, _ = import_file(grown, live)
        assert _log(grown, sid) == expected, f"prefix of {keep} lines"
        grown.close()
    one.close()


def _log(store, sid):
    return [(e.seq, e.kind, canonical_json(e.event.to_payload()), e.source_ref, e.ts) for e in store.events(sid)]


def test_sniff(tmp_path):
    rows = synthetic_rows()
    assert CopilotCliImporter().sniff(tmp_path, (json.dumps(rows[0]) + "\n").encode()) == 98
    # a log whose first lines are later events (a copy cut from the middle): envelopes with Copilot types
    assert detected(write_jsonl(tmp_path / "mid.jsonl", rows[4:])) == "copilot-cli"
    # a session.start longer than the sniffed head
    rows[0]["data"]["context"]["repository"] = "x" * 70_000
    path = write_jsonl(tmp_path / "long.jsonl", rows)
    assert detected(path) == "copilot-cli" and parse_file(path).stats["assistant_messages"] == 8
    # envelopes of other tools are not Copilot's
    other = [{"type": "message", "data": {}, "id": "1", "timestamp": "t"}]
    assert CopilotCliImporter().sniff(tmp_path, (json.dumps(other[0]) + "\n").encode()) == 0


@pytest.mark.parametrize(
    "line, change, reason",
    [
        (
            8,
            lambda d: d["toolRequests"][0].update(toolCallId=5),
            "field 'data.toolRequests[0].toolCallId' must be a string, got number",
        ),
        (8, lambda d: d["toolRequests"][1].pop("name"), "missing field 'data.toolRequests[1].name' (a string)"),
        (8, lambda d: d.update(toolRequests=["c1"]), "field 'data.toolRequests[0]' must be an object, got string"),
        (5, lambda d: d.update(content=["fix it"]), "field 'data.content' must be a string, got array"),
        (
            5,
            lambda d: d["attachments"][0].update(data="not base64!"),
            "field 'data.attachments[0].data' is not valid base64",
        ),
        (15, lambda d: d.update(outputTokens=-1), "field 'data.outputTokens' must be a non-negative integer, got -1"),
        (15, lambda d: d.update(outputTokens="30"), "field 'data.outputTokens' must be an integer, got string"),
        (12, lambda d: d.update(result="1 failed"), "field 'data.result' must be an object, got string"),
        (17, lambda d: d["error"].update(message=404), "field 'data.error.message' must be a string, got number"),
        (1, lambda d: d.update(context="/home/user/app"), "field 'data.context' must be an object, got string"),
        (2, lambda d: d.pop("newModel"), "missing field 'data.newModel' (a string)"),
        (
            34,
            lambda d: d.update(preCompactionTokens=1.5),
            "field 'data.preCompactionTokens' must be an integer, got number",
        ),
        (
            44,
            lambda d: d["modelMetrics"]["gpt-5.1"]["usage"].update(inputTokens="52000"),
            "field 'data.modelMetrics.gpt-5.1.usage.inputTokens' must be a non-negative integer, got string",
        ),
    ],
)
def test_wrong_field_types(tmp_path, store, line, change, reason):
    rows = synthetic_rows()
    change(rows[line - 1]["data"])
    assert_rejected(store, write_jsonl(tmp_path / "bad.jsonl", rows), where=f"line {line}", reason=reason)


def test_envelope_errors(tmp_path):
    rows = synthetic_rows()
    rows[8] = {"type": "tool.execution_start", "data": [], "id": "e9", "timestamp": "t"}
    with pytest.raises(TranscriptError, match=r"line 9: field 'data' must be an object, got array"):
        parse_file(write_jsonl(tmp_path / "a.jsonl", rows))
    rows = synthetic_rows()
    rows[3].pop("type")
    with pytest.raises(TranscriptError, match=r"line 4: missing field 'type' \(a string\)"):
        parse_file(write_jsonl(tmp_path / "b.jsonl", rows), "copilot-cli")
    # an unknown event type is not checked at all: a newer CLI's payload may have any shape
    rows = synthetic_rows()
    rows[34]["data"] = ["anything"]
    assert parse_file(write_jsonl(tmp_path / "c.jsonl", rows)).meta["unknown_events"] == {
        "session.quantum_entanglement": 1
    }


def test_steering_prompt_does_not_close_the_running_call(tmp_path):
    rows = synthetic_rows()[:10]  # c1, c2 running
    rows.append(_ev("user.message", {"content": "also check lint", "delivery": "steering"}))
    rows += [_done("c1", "ok\n<exited with exit code 0>"), _done("c2", "text")]
    parsed = parse_file(write_jsonl(tmp_path / "s.jsonl", rows))
    assert_shape(parsed.events)
    results = [pe.event for pe in parsed.events if isinstance(pe.event, ToolResult)]
    assert [(r.call_id, r.missing, r.is_error, r.exit_code) for r in results] == [
        ("c1", False, False, 0),
        ("c2", False, False, None),
    ]
    assert any(isinstance(pe.event, UserMessage) and pe.event.text == "also check lint" for pe in parsed.events)
    assert all(
        isinstance(pe.event, (SystemNote, UserMessage, AssistantMessage, Usage, ToolResult)) for pe in parsed.events
    )


# ------------------------------------------------------------ sql todos and async bash (tests/fixtures/copilot-cli)
SQL_ASYNC = Path(__file__).parents[1] / "fixtures/copilot-cli/events.jsonl"


def test_corpus_prompt_names_the_sql_todos_and_async_bash_the_fixture_follows(corpus_dir):
    """The corpus file has no sql or async bash call; its system prompt defines the shapes the fixture uses."""
    prompt = next(pe.event for pe in parse_file(corpus_dir / LANTERN).events if isinstance(pe.event, SystemNote))
    assert "- `todos`: id, title, description, status (pending/in_progress/done/blocked)" in prompt.text
    assert 'Use with `mode="async"` when:' in prompt.text
    assert "Use read_bash with shellId to retrieve the full output after notification" in prompt.text


def test_sql_todos_and_async_bash_import_as_calls_with_results_and_one_command(store):
    parsed = parse_file(SQL_ASYNC)
    assert_shape(parsed.events)
    calls = [c for pe in parsed.events if isinstance(pe.event, AssistantMessage) for c in pe.event.tool_calls]
    results = {pe.event.call_id: pe.event for pe in parsed.events if isinstance(pe.event, ToolResult)}
    assert [c.name for c in calls] == ["sql", "sql", "bash", "read_bash", "sql"]
    # every todo update is a call with its result, the SQL kept as written
    assert json.loads(calls[1].arguments)["query"] == "UPDATE todos SET status = 'in_progress' WHERE id = 'run-tests';"
    assert [results[c.id].content for c in calls if c.name == "sql"] == [
        "2 row(s) inserted.",
        "1 row(s) updated.",
        "2 row(s) updated.",
    ]
    assert results["call_bash1"].exit_code is None and not results["call_bash1"].is_error
    assert results["call_read1"].exit_code == 1 and results["call_read1"].is_error
    sid, _, _ = import_file(store, SQL_ASYNC)
    s = canonical_state(store, sid)
    # the async start and its read_bash (same shellId) are one managed process whose exit is the test's outcome
    assert [(p["process_id"], p["running"], p["exit_code"]) for p in s.processes] == [("order-tests", False, 1)]
    assert [(o["requirement"], o["status"], o["exit_code"]) for o in s.evidence] == [
        ("python -m pytest -q tests/test_orders.py", "failed", 1)
    ]
    index = EpisodeIndex()
    index.extend(store.events(sid))
    assert [
        ep.marker_names
        for ep in index.episodes
        if "validation_failed" in ep.marker_names or "validation_passed" in ep.marker_names
    ] == [("validation_failed", "failure")]
