"""``latch bench``'s runner: plan every (engine, session, budget) job, run each, collect the results.

A *job* is one (engine, session, budget). It runs in a worker process (a fresh one per job, so its
peak memory is its own: a local process pool, or a child process of a Dask worker with ``--scheduler``,
see :func:`run_bench`) on an in-memory store (a copy of a migrated empty one, made once per process): the
session is imported (a transcript through Latch's importers, or a generated scenario), then, like
``latch replay``, the engine materializes the view before every model request (every
:class:`~latch.events.AssistantMessage`; ``until_seq`` = the event before it) through its registered factory. Per
request it records:

* tokens sent: the view's total (the cost proxy) and a recount with the session's estimator;
* estimated cacheability: the tokens of the longest common line prefix with the previous request
  over the recount, on Latch's canonical serialization (:func:`latch.engine.units.request_lines`),
  the same measure for every engine (spec: "Context metrics");
* protocol validity: :func:`latch.engine.units.view_violations` plus the wire validators
  (:func:`latch.providers.validate_openai_chat`, :func:`latch.providers.validate_anthropic_messages`,
  :func:`latch.providers.validate_responses`, each view's bodies checked as far as they are new by
  :class:`latch.providers.WireCheck`);
* budget violations (total or recount above ``window - reserve``) and refusals
  (:class:`~latch.port.ContextOverflow`, never an over-budget request);
* materialize latency;
* cost in dollars (:func:`latch.accounting.pricing.view_cost`, the same genai-prices table as
  ``latch replay``): each view's recounted prompt priced cache-aware, its common prefix with the previous
  request of the same engine (the request loop's ``common_prefix_tokens``) at the cache-read rate and the
  rest at the cache-write rate (Anthropic) or the uncached rate (OpenAI, Gemini), plus the output tokens the
  transcript's usage reports for that request; per job the total (``cost_usd``, ``None`` when the model has no
  price), per request (``cost``), and the cache-read share (cache-read tokens over priced prompt tokens).

*Needles* (:mod:`latch.bench.needles`) are facts each session holds early on: for the generated scenario the planted
constraint, decision and exact diagnostic (:mod:`latch.bench.stress`); for a transcript, picked
deterministically from its first quarter (the first error line, the first file path a tool call
names, the first user request's opening words). At checkpoints after a needle's event (eight,
evenly spaced, and the last request) a needle *survives* when its text is in the view or the
engine's ``recall(needle)`` returns it.

*Needed-context coverage* (:mod:`latch.bench.coverage`, which states the rule and its blind spots): per
request, the identifiers (paths, dotted or snake_case symbols, ids) the real agent's next response used that
had appeared earlier in the raw history, and the fraction of them the view held verbatim; per job the
per-request series (``coverage``, ``None`` where nothing was needed) and the totals, per engine the pooled
fraction beside the cost.

Peak memory is the job's RSS high-water mark above the worker's RSS at the job's start (MB).
"""

from __future__ import annotations

import itertools
import os
import re
import resource
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, NamedTuple, cast

from .. import plugins
from ..accounting import pricing
from ..count_cache import counts_kept_in
from ..events import Usage
from ..host.ingest import available_importers, import_all, import_file, import_parsed
from ..host.loop import RequestLoop, build_engine, model_requests
from ..importers import TranscriptError, detect, parse_all_file
from ..importers.base import Importer, ParsedSession
from ..plugins import get_engine_factory
from ..port import ContextBudget, SessionContext
from ..providers import WireCheck
from ..records import dataclass
from ..store import EventStore
from .coverage import CoverageProbe, WorkingSetProbe, view_text
from .executor import Backend, run_tasks
from .needles import Needle, checkpoints, corpus_needles, survives
from .scenario import ScenarioModel
from .stress import CONSTRAINT, DECISION, DIAGNOSTIC, MODEL, SYSTEM_PROMPT, TOOLS, WORKSPACE, _plant, _screenshots

__all__ = [
    "Budget",
    "SessionSource",
    "parse_budgets",
    "discover_sessions",
    "container_sessions",
    "file_sessions",
    "SessionPart",
    "run_job",
    "check_plugins",
    "run_bench",
    "job_cost",
    "submission_order",
    "ENGINE_COST",
    "BYTES_PER_TOKEN",
    "VIEW_FREE_SHARE",
    "SCENARIO_EVENT_BYTES",
    "DEFAULT_BUDGETS",
    "SCENARIO_EVENTS",
]

DEFAULT_BUDGETS = "256k:32k:64k,32k:4k:8k"
SCENARIO_EVENTS = 3_000
SCENARIO_EVENT_BYTES = 4_000
"""A generated event's weight in transcript bytes for :func:`job_cost`: about a corpus event's (2 to 6 KB in the
corpus's long sessions; the scenario is shaped on the corpus), so the 3,000-event scenario's jobs, the longest of a
default run, go first."""
ENGINE_COST = {"continuity": 2.0}
"""Each engine's cost per job relative to an engine that only trims the history (1.0, also any engine not
listed): a ``continuity`` job also derives state, segments episodes and searches the archive (about twice a
``sliding-window`` job over the corpus at either default budget)."""
BYTES_PER_TOKEN = 4
"""Transcript bytes per token for :func:`job_cost` (JSON and tool output: about 4)."""
VIEW_FREE_SHARE = 0.25
"""The part of a job's cost that does not grow with its views (import, state, probes) in :func:`job_cost`, as a
share of its session's tokens."""


@dataclass(frozen=True)
class Budget:
    """A named :class:`~latch.port.ContextBudget` (tokens): ``window:reserve:recent``."""

    name: str
    context_window_tokens: int
    reserve_tokens: int
    recent_tokens: int

    def budget(self) -> ContextBudget:
        return ContextBudget(self.context_window_tokens, self.reserve_tokens, self.recent_tokens)


def _tokens(text: str, where: str) -> int:
    m = re.fullmatch(r"(\d+)([kKmM]?)", text.strip())
    if not m:
        raise ValueError(f"{where}: {text!r} is not a token count (e.g. 32000, 32k, 1m)")
    return int(m.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(2).lower()]


def parse_budgets(spec: str) -> list[Budget]:
    """``"256k:32k:64k,32k:4k:8k"`` → budgets (window:reserve:recent, tokens; ``k``/``m`` suffixes).

    ``ValueError`` naming the item for a malformed item, a reserve not below the window, or a
    recent budget above ``window - reserve``.
    """
    out = []
    for item in (s for s in spec.split(",") if s.strip()):
        parts = item.strip().split(":")
        if len(parts) != 3:
            raise ValueError(f"budget {item!r}: expected WINDOW:RESERVE:RECENT (e.g. 256k:32k:64k)")
        window, reserve, recent = (_tokens(p, f"budget {item!r}") for p in parts)
        if not 0 <= reserve < window or not 0 < recent <= window - reserve:
            raise ValueError(f"budget {item!r}: need reserve < window and 0 < recent <= window - reserve")
        out.append(Budget(item.strip(), window, reserve, recent))
    if not out:
        raise ValueError("no budget given")
    return out


@dataclass(frozen=True)
class SessionSource:
    """A session to bench: a transcript ``path`` or a generated scenario (``seed``, ``events``)."""

    name: str
    path: str | None = None
    seed: int | None = None
    events: int = 0
    session: str | None = None
    """For a file of several sessions (a Goose or OpenCode database, an Aider history): the ``external_key`` of
    the one to bench; ``None``: the file's only session (what ``latch import`` of the file takes)."""
    sessions_in_file: int = 1

    @property
    def weight(self) -> int:
        """The session's size in bytes: its file's share (a file of several sessions split evenly), or
        :data:`SCENARIO_EVENT_BYTES` per generated event (:func:`job_cost`)."""
        return os.path.getsize(self.path) // self.sessions_in_file if self.path else self.events * SCENARIO_EVENT_BYTES


def discover_sessions(
    corpus: str | os.PathLike[str] | None,
    examples: str | os.PathLike[str] | None = None,
    *,
    scenario_events: int = SCENARIO_EVENTS,
    scenario_seed: int = 0,
) -> list[SessionSource]:
    """Transcripts under ``corpus`` (README/FORMATS documents skipped), ``examples/*.jsonl``, and one
    generated scenario of ``scenario_events`` events (0: none). A file of several sessions is one source per
    session, named ``FILE#N`` (N from 1, in the file's order: :func:`container_sessions`). ``ValueError`` for a
    missing folder."""
    out: list[SessionSource] = []
    for root, pattern in ((corpus, "*"), (examples, "*.jsonl")):
        if root is None:
            continue
        base = Path(root)
        if not base.is_dir():
            raise ValueError(f"no such folder: {base}")
        for p in sorted(base.rglob(pattern)):
            if p.is_file() and p.name not in ("README.md", "FORMATS.md") and not p.name.startswith("."):
                name = str(p.relative_to(base))
                keys = container_sessions(p)
                out += [
                    SessionSource(name=f"{name}#{i}", path=str(p), session=k, sessions_in_file=len(keys))
                    for i, k in enumerate(keys, 1)
                ] or [SessionSource(name=name, path=str(p))]
    if scenario_events:
        out.append(
            SessionSource(
                name=f"scenario-{scenario_seed}-{scenario_events}", seed=scenario_seed, events=scenario_events
            )
        )
    return out


def container_sessions(path: str | os.PathLike[str]) -> list[str]:
    """The ``external_key`` of each session of ``path`` when its format's importer is a container
    (:meth:`~latch.importers.base.Importer.parse_all` overridden) and the file holds more than one; else ``[]``
    (an ordinary transcript, a one-session container, or a file that does not parse: its job reports that).
    Reads the sniff window of every file and parses containers only."""
    p = Path(path)
    importers = available_importers()
    try:
        with open(p, "rb") as f:
            head = f.read(65_536)  # the importers' sniff window (latch.importers.detect)
        importer = detect(p, head, importers)
    except (OSError, TranscriptError, RecursionError):
        return []
    if type(importer).parse_all is Importer.parse_all:
        return []
    try:
        keys = [s.external_key for s in file_sessions(p)]  # the importer detect() picked again
    except (OSError, TranscriptError, RecursionError):
        return []
    return keys if len(keys) > 1 else []


_PARSED: dict[tuple[str, str, int, int], list[ParsedSession]] = {}


def file_sessions(path: str | os.PathLike[str], format: str | None = None) -> list[ParsedSession]:
    """Every session of ``path`` as :func:`~latch.host.ingest.import_all` with ``final`` parses them (``format``:
    the importer's name, ``None``: detected), parsed once per process: kept while the file keeps its modification
    time and size. Raises :class:`~latch.importers.TranscriptError` like the parse; ``OSError`` for a file that
    cannot be read. The list and its sessions are shared: copy before changing them."""
    st = os.stat(path)
    key = (os.path.abspath(path), format or "", st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        _PARSED[key] = parse_all_file(Path(path), format, available_importers())
    return _PARSED[key]


class SessionPart(NamedTuple):
    """One session of a file of several, parsed by the caller (:func:`file_sessions`): the job imports only it.
    ``seqs_before``: the events of the file's sessions before it, whose seqs an import of the whole file gives
    first (the job's needles report their seqs as in that import)."""

    parsed: ParsedSession
    seqs_before: int


def session_part(source: SessionSource) -> SessionPart | None:
    """``source``'s session parsed from its file (:func:`file_sessions`, parsed once per process) with the events
    before it; ``None`` for a file of one session, a generated scenario, or a file that no longer parses or holds
    the session (the job then imports the whole file and reports why)."""
    if source.path is None or source.session is None:
        return None
    try:
        sessions = file_sessions(source.path)
    except (OSError, TranscriptError, RecursionError):
        return None
    before = 0
    for parsed in sessions:
        if parsed.external_key == source.session:
            return SessionPart(replace(parsed), before)
        before += len(parsed.events)
    return None


# ------------------------------------------------------------------------------------------ one job
def _load(
    store: EventStore, source: SessionSource, part: SessionPart | None = None
) -> tuple[str, str | None, list[Needle]]:
    """Import ``source`` into ``store`` (only ``part`` when given); return ``(session id, model, needles)``."""
    if source.path is not None:
        if source.session is None:
            sid, _, _ = import_file(store, source.path, final=True)
        elif part is not None:
            sid, _ = import_parsed(store, source.path, replace(part.parsed), final=True)
        else:
            found = [
                s
                for s, parsed, _ in import_all(store, source.path, final=True)
                if parsed.external_key == source.session
            ]
            if not found:
                raise ValueError(f"{source.path}: no longer holds session {source.session}")
            sid = found[0]
        events = list(store.events(sid))
        model = next((m for s in events if (m := getattr(s.event, "model", None))), None)
        return sid, model, corpus_needles(events)

    sid = store.create_session(
        external_key=source.name, workspace=WORKSPACE, format="claude-code", source="latch bench"
    )
    planted, diag_seq = _plant(store, sid)
    gen = ScenarioModel(source.seed or 0, workspace=WORKSPACE, images=_screenshots(store)).events()
    store.append(sid, list(itertools.islice(gen, source.events)))
    needles = [
        Needle("constraint", CONSTRAINT, planted[2]),
        Needle("decision", DECISION, planted[3]),
        Needle("diagnostic", DIAGNOSTIC, diag_seq),
    ]
    return sid, MODEL, needles


_store_template: bytes | None = None


def _memory_store() -> EventStore:
    """A job's in-memory store, a copy of a migrated empty one (:meth:`~latch.store.EventStore.serialize`) made once
    per process: the task server makes it in its warm-up job, so a job's store skips the migrations."""
    global _store_template
    if _store_template is None:  # this process's first job: its own new store, migrated once, is the template
        store = EventStore(":memory:")
        _store_template = store.serialize()
        return store
    return EventStore(":memory:", template=_store_template)


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run_job(
    engine_name: str,
    source: SessionSource,
    budget: Budget,
    estimator: str | None = None,
    config: Mapping[str, Any] | None = None,
    part: SessionPart | None = None,
    count_cache: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run one job (see the module docstring); a JSON-ready result with per-request series.

    ``part``: for a session of a file of several, that session already parsed (:func:`session_part`): the job
    imports it alone instead of parsing and importing every session of the file; the row is the same.
    ``count_cache``: a file of exact token counts (:func:`latch.count_cache.counts_kept_in`): an exact estimator's
    counts are looked up there first and the job's new ones added to it at its end, so a job whose texts were all
    counted before (by an earlier job, bench or command) never loads the tokenizer's vocabulary; the row is the
    same (``None``: the counts in use in this process, none in a task process).

    The engine, the estimator (``estimator`` forces a registered one; else the ``latch_select_estimator``
    hook's choice for the session's model) and ``config`` go through the host exactly as in ``latch
    replay`` (:func:`latch.host.loop.build_engine`), and every view through its request loop; the bench
    adds the wire-format validation and the needle probes."""
    if count_cache is not None:
        with counts_kept_in(count_cache):
            return run_job(engine_name, source, budget, estimator, config, part)
    try:
        rss0 = _rss_now_mb()
    except OSError:  # pragma: no cover - not Linux
        rss0 = None
    store = _memory_store()
    sid, model, needles = _load(store, source, part)
    events = list(store.events(sid))
    setup = build_engine(
        store, sid, stream=f"{engine_name}:bench", engine=engine_name, model=model, estimator=estimator, config=config
    )
    engine = setup.engine
    b = budget.budget()
    hard = b.hard_limit_tokens
    loop = RequestLoop(
        store,
        sid,
        setup,
        b,
        session_context=SessionContext(workspace=store.session(sid).workspace),
        system_prompt=SYSTEM_PROMPT,
        tools=TOOLS,
    )
    requests = model_requests(events)
    checkpoints_at = checkpoints(len(requests))

    tokens: list[int | None] = []
    cache: list[float | None] = []
    seconds: list[float] = []
    invalid: list[str] = []
    over: list[str] = []
    survival: dict[str, list[bool]] = {n.label: [] for n in needles}
    costs: list[float | None] = []
    priced = pricing.CostTotals()
    probe = CoverageProbe(events)
    working = WorkingSetProbe(events)
    by_seq = {s.seq: s.event for s in events}
    coverage: list[float | None] = []
    counts: list[list[int] | None] = []  # per request: [needed, present] (None: refused or nothing needed)
    needed_total = present_total = 0
    touched_total = named_total = 0
    view_caching: list[Usage] = []  # each view's cache read (its common prefix) and cache write (the rest)
    last_view = None
    wire = WireCheck(model=model or "unknown", max_tokens=max(1, b.reserve_tokens))
    for k, res in enumerate(loop.replay(requests)):
        seconds.append(res.seconds)
        view = res.view
        if view is None:
            tokens.append(None)
            cache.append(None)
            costs.append(None)
            coverage.append(None)
            counts.append(None)
            continue
        req = res.request
        would = pricing.view_cost(
            res.recounted_tokens or 0,
            res.common_prefix_tokens,
            req.usage.output_tokens if req is not None and req.usage is not None else None,
            (req.model if req is not None else None) or model,
            at=pricing.parse_timestamp(req.ts if req is not None else None),
        )
        priced.add(would)
        costs.append(pricing.usd(would.usd) if would is not None else None)
        last_view = view
        sent = res.recounted_tokens or 0
        view_caching.append(
            Usage(
                input_tokens=0,
                output_tokens=0,
                cache_read_tokens=res.common_prefix_tokens,
                cache_write_tokens=max(0, sent - res.common_prefix_tokens),
            )
        )
        until_seq = cast(int, res.until_seq)  # a replayed request's (ModelRequest.until_seq)
        text = view_text(view)  # once, for both probes
        touched, named = working.score(view, until_seq, text=text)
        touched_total, named_total = touched_total + touched, named_total + named
        if req is not None and req.seq in by_seq:
            needed, present = probe.score(by_seq[req.seq], view, until_seq, text=text)
            needed_total, present_total = needed_total + needed, present_total + present
            coverage.append(_round(present / needed) if needed else None)
            counts.append([needed, present])
        else:
            coverage.append(None)
            counts.append([0, 0])
        tokens.append(view.tokens.total_tokens)
        cache.append(res.cacheability)
        where = f"request {k + 1}"
        if res.budget_violations:
            over.append(f"{where}: {max(view.tokens.total_tokens, res.recounted_tokens or 0)} > {hard}")
        problems = [v.split(": ", 1)[1] for v in res.protocol_violations]
        problems += wire.problems(view)
        if problems:
            invalid.append(f"{where}: {problems[0]}")
        if k in checkpoints_at:
            for n in needles:
                if n.seq <= until_seq:
                    survival[n.label].append(survives(engine, view, n, until_seq))
    store.close()
    rewrites = pricing.cache_rewrites(view_caching)  # the views' own full-prefix rewrites, as a transcript's
    peak = None
    if rss0 is not None:
        peak = max(0.0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss0)
    return {
        "engine": engine_name,
        "session": source.name,
        "budget": budget.name,
        "model": model,
        "estimator": setup.estimator_name,
        "events": len(events),
        "requests": len(requests),
        "hard_limit_tokens": hard,
        "tokens": tokens,
        "cacheability": cache,
        "seconds": seconds,
        "protocol_invalid": invalid,
        "budget_violations": over,
        "refused": loop.overflows,
        "needles": [asdict(replace(n, seq=n.seq + part.seqs_before)) if part else asdict(n) for n in needles],
        "survival": {label: [sum(v), len(v)] for label, v in survival.items()},
        "final_view_messages": len(last_view.messages) if last_view is not None else 0,
        "coverage": coverage,
        "coverage_counts": counts,
        "coverage_needed": needed_total,
        "coverage_present": present_total,
        "working_set_touched": touched_total,
        "working_set_named": named_total,
        "cache_write_tokens": rewrites.write_tokens,
        "rewrite_write_tokens": rewrites.rewrite_write_tokens,
        "cost": costs,
        "cost_usd": pricing.usd(priced.usd),
        "cost_cache_read_tokens": priced.cache_read,
        "cost_input_tokens": priced.input_tokens,
        "cost_output_tokens": priced.output,
        "cache_read_share": _round(priced.cache_read_share),
        "priced_model": max(priced.models, key=lambda m: priced.models[m].priced) if priced.models else None,
        "peak_mb": round(peak, 1) if peak is not None else None,
    }


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


# ------------------------------------------------------------------------------------------ all jobs
def job_cost(engine: str, source: SessionSource, budget: Budget) -> float:
    """A job's estimated cost before it runs (arbitrary units; only the order of two jobs' costs means anything):
    its session's size in bytes (:attr:`SessionSource.weight`) × the engine's relative cost (:data:`ENGINE_COST`)
    × ``VIEW_FREE_SHARE + v / T``, where ``T`` is the session's tokens (its bytes over :data:`BYTES_PER_TOKEN`)
    and ``v`` the mean view a request sends while the history grows evenly to ``T``, capped at the budget's hard
    limit ``h``: ``h - h² / 2T`` when ``h < T``, else ``T / 2`` (a bigger window sends more of a long session
    per request)."""
    size = source.weight
    total = max(1.0, size / BYTES_PER_TOKEN)
    hard = budget.budget().hard_limit_tokens
    mean_view = hard - hard * hard / (2 * total) if hard < total else total / 2
    return size * ENGINE_COST.get(engine, 1.0) * (VIEW_FREE_SHARE + mean_view / total)


def submission_order(plan: Sequence[tuple[str, SessionSource, Budget]]) -> list[int]:
    """The indices of ``plan``'s ``(engine, session, budget)`` jobs in the order :func:`run_bench` submits them:
    the costliest first by :func:`job_cost` (longest-processing-time first: no long job starts last, when the
    other workers are idle), ties in plan order."""
    costs = [job_cost(e, s, b) for e, s, b in plan]
    return sorted(range(len(plan)), key=lambda i: -costs[i])


def check_plugins(engines: Sequence[str], estimator: str | None = None) -> None:
    """:class:`latch.plugins.PluginError` for an unknown engine of ``engines`` or an unknown ``estimator``."""
    for name in engines:
        get_engine_factory(name)
    if estimator is not None:
        plugins.get_estimator(estimator)


def run_bench(
    engines: Sequence[str],
    sessions: Sequence[SessionSource],
    budgets: Sequence[Budget],
    *,
    jobs: int = 2,
    progress: Callable[[int, int], None] | None = None,
    estimator: str | None = None,
    config: Mapping[str, Any] | None = None,
    scheduler: str | None = None,
    backend: Backend | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    count_cache: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Every (engine, session, budget) job, each in a fresh process; results in (engine, session, budget) order.

    The jobs run through :func:`latch.bench.executor.run_tasks`, the costliest first (:func:`submission_order`;
    the rows keep the plan's order whatever the order they finish in): locally
    (``scheduler=None``) in a process pool of ``jobs`` workers; with ``scheduler`` (``tcp://HOST:PORT`` of a
    running ``dask scheduler``, or ``local:N`` for a local Dask cluster of N workers) as Dask tasks through
    ``Client.get_executor()``, each in its own child process of the worker: the rows are the same as a local
    run's (timings and peak memory aside); a job whose worker is lost is re-run by the scheduler on another
    worker, and each job is counted once (its row is keyed by its place in the plan). A job that fails is its
    ``{"engine", "session", "budget", "error"}`` row. ``estimator`` (a registered estimator name) forces the
    estimator of every job, else each session's model picks it through the ``latch_select_estimator`` hook;
    ``config`` is Latch's configuration for every engine. Unknown engines or estimators raise
    :class:`latch.plugins.PluginError` before anything runs; an unusable scheduler raises
    :class:`~latch.bench.executor.SchedulerError`. ``backend``: an open :class:`~latch.bench.executor.Backend` to
    run on instead (its workers and scheduler; the caller closes it). ``on_row(row)``: each job's row as it
    finishes (e.g. :meth:`latch.bench.plots.Plotter.watch`, drawing a session's panel once its jobs are done).
    ``count_cache``: the file of exact token counts every job reads and adds to (:func:`run_job`; a path the
    workers reach: ``latch bench`` passes its own for a local run), ``None`` for none."""
    check_plugins(engines, estimator)
    plan = [(e, s, b) for e in engines for s in sessions for b in budgets]
    parts = {s.name: session_part(s) for s in sessions}  # a file of several sessions parsed once, not per job
    counts = os.fspath(count_cache) if count_cache is not None else None
    tasks = [
        (
            {"engine": e, "session": s.name, "budget": b.name},
            (e, s, b, estimator, dict(config or {}), parts[s.name], counts),
        )
        for e, s, b in plan
    ]
    return run_tasks(
        run_job,
        tasks,
        jobs=jobs,
        scheduler=scheduler,
        order=submission_order(plan),
        progress=progress,
        backend=backend,
        on_result=(lambda _, row: on_row(row)) if on_row is not None else None,
    )
