"""Replay as a host service: the plan of a replay of one stored session (engine, checked budget, harness and the
one request loop), without the CLI. ``latch replay``, ``latch view``, ``latch context`` and the web's replay page
build on :func:`plan_replay`; errors are :class:`~latch.host.loop.HostError` (one line).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import model_window
from ..port import SessionContext
from ..store import EventStore
from .harness import session_harness
from .ingest import import_file
from .loop import HostError, RequestLoop, build_engine, model_requests

__all__ = ["Replay", "ReplayPlan", "replay", "plan_replay", "run_budget", "window_origin", "budget_problem"]


def budget_problem(window_tokens: int, reserve_tokens: int, window: int | None, reserve: int | None,
                   origin: str = "") -> None:
    """Raise :class:`~latch.host.loop.HostError` naming the option at fault when the reserve (``reserve_tokens``) is not below
    the window (``window_tokens``); ``window``/``reserve`` are the ``--window``/``--reserve`` values (``None``:
    not given), ``origin`` says where a default came from (e.g. `` for model gpt-4o``)."""
    if reserve_tokens < window_tokens:
        return
    if reserve is not None and window is not None:
        raise HostError(f"--reserve ({reserve}) must be below --window ({window})")
    if reserve is not None:
        raise HostError(f"--reserve ({reserve:,}) must be below the window of {window_tokens:,} tokens"
                               f"{origin}; pass a larger --window")
    if window is not None:
        raise HostError(f"--window must exceed the default reserve of {reserve_tokens:,}{origin}; "
                               "pass --reserve")
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


def run_budget(store: Any, session_id: str) -> dict[str, int]:
    """The budget options a ``latch run`` session was started with: ``{"window", "reserve", "recent"}`` (tokens;
    only the ones its run set), read from the session's profile (``meta["agent"]``, the same record ``latch run
    --resume`` reads back); ``{}`` for an imported session or a run that set none of them."""
    profile = (store.session(session_id).meta or {}).get("agent") or {}
    if not isinstance(profile, Mapping):
        return {}
    return {k: int(v) for k in ("window", "reserve", "recent")
            if isinstance(v := profile.get(k), int) and not isinstance(v, bool)}


def window_origin(config: Mapping[str, Any], model: str | None, window: int, flag: int | None) -> tuple[str, str | None]:
    """``(window_source, window_entry)`` of a budget whose window is ``window`` tokens (see :class:`ReplayPlan`);
    ``flag`` is the ``--window`` value (``None``: not given)."""
    if flag is not None:
        return "--window", None
    chosen = model_window(config, model)
    if chosen.context_window_tokens != window:
        return "engine", None
    return chosen.source, chosen.entry


def plan_replay(store: Any, session_id: str, *, engine: str | None = None, model: str | None = None,
                estimator: str | None = None, config: Mapping[str, Any] | None = None, window: int | None = None,
                reserve: int | None = None, recent: int | None = None, scratch: bool = True,
                harness: bool = True, overlay_main: bool = False) -> ReplayPlan:
    """Build the engine (stream ``<engine>:replay-<id>``, a run of the replay scratch database unless
    ``scratch`` is false; with ``overlay_main``, the session's own ``<engine>:main`` stream seen through an
    in-memory overlay that writes nothing: :class:`~latch.host.session.OverlayKernelWriter`, for a read-only
    report of the next view), the budget and the request loop of a replay of ``session_id`` (options as
    :func:`latch.commands.replay.run_replay`). The loop sends the session's harness prompt and tools (:func:`latch.host.harness.
    session_harness`: recorded ones as the request's system and tools, else the overhead inferred from provider
    usage as ``harness_tokens``) with every request; ``harness=False`` replays the conversation alone
    (``ReplayPlan.harness`` is then ``None``). Raises :class:`~latch.host.loop.HostError` (one line) for an
    unknown engine or estimator or a reserve not below the window."""
    config = dict(config or {})
    replay_id = uuid.uuid4().hex[:12]
    suffix = "main" if overlay_main else f"replay-{replay_id}"
    setup = build_engine(store, session_id, stream=lambda name: f"{name}:{suffix}", engine=engine,
                         model=model, estimator=estimator, config=config, scratch=scratch and not overlay_main,
                         overlay=overlay_main)
    budget = setup.engine.default_budget()
    # a `latch run` session: each budget option not given is the one its run was started with (as `latch run
    # --resume` reads them back), not the default budget
    # (its reserve only with its window: a --window of this command pairs with the default reserve)
    recorded = run_budget(store, session_id) if window is None else {}
    overrides = {k: v for k, v in (("context_window_tokens", recorded.get("window")),
                                   ("reserve_tokens", recorded.get("reserve")),
                                   ("recent_tokens", recorded.get("recent")),
                                   ("context_window_tokens", window), ("reserve_tokens", reserve),
                                   ("recent_tokens", recent)) if v is not None}
    merged = {"context_window_tokens": budget.context_window_tokens, "reserve_tokens": budget.reserve_tokens,
              **overrides}
    budget_problem(merged["context_window_tokens"], merged["reserve_tokens"], window, reserve,
                   " (the budget of the session's `latch run`)" if recorded else "")
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
    loop = RequestLoop(store, session_id, setup, budget, session_context=context,
                       system_prompt=prompt.system if prompt else "", tools=prompt.tools if prompt else (),
                       harness_tokens=prompt.inferred_tokens if prompt else 0)
    return ReplayPlan(setup, budget, requested_recent, source, entry, requests, loop, prompt,
                      [s.seq for s in events])


@dataclass
class Replay:
    """The outcome of :func:`replay`: the ``session_id`` in ``store``, the ``plan`` (engine, budget, harness) and
    one :class:`~latch.host.loop.RequestResult` per model request of the transcript, in order (``results``)."""

    store: Any
    session_id: str
    plan: ReplayPlan
    results: list[Any]

    @property
    def violations(self) -> list[str]:
        """Every violation line of every request (empty: every view held every invariant)."""
        return [v for r in self.results for v in r.violations]


def replay(source: str | os.PathLike[str], *, store: Any = None, format: str | None = None,
           **options: Any) -> Replay:
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


def _stored(store: Any, session_id: str) -> str | None:
    """The full id of the session ``session_id`` names in ``store`` (an id or a unique prefix), else ``None``."""
    try:
        return str(store.session(session_id).id)
    except (KeyError, ValueError):
        return None
