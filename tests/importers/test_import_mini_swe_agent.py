"""mini-SWE-agent ``.traj.json`` importer on the real corpus trajectory and on fixtures written from its source
(tests/fixtures/README.md names the files and commit), re-import, and malformed input.

The corpus counts were checked with a Python script over the raw JSON (``json.load``, no latch): the
expressions are in the comments.
"""

from __future__ import annotations

import json
import shutil

import pytest
from _importer_checks import (
    assert_reimport_adds_nothing,
    assert_rejected,
    assert_shape,
    detected,
    json_document_corruptions,
    mutated_json,
)
from click.testing import CliRunner

from latch.events import AssistantMessage, SystemNote, ToolResult, Usage, UserMessage
from latch.importers import TranscriptError, parse_file
from latch.importers.mini_swe_agent import BASH_TOOL, MiniSweAgentImporter
from latch.importers.openai_chat import OpenAIChatImporter

CORPUS_FILE = "astropy-12907.traj.json"
FIXTURES = ("textbased.traj.json", "responses.traj.json", "v1.traj.json")


@pytest.fixture
def traj(corpus_dir):
    return corpus_dir / "mini-swe-agent" / CORPUS_FILE


@pytest.fixture
def fixtures(request):
    return request.config.rootpath / "tests" / "fixtures" / "mini-swe-agent"


def events_of(path):
    return [pe.event for pe in parse_file(path).events]


# ----------------------------------------------------------------------------- the corpus trajectory
def test_detection_picks_mini_swe_agent_over_openai_chat(traj, tmp_path):
    head = traj.read_bytes()[:65536]
    # the messages are OpenAI chat messages: the chat importer would claim the file, but with less confidence
    assert OpenAIChatImporter().sniff(traj, head) > 0
    assert MiniSweAgentImporter().sniff(traj, head) > OpenAIChatImporter().sniff(traj, head)
    assert detected(traj) == "mini-swe-agent"
    renamed = tmp_path / "run.json"  # by content, not by the .traj.json name
    shutil.copy(traj, renamed)
    assert detected(renamed) == "mini-swe-agent"


def test_corpus_counts(traj):
    parsed = parse_file(traj)
    assert parsed.stats == {
        "user_messages": 1,  # [m for m in messages if m["role"] == "user"]: the task
        "assistant_messages": 64,  # role "assistant": 64 = info.model_stats.api_calls
        "tool_calls": 64,  # sum(len(m["tool_calls"])): one bash call each
        # 63 "tool" messages + the exit message, the output of the submitting command (which has no tool message)
        "tool_results": 64,
        "tool_errors": 15,  # tool messages with extra.returncode != 0 (all 1; exception_info always "")
        "orphan_results": 0,
        "missing_results": 0,
        "usage": {
            # extra.response.usage: sum(prompt_tokens) 1,111,619 - sum(prompt_tokens_details.cached_tokens) 1,093,760
            "input_tokens": 17_859,
            "output_tokens": 17_133,  # sum(completion_tokens)
            "cache_read_tokens": 1_093_760,
            "cache_write_tokens": None,  # DeepSeek through LiteLLM reports no cache writes
            "requests": 64,
        },
    }
    assert parsed.stats["usage"]["requests"] == parsed.meta["model_stats"]["api_calls"] == 64
    assert parsed.meta == {
        "trajectory_format": "mini-swe-agent-1.1",
        "mini_version": "2.3.0",
        "exit_status": "Submitted",
        "model_stats": {"instance_cost": 0.04282165999999999, "api_calls": 64},
        "model": "deepseek/deepseek-chat",
        "instance_id": "astropy__astropy-12907",
    }
    assert parsed.workspace == "/testbed"  # info.config.environment.cwd
    assert parsed.external_key.startswith("mini-swe-agent:sha256:")
    assert_shape(parsed.events)


def test_corpus_requests_and_calls(traj):
    parsed = parse_file(traj)
    events = [pe.event for pe in parsed.events]
    assert isinstance(events[0], SystemNote) and events[0].subtype == "system_prompt"
    assert events[0].text.startswith("You are a helpful assistant that can interact with a computer shell")
    assert isinstance(events[1], UserMessage) and "separability_matrix" in events[1].text
    first = parsed.events[2]
    assert first.source_ref == "messages[2]" and first.ts == "2026-06-05T17:25:49.441Z"  # extra.timestamp
    assert first.event.text == "Let me start by understanding the issue and finding the relevant code."
    (call,) = first.event.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "call_00_KVNoGhlWmTJUowwDsUa74968",
        "bash",
        {"command": 'cd /testbed && find . -path "*/separable*" -type f | head -20'},
    )
    # messages[2].extra.response: id ed6f8441…, model deepseek-v4-flash, prompt 1689 (1664 cached), completion 76
    assert parsed.events[3].event == Usage(
        input_tokens=25,
        output_tokens=76,
        cache_read_tokens=1664,
        model="deepseek-v4-flash",
        request_id="ed6f8441-eedd-4ccc-be7e-18705f8aa707",
    )
    result = parsed.events[4].event
    assert isinstance(result, ToolResult) and result.call_id == call.id and result.exit_code == 0
    assert result.content == "<returncode>0</returncode>\n<output>\n./astropy/modeling/separable.py\n</output>"
    failed = [e for e in events if isinstance(e, ToolResult) and e.is_error]
    assert len(failed) == 15 and {e.exit_code for e in failed} == {1}
    # every model call is one request, directly followed by its usage
    assert sum(isinstance(e, Usage) for e in events) == sum(isinstance(e, AssistantMessage) for e in events)


def test_corpus_exit_is_the_submission_not_an_error(traj):
    doc = json.loads(traj.read_text("utf-8"))
    parsed = parse_file(traj)
    *_, last_call, usage, submitted, note, tools = parsed.events
    assert isinstance(last_call.event, AssistantMessage) and isinstance(usage.event, Usage)
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in last_call.event.tool_calls[0].arguments
    # the exit message (messages[129]) carries the submission: the output of the submitting command
    assert submitted.source_ref == "messages[129]"
    assert submitted.event == ToolResult(
        call_id="call_00_0yKPVZ7Jm6cEwsBTs4Lx0555", content=doc["messages"][129]["content"], name="bash", exit_code=0
    )
    assert submitted.event.content.startswith("diff --git a/astropy/modeling/separable.py")
    assert note.event == SystemNote(text="mini-SWE-agent run ended: exit_status=Submitted", subtype="exit_status")
    assert tools.event.subtype == "tools" and json.loads(tools.event.text) == [BASH_TOOL]


def test_corpus_reimport_adds_nothing(traj, store):
    sid, parsed = assert_reimport_adds_nothing(store, traj)
    assert store.count_events(sid) == len(parsed.events) == 196


def test_cli_import_names_the_format(traj, tmp_path, monkeypatch):
    from latch.cli import cli

    monkeypatch.setenv("LATCH_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(cli, ["import", str(traj)])
    assert out.exit_code == 0, out.output
    assert out.output.strip().endswith("(mini-swe-agent), 196 new events")


# ----------------------------------------------------------------------------- fixtures from the source
def test_fixtures_are_detected_and_well_formed(fixtures, store):
    for name in FIXTURES:
        assert detected(fixtures / name) == "mini-swe-agent", name
        assert_shape(parse_file(fixtures / name).events)
        assert_reimport_adds_nothing(store, fixtures / name)


def test_text_based_model_format_error_and_limits(fixtures):
    parsed = parse_file(fixtures / "textbased.traj.json")
    events = [pe.event for pe in parsed.events]
    refs = [pe.source_ref for pe in parsed.events]
    assert refs == [
        "messages[0]",
        "messages[1]",
        "messages[2]",
        "messages[2]#usage",
        "messages[3]",
        "messages[4]#response",
        "messages[4]#response#usage",
        "messages[4]",
        "messages[5]",
        "messages[5]#usage",
        "messages[6]",
        "messages[7]",
    ]
    # the one fenced action is a call named bash; the reasoning stays the text
    first = events[2]
    assert first.text == "THOUGHT: Find the helper first."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("step-0", "bash", {"command": 'grep -rn "def slugify" src'})
    ]
    # LiteLLM's Anthropic usage: prompt 1200 holds the 1100 written to the cache
    assert events[3] == Usage(
        input_tokens=100,
        output_tokens=40,
        cache_read_tokens=0,
        cache_write_tokens=1100,
        model="claude-sonnet-4-5-20250929",
        request_id="msg_01",
    )
    # the billed call whose two actions were rejected: a request with its usage, no call, then the error text
    rejected = events[5]
    assert isinstance(rejected, AssistantMessage) and rejected.tool_calls == () and "```" in rejected.text
    assert events[6].request_id == "msg_02" and events[6].input_tokens == 200
    assert events[7] == UserMessage(
        text="Please always provide EXACTLY ONE action in triple backticks, found 2 actions."
    )
    assert events[8].tool_calls[0].id == "step-2"  # the third model call
    failed = events[10]
    assert (failed.call_id, failed.is_error, failed.exit_code) == ("step-2", True, 1)
    assert events[11] == SystemNote(text="mini-SWE-agent run ended: exit_status=LimitsExceeded", subtype="exit_status")
    assert parsed.stats["usage"]["requests"] == parsed.meta["model_stats"]["api_calls"] == 3
    assert not any(isinstance(e, SystemNote) and e.subtype == "tools" for e in events)  # no tool calling


def test_responses_api_parallel_calls_and_submission(fixtures):
    parsed = parse_file(fixtures / "responses.traj.json")
    events = [pe.event for pe in parsed.events]
    first = events[2]
    assert first.text == "Reading the helper." and first.reasoning_reported
    assert [c.id for c in first.tool_calls] == ["call_read"]
    # input_tokens 900, none cached; then 1100 with 896 cached
    assert [
        (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.request_id) for u in events if isinstance(u, Usage)
    ] == [(900, 0, 60, "resp_01"), (204, 896, 80, "resp_02")]
    results = [e for e in events if isinstance(e, ToolResult)]
    # the sed ran before the submitting command raised Submitted: its output was never recorded
    assert [(r.call_id, r.missing, r.is_error) for r in results] == [
        ("call_read", False, False),
        ("call_edit", True, True),
        ("call_submit", False, False),
    ]
    assert results[2].content.startswith("diff --git a/src/text.py") and results[2].exit_code == 0
    assert events[-2].text == "mini-SWE-agent run ended: exit_status=Submitted"
    assert events[-1].subtype == "tools"
    assert parsed.events[4].ts == "2026-05-28T20:28:21.500Z"


def test_version_1_layout(fixtures):
    parsed = parse_file(fixtures / "v1.traj.json")
    events = [pe.event for pe in parsed.events]
    calls = [c for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls]
    assert [(c.id, json.loads(c.arguments)["command"]) for c in calls] == [
        ("step-0", "ls"),
        ("step-1", "echo MINI_SWE_AGENT_FINAL_OUTPUT && git diff"),
    ]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.call_id for r in results] == ["step-0", "step-1"]  # observations are the next user messages
    assert results[1].content.startswith("diff --git")
    assert events[-1] == SystemNote(text="mini-SWE-agent run ended: exit_status=Submitted", subtype="exit_status")
    assert parsed.workspace is None  # cwd "" (the current directory of the run)


# ----------------------------------------------------------------------------- malformed input
def _msg(i):
    return lambda d: d["messages"][i]


@pytest.mark.parametrize(
    "case",
    [
        "cut",
        "garbage",
        "empty",
        "binary",
        "messages_string",
        "top_array",
        "role_number",
        "role_unknown",
        "content_number",
        "tool_call_id_missing",
        "prompt_tokens_string",
        "cached_above_prompt",
        "after_exit",
        "arguments_number",
        "extra_string",
    ],
)
def test_malformed_is_rejected_and_store_unchanged(traj, fixtures, store, tmp_path, case):
    assert_reimport_adds_nothing(store, fixtures / "textbased.traj.json")  # a non-empty store
    data = traj.read_bytes()
    doc = json.loads(data)

    def usage(d):
        return d["messages"][4]["extra"]["response"]["usage"]

    variants = {
        **json_document_corruptions(data),
        "messages_string": (
            mutated_json(doc, lambda d: d.update(messages="oops")),
            "top level",
            "field 'messages' must be an array, got string",
        ),
        "top_array": (
            json.dumps(doc["messages"]).encode(),
            "top level",
            "expected a JSON object with 'messages' and 'info', got array",
        ),
        "role_number": (
            mutated_json(doc, lambda d: d["messages"][5].update(role=7)),
            "messages[5]",
            "field 'role' must be a string, got number",
        ),
        "role_unknown": (
            mutated_json(doc, lambda d: d["messages"][5].update(role="observer")),
            "messages[5]",
            "unknown role 'observer' (expected system, user, assistant, tool, exit)",
        ),
        "content_number": (
            mutated_json(doc, lambda d: d["messages"][3].update(content=42)),
            "messages[3]",
            "field 'content' must be a string, an array of parts or null, got number",
        ),
        "tool_call_id_missing": (
            mutated_json(doc, lambda d: d["messages"][3].pop("tool_call_id")),
            "messages[3]",
            "missing field 'tool_call_id'",
        ),
        "prompt_tokens_string": (
            mutated_json(doc, lambda d: usage(d).update(prompt_tokens="9")),
            "messages[4]",
            "field 'extra.response.usage.prompt_tokens' must be a non-negative integer",
        ),
        "cached_above_prompt": (
            mutated_json(doc, lambda d: usage(d).update(prompt_tokens=5)),
            "messages[4]",
            "cached prompt tokens (1792) exceed prompt tokens (5)",
        ),
        "after_exit": (
            mutated_json(doc, lambda d: d["messages"].append({"role": "user", "content": "more"})),
            "messages[130]",
            "a 'user' message after the run's 'exit' message",
        ),
        "arguments_number": (
            mutated_json(doc, lambda d: d["messages"][2]["tool_calls"][0]["function"].update(arguments=3)),
            "messages[2]",
            "field 'tool_calls[0].function.arguments' must be a JSON string or an object, got number",
        ),
        "extra_string": (
            mutated_json(doc, lambda d: d["messages"][2].update(extra="x")),
            "messages[2]",
            "field 'extra' must be an object, got string",
        ),
    }
    blob, where, reason = variants[case]
    assert_rejected(store, tmp_path / CORPUS_FILE, blob, where=where, reason=reason, fmt="mini-swe-agent")


def test_errors_are_one_line_naming_file_and_message(traj, tmp_path):
    doc = json.loads(traj.read_text("utf-8"))
    doc["messages"][7]["role"] = "observer\nwith a newline"
    bad = tmp_path / "bad.traj.json"
    bad.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(TranscriptError) as info:
        parse_file(bad)
    assert str(info.value).startswith(f"{bad}:messages[7]: unknown role ")
    assert "\n" not in str(info.value)
