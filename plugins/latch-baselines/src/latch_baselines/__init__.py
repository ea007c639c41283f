"""Latch engine plugin: the context strategies agent harnesses use today, behind Latch's port.

* ``sliding-window`` (:class:`SlidingWindowEngine`): drop the oldest whole units until it fits;
* ``observation-masking`` (:class:`ObservationMaskingEngine`): tool outputs older than the last
  M turns become a placeholder (M = 10 by default, as in SWE-agent), then drop oldest if needed;
* ``summary`` (:class:`SummaryEngine`): history beyond a threshold becomes one summary message
  from a pluggable summarizer (default: deterministic, extractive);
* ``raw-history`` (:class:`RawHistoryEngine`): the whole conversation every request, refused once it no
  longer fits (the no-eviction reference row of ``latch bench``).

The first three may lose facts; ``raw-history`` loses none but refuses requests; none ever produces a protocol-invalid or over-budget request. Select one
with ``latch replay --engine NAME`` or ``[engine] name = "NAME"``.
"""

from __future__ import annotations

from latch.hookspecs import hookimpl

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


@hookimpl
def latch_register_engines() -> list[type]:
    return [SlidingWindowEngine, ObservationMaskingEngine, SummaryEngine, RawHistoryEngine]
