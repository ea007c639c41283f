"""``observation-masking``: replace old tool outputs by a short placeholder, keep every action.

As in SWE-agent's ``LastNObservations`` and the "Complexity Trap" study (Lindenbauer et al.,
2025): the tool results of all but the last ``keep_turns`` tool-call turns (default 10) are
replaced by ``[tool output omitted: N lines]``, while the assistant's reasoning text, its calls
and every user message stay verbatim. The call/result pairing is untouched (the placeholder *is*
the result), so views stay protocol-valid. A result already shorter than its placeholder is kept.
When the masked conversation still exceeds the budget, the oldest whole units are dropped as in
``sliding-window``, so a request never exceeds it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from latch.engine.units import Unit

from .base import BaselineEngine, Selection

PLACEHOLDER = "[tool output omitted: {lines} lines]"


def _is_turn(unit: Unit) -> bool:
    return any(m.role == "tool" for m in unit.messages)


class ObservationMaskingEngine(BaselineEngine):
    """Mask tool outputs older than the last ``keep_turns`` tool-call turns, then fit the budget."""

    PLUGIN_NAME: ClassVar[str] = "observation-masking"
    DESCRIPTION: ClassVar[str] = (
        "Replaces tool outputs older than the last M turns (default 10) by a placeholder; "
        "drops the oldest units if still over budget."
    )
    DEFAULTS: ClassVar[dict[str, Any]] = {"keep_turns": 10}

    def _check_options(self, options: dict[str, Any]) -> None:
        self._positive_int(options, "keep_turns", self.PLUGIN_NAME)

    def _reset_units(self) -> None:
        super()._reset_units()
        self._masked: dict[int, Unit] = {}

    def masked(self, unit: Unit) -> Unit:
        """``unit`` with each tool output replaced by its placeholder (cached per unit)."""
        got = self._masked.get(unit.first_seq)
        if got is None:
            msgs = []
            for m in unit.messages:
                if m.role == "tool":
                    short = PLACEHOLDER.format(lines=m.content.count("\n") + 1 if m.content else 0)
                    if m.media or self._counter.text(short) < self._counter.text(m.content):
                        m = replace(m, content=short, media=())
                msgs.append(m)
            got = Unit(unit.first_seq, unit.close_seq, unit.seqs, tuple(msgs), unit.user_turn)
            self._masked[unit.first_seq] = got
        return got

    def select(self, units: list[Unit], available: int) -> Selection:
        keep = self._options["keep_turns"]
        turns = [i for i, u in enumerate(units) if _is_turn(u)]
        cutoff = turns[-keep] if len(turns) > keep else 0  # units before the M-th newest turn get masked
        masked_turns = sum(1 for i in turns if i < cutoff)
        view = [self.masked(u) if i < cutoff and _is_turn(u) else u for i, u in enumerate(units)]
        start = self.fit_suffix(view, available)
        return Selection(view[start:], metrics={"keep_turns": keep, "masked_turns": masked_turns})
