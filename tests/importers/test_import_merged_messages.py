"""Merged messages JSON with sub-agents (no corpus file: tests/fixtures/merged-messages/session.json, written
from FORMATS.md section 12): the main session and its sub-agent child, usage, re-import, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from _importer_checks import assert_all_rejected, assert_shape, detected, ref_kinds, snapshot

from latch.agent.children import child_link, child_result
from latch.events import SubagentMarker, ToolCall, ToolResult, Usage, UserMessage
from latch.host.ingest import import_all
from latch.importers import parse_all_file, parse_file
from latch.store import EventStore

SESSION = Path(__file__).parents[1] / "fixtures/merged-messages/session.json"


def test_main_session_and_subagent_child():
    assert detected(SESSION) == "merged-messages"
    main, child = parse_all_file(SESSION)
    assert parse_file(SESSION).external_key == main.external_key == "merged-messages:s-9"
    assert main.workspace == "/home/user/proj" and main.parent_key is None
    assert_shape(main.events)
    assert ref_kinds(main.events) == [
        ("messages[0]", "UserMessage"),
        ("messages[1]", "AssistantMessage"),
        ("meta.token_counts[0]", "Usage"),
        ("messages[6]", "ToolResult"),
        ("meta.subagents[0]", "SubagentMarker"),
        ("messages[7]", "AssistantMessage"),
        ("meta.token_counts[1]", "Usage"),
        ("messages[8]", "ToolResult"),
    ]
    ev = {pe.source_ref: pe.event for pe in main.events}
    assert ev["messages[1]"].tool_calls == (
        ToolCall(id="toolu_P", name="Agent", arguments='{"subagent_type":"Explore","prompt":"Map the repo"}'),
    )
    # last_token_usage, cached a subset of input: 12000 - 8000 uncached
    assert ev["meta.token_counts[0]"] == Usage(input_tokens=4000, output_tokens=90, cache_read_tokens=8000)
    assert ev["meta.token_counts[1]"] == Usage(input_tokens=2000, output_tokens=60, cache_read_tokens=11000)
    assert ev["messages[6]"] == ToolResult(call_id="toolu_P", content="Report: src and tests.", name="Agent")
    assert ev["meta.subagents[0]"] == SubagentMarker(
        call_id="toolu_P", agent_id="a1b2", agent_type="Explore", description="Survey the repository"
    )
    assert child.external_key == "merged-messages:s-9:agent:a1b2" and child.parent_key == main.external_key
    assert child.meta == {"agent_id": "a1b2", "agent_kind": "subagent", "agent_type": "Explore"}
    assert_shape(child.events)
    assert [(pe.source_ref, pe.event) for pe in child.events] == [
        ("messages[2]", UserMessage(text="Map the repo")),
        ("messages[3]", child.events[1].event),
        ("messages[4]", ToolResult(call_id="toolu_S", content="src\ntests", name="Bash")),
        ("messages[5]", child.events[3].event),
    ]
    assert child.events[1].event.tool_calls == (ToolCall(id="toolu_S", name="Bash", arguments='{"command":"ls"}'),)
    assert child.events[3].event.text == "Report: src and tests."


def test_import_links_the_child_and_twice_adds_nothing(store):
    first = import_all(store, SESSION)
    (main_sid, _, main_seqs), (child_sid, _, child_seqs) = first
    assert (len(main_seqs), len(child_seqs)) == (8, 4)
    assert store.session(child_sid).parent_id == main_sid
    before = snapshot(store)
    assert [seqs for _, _, seqs in import_all(store, SESSION)] == [[], []]
    assert snapshot(store) == before


def test_bad_documents_are_one_error_and_leave_the_store_unchanged(store, tmp_path):
    doc = json.loads(SESSION.read_text())
    path = tmp_path / "session.json"
    path.write_text(SESSION.read_text()[:700])
    assert_all_rejected(store, path, _json_error_where(path), "invalid JSON", "merged-messages")
    bad = json.loads(json.dumps(doc))
    bad["messages"][3]["_metadata"].pop("original_role")
    path.write_text(json.dumps(bad))
    assert_all_rejected(store, path, "messages[3]", "missing field '_metadata.original_role'", None)
    bad = json.loads(json.dumps(doc))
    bad["meta"]["token_counts"][1]["info"]["last_token_usage"]["output_tokens"] = "60"
    path.write_text(json.dumps(bad))
    assert_all_rejected(
        store,
        path,
        "meta.token_counts[1]",
        "field 'info.last_token_usage.output_tokens' must be a non-negative integer, got string",
        None,
    )


def _json_error_where(path: Path) -> str:
    try:
        json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        return f"line {exc.lineno} column {exc.colno}"
    raise AssertionError("expected invalid JSON")


def _linked(store, path):
    (main_sid, _, _), (child_sid, _, _) = import_all(store, path)
    return main_sid, child_sid, child_link(store, child_sid), child_result(store, child_sid)


def test_the_subagent_child_links_to_its_spawning_call_with_its_final_message_as_report(store):
    main_sid, child_sid, link, report = _linked(store, SESSION)
    assert (link.parent_session_id, link.call_id) == (main_sid, "toolu_P")
    assert link.brief == "Map the repo" and link.config == {"agent_type": "Explore"} and link.engine is None
    assert (report.status, report.summary, report.turns) == ("completed", "Report: src and tests.", 2)
    assert child_link(store, main_sid) is None and child_result(store, main_sid) is None  # the root: no link
    assert store.count_events(child_sid) == 4  # derived, nothing stored


def test_an_unmapped_subagent_links_by_its_prompt(tmp_path):
    doc = json.loads(SESSION.read_text())
    unmapped = json.loads(json.dumps(doc))
    unmapped["meta"]["subagents"][0].pop("mapped_tool_use_id")  # the converter could not map it
    listless = json.loads(json.dumps(doc))
    del listless["meta"]["subagents"]  # nor list it
    for name, variant in (("unmapped", unmapped), ("listless", listless)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(variant))
        with EventStore(tmp_path / f"{name}.db") as store:
            main_sid, _, link, report = _linked(store, path)
            assert (link.parent_session_id, link.call_id, link.brief) == (main_sid, "toolu_P", "Map the repo"), name
            assert link.config == {"agent_type": "Explore"} and report.summary == "Report: src and tests."
            (marker,) = [s.event for s in store.events(main_sid, kinds=["subagent_marker"])]
            assert (marker.call_id, marker.agent_id, marker.agent_type) == ("toolu_P", "a1b2", "Explore")
