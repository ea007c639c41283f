"""Latch: a context engine for LLM agents.

Durable SQLite event log (L3), episode index (L2), canonical task state (L1) and a freshly materialized,
token-bounded view (L0) for every model request. The public API (the Python API guide: ``docs/embedding.md``):

* :class:`EventStore`: the durable event log (``latch.store``);
* :class:`ContextBudget`, :class:`ContextRequest`, :class:`ContextView`, :class:`SessionContext`: the port's
  types (``latch.port``); :class:`ContextEngine` and :class:`ContinuityEngine`, the default engine;
* :func:`build_engine`, :class:`RequestLoop`, :func:`model_requests`: the host's one request loop
  (``latch.host.loop``); :func:`import_file` (``latch.host.ingest``);
* :func:`replay`: every request of a transcript materialized and checked (``latch.host.replay``);
* :data:`hookimpl`: the marker of a plugin's hooks (``latch.hookspecs``).

Names load on first use, so ``import latch`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "EventStore": "latch.store",
    "ContextBudget": "latch.port",
    "ContextRequest": "latch.port",
    "ContextView": "latch.port",
    "SessionContext": "latch.port",
    "ContextEngine": "latch.port",
    "ContinuityEngine": "latch.engine.continuity",
    "build_engine": "latch.host.loop",
    "RequestLoop": "latch.host.loop",
    "model_requests": "latch.host.loop",
    "import_file": "latch.host.ingest",
    "replay": "latch.host.replay",
    "hookimpl": "latch.hookspecs",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'latch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
