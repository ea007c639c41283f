"""Provider usage is authoritative (spec: "Bounded materialization"): estimate corrections.

When a provider counts more prompt tokens than Latch estimated for a view, the ratio ``provider / estimated``
is the session's correction, and every later view is budgeted with the largest one seen (:func:`corrected_budget`:
the hard limit divided by it), so the same shape of text never overflows twice.

Two writers record corrections, the same way: Latch's agent (``latch run``) appends an
:class:`~latch.events.EstimateCorrection` event to the session's log (:mod:`latch.agent.loop`); a replay of an
imported transcript whose requests carry provider usage records one kernel record of kind :data:`KIND`
(payload ``{"provider_tokens", "estimated_tokens", "source", "request"}``) in its run of the replay scratch
database (:mod:`latch.store.replays`), never in the log. A replay compares the provider's count with Latch's
estimate of the same text: the transcript's request (its recorded harness prompt and tools and the whole
conversation so far), not Latch's view of it, which holds other text (a canonical state, evictions).
:func:`session_correction` reads the one in effect for ``latch context``.

Usage is authoritative in both directions too: once a session has provider-reported prompt counts for at least
:data:`RATE_MIN_REQUESTS` requests (a live run, or a transcript's usage in replay), :func:`rate_budget` sets the hard
limit from the provider's own rate (:class:`~latch.accounting.forecast.ProviderForecast`: provider tokens = intercept +
rate x Latch's estimate, fitted on earlier requests only) with :data:`SAFETY_MARGIN` of the real limit held back,
instead of from the conservative estimate alone: a heuristic that prices text at twice the provider's count no
longer leaves half the window unused, and a fixed gap (tool schemas a transcript does not record) costs its own
size, not a ratio of the whole window. An overflow refusal still corrects (:func:`corrected_budget` caps the rate's
limit) and the request is retried.

Units: tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ..accounting.forecast import ProviderForecast
from ..events import AssistantMessage, EstimateCorrection
from ..port import ContextBudget
from ..records import dataclass
from ..store import EventStore

__all__ = [
    "KIND",
    "Correction",
    "raises_ratio",
    "corrected_budget",
    "session_correction",
    "ReplayCorrections",
    "SAFETY_MARGIN",
    "RATE_MIN_REQUESTS",
    "RATE_KIND",
    "session_rate",
    "rate_budget",
    "rate_limit_tokens",
    "rate_ready",
    "provider_limit_tokens",
]

SAFETY_MARGIN = 0.05
"""Share of the real hard limit (window - reserve, provider tokens) a rate budget holds back for the forecast's
error: on the corpus's complete views the out-of-sample forecast is within 0.99-1.08x the provider's count."""
RATE_MIN_REQUESTS = 2
"""Requests with provider usage a session needs before its budget follows the provider's rate (the rate needs one
step between two requests)."""

KIND = EstimateCorrection.KIND
"""Kind of a replay's correction record (the event's kind: the same fact, in the replay's scratch run)."""
RATE_KIND = "provider_rate"
"""Kind of a replay's record of the provider's rate fitted over the whole transcript (payload
:meth:`~latch.accounting.forecast.ProviderForecast.to_json` plus ``request``: the last request observed)."""


@dataclass(frozen=True)
class Correction:
    """A correction in effect: the provider counted ``provider_tokens`` for a view estimated at
    ``estimated_tokens`` at model request ``request`` (1-based; ``None``: unknown), ``source`` ``usage`` or
    ``overflow``; ``origin`` says where it is recorded (``"session log"`` or ``"replay run N"``)."""

    provider_tokens: int
    estimated_tokens: int
    request: int | None
    source: str = "usage"
    origin: str = "session log"

    @property
    def ratio(self) -> float:
        """``provider_tokens / estimated_tokens`` (> 1)."""
        return self.provider_tokens / self.estimated_tokens

    def pair(self) -> tuple[int, int]:
        """``(provider_tokens, estimated_tokens)``, as :func:`corrected_budget` takes it."""
        return self.provider_tokens, self.estimated_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "provider_tokens": self.provider_tokens,
            "estimated_tokens": self.estimated_tokens,
            "ratio": round(self.ratio, 4),
            "request": self.request,
            "source": self.source,
            "origin": self.origin,
        }


def raises_ratio(current: tuple[int, int] | None, provider_tokens: int, estimated_tokens: int) -> bool:
    """Whether ``provider_tokens / estimated_tokens`` is above 1 and above ``current`` (``(provider, estimated)``
    or ``None``): only then is a new correction recorded."""
    if estimated_tokens <= 0 or provider_tokens <= estimated_tokens:
        return False
    return current is None or provider_tokens * current[1] > current[0] * estimated_tokens


def corrected_budget(budget: ContextBudget, ratio: tuple[int, int] | None) -> ContextBudget:
    """``budget`` with its hard limit divided by ``provider/estimated`` (the reserve stays whole), so a view
    estimated within the new limit is within the original limit in the provider's own tokens."""
    if ratio is None:
        return budget
    provider, estimated = ratio
    return _with_hard(budget, budget.hard_limit_tokens * estimated // provider)


def rate_limit_tokens(budget: ContextBudget, forecast: Any, *, margin: float = SAFETY_MARGIN) -> int | None:
    """The largest estimate ``L`` (tokens) whose forecast ``forecast.intercept_tokens + forecast.rate x L`` is at
    most ``(1 - margin) x`` the real hard limit (``budget.hard_limit_tokens``, provider tokens), at least 1;
    ``None`` before :func:`rate_ready`."""
    if not rate_ready(forecast):
        return None
    return max(1, int(((1.0 - margin) * budget.hard_limit_tokens - forecast.intercept_tokens) / forecast.rate))


def rate_budget(
    budget: ContextBudget,
    forecast: Any,
    correction: tuple[int, int] | None = None,
    overflow: tuple[int, int] | None = None,
    *,
    margin: float = SAFETY_MARGIN,
) -> ContextBudget:
    """``budget`` with its hard limit set from the provider's rate (:func:`rate_limit_tokens`): above the real
    limit when the estimator over-counts the provider, below it by a fixed gap the provider counts and Latch does
    not see (tool schemas a transcript does not record). It never lowers the limit below :func:`corrected_budget`
    with ``correction`` (the largest ``(provider, estimated)`` correction, or ``None``) when the forecast puts that
    limit within the real one (an exact count loses nothing to the margin), nor when the rate is above 1 (the
    provider counts more per estimated token than a calibrated estimator allows: content the transcript lacks,
    such as Aider's repository map, or a fit on a few coarse counts). ``overflow`` (the largest overflow refusal, or
    ``None``) caps the limit as :func:`corrected_budget` does. Before :func:`rate_ready`, :func:`corrected_budget`
    with the larger of the two ratios is returned. ``forecast`` follows
    :class:`~latch.accounting.forecast.ProviderForecast`. The reserve stays whole; ``recent_tokens`` is lowered to the
    limit when above it."""
    return _with_hard(budget, _rate_limit(budget, forecast, correction, overflow, margin)[0])


def _with_hard(budget: ContextBudget, hard: int) -> ContextBudget:
    """``budget`` with hard limit ``hard`` (the reserve whole, ``recent_tokens`` lowered to it when above);
    ``budget`` itself when that is its limit already."""
    if hard == budget.hard_limit_tokens and budget.recent_tokens <= hard:
        return budget
    hard = max(hard, 1)  # a limit nothing fits in is still a budget: materialize then refuses the request
    return replace(
        budget, context_window_tokens=budget.reserve_tokens + hard, recent_tokens=min(budget.recent_tokens, hard)
    )


def _rate_limit(
    budget: ContextBudget,
    forecast: Any,
    correction: tuple[int, int] | None,
    overflow: tuple[int, int] | None,
    margin: float,
) -> tuple[int, bool]:
    """``(hard limit, whether the provider's rate set it)`` of :func:`rate_budget`."""
    worst = max((r for r in (correction, overflow) if r is not None), key=lambda r: r[0] / r[1], default=None)
    floor = corrected_budget(budget, worst).hard_limit_tokens
    raw = rate_limit_tokens(budget, forecast, margin=margin)
    if raw is None:
        return floor, False
    hard = raw
    if forecast.rate > 1.0 or forecast.forecast(floor) <= budget.hard_limit_tokens:
        hard = max(hard, floor)  # the rate never takes away what the counts themselves show to fit
    if overflow is not None:
        hard = min(hard, corrected_budget(budget, overflow).hard_limit_tokens)
    return hard, hard == raw


def rate_ready(forecast: Any) -> bool:
    """Whether ``forecast`` (or ``None``) has observed :data:`RATE_MIN_REQUESTS` requests and one step of growth."""
    return forecast is not None and forecast.requests >= RATE_MIN_REQUESTS and forecast.steps > 0


def provider_limit_tokens(budget: ContextBudget, forecast: Any) -> int | None:
    """The hard limit of ``budget`` (estimate tokens) counted in the provider's tokens by ``forecast`` (``None``
    before any request was observed): ``latch context`` and replay divide it by the real hard limit to show the
    usable share of the real window."""
    return forecast.forecast(budget.hard_limit_tokens) if forecast is not None else None


def _best(found: list[Correction]) -> Correction | None:
    best: Correction | None = None
    for c in found:
        if raises_ratio(best.pair() if best else None, c.provider_tokens, c.estimated_tokens):
            best = c
    return best


def session_correction(store: EventStore, session_id: str) -> Correction | None:
    """The largest correction in effect for ``session_id``: its log's :class:`~latch.events.EstimateCorrection`
    events (``request``: how many model requests came before it), else the newest finished replay run of the
    session in the store's replay scratch (read only when the scratch file exists; a read never creates it), else
    the newest replay kept in the store with ``latch replay --keep`` (its stream's records of kind :data:`KIND`;
    ``origin`` names the stream), else ``None``."""
    found: list[Correction] = []
    requests = 0
    for s in store.events(session_id, kinds=[AssistantMessage.KIND, EstimateCorrection.KIND]):
        e = s.event
        if isinstance(e, AssistantMessage):
            requests += 1
        elif isinstance(e, EstimateCorrection) and e.estimated_tokens > 0:
            found.append(Correction(e.provider_tokens, e.estimated_tokens, requests or None, e.source))
    best = _best(found)
    if best is not None:
        return best
    for records, origin in _replay_records(store, session_id, KIND):
        got = _recorded(records, origin)
        if got is not None:
            return got
    return None


def session_rate(store: EventStore, session_id: str) -> dict[str, Any] | None:
    """The provider's rate the newest replay of ``session_id`` fitted (its record of kind :data:`RATE_KIND`, in the
    replay scratch or a replay kept with ``--keep``): ``{"rate", "intercept_tokens", "requests", "steps",
    "request", "origin"}``, else ``None`` (no replay with provider usage)."""
    for records, origin in _replay_records(store, session_id, RATE_KIND):
        got = [p for _, _, _, p in records]
        if got:
            return {**got[-1], "origin": origin}
    return None


def _replay_records(
    store: EventStore, session_id: str, kind: str
) -> Iterator[tuple[list[tuple[int, str, int, dict[str, Any]]], str]]:
    """``(records of kind, origin)`` of the session's finished replay runs in the store's replay scratch, newest
    first (read only when the scratch file exists; a read never creates it), then of the replays kept in the
    store with ``latch replay --keep``, newest first."""
    where = getattr(store, "replay_scratch_path", None)
    if where is not None and where.is_file():
        scratch = store.replay_scratch()
        runs = [r for r in scratch.runs() if r.session_id == session_id and r.finished]
        for run in reversed(runs):
            yield scratch.records(run.id, kinds=[kind]), f"replay run {run.id}"
    for stream in reversed(store.kernel_streams(session_id, kind=kind)):  # replays kept with --keep
        yield store.kernel_records(session_id, stream, kinds=[kind]), f"kept replay {stream}"


def _recorded(records: Any, origin: str) -> Correction | None:
    """The largest of a replay's correction records ``(id, kind, at_seq, payload)``."""
    return _best(
        [
            Correction(
                int(p["provider_tokens"]),
                int(p["estimated_tokens"]),
                p.get("request"),
                str(p.get("source", "usage")),
                origin,
            )
            for _, _, _, p in records
            if int(p.get("estimated_tokens", 0)) > 0
        ]
    )


class ReplayCorrections:
    """The corrections of one replay (``latch replay`` and ``latch view`` replay the same way).

    After each request :meth:`observe`:

    * forecasts the provider tokens of its view from the earlier requests only (``last_forecast``: ``None`` until
      the fit is stable, :attr:`~latch.accounting.forecast.ProviderForecast.stable`, or without a harness) and then feeds ``forecast`` (a
      :class:`~latch.accounting.forecast.ProviderForecast`, made here) with Latch's estimate of the request the provider
      counted and the provider's count. That estimate is the transcript's recorded harness (system prompt and
      tools, or the overhead inferred from usage) plus the whole conversation so far (``history_tokens``); for a
      session ``latch run`` recorded, the view itself, which is what it sent;
    * compares the two and, when the provider's count is above the estimate by more than any earlier request,
      records the correction (a kernel record of kind :data:`KIND` through ``writer``); an inferred overhead leaves
      nothing to compare (the comparison would be circular);
    * budgets every later view of ``loop``: once ``forecast`` has :data:`RATE_MIN_REQUESTS` requests from the
      provider's rate (:func:`rate_budget`, unless ``rate=False``), before that with the hard limit of ``budget``
      divided by the largest correction (:func:`corrected_budget`).

    ``harness`` is the replay's :class:`~latch.host.harness.Harness` (``None``: ``--no-harness``: no forecast, no
    correction). ``enabled=False`` leaves the budget alone and records nothing. ``source`` says what set the budget
    of the next view: ``"rate"`` (the provider's rate: :func:`rate_limit_tokens`), ``"correction"`` or
    ``"estimate"`` (the conservative estimate alone). ``current`` is the correction in effect (its :meth:`Correction.to_json` form, or ``None``), ``recorded`` every one recorded, in order.
    """

    def __init__(
        self,
        loop: Any,
        budget: ContextBudget,
        counter: Any,
        harness: Any,
        writer: Any,
        *,
        enabled: bool = True,
        rate: bool = True,
    ) -> None:
        self.loop, self.budget, self.writer = loop, budget, writer
        self.enabled, self.rate = enabled, rate
        self.forecast = ProviderForecast() if harness is not None else None
        self.comparable = enabled and harness is not None and not harness.inferred_from
        self.fixed = (
            counter.system(harness.system) + counter.tools(harness.tools) + harness.inferred_tokens
            if harness is not None
            else 0
        )
        self.agent = harness is not None and harness.session_context is not None
        self.last_forecast: int | None = None
        self._last: tuple[int, int] | None = None  # (number, seq) of the last request with usage
        self.source = "estimate"
        self.current: dict[str, Any] | None = None
        self.recorded: list[dict[str, Any]] = []

    def sent_tokens(self, res: Any) -> int:
        """Latch's estimate of what the provider counted for request result ``res`` (see the class)."""
        if self.agent and res.view is not None:
            return int(max(res.view.tokens.total_tokens, res.recounted_tokens or 0))
        return int(self.fixed + res.history_tokens)

    def observe(self, res: Any) -> None:
        """Take request result ``res`` (:class:`~latch.host.loop.RequestResult`) into account (see the class)."""
        req = res.request
        usage = req.usage if req is not None else None
        counted = usage.prompt_tokens if usage is not None and usage.prompt_tokens else None
        f = self.forecast
        self.last_forecast = (
            f.stable_forecast(res.view.tokens.total_tokens) if f is not None and res.view is not None else None
        )
        sent = self.sent_tokens(res) if counted else 0
        if f is not None and counted:
            f.observe(sent, counted)
            self._last = (req.number, req.seq)
        if not self.enabled:
            return
        if self.comparable and counted:
            self._record(req, counted, sent)
        c = self.current
        ratio = (c["provider_tokens"], c["estimated_tokens"]) if c else None
        hard, by_rate = (
            _rate_limit(self.budget, f, ratio, None, SAFETY_MARGIN)
            if self.rate
            else (corrected_budget(self.budget, ratio).hard_limit_tokens, False)
        )
        self.loop.set_budget(_with_hard(self.budget, hard))  # every later view
        self.source = "rate" if by_rate else "correction" if ratio is not None else "estimate"

    def finish(self) -> None:
        """Record the provider's rate fitted over every request (one record of kind :data:`RATE_KIND` through
        ``writer``, at the last request's seq), when it is ready (:func:`rate_ready`): ``latch context`` reads it."""
        f = self.forecast
        if self.enabled and self._last is not None and f is not None and rate_ready(f):
            number, seq = self._last
            self.writer.append_many([(RATE_KIND, seq, {**f.to_json(), "request": number})])

    def _record(self, req: Any, counted: int, estimate: int) -> None:
        c = self.current
        if raises_ratio((c["provider_tokens"], c["estimated_tokens"]) if c else None, counted, estimate):
            found = Correction(
                counted, estimate, req.number, origin=f"replay run {getattr(self.writer, 'run_id', '?')}"
            )
            self.writer.append_many(
                [
                    (
                        KIND,
                        req.seq,
                        {
                            "provider_tokens": found.provider_tokens,
                            "estimated_tokens": found.estimated_tokens,
                            "source": found.source,
                            "request": req.number,
                        },
                    )
                ]
            )
            self.current = found.to_json()
            self.recorded.append(self.current)
