"""Provider-token forecasts: what the provider would count for a view, learned from the session's own usage.

Latch's estimators price text conservatively (they must never count under the provider, spec "Bounded
materialization"), so a view's estimate overstates what the provider would really count by the estimator's margin:
on the corpus's Claude Code sessions, where no tokenizer is available offline, the ``anthropic`` profile counts the
appended content at about 1.5x the provider's figure (``tools/anthropic_ratio_study.py``). Budgets stay on the
conservative estimate. A replay with provider usage can say more: every earlier request of the transcript pairs
Latch's estimate of what the provider counted (the transcript's request: its harness and the whole conversation so
far) with the provider's count, and :class:`ProviderForecast` fits the provider's count as a linear function of
Latch's estimate over those earlier requests only, then forecasts the current view:

* ``rate``: the median, over steps between earlier requests (a step ends where the estimate has grown by at least
  :data:`MIN_STEP_TOKENS` since it began; smaller growth accumulates; a request whose provider count did not grow
  starts a new step), of ``provider growth / estimate growth`` (provider tokens per estimated token of
  appended content; robust to one request that carried content the transcript lacks, such as thinking blocks,
  and to a harness compaction, where the provider count shrinks), clamped to :data:`RATE_BOUNDS`; 1.0 before two
  requests are known.
* ``intercept_tokens``: the median over the last :data:`ANCHOR_REQUESTS` earlier requests of ``provider - rate x
  estimate`` (the part that does not scale with the content: the harness, the per-request framing), at least 0.
* ``forecast(view_tokens) = intercept_tokens + rate x view_tokens``, rounded; ``None`` before any earlier request
  with usage.

A forecast is *shown* (:meth:`ProviderForecast.stable_forecast`: the replay's ``provider_forecast_tokens``) only once
its fit is stable (:attr:`ProviderForecast.stable`): at least :data:`STABLE_STEPS` steps informed the rate (so at
least three earlier requests with usage: the third request is the earliest that can have one, usually the fourth)
and either the rate lies within :data:`STABLE_RATE_BAND` or it agrees with the previous request's fit within
:data:`RATE_AGREEMENT`. One step is a single ratio nothing confirms: on the corpus the early fits overshoot
(Aider's second request carries its repository map, so the first step reads 5 provider tokens per estimated
token: a forecast of 5.2x the provider's count at request 3). The budget (:func:`latch.host.corrections.rate_budget`)
keeps its own readiness rule and its safety margin.

A forecast is out of sample (the current request's own usage is observed after it is forecast), so it can miss:
where the view holds the whole conversation the forecast and the provider's count should agree (the replay's
``forecast_ratio_complete_views``); where the engine evicted, the ratio is the share of the harness's prompt the
view kept. It is a report (``provider_forecast_tokens`` in the replay JSON), never a budget.

Units: tokens.
"""

from __future__ import annotations

import statistics
from typing import Any

__all__ = [
    "MIN_STEP_TOKENS",
    "RATE_BOUNDS",
    "ANCHOR_REQUESTS",
    "STABLE_STEPS",
    "STABLE_RATE_BAND",
    "RATE_AGREEMENT",
    "ProviderForecast",
]

MIN_STEP_TOKENS = 50
"""Estimated growth (tokens) a step needs before it informs the rate: framing and the harness's per-turn reminders
dominate smaller growth, which accumulates into the next step instead."""
RATE_BOUNDS = (0.2, 5.0)
"""The rate is clamped to this range (provider tokens per estimated token)."""
ANCHOR_REQUESTS = 3
"""How many of the latest earlier requests the intercept is the median over."""
STABLE_STEPS = 2
"""Steps a fit needs before its forecast is shown."""
STABLE_RATE_BAND = (0.3, 1.5)
"""Rates (provider tokens per estimated token) a fit of :data:`STABLE_STEPS` steps is shown with: Latch's estimators
count at most about 2x the provider (rate 0.5) and never under it, so a rate above 1.5 is content the transcript
lacks arriving in one step (a repository map, an added file), not the session's rate."""
RATE_AGREEMENT = 0.1
"""A rate outside :data:`STABLE_RATE_BAND` is shown when it is within this share of the previous request's fitted
rate (the session's content really is priced so)."""


class ProviderForecast:
    """Online fit of a session's provider counts against Latch's estimates (see the module docstring).

    :meth:`observe` records one request (``estimate_tokens``: Latch's estimate of the request the provider counted,
    ``provider_tokens``: the provider's prompt tokens, both > 0, else ignored); :meth:`forecast` gives the provider
    tokens expected for a view of ``view_tokens`` estimated tokens from the requests observed so far.
    """

    def __init__(self) -> None:
        self._obs: list[tuple[int, int]] = []
        self._slopes: list[float] = []
        self._base: tuple[int, int] | None = None  # where the growth of the next step is measured from
        self._fit: tuple[float, int] | None = None  # (rate, intercept) of the requests observed, until the next
        self._previous_rate: float | None = None  # the rate of the fit before the last observation (its steps enough)

    @property
    def requests(self) -> int:
        """How many requests have been observed."""
        return len(self._obs)

    def observe(self, estimate_tokens: int, provider_tokens: int) -> None:
        """Record a request's ``(estimate, provider count)``; a pair with either <= 0 is ignored."""
        if estimate_tokens <= 0 or provider_tokens <= 0:
            return
        self._previous_rate = self.rate if self.steps >= STABLE_STEPS else None
        if self._base is None or provider_tokens <= self._base[1] or estimate_tokens < self._base[0]:
            self._base = (estimate_tokens, provider_tokens)  # the first request, or the count shrank: start over
        elif estimate_tokens - self._base[0] >= MIN_STEP_TOKENS:
            e0, p0 = self._base
            self._slopes.append((provider_tokens - p0) / (estimate_tokens - e0))
            self._base = (estimate_tokens, provider_tokens)
        # else a small step: growth accumulates until it informs the rate
        self._obs.append((estimate_tokens, provider_tokens))
        self._fit = None

    @property
    def steps(self) -> int:
        """How many steps informed the rate."""
        return len(self._slopes)

    def _fitted(self) -> tuple[float, int]:
        """``(rate, intercept_tokens)`` of the requests observed, computed once per observation."""
        if self._fit is None:
            lo, hi = RATE_BOUNDS
            rate = min(hi, max(lo, statistics.median(self._slopes))) if self._slopes else 1.0
            intercept = (
                max(0, round(statistics.median(p - rate * e for e, p in self._obs[-ANCHOR_REQUESTS:])))
                if self._obs
                else 0
            )
            self._fit = (rate, intercept)
        return self._fit

    @property
    def rate(self) -> float:
        """Provider tokens per estimated token of appended content (1.0 before any usable step)."""
        return self._fitted()[0]

    @property
    def intercept_tokens(self) -> int:
        """The provider tokens that do not scale with the content (>= 0; 0 before any request)."""
        return self._fitted()[1]

    def forecast(self, view_tokens: int) -> int | None:
        """Provider tokens expected for a view of ``view_tokens`` estimated tokens (>= 0); ``None`` before any
        request was observed."""
        if not self._obs:
            return None
        return round(self.intercept_tokens + self.rate * max(0, view_tokens))

    @property
    def stable(self) -> bool:
        """Whether the fit is stable enough to show a forecast (the module docstring's rule): at least
        :data:`STABLE_STEPS` steps, and the rate within :data:`STABLE_RATE_BAND` or within :data:`RATE_AGREEMENT` of
        the previous request's fitted rate."""
        if self.steps < STABLE_STEPS:
            return False
        lo, hi = STABLE_RATE_BAND
        prev = self._previous_rate
        return lo <= self.rate <= hi or (prev is not None and abs(self.rate - prev) <= RATE_AGREEMENT * prev)

    def stable_forecast(self, view_tokens: int) -> int | None:
        """:meth:`forecast` when the fit is :attr:`stable`, else ``None``: the forecast a report shows."""
        return self.forecast(view_tokens) if self.stable else None

    def to_json(self) -> dict[str, Any]:
        """``{"rate", "intercept_tokens", "requests", "steps", "stable"}``: the fit after every observed request
        (``rate`` rounded to 4 places; ``steps``: how many steps informed the rate; ``stable``: :attr:`stable`)."""
        return {
            "rate": round(self.rate, 4),
            "intercept_tokens": self.intercept_tokens,
            "requests": self.requests,
            "steps": len(self._slopes),
            "stable": self.stable,
        }
