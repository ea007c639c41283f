"""Child-engine policy (spec: "Port boundary"): one factory governs spawn and resume; no fallback."""

from __future__ import annotations

import pytest

from latch import plugins
from latch.agent.supervisor import ChildPolicyError, Supervisor, is_default_factory
from latch.engine.port import ContextBudget, EngineProfile


@pytest.fixture(autouse=True)
def _builtins_only(monkeypatch):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


class RecordingEngine:
    """A complete (if useless) ContextEngine that remembers which factory built it."""

    PLUGIN_NAME = "recording"
    built: list[tuple[str, str]] = []

    def __init__(self, profile, via):
        self.profile = profile
        self.via = via
        RecordingEngine.built.append((via, profile.session_id))

    @classmethod
    def factory(cls, profile):
        return cls(profile, "root")

    @classmethod
    def child_factory(cls, profile):
        return cls(profile, "child")

    config = {}

    def set_config(self, config): ...
    def set_estimator(self, estimator): ...
    def default_budget(self):
        return ContextBudget()

    def materialize(self, request):
        raise NotImplementedError

    def manual_compact(self, reason="manual"): ...
    def recall(self, query, *, limit_tokens=4000, until_seq=None):
        return []


@pytest.fixture(autouse=True)
def _clear_built():
    RecordingEngine.built.clear()


def profile(session_id, parent=None):
    return EngineProfile(session_id=session_id, model="gpt-4", reader=None, writer=None, parent_session_id=parent)


def test_non_default_root_without_child_policy_fails_child_spawn():
    sup = Supervisor(RecordingEngine.factory)
    root = sup.build_root(profile("root"))
    assert root.via == "root"
    assert sup.child_factory is None
    with pytest.raises(ChildPolicyError) as err:
        sup.spawn_child(profile("child-1", parent="root"))
    assert str(err.value).startswith(
        "cannot spawn child session 'child-1': the root uses engine 'recording', "
        "which is not the default engine, and no child policy is configured"
    )
    assert "never falls back to the default engine" in str(err.value)
    with pytest.raises(ChildPolicyError):
        sup.resume(profile("child-1", parent="root"))
    assert RecordingEngine.built == [("root", "root")]  # nothing was built for the child, by any engine
    assert sup.children == {}


def test_child_policy_governs_spawn_and_resume():
    sup = Supervisor(RecordingEngine.factory, child_policy=RecordingEngine.child_factory)
    child = sup.spawn_child(profile("child-1", parent="root"))
    assert child.via == "child"
    assert list(sup.children) == ["child-1"]
    assert sup.resume(profile("child-1", parent="root")).via == "child"
    assert sup.resume(profile("root")).via == "root"
    assert RecordingEngine.built == [("child", "child-1"), ("child", "child-1"), ("root", "root")]


def test_root_factory_as_its_own_child_policy():
    sup = Supervisor(RecordingEngine.factory, child_policy=RecordingEngine.factory)
    assert sup.spawn_child(profile("c", parent="root")).via == "root"


def test_default_root_governs_children_without_a_policy():
    default = plugins.get_engine_factory("continuity")
    assert is_default_factory(default)
    assert not is_default_factory(RecordingEngine.factory)
    sup = Supervisor(default)
    assert sup.child_factory == default


def test_default_root_spawns_and_resumes_continuity_children(store):
    from latch.engine.continuity import ContinuityEngine
    from latch.host.session import StoreKernelWriter, StoreSessionReader

    root_id = store.create_session(source="root")
    child_id = store.create_session(source="child", parent_id=root_id)

    def real(session_id, parent=None):
        return EngineProfile(
            session_id=session_id,
            model="claude-sonnet-4",
            parent_session_id=parent,
            reader=StoreSessionReader(store, session_id),
            writer=StoreKernelWriter(store, session_id, "continuity:main"),
        )

    sup = Supervisor.for_engine("continuity")
    root = sup.build_root(real(root_id))
    child = sup.spawn_child(real(child_id, parent=root_id))
    resumed = sup.resume(real(child_id, parent=root_id))
    assert type(root) is type(child) is type(resumed) is ContinuityEngine
    # claude-sonnet-4 gets Claude's 200k window from Latch's model table (was ContextBudget(): 256k)
    assert child.default_budget() == resumed.default_budget() == ContextBudget(context_window_tokens=200_000)


def test_spawn_requires_a_parent():
    sup = Supervisor(RecordingEngine.factory, child_policy=RecordingEngine.factory)
    with pytest.raises(ValueError, match="child profile for session 'orphan' has no parent_session_id"):
        sup.spawn_child(profile("orphan"))


def test_a_factory_returning_a_non_engine_is_a_type_error():
    sup = Supervisor(lambda p: object())
    with pytest.raises(TypeError, match=r"returned object, which does not implement the ContextEngine port"):
        sup.build_root(profile("root"))


def test_for_engine_uses_registered_factories_and_rejects_unknown_names():
    sup = Supervisor.for_engine("continuity")
    assert sup.root_factory == plugins.get_engine_factory("continuity")
    assert sup.child_factory == sup.root_factory
    with pytest.raises(plugins.PluginError, match=r"unknown engine 'recording'; registered engines: continuity"):
        Supervisor.for_engine("recording")
