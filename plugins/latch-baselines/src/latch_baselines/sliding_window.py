"""``sliding-window``: drop the oldest whole units until the conversation fits.

The most common strategy in agent harnesses today: keep the newest messages that fit the hard
budget (window - reserve - system - tools - session context), dropping from the front. A unit is
a user message, an assistant message, or a tool-call turn with all of its results, so a call is
never kept without its result or the reverse. ``max_tokens`` (optional) caps the conversation
below the hard budget, e.g. to compare engines at the same working-memory size.
"""

from __future__ import annotations

from typing import Any, ClassVar

from latch.engine.units import Unit

from .base import BaselineEngine, Selection


class SlidingWindowEngine(BaselineEngine):
    """Keep the largest suffix of whole units that fits; drop everything older."""

    PLUGIN_NAME: ClassVar[str] = "sliding-window"
    DESCRIPTION: ClassVar[str] = "Drops the oldest whole units (tool pairs kept together) until the request fits."
    DEFAULTS: ClassVar[dict[str, Any]] = {"max_tokens": None}

    def _check_options(self, options: dict[str, Any]) -> None:
        self._positive_int(options, "max_tokens", self.PLUGIN_NAME, allow_none=True)

    def select(self, units: list[Unit], available: int) -> Selection:
        cap = self._options["max_tokens"]
        limit = min(available, cap) if cap else available
        start = self.fit_suffix(units, limit)
        if start == len(units) and units:  # the cap is below the newest unit: keep that unit whole
            start = len(units) - 1
        return Selection(units[start:])
