"""Every ``latch_*`` hook a plugin can implement (pluggy project name ``"latch"``).

A plugin is a module (or object) whose functions are marked with
:data:`hookimpl` and named after a hook below; it is found through the
entry-point group ``latch`` (see :mod:`latch.plugins`). Built-ins register
through these same hooks. ``docs/plugins.md`` has one section per hook.

The ``latch_register_*`` hooks return a list of *classes*, each carrying a
``PLUGIN_NAME`` (a non-empty ``str``) unique within its kind; a duplicate name
is a :class:`latch.plugins.PluginError` naming both plugins. What a class must
provide besides ``PLUGIN_NAME`` depends on the kind (see each hook). An entry may
also be a :class:`LazyClass` (the name and the class's import path): the class is
then imported when it is first used, not when the plugin registers (Latch's
built-in engine and providers register so).

Example::

    from latch.hookspecs import hookimpl

    @hookimpl
    def latch_register_engines():
        return [KeepLastUnits]
"""

# A hookspec's body is never run (pluggy calls the implementations), so its docstring is its body.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    import click

__all__ = ["PROJECT_NAME", "hookspec", "hookimpl", "LazyClass"]

PROJECT_NAME = "latch"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class LazyClass:
    """A class a ``latch_register_*`` hook registers by name, imported on first use.

    ``name`` is the class's ``PLUGIN_NAME``; ``target`` is where the class lives, ``"module:QualName"`` (the form
    of an entry point's object reference). The host registers ``name`` at once (a duplicate is an error then) and
    imports ``target`` only when the class itself is needed: the engine a command runs, ``latch plugins``. It then
    checks what an eagerly registered class is checked for, plus that its ``PLUGIN_NAME`` is ``name``; a failure
    is a :class:`latch.plugins.PluginError` naming the plugin. Example::

        @hookimpl
        def latch_register_engines():
            return [LazyClass("my-engine", "my_engine.engine:MyEngine")]
    """

    __slots__ = ("name", "target")

    def __init__(self, name: str, target: str) -> None:
        self.name = name
        self.target = target

    @property
    def qualname(self) -> str:
        """``module.QualName`` of the class, without importing it."""
        return self.target.replace(":", ".", 1)

    def load(self) -> Any:
        """The object ``target`` names (its module imported); errors propagate (``ImportError``, ``AttributeError``)."""
        import importlib

        module, _, attr = self.target.partition(":")
        obj: Any = importlib.import_module(module)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
        return obj

    def __repr__(self) -> str:
        return f"LazyClass({self.name!r}, {self.target!r})"


@hookspec
def latch_register_engines() -> list[type]:
    """Context engines (spec: "Port boundary").

    Each class has ``PLUGIN_NAME`` (the name ``--engine`` and ``[engine] name``
    select) and a classmethod ``factory(profile: EngineProfile) -> ContextEngine``
    that builds the engine for one session; that bound classmethod is the
    engine's :data:`~latch.port.ContextEngineFactory`. Optional
    ``DESCRIPTION`` (one line).
    """


@hookspec
def latch_register_estimators() -> list[type]:
    """Token estimators.

    Each class has ``PLUGIN_NAME`` (what ``--estimator`` selects), a no-argument
    constructor, and instances following :class:`latch.estimators.Estimator`, all
    three methods required: ``estimate(text: str) -> int`` (tokens),
    ``estimate_batch(texts: Iterable[str]) -> numpy int64 array`` (tokens per
    text), ``image_tokens(width: int | None, height: int | None) -> int``
    (tokens of one image from its pixels; conservative when a dimension is
    unknown, never from the encoded size). Optional ``DESCRIPTION``. An estimator
    whose counts are a provider's exact tokenizer sets ``EXACT = True`` and
    ``TOKENIZER`` (a name unique to the tokenizer and its counting rule, e.g.
    ``"quicktok:o200k_base"``): the host then caches each event's count durably
    under that name, and the engine reports exact totals.
    """


@hookspec
def latch_register_providers() -> list[type]:
    """Model providers (network endpoints speaking a wire format such as OpenAI chat or Anthropic Messages).

    Each class has ``PLUGIN_NAME`` and a classmethod ``from_options(model, *, base_url=None,
    api_key_env=None, timeout=600.0, max_retries=4)``; instances follow
    :class:`latch.providers.Provider` (``name``, ``wire``, ``model`` and
    ``complete(request_body, *, on_text=None) -> response body``, request bodies built by
    :func:`latch.providers.to_openai_chat` / :func:`latch.providers.to_anthropic_messages` /
    :func:`latch.providers.to_responses`, errors :class:`latch.providers.ProviderError` / ``ProviderOverflow``). Built-ins: ``openai``,
    ``openai-compatible``, ``anthropic``, ``openai-responses`` (:mod:`latch.default_plugins.providers`). Optional ``DESCRIPTION``.
    """


@hookspec
def latch_register_importers() -> list[type]:
    """Transcript importers (the contract is :class:`latch.importers.base.Importer`).

    ``PLUGIN_NAME`` is the format name ``--format`` selects.
    """


@hookspec
def latch_register_derivation_rules() -> list[type]:
    """Derivation rules: kernel facts read from the tool calls of a harness (:mod:`latch.kernel.derive`).

    Each class subclasses :class:`latch.kernel.derive.DerivationRule`: ``PLUGIN_NAME`` (unique
    among all rules), a no-argument constructor, ``tools`` (the tool names it handles) or an
    override of ``matches(call: ToolCall) -> bool``, and ``derive(call: ToolCall, result:
    ToolResult, ctx: DerivationContext) -> list`` returning facts: kernel records
    (``FileObservation``, ``Mutation``, ``ValidationEvidence``, ``ProcessStarted``/``Exited``)
    or the derived-only ``ToolFailure``, ``ToolSuccess``, ``ActionsReplaced``, ``ActionChanged``.

    For each tool result the first rule whose ``matches`` is true derives (later rules are not
    asked). Order: rules of third-party plugins first, plugin by plugin in load order
    (entry-point name order), each plugin's in the order it returns them, so a plugin can
    override a built-in for a tool name; then the built-in rules
    (:data:`latch.kernel.derive.BUILTIN_RULES`, registered by
    :mod:`latch.default_plugins.derivation`). The host derives canonical state with exactly these
    rules (:func:`latch.host.kernel.kernel_cache`).
    """


@hookspec
def latch_register_uis() -> list[type]:
    """User interfaces (terminal, web, ...). Each class has ``PLUGIN_NAME`` and optional ``DESCRIPTION``."""


@hookspec
def latch_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``latch`` click group ``cli`` (``cli.command()`` / ``cli.add_command``)."""


@hookspec(firstresult=True)
def latch_select_estimator(model: str | None) -> Any | None:
    """Pick the estimator *instance* for ``model`` (a provider model id, or ``None``).

    The first non-``None`` answer wins; return ``None`` to pass. The answer
    follows :class:`latch.estimators.Estimator` (see :func:`latch_register_estimators`).
    The built-in implementation runs last and always answers with the heuristic
    estimator for the model's profile. ``latch replay`` and ``latch context`` ask
    this hook unless ``--estimator NAME`` forces one.
    """


@hookspec(historic=True)
def latch_configure(config: Mapping[str, Any]) -> None:
    """Receive the effective configuration: the parsed config file (``--config``, else
    ``$LATCH_HOME/config.toml``, else the user config folder's) as a mapping; see :mod:`latch.config`.

    The ``latch`` command calls it once per invocation, before building any engine (which then
    gets the same mapping as ``EngineProfile.config``). Historic: a plugin registered after the
    host called it is still called once with it.
    """
