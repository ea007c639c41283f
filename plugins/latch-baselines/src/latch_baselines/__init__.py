"""Latch engine plugin: the context strategies agent harnesses use today, behind Latch's port.

* ``sliding-window`` (:class:`SlidingWindowEngine`): drop the oldest whole units until it fits;
* ``observation-masking`` (:class:`ObservationMaskingEngine`): tool outputs older than the last
  M turns become a placeholder (M = 10 by default, as in SWE-agent), then drop oldest if needed;
* ``summary`` (:class:`SummaryEngine`): history beyond a threshold becomes one summary message
  from a pluggable summarizer (default: deterministic, extractive);
* ``raw-history`` (:class:`RawHistoryEngine`): the whole conversation every request, refused once it no
  longer fits (the no-eviction reference row of ``latch bench``).

The first three may lose facts; ``raw-history`` loses none but refuses requests; none ever produces a protocol-invalid or over-budget request. Select one
with ``latch replay --engine NAME`` or ``[engine] name = "NAME"``. The engines are registered by name
(:class:`latch.hookspecs.LazyClass`) and each module is imported when its engine (or name here) is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from latch.hookspecs import LazyClass, hookimpl

if TYPE_CHECKING:
    from .base import BaselineEngine
    from .observation_masking import ObservationMaskingEngine
    from .raw_history import RawHistoryEngine
    from .sliding_window import SlidingWindowEngine
    from .summary import SummaryEngine, extractive_summary

__all__ = [
    "BaselineEngine",
    "SlidingWindowEngine",
    "ObservationMaskingEngine",
    "SummaryEngine",
    "RawHistoryEngine",
    "extractive_summary",
]

# each public name -> its module; the engines are registered by name and imported at first use (a command that runs
# another engine never imports these)
_MODULES = {
    "BaselineEngine": "base",
    "SlidingWindowEngine": "sliding_window",
    "ObservationMaskingEngine": "observation_masking",
    "SummaryEngine": "summary",
    "RawHistoryEngine": "raw_history",
    "extractive_summary": "summary",
}
_ENGINES = {
    "sliding-window": "SlidingWindowEngine",
    "observation-masking": "ObservationMaskingEngine",
    "summary": "SummaryEngine",
    "raw-history": "RawHistoryEngine",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


@hookimpl
def latch_register_engines() -> list[LazyClass]:
    return [LazyClass(name, f"{__name__}.{_MODULES[cls]}:{cls}") for name, cls in _ENGINES.items()]
