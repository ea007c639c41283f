"""The context engine: the port (:mod:`.port`) and the default :class:`ContinuityEngine`.

:func:`continuity_context_engine_factory` is the default
:data:`~latch.port.ContextEngineFactory`; it is exactly ``ContinuityEngine.for_model(...)``
(spec: "Port boundary"). Hosts obtain factories through :func:`latch.plugins.get_engine_factory`
and never construct an engine themselves. :class:`ContinuityEngine` is imported at its first use (a module
``__getattr__``): importing a submodule such as :mod:`.units` does not import the continuity engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..port import (
    ComponentTokens,
    ContextBudget,
    ContextEngine,
    ContextEngineFactory,
    ContextOverflow,
    ContextRequest,
    ContextView,
    EngineProfile,
    KernelWriter,
    MaterializeBudget,
    MaterializedContext,
    RecalledEvent,
    SessionContext,
    SessionReader,
    ViewMessage,
    ViewToolCall,
)

if TYPE_CHECKING:  # pragma: no cover
    from .continuity import ContinuityEngine

__all__ = [
    "ContinuityEngine",
    "continuity_context_engine_factory",
    "ComponentTokens",
    "ContextBudget",
    "ContextEngine",
    "ContextEngineFactory",
    "ContextOverflow",
    "ContextRequest",
    "ContextView",
    "EngineProfile",
    "KernelWriter",
    "MaterializeBudget",
    "MaterializedContext",
    "RecalledEvent",
    "SessionContext",
    "SessionReader",
    "ViewMessage",
    "ViewToolCall",
]


def _continuity_engine() -> type[ContinuityEngine]:
    from .continuity import ContinuityEngine

    return ContinuityEngine


def __getattr__(name: str) -> Any:
    if name == "ContinuityEngine":
        return _continuity_engine()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def continuity_context_engine_factory(profile: EngineProfile) -> ContinuityEngine:
    """The default factory: exactly ``ContinuityEngine.for_model(profile.model, reader=..., writer=...,
    config=..., estimator=...)`` from the session's durable profile."""
    return _continuity_engine().for_model(
        profile.model, reader=profile.reader, writer=profile.writer, config=profile.config, estimator=profile.estimator
    )
