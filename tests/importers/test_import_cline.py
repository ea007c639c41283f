"""Cline / Roo Code task-folder importer (no corpus file: the tests/fixtures task folders, whose README names
the source files and commits they follow): parse results, usage from ui_messages or metrics, compaction
markers, detection, re-import, growth and malformed input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _importer_checks import assert_reimport_adds_nothing, assert_rejected, assert_shape, detected, ref_kinds, snapshot
from click.testing import CliRunner

from latch.cli import _load_commands, cli
from latch.events import CompactionMarker, ToolCall, ToolResult, Usage, UserMessage
from latch.host.ingest import import_file
from latch.importers import TranscriptError, parse_file

FIXTURES = Path(__file__).parents[1] / "fixtures"
CLINE_TASK = FIXTURES / "cline/globalStorage/saoudrizwan.claude-dev/tasks/1777000000000"
ROO_TASK = FIXTURES / "roo-code/globalStorage/rooveterinaryinc.roo-cline/tasks/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
HISTORY = "api_conversation_history.json"
NL = b"\n"


def _copy(task: Path, tmp_path: Path, *, ui: bool = True) -> Path:
    """The task folder copied under ``tmp_path`` (keeping its task-id name); returns its history file."""
    dst = tmp_path / task.name
    shutil.copytree(task, dst)
    if not ui:
        (dst / "ui_messages.json").unlink()
    return dst / HISTORY


def test_cline_task_folder():
    path = CLINE_TASK / HISTORY
    assert detected(path) == "cline"
    parsed = parse_file(path)
    assert parsed.external_key == "cline:1777000000000"
    assert parsed.workspace == "/home/user/app"  # from <environment_details>
    assert parsed.meta["harness"] == "cline" and parsed.meta["task_id"] == "1777000000000"
    assert parsed.meta["reported_cost_usd"] == 0.07  # 0.04 + 0.02 + 0.01 (a partial api_req_started row skipped)
    assert parsed.settled is None  # the last call (attempt_completion) is pending, and last
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("messages[0]", "UserMessage"),
        ("messages[0]#meta", "UserMessage"),
        ("messages[1]", "AssistantMessage"),
        ("ui:1", "Usage"),
        ("messages[2].content[0]", "ToolResult"),
        ("messages[2].content[1]", "ToolResult"),
        ("messages[2]#meta", "UserMessage"),
        ("messages[3]", "AssistantMessage"),
        ("ui:6", "Usage"),
        ("messages[4].content[0]", "ToolResult"),
        ("messages[4]", "UserMessage"),
        ("messages[4]#meta", "UserMessage"),
        ("ui:8", "CompactionMarker"),
        ("messages[5]", "AssistantMessage"),
        ("ui:9", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    ts = {pe.source_ref: pe.ts for pe in parsed.events}
    assert ev["messages[0]"] == UserMessage(text="<task>\nMigrate config to the new project\n</task>")
    assert ts["messages[0]"] == "2026-04-24T03:06:40.000Z"  # ts 1777000000000 (epoch ms)
    assert ev["messages[0]#meta"].is_meta and ev["messages[0]#meta"].text.startswith("<environment_details>")
    first = ev["messages[1]"]
    assert (first.text, first.model, first.reasoning_reported) == ("Reading both files.", "claude-sonnet-4-5", False)
    assert first.tool_calls == (
        ToolCall(id="tooluse_1", name="read_file", arguments='{"path":"a.ts","task_progress":"- [ ] read a.ts"}'),
        ToolCall(
            id="tooluse_2", name="execute_command", arguments='{"command":"npm run build","requires_approval":false}'
        ),
    )
    # ui_messages' api_req_started (Anthropic semantics: tokensIn is the uncached part), not metrics.tokens
    assert ev["ui:1"] == Usage(
        input_tokens=10, output_tokens=300, cache_read_tokens=0, cache_write_tokens=9990, model="claude-sonnet-4-5"
    )
    # positional: the i-th "[tool for 'arg'] Result:" block answers the i-th tool_use
    assert ev["messages[2].content[0]"] == ToolResult(
        call_id="tooluse_1", content="1 | export const x = 1", name="read_file"
    )
    assert ev["messages[2].content[1]"] == ToolResult(
        call_id="tooluse_2",
        content="Command failed with exit code 1.\nOutput:\nerror TS2304",
        is_error=True,
        name="execute_command",
        exit_code=1,
    )
    assert ev["messages[3]"].reasoning_reported  # a thinking block
    assert ev["ui:6"] == Usage(
        input_tokens=20, output_tokens=150, cache_read_tokens=9000, cache_write_tokens=2980, model="claude-sonnet-4-5"
    )
    feedback = ev["messages[4]"]
    assert feedback.text == "<feedback>\ndocs only please\n</feedback>" and not feedback.is_meta
    assert [(m.media_type, m.width, m.height) for m in feedback.media] == [("image/png", 3, 2)]
    assert len(parsed.artifacts) == 1
    # the deleted range [2, 3] first appears on the row at history index 4; repeated on later rows: one marker
    assert ev["ui:8"] == CompactionMarker(
        trigger="truncation", summary="Cline dropped API history messages 2-3 from the prompt of every later request"
    )
    assert ev["messages[5]"].tool_calls == (
        ToolCall(id="tooluse_4", name="attempt_completion", arguments='{"result":"Migrated."}'),
    )
    assert parsed.stats == dict(
        user_messages=5,
        assistant_messages=3,
        tool_calls=4,
        tool_results=3,
        tool_errors=1,
        orphan_results=0,
        missing_results=0,
        usage=dict(input_tokens=35, output_tokens=490, cache_read_tokens=21000, cache_write_tokens=12970, requests=3),
    )


def test_without_ui_messages_usage_comes_from_metrics(tmp_path):
    parsed = parse_file(_copy(CLINE_TASK, tmp_path, ui=False))
    usage = [pe for pe in parsed.events if isinstance(pe.event, Usage)]
    # metrics.tokens: prompt includes cached (OpenAI semantics), so input = prompt - cached
    assert [(pe.source_ref, pe.event) for pe in usage] == [
        (
            "messages[1]#usage",
            Usage(input_tokens=10000, output_tokens=300, cache_read_tokens=0, model="claude-sonnet-4-5"),
        ),
        (
            "messages[3]#usage",
            Usage(input_tokens=3000, output_tokens=150, cache_read_tokens=9000, model="claude-sonnet-4-5"),
        ),
        (
            "messages[5]#usage",
            Usage(input_tokens=100, output_tokens=40, cache_read_tokens=12000, model="claude-sonnet-4-5"),
        ),
    ]
    assert not any(isinstance(pe.event, CompactionMarker) for pe in parsed.events)  # the range is in ui_messages
    assert "reported_cost_usd" not in parsed.meta and parsed.external_key == "cline:1777000000000"


def test_roo_code_task_folder():
    parsed = parse_file(ROO_TASK / HISTORY)
    assert parsed.meta["harness"] == "roo-code" and parsed.format == "cline"
    assert parsed.external_key == "cline:0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    assert parsed.workspace == "/home/user/roo"
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("messages[0]", "UserMessage"),
        ("messages[0]#meta", "UserMessage"),
        ("messages[1]", "AssistantMessage"),
        ("ui:1", "Usage"),
        ("messages[2].content[0]", "ToolResult"),
        ("messages[2]#meta", "UserMessage"),
        ("messages[3]", "AssistantMessage"),
        ("ui:2", "Usage"),
        ("messages[4].content[0]", "ToolResult"),
        ("messages[5]", "CompactionMarker"),
        ("messages[6]", "AssistantMessage"),
        ("ui:3", "Usage"),
        ("messages[7]", "CompactionMarker"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    # native tool_result blocks link by tool_use_id; a list content's text is the result
    assert ev["messages[4].content[0]"] == ToolResult(
        call_id="toolu_02",
        content="Command failed with exit code 2\nOutput:\n1 failed",
        is_error=True,
        name="execute_command",
        exit_code=2,
    )
    # Roo's tokensIn is the total input: 5000 - 0 - 4990 = 10 uncached; 5300 - 4990 - 300 = 10
    assert ev["ui:1"] == Usage(input_tokens=10, output_tokens=80, cache_read_tokens=0, cache_write_tokens=4990)
    assert ev["ui:2"] == Usage(input_tokens=10, output_tokens=60, cache_read_tokens=4990, cache_write_tokens=300)
    assert ev["messages[5]"] == CompactionMarker(
        trigger="truncation", summary="[Sliding window truncation: 2 messages hidden to reduce context]"
    )
    # the condense summary, with the token counts of the ui row whose contextCondense has its condenseId
    assert ev["messages[7]"] == CompactionMarker(
        trigger="condense",
        pre_tokens=5600,
        post_tokens=400,
        summary="## Conversation Summary\nThe user asked to fix src/x.py; the test failed and was fixed.",
    )
    assert parsed.meta["reported_cost_usd"] == 0.039


CLINE_SDK_TASK = FIXTURES / "cline/globalStorage/saoudrizwan.claude-dev/tasks/1778000000000"
ROO_FORCED_TASK = (
    FIXTURES / "roo-code/globalStorage/rooveterinaryinc.roo-cline/tasks/0190b2c3-d4e5-7f60-8a9b-1c2d3e4f5a6b"
)


def test_cline_compaction_divider_is_a_marker_placed_by_ts():
    parsed = parse_file(CLINE_SDK_TASK / HISTORY)
    assert_shape(parsed.events)
    # the "started" row was updated in place (same ts) to "completed"; the "skipped" one compacted nothing
    assert ref_kinds(parsed.events) == [
        ("messages[0]", "UserMessage"),
        ("messages[0]#meta", "UserMessage"),
        ("messages[1]", "AssistantMessage"),
        ("ui:1", "Usage"),
        ("messages[2].content[0]", "ToolResult"),
        ("ui:3", "CompactionMarker"),
        ("messages[3]", "AssistantMessage"),
        ("ui:5", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert ev["ui:3"] == CompactionMarker(
        trigger="auto",
        pre_tokens=150000,
        post_tokens=21000,
        summary="Cline compacted the conversation from 3 to 2 messages",
    )
    assert parsed.events[5].ts == "2026-05-05T16:53:30.000Z"


def test_roo_condense_row_without_condense_id_and_a_truncation_row_with_no_history_marker():
    parsed = parse_file(ROO_FORCED_TASK / HISTORY)
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("messages[0]", "UserMessage"),
        ("messages[1]", "AssistantMessage"),
        ("ui:1", "Usage"),
        ("messages[2]", "CompactionMarker"),
        ("ui:3", "CompactionMarker"),
        ("messages[3]", "AssistantMessage"),
        ("ui:4", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    # Roo's forced reduction writes contextCondense without condenseId: it still belongs to the summary message
    assert ev["messages[2]"] == CompactionMarker(
        trigger="condense",
        pre_tokens=190000,
        post_tokens=3000,
        summary="## Conversation Summary\nThe user asked for a test.",
    )
    assert ev["ui:3"] == CompactionMarker(
        trigger="truncation",
        pre_tokens=180000,
        post_tokens=120000,
        summary="Roo Code's sliding window hid 4 messages from later requests",
    )


def test_detected_by_content_over_the_anthropic_importer(tmp_path):
    other = tmp_path / "history.json"  # not the Cline file name: Cline's ts + modelInfo decide
    shutil.copyfile(CLINE_TASK / HISTORY, other)
    assert detected(other) == "cline"
    parsed = parse_file(other)
    assert parsed.external_key.startswith("cline:sha256:") and "task_id" not in parsed.meta
    assert "ui_messages" not in parsed.meta  # read only beside an api_conversation_history.json


def test_import_twice_keeps_one_copy(store):
    sid, parsed = assert_reimport_adds_nothing(store, CLINE_TASK / HISTORY)
    assert store.session(sid).format == "cline"


def test_a_grown_history_appends_only_its_new_events(store, tmp_path):
    path = _copy(CLINE_TASK, tmp_path)
    full = json.loads(path.read_text())
    path.write_text(json.dumps(full[:3]))  # the task as it was after the first tool results
    sid, _, first = import_file(store, path)
    path.write_text(json.dumps(full))
    sid2, parsed, more = import_file(store, path)
    assert sid2 == sid and len(first) + len(more) == len(parsed.events) == 15


def test_malformed_history_is_one_error_and_leaves_the_store_unchanged(store, tmp_path):
    path = _copy(CLINE_TASK, tmp_path)
    good = path.read_bytes()
    half = good[: len(good) // 2]
    assert_rejected(store, path, half, where=f"line {half.count(NL) + 1}", reason="invalid JSON")
    doc = json.loads(good)
    doc[1]["content"][1]["name"] = 7
    assert_rejected(
        store,
        path,
        json.dumps(doc).encode(),
        where="messages[1]",
        reason="field 'content[1].name' must be a string, got number",
    )
    doc = json.loads(good)
    doc[2]["ts"] = "yesterday"
    assert_rejected(
        store,
        path,
        json.dumps(doc).encode(),
        where="messages[2]",
        reason="field 'ts' must be a number (epoch milliseconds), got string",
    )
    assert_rejected(
        store, path, b'{"messages": []}', where="top level", reason="expected a JSON array of messages", fmt="cline"
    )


def test_malformed_ui_messages_names_that_file(store, tmp_path):
    path = _copy(CLINE_TASK, tmp_path)
    ui = path.parent / "ui_messages.json"
    rows = json.loads(ui.read_text())
    cases = {
        b'[{"ts": 1, ': (None, "invalid JSON"),
        json.dumps([*rows[:1], {**rows[1], "text": '{"tokensIn": "ten"}'}]).encode(): (
            "ui_messages[1]",
            "field 'text.tokensIn' must be a non-negative integer, got string",
        ),
        json.dumps([*rows[:1], {**rows[1], "conversationHistoryDeletedRange": [2]}]).encode(): (
            "ui_messages[1]",
            "conversationHistoryDeletedRange",
        ),
        json.dumps([*rows[:1], {**rows[1], "text": "not json"}]).encode(): (
            "ui_messages[1]",
            "must hold a JSON object",
        ),
    }
    for data, (where, reason) in cases.items():
        ui.write_bytes(data)
        before = snapshot(store)
        with pytest.raises(TranscriptError) as info:
            import_file(store, path, final=True)
        err = info.value
        assert err.path == str(ui) and "\n" not in str(err), str(err)
        assert (where is None and str(err.location).startswith("line ")) or err.location == where, str(err)
        assert reason in err.reason, str(err)
        assert snapshot(store) == before


def test_cli_prints_one_error_line_naming_the_ui_file(tmp_path):
    _load_commands()
    path = _copy(CLINE_TASK, tmp_path)
    ui = path.parent / "ui_messages.json"
    ui.write_text('[{"ts": 1, "type": "say", "say": "api_req_started", "text": "{\\"tokensOut\\": -1}"}]')
    db = tmp_path / "x.db"
    res = CliRunner().invoke(cli, ["--db", str(db), "import", str(path)])
    assert res.exit_code == 1
    assert res.stderr.splitlines() == [
        f"Error: {ui}:ui_messages[0]: field 'text.tokensOut' must be a non-negative integer, got number"
    ]


UI_TASK = FIXTURES / "cline/globalStorage/saoudrizwan.claude-dev/tasks/1779000000000"


def test_ui_messages_alone_rebuilds_the_conversation(tmp_path, store):
    path = UI_TASK / "ui_messages.json"
    assert not (UI_TASK / HISTORY).exists()
    assert detected(path) == "cline"
    parsed = parse_file(path)
    assert ref_kinds(parsed.events) == [
        ("history_absent", "SystemNote"),
        ("ui_messages[0]", "UserMessage"),
        ("ui_messages[3]", "AssistantMessage"),
        ("ui_messages[2]#usage", "Usage"),  # [1]: the same ts, replaced
        ("ui_messages[7]", "ToolResult"),
        ("ui_messages[9]", "AssistantMessage"),
        ("ui_messages[8]#usage", "Usage"),
        ("missing:ui:ui_messages[9]", "ToolResult"),
        ("ui_messages[11]", "AssistantMessage"),
        ("ui_messages[10]#usage", "Usage"),
        ("ui_messages[12]", "UserMessage"),
        ("ui_messages[14]", "SystemNote"),  # [13]: a request that failed
        ("ui_messages[16]", "AssistantMessage"),
        ("ui_messages[15]#usage", "Usage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert "absent" in ev["history_absent"].text and ev["history_absent"].subtype == "history_absent"
    assert ev["ui_messages[0]"].text == "Why does the build fail?" and len(ev["ui_messages[0]"].media) == 1
    first = ev["ui_messages[3]"]
    assert (first.text, first.reasoning_reported) == ("Running the build.", True)  # the last partial snapshot
    assert first.tool_calls == (
        ToolCall(id="ui:ui_messages[6]", name="execute_command", arguments='{"command":"npm run build"}'),
    )
    assert ev["ui_messages[7]"] == ToolResult(
        call_id="ui:ui_messages[6]", name="execute_command", content="error TS2304: Cannot find name 'fetchAll'."
    )
    assert ev["ui_messages[2]#usage"] == Usage(
        input_tokens=12, output_tokens=80, cache_read_tokens=0, cache_write_tokens=9000
    )
    assert ev["ui_messages[9]"].tool_calls[0].name == "readFile" and ev["missing:ui:ui_messages[9]"].missing
    assert ev["ui_messages[11]"].text == "Rename fetchAll to fetchItems?"  # the followup's question
    assert ev["ui_messages[16]"].text == "Renamed; the build passes."
    assert parsed.stats["usage"] == dict(
        input_tokens=75, output_tokens=205, cache_read_tokens=28600, cache_write_tokens=10200, requests=4
    )
    assert parsed.external_key == "cline:1779000000000"
    assert (parsed.meta["api_history"], parsed.meta["reported_cost_usd"]) == ("absent", 0.052)
    assert_shape(parsed.events)
    assert_reimport_adds_nothing(store, path)
    res = CliRunner().invoke(cli, ["--db", str(tmp_path / "cli.db"), "import", str(path)])
    assert res.exit_code == 0 and "cline" in res.output, res.output


def test_ui_messages_beside_the_history_reads_the_history():
    assert parse_file(CLINE_TASK / "ui_messages.json").external_key == parse_file(CLINE_TASK / HISTORY).external_key
    assert parse_file(CLINE_TASK / "ui_messages.json").events == parse_file(CLINE_TASK / HISTORY).events


def test_ui_messages_alone_bad_input(tmp_path, store):
    rows = json.loads((UI_TASK / "ui_messages.json").read_bytes())
    path = tmp_path / "ui_messages.json"
    bad = [dict(rows[0]), dict(rows[1]), {**rows[2], "text": '{"tokensIn": -4}'}]
    assert_rejected(store, path, json.dumps(bad).encode(), where="ui_messages[2]", reason="'text.tokensIn'")
    bad = [rows[0], {**rows[2], "text": "not json"}]
    assert_rejected(store, path, json.dumps(bad).encode(), where="ui_messages[1]", reason="not valid JSON")
    bad = [rows[0], {**rows[2], "ts": "noon"}]
    assert_rejected(store, path, json.dumps(bad).encode(), where="ui_messages[1]", reason="field 'ts'")
