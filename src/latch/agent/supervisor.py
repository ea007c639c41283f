"""The root supervisor's child-engine policy (spec: "Port boundary", child sessions).

The root supervisor holds one :data:`~latch.port.ContextEngineFactory`.
Every child spawn, worker reconstruction and resume builds its engine through a
factory, from the child's durable profile (:class:`~latch.port.EngineProfile`):

* the root session is built and resumed with ``root_factory``;
* a child is built and resumed with the *child policy*: ``child_policy`` when
  given, else ``root_factory`` when that is the default engine's factory
  (``continuity``);
* a non-default root factory without a ``child_policy`` makes
  :meth:`Supervisor.spawn_child` (and resuming a child) raise
  :class:`ChildPolicyError`: the supervisor never constructs the continuity
  engine itself and never falls back to it.
"""

from __future__ import annotations

from ..plugins import DEFAULT_ENGINE, PluginError, get_engine_factory
from ..port import ContextEngine, ContextEngineFactory, EngineProfile

__all__ = ["ChildPolicyError", "Supervisor", "is_default_factory"]


class ChildPolicyError(Exception):
    """A child engine cannot be built: no child policy for a non-default root engine."""


def is_default_factory(factory: ContextEngineFactory) -> bool:
    """``True`` when ``factory`` is the registered default engine's factory (``continuity``)."""
    try:
        return factory == get_engine_factory(DEFAULT_ENGINE)
    except PluginError:  # the default engine is disabled: nothing is the default
        return False


def _describe(factory: object) -> str:
    owner = getattr(factory, "__self__", None)
    name = getattr(owner, "PLUGIN_NAME", None)
    if name:
        return f"engine {name!r}"
    return f"factory {getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', repr(factory))}"


class Supervisor:
    """Builds the root engine and every child engine through explicit factories.

    ``root_factory`` builds (and resumes) the root session's engine;
    ``child_policy`` is the factory for children, required when ``root_factory``
    is not the default engine's factory. :attr:`children` maps each spawned
    child session id to its profile, in spawn order; :attr:`reports` buffers the ids of background
    children whose reports await delivery at the root's next safe boundary.
    """

    def __init__(self, root_factory: ContextEngineFactory, child_policy: ContextEngineFactory | None = None):
        self.root_factory = root_factory
        self.child_policy = child_policy
        self.children: dict[str, EngineProfile] = {}
        self.reports: list[str] = []  # background children finished and not yet delivered (a buffer; the log decides)

    @classmethod
    def for_engine(cls, name: str, child_engine: str | None = None) -> Supervisor:
        """A supervisor for the engine registered as ``name`` (children: ``child_engine``, if given).

        Unknown names raise :class:`latch.plugins.PluginError`.
        """
        return cls(get_engine_factory(name), get_engine_factory(child_engine) if child_engine else None)

    @property
    def child_factory(self) -> ContextEngineFactory | None:
        """The factory children are built with, or ``None`` when spawning must fail."""
        if self.child_policy is not None:
            return self.child_policy
        return self.root_factory if is_default_factory(self.root_factory) else None

    def build_root(self, profile: EngineProfile) -> ContextEngine:
        """The root session's engine, through ``root_factory``."""
        return _build(self.root_factory, profile)

    def spawn_child(self, profile: EngineProfile) -> ContextEngine:
        """Build a child session's engine through the child policy.

        ``profile.parent_session_id`` must be set (``ValueError`` otherwise).
        Raises :class:`ChildPolicyError` for a non-default root engine without a
        child policy.
        """
        factory = self._child_factory_for(profile)
        engine = _build(factory, profile)
        self.children[profile.session_id] = profile
        return engine

    def resume(self, profile: EngineProfile) -> ContextEngine:
        """Rebuild an engine from a durable profile: root sessions through ``root_factory``,
        children (``parent_session_id`` set) through the child policy, exactly as when spawned."""
        if profile.parent_session_id is None:
            return self.build_root(profile)
        return _build(self._child_factory_for(profile), profile)

    def require_child_factory(self, what: str = "a child session") -> ContextEngineFactory:
        """The child policy's factory; :class:`ChildPolicyError` (one line naming ``what``) when there is none."""
        factory = self.child_factory
        if factory is None:
            raise ChildPolicyError(
                f"cannot spawn {what}: the root uses {_describe(self.root_factory)}, "
                f"which is not the default engine, and no child policy is configured; pass child_policy= "
                f"(e.g. the root factory itself) to say how children are built (Latch never falls back to "
                f"the default engine)"
            )
        return factory

    def _child_factory_for(self, profile: EngineProfile) -> ContextEngineFactory:
        if profile.parent_session_id is None:
            raise ValueError(f"child profile for session {profile.session_id!r} has no parent_session_id")
        return self.require_child_factory(f"child session {profile.session_id!r}")


def _build(factory: ContextEngineFactory, profile: EngineProfile) -> ContextEngine:
    engine = factory(profile)
    if not isinstance(engine, ContextEngine):
        raise TypeError(
            f"{_describe(factory)} returned {type(engine).__name__}, which does not implement "
            f"the ContextEngine port (materialize, config, set_config, set_estimator, "
            f"default_budget, manual_compact, recall)"
        )
    return engine
