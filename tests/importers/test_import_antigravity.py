"""Antigravity step trajectory importer (no corpus file: tests/fixtures/antigravity/trajectory.jsonl, written
from FORMATS.md section 5): parse results, positional linking, compaction, detection, re-import, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from _importer_checks import assert_reimport_adds_nothing, assert_rejected, assert_shape, detected, ref_kinds

from latch.cli.replay import run_replay
from latch.engine.units import message_line
from latch.events import CompactionMarker, SubagentMarker, ToolCall, ToolResult, UserMessage
from latch.importers import parse_file

TRAJECTORY = Path(__file__).parents[1] / "fixtures/antigravity/trajectory.jsonl"


def test_trajectory():
    assert detected(TRAJECTORY) == "antigravity"
    parsed = parse_file(TRAJECTORY)
    assert parsed.external_key.startswith("antigravity:sha256:")
    assert_shape(parsed.events)
    assert ref_kinds(parsed.events) == [
        ("line:1", "UserMessage"),
        ("line:3", "AssistantMessage"),
        ("line:4", "ToolResult"),
        ("line:5", "ToolResult"),
        ("line:6", "AssistantMessage"),
        ("line:7", "ToolResult"),
        ("line:6#subagent:step:5:0", "SubagentMarker"),
        ("line:8", "UserMessage"),
        ("line:9", "AssistantMessage"),
        ("line:10", "ToolResult"),
        ("line:11", "CompactionMarker"),
        ("line:12", "UserMessage"),
    ]
    ev = {pe.source_ref: pe.event for pe in parsed.events}
    assert ev["line:1"] == UserMessage(text="scaffold the app")  # <USER_REQUEST> taken off
    plan = ev["line:3"]
    assert plan.text == "Looking at the workspace first." and plan.reasoning_reported
    # no ids in the format: step:<step_index>:<k>; each args value was JSON-encoded text
    assert plan.tool_calls == (
        ToolCall(id="step:2:0", name="list_dir", arguments='{"DirectoryPath":"D:\\\\proj"}'),
        ToolCall(
            id="step:2:1",
            name="run_command",
            arguments='{"CommandLine":"npm -v","Cwd":"D:\\\\proj","WaitMsBeforeAsync":500}',
        ),
    )
    assert ev["line:4"] == ToolResult(call_id="step:2:0", content="Empty directory", name="list_dir")
    assert ev["line:5"] == ToolResult(
        call_id="step:2:1",
        is_error=True,
        name="run_command",
        content='Encountered error in step execution: exec: "npm": not found',
    )
    # the sub-agent's report names its conversation: the marker of the call that spawned it gets that id
    assert ev["line:6#subagent:step:5:0"] == SubagentMarker(
        call_id="step:5:0",
        agent_id="5f0c2e1a-aaaa-bbbb-cccc-000000000001",
        description="Find how to install node on this machine",
    )
    # the report is what the model saw next: a harness-written user turn, not a note the view leaves out
    assert ev["line:8"] == UserMessage(
        text="sender=5f0c2e1a-aaaa-bbbb-cccc-000000000001\nInstall Node with winget install OpenJS.NodeJS.",
        is_meta=True,
    )
    # an ERROR_MESSAGE while a call is open is that (bad) call's failed result
    assert ev["line:10"] == ToolResult(
        call_id="step:8:0", content="tool call view_file failed: file does not exist", is_error=True, name="view_file"
    )
    assert ev["line:11"] == CompactionMarker(
        trigger="checkpoint", summary="# Resuming from a compaction\nThe user wants an app scaffolded; npm is missing."
    )
    assert [pe.ts for pe in parsed.events][:2] == ["2026-06-18T22:17:25Z", "2026-06-18T22:17:40Z"]
    assert parsed.meta == {"truncated_steps": 1, "skipped": {"CONVERSATION_HISTORY": 1}}
    assert parsed.stats["tool_calls"] == 4 and parsed.stats["tool_results"] == 4 and parsed.stats["tool_errors"] == 2


def test_the_request_after_a_report_ends_with_it(store):
    sid, _ = assert_reimport_adds_nothing(store, TRAJECTORY)
    doc, views = run_replay(store, sid, keep_views=True, harness=False)
    assert doc["summary"]["requests"] == len(views) == 3
    last = [[m for m in v.messages if m.kind == "conversation"][-1] for v in views]
    assert [m.role for m in last] == ["user", "tool", "user"]
    assert "winget install OpenJS.NodeJS" in message_line(last[2]).decode()  # the report the model answered


def test_import_twice_keeps_one_copy(store):
    assert_reimport_adds_nothing(store, TRAJECTORY)


def test_bad_steps_are_one_error_and_leave_the_store_unchanged(store, tmp_path):
    path = tmp_path / "trajectory.jsonl"
    lines = TRAJECTORY.read_text().splitlines()
    assert_rejected(
        store,
        path,
        ("\n".join(lines[:3]) + "\n" + lines[3][:40] + "\n").encode(),
        where="line 4",
        reason="invalid JSON",
    )
    step = json.loads(lines[2])
    step["tool_calls"][0]["args"] = ["not", "an", "object"]
    assert_rejected(
        store,
        path,
        "\n".join([*lines[:2], json.dumps(step), *lines[3:]]).encode(),
        where="line 3",
        reason="field 'tool_calls[0].args' must be an object, got array",
    )
    step = json.loads(lines[3])
    step["step_index"] = "three"
    assert_rejected(
        store,
        path,
        "\n".join([*lines[:3], json.dumps(step), *lines[4:]]).encode(),
        where="line 4",
        reason="field 'step_index' must be an integer, got string",
    )
