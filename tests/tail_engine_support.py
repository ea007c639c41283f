"""A minimal replacement context engine for port tests: the newest three whole units of the session, nothing else
(``from tail_engine_support import TailViewEngine``). Subclasses set ``PLUGIN_NAME`` and their own ``__init__``
(which must set ``profile`` and ``_counter``)."""

from __future__ import annotations

from latch.engine import ComponentTokens, ContextBudget, ContextView
from latch.engine.units import TokenCounter, UnitBuilder, resolve_estimator


class TailViewEngine:
    """The engine port's methods, with a tail view: the newest three whole units of the session."""

    config: dict = {}

    def __init__(self, profile):
        self.profile = profile
        self._counter = TokenCounter(resolve_estimator(profile.model, profile.estimator))

    def set_config(self, config): ...
    def set_estimator(self, estimator): ...
    def default_budget(self):
        return ContextBudget()

    def manual_compact(self, reason="manual"): ...
    def recall(self, query, *, limit_tokens=4000, until_seq=None):
        return []

    def materialize(self, request):
        units = UnitBuilder().feed_all(self.profile.reader.events(until_seq=request.until_seq))[-3:]
        msgs = tuple(m for u in units for m in u.messages)
        c = self._counter
        tokens = ComponentTokens(
            instructions_tokens=c.text(request.system_prompt),
            tools_tokens=c.tools(request.tools),
            recent_tokens=sum(c.message(m) for m in msgs),
        )
        return ContextView(
            session_id=request.session_id,
            system=request.system_prompt,
            tools=tuple(request.tools),
            messages=msgs,
            tokens=tokens,
            budget=request.budget or ContextBudget(),
        )
