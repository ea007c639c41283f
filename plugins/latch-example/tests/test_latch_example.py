"""The example engine through the plugin host: newest whole units, within budget, valid for providers."""

from latch import plugins
from latch.engine.port import ContextBudget, ContextRequest, EngineProfile, SessionContext
from latch.engine.units import render_session_context, view_violations
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.session import StoreKernelWriter, StoreSessionReader
from latch.providers import to_anthropic_messages, validate_anthropic_messages
from latch.store import EventStore


def test_keep_last_units(tmp_path, monkeypatch):
    store = EventStore(tmp_path / "latch.db")
    sid = store.create_session(source="test")
    store.append(
        sid,
        [
            UserMessage("list the files"),
            AssistantMessage("", (ToolCall("c1", "Bash", '{"command": "ls"}'),)),
            ToolResult("c1", "a.py\nb.py"),
            AssistantMessage("Two files: a.py and b.py."),
            UserMessage("thanks"),
        ],
    )
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "example")
    plugins.reset_plugin_manager()
    factory = plugins.get_engine_factory("keep-last-units")
    plugins.reset_plugin_manager()
    profile = EngineProfile(
        session_id=sid,
        model="gpt-4o",
        reader=StoreSessionReader(store, sid),
        writer=StoreKernelWriter(store, sid, "example:test"),
        config={"engines": {"keep-last-units": {"units": 3}}},
    )
    ctx = SessionContext(workspace="/src/shop")
    view = factory(profile).materialize(
        ContextRequest(session_id=sid, session_context=ctx, budget=ContextBudget(32_000, 4_000, 4_000))
    )
    assert view.messages[0] == render_session_context(ctx)
    assert view.messages[0].content == "<session-context>\nworkspace: /src/shop\nmode: default\n</session-context>"
    # Units: [user 1] [call 2 + result 3] [assistant 4] [user 5]; the newest 3 are kept whole.
    assert [m.seq for m in view.messages[1:]] == [2, 3, 4, 5]
    assert view.tokens.total_tokens <= 28_000
    assert view_violations(view.messages) == []
    assert validate_anthropic_messages(to_anthropic_messages(view)) == []
    store.close()
