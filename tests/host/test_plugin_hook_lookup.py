"""Which of a plugin's names are hooks: :class:`latch.plugins.LatchPluginManager` skips a module's classes, submodules
and constants without pluggy's own lookup, and finds exactly the hooks pluggy finds (plus unmarked ``latch_*``
routines, which it reports)."""

from __future__ import annotations

import functools
import importlib
import os
import types

import pluggy
import pytest

from latch.hookspecs import PROJECT_NAME, hookimpl
from latch.plugins import LatchPluginManager


class _Holder:
    @staticmethod
    @hookimpl
    def static_hook() -> list[type]:
        return []

    @classmethod
    @hookimpl
    def class_hook(cls) -> list[type]:
        return []

    @hookimpl
    def method_hook(self) -> list[type]:
        return []


def _marked() -> list[type]:
    return []


def _module() -> types.ModuleType:
    """A plugin module with every kind of global: marked and unmarked functions, static and class methods, a bound
    method, a class, a submodule, a builtin, a partial, constants."""
    mod = types.ModuleType("plugin_under_test")
    holder = _Holder()
    marked = hookimpl(_marked)
    mod.__dict__.update(
        latch_register_engines=marked,
        renamed_hook=hookimpl(specname="latch_register_estimators")(lambda: []),
        plain_function=lambda: None,
        static_hook=_Holder.__dict__["static_hook"],
        class_hook=_Holder.__dict__["class_hook"],
        bound_hook=holder.method_hook,
        a_class=_Holder,
        a_module=os,
        a_builtin=os.getpid,
        a_partial=functools.partial(_marked),
        a_constant=3,
        a_string="latch",
        latch_unmarked=lambda: [],
        latch_builtin=os.getpid,
    )
    return mod


@pytest.mark.parametrize("name", sorted(dir(_module())))
def test_a_module_global_is_a_hook_exactly_when_pluggy_finds_one(name):
    mod = _module()
    ours = LatchPluginManager().parse_hookimpl_opts(mod, name)
    theirs = pluggy.PluginManager(PROJECT_NAME).parse_hookimpl_opts(mod, name)
    if name.startswith(PROJECT_NAME + "_") and theirs is None:  # Latch's rule: an unmarked latch_* routine
        assert ours is not None and ours["specname"] is None
    else:
        assert ours == theirs
    if name in {"renamed_hook", "static_hook", "class_hook", "bound_hook", "latch_register_engines"}:
        assert ours is not None


@pytest.mark.parametrize(
    "module",
    ["latch.default_plugins.engines", "latch.default_plugins.providers", "latch_baselines", "latch_example"],
)
def test_the_installed_plugins_hooks_are_the_ones_pluggy_finds(module):
    mod = pytest.importorskip(module) if not module.startswith("latch.") else importlib.import_module(module)
    ours = {n for n in dir(mod) if LatchPluginManager().parse_hookimpl_opts(mod, n) is not None}
    theirs = {n for n in dir(mod) if pluggy.PluginManager(PROJECT_NAME).parse_hookimpl_opts(mod, n) is not None}
    assert ours == theirs and ours
