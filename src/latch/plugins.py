"""The plugin host: one pluggy manager per process, built-ins and entry points alike.

:func:`get_plugin_manager` builds the manager on first use (nothing happens at
import time) and caches it; :func:`reset_plugin_manager` drops the cache (tests,
or after changing the environment). Loading order:

1. the built-in plugins :data:`DEFAULT_PLUGINS` (modules of
   :mod:`latch.default_plugins`), registered under their module names through
   the same hooks as everyone else;
2. every entry point of the group ``latch`` (:data:`ENTRY_POINT_GROUP`),
   registered under its entry-point name, in name order.

Environment (read when the manager is built):

* ``LATCH_LOAD_PLUGINS``: comma-separated allowlist of entry-point names. Unset
  loads every installed plugin; set but empty loads none (built-ins only). A
  listed name that is not installed is a :class:`PluginError`.
* ``LATCH_DISABLE_PLUGINS``: comma-separated names never registered (entry-point
  names or built-in module names). A name that matches no plugin is reported once
  per process on stderr, with the known names (a typo must not pass silently).
* ``LATCH_TRACE_PLUGINS``: any value but ``""``/``0`` traces every hook call
  (arguments and results) to stderr through pluggy's tracer.

Every hookimpl must match a hook of :mod:`latch.hookspecs`
(``PluginManager.check_pending``); functions named ``latch_*`` count as
hookimpls even without the marker, so a misspelled or unmarked hook is a
:class:`PluginError` naming the plugin, never silently ignored.

The ``latch_register_*`` hooks are collected per kind into ``{PLUGIN_NAME: class}``
(:func:`registered_engines`, :func:`registered_estimators`,
:func:`registered_importers`, :func:`registered_providers`,
:func:`registered_uis`, :func:`registered_derivation_rules`); a name registered twice in one kind is a
:class:`PluginError` naming both plugins. An entry given as a :class:`~latch.hookspecs.LazyClass` registers its
name at once and its class at first use (:attr:`Registration.cls`): a command imports the engine it runs, not
every registered class. Providers: :func:`get_provider` (by ``PLUGIN_NAME``,
``--provider``) and :func:`provider_names`. Engines are built only through
:func:`get_engine_factory`, which never substitutes the default engine for an
unknown one (spec: "Port boundary"). Estimators: :func:`select_estimator`
(hook ``latch_select_estimator`` for a model) and :func:`get_estimator` (by
``PLUGIN_NAME``, ``--estimator``). :func:`configure` passes the configuration to
the historic ``latch_configure`` hook; the ``latch`` command calls it once per
invocation, when a command first needs the config (``latch.cli.AppContext.config``).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import types
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs, installed
from .config import load_config
from .estimators import estimator_for_model
from .hookspecs import PROJECT_NAME, LazyClass
from .records import dataclass

if TYPE_CHECKING:  # pragma: no cover
    import click
    from pluggy import HookimplOpts

from .port import ContextEngineFactory

__all__ = [
    "ENTRY_POINT_GROUP",
    "DEFAULT_PLUGINS",
    "DEFAULT_ENGINE",
    "KINDS",
    "PluginError",
    "PluginInfo",
    "Registration",
    "LatchPluginManager",
    "get_plugin_manager",
    "reset_plugin_manager",
    "registered",
    "registered_engines",
    "registered_estimators",
    "registered_importers",
    "registered_providers",
    "registered_uis",
    "registered_derivation_rules",
    "get_engine_factory",
    "engine_name",
    "get_provider",
    "provider_names",
    "select_estimator",
    "get_estimator",
    "configure",
    "register_plugin_commands",
    "iter_plugins",
]

ENTRY_POINT_GROUP = "latch"
DEFAULT_ENGINE = "continuity"
DEFAULT_PLUGINS = (
    "latch.default_plugins.engines",
    "latch.default_plugins.estimators",
    "latch.default_plugins.importers",
    "latch.default_plugins.derivation",
    "latch.default_plugins.providers",
    "latch.default_plugins.web",
    "latch.default_plugins.tui",
)
KINDS = ("engines", "estimators", "providers", "importers", "derivation_rules", "uis")

# What each kind's classes must have besides PLUGIN_NAME (checked at collection). Estimators
# follow latch.estimators.Estimator.
_REQUIRED_ATTRS: dict[str, tuple[str, ...]] = {
    "engines": ("factory",),
    "estimators": ("estimate", "estimate_batch", "image_tokens"),
    "importers": ("sniff", "parse"),
    "derivation_rules": ("matches", "derive"),
    "providers": ("from_options", "complete"),
    "uis": (),
}


class PluginError(Exception):
    """A plugin cannot be loaded or used; the message names the plugin (and module)."""


@dataclass(frozen=True)
class PluginInfo:
    """One registered plugin. ``name`` is the entry-point name, or the module name of a built-in."""

    name: str
    module: str
    builtin: bool
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None

    @property
    def source(self) -> str:
        """``"built-in"`` or ``"<distribution> <version>"``."""
        if self.builtin:
            return "built-in"
        return f"{self.distribution} {self.version}" if self.distribution else self.module


class Registration:
    """A class registered under ``name`` in ``kind`` by the plugin ``plugin``.

    ``cls`` is the class. One registered as a :class:`~latch.hookspecs.LazyClass` is imported at the first read
    of ``cls`` (``loaded`` says whether it is yet), and checked then: a :class:`PluginError` naming the plugin
    when it cannot be imported, is not a class, has another ``PLUGIN_NAME`` or lacks what its kind requires.
    """

    __slots__ = ("kind", "name", "plugin", "_cls", "_lazy")

    def __init__(self, kind: str, name: str, cls: type | LazyClass, plugin: PluginInfo) -> None:
        self.kind, self.name, self.plugin = kind, name, plugin
        self._lazy = cls if isinstance(cls, LazyClass) else None
        self._cls: type | None = None if isinstance(cls, LazyClass) else cls

    @property
    def loaded(self) -> bool:
        """Whether the class is imported (always, unless it was registered as a :class:`~latch.hookspecs.LazyClass`)."""
        return self._cls is not None

    @property
    def qualname(self) -> str:
        """``module.QualName`` of the class, without importing it."""
        return _qualname(self._lazy if self._cls is None else self._cls)

    @property
    def cls(self) -> type:
        """The registered class (imported now when it was registered lazily)."""
        if self._cls is None:
            assert self._lazy is not None
            self._cls = _load_lazy(self.kind, self._lazy, self.plugin)
        return self._cls

    def __repr__(self) -> str:
        return f"Registration({self.kind!r}, {self.name!r}, {self.qualname}, plugin={self.plugin.name!r})"


def _close_matches(word: str, known: list[str]) -> list[str]:
    """The closest of ``known`` to ``word`` (at most one), for a "did you mean" hint; difflib is imported only
    when a name is wrong."""
    import difflib

    return difflib.get_close_matches(word, known, n=1)


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def _names(value: str | None) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


def _describe(plugin: PluginInfo) -> str:
    origin = "built-in" if plugin.builtin else (f"from {plugin.distribution}" if plugin.distribution else "entry point")
    return f"plugin {plugin.name!r} ({plugin.module}, {origin})"


_ABSENT = object()
_HOOKABLE = (types.FunctionType, types.MethodType, staticmethod, classmethod)
"""What pluggy takes a hook from: functions, bound methods, static and class methods."""


class LatchPluginManager(pluggy.PluginManager):
    """pluggy's manager plus Latch's plugin metadata and per-kind registries."""

    def __init__(self) -> None:
        super().__init__(PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self._registries: dict[str, dict[str, Registration]] = {}

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> HookimplOpts | None:
        """Marked functions, and also unmarked routines named ``latch_*`` (so a forgotten marker fails loudly).

        A module plugin's global that pluggy could not hook (a class, a submodule, a constant: most of what a module
        imports) is skipped without pluggy's descriptor-safe lookup (``inspect.getattr_static``, about 5 µs a name:
        a replay registers a dozen modules with about 300 names); pluggy decides every other name."""
        if isinstance(plugin, types.ModuleType) and not name.startswith(PROJECT_NAME + "_"):
            value = vars(plugin).get(name, _ABSENT)
            if value is not _ABSENT and not isinstance(value, _HOOKABLE):
                return None
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith(PROJECT_NAME + "_"):
            if inspect.isroutine(getattr(plugin, name)):
                opts = {
                    "wrapper": False,
                    "hookwrapper": False,
                    "optionalhook": False,
                    "tryfirst": False,
                    "trylast": False,
                    "specname": None,
                }
        return opts

    def add_plugin(self, obj: Any, info: PluginInfo) -> None:
        """Register ``obj`` under ``info.name``; errors become :class:`PluginError` naming it."""
        other = self.infos.get(info.name)
        if other is not None:
            raise PluginError(f"two plugins are named {info.name!r}: {_describe(other)} and {_describe(info)}")
        try:
            self.register(obj, name=info.name)
        except pluggy.PluginValidationError as exc:
            detail = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise PluginError(f"{_describe(info)}: {detail}") from None
        self.infos[info.name] = info

    def check_hooks(self) -> None:
        """``check_pending`` with a message naming the plugin and the closest real hook."""
        known = sorted(n for n in self.hook.__dict__ if not n.startswith("_") and getattr(self.hook, n).has_spec())
        for name, caller in vars(self.hook).items():
            if name.startswith("_") or caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.optionalhook:
                    continue
                close = _close_matches(name, known)
                hint = f"did you mean {close[0]!r}?" if close else f"known hooks: {', '.join(known)}"
                raise PluginError(f"{_describe(self.infos[impl.plugin_name])} implements unknown hook {name!r}; {hint}")

    def registry(self, kind: str) -> dict[str, Registration]:
        """``{PLUGIN_NAME: Registration}`` of ``kind`` (one of :data:`KINDS`), collected once."""
        if kind not in KINDS:
            raise ValueError(f"unknown plugin kind {kind!r}; known: {', '.join(KINDS)}")
        if kind not in self._registries:
            self._registries[kind] = self._collect(kind)
        return self._registries[kind]

    def _collect(self, kind: str) -> dict[str, Registration]:
        hook_name = f"latch_register_{kind}"
        everyone = self.get_plugins()
        found: dict[str, Registration] = {}
        for impl in getattr(self.hook, hook_name).get_hookimpls():
            info = self.infos[impl.plugin_name]
            # One plugin at a time (through pluggy, so tracing sees it) to know who registered what.
            caller = self.subset_hook_caller(hook_name, [p for p in everyone if p is not impl.plugin])
            self.trace(f"{hook_name} from plugin {info.name!r}")
            try:
                results = caller()
            except Exception as exc:  # a plugin bug must name the plugin, whatever it raised
                raise PluginError(f"{_describe(info)}: {hook_name}() raised {type(exc).__name__}: {exc}") from exc
            for result in results:
                if not isinstance(result, (list, tuple)):
                    raise PluginError(
                        f"{_describe(info)}: {hook_name}() must return a list of classes, got {type(result).__name__}"
                    )
                for cls in result:
                    reg = _registration(kind, cls, info, hook_name)
                    prior = found.get(reg.name)
                    if prior is not None:
                        raise PluginError(
                            f"{kind[:-1]} name {reg.name!r} is registered twice: by {_describe(prior.plugin)} "
                            f"({prior.qualname}) and by {_describe(info)} ({_qualname(cls)})"
                        )
                    found[reg.name] = reg
        return found

    def hooks_of(self, plugin_name: str) -> list[str]:
        """Names of the hooks the plugin implements, sorted."""
        plugin = self.get_plugin(plugin_name)
        return sorted(c.name for c in (self.get_hookcallers(plugin) or ()))


def _qualname(cls: Any) -> str:
    if isinstance(cls, LazyClass):
        return cls.qualname
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def _registration(kind: str, cls: Any, info: PluginInfo, hook_name: str) -> Registration:
    if isinstance(cls, LazyClass):  # the name now, the class at first use (_load_lazy)
        module, _, attr = cls.target.partition(":") if isinstance(cls.target, str) else ("", "", "")
        if not isinstance(cls.name, str) or not cls.name.strip() or not module or not attr:
            raise PluginError(
                f"{_describe(info)}: {hook_name}() returned {cls!r}; a LazyClass needs a non-empty name and a "
                "target 'module:QualName'"
            )
        return Registration(kind, cls.name, cls, info)
    if not isinstance(cls, type):
        raise PluginError(f"{_describe(info)}: {hook_name}() returned {cls!r}, which is not a class")
    name = getattr(cls, "PLUGIN_NAME", None)
    if not isinstance(name, str) or not name.strip():
        raise PluginError(f"{_describe(info)}: {_qualname(cls)} from {hook_name}() has no PLUGIN_NAME string")
    _check_required(kind, name, cls, info)
    return Registration(kind, name, cls, info)


def _check_required(kind: str, name: str, cls: type, info: PluginInfo) -> None:
    missing = [a for a in _REQUIRED_ATTRS[kind] if not callable(getattr(cls, a, None))]
    if missing:
        raise PluginError(f"{_describe(info)}: {kind[:-1]} {name!r} ({_qualname(cls)}) lacks {', '.join(missing)}")


def _load_lazy(kind: str, ref: LazyClass, info: PluginInfo) -> type:
    """The class ``ref`` names, imported and checked as :func:`_registration` checks a class given directly."""
    what = f"{_describe(info)}: {kind[:-1]} {ref.name!r} ({ref.target})"
    try:
        cls = ref.load()
    except Exception as exc:  # a broken plugin must name itself, whatever it raised
        raise PluginError(f"{what} cannot be imported: {type(exc).__name__}: {exc}") from exc
    if not isinstance(cls, type):
        raise PluginError(f"{what} is {cls!r}, which is not a class")
    if getattr(cls, "PLUGIN_NAME", None) != ref.name:
        raise PluginError(f"{what} has PLUGIN_NAME {getattr(cls, 'PLUGIN_NAME', None)!r}, not {ref.name!r}")
    _check_required(kind, ref.name, cls, info)
    return cls


def _build(environ: Mapping[str, str]) -> LatchPluginManager:
    pm = LatchPluginManager()
    if _truthy(environ.get("LATCH_TRACE_PLUGINS")):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    blocked = set(_names(environ.get("LATCH_DISABLE_PLUGINS")))
    eps = sorted(installed.entry_points(ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    _warn_unknown_disabled(blocked, [*DEFAULT_PLUGINS, *(ep.name for ep in eps)])
    for module_name in DEFAULT_PLUGINS:
        if module_name in blocked:
            continue
        info = PluginInfo(name=module_name, module=module_name, builtin=True)
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # e.g. LATCH_IMPL names no backend: say which built-in and why
            raise PluginError(f"{_describe(info)} failed to load: {type(exc).__name__}: {exc}") from exc
        pm.add_plugin(module, info)

    allow_raw = environ.get("LATCH_LOAD_PLUGINS")
    if allow_raw is not None:
        allowed = set(_names(allow_raw))
        unknown = sorted(allowed - {ep.name for ep in eps})
        if unknown:
            names = ", ".join(sorted({ep.name for ep in eps})) or "none"
            raise PluginError(
                f"LATCH_LOAD_PLUGINS names {', '.join(map(repr, unknown))}, which no installed "
                f"distribution provides in the entry-point group {ENTRY_POINT_GROUP!r} "
                f"(installed: {names})"
            )
        eps = [ep for ep in eps if ep.name in allowed]
    for ep in eps:
        if ep.name in blocked:
            continue
        info = PluginInfo(
            name=ep.name,
            module=ep.module,
            builtin=False,
            distribution=ep.dist,
            version=ep.version,
            entry_point=f"{ep.name} = {ep.value}",
        )
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin must name itself, whatever it raised
            raise PluginError(
                f"{_describe(info)} failed to load ({info.entry_point}): {type(exc).__name__}: {exc}"
            ) from exc
        pm.add_plugin(obj, info)
    pm.check_hooks()
    return pm


_WARNED_DISABLED: set[str] = set()


def _warn(message: str) -> None:
    """:func:`latch.textsafe.warn` (``warning: MESSAGE`` on stderr), loaded when there is something to say: a process
    that builds the plugin host and prints nothing (the bench's task server) does not load rich."""
    from .textsafe import warn

    warn(message)


def _warn_unknown_disabled(blocked: set[str], known: list[str]) -> None:
    """One stderr line per process for LATCH_DISABLE_PLUGINS names that match no plugin."""
    unknown = sorted(blocked - set(known) - _WARNED_DISABLED)
    if not unknown:
        return
    _WARNED_DISABLED.update(unknown)
    hints = [
        f"{name!r} (did you mean {close[0]!r}?)" if (close := _close_matches(name, known)) else repr(name)
        for name in unknown
    ]
    verb = "matches" if len(unknown) == 1 else "match"
    _warn(f"LATCH_DISABLE_PLUGINS names {', '.join(hints)}, which {verb} no plugin; known plugins: {', '.join(known)}")


_MANAGER: LatchPluginManager | None = None


def get_plugin_manager(environ: Mapping[str, str] | None = None) -> LatchPluginManager:
    """The process-wide manager, built on first call from ``environ`` (default ``os.environ``).

    Passing ``environ`` builds a fresh, uncached manager (tests). Raises
    :class:`PluginError` when a plugin fails to load, implements an unknown hook,
    or shares a name with another plugin.
    """
    global _MANAGER
    if environ is not None:
        return _build(environ)
    if _MANAGER is None:
        _MANAGER = _build(os.environ)
    return _MANAGER


def reset_plugin_manager() -> None:
    """Forget the cached manager; the next :func:`get_plugin_manager` rebuilds it."""
    global _MANAGER
    _MANAGER = None


def registered(kind: str) -> dict[str, Registration]:
    """``{PLUGIN_NAME: Registration}`` of ``kind`` in the process-wide manager."""
    return get_plugin_manager().registry(kind)


def _classes(kind: str) -> dict[str, type]:
    return {name: reg.cls for name, reg in registered(kind).items()}


def registered_engines() -> dict[str, type]:
    """``{PLUGIN_NAME: engine class}``; each class has ``factory(profile) -> ContextEngine``."""
    return _classes("engines")


def registered_estimators() -> dict[str, type]:
    """``{PLUGIN_NAME: estimator class}``; each class has a no-argument constructor and its instances
    follow :class:`latch.estimators.Estimator` (``estimate(text)``, ``estimate_batch(texts)``,
    ``image_tokens(width, height)``)."""
    return _classes("estimators")


def registered_importers() -> dict[str, type]:
    """``{PLUGIN_NAME (format name): importer class}``."""
    return _classes("importers")


def registered_providers() -> dict[str, type]:
    """``{PLUGIN_NAME: provider class}``; each class has ``from_options(model, *, base_url, api_key_env,
    timeout, max_retries)`` building a :class:`latch.providers.Provider`."""
    return _classes("providers")


def provider_names() -> list[str]:
    """The ``PLUGIN_NAME`` of every registered provider, sorted (built-ins: ``anthropic``, ``openai``,
    ``openai-compatible``, ``openai-responses``)."""
    return sorted(registered("providers"))


def get_provider(name: str) -> type:
    """The provider class registered as ``name`` (build one with ``cls.from_options(model, ...)``).

    An unknown name raises :class:`PluginError` listing the registered providers (with the closest
    name when there is one).
    """
    providers = registered("providers")
    reg = providers.get(name)
    if reg is None:
        close = _close_matches(name, list(providers))
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PluginError(
            f"unknown provider {name!r}{hint}; registered providers: "
            f"{', '.join(sorted(providers)) or 'none'} (install the plugin that provides it, "
            f"or check LATCH_LOAD_PLUGINS / LATCH_DISABLE_PLUGINS)"
        )
    return reg.cls


def registered_uis() -> dict[str, type]:
    """``{PLUGIN_NAME: UI class}``."""
    return _classes("uis")


def registered_derivation_rules(pm: LatchPluginManager | None = None) -> list[type]:
    """The derivation rule classes of ``pm`` (default: the process-wide manager) in the order they are tried.

    Third-party plugins' rules first, plugin by plugin in load order (entry-point name order), each
    plugin's in the order its ``latch_register_derivation_rules`` returned them; then the built-in
    rules. A rule name registered twice is a :class:`PluginError` naming both plugins.
    """
    regs = list((pm or get_plugin_manager()).registry("derivation_rules").values())
    return [r.cls for r in sorted(regs, key=lambda r: r.plugin.builtin)]  # stable: load order within each group


def get_engine_factory(name: str) -> ContextEngineFactory:
    """The :data:`~latch.port.ContextEngineFactory` of the engine registered as ``name``.

    That is the engine class's ``factory`` classmethod. An unknown name raises
    :class:`PluginError` listing the registered engines; there is no fallback to
    ``continuity`` (spec: "Port boundary").
    """
    engines = registered("engines")
    reg = engines.get(name)
    if reg is None:
        close = _close_matches(name, list(engines))
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PluginError(
            f"unknown engine {name!r}{hint}; registered engines: "
            f"{', '.join(sorted(engines)) or 'none'} (install the plugin that provides it, "
            f"or check LATCH_LOAD_PLUGINS / LATCH_DISABLE_PLUGINS)"
        )
    engine_cls: Any = reg.cls  # an engine class: PLUGIN_NAME and a classmethod ``factory``
    factory: ContextEngineFactory = engine_cls.factory
    return factory


def engine_name(cli_engine: str | None = None, config: Mapping[str, Any] | None = None) -> str:
    """The engine to use: ``--engine`` if given, else ``[engine] name`` of ``config``, else ``continuity``.

    ``config`` defaults to :func:`latch.config.load_config`. A non-string
    ``[engine] name`` raises :class:`PluginError`.
    """
    if cli_engine:
        return cli_engine
    if config is None:
        config = load_config()
    section = config.get("engine", {}) if isinstance(config, Mapping) else {}
    name = section.get("name") if isinstance(section, Mapping) else None
    if name is None:
        return DEFAULT_ENGINE
    if not isinstance(name, str) or not name.strip():
        raise PluginError(f"config [engine] name must be a non-empty string, got {name!r}")
    return name.strip()


def select_estimator(model: str | None) -> Any:
    """The estimator instance for ``model`` (a provider model id, or ``None``).

    The first non-``None`` answer of ``latch_select_estimator`` (e.g. ``latch-tiktoken`` for cl100k
    models); the built-in implementation answers last with
    :func:`latch.estimators.estimator_for_model`, which is also the answer when no plugin answers
    (the built-in disabled). Raises :class:`PluginError` when the plugins cannot load.
    """
    chosen = get_plugin_manager().hook.latch_select_estimator(model=model)
    if chosen is None:
        return estimator_for_model(model)
    return chosen


def get_estimator(name: str) -> Any:
    """A new instance of the estimator registered as ``name`` (its ``PLUGIN_NAME``).

    An unknown name raises :class:`PluginError` listing the registered estimators; a constructor
    that fails (e.g. ``cabi`` without a library) raises :class:`PluginError` naming the estimator
    and the reason.
    """
    estimators = registered("estimators")
    reg = estimators.get(name)
    if reg is None:
        close = _close_matches(name, list(estimators))
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PluginError(
            f"unknown estimator {name!r}{hint}; registered estimators: {', '.join(sorted(estimators)) or 'none'}"
        )
    try:
        return reg.cls()
    except Exception as exc:  # the estimator's own reason, on one line
        raise PluginError(
            f"estimator {name!r} ({_describe(reg.plugin)}) cannot be created: {type(exc).__name__}: {exc}"
        ) from exc


def configure(config: Mapping[str, Any]) -> None:
    """Call ``latch_configure(config)`` on every plugin, now and on plugins registered later (historic)."""
    get_plugin_manager().hook.latch_configure.call_historic(kwargs={"config": config})


def register_plugin_commands(cli: click.Group) -> None:
    """Let plugins add subcommands to ``cli``.

    Called by :mod:`latch.cli` before parsing arguments. A :class:`PluginError` here
    (bad environment, broken plugin) must not stop the commands that need no plugin,
    such as ``latch doctor``: it is reported as one warning line on stderr, and the
    commands that need plugins report the error themselves.
    """
    try:
        get_plugin_manager().hook.latch_register_commands(cli=cli)
    except PluginError as exc:
        _warn(f"plugin commands unavailable: {exc}")


def iter_plugins(
    pm: LatchPluginManager | None = None,
) -> Iterable[tuple[PluginInfo, list[str], dict[str, list[Registration]]]]:
    """``(info, hooks, {kind: [Registration, ...]})`` for every registered plugin, in load order."""
    pm = pm or get_plugin_manager()
    by_plugin: dict[str, dict[str, list[Registration]]] = {name: {} for name in pm.infos}
    for kind in KINDS:
        for reg in pm.registry(kind).values():
            by_plugin[reg.plugin.name].setdefault(kind, []).append(reg)
    for name, info in pm.infos.items():
        yield info, pm.hooks_of(name), by_plugin[name]
