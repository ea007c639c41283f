"""Replay as a host service: the plan of a replay of one stored session (engine, checked budget, harness and the
one request loop), without the CLI. ``latch replay``, ``latch view``, ``latch context`` and the web's replay page
build on :func:`plan_replay`; errors are :class:`~latch.host.loop.HostError` (one line).
"""

from __future__ import annotations

import bisect
import math
import os
import statistics
import uuid
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from ..accounting import pricing
from ..accounting.pricing import usd as pricing_usd
from ..config import model_window
from ..engine.context_report import COMPONENTS
from ..events import Usage
from ..port import SessionContext
from ..records import dataclass
from ..store import EventStore
from . import corrections as corrections_mod
from .changes import request_changes
from .harness import session_harness
from .ingest import import_file
from .loop import HostError, RequestLoop, build_engine, model_requests

__all__ = [
    "Replay",
    "ReplayPlan",
    "replay",
    "plan_replay",
    "run_replay",
    "run_budget",
    "window_origin",
    "budget_problem",
    "RATIO_BAND",
    "USABLE_FROM_REQUEST",
    "provider_ratio",
    "ratio_summary",
    "harness_doc",
    "event_position",
]


def budget_problem(
    window_tokens: int, reserve_tokens: int, window: int | None, reserve: int | None, origin: str = ""
) -> None:
    """Raise :class:`~latch.host.loop.HostError` naming the option at fault when the reserve (``reserve_tokens``) is not below
    the window (``window_tokens``); ``window``/``reserve`` are the ``--window``/``--reserve`` values (``None``:
    not given), ``origin`` says where a default came from (e.g. `` for model gpt-4o``)."""
    if reserve_tokens < window_tokens:
        return
    if reserve is not None and window is not None:
        raise HostError(f"--reserve ({reserve}) must be below --window ({window})")
    if reserve is not None:
        raise HostError(
            f"--reserve ({reserve:,}) must be below the window of {window_tokens:,} tokens"
            f"{origin}; pass a larger --window"
        )
    if window is not None:
        raise HostError(f"--window must exceed the default reserve of {reserve_tokens:,}{origin}; pass --reserve")
    raise HostError(f"the reserve ({reserve_tokens:,}) must be below the window ({window_tokens:,}){origin}")


@dataclass
class ReplayPlan:
    """A replay ready to run: the engine ``setup``, the checked ``budget`` (``recent_tokens`` effective),
    ``requested_recent`` (as configured or passed), where the window came from (``window_source``:
    ``"--window"``, ``"run"`` (no budget option given: the ``--window``/``--reserve``/``--recent`` the session's
    ``latch run`` was started with, :func:`run_budget`), ``"config"``, ``"model-table"``, ``"engine"`` (the engine's own default budget differs
    from :func:`latch.config.model_window`) or ``"default"``; ``window_entry``: the ``[models.NAME]`` or
    model-table key), the session's model ``requests`` and the one request ``loop``."""

    setup: Any
    budget: Any
    requested_recent: int
    window_source: str
    window_entry: str | None
    requests: list[Any]
    loop: Any
    harness: Any = None
    """The session's :class:`~latch.host.harness.Harness`: its recorded system prompt and tools go into every
    request (``loop.system_prompt``, ``loop.tools``), an inferred overhead into ``loop.harness_tokens``."""
    event_seqs: list[int] = field(default_factory=list)
    """The store-wide seqs of the session's events, in order (``event_seqs[i]`` is the session's event ``i + 1``)."""


def run_budget(store: EventStore, session_id: str) -> dict[str, int]:
    """The budget options a ``latch run`` session was started with: ``{"window", "reserve", "recent"}`` (tokens;
    only the ones its run set), read from the session's profile (``meta["agent"]``, the same record ``latch run
    --resume`` reads back); ``{}`` for an imported session or a run that set none of them."""
    profile = (store.session(session_id).meta or {}).get("agent") or {}
    if not isinstance(profile, Mapping):
        return {}
    return {
        k: int(v)
        for k in ("window", "reserve", "recent")
        if isinstance(v := profile.get(k), int) and not isinstance(v, bool)
    }


def window_origin(
    config: Mapping[str, Any], model: str | None, window: int, flag: int | None
) -> tuple[str, str | None]:
    """``(window_source, window_entry)`` of a budget whose window is ``window`` tokens (see :class:`ReplayPlan`);
    ``flag`` is the ``--window`` value (``None``: not given)."""
    if flag is not None:
        return "--window", None
    chosen = model_window(config, model)
    if chosen.context_window_tokens != window:
        return "engine", None
    return chosen.source, chosen.entry


def plan_replay(
    store: EventStore,
    session_id: str,
    *,
    engine: str | None = None,
    model: str | None = None,
    estimator: str | None = None,
    config: Mapping[str, Any] | None = None,
    window: int | None = None,
    reserve: int | None = None,
    recent: int | None = None,
    scratch: bool = True,
    harness: bool = True,
    overlay_main: bool = False,
) -> ReplayPlan:
    """Build the engine (stream ``<engine>:replay-<id>``, a run of the replay scratch database unless
    ``scratch`` is false; with ``overlay_main``, the session's own ``<engine>:main`` stream seen through an
    in-memory overlay that writes nothing: :class:`~latch.host.session.OverlayKernelWriter`, for a read-only
    report of the next view), the budget and the request loop of a replay of ``session_id`` (options as
    :func:`run_replay`). The loop sends the session's harness prompt and tools (:func:`latch.host.harness.
    session_harness`: recorded ones as the request's system and tools, else the overhead inferred from provider
    usage as ``harness_tokens``) with every request; ``harness=False`` replays the conversation alone
    (``ReplayPlan.harness`` is then ``None``). Raises :class:`~latch.host.loop.HostError` (one line) for an
    unknown engine or estimator or a reserve not below the window."""
    config = dict(config or {})
    replay_id = uuid.uuid4().hex[:12]
    suffix = "main" if overlay_main else f"replay-{replay_id}"
    setup = build_engine(
        store,
        session_id,
        stream=lambda name: f"{name}:{suffix}",
        engine=engine,
        model=model,
        estimator=estimator,
        config=config,
        scratch=scratch and not overlay_main,
        overlay=overlay_main,
    )
    budget = setup.engine.default_budget()
    # a `latch run` session: each budget option not given is the one its run was started with (as `latch run
    # --resume` reads them back), not the default budget
    # (its reserve only with its window: a --window of this command pairs with the default reserve)
    recorded = run_budget(store, session_id) if window is None else {}
    overrides = {
        k: v
        for k, v in (
            ("context_window_tokens", recorded.get("window")),
            ("reserve_tokens", recorded.get("reserve")),
            ("recent_tokens", recorded.get("recent")),
            ("context_window_tokens", window),
            ("reserve_tokens", reserve),
            ("recent_tokens", recent),
        )
        if v is not None
    }
    merged = {
        "context_window_tokens": budget.context_window_tokens,
        "reserve_tokens": budget.reserve_tokens,
        **overrides,
    }
    budget_problem(
        merged["context_window_tokens"],
        merged["reserve_tokens"],
        window,
        reserve,
        " (the budget of the session's `latch run`)" if recorded else "",
    )
    budget = replace(budget, **overrides)
    requested_recent = budget.recent_tokens
    budget = replace(budget, recent_tokens=min(requested_recent, budget.hard_limit_tokens))
    if window is None and "window" in recorded:
        source, entry = "run", None
    else:
        source, entry = window_origin(config, setup.model, budget.context_window_tokens, window)
    events = list(store.events(session_id))
    requests = model_requests(events)
    info = store.session(session_id)
    context = SessionContext(workspace=info.workspace)
    prompt = session_harness(events, requests, setup.counter, context, info.format) if harness else None
    if prompt is not None and prompt.session_context is not None:  # a latch run session: what it sent
        context = prompt.session_context
    loop = RequestLoop(
        store,
        session_id,
        setup,
        budget,
        session_context=context,
        system_prompt=prompt.system if prompt else "",
        tools=prompt.tools if prompt else (),
        harness_tokens=prompt.inferred_tokens if prompt else 0,
    )
    return ReplayPlan(setup, budget, requested_recent, source, entry, requests, loop, prompt, [s.seq for s in events])


@dataclass
class Replay:
    """The outcome of :func:`replay`: the ``session_id`` in ``store``, the ``plan`` (engine, budget, harness) and
    one :class:`~latch.host.loop.RequestResult` per model request of the transcript, in order (``results``)."""

    store: EventStore
    session_id: str
    plan: ReplayPlan
    results: list[Any]

    @property
    def violations(self) -> list[str]:
        """Every violation line of every request (empty: every view held every invariant)."""
        return [v for r in self.results for v in r.violations]


def replay(
    source: str | os.PathLike[str], *, store: EventStore | None = None, format: str | None = None, **options: Any
) -> Replay:
    """Replay a transcript: every model request's view, materialized and checked (spec: "Bounded
    materialization"). ``source`` is a transcript file (imported first, as a finished session, into ``store``,
    default a new in-memory :class:`~latch.store.EventStore`; ``format`` forces an importer) or the id of a
    session ``store`` holds. ``options`` are :func:`plan_replay`'s (``engine``, ``model``, ``estimator``,
    ``config``, ``window``, ``reserve``, ``recent`` in tokens, ``harness``); a replay into a store on disk
    writes its kernel records to the store's replay scratch, never to the session.

    Raises :class:`~latch.host.loop.HostError` for bad options, :class:`~latch.importers.base.TranscriptError`
    for a file no importer reads, ``FileNotFoundError`` for a missing file."""
    if store is None:
        store = EventStore(":memory:")
    session_id = _stored(store, str(source))
    if session_id is None:
        if not Path(source).is_file():
            raise FileNotFoundError(f"no transcript file and no stored session {str(source)!r}")
        session_id, _, _ = import_file(store, Path(source), format, final=True)
    plan = plan_replay(store, session_id, **options)
    return Replay(store, session_id, plan, list(plan.loop.replay(plan.requests)))


def _stored(store: EventStore, session_id: str) -> str | None:
    """The full id of the session ``session_id`` names in ``store`` (an id or a unique prefix), else ``None``."""
    try:
        return str(store.session(session_id).id)
    except (KeyError, ValueError):
        return None


USABLE_FROM_REQUEST = 3
"""The summary's ``usable_share`` counts the views from this request on: the provider's rate needs two requests."""


def _requests(events: list[Any]) -> list[tuple[int, int, Usage | None]]:
    """``(assistant seq, until_seq, provider usage of that request)`` for every model request
    (:func:`latch.host.loop.model_requests`, as tuples)."""
    return [(r.seq, r.until_seq, r.usage) for r in model_requests(events)]


def run_replay(
    store: EventStore,
    session_id: str,
    *,
    engine: str | None = None,
    model: str | None = None,
    estimator: str | None = None,
    config: Mapping[str, Any] | None = None,
    window: int | None = None,
    reserve: int | None = None,
    recent: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep_views: bool = False,
    keep: bool = False,
    harness: bool = True,
    correct: bool = True,
    rate: bool = True,
    on_result: Callable[[Any], None] | None = None,
) -> tuple[dict[str, Any], list[Any]]:
    """Replay ``session_id`` of ``store``; return ``(document, views)`` (views only with ``keep_views``).

    ``engine`` and ``estimator`` are plugin names (``None``: the configured engine, the model's
    estimator); ``config`` is Latch's configuration, passed to the engine as
    ``EngineProfile.config``. The document is ``{"session", "engine", "estimator", "stream",
    "exact_tokenizer" (the tokenizer when the estimator is exact, else ``None``), "model", "kept", "budget",
    "window_entry", "requests": [...], "summary": {...}}`` as written by ``latch replay
    --json``; ``budget`` holds ``context_window_tokens``, ``reserve_tokens``, ``recent_tokens``
    (effective: at most ``window - reserve``), ``requested_recent_tokens`` (as configured or
    passed) and ``window_source`` (``"--window"``, ``"run"``: the budget of the session's ``latch run``,
    ``"config"``: a ``[models.NAME]`` entry,
    ``"model-table"``: Latch's model table, ``"engine"``: the engine's own default budget, or
    ``"default"``: Latch's default window, nothing matches the model; ``window_entry`` names the entry
    or key); each request has the
    component tokens (``state_tokens`` is the canonical state's size), ``total_tokens``,
    ``epoch``, ``first_retained_seq`` (store-wide) and ``first_retained_event`` (the same event's position in the
    session, 1-based: what the table's ``first seq`` shows), ``cacheability``, ``recent_limit_tokens`` (the engine's
    effective limit, when it reports one) and ``changes`` (since the previous sent request:
    :func:`latch.host.changes.request_changes`; ``None`` for a refused request) and ``cost``
    (``{"original_usd": what the transcript's request cost from its provider usage, "view_usd": what this view
    would cost, cache-aware, with the transcript's output tokens, "view_cached_prefix_tokens": the tokens of the
    view priced as cache reads (the prefix it shares with the previous view, or, when larger, the harness's own
    system prompt and tools up to what the provider read from its cache for the transcript's request: the view
    starts with those very bytes), "view_forecast_usd": the same priced in the
    provider's tokens (``provider_forecast_tokens``, its cached prefix scaled alike; ``None`` without a forecast),
    "priced_model"}``, dollars, ``None`` where unpriced: :mod:`latch.accounting.pricing`); ``summary["cost"]`` totals them
    (see :func:`_cost_summary`; its ``view_forecast_usd`` prices each request's forecast where it has one, else its
    estimate, and is ``None`` when no request has a forecast; like for like, ``original_compared_usd`` is the
    transcript's cost of only the ``compared_requests`` that got a view, the ``refused_requests`` left out on
    both sides, so ``view_usd`` compares with it and not with ``original_usd``). The
    Both are priced as the model that answered the request in the transcript (``--model`` changes the budget
    and the estimator, not the price), else as ``model``.
    ``progress(done, total)`` is called after each request; ``on_result(res)`` with each request's
    :class:`~latch.host.loop.RequestResult` (its ``view`` ``None`` for a refused request), in request order.

    Harness (``harness``, default true; :func:`plan_replay`): ``document["harness"]`` (:func:`harness_doc`) says
    what the requests carry besides the conversation, each request's ``harness_tokens`` is the inferred overhead
    (0 when recorded or none), ``provider_ratio`` is ``total_tokens / provider_prompt_tokens`` (``None`` without
    a provider figure) and ``view_complete`` whether the view still holds the whole conversation; the summary's
    ``provider_ratio``, ``provider_ratio_after_first`` and ``provider_ratio_complete_views`` are their
    distributions (:func:`ratio_summary`). Each request also has ``provider_forecast_tokens``: the provider tokens
    its view would be counted at, forecast from the transcript's earlier requests only (:mod:`latch.accounting.forecast`;
    ``None`` until the fit is stable, its rule there, or with ``harness=False``), and ``forecast_ratio``
    (``provider_forecast_tokens / provider_prompt_tokens``), and ``forecast_over_window`` (the forecast is above
    the model's window: the report says so); the summary has ``forecasts_over_window`` (those requests' numbers),
    ``forecast_ratio``,
    ``forecast_ratio_complete_views``, ``forecast_ratio_evicted_views`` and ``provider_rate`` (the fit after the last request:
    :meth:`~latch.accounting.forecast.ProviderForecast.to_json`, ``None`` with ``harness=False``).
    The views come from the host's one request loop (:class:`latch.host.loop.RequestLoop`).

    Provider usage is authoritative (``correct``, default true; :mod:`latch.host.corrections`): when a request's
    provider prompt tokens exceed Latch's estimate of the request the provider counted (the transcript's recorded
    harness system prompt and tools plus the whole conversation so far, ``history_tokens``; for a session ``latch
    run`` recorded, the view itself, which is what it sent; not with
    ``harness=False``, nor with an overhead inferred from the same usage), and the ratio is above every earlier one, the correction is recorded (a kernel record of kind ``estimate_correction`` in
    the replay's scratch run) and every later view is budgeted with the hard limit divided by it. Each request
    has ``correction`` (the one its view was budgeted with: ``provider_tokens``, ``estimated_tokens``, ``ratio``,
    ``request``, ``source``, ``origin``; ``None`` before any) and ``budget_hard_limit_tokens`` (the hard limit it
    was given); the summary has ``corrections`` (each as recorded) and ``correction`` (the last in effect).

    The engine's kernel records go to a run of the store's replay scratch database
    (:mod:`latch.store.replays`), never to the store itself, unless ``keep``: the finished run is then
    promoted into the store's kernel records (stream ``document["stream"]``, one transaction);
    ``document["kept"]`` says which. Raises :class:`~latch.host.loop.HostError` for a bad engine, estimator or budget
    and :class:`~latch.store.StoreError` when the scratch cannot be written.
    """
    plan = plan_replay(
        store,
        session_id,
        engine=engine,
        model=model,
        estimator=estimator,
        config=config,
        window=window,
        reserve=reserve,
        recent=recent,
        harness=harness,
    )
    setup, budget, loop = plan.setup, plan.budget, plan.loop
    model = setup.model
    hard = budget.hard_limit_tokens

    rows: list[dict[str, Any]] = []
    views: list[Any] = []
    violations: list[str] = []
    instruction_misses: list[str] = []  # views without the latest user instruction (every engine)
    last_sent = None
    parsed: dict[int, Any] = {}  # request_changes' cache of parsed KernelContext messages, for this replay
    original, viewed, forecasted = pricing.CostTotals(), pricing.CostTotals(), pricing.CostTotals()
    compared = pricing.CostTotals()  # the transcript's cost of the requests that got a view: like for like
    usages: list[Any] = []  # the transcript's provider usage per request (None: unreported)
    # the provider counted the transcript's request: its recorded harness and the whole conversation so far, which
    # Latch estimates as the harness's system and tools plus history_tokens; an overhead inferred from these very
    # figures, or --no-harness (the harness unknown), leaves nothing to compare
    # provider usage budgets every later view, and forecasts each view in provider tokens from the transcript's
    # earlier requests (host.corrections, accounting.forecast)
    fixes = corrections_mod.ReplayCorrections(
        loop, budget, setup.counter, plan.harness, setup.writer, enabled=correct, rate=rate
    )
    forecaster = fixes.forecast
    harness_fixed = fixes.fixed
    for res in loop.replay(plan.requests, progress, plan.harness.changes if plan.harness is not None else ()):
        if on_result is not None:
            on_result(res)
        req = res.request
        usage = req.usage
        in_effect, limit, source = fixes.current, loop.hard, fixes.source  # what this view was budgeted with
        limit_provider = corrections_mod.provider_limit_tokens(loop.budget, forecaster)
        fixes.observe(res)
        at = pricing.parse_timestamp(req.ts)
        paid = pricing.price_usage(usage, req.model or model, at=at)  # what the transcript's request cost
        original.add(paid)
        usages.append(usage)
        row: dict[str, Any] = {
            "request": req.number,
            "seq": req.seq,
            "until_seq": req.until_seq,
            "events": res.events,
            "history_tokens": res.history_tokens,
            "correction": in_effect,
            "budget_hard_limit_tokens": limit,
            "budget_provider_tokens": limit_provider,
            "budget_source": source,
            "provider_prompt_tokens": usage.prompt_tokens if usage else None,
            "provider_cache_read_tokens": usage.cache_read_tokens if usage else None,
            "cost": {
                "original_usd": pricing.usd(paid.usd) if paid else None,
                "view_usd": None,
                "priced_model": paid.model_id if paid else None,
            },
        }
        view = res.view
        forecast = fixes.last_forecast
        row["provider_forecast_tokens"] = forecast
        row["forecast_over_window"] = forecast is not None and forecast > budget.context_window_tokens
        row["forecast_ratio"] = provider_ratio(forecast, row["provider_prompt_tokens"])
        if view is None:
            viewed.add(None)
            forecasted.add(None)
            rows.append(
                {
                    **row,
                    "status": "overflow",
                    "error": res.overflow,
                    "total_tokens": None,
                    "changes": None,
                    "provider_ratio": None,
                    "view_complete": None,
                }
            )
            continue
        # the view sends the harness's own system prompt and tools first, byte for byte: what the provider read
        # of them from its cache for the transcript's request it reads for the view too (a first request, or
        # the first after a rotation, then pays cache writes only for what follows them)
        warm = min(harness_fixed, usage.cache_read_tokens or 0) if usage is not None else 0
        prefix = min(res.recounted_tokens or 0, max(res.common_prefix_tokens, warm))
        would = pricing.view_cost(
            res.recounted_tokens or 0, prefix, usage.output_tokens if usage else None, req.model or model, at=at
        )
        viewed.add(would)
        compared.add(paid)
        row["cost"]["view_usd"] = pricing.usd(would.usd) if would else None
        row["cost"]["view_cached_prefix_tokens"] = prefix
        guess = would  # in the provider's tokens: the forecast, the cached prefix scaled alike; else the estimate
        if forecast is not None and view.tokens.total_tokens > 0:
            scale = forecast / view.tokens.total_tokens
            guess = pricing.view_cost(
                forecast,
                min(forecast, round(prefix * scale)),
                usage.output_tokens if usage else None,
                req.model or model,
                at=at,
            )
        forecasted.add(guess)
        row["cost"]["view_forecast_usd"] = pricing.usd(guess.usd) if guess and forecast is not None else None
        row["cost"]["priced_model"] = row["cost"]["priced_model"] or (would.model_id if would else None)
        if keep_views:
            views.append(view)
        violations.extend(res.violations)
        instruction_misses.extend(res.instruction_violations)
        changes = request_changes(last_sent, res, loop.units, parsed)
        last_sent = res
        total = view.tokens.total_tokens
        rows.append(
            {
                **row,
                "status": view.status,
                "total_tokens": total,
                "recounted_tokens": res.recounted_tokens,
                **{c: getattr(view.tokens, c) for c in COMPONENTS},
                "epoch": view.epoch,
                "first_retained_seq": view.first_retained_seq,
                "first_retained_event": event_position(plan.event_seqs, view.first_retained_seq),
                "common_prefix_tokens": res.common_prefix_tokens,
                "cacheability": res.cacheability if res.cacheability is not None else 0.0,
                "left_tokens": view.metrics.get("left_tokens"),
                "rotation_reason": view.metrics.get("rotation_reason"),
                "image_count": view.metrics.get("image_count"),
                "image_tokens": view.metrics.get("image_tokens"),
                "recent_limit_tokens": view.metrics.get("recent_limit_tokens"),
                "headroom_tokens": limit - total,
                "messages": len(view.messages),
                "changes": changes,
                "provider_ratio": provider_ratio(total, row["provider_prompt_tokens"]),
                "view_complete": view.tokens.recent_tokens >= res.history_tokens,
            }
        )
    history = loop.history_tokens
    if setup.keeps_instruction:
        violations.extend(instruction_misses)
    compactions = sum(1 for r in setup.writer.records() if "compact" in r[1])
    if compactions:
        violations.append(f"{compactions} compaction record(s) in the replay stream (never automatic)")
    fixes.finish()  # the provider's rate over the whole transcript, for latch context
    setup.writer.finish(keep=keep)
    done = [r for r in rows if r["total_tokens"] is not None]
    bound = recent_eff = None
    rotations = loop.rotations
    if setup.hysteretic:
        recent_eff = min(
            [
                budget.recent_tokens,
                *(
                    r["recent_limit_tokens"]
                    for r in done
                    if isinstance(r["recent_limit_tokens"], int) and r["recent_limit_tokens"] > 0
                ),
            ]
        )
        bound = history / (0.25 * recent_eff) + 1
        if rotations > bound:
            violations.append(
                f"{rotations} rotations exceed the hysteresis bound {bound:.1f} "
                f"(conversation {history} tokens, effective recent {recent_eff})"
            )
    summary = {
        "requests": len(rows),
        "violations": violations,
        "rotations": rotations,
        "prefix_breaks_within_epoch": loop.prefix_breaks,
        "automatic_compactions": compactions,
        "overflows": loop.overflows,
        "hysteretic_epochs": setup.hysteretic,
        "rotation_bound": round(bound, 2) if bound is not None else None,
        "rotation_bound_recent_tokens": recent_eff,
        "keeps_latest_instruction": setup.keeps_instruction,
        "views_without_latest_instruction": len(instruction_misses),
        "conversation_tokens": history,
        "max_total_tokens": loop.max_total_tokens,
        "hard_limit_tokens": hard,
        "mean_cacheability": (sum(r["cacheability"] for r in done[1:]) / (len(done) - 1)) if len(done) > 1 else None,
        "epochs": len({r["epoch"] for r in done}),
        "cost": {
            **_cost_summary(original, viewed),
            "view_forecast_usd": pricing_usd(forecasted.usd)
            if any(r["cost"].get("view_forecast_usd") is not None for r in done)
            else None,
            "compared_requests": len(done),
            "refused_requests": len(rows) - len(done),
            "original_compared_usd": pricing_usd(compared.usd),
        },
        "provider_ratio": ratio_summary([r["provider_ratio"] for r in done]),
        "provider_ratio_after_first": ratio_summary([r["provider_ratio"] for r in done if r["request"] > 1]),
        "provider_ratio_complete_views": ratio_summary([r["provider_ratio"] for r in done if r["view_complete"]]),
        "forecast_ratio": ratio_summary([r["forecast_ratio"] for r in done]),
        "forecasts_over_window": [r["request"] for r in rows if r["forecast_over_window"]],
        "forecast_ratio_complete_views": ratio_summary([r["forecast_ratio"] for r in done if r["view_complete"]]),
        "forecast_ratio_evicted_views": ratio_summary([r["forecast_ratio"] for r in done if not r["view_complete"]]),
        "provider_rate": forecaster.to_json() if forecaster is not None else None,
        "usable_share": _usable_share(rows, hard),
        "corrections": fixes.recorded,
        "correction": fixes.current,
        "cache_rewrites": _rewrites(usages),
    }
    doc = {
        "session": session_id,
        "engine": setup.engine_name,
        "estimator": setup.estimator_name,
        "stream": setup.writer.stream,
        "model": model,
        "kept": keep,
        "exact_tokenizer": setup.counter.tokenizer,
        "budget": {
            "context_window_tokens": budget.context_window_tokens,
            "reserve_tokens": budget.reserve_tokens,
            "recent_tokens": budget.recent_tokens,
            "requested_recent_tokens": plan.requested_recent,
            "window_source": plan.window_source,
        },
        "window_entry": plan.window_entry,
        "harness": harness_doc(plan.harness, setup.counter),
        "requests": rows,
        "summary": summary,
    }
    return doc, views


def _usable_share(rows: list[dict[str, Any]], hard: int) -> dict[str, Any] | None:
    """The share of the real hard limit (``window - reserve``) a view could fill, in the provider's tokens
    (``budget_provider_tokens / hard``) from request :data:`USABLE_FROM_REQUEST` on: ``{"from_request", "requests",
    "min", "median", "max"}``, ``None`` when no such request has a forecast."""
    shares = sorted(
        r["budget_provider_tokens"] / hard
        for r in rows
        if r["request"] >= USABLE_FROM_REQUEST and r.get("budget_provider_tokens") is not None
    )
    if not shares or hard <= 0:
        return None
    return {
        "from_request": USABLE_FROM_REQUEST,
        "requests": len(shares),
        "min": round(shares[0], 4),
        "median": round(statistics.median(shares), 4),
        "max": round(shares[-1], 4),
    }


def _cost_summary(original: Any, viewed: Any) -> dict[str, Any]:
    """``summary.cost``: ``original_usd`` (the transcript's own usage, priced), ``view_usd`` (Latch's views,
    cache-aware: :func:`latch.accounting.pricing.view_cost`), ``priced_model`` (the genai-prices model id that priced
    most requests), the cache-read share of each (reads over prompt tokens, 0..1) and the priced/unpriced
    request counts; a total is ``None`` when no request of its kind was priced."""
    models = {**viewed.models, **original.models}
    top = max(models, key=lambda m: (models[m].priced, m)) if models else None
    share = original.cache_read_share
    vshare = viewed.cache_read_share
    return {
        "original_usd": pricing_usd(original.usd),
        "view_usd": pricing_usd(viewed.usd),
        "priced_model": top,
        "original_cache_read_share": round(share, 4) if share is not None else None,
        "view_cache_read_share": round(vshare, 4) if vshare is not None else None,
        "original_priced_requests": original.priced,
        "view_priced_requests": viewed.priced,
        "unpriced_requests": original.unpriced,
        "models": {m: t.as_dict() for m, t in sorted(original.models.items())},
    }


RATIO_BAND = (0.9, 1.3)
"""The band a view's size should fall in relative to the provider's prompt figure."""


def provider_ratio(total: int | None, provider: int | None) -> float | None:
    """``total / provider`` rounded to 3 places: the view's tokens (harness included) per provider-reported prompt
    token of the same request; ``None`` when either is unknown or the provider reported 0."""
    if total is None or not provider:
        return None
    return round(total / provider, 3)


def ratio_summary(ratios: list[float | None]) -> dict[str, Any]:
    """The distribution of the known ``ratios`` (``None`` left out): ``{"requests": n, "min", "p10", "median",
    "p90", "max", "within": how many fall in :data:`RATIO_BAND` (inclusive), "band": [lo, hi]}``; the
    statistics are ``None`` when no ratio is known. Percentiles are nearest-rank."""
    known = sorted(r for r in ratios if r is not None)
    lo, hi = RATIO_BAND
    out: dict[str, Any] = {
        "requests": len(known),
        "min": None,
        "p10": None,
        "median": None,
        "p90": None,
        "max": None,
        "within": sum(1 for r in known if lo <= r <= hi),
        "band": [lo, hi],
    }
    if known:
        n = len(known)

        def rank(q: float) -> float:
            return known[min(n - 1, max(0, math.ceil(q * n) - 1))]

        median = known[n // 2] if n % 2 else (known[n // 2 - 1] + known[n // 2]) / 2
        out.update({"min": known[0], "p10": rank(0.1), "median": round(median, 3), "p90": rank(0.9), "max": known[-1]})
    return out


def harness_doc(harness: Any, counter: Any) -> dict[str, Any]:
    """The replay JSON's ``harness``: ``source`` (``"recorded"``: the transcript's system prompt/instructions
    and tool schemas are sent as the request's system and tools; ``"inferred"``: none recorded, the overhead
    ``inferred_tokens`` is counted as ``harness_tokens``; ``"recorded+inferred"``: the system prompt is recorded, the
    tool schemas are not, and what the provider counted beyond the prompt is ``inferred_tokens``; ``"none"``), ``system_tokens`` and ``tools_tokens``
    (recorded, priced by the replay's estimator), ``notes`` (recorded notes joined into the system prompt),
    ``tools`` (how many schemas), ``inferred`` (bool), ``inferred_tokens``, ``inferred_from`` (request numbers)
    and ``residuals`` (tokens per request used)."""
    if harness is None:
        return {
            "source": "none",
            "system_tokens": 0,
            "tools_tokens": 0,
            "notes": 0,
            "tools": 0,
            "inferred": False,
            "inferred_tokens": 0,
            "inferred_from": [],
            "residuals": [],
        }
    return {
        "source": harness.source,
        "system_tokens": counter.system(harness.system),
        "tools_tokens": counter.tools(harness.tools),
        "notes": harness.notes,
        "tools": len(harness.tools),
        "inferred": bool(harness.inferred_from),
        "inferred_tokens": harness.inferred_tokens,
        "inferred_from": list(harness.inferred_from),
        "residuals": list(harness.residuals),
    }


def event_position(seqs: list[int], seq: int | None) -> int | None:
    """The 1-based position in the session of its event ``seq`` (``seqs``: the session's seqs, ascending);
    ``None`` for ``None``; a seq between two events counts as the later one."""
    return None if seq is None else bisect.bisect_left(seqs, seq) + 1


def _rewrites(usages: list[Any]) -> dict[str, Any] | None:
    """``summary["cache_rewrites"]``: the transcript's own full-prefix cache rewrites
    (:func:`latch.accounting.pricing.cache_rewrites`), ``None`` when no request reported cache reads and writes."""
    found = pricing.cache_rewrites(usages)
    return found.as_dict() if found.requests else None
