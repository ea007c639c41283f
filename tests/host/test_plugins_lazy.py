"""Classes registered by name (:class:`latch.hookspecs.LazyClass`): the name at once, the class at first use.

The built-in engine and providers register so; a third-party plugin may too. Real plugins on ``sys.path`` with
their ``*.dist-info`` (the helper of ``test_plugins``); the imports are seen in ``sys.modules``.
"""

from __future__ import annotations

import re
import sys

import pytest
from test_plugins import BUILTINS_ONLY, ENGINE_PLUGIN, install_fake_plugin

from latch import plugins
from latch.default_plugins import providers as builtin_providers
from latch.hookspecs import LazyClass
from latch.plugins import PluginError, get_plugin_manager


@pytest.fixture(autouse=True)
def _fresh_manager():
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


LAZY_PLUGIN = """
    from latch.hookspecs import LazyClass, hookimpl

    @hookimpl
    def latch_register_engines():
        return [LazyClass({name!r}, {target!r})]
"""


def _engine_module(monkeypatch, tmp_path, name: str = "later") -> str:
    """A module (not imported yet) defining ``NothingEngine`` with ``PLUGIN_NAME = name``; its name."""
    module = install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name=name), entry_name="unused")
    return module


def _lazy_plugin(monkeypatch, tmp_path, name: str, target: str, entry_name: str = "lazy") -> str:
    return install_fake_plugin(
        monkeypatch, tmp_path, LAZY_PLUGIN.format(name=name, target=target), entry_name=entry_name, dist="latch-lazy"
    )


def test_a_lazy_class_is_registered_by_name_and_imported_at_first_use(monkeypatch, tmp_path):
    engine_module = _engine_module(monkeypatch, tmp_path)
    _lazy_plugin(monkeypatch, tmp_path, "later", f"{engine_module}:NothingEngine")
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "lazy"})
    reg = pm.registry("engines")["later"]
    assert (reg.name, reg.plugin.name, reg.loaded) == ("later", "lazy", False)
    assert reg.qualname == f"{engine_module}.NothingEngine"
    assert engine_module not in sys.modules  # registered, not imported
    assert reg.cls.__name__ == "NothingEngine" and reg.cls.PLUGIN_NAME == "later"
    assert reg.loaded and engine_module in sys.modules
    assert reg.cls is sys.modules[engine_module].NothingEngine  # imported once


def test_get_engine_factory_imports_only_the_engine_asked_for(monkeypatch, tmp_path):
    engine_module = _engine_module(monkeypatch, tmp_path)
    _lazy_plugin(monkeypatch, tmp_path, "later", f"{engine_module}:NothingEngine")
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "lazy")
    factory = plugins.get_engine_factory("continuity")
    assert factory.__self__.__name__ == "ContinuityEngine"  # type: ignore[attr-defined]
    assert engine_module not in sys.modules
    assert plugins.get_engine_factory("later").__self__.PLUGIN_NAME == "later"  # type: ignore[attr-defined]


def test_a_lazy_name_taken_by_another_plugin_is_an_error_before_any_import(monkeypatch, tmp_path):
    engine_module = _engine_module(monkeypatch, tmp_path, name="continuity")
    module = _lazy_plugin(monkeypatch, tmp_path, "continuity", f"{engine_module}:NothingEngine", "impostor")
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "impostor"})
    with pytest.raises(PluginError) as err:
        pm.registry("engines")
    assert str(err.value) == (
        "engine name 'continuity' is registered twice: by plugin 'latch.default_plugins.engines' "
        "(latch.default_plugins.engines, built-in) (latch.engine.continuity.ContinuityEngine) and by plugin "
        f"'impostor' ({module}, from latch-lazy) ({engine_module}.NothingEngine)"
    )
    assert engine_module not in sys.modules


@pytest.mark.parametrize(
    ("name", "target", "problem"),
    [
        ("later", "{m}:Missing", r"cannot be imported: AttributeError: .*Missing"),
        ("later", "latch_no_such_module:Engine", r"cannot be imported: ModuleNotFoundError: .*latch_no_such_module"),
        ("later", "{m}:hookimpl", r"is <.*>, which is not a class"),
        ("other", "{m}:NothingEngine", r"has PLUGIN_NAME 'later', not 'other'"),
    ],
    ids=["no-attribute", "no-module", "not-a-class", "other-name"],
)
def test_a_lazy_class_that_cannot_be_used_is_an_error_naming_the_plugin(monkeypatch, tmp_path, name, target, problem):
    target = target.format(m=_engine_module(monkeypatch, tmp_path))
    module = _lazy_plugin(monkeypatch, tmp_path, name, target)
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "lazy")
    assert name in plugins.registered("engines")  # the name is registered: the problem shows at first use
    where = re.escape(f"plugin 'lazy' ({module}, from latch-lazy): engine {name!r} ({target}) ")
    with pytest.raises(PluginError, match=f"^{where}{problem}"):
        plugins.get_engine_factory(name)


def test_a_lazy_class_lacking_what_its_kind_requires_is_an_error_at_first_use(monkeypatch, tmp_path):
    module = install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        class Half:
            PLUGIN_NAME = "half"
        """,
        entry_name="unused",
    )
    _lazy_plugin(monkeypatch, tmp_path, "half", f"{module}:Half")
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "lazy")
    with pytest.raises(PluginError, match=rf"plugin 'lazy' .*: engine 'half' \({module}.Half\) lacks factory"):
        plugins.get_engine_factory("half")


@pytest.mark.parametrize("ref", [LazyClass("", "a:B"), LazyClass("x", "a_module_only"), LazyClass("x", ":B")])
def test_a_malformed_lazy_class_is_refused_when_registered(monkeypatch, tmp_path, ref):
    _lazy_plugin(monkeypatch, tmp_path, ref.name, ref.target)
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "lazy"})
    with pytest.raises(PluginError, match=r"plugin 'lazy' .*a LazyClass needs a non-empty name and a target"):
        pm.registry("engines")


def test_the_builtin_engine_and_providers_register_by_name_and_load_as_their_classes():
    """Each name the built-ins register lazily is its class's PLUGIN_NAME (the classes are loaded here)."""
    from latch.engine.continuity import ContinuityEngine
    from latch.providers import AnthropicProvider, OpenAICompatibleProvider, OpenAIProvider, OpenAIResponsesProvider

    pm = get_plugin_manager(BUILTINS_ONLY)
    engines, providers = pm.registry("engines"), pm.registry("providers")
    assert not engines["continuity"].loaded and not any(r.loaded for r in providers.values())
    assert engines["continuity"].cls is ContinuityEngine
    expected = [OpenAIProvider, OpenAICompatibleProvider, AnthropicProvider, OpenAIResponsesProvider]
    assert [r.cls for r in providers.values()] == expected
    assert list(providers) == [cls.PLUGIN_NAME for cls in expected] == list(builtin_providers.PROVIDERS)
