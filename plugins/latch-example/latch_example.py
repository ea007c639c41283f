"""A minimal third-party context engine for Latch: ``keep-last-units``.

It sends the newest ``units`` whole conversation units (default 20) that fit the hard budget.
A *unit* is a user message, an assistant message, or an assistant tool-call turn with all of its
results: keeping or dropping whole units is what keeps every request protocol-valid. Copy this
file to write your own engine; the README says how.

Configure it in Latch's config file::

    [engine]
    name = "keep-last-units"

    [engines.keep-last-units]
    units = 20
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latch.config import budget_for_model
from latch.port import (ComponentTokens, ContextBudget, ContextOverflow, ContextRequest, ContextView,
                               EngineProfile, RecalledEvent)
from latch.engine.units import TokenCounter, UnitBuilder, render_session_context, resolve_estimator
from latch.hookspecs import hookimpl


class KeepLastUnits:
    """The newest N whole units that fit ``context_window_tokens - reserve_tokens``."""

    PLUGIN_NAME = "keep-last-units"
    DESCRIPTION = "Example engine: the newest N whole units (default 20) that fit the budget."

    def __init__(self, profile: EngineProfile):
        self.profile = profile
        self._config = dict(profile.config or {})
        self._counter = TokenCounter(resolve_estimator(profile.model, profile.estimator))

    @classmethod
    def factory(cls, profile: EngineProfile) -> "KeepLastUnits":
        """Latch builds every engine through this (the ContextEngineFactory)."""
        return cls(profile)

    # -- the ContextEngine port -------------------------------------------------------------
    @property
    def config(self) -> Mapping[str, Any]:
        return self._config

    def set_config(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)

    def set_estimator(self, estimator: Any) -> None:
        self._counter = TokenCounter(estimator)

    def default_budget(self) -> ContextBudget:
        return budget_for_model(self._config, self.profile.model)

    def materialize(self, request: ContextRequest) -> ContextView:
        count = self._counter
        budget = request.budget or self.default_budget()
        keep = int((self._config.get("engines", {}).get(self.PLUGIN_NAME) or {}).get("units", 20))
        reader = self.profile.reader  # read-only: events, search, artifacts
        until = request.until_seq if request.until_seq is not None else reader.max_seq()
        every = UnitBuilder().feed_all(reader.events(until_seq=until))
        units = every[-keep:]

        # The first message is the session context, rendered as every Latch engine renders it.
        head = render_session_context(request.session_context)
        fixed = count.text(request.system_prompt) + count.tools(request.tools) + count.message(head)
        room = budget.hard_limit_tokens - fixed
        while units and sum(u.cost(count) for u in units) > room:
            units.pop(0)  # drop the oldest whole unit
        if room < 0 or (every and not units):  # never send an over-budget request
            raise ContextOverflow("keep-last-units: the newest unit does not fit the budget",
                                  {"fixed_tokens": fixed, "hard_limit_tokens": budget.hard_limit_tokens})
        recent = sum(u.cost(count) for u in units)
        return ContextView(
            session_id=request.session_id,
            system=request.system_prompt,
            tools=tuple(request.tools),
            messages=(head, *(m for u in units for m in u.messages)),
            tokens=ComponentTokens(instructions_tokens=fixed - count.tools(request.tools),
                                   tools_tokens=count.tools(request.tools), recent_tokens=recent),
            budget=budget,
            # A cache epoch is named by its first unit: while that stays, each request is the previous
            # one plus new units (append-only, so the provider's prompt cache holds); when the window
            # slides, a new epoch starts.
            epoch=units[0].first_seq if units else 0,
            first_retained_seq=units[0].first_seq if units else None,
        )

    def manual_compact(self, reason: str = "manual") -> None:
        """Nothing to compact: every view is computed from the log."""

    def recall(self, query: str, *, limit_tokens: int = 4000, until_seq: int | None = None) -> list[RecalledEvent]:
        """This example recalls nothing."""
        return []


@hookimpl
def latch_register_engines() -> list[type]:
    return [KeepLastUnits]
