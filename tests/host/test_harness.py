"""The harness's prompt and tools in the replayed view, on small generated transcripts.

Recorded: an OpenAI-chat / Anthropic / OpenHands transcript's system prompt and tool schemas are stored (the
schemas as one ``SystemNote(subtype="tools")`` after the conversation) and sent by replay as the request's
system and tools, priced like everything else. Inferred: a transcript with provider usage and no recorded
prompt gets ``harness_tokens`` (the median residual of the first requests) in every view and in the budget.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from latch.cli import _load_commands, cli
from latch.cli.replay import run_replay
from latch.engine.units import TokenCounter, render_session_context
from latch.events import SystemNote, canonical_json
from latch.host.harness import infer_harness_tokens, recorded_harness
from latch.host.ingest import import_file, parse_file
from latch.host.loop import RequestLoop, build_engine, model_requests
from latch.host.replay import ratio_summary
from latch.plugins import select_estimator
from latch.port import ContextBudget, SessionContext
from latch.store import EventStore

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    },
]
SYSTEM = "You are a careful coding agent. " * 40


def _chat(tmp_path, *, system: bool = True, tools: bool = True, usage: list[int] | None = None, name="chat.json"):
    messages = [{"role": "system", "content": SYSTEM}] if system else []
    for k in range(4):
        messages.append({"role": "user", "content": f"step {k}: please look at module {k} " * 30})
        msg = {"role": "assistant", "content": f"looked at module {k}, all fine " * 20}
        if usage is not None:
            msg["usage"] = {"prompt_tokens": usage[k], "completion_tokens": 10}
        messages.append(msg)
    doc = {"model": "gpt-4o", "messages": messages, **({"tools": TOOLS} if tools else {})}
    p = tmp_path / name
    p.write_text(json.dumps(doc), encoding="utf-8")
    return p


def test_openai_chat_tools_are_stored_after_the_conversation_as_canonical_json(tmp_path):
    parsed = parse_file(_chat(tmp_path))
    last = parsed.events[-1]
    assert last.source_ref == "tools" and last.event == SystemNote(text=canonical_json(TOOLS), subtype="tools")
    assert parsed.events[0].event == SystemNote(text=SYSTEM, subtype="system_prompt")
    with EventStore(":memory:") as store:
        sid, _, seqs = import_file(store, _chat(tmp_path), final=True)
        assert len(seqs) == len(parsed.events)
        assert import_file(store, _chat(tmp_path), final=True)[2] == []  # idempotent
        system, tools, notes = recorded_harness(store.events(sid))
        assert (system, list(tools), notes) == (SYSTEM, TOOLS, 1)


def test_a_store_written_before_tools_were_captured_takes_them_as_one_new_event(tmp_path):
    path = _chat(tmp_path)
    parsed = parse_file(path)
    with EventStore(":memory:") as store:  # what an earlier release stored: the same events, no tools note
        store.import_session(
            external_key=parsed.external_key,
            source=parsed.source,
            format=parsed.format,
            workspace=parsed.workspace,
            events=parsed.events[:-1],
            meta=parsed.meta,
        )
        sid, _, seqs = import_file(store, path, final=True)
        assert len(seqs) == 1 and list(store.events(sid))[-1].event.subtype == "tools"
        assert import_file(store, path, final=True)[2] == []


def test_anthropic_and_openhands_tool_schemas_are_captured(tmp_path):
    schemas = [{"name": "bash", "description": "Run bash.", "input_schema": {"type": "object"}}]
    a = tmp_path / "a.json"
    a.write_text(
        json.dumps(
            {
                "model": "claude-sonnet-4-5",
                "system": "Be brief.",
                "tools": schemas,
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            }
        ),
        encoding="utf-8",
    )
    events = parse_file(a, "anthropic-messages").events
    assert events[-1].event == SystemNote(text=canonical_json(schemas), subtype="tools")
    oh = tmp_path / "oh.json"
    oh.write_text(
        json.dumps(
            [
                {
                    "id": 0,
                    "timestamp": "2025-01-01T00:00:00",
                    "source": "agent",
                    "message": "",
                    "action": "system",
                    "args": {"content": "You are OpenHands.", "tools": schemas},
                },
                {
                    "id": 1,
                    "timestamp": "2025-01-01T00:00:01",
                    "source": "user",
                    "message": "fix it",
                    "action": "message",
                    "args": {"content": "fix it"},
                },
                {
                    "id": 2,
                    "timestamp": "2025-01-01T00:00:02",
                    "source": "agent",
                    "message": "done",
                    "action": "message",
                    "args": {"content": "done"},
                },
            ]
        ),
        encoding="utf-8",
    )
    events = parse_file(oh, "openhands").events
    assert events[0].event == SystemNote(text="You are OpenHands.", subtype="system_prompt")
    assert events[-1].event == SystemNote(text=canonical_json(schemas), subtype="tools")


def test_bad_tool_schemas_are_one_clear_error(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": ["read_file"]}), encoding="utf-8")
    from latch.importers.base import TranscriptError

    with pytest.raises(TranscriptError, match=r"bad\.json:top level: field 'tools\[0\]' must be an object"):
        parse_file(p, "openai-chat")


def test_replay_sends_the_recorded_system_prompt_and_tools_priced_in_the_budget(tmp_path):
    with EventStore(":memory:") as store:
        sid, _, _ = import_file(store, _chat(tmp_path), final=True)
        doc, views = run_replay(store, sid, keep_views=True)
        counter = TokenCounter(select_estimator("gpt-4o"))
        assert doc["harness"] == {
            "source": "recorded",
            "system_tokens": counter.system(SYSTEM),
            "tools_tokens": counter.tools(TOOLS),
            "notes": 1,
            "tools": 2,
            "inferred": False,
            "inferred_tokens": 0,
            "inferred_from": [],
            "residuals": [],
        }
        session = counter.message(render_session_context(SessionContext(workspace=None)))
        for v, r in zip(views, doc["requests"], strict=False):
            assert v.system == SYSTEM and [dict(t) for t in v.tools] == TOOLS
            assert r["instructions_tokens"] == counter.system(SYSTEM) + session
            assert r["tools_tokens"] == counter.tools(TOOLS) and r["harness_tokens"] == 0
        bare, _ = run_replay(store, sid, harness=False)
        assert bare["harness"]["source"] == "none"
        assert [r["total_tokens"] for r in doc["requests"]] == [
            b["total_tokens"] + counter.system(SYSTEM) + counter.tools(TOOLS) for b in bare["requests"]
        ]
        # the whole request is budgeted: a window the conversation fits but not with the harness refuses
        need = bare["summary"]["max_total_tokens"]
        # the whole request is budgeted: in a window the conversation alone just fits, the harness takes room
        need = bare["summary"]["max_total_tokens"]
        small, _ = run_replay(store, sid, window=need + 1_100, reserve=1_000, recent=need)
        alone, _ = run_replay(store, sid, window=need + 1_100, reserve=1_000, recent=need, harness=False)
        assert small["summary"]["violations"] == []
        hard = small["summary"]["hard_limit_tokens"]
        assert all(r["total_tokens"] <= hard for r in small["requests"])
        assert [r["instructions_tokens"] + r["tools_tokens"] for r in small["requests"]] == [
            r["instructions_tokens"] + counter.system(SYSTEM) + counter.tools(TOOLS) for r in alone["requests"]
        ]
        # the engine's share shrank to make room: it rotates earlier and keeps less conversation
        assert sum(r["recent_tokens"] for r in small["requests"]) < sum(r["recent_tokens"] for r in alone["requests"])

        def first_rotation(doc):  # the request index of the first rotation after request 1; len() when none
            statuses = [r["status"] for r in doc["requests"]]
            return next((i for i, st in enumerate(statuses) if i >= 1 and st == "new_epoch"), len(statuses))

        assert first_rotation(small) < first_rotation(alone)  # (with the derived goal in the state, alone may
        # not rotate at all in this window)


def test_inferred_harness_is_the_median_residual_and_counts_in_every_view(tmp_path):
    # provider prompts: ~5,000 tokens beyond the conversation, the second request an outlier (+40,000)
    path = _chat(tmp_path, system=False, tools=False, usage=[5_400, 45_900, 6_300, 6_800])
    with EventStore(":memory:") as store:
        sid, _, _ = import_file(store, path, final=True)
        doc, views = run_replay(store, sid, keep_views=True)
        rows, h = doc["requests"], doc["harness"]
        counter = TokenCounter(select_estimator("gpt-4o"))
        base = counter.message(render_session_context(SessionContext(workspace=None)))
        prompts = [r["provider_prompt_tokens"] for r in rows]
        assert prompts == [5_400, 45_900, 6_300, 6_800]
        assert h["residuals"] == [p - r["history_tokens"] - base for p, r in zip(prompts, rows, strict=False)]
        assert h["inferred_tokens"] == round(statistics.median(h["residuals"])) and h["inferred"] is True
        assert h["source"] == "inferred" and h["inferred_from"] == [1, 2, 3, 4]
        assert 4_000 < h["inferred_tokens"] < 6_000  # the outlier does not move the median
        for v, r in zip(views, rows, strict=False):
            assert v.tokens.harness_tokens == r["harness_tokens"] == h["inferred_tokens"]
            assert r["total_tokens"] == sum(
                r[k]
                for k in (
                    "instructions_tokens",
                    "state_tokens",
                    "recent_tokens",
                    "recall_tokens",
                    "tools_tokens",
                    "extension_tokens",
                    "harness_tokens",
                )
            )
            assert r["recounted_tokens"] <= r["total_tokens"] and v.system == ""
            assert r["provider_ratio"] == round(r["total_tokens"] / r["provider_prompt_tokens"], 3)
        assert rows[1]["common_prefix_tokens"] > h["inferred_tokens"]  # the fixed prefix is cacheable
        ratios = sorted(r["provider_ratio"] for r in rows)
        assert doc["summary"]["provider_ratio"]["median"] == round((ratios[1] + ratios[2]) / 2, 3)
        bare, _ = run_replay(store, sid, harness=False)
        assert [r["total_tokens"] + h["inferred_tokens"] for r in bare["requests"]] == [r["total_tokens"] for r in rows]


def test_one_request_with_usage_infers_nothing(tmp_path):
    path = _chat(tmp_path, system=False, tools=False, usage=[9_000, 0, 0, 0])
    with EventStore(":memory:") as store:
        sid, _, _ = import_file(store, path, final=True)
        events = list(store.events(sid))
        counter = TokenCounter(select_estimator("gpt-4o"))
        assert infer_harness_tokens(events, model_requests(events), counter, SessionContext()) == (0, (), ())
        doc, _ = run_replay(store, sid)
        assert doc["harness"]["source"] == "none" and {r["harness_tokens"] for r in doc["requests"]} == {0}


def test_request_loop_checks_the_harness_in_the_budget(tmp_path):
    path = _chat(tmp_path, system=False, tools=False)
    with EventStore(":memory:") as store:
        sid, _, _ = import_file(store, path, final=True)
        setup = build_engine(store, sid, stream="continuity:t")
        with pytest.raises(ValueError, match="harness_tokens must be >= 0, got -1"):
            RequestLoop(store, sid, setup, ContextBudget(), harness_tokens=-1)
        loop = RequestLoop(store, sid, setup, ContextBudget(100_000, 10_000, 8_000), harness_tokens=7_000)
        assert loop.engine_budget == ContextBudget(93_000, 10_000, 8_000)
        res = loop.run(None)
        assert res.view.budget == ContextBudget(100_000, 10_000, 8_000)
        assert res.recounted_tokens == sum(res.line_tokens) + 7_000


def test_ratio_summary_nearest_rank():
    got = ratio_summary([1.0, None, 0.5, 1.2, 2.0, 0.95])
    assert got == {
        "requests": 5,
        "min": 0.5,
        "p10": 0.5,
        "median": 1.0,
        "p90": 2.0,
        "max": 2.0,
        "within": 3,
        "band": [0.9, 1.3],
    }
    assert ratio_summary([None]) == {
        "requests": 0,
        "min": None,
        "p10": None,
        "median": None,
        "p90": None,
        "max": None,
        "within": 0,
        "band": [0.9, 1.3],
    }


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def invoke(*args):
        env = {"LATCH_HOME": str(tmp_path), "COLUMNS": "200"}
        return CliRunner().invoke(cli, ["--db", str(db), *args], env=env, catch_exceptions=False)

    return invoke


def test_the_replay_table_says_what_the_harness_is_and_the_ratio(run, tmp_path):
    path = _chat(tmp_path, system=False, tools=False, usage=[5_400, 5_900, 6_300, 6_800])
    res = run("replay", str(path))
    assert res.exit_code == 0, res.output
    doc = json.loads(run("replay", str(path), "--json", "-").output)
    h, r = doc["harness"], doc["summary"]["provider_ratio"]
    out = " ".join(res.output.split())
    assert (
        f"harness: {h['inferred_tokens']:,} tokens inferred (not in the transcript: provider prompt − transcript, "
        "median of request(s) 1–4)"
    ) in out
    c, fc, rate = (
        doc["summary"][k] for k in ("provider_ratio_complete_views", "forecast_ratio_complete_views", "provider_rate")
    )
    assert c["requests"] == 4 == r["requests"]  # nothing evicted: every view holds what the harness sent
    assert (
        f"views that hold the whole conversation (4), ÷ the provider's prompt: Latch's estimate median "
        f"{c['median']:.2f}× (range {c['min']:.2f}–{c['max']:.2f}×, {c['within']}/4 within 0.9–1.3×), its forecast "
        f"in provider tokens median {fc['median']:.2f}× (range {fc['min']:.2f}–{fc['max']:.2f}×, {fc['within']}/1 "
        "within)"
    ) in out  # a stable fit from request 4
    assert "views after eviction" not in out and doc["summary"]["forecast_ratio_evicted_views"]["requests"] == 0
    assert (
        f"forecast: {rate['rate']:.2f} provider tokens per estimated token + {rate['intercept_tokens']:,}, "
        f"fitted on each request's earlier requests ({rate['steps']} step(s) in all)"
    ) in out
    bare = run("replay", str(path), "--no-harness")
    assert "harness:" not in bare.output


def test_the_header_line_names_what_was_recorded():
    from latch.cli.replay import harness_line

    base = {"source": "recorded", "system_tokens": 0, "tools_tokens": 120, "notes": 0, "tools": 2}
    assert harness_line({"harness": base}) == (
        "[dim]harness: the transcript's 2 tool schema(s) (120 tokens), sent with every request[/dim]"
    )
    both = {**base, "notes": 3, "system_tokens": 23_429}
    assert harness_line({"harness": both}) == (
        "[dim]harness: the transcript's system prompt (3 note(s), 23,429 "
        "tokens) and 2 tool schema(s) (120 tokens), sent with every "
        "request[/dim]"
    )
    assert harness_line({"harness": {"source": "none"}}) is None


def test_a_replay_where_every_request_overflows_fails_and_names_the_harness(run):
    """The trial's `--window 3000 --reserve 2000` on the example: every request is refused, so the replay fails with
    one check naming the first refusal and the inferred harness that took the budget (not a column of ✓ over no
    view), exit status 1; a replay with views stays 0."""
    example = str(Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl")
    res = run("replay", example, "--window", "3000", "--reserve", "2000")
    assert res.exit_code == 1, res.output
    out = " ".join(res.output.split())
    doc = json.loads(run("replay", example, "--window", "3000", "--reserve", "2000", "--json", "-").output)
    h, s = doc["harness"], doc["summary"]
    assert s["overflows"] == s["requests"] == 28 and h["inferred_tokens"] > 1_000
    assert f"no view (hard limit {s['hard_limit_tokens']:,} tokens)" in out and "max 0 of" not in out
    assert (
        "✗ no view could be built: all 28 requests refused with ContextOverflow: request 1: instructions, tools, "
        "extension and canonical state alone exceed the hard budget"
    ) in out
    assert (
        f"the harness's {h['inferred_tokens']:,} inferred tokens leave the engine 1 of the 1,000-token hard limit"
    ) in out
    assert "✓" not in out  # no check holds vacuously
    assert run("replay", example, "--window", "16000", "--reserve", "2000", "--recent", "3000").exit_code == 0


def _codex_like(tmp_path, gap: int, calls: bool):
    """An OpenAI-chat transcript that records its system prompt but not its tool schemas; the provider counted
    ``gap`` tokens more than the recorded prompt and the conversation (measured by a first replay)."""
    import json

    from latch.cli.replay import run_replay
    from latch.host.ingest import import_file
    from latch.store import EventStore

    def doc(usage):
        msgs = [{"role": "system", "content": "You are a careful coding agent. Follow the repository's rules."}]
        for i in range(6):
            msgs.append({"role": "user", "content": f"step {i}: " + "please look at the parser and fix it " * 20})
            reply = {"role": "assistant", "content": f"looking at step {i}"}
            if calls:
                reply["tool_calls"] = [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "shell", "arguments": json.dumps({"cmd": "ls"})},
                    }
                ]
            if usage:
                reply["usage"] = {"prompt_tokens": usage[i], "completion_tokens": 5}
            msgs.append(reply)
            if calls:
                msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "parser.py tests.py"})
        return {"model": "gpt-4.1", "messages": msgs}

    first = tmp_path / "bare.json"
    first.write_text(json.dumps(doc(None)))
    with EventStore(tmp_path / "measure.db") as store:
        sid, _, _ = import_file(store, first, final=True)
        measured, _ = run_replay(store, sid)
    counted = [measured["harness"]["system_tokens"] + r["history_tokens"] + gap for r in measured["requests"]]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(doc(counted)))
    with EventStore(tmp_path / "latch.db") as store:
        sid, _, _ = import_file(store, path, final=True)
        got, _ = run_replay(store, sid)
    return got


def test_recorded_instructions_without_the_called_tools_schemas_infer_the_rest(tmp_path):
    doc = _codex_like(tmp_path, 7_000, calls=True)
    h = doc["harness"]
    assert h["source"] == "recorded+inferred" and h["inferred"] is True and h["system_tokens"] > 0
    assert abs(h["inferred_tokens"] - 7_000) <= 60  # the gap, less the session context message Latch adds
    assert doc["summary"]["corrections"] == []  # an inferred overhead leaves nothing to compare
    # the gap is fixed: from request 3 the budget follows the rate and costs the gap once, not a ratio
    assert doc["summary"]["usable_share"]["min"] >= 0.9


def test_recorded_instructions_of_a_session_without_tool_calls_infer_nothing(tmp_path):
    h = _codex_like(tmp_path, 7_000, calls=False)["harness"]
    assert h["source"] == "recorded" and h["inferred_tokens"] == 0 and h["inferred"] is False
