"""Claude Code session JSONL importer: corpus counts checked by hand, tree/branch rules, malformed input."""

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
    ref_kinds,
    tiny_png,
    write_jsonl,
)

from latch.events import AssistantMessage, CompactionMarker, SubagentMarker, SystemNote, ToolResult, Usage, UserMessage
from latch.importers import parse_file

BASTION = "claude-code/bastion_claude-session.jsonl"
RELIABILITY = "claude-code/claude-reliability_python-to-rust-port.jsonl"

# Counts checked by hand with jq over the raw files, independently of the importer:
#   user messages   jq 'select(.type=="user") | select((.message.content|type)=="string"
#                        or ([.message.content[]?|select(.type=="text")]|length>0)) | .isMeta'
#                   (bastion: 1 prompt; reliability: 1 prompt + 1 isMeta "Stop hook feedback")
#   assistant       jq -r 'select(.type=="assistant") | .message.id' | sort -u | wc -l   (one per API response)
#   tool calls      jq 'select(.type=="assistant") | .message.content[] | select(.type=="tool_use")' | wc -l
#   tool results    jq 'select(.type=="user") | .message.content[]? | select(.type=="tool_result")' | wc -l
#   tool errors     same with .is_error==true (none in either file)
#   orphans/missing comm -3 of the sorted tool_use ids and tool_result tool_use_ids: empty for both files
#   usage           jq -c '[.message.id, .message.usage]' | sort -u: exactly one usage per message.id (the
#                   repeated lines carry identical usage), summed over the 39 responses of reliability:
#                   input 38, output 563, cache_read 1114040, cache_creation 22988. Bastion (glm-4.7
#                   behind a proxy) reports input_tokens 0 / output_tokens 0 on all 6 responses: no usage.
#   Every conversational line is on the active branch (no rewinds, no sidechain lines in either file);
#   reliability has 2 parallel-call pairs whose first result hangs off its own tool_use line.
EXPECTED = {
    BASTION: dict(
        user_messages=1,
        assistant_messages=6,
        tool_calls=5,
        tool_results=5,
        tool_errors=0,
        orphan_results=0,
        missing_results=0,
        usage=dict(input_tokens=None, output_tokens=None, cache_read_tokens=None, cache_write_tokens=None, requests=0),
    ),
    RELIABILITY: dict(
        user_messages=2,
        assistant_messages=39,
        tool_calls=39,
        tool_results=39,
        tool_errors=0,
        orphan_results=0,
        missing_results=0,
        usage=dict(
            input_tokens=38, output_tokens=563, cache_read_tokens=1114040, cache_write_tokens=22988, requests=39
        ),
    ),
}
SESSION_IDS = {BASTION: "3065c678-2605-4707-9a03-a9c2b0cf758e", RELIABILITY: "c7d3d95c-57f0-4359-8f4b-926a9bef5a3f"}


@pytest.mark.corpus
@pytest.mark.parametrize("name", [BASTION, RELIABILITY])
def test_corpus_counts(corpus_dir, name):
    path = corpus_dir / name
    assert detected(path) == "claude-code"
    parsed = parse_file(path)
    assert parsed.stats == EXPECTED[name]
    assert parsed.external_key == f"claude-code:{SESSION_IDS[name]}"
    assert parsed.meta["lines_not_on_active_branch"] == 0
    assert_shape(parsed.events)


@pytest.mark.corpus
def test_reliability_details(corpus_dir):
    parsed = parse_file(corpus_dir / RELIABILITY)
    events = [pe.event for pe in parsed.events]
    assert parsed.workspace == "/tmp/tmpqwh7888i"
    meta = [e for e in events if isinstance(e, UserMessage) and e.is_meta]
    assert len(meta) == 1 and meta[0].text.startswith("Stop hook feedback:")
    # line 3: the Task call spawning an Explore sub-agent; its report is the result on line 4
    marker = next(e for e in events if isinstance(e, SubagentMarker))
    assert marker == SubagentMarker(
        call_id="toolu_01PKfvC84zTHnFnxjuoazGo5",
        agent_id="ab81802",
        agent_type="Explore",
        description="Explore Python project structure",
    )
    # lines 65-69: one response (message.id ...G7CDcQ) with text + two parallel Bash calls
    i = next(i for i, pe in enumerate(parsed.events) if pe.source_ref == "line:65")
    first = parsed.events[i].event
    assert isinstance(first, AssistantMessage) and len(first.tool_calls) == 2
    assert parsed.events[i + 1].event == Usage(
        input_tokens=1,
        output_tokens=1,
        cache_read_tokens=32862,
        cache_write_tokens=366,
        model="claude-opus-4-5-20251101",
        request_id="req_011CXL3VBLYvuyh4S4kDKEM1",
    )
    assert [pe.source_ref for pe in parsed.events[i + 2 : i + 4]] == ["line:68", "line:69"]


@pytest.mark.corpus
def test_bastion_reasoning_and_no_usage(corpus_dir):
    parsed = parse_file(corpus_dir / BASTION)
    msgs = [pe.event for pe in parsed.events if isinstance(pe.event, AssistantMessage)]
    assert all(m.reasoning_reported for m in msgs)  # every glm-4.7 response starts with a thinking block
    assert all(m.model == "glm-4.7" for m in msgs)
    assert not any(isinstance(pe.event, Usage) for pe in parsed.events)
    # the thinking text of line 6 (populated for glm-4.7) never reaches an event
    thinking = json.loads((corpus_dir / BASTION).read_text().split("\n")[5])["message"]["content"][0]["thinking"]
    assert len(thinking) > 100
    assert not any(thinking[:60] in json.dumps(pe.event.to_payload(), ensure_ascii=False) for pe in parsed.events)


@pytest.mark.corpus
@pytest.mark.parametrize("name", [BASTION, RELIABILITY])
def test_import_twice_keeps_one_copy(corpus_dir, store, name):
    assert_reimport_adds_nothing(store, corpus_dir / name)


@pytest.mark.corpus
def test_malformed_bastion(corpus_dir, store, tmp_path):
    # line 11 is a user line carrying a tool_result
    def wrong(obj):
        obj["message"]["content"] = 42

    check_jsonl_corruptions(
        store,
        tmp_path,
        corpus_dir / BASTION,
        middle=11,
        wrong_type=wrong,
        wrong_type_reason="field 'message.content' must be a string or an array, got number",
        fmt="claude-code",
    )


@pytest.mark.corpus
def test_malformed_reliability(corpus_dir, store, tmp_path):
    # line 50 is an assistant line (a text block)
    def wrong(obj):
        obj["message"]["content"][0]["text"] = ["not", "text"]

    check_jsonl_corruptions(
        store,
        tmp_path,
        corpus_dir / RELIABILITY,
        middle=50,
        wrong_type=wrong,
        wrong_type_reason="field 'message.content[0].text' must be a string, got array",
        fmt="claude-code",
    )


@pytest.mark.corpus
@pytest.mark.parametrize("name", [BASTION, RELIABILITY])
def test_utf16_bom_crlf_copy_imports(corpus_dir, tmp_path, name):
    assert check_utf16_variant(tmp_path, corpus_dir / name, "claude-code").stats == EXPECTED[name]


# --------------------------------------------------------------------------- synthetic session
def _line(**kw) -> dict:
    base = {
        "isSidechain": False,
        "sessionId": "s-1",
        "cwd": "/home/user/app",
        "version": "2.1.112",
        "userType": "external",
        "timestamp": "2026-01-02T10:00:00.000Z",
    }
    base.update(kw)
    return base


def _assistant(uuid, parent, msg_id, block, usage, **kw):
    return _line(
        type="assistant",
        uuid=uuid,
        parentUuid=parent,
        requestId=f"req_{msg_id}",
        message={
            "id": msg_id,
            "model": "claude-x",
            "role": "assistant",
            "type": "message",
            "content": [block],
            "stop_reason": "tool_use",
            "usage": usage,
        },
        **kw,
    )


def _user(uuid, parent, content, **kw):
    return _line(type="user", uuid=uuid, parentUuid=parent, message={"role": "user", "content": content}, **kw)


def _result(call_id, content, **kw):
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **kw}


USAGE_A = {"input_tokens": 3, "cache_read_input_tokens": 12000, "cache_creation_input_tokens": 800, "output_tokens": 95}
USAGE_S = {"input_tokens": 1, "cache_read_input_tokens": 13000, "cache_creation_input_tokens": 100, "output_tokens": 20}


def synthetic_lines() -> list[dict]:
    png = base64.b64encode(tiny_png(3, 2)).decode()
    return [
        {"type": "permission-mode", "permissionMode": "default", "sessionId": "s-1"},
        _user("u1", None, "Add a retry to fetch()"),
        _assistant("a1", "u1", "msg_A", {"type": "thinking", "thinking": "", "signature": "c2ln"}, USAGE_A),
        _assistant(
            "a2",
            "a1",
            "msg_A",
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest -q"}},
            USAGE_A,
        ),
        _assistant(
            "a3",
            "a2",
            "msg_A",
            {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "shot.png"}},
            USAGE_A,
        ),
        _user("r1", "a2", [_result("toolu_1", "Exit code 1\n1 failed", is_error=True)], sourceToolAssistantUUID="a2"),
        _user(
            "r2",
            "a3",
            [
                _result(
                    "toolu_2",
                    [
                        {"type": "text", "text": "an image"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                    ],
                )
            ],
        ),
        _assistant("b1", "r2", "msg_B", {"type": "text", "text": "First attempt"}, USAGE_S),
        _user("x1", "b1", "no, a different approach"),  # line 9: rewound away
        _assistant("x1a", "x1", "msg_X", {"type": "text", "text": "abandoned reply"}, USAGE_S),
        _user("x2", "b1", "Use exponential backoff instead"),  # line 11: the edited prompt
        _line(
            type="system",
            subtype="api_error",
            uuid="err",
            parentUuid="x2",
            level="error",
            error={"status": 529, "message": "Overloaded"},
            retryAttempt=1,
            maxRetries=10,
        ),
        _line(
            type="assistant",
            uuid="e1",
            parentUuid="err",
            isApiErrorMessage=True,
            message={
                "id": "msg_syn",
                "model": "<synthetic>",
                "role": "assistant",
                "content": [{"type": "text", "text": "API Error: Request timed out"}],
            },
        ),
        _assistant(
            "c1",
            "e1",
            "msg_C",
            {
                "type": "tool_use",
                "id": "toolu_3",
                "name": "Agent",
                "input": {"subagent_type": "Explore", "description": "Map the repo", "prompt": "Map it"},
            },
            USAGE_S,
        ),
        _user("s1", None, "Map it", isSidechain=True, agentId="ag1"),  # line 15: the sub-agent's own lines
        _assistant(
            "s2", "s1", "msg_S", {"type": "text", "text": "sidechain work"}, USAGE_S, isSidechain=True, agentId="ag1"
        ),
        _user(
            "r3",
            "c1",
            [_result("toolu_3", [{"type": "text", "text": "Report: src/ and tests/"}])],
            toolUseResult={"status": "completed", "agentId": "ag1", "agentType": "Explore"},
        ),
        {"type": "file-history-snapshot", "messageId": "r3", "snapshot": {"trackedFileBackups": {}}},
        _line(
            type="attachment",
            uuid="att",
            parentUuid="r3",
            attachment={"type": "edited_text_file", "filename": "src/fetch.py", "snippet": "def fetch(): ..."},
        ),
        _assistant(
            "d1",
            "att",
            "msg_D",
            {"type": "tool_use", "id": "toolu_4", "name": "Bash", "input": {"command": "sleep 100"}},
            USAGE_S,
        ),
        _user("i1", "d1", [{"type": "text", "text": "[Request interrupted by user for tool use]"}]),
        _line(
            type="system",
            subtype="compact_boundary",
            uuid="cb",
            parentUuid=None,
            logicalParentUuid="i1",
            content="Conversation compacted",
            compactMetadata={"trigger": "auto", "preTokens": 160000, "postTokens": 7000},
        ),
        _user(
            "cs",
            "cb",
            "This session is being continued. Summary: retry added.",
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
        ),
        _user("p2", "cs", "Now add tests"),
        _user("o1", "p2", [_result("toolu_zzz", "late output")]),
        _assistant("f1", "o1", "msg_F", {"type": "text", "text": "Tests added."}, USAGE_S),
        _line(type="system", subtype="turn_duration", uuid="td", parentUuid="f1", durationMs=1000),
    ]


def test_synthetic_branches_compaction_subagent_errors(tmp_path, store):
    path = write_jsonl(tmp_path / "s-1.jsonl", synthetic_lines())
    assert detected(path) == "claude-code"
    parsed = parse_file(path)
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("line:2", "UserMessage"),
        ("line:3", "AssistantMessage"),
        ("line:3#usage", "Usage"),
        ("line:6", "ToolResult"),
        ("line:7", "ToolResult"),  # r1 is off the strict path (parallel call)
        ("line:8", "AssistantMessage"),
        ("line:8#usage", "Usage"),
        ("line:11", "UserMessage"),  # lines 9-10 are the rewound branch
        ("line:12", "SystemNote"),
        ("line:13", "SystemNote"),
        ("line:14", "AssistantMessage"),
        ("line:14#usage", "Usage"),
        ("line:17", "ToolResult"),
        ("line:14#subagent", "SubagentMarker"),  # 15-16: sidechain
        ("line:19", "UserMessage"),
        ("line:20", "AssistantMessage"),
        ("line:20#usage", "Usage"),
        ("missing:toolu_4", "ToolResult"),
        ("line:21", "UserMessage"),
        ("line:22", "CompactionMarker"),  # + the summary on line 23; the branch crosses the boundary
        ("line:24", "UserMessage"),
        ("line:25", "ToolResult"),
        ("line:26", "AssistantMessage"),
        ("line:26#usage", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    first = ev["line:3"]
    assert first.reasoning_reported and first.text == "" and [c.id for c in first.tool_calls] == ["toolu_1", "toolu_2"]
    assert ev["line:3#usage"] == Usage(
        input_tokens=3,
        output_tokens=95,
        cache_read_tokens=12000,
        cache_write_tokens=800,
        model="claude-x",
        request_id="req_msg_A",
    )
    assert ev["line:6"].is_error and ev["line:6"].exit_code == 1
    (media,) = ev["line:7"].media
    assert (media.media_type, media.width, media.height) == ("image/png", 3, 2)
    assert ev["line:12"] == SystemNote(
        text='API error (retry 1/10): {"message":"Overloaded","status":529}', subtype="api_error"
    )
    assert ev["line:13"] == SystemNote(text="API Error: Request timed out", subtype="api_error")
    assert ev["line:14#subagent"] == SubagentMarker(
        call_id="toolu_3", agent_id="ag1", agent_type="Explore", description="Map the repo"
    )
    assert ev["line:19"] == UserMessage(text="[edited src/fetch.py]\ndef fetch(): ...", is_meta=True)
    assert ev["missing:toolu_4"].missing and ev["missing:toolu_4"].is_error
    assert ev["line:21"].is_meta
    assert ev["line:22"] == CompactionMarker(
        trigger="auto",
        pre_tokens=160000,
        post_tokens=7000,
        summary="This session is being continued. Summary: retry added.",
    )
    assert ev["line:24"] == UserMessage(text="Now add tests")
    assert ev["line:25"] == ToolResult(call_id="toolu_zzz", content="late output", orphan=True)
    text = json.dumps([e.to_payload() for e in ev.values()])
    assert "abandoned reply" not in text and "sidechain work" not in text and "c2ln" not in text
    assert parsed.stats == dict(
        user_messages=5,
        assistant_messages=5,
        tool_calls=4,
        tool_results=4,
        tool_errors=1,
        orphan_results=1,
        missing_results=1,
        usage=dict(input_tokens=7, output_tokens=175, cache_read_tokens=64000, cache_write_tokens=1200, requests=5),
    )
    assert parsed.meta["lines_not_on_active_branch"] == 4
    assert_reimport_adds_nothing(store, path)
    ref, data = store.get_artifact(media.sha256)
    assert data == tiny_png(3, 2) and (ref.width, ref.height) == (3, 2)


def test_subagent_file_imports_its_sidechain(tmp_path):
    lines = [x for x in synthetic_lines() if x.get("isSidechain")]
    parsed = parse_file(write_jsonl(tmp_path / "agent-ag1.jsonl", lines))
    assert parsed.external_key == "claude-code:s-1:agent-ag1"
    assert [type(pe.event).__name__ for pe in parsed.events] == ["UserMessage", "AssistantMessage", "Usage"]


def test_unanswered_call_at_end_is_pending(tmp_path):
    lines = synthetic_lines()[:4]  # u1, then msg_A's thinking and first tool_use, with stop_reason "tool_use"
    parsed = parse_file(write_jsonl(tmp_path / "cut.jsonl", lines))
    assert ref_kinds(parsed.events) == [
        ("line:2", "UserMessage"),
        ("line:3", "AssistantMessage"),
        ("line:3#usage", "Usage"),
    ]
    assert [c.id for c in parsed.events[1].event.tool_calls] == ["toolu_1"]  # no placeholder: it may still return
    assert parsed.stats["missing_results"] == 0
    # msg_A's second tool_use (line 5) is not written yet: whatever its stop_reason, the last response is the
    # open tail until a later line follows it (2.1.109+ repeats the final stop_reason on every line)
    assert parsed.settled == 1


def test_streamed_response_at_end_is_the_open_tail(tmp_path):
    lines = synthetic_lines()[:4]
    for line in lines[2:]:
        line["message"]["stop_reason"] = None  # streamed, as 2.1.14/2.1.17 write it
    parsed = parse_file(write_jsonl(tmp_path / "cut.jsonl", lines))
    # nothing follows the response yet (msg_A's second tool_use would be the next line): it is the open tail
    assert len(parsed.events) == 3 and parsed.settled == 1


def test_pending_call_after_a_closed_response(tmp_path):
    lines = synthetic_lines()[:5]  # + msg_A's second tool_use, then the results have not been written yet
    lines.append(_line(type="system", subtype="local_command", content="hook ran", uuid="h1", parentUuid="a2"))
    parsed = parse_file(write_jsonl(tmp_path / "cut.jsonl", lines))
    refs = [pe.source_ref for pe in parsed.events]
    # the system line closes msg_A: it is settled with its usage; the calls are pending, so the note (which the
    # one-shot order puts after the results) waits in the open tail
    assert refs == ["line:2", "line:3", "line:3#usage", "line:6"]
    assert parsed.settled == 3


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda o: o.update(uuid=7), "field 'uuid' must be a string, got number"),
        (
            lambda o: o["message"].update(usage={"input_tokens": "3"}),
            "field 'message.usage.input_tokens' must be a non-negative integer, got string",
        ),
        (lambda o: o["message"]["content"][0].update(input=[1]), "field 'message.content[0].input' must be an object"),
        (lambda o: o.update(message="hi"), "field 'message' must be an object, got string"),
    ],
)
def test_wrong_field_types_name_line_and_field(tmp_path, store, change, reason):
    lines = synthetic_lines()
    change(lines[3])  # line 4: an assistant tool_use line
    assert_rejected(store, write_jsonl(tmp_path / "bad.jsonl", lines), where="line 4", reason=reason)


def test_first_line_longer_than_the_sniffed_head(tmp_path):
    lines = synthetic_lines()[1:]
    lines[0]["message"]["content"] = "x" * 70_000  # the detector sees only the first 64 KiB
    path = write_jsonl(tmp_path / "long.jsonl", lines)
    assert detected(path) == "claude-code"
    assert parse_file(path).stats["user_messages"] == 5


def test_parallel_result_off_the_chain_is_kept(tmp_path):
    """Three parallel calls streamed as three lines of one response; the conversation chain runs through the
    second call's result, so the third call's tool_use line and its result are both off the parent chain.
    Spotter (8463c716…, lines 33-50) has this shape: the third result was dropped, and as a pending call
    it held everything after it as the open tail of a file that had finished (12 of 467 events settled)."""
    use = lambda cid, name: {"type": "tool_use", "id": cid, "name": name, "input": {"file_path": f"/w/{cid}"}}  # noqa: E731
    lines = [
        _user("u1", None, "read the three files"),
        _assistant("a1", "u1", "msg_P", use("t1", "Read"), USAGE_A),
        _assistant("a2", "a1", "msg_P", use("t2", "Read"), USAGE_A),
        _assistant("a3", "a2", "msg_P", use("t3", "Read"), USAGE_A),
        _user("r1", "a1", [_result("t1", "one")]),
        _user("r3", "a3", [_result("t3", "three")]),  # off the chain: its parent a3 is not an ancestor of the leaf
        _user("r2", "a2", [_result("t2", "two")]),
        _assistant("a4", "r2", "msg_Q", {"type": "text", "text": "done"}, USAGE_S),
        _user("u2", "a4", "thanks"),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "parallel.jsonl", lines))
    results = [pe.event for pe in parsed.events if isinstance(pe.event, ToolResult)]
    assert sorted((r.call_id, r.content) for r in results) == [("t1", "one"), ("t2", "two"), ("t3", "three")]
    assert not any(r.orphan for r in results)
    assert parsed.settled is None  # a later prompt: everything is settled
    assert parsed.stats["missing_results"] == 0
    assert parsed.meta["lines_not_on_active_branch"] == 0


def test_dangling_parent_continues_at_the_line_before(tmp_path):
    """A line whose ``parentUuid`` no line of the file has (entire-image line 121, a ``hook_progress`` line)
    does not cut the session: the chain continues at the line written just before it. Before, the 17
    responses above that line were dropped as off the active branch."""
    lines = [
        _user("u1", None, "first prompt"),
        _assistant("a1", "u1", "msg_A", {"type": "text", "text": "first answer"}, USAGE_A),
        _line(type="progress", uuid="p1", parentUuid="gone-0000", data={"type": "hook_progress"}),
        _user("u2", "p1", "second prompt"),
        _assistant("a2", "u2", "msg_B", {"type": "text", "text": "second answer"}, USAGE_S),
        _user("u3", "a2", "thanks"),
    ]
    parsed = parse_file(write_jsonl(tmp_path / "dangling.jsonl", lines))
    assert [(pe.source_ref, type(pe.event).__name__) for pe in parsed.events if pe.source_ref.count("#") == 0] == [
        ("line:1", "UserMessage"),
        ("line:2", "AssistantMessage"),
        ("line:4", "UserMessage"),
        ("line:5", "AssistantMessage"),
        ("line:6", "UserMessage"),
    ]
    assert parsed.meta["lines_not_on_active_branch"] == 0
