"""Provider usage against the estimate: the request budget of an agent session (spec: "Bounded materialization").

Provider usage is authoritative, in both directions: when the provider counts more prompt tokens than the view's
estimate, or refuses a request as too long, an :class:`~latch.events.EstimateCorrection` is appended and the
budget of every later view is shrunk by the largest ratio seen (:func:`correction_ratio`), so the same
shape of text never overflows twice. Once this process has seen the provider's counts for
:data:`~latch.host.corrections.RATE_MIN_REQUESTS` requests, the budget follows the provider's own rate instead
(:func:`~latch.host.corrections.rate_budget`: a conservative estimator no longer leaves half the window unused),
capped by the largest overflow refusal; an overflow refusal still corrects and retries. Units: tokens everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..accounting.forecast import ProviderForecast
from ..events import EstimateCorrection, Usage
from ..host.corrections import raises_ratio, rate_budget
from ..host.loop import RequestResult
from ..port import ContextBudget
from ..store import EventLog

__all__ = ["RequestBudget", "correction_ratio", "provider_prompt_tokens", "overflow_fix"]


def provider_prompt_tokens(usage: Usage | None) -> int | None:
    """The whole prompt the provider counted: uncached input + cache read + cache write (``None`` if unknown)."""
    if usage is None or usage.input_tokens is None:
        return None
    return usage.input_tokens + (usage.cache_read_tokens or 0) + (usage.cache_write_tokens or 0)


def correction_ratio(store: EventLog, session_id: str, source: str | None = None) -> tuple[int, int] | None:
    """The largest ``(provider_tokens, estimated_tokens)`` ratio of the session's
    :class:`~latch.events.EstimateCorrection` events (of ``source`` only, ``"usage"`` or ``"overflow"``, when
    given), or ``None`` when there is none above 1."""
    best: tuple[int, int] | None = None
    for s in store.events(session_id, kinds=[EstimateCorrection.KIND]):
        e = s.event
        if not isinstance(e, EstimateCorrection) or (source is not None and e.source != source):
            continue
        if (
            e.estimated_tokens > 0
            and e.provider_tokens > e.estimated_tokens
            and (best is None or e.provider_tokens * best[1] > best[0] * e.estimated_tokens)
        ):
            best = (e.provider_tokens, e.estimated_tokens)
    return best


def overflow_fix(budget: ContextBudget, counter: Any, tools: Sequence[Any]) -> str:
    """What would make the next request fit: a larger window or smaller reserve, and fewer tool schemas when
    they (``tools``, counted by ``counter``) take a third of the hard limit or more."""
    hard = budget.hard_limit_tokens
    fix = (
        f"to fix it: a larger --window or a smaller --reserve (now {budget.context_window_tokens:,} and "
        f"{budget.reserve_tokens:,} tokens)"
    )
    schemas = counter.tools(tools)
    if schemas * 3 >= hard:
        fix += (
            f", or fewer tools with --tools NAME,... (the {len(tools)} tool schemas take "
            f"{schemas:,} of the {hard:,}-token hard limit)"
        )
    return fix


def _sent(res: RequestResult) -> int:
    """Latch's count of the view ``res`` sent (the larger of its total and its recount)."""
    assert res.view is not None
    return max(res.view.tokens.total_tokens, res.recounted_tokens or 0)


class RequestBudget:
    """The budget of one session's requests (see the module docstring): ``base`` (the engine's default or the
    run's flags) corrected by the session's :class:`~latch.events.EstimateCorrection` events, or set from the
    provider's rate (``forecast``, this process's requests: :mod:`latch.accounting.forecast`). Each correction
    appended is passed to ``on_correction``. This is the session's only writer of corrections."""

    def __init__(
        self, store: EventLog, session_id: str, base: ContextBudget, on_correction: Callable[[EstimateCorrection], None]
    ):
        self.store, self.session_id, self.base, self.on_correction = store, session_id, base, on_correction
        self.forecast = ProviderForecast()
        self._ratios: dict[str | None, tuple[int, int] | None] | None = None

    def ratio(self, source: str | None = None) -> tuple[int, int] | None:
        """The session's largest correction (:func:`correction_ratio`; of ``source`` only when given), read from
        the store once and then kept current by :meth:`correct`."""
        if self._ratios is None:
            self._ratios = {
                None: correction_ratio(self.store, self.session_id),
                "overflow": correction_ratio(self.store, self.session_id, "overflow"),
            }
        return self._ratios[source]

    def current(self) -> ContextBudget:
        """The request budget: from the provider's rate once this process has seen its counts for two requests
        (:func:`~latch.host.corrections.rate_budget`, capped by the largest overflow refusal), before that the
        base budget after the session's corrections (:func:`~latch.host.corrections.corrected_budget`)."""
        return rate_budget(self.base, self.forecast, self.ratio(), self.ratio("overflow"))

    def correct(self, provider_tokens: int, estimated: int, source: str) -> None:
        """Append an :class:`~latch.events.EstimateCorrection` (``source`` ``"usage"`` or ``"overflow"``) when
        ``provider_tokens / estimated`` is above every earlier one (of that source, for an overflow)."""
        if not raises_ratio(self.ratio(), provider_tokens, estimated) and not (
            source == "overflow" and raises_ratio(self.ratio("overflow"), provider_tokens, estimated)
        ):
            return
        ev = EstimateCorrection(provider_tokens, estimated, source)
        self.store.append(self.session_id, [ev])
        cache = self._ratios
        assert cache is not None
        for key in [None, "overflow"] if source == "overflow" else [None]:
            if raises_ratio(cache[key], provider_tokens, estimated):
                cache[key] = (provider_tokens, estimated)
        self.on_correction(ev)

    def on_overflow(self, res: RequestResult, prompt_tokens: int | None) -> None:
        """The provider refused the view of ``res`` as too long (``prompt_tokens``: its count, when it said):
        the forecast learns its count and the budget is corrected as an ``"overflow"`` (by a quarter more than the
        estimate when the provider gave no count)."""
        estimate = _sent(res)
        if prompt_tokens:
            self.forecast.observe(estimate, prompt_tokens)  # the provider's own count of this view
        counted = prompt_tokens if prompt_tokens else estimate + estimate // 4 + 1
        self.correct(max(counted, estimate + 1), estimate, "overflow")

    def on_usage(self, res: RequestResult, usage: Usage | None) -> None:
        """The provider answered the view of ``res`` with ``usage``: its prompt count
        (:func:`provider_prompt_tokens`) feeds the forecast and corrects the budget as ``"usage"``."""
        counted = provider_prompt_tokens(usage)
        if counted is not None:
            sent = _sent(res)
            self.forecast.observe(sent, counted)
            self.correct(counted, sent, "usage")
