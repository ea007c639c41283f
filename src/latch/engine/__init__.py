"""The context engine: the port (:mod:`.port`) and the default :class:`ContinuityEngine`.

:func:`continuity_context_engine_factory` is the default
:data:`~latch.port.ContextEngineFactory`; it is exactly ``ContinuityEngine.for_model(...)``
(spec: "Port boundary"). Hosts obtain factories through :func:`latch.plugins.get_engine_factory`
and never construct an engine themselves.
"""

from __future__ import annotations

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


def continuity_context_engine_factory(profile: EngineProfile) -> ContinuityEngine:
    """The default factory: exactly ``ContinuityEngine.for_model(profile.model, reader=..., writer=...,
    config=..., estimator=...)`` from the session's durable profile."""
    return ContinuityEngine.for_model(
        profile.model, reader=profile.reader, writer=profile.writer, config=profile.config, estimator=profile.estimator
    )
