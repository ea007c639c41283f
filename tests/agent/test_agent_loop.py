"""The agent loop: commit before execution, permissions, kernel tools, interrupted
calls, provider corrections, the stable system prompt. The model is a scripted provider answering in the
real wire shapes; the tools, the store, the engine and the request loop are the real ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from latch.agent.context import SYSTEM_PROMPT, session_context
from latch.agent.environment import REDACTED
from latch.agent.interrupted import repair_interrupted
from latch.agent.loop import AgentLoop
from latch.agent.observer import AgentError, Observer
from latch.agent.permissions import PermissionPolicy
from latch.agent.tools import ToolContext, builtin_tools
from latch.agent.tools.processes import ProcessManager
from latch.agent.usage import correction_ratio
from latch.events import AssistantMessage, EstimateCorrection, ToolCall, ToolResult, ToolStarted, UserMessage
from latch.host.corrections import SAFETY_MARGIN
from latch.host.loop import build_engine
from latch.kernel.state import canonical_state
from latch.port import ContextBudget
from latch.providers import ProviderOverflow, ScriptedProvider
from latch.store import EventStore


def oa(text: str = "", calls=(), usage=None) -> dict:
    """A chat-completions response body: ``calls`` are ``(id, name, arguments dict)``."""
    msg: dict = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls
        ]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


AGENT_BUDGET = ContextBudget(64_000, 4_000, 16_000)


class Agent:
    def __init__(self, tmp_path: Path, responses, *, budget=AGENT_BUDGET, name="ws", **kw):
        self.ws = tmp_path / name
        self.ws.mkdir(exist_ok=True)
        self.store = EventStore(tmp_path / f"{name}.db")
        self.sid = self.store.create_session(workspace=str(self.ws), source="latch run", format="latch")
        self.setup = build_engine(self.store, self.sid, stream="continuity:main", model="gpt-4.1")
        self.processes = ProcessManager(self.store, self.sid, self.ws)
        ctx = ToolContext(
            workspace=self.ws,
            store=self.store,
            session_id=self.sid,
            processes=self.processes,
            estimate=self.setup.counter.text,
        )
        self.provider = ScriptedProvider(responses, model="gpt-4.1")
        sc, _ = session_context(self.ws)
        self.loop = AgentLoop(
            self.store,
            self.sid,
            self.provider,
            setup=self.setup,
            budget=budget,
            tools=builtin_tools(),
            tool_context=ctx,
            session_context=sc,
            **kw,
        )

    def kinds(self) -> list[str]:
        return [s.event.KIND for s in self.store.events(self.sid)]

    def results(self) -> list[ToolResult]:
        return [s.event for s in self.store.events(self.sid, kinds=["tool_result"])]

    def close(self):
        self.processes.close()
        self.store.close()


@pytest.fixture
def agent(tmp_path):
    made = []

    def make(responses, **kw):
        a = Agent(tmp_path, responses, **kw)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


def test_the_call_is_committed_before_the_tool_runs(agent):
    probe = (
        "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); "
        "print(' '.join(k for (k,) in db.execute('select kind from events order by seq')))"
    )
    a = agent([], assume_yes=True)
    cmd = f'{sys.executable} -c "{probe}" {a.store.path}'
    a.provider._responses += [oa(calls=[("c1", "shell", {"command": cmd})]), oa("done")]
    out = a.loop.run(5)
    assert out.stopped == "done" and len(out.steps) == 2
    (res,) = a.results()
    assert not res.is_error, res.content
    seen = res.content.split()
    # what the tool saw on disk while it ran: the user task? (none here), the assistant call, ToolStarted
    assert seen.index("assistant_message") < seen.index("tool_started")
    assert "tool_result" not in seen
    kinds = a.kinds()
    assert kinds.index("assistant_message") < kinds.index("tool_started") < kinds.index("tool_result")


def test_ask_refuses_when_not_interactive_unless_yes(agent, tmp_path):
    call = [("c1", "shell", {"command": "rm -rf build/"})]
    a = agent([oa(calls=call), oa("ok")])
    (a.ws / "build").mkdir()
    (a.ws / "build" / "x.o").write_text("obj")
    a.loop.run(3)
    (res,) = a.results()
    assert res.is_error and "needs the user's approval" in res.content and "--yes" in res.content
    assert (a.ws / "build" / "x.o").exists()  # "ask" never ran the command
    assert "tool_started" not in a.kinds()

    b = agent([oa(calls=call), oa("ok")], name="ws2", assume_yes=True)
    (b.ws / "build").mkdir()
    b.loop.run(3)
    (res,) = b.results()
    assert not res.is_error and not (b.ws / "build").exists()

    asked = []
    c = agent([oa(calls=call), oa("ok")], name="ws3", approve=lambda call, d: asked.append(call.name) or False)
    (c.ws / "build").mkdir()
    c.loop.run(3)
    (res,) = c.results()
    assert asked == ["shell"] and res.is_error and "declined" in res.content and (c.ws / "build").exists()


def test_hard_deny_is_never_overridden(agent):
    asked = []
    a = agent(
        [oa(calls=[("c1", "shell", {"command": "rm  -rf   /"})]), oa("ok")],
        assume_yes=True,
        policy=PermissionPolicy(mode="bypass"),
        approve=lambda c, d: asked.append(c) or True,
    )
    a.loop.run(3)
    (res,) = a.results()
    assert res.is_error and "hard-deny rm-root" in res.content
    assert asked == [] and "tool_started" not in a.kinds()


def test_kernel_tools_are_applied(agent):
    a = agent(
        [
            oa(
                calls=[
                    ("c1", "set_goal", {"goal": "Fix the rounding bug"}),
                    ("c2", "record_decision", {"decision": "Use Decimal", "rationale": "exact cents"}),
                ]
            ),
            oa("recorded"),
        ]
    )
    a.loop.run(3)
    st = canonical_state(a.store, a.sid)
    assert st.goal == "Fix the rounding bug"
    assert [d["text"] if isinstance(d, dict) else d.text for d in st.decisions] == ["Use Decimal"]
    assert all(not r.is_error for r in a.results())
    # the next request's view renders the canonical state with both
    view = a.loop.view().view
    assert "Use Decimal" in "\n".join(m.content for m in view.messages)


def test_interrupted_call_is_closed_with_a_marked_result_and_the_view_is_valid(agent):
    a = agent([oa("resumed fine")])
    a.store.append(
        a.sid,
        [
            UserMessage("run the slow job"),
            AssistantMessage(
                "",
                tool_calls=(
                    ToolCall("c1", "shell", '{"command":"sleep 60"}'),
                    ToolCall("c2", "shell", '{"command":"echo next"}'),
                ),
            ),
            ToolStarted("c1", "shell"),
        ],
    )
    before = a.loop.view().view  # the pending turn is not provider-visible: no orphan call is ever sent
    assert not any(m.tool_calls for m in before.messages)
    repaired = repair_interrupted(a.store, a.sid)
    assert [c.id for c in repaired] == ["c1", "c2"]
    r1, r2 = a.results()
    assert r1.missing and r1.is_error and "while this call was running; its outcome is unknown" in r1.content
    assert r2.missing and "before running this call; it did not run" in r2.content
    assert repair_interrupted(a.store, a.sid) == []  # idempotent
    step = a.loop.turn()
    tool_msgs = [m for m in step.body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["c1", "c2"]
    assert "[interrupted:" in tool_msgs[0]["content"]
    assert step.result.protocol_violations == []


def _bulk_session(a, pairs: int, words: int = 120):
    events = []
    for i in range(pairs):
        events.append(UserMessage(f"question {i}: " + " ".join(f"alpha{i}x{j}" for j in range(words))))
        events.append(AssistantMessage(f"answer {i}: " + " ".join(f"beta{i}y{j}" for j in range(words))))
    a.store.append(a.sid, events)


def test_provider_usage_above_the_estimate_shrinks_later_budgets(agent):
    a = agent([])
    _bulk_session(a, 4)
    first = a.loop.view().view.tokens.total_tokens
    a.provider._responses += [oa("one", usage=(first * 3, 5)), oa("two", usage=(10, 5))]
    a.loop.turn()
    (corr,) = [s.event for s in a.store.events(a.sid, kinds=[EstimateCorrection.KIND])]
    assert corr.provider_tokens == first * 3 and corr.source == "usage"
    assert corr.estimated_tokens >= first
    assert correction_ratio(a.store, a.sid) == (corr.provider_tokens, corr.estimated_tokens)
    hard = a.loop.budget().hard_limit_tokens
    assert hard == 60_000 * corr.estimated_tokens // corr.provider_tokens
    a.loop.turn()  # a smaller provider figure records nothing new
    assert len(list(a.store.events(a.sid, kinds=[EstimateCorrection.KIND]))) == 1


def test_provider_overflow_is_corrected_and_retried_within_the_real_limit(agent):
    budget = ContextBudget(16_000, 1_000, 12_000)
    a = agent([], budget=budget)
    _bulk_session(a, 40)
    views = []

    class Spy(Observer):
        def on_request(self, number, result):
            views.append(result.view.tokens.total_tokens)

    def refuse(body):  # the provider counts twice what Latch estimated
        raise ProviderOverflow(
            f"openai: 400 maximum context length is 16000 tokens; you requested {2 * views[-1]}",
            prompt_tokens=2 * views[-1],
            limit_tokens=16_000,
        )

    a.loop.observer = Spy()
    a.provider._responses += [refuse, oa("fits now")]
    step = a.loop.turn()
    assert step.message.text == "fits now"
    assert len(views) == 2
    corr = correction_ratio(a.store, a.sid)
    assert corr is not None and corr[0] >= 2 * views[0] and corr[1] >= views[0]
    hard = budget.hard_limit_tokens * corr[1] // corr[0]
    assert views[1] <= hard < views[0]
    assert views[1] * corr[0] // corr[1] <= budget.hard_limit_tokens  # in the provider's tokens: within the limit
    # refused every time: a clear error after the retries, and only the corrections were appended
    b = agent([refuse, refuse, refuse], name="ws2", budget=budget)
    b.loop.observer = Spy()
    _bulk_session(b, 40)
    n = len(b.kinds())
    with pytest.raises(AgentError, match="refused the request as too long 3 times"):
        b.loop.turn()
    assert set(b.kinds()[n:]) == {"estimate_correction"}


def _counting(share: float, views: list[int]):
    """A provider whose prompt count is ``share`` of each view's estimate (the last one ``views`` holds)."""

    def reply(body):
        return oa(f"ok {len(views)}", usage=(max(1, round(views[-1] * share)), 5))

    return reply


class _Views(Observer):
    def __init__(self) -> None:
        self.totals: list[int] = []

    def on_request(self, number, result):
        self.totals.append(result.view.tokens.total_tokens)


def test_the_budget_follows_the_provider_rate_up_when_the_estimate_over_counts(agent):
    """A provider that counts half of Latch's estimate: after two requests the hard limit, counted in the
    provider's tokens, is the real limit less the safety margin (twice the estimate-token limit)."""
    budget = ContextBudget(16_000, 1_000, 15_000)
    spy = _Views()
    a = agent([], budget=budget, observer=spy)
    a.provider._responses += [_counting(0.5, spy.totals)] * 4
    for i in range(4):
        _bulk_session(a, 1, words=40 + 20 * i)
        a.loop.say(f"go on {i}")
        a.loop.turn()
    assert a.loop.forecast.rate == pytest.approx(0.5, abs=0.01)
    hard = a.loop.budget().hard_limit_tokens
    assert hard == pytest.approx((1 - SAFETY_MARGIN) * budget.hard_limit_tokens / 0.5, rel=0.02)
    assert a.loop.forecast.forecast(hard) <= budget.hard_limit_tokens  # in the provider's tokens: within the limit
    assert correction_ratio(a.store, a.sid) is None  # nothing was under-counted


def test_a_fixed_gap_costs_its_own_size_and_an_overflow_still_caps_the_budget(agent):
    """A provider that counts 3,000 tokens more than every view (tool schemas Latch does not see): the first
    correction's ratio would cut the limit to a fraction; the rate (1.0, intercept 3,000) cuts the gap alone. A
    refusal then caps the budget again and the request is retried within the real limit."""
    budget = ContextBudget(16_000, 1_000, 15_000)
    spy = _Views()
    a = agent([], budget=budget, observer=spy)

    def gap(body):
        return oa(f"ok {len(spy.totals)}", usage=(spy.totals[-1] + 3_000, 5))

    a.provider._responses += [gap] * 3
    for i in range(3):
        _bulk_session(a, 1, words=40 + 20 * i)
        a.loop.say(f"go on {i}")
        a.loop.turn()
    first = correction_ratio(a.store, a.sid)
    assert first is not None and budget.hard_limit_tokens * first[1] // first[0] < 0.6 * budget.hard_limit_tokens
    hard = a.loop.budget().hard_limit_tokens
    assert hard == pytest.approx((1 - SAFETY_MARGIN) * budget.hard_limit_tokens - 3_000, abs=20)

    def refuse(body):  # this view counts 3x in the provider's tokenizer: over the real limit
        raise ProviderOverflow(
            "openai: 400 maximum context length", prompt_tokens=3 * spy.totals[-1], limit_tokens=16_000
        )

    _bulk_session(a, 12)
    a.loop.say("and now")
    a.provider._responses += [refuse, oa("fits")]
    step = a.loop.turn()
    assert step.message.text == "fits"
    refused, sent = spy.totals[-2], spy.totals[-1]
    assert 3 * refused > budget.hard_limit_tokens and 3 * sent <= budget.hard_limit_tokens
    assert correction_ratio(a.store, a.sid, "overflow") == (3 * refused, refused)


def test_system_prompt_and_tools_are_byte_identical_across_sessions(agent):
    a = agent([oa("a")], name="one")
    b = agent([oa("b")], name="two")
    (b.ws / "AGENTS.md").write_text("Always run make test.\n")
    sb, _ = session_context(b.ws)
    b.loop.requests.session_context = sb
    a.loop.say("task one")
    b.loop.say("task two")
    body_a, body_b = a.loop.turn().body, b.loop.turn().body
    assert body_a["messages"][0] == body_b["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert json.dumps(body_a["tools"]) == json.dumps(body_b["tools"])
    first_a, first_b = body_a["messages"][1]["content"], body_b["messages"][1]["content"]
    assert str(a.ws.resolve()) in first_a and "Always run make test." in first_b and first_a != first_b
    assert "Always run make test." not in body_b["messages"][0]["content"]


def test_compact_starts_a_new_epoch_and_keeps_the_log(agent):
    a = agent([oa("one"), oa("two")])
    _bulk_session(a, 3)
    e1 = a.loop.turn().view.epoch
    n = len(a.kinds())
    a.loop.compact()
    step = a.loop.turn()
    assert step.view.epoch == e1 + 1
    assert len(a.kinds()) > n  # nothing deleted; the log only grew
    assert not any("alpha0x1" in m.content for m in step.view.messages if m.kind == "conversation")


def test_the_model_ends_its_epoch_with_the_compact_tool_and_a_handoff_note(agent):
    note = "parser fixed in src/p.py; next: run the lexer tests, they were flaky"
    a = agent([oa(calls=[("c1", "compact", {"note": note})]), oa("continuing from the note")])
    _bulk_session(a, 3)
    first = a.loop.turn()
    (res,) = first.results
    assert not res.is_error and "fresh context epoch" in res.content
    second = a.loop.turn()
    view = second.view
    assert view.epoch == first.view.epoch + 1 and view.metrics["rotation_reason"] == "manual_compact"
    assert [m for m in view.messages if m.kind == "conversation"] == []  # no earlier conversation
    snapshot = next(m.content for m in view.messages if m.kind == "kernel_context")
    assert f"Handoff: {note}" in snapshot  # the note is in the canonical state of the new epoch
    notes = canonical_state(a.store, a.sid).notes
    assert [n["text"] for n in notes] == [f"Handoff: {note}"]
    assert "alpha0x1" in json.dumps([s.event.searchable_text() for s in a.store.events(a.sid)])  # nothing deleted


def test_a_refused_compact_call_leaves_the_epoch_alone(agent):
    a = agent([oa(calls=[("c1", "compact", {"note": ""})]), oa("ok")])
    _bulk_session(a, 3)
    first = a.loop.turn()
    (res,) = first.results
    assert res.is_error  # an empty note fails its schema: nothing recorded, no compaction
    assert a.loop.turn().view.epoch == first.view.epoch


def test_binary_or_huge_repository_instructions_warn_and_binary_is_not_sent(tmp_path):
    """Found by a new-user trial: a binary AGENTS.md was sent to the model as U+FFFD and control bytes."""
    import os as _os

    from latch.agent.context import INSTRUCTIONS_LIMIT_BYTES, repository_instructions

    (tmp_path / "AGENTS.md").write_bytes(_os.urandom(4096))
    (tmp_path / "CLAUDE.md").write_text("Use tabs.\\n")
    text, warnings = repository_instructions(tmp_path)
    assert "# CLAUDE.md" in text and "Use tabs." in text
    assert "\\ufffd" not in text and len(warnings) == 1 and "AGENTS.md: not text" in warnings[0]
    (tmp_path / "AGENTS.md").write_text("é" * (INSTRUCTIONS_LIMIT_BYTES // 2 + 10))  # cut inside a character
    text, warnings = repository_instructions(tmp_path)
    assert text.startswith("# AGENTS.md") and "is longer than" in text and "cut" in warnings[0]


def test_an_overflow_says_what_would_fix_it(agent):
    a = agent([oa("never sent")], budget=ContextBudget(6_000, 1_024, 2_000))
    a.store.append(a.sid, [UserMessage("please read this: " + "alpha beta gamma delta " * 2_000)])
    with pytest.raises(AgentError) as err:
        a.loop.turn()
    msg = str(err.value)
    assert msg.startswith("the context cannot hold the next request: conversation unit")
    assert "to fix it: a larger --window or a smaller --reserve (now 6,000 and 1,024 tokens)" in msg
    # every default tool is offered: their schemas take more than a third of the 4,976-token hard limit
    schemas = a.setup.counter.tools(a.loop.requests.tools)
    assert schemas * 3 >= 4_976
    assert (
        f"or fewer tools with --tools NAME,... (the {len(builtin_tools())} tool schemas take {schemas:,} of the "
        "4,976-token hard limit)"
    ) in msg
    assert a.provider.requests == []  # nothing was sent


def _names(body) -> list[str]:
    return [t["function"]["name"] for t in body["tools"]]


def test_a_small_window_offers_core_tools_and_the_rest_on_demand(agent, tmp_path):
    small = ContextBudget(8_192, 1_024, 2_000)
    a = agent(
        [
            oa(calls=[("c1", "load_tools", {"names": ["record_decision", "add_note"]})]),
            oa(calls=[("c2", "record_decision", {"decision": "round per line"})]),
            oa(calls=[("c3", "load_tools", {"names": ["no_such_tool"]})]),
            oa("done"),
        ],
        budget=small,
        defer_tools=True,
    )
    a.store.append(a.sid, [UserMessage("fix the rounding")])
    first = a.loop.turn()
    offered = _names(first.body)
    assert offered == [
        "read_file",
        "write_file",
        "edit_file",
        "shell",
        "process_output",
        "search_history",
        "compact",
        "read_artifact",
        "load_tools",
    ]
    described = first.body["tools"][-1]["function"]["description"]
    assert "record_decision: Record a decision" in described and "set_goal" in described
    assert first.results[0].content == "loaded: record_decision, add_note: offered from the next request on"
    second = a.loop.turn()
    order = [t.NAME for t in builtin_tools()]  # the fixed order, the loaded ones in their place
    assert _names(second.body) == [n for n in order if n in {*offered, "add_note", "record_decision"}] + ["load_tools"]
    assert second.view.metrics["rotation_reason"] == "instructions_changed"  # a new tool list, a new epoch
    assert [d["text"] for d in canonical_state(a.store, a.sid).decisions] == ["round per line"]
    third = a.loop.turn()
    assert third.results[0].content.startswith("not loaded: no_such_tool")
    a.loop.turn()
    # a resumed loop of the same session offers what the session loaded
    resumed = AgentLoop(
        a.store,
        a.sid,
        ScriptedProvider([oa("again")], model="gpt-4.1"),
        setup=a.setup,
        budget=small,
        tools=builtin_tools(),
        tool_context=None,
        session_context=session_context(a.ws)[0],
        defer_tools=True,
    )
    assert {"record_decision", "add_note"} <= {t["name"] for t in resumed.requests.tools}
    assert "set_goal" not in {t["name"] for t in resumed.requests.tools}


def test_a_window_that_holds_every_schema_defers_none(agent):
    a = agent([oa("ok")], defer_tools=True)  # 64k: the schemas fit their share
    a.store.append(a.sid, [UserMessage("hi")])
    assert _names(a.loop.turn().body) == [t.NAME for t in builtin_tools()]


def test_an_output_too_large_for_the_window_is_stored_whole_and_read_back_in_pages(agent):
    """A shell output far larger than one result may be at the README's 8,192-token window: the result holds its head, its
    tail and a pointer to the artifact holding all of it; read_artifact continues from the cut, and the run goes
    on."""
    lines = [f"line {i:05d} of the build log: compiling module_{i}.c with -O2 and checking it" for i in range(4_000)]
    full = "\n".join(lines) + "\n"
    a = agent([], budget=ContextBudget(8_192, 1_024, 7_168), assume_yes=True)
    (a.ws / "log.txt").write_text(full)
    a.provider._responses += [oa(calls=[("c1", "shell", {"command": "cat log.txt"})])]
    a.loop.say("show me the build log")
    a.loop.turn()
    (res,) = a.results()
    cap = a.loop.result_cap_tokens()
    assert a.setup.counter.text(res.content) <= cap
    assert res.content.startswith(lines[0]) and lines[-1] in res.content[-200:]
    sha = res.content.split('read_artifact(sha256="', 1)[1][:64]
    offset = int(res.content.split(f'read_artifact(sha256="{sha}", offset=', 1)[1].split(")", 1)[0])
    _, stored = a.store.get_artifact(sha)
    # the whole outcome of the tool (the shell keeps its output's head and tail: OUTPUT_LIMIT_BYTES)
    assert stored.startswith(lines[0].encode()) and stored.endswith(b"Exit code: 0") and lines[-1].encode() in stored
    assert a.setup.counter.text(stored.decode()) > 2 * cap
    shown = res.content.split("\n[…", 1)[0]
    assert stored.startswith(shown.encode()) and offset == len(shown.encode())
    # the model reads on from the cut, one page at a time, within the room the next view has
    a.provider._responses += [oa(calls=[("c2", "read_artifact", {"sha256": sha, "offset": offset})]), oa("seen")]
    a.loop.turn()
    page = a.results()[-1]
    assert not page.is_error and page.content.startswith(full.encode()[offset : offset + 50].decode())
    assert "continue with offset=" in page.content and a.setup.counter.text(page.content) <= cap
    assert a.loop.turn().message.text == "seen"
    a.provider._responses += [oa(calls=[("c3", "read_artifact", {"sha256": "0" * 64})]), oa("ok")]
    a.loop.turn()
    bad = a.results()[-1]
    assert bad.is_error and "no artifact 000000000000" in bad.content


def test_a_secret_in_an_output_too_large_for_the_window_is_redacted_before_it_is_stored(agent, monkeypatch):
    """The whole output goes to an artifact only after redaction: read_artifact can never hand a key back."""
    key = "sk-live-0123456789abcdef0123"
    monkeypatch.setenv("DEPLOY_TOKEN", key)
    a = agent([], budget=ContextBudget(8_192, 1_024, 7_168), assume_yes=True)
    lines = [f"line {i:05d}: deploy with token $DEPLOY_TOKEN and check module_{i}.c" for i in range(3_000)]
    (a.ws / "log.txt").write_text("\n".join(lines).replace("$DEPLOY_TOKEN", key) + "\n")
    a.provider._responses += [oa(calls=[("c1", "shell", {"command": "cat log.txt"})])]
    a.loop.say("show me the deploy log")
    a.loop.turn()
    (res,) = a.results()
    sha = res.content.split('read_artifact(sha256="', 1)[1][:64]
    _, stored = a.store.get_artifact(sha)
    assert key.encode() not in stored and REDACTED.encode() in stored and key not in res.content
