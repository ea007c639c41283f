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

Units: tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..events import AssistantMessage, EstimateCorrection
from ..port import ContextBudget

__all__ = ["KIND", "Correction", "raises_ratio", "corrected_budget", "session_correction", "ReplayCorrections"]

KIND = EstimateCorrection.KIND
"""Kind of a replay's correction record (the event's kind: the same fact, in the replay's scratch run)."""


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
        return {"provider_tokens": self.provider_tokens, "estimated_tokens": self.estimated_tokens,
                "ratio": round(self.ratio, 4), "request": self.request, "source": self.source, "origin": self.origin}


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
    hard = budget.hard_limit_tokens * estimated // provider
    return replace(budget, context_window_tokens=budget.reserve_tokens + hard,
                   recent_tokens=min(budget.recent_tokens, hard))


def _best(found: list[Correction]) -> Correction | None:
    best: Correction | None = None
    for c in found:
        if raises_ratio(best.pair() if best else None, c.provider_tokens, c.estimated_tokens):
            best = c
    return best


def session_correction(store: Any, session_id: str) -> Correction | None:
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
        elif e.estimated_tokens > 0:
            found.append(Correction(e.provider_tokens, e.estimated_tokens, requests or None, e.source))
    best = _best(found)
    if best is not None:
        return best
    where = getattr(store, "replay_scratch_path", None)
    if where is not None and where.is_file():
        scratch = store.replay_scratch()
        runs = [r for r in scratch.runs() if r.session_id == session_id and r.finished]
        for run in reversed(runs):
            got = _recorded(scratch.records(run.id, kinds=[KIND]), f"replay run {run.id}")
            if got is not None:
                return got
    for stream in reversed(store.kernel_streams(session_id, kind=KIND)):  # replays kept with --keep
        got = _recorded(store.kernel_records(session_id, stream, kinds=[KIND]), f"kept replay {stream}")
        if got is not None:
            return got
    return None


def _recorded(records: Any, origin: str) -> Correction | None:
    """The largest of a replay's correction records ``(id, kind, at_seq, payload)``."""
    return _best([Correction(int(p["provider_tokens"]), int(p["estimated_tokens"]), p.get("request"),
                             str(p.get("source", "usage")), origin)
                  for _, _, _, p in records if int(p.get("estimated_tokens", 0)) > 0])


class ReplayCorrections:
    """The corrections of one replay (``latch replay`` and ``latch view`` replay the same way): after each request,
    :meth:`observe` compares the provider's prompt tokens with Latch's estimate of the request the provider counted
    (the transcript's recorded harness system prompt and tools plus the whole conversation so far,
    ``history_tokens``; for a session ``latch run`` recorded, the view itself, which is what it sent) and, when the
    ratio is above every earlier one, records it (a kernel record of kind :data:`KIND` through ``writer``) and
    budgets every later view of ``loop`` with the hard limit of ``budget`` divided by it.

    ``harness`` is the replay's :class:`~latch.host.harness.Harness` (``None``: ``--no-harness``, nothing to compare);
    an overhead inferred from the same usage leaves nothing to compare either (the comparison would be circular),
    nor does ``enabled=False``. ``current`` is the correction in effect (its :meth:`Correction.to_json` form, or
    ``None``), ``recorded`` every one recorded, in order.
    """

    def __init__(self, loop: Any, budget: ContextBudget, counter: Any, harness: Any, writer: Any, *,
                 enabled: bool = True) -> None:
        self.loop, self.budget, self.writer = loop, budget, writer
        self.comparable = enabled and harness is not None and harness.source != "inferred"
        self.fixed = counter.system(harness.system) + counter.tools(harness.tools) if self.comparable else 0
        self.agent = self.comparable and harness.session_context is not None
        self.current: dict[str, Any] | None = None
        self.recorded: list[dict[str, Any]] = []

    def observe(self, res: Any) -> None:
        """Take request result ``res`` (:class:`~latch.host.loop.RequestResult`) into account (see the class)."""
        req = res.request
        usage = req.usage if req is not None else None
        if not self.comparable or usage is None or not usage.prompt_tokens:
            return
        estimate = (max(res.view.tokens.total_tokens, res.recounted_tokens or 0) if self.agent and res.view is not None
                    else self.fixed + res.history_tokens)
        c = self.current
        if raises_ratio((c["provider_tokens"], c["estimated_tokens"]) if c else None, usage.prompt_tokens, estimate):
            found = Correction(usage.prompt_tokens, estimate, req.number,
                               origin=f"replay run {getattr(self.writer, 'run_id', '?')}")
            self.writer.append_many([(KIND, req.seq, {
                "provider_tokens": found.provider_tokens, "estimated_tokens": found.estimated_tokens,
                "source": found.source, "request": req.number})])
            self.current = found.to_json()
            self.recorded.append(self.current)
            self.loop.budget = corrected_budget(self.budget, found.pair())  # every later view
            self.loop.hard = self.loop.budget.hard_limit_tokens
