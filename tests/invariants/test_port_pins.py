"""Invariant tier: the port pins (spec: "Port boundary").

* the provider sees exactly the view the configured engine returned, byte for byte;
* the default engine is byte-identical called directly or through the port (the registered
  factory, ``continuity_context_engine_factory``), and the default factory is exactly
  ``ContinuityEngine.for_model(...)``;
* the host appends no default-engine kernel context behind a replacement engine's back;
* the configured factory governs spawned and resumed children; the supervisor never falls back to
  the continuity engine.
"""

from __future__ import annotations

import json

import pytest
from invariant_helpers import CONTEXT, MODEL, SYSTEM, TOOLS, grow, kernel_streams, new_session, profile, wire
from tail_engine_support import TailViewEngine

from latch.agent.loop import AgentLoop
from latch.agent.supervisor import ChildPolicyError, Supervisor
from latch.bench.scenario import ScenarioModel
from latch.engine import ContextBudget, ContextEngine, ContinuityEngine, continuity_context_engine_factory
from latch.engine.continuity import RECORD_KINDS
from latch.events import ToolResult, UserMessage
from latch.plugins import get_engine_factory
from latch.providers import ScriptedProvider, to_anthropic_messages, to_openai_chat
from latch.store import EventStore


class Spy:
    """Wraps an engine, records every view it returns, and is itself a ContextEngine."""

    def __init__(self, inner):
        self.inner, self.views = inner, []

    @property
    def config(self):
        return self.inner.config

    def set_config(self, config):
        self.inner.set_config(config)

    def set_estimator(self, estimator):
        self.inner.set_estimator(estimator)

    def default_budget(self):
        return self.inner.default_budget()

    def materialize(self, request):
        view = self.inner.materialize(request)
        self.views.append(view)
        return view

    def manual_compact(self, reason="manual"):
        self.inner.manual_compact(reason)

    def recall(self, query, *, limit_tokens=4000, until_seq=None):
        return self.inner.recall(query, limit_tokens=limit_tokens, until_seq=until_seq)


class TailEngine(TailViewEngine):
    """A replacement engine: the session context and the newest three whole units, nothing else."""

    PLUGIN_NAME = "tail"
    built: list[tuple[str, str]] = []

    def __init__(self, profile, via="root"):
        super().__init__(profile)
        self.via = via
        TailEngine.built.append((via, profile.session_id))

    @classmethod
    def factory(cls, profile):
        return cls(profile)

    @classmethod
    def child_factory(cls, profile):
        return cls(profile, "child")


@pytest.fixture(autouse=True)
def _reset_built():
    TailEngine.built.clear()


@pytest.fixture
def no_continuity(monkeypatch):
    """Any construction of the default engine fails the test."""

    def refuse(*a, **k):
        raise AssertionError("ContinuityEngine was constructed behind a replacement engine's back")

    monkeypatch.setattr(ContinuityEngine, "__init__", refuse)


def _openai_reply(i: int, calls=()):
    msg = {"role": "assistant", "content": f"step {i} done"}
    if calls:
        msg["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for cid, n, a in calls
        ]
    return {
        "id": f"r{i}",
        "model": MODEL,
        "choices": [{"message": msg}],
        "usage": {"prompt_tokens": 900 + i, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 600}},
    }


def _anthropic_reply(i: int, calls=()):
    content = [{"type": "text", "text": f"step {i} done"}]
    content += [{"type": "tool_use", "id": cid, "name": n, "input": a} for cid, n, a in calls]
    return {
        "id": f"r{i}",
        "model": MODEL,
        "content": content,
        "usage": {
            "input_tokens": 300,
            "output_tokens": 40,
            "cache_read_input_tokens": 600,
            "cache_creation_input_tokens": 0,
        },
    }


def _dumps(body) -> bytes:
    return json.dumps(body, sort_keys=True, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "wire_format,reply,render",
    [
        ("openai-chat", _openai_reply, lambda v, loader: to_openai_chat(v, loader, model=MODEL)),
        (
            "anthropic-messages",
            _anthropic_reply,
            lambda v, loader: to_anthropic_messages(v, loader, model=MODEL, max_tokens=v.budget.reserve_tokens),
        ),
    ],
)
def test_the_provider_sees_exactly_the_engine_view(store, wire_format, reply, render):
    sid = new_session(store)
    grow_model = ScenarioModel(8, workspace="/work/shop")
    for _ in range(6):
        store.append(sid, grow_model.request())
    spies = []

    def factory(p):
        spies.append(Spy(get_engine_factory("continuity")(p)))
        return spies[-1]

    calls = [(f"c{i}", "Bash", {"command": "rm -rf /" if i == 2 else f"ls src/{i}"}) for i in range(4)]
    provider = ScriptedProvider([reply(i, [calls[i]]) for i in range(4)] + [reply(4)])
    ran = []

    def runner(call):
        ran.append(call.id)
        return ToolResult(call.id, f"output of {call.id}", name=call.name, exit_code=0)

    loop = AgentLoop.from_supervisor(
        store,
        sid,
        Supervisor(factory, child_policy=factory),
        provider,
        model=MODEL,
        wire=wire_format,
        system_prompt=SYSTEM,
        tools=TOOLS,
        session_context=CONTEXT,
        tool_runner=runner,
        assume_yes=True,
    )  # "ask" calls run; hard deny never
    for i in range(5):
        step = loop.step()
        view = spies[0].views[i]
        assert step.view is view
        assert _dumps(provider.requests[i]) == _dumps(render(view, lambda h: store.get_artifact(h)[1]))
    assert len(spies) == 1 and len(provider.requests) == 5
    assert ran == ["c0", "c1", "c3"]  # the hard-denied call never ran and got an error result
    denied = [e.event for e in store.events(sid, kinds=("tool_result",)) if e.event.call_id == "c2"]
    assert denied[0].is_error and denied[0].content.startswith("[denied: hard-deny rm-root")


def _views(path, build, requests=24):
    store = EventStore(path)
    sid = new_session(store, "port")
    engine = build(store, sid)
    assert isinstance(engine, ContextEngine)
    views = grow(store, sid, engine, requests, model=ScenarioModel(6, workspace="/work/shop"))
    out = (
        [wire(v) for v in views],
        [v.tokens for v in views],
        [dict(v.metrics) for v in views],
        [(k, at, p) for _, k, at, p in store.kernel_records(sid, "continuity:test")],
    )
    store.close()
    return out


def test_the_default_engine_is_byte_identical_directly_and_through_the_port(tmp_path):
    def direct(store, sid):
        p = profile(store, sid)
        return ContinuityEngine(MODEL, reader=p.reader, writer=p.writer)

    def for_model(store, sid):
        p = profile(store, sid)
        return ContinuityEngine.for_model(MODEL, reader=p.reader, writer=p.writer)

    builds = {
        "direct": direct,
        "for_model": for_model,
        "default factory": lambda store, sid: continuity_context_engine_factory(profile(store, sid)),
        "registered": lambda store, sid: get_engine_factory("continuity")(profile(store, sid)),
    }
    results = {name: _views(tmp_path / f"{i}.db", b) for i, (name, b) in enumerate(builds.items())}
    first = results["direct"]
    assert len({v.split(b"\n")[3] for v in first[0]}) > 1
    for name, r in results.items():
        assert r == first, f"{name} differs from the directly constructed engine"
    assert get_engine_factory("continuity") == ContinuityEngine.factory


def test_the_default_factory_is_for_model(store):
    sid = new_session(store)
    p = profile(store, sid, config={"context": {"recent_tokens": 9_000}, "models": {MODEL: {"reserve_tokens": 5_000}}})
    a = continuity_context_engine_factory(p)
    b = ContinuityEngine.for_model(MODEL, reader=p.reader, writer=p.writer, config=p.config, estimator=p.estimator)
    assert type(a) is ContinuityEngine
    assert (a.model, dict(a.config), a.default_budget(), repr(a.estimator)) == (
        b.model,
        dict(b.config),
        b.default_budget(),
        repr(b.estimator),
    )
    # MODEL (claude-sonnet-4-5) gets Claude's 200k window from Latch's model table (was 256,000)
    assert a.default_budget() == ContextBudget(context_window_tokens=200_000, reserve_tokens=5_000, recent_tokens=9_000)


def test_no_default_engine_kernel_context_behind_a_replacement(store, no_continuity):
    sid = new_session(store)
    model = ScenarioModel(9, workspace="/work/shop")
    for _ in range(5):
        store.append(sid, model.request())
    provider = ScriptedProvider([_openai_reply(i) for i in range(6)])
    loop = AgentLoop.from_supervisor(
        store,
        sid,
        Supervisor(TailEngine.factory, child_policy=TailEngine.child_factory),
        provider,
        model=MODEL,
        system_prompt=SYSTEM,
        tools=TOOLS,
    )
    for i in range(6):
        loop.say(f"next {i}")
        loop.step()
    assert TailEngine.built == [("root", sid)]
    assert kernel_streams(store) == set()  # the replacement wrote nothing and nobody wrote for it
    for body in provider.requests:
        assert "<kernel-context" not in json.dumps(body, ensure_ascii=False)
    kinds = {e.kind for e in store.events(sid)}
    # conversation kinds plus the host's own bookkeeping (estimate corrections, tool starts, the harness prompt
    # it sent): no kernel context
    assert kinds <= {
        "user_message",
        "assistant_message",
        "tool_result",
        "usage",
        "system_note",
        "estimate_correction",
        "tool_started",
        "harness_prompt",
    }


def test_replay_through_a_replacement_writes_only_its_own_stream(store, no_continuity):
    latch_baselines = pytest.importorskip("latch_baselines")
    from latch.cli.replay import run_replay

    sid = new_session(store)
    model = ScenarioModel(10, workspace="/work/shop")
    for _ in range(12):
        store.append(sid, model.request())
    doc, _ = run_replay(store, sid, engine="sliding-window", recent=4_000)
    assert doc["summary"]["violations"] == [] and latch_baselines.SlidingWindowEngine.PLUGIN_NAME == "sliding-window"
    streams = kernel_streams(store)
    assert all(s.startswith("sliding-window:") for s, _ in streams)
    assert not {k for _, k in streams} & set(RECORD_KINDS) - {"manual_compact"}


def test_the_configured_factory_governs_spawned_and_resumed_children(store, no_continuity):
    root = new_session(store)
    sup = Supervisor(TailEngine.factory, child_policy=TailEngine.child_factory)
    provider = ScriptedProvider([_openai_reply(i) for i in range(4)])
    loop = AgentLoop.from_supervisor(store, root, sup, provider, model=MODEL)
    child = loop.spawn_child("Brief: rename the tax module.", provider)
    child.step()
    assert [e.event.text for e in store.events(child.session_id, kinds=("user_message",))] == [
        "Brief: rename the tax module."
    ]  # the parent's history does not seed the child
    resumed_child = AgentLoop.from_supervisor(store, child.session_id, sup, provider, model=MODEL)
    resumed_root = AgentLoop.from_supervisor(store, root, sup, provider, model=MODEL)
    assert isinstance(resumed_child.engine, TailEngine) and isinstance(resumed_root.engine, TailEngine)
    assert TailEngine.built == [
        ("root", root),
        ("child", child.session_id),
        ("child", child.session_id),
        ("root", root),
    ]
    assert list(sup.children) == [child.session_id]

    without_policy = Supervisor(TailEngine.factory)
    with pytest.raises(ChildPolicyError, match="no child policy"):
        AgentLoop.from_supervisor(store, root, without_policy, provider, model=MODEL).spawn_child("Brief", provider)
    with pytest.raises(ChildPolicyError):
        AgentLoop.from_supervisor(store, child.session_id, without_policy, provider, model=MODEL)


def test_a_default_root_governs_its_children_with_the_default_factory(store):
    root = new_session(store)
    store.append(root, [UserMessage("hello")])
    sup = Supervisor(get_engine_factory("continuity"))
    provider = ScriptedProvider([_openai_reply(i) for i in range(2)])
    loop = AgentLoop.from_supervisor(store, root, sup, provider, model=MODEL)
    child = loop.spawn_child("Brief: check the docs.", provider)
    assert type(loop.engine) is ContinuityEngine and type(child.engine) is ContinuityEngine
    child.step()
    streams = kernel_streams(store)
    assert streams and all(s == "continuity:main" for s, _ in streams)


@pytest.mark.parametrize(
    "window, reserve, recent, problem",
    [
        (32_000, 32_000, 8_000, "reserve_tokens (32,000) must be below context_window_tokens (32,000)"),
        (32_000, 40_000, 8_000, "reserve_tokens (40,000) must be below context_window_tokens (32,000)"),
        (0, 0, 0, "context_window_tokens must be above 0, got 0"),
        (32_000, -1, 8_000, "reserve_tokens must not be negative, got -1"),
        (32_000, 4_000, -5, "recent_tokens must not be negative, got -5"),
        (32_000.0, 4_000, 8_000, "context_window_tokens must be a whole number of tokens, got 32000.0"),
        (True, 0, 8_000, "context_window_tokens must be a whole number of tokens, got True"),
    ],
)
def test_a_context_budget_validates_itself(window, reserve, recent, problem):
    assert ContextBudget.problem(window, reserve, recent) == problem
    with pytest.raises(ValueError) as err:
        ContextBudget(window, reserve, recent)
    assert str(err.value) == f"ContextBudget: {problem}"


def test_a_valid_context_budget_has_no_problem():
    assert ContextBudget.problem(32_000, 0, 0) is None
    assert ContextBudget(32_000, 31_999, 8_000).hard_limit_tokens == 1
