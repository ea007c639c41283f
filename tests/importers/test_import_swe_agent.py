"""SWE-agent .traj importer on the real corpus (both layouts), re-import and malformed input.

Counts were checked by hand with jq over the raw files (commands in the comments).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from _importer_checks import (
    assert_reimport_adds_nothing,
    assert_rejected,
    detected,
    json_document_corruptions,
    mutated_json,
)

from latch.events import AssistantMessage, SystemNote, ToolResult, UserMessage
from latch.importers import parse_file

LEGACY = "ctf_i_got_id_demo.traj"
V1 = "marshmallow-1867_function_calling.traj"
NO_USAGE = {
    "input_tokens": None,
    "output_tokens": None,
    "cache_read_tokens": None,
    "cache_write_tokens": None,
    "requests": 0,
}


@pytest.fixture
def swe(corpus_dir):
    return corpus_dir / "swe-agent"


@pytest.mark.parametrize("name", [LEGACY, V1])
def test_detect_picks_swe_agent(swe, name):
    assert detected(swe / name) == "swe-agent"


def test_legacy_counts(swe):
    parsed = parse_file(swe / LEGACY)
    assert parsed.stats == {
        # jq '[.history as $h|range(0;$h|length)
        #      |select($h[.].role=="user" and (.==0 or $h[.-1].role!="assistant"))]|length' → 1
        "user_messages": 1,
        # jq '[.history[]|select(.role=="assistant")]|length' → 21
        "assistant_messages": 21,
        # jq '[.history[]|select(.role=="assistant" and (.action//"")!="")]|length' → 21 (one action each)
        "tool_calls": 21,
        # 20 user messages directly after an assistant (jq: role=="user" and previous role=="assistant" → 20)
        # + the final `submit` observation, which only trajectory[20] holds (history ends with the assistant)
        "tool_results": 21,
        "tool_errors": 0,
        "orphan_results": 0,
        "missing_results": 0,
        # info.model_stats are per-run totals (all 0 here): never a per-request Usage
        "usage": NO_USAGE,
    }
    assert parsed.meta["model_stats"]["api_calls"] == 0 and parsed.meta["exit_status"] == "submitted"
    assert parsed.workspace == "/__Users__user__LLM_CTF_Dataset_Dev__2016__CSAW-Quals__web__I-Got-Id"


def test_legacy_synthesized_calls(swe):
    events = [pe.event for pe in parse_file(swe / LEGACY).events]
    msgs = [e for e in events if isinstance(e, AssistantMessage)]
    calls = [c for m in msgs for c in m.tool_calls]
    assert [c.id for c in calls] == [f"step-{k}" for k in range(21)]
    # jq -r '.history[]|select(.role=="assistant")|.action|split(" ")[0]' | sort | uniq -c:
    # 18 curl (not a SWE-agent command: bash), create, edit, submit (listed under COMMANDS:)
    assert Counter(c.name for c in calls) == {"bash": 18, "create": 1, "edit": 1, "submit": 1}
    assert json.loads(calls[0].arguments) == {"command": "curl http://web.chal.csaw.io:8000"}
    # the fenced command moved into the call: the text is the thought
    assert msgs[0].text.endswith("the content of the main page.") and "```" not in msgs[0].text
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert results[-1].content == "\nFLAG{p3rl_6_iz_EVEN_BETTER!!1}\n" and results[-1].name == "submit"
    assert isinstance(events[0], SystemNote) and events[0].subtype == "system_prompt"
    assert isinstance(events[1], UserMessage) and "I Got Id" in events[1].text
    assert events[-1] == SystemNote(text="SWE-agent run ended: exit_status=submitted", subtype="exit_status")


def test_v1_counts(swe):
    parsed = parse_file(swe / V1)
    assert parsed.stats == {
        "user_messages": 1,  # history[1], the issue (role user, no tool_call_ids)
        "assistant_messages": 13,  # jq '[.history[]|select(.role=="assistant")]|length'
        "tool_calls": 13,  # jq '[.history[]|select(.role=="assistant")|.tool_calls|length]|add'
        "tool_results": 13,  # jq '[.history[]|select(.role=="tool")|.tool_call_ids|length]|add'
        "tool_errors": 0,
        "orphan_results": 0,
        "missing_results": 0,
        "usage": NO_USAGE,  # info.model_stats: tokens_sent 0, api_calls 13 (run totals only)
    }
    assert parsed.workspace == "/testbed"


def test_v1_reused_call_ids_stay_linked(swe):
    """SWE-agent reuses ids (jq group_by: call_5iDd… ×4, call_ahTo… ×2): each reuse gets #n and its own result."""
    events = [pe.event for pe in parse_file(swe / V1).events]
    ids = [c.id for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls]
    assert len(ids) == len(set(ids)) == 13
    assert [i for i in ids if i.startswith("call_5iDd")] == [
        "call_5iDdbOYybq7L19vqXmR0DPaU",
        "call_5iDdbOYybq7L19vqXmR0DPaU#2",
        "call_5iDdbOYybq7L19vqXmR0DPaU#3",
        "call_5iDdbOYybq7L19vqXmR0DPaU#4",
    ]
    assert "call_ahToD2vM0aQWJPkRmy5cumru#2" in ids
    for i, e in enumerate(events):  # every result directly follows its own call (one call per step)
        if isinstance(e, ToolResult):
            assert events[i - 1].tool_calls[0].id == e.call_id
    second_run = next(e for e in events if isinstance(e, ToolResult) and e.call_id.endswith("#3"))
    assert second_run.content.startswith("345\n")  # python reproduce.py after the fix (344 before)


@pytest.mark.parametrize("name", [LEGACY, V1])
def test_reimport_adds_nothing(swe, store, name):
    sid, parsed = assert_reimport_adds_nothing(store, swe / name)
    assert parsed.external_key.startswith("swe-agent:sha256:")
    assert store.count_events(sid) == len(parsed.events)


@pytest.mark.parametrize("name", [LEGACY, V1])
@pytest.mark.parametrize(
    "case",
    ["cut", "garbage", "history_string", "content_number", "role_number", "tool_call_ids_string", "empty", "binary"],
)
def test_malformed_is_rejected_and_store_unchanged(swe, store, tmp_path, name, case):
    src = swe / name
    assert_reimport_adds_nothing(store, swe / (V1 if name == LEGACY else LEGACY))  # a non-empty store
    data = src.read_bytes()
    doc = json.loads(data)
    variants = {
        **json_document_corruptions(data),
        "history_string": (
            mutated_json(doc, lambda d: d.update(history="oops")),
            "top level",
            "field 'history' must be an array, got string",
        ),
        "content_number": (
            mutated_json(doc, lambda d: d["history"][3].update(content=42)),
            "history[3]",
            "field 'content' must be a string or an array, got number",
        ),
        "role_number": (
            mutated_json(doc, lambda d: d["history"][2].update(role=7)),
            "history[2]",
            "field 'role' must be a string, got number",
        ),
        "tool_call_ids_string": (
            mutated_json(doc, lambda d: d["history"][3].update(role="tool", tool_call_ids="x")),
            "history[3]",
            "field 'tool_call_ids' must be an array, got string",
        ),
    }
    blob, where, reason = variants[case]
    assert_rejected(store, tmp_path / name, blob, where=where, reason=reason, fmt="swe-agent")


def test_missing_and_orphan_results_are_kept(swe, tmp_path):
    doc = json.loads((swe / V1).read_text("utf-8"))
    del doc["history"][5]  # the `open setup.py` observation never came
    doc["history"][6]["tool_call_ids"] = ["call_unknown"]  # ...and the next observation names no known call
    doc["trajectory"] = []  # no step observation to fall back on
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(doc), "utf-8")
    parsed = parse_file(path)
    assert (parsed.stats["missing_results"], parsed.stats["orphan_results"]) == (2, 1)
    results = [pe for pe in parsed.events if isinstance(pe.event, ToolResult)]
    missing = [pe.event.call_id for pe in results if pe.event.missing]
    assert missing == ["call_m6a0mcd6137L21vgVmR0DQaU", "call_xK8mN2pQr5vSjTyL9hB3zWc"]
    orphan = next(pe for pe in results if pe.event.orphan)
    assert (orphan.source_ref, orphan.event.call_id) == ("history:6", "call_unknown")
