"""``raw-history``: the whole conversation, every request; nothing is ever dropped or rewritten.

The reference row of a cost-vs-coverage comparison ("raw history" in The Complexity Trap, arXiv 2508.21433):
every earlier message is in every view, so its needed-context coverage is the ceiling, its prefix only grows
(one cache epoch while it fits), and its cost is what no context management costs. When the conversation no
longer fits the hard budget (window - reserve) the request is refused with
:class:`~latch.port.ContextOverflow`, as a provider would refuse it for length: never an over-budget request.
"""

from __future__ import annotations

from typing import ClassVar

from latch.engine.units import Unit
from latch.port import ContextOverflow

from .base import BaselineEngine, Selection


class RawHistoryEngine(BaselineEngine):
    """Keep every unit; refuse (``ContextOverflow``) once they exceed the room."""

    PLUGIN_NAME: ClassVar[str] = "raw-history"
    DESCRIPTION: ClassVar[str] = (
        "Sends the whole conversation every request (no eviction); refuses once it no longer fits."
    )

    def select(self, units: list[Unit], available: int) -> Selection:
        total = sum(self.cost(u) for u in units)
        if total > available:
            raise ContextOverflow(
                f"{self.PLUGIN_NAME}: the whole conversation no longer fits the hard budget",
                {
                    "conversation_tokens": total,
                    "available_tokens": available,
                    "hard_limit_tokens": self.budget.hard_limit_tokens,
                },
            )
        return Selection(units)
