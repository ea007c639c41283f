"""``latch bench``: every engine over every session under every budget, side by side.

A *job* is one (engine, session, budget). It runs in a worker process (a fresh one per job, so its
peak memory is its own: a local process pool, or a child process of a Dask worker with ``--scheduler``,
see :func:`run_bench`) on an in-memory store: the session is imported (a transcript through
Latch's importers, or a generated scenario), then, like ``latch replay``, the engine materializes
the view before every model request (every :class:`~latch.events.AssistantMessage`; ``until_seq``
= the event before it) through its registered factory. Per request it records:

* tokens sent: the view's total (the cost proxy) and a recount with the session's estimator;
* estimated cacheability: the tokens of the longest common line prefix with the previous request
  over the recount, on Latch's canonical serialization (:func:`latch.engine.units.request_lines`),
  the same measure for every engine (spec: "Context metrics");
* protocol validity: :func:`latch.engine.units.view_violations` plus the wire validators
  (:func:`latch.providers.validate_openai_chat`, :func:`latch.providers.validate_anthropic_messages`,
  :func:`latch.providers.validate_responses`);
* budget violations (total or recount above ``window - reserve``) and refusals
  (:class:`~latch.port.ContextOverflow`, never an over-budget request);
* materialize latency;
* cost in dollars (:func:`latch.accounting.pricing.view_cost`, the same genai-prices table as
  ``latch replay``): each view's recounted prompt priced cache-aware, its common prefix with the previous
  request of the same engine (the request loop's ``common_prefix_tokens``) at the cache-read rate and the
  rest at the cache-write rate (Anthropic) or the uncached rate (OpenAI, Gemini), plus the output tokens the
  transcript's usage reports for that request; per job the total (``cost_usd``, ``None`` when the model has no
  price), per request (``cost``), and the cache-read share (cache-read tokens over priced prompt tokens).

*Needles* are facts each session holds early on: for the generated scenario the planted
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
import math
import os
import re
import resource
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import plugins
from ..accounting import pricing
from ..events import AssistantMessage, ToolCall, ToolResult, Usage, UserMessage
from ..host.ingest import available_importers, import_all, import_file
from ..host.loop import RequestLoop, build_engine, model_requests
from ..importers import TranscriptError, detect, parse_all_file
from ..importers.base import Importer
from ..plugins import get_engine_factory
from ..port import ContextBudget, SessionContext
from ..providers import (
    to_anthropic_messages,
    to_openai_chat,
    to_responses,
    validate_anthropic_messages,
    validate_openai_chat,
    validate_responses,
)
from ..store import EventStore
from ..textsafe import atomic_path, dumps, write_text
from .coverage import CoverageProbe, WorkingSetProbe, view_text
from .executor import SchedulerError, run_tasks
from .scenario import ScenarioModel
from .stress import CONSTRAINT, DECISION, DIAGNOSTIC, MODEL, SYSTEM_PROMPT, TOOLS, WORKSPACE, _plant, _screenshots

__all__ = ["Budget", "SessionSource", "Needle", "FRONTIER_MARKERS", "frontier_points", "frontier_order",
           "parse_budgets", "discover_sessions", "container_sessions", "run_job", "run_bench",
           "summarize", "write_report", "cost_table", "DEFAULT_BUDGETS", "CHECKPOINTS",
           "SchedulerError", "engine_plot", "write_plot"]

DEFAULT_BUDGETS = "256k:32k:64k,32k:4k:8k"
CHECKPOINTS = 8
SCENARIO_EVENTS = 3_000


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
        """Rough cost, to start the biggest jobs first."""
        return os.path.getsize(self.path) // self.sessions_in_file if self.path else self.events * 1000


@dataclass(frozen=True)
class Needle:
    """A fact held by event ``seq``: ``text`` must stay visible or recallable."""

    label: str
    text: str
    seq: int


def discover_sessions(corpus: str | os.PathLike[str] | None, examples: str | os.PathLike[str] | None = None, *,
                      scenario_events: int = SCENARIO_EVENTS, scenario_seed: int = 0) -> list[SessionSource]:
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
                out += ([SessionSource(name=f"{name}#{i}", path=str(p), session=k, sessions_in_file=len(keys))
                         for i, k in enumerate(keys, 1)] or [SessionSource(name=name, path=str(p))])
    if scenario_events:
        out.append(SessionSource(name=f"scenario-{scenario_seed}-{scenario_events}", seed=scenario_seed,
                                 events=scenario_events))
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
        keys = [s.external_key for s in parse_all_file(p, importer.PLUGIN_NAME, importers)]
    except TranscriptError:
        return []
    return keys if len(keys) > 1 else []


# ------------------------------------------------------------------------------------------ one job
def _load(store: Any, source: SessionSource) -> tuple[str, str | None, list[Needle]]:
    """Import ``source`` into ``store``; return ``(session id, model, needles)``."""
    if source.path is not None:
        if source.session is None:
            sid, _, _ = import_file(store, source.path, final=True)
        else:
            found = [s for s, parsed, _ in import_all(store, source.path, final=True)
                     if parsed.external_key == source.session]
            if not found:
                raise ValueError(f"{source.path}: no longer holds session {source.session}")
            sid = found[0]
        events = list(store.events(sid))
        model = next((m for s in events if (m := getattr(s.event, "model", None))), None)
        return sid, model, corpus_needles(events)

    sid = store.create_session(external_key=source.name, workspace=WORKSPACE, format="claude-code",
                               source="latch bench")
    planted, diag_seq = _plant(store, sid)
    gen = ScenarioModel(source.seed or 0, workspace=WORKSPACE, images=_screenshots(store)).events()
    store.append(sid, list(itertools.islice(gen, source.events)))
    needles = [Needle("constraint", CONSTRAINT, planted[2]), Needle("decision", DECISION, planted[3]),
               Needle("diagnostic", DIAGNOSTIC, diag_seq)]
    return sid, MODEL, needles


_ERRORISH = re.compile(r"error|fail|exception|traceback|not found|denied|invalid|cannot|panic", re.I)


def corpus_needles(events: Sequence[Any]) -> list[Needle]:
    """Needles of a transcript, from its first quarter, in a fixed order: the first error line said only once
    in the session, the first file path a tool call names, the first line of the first user request (at
    most 80 characters, cut at a word)."""
    early = events[:max(1, len(events) // 4)]
    texts = [s.event.searchable_text() for s in events]
    out: list[Needle] = []
    for s in early:
        e = s.event
        if isinstance(e, ToolResult) and e.is_error and not e.missing:
            lines = [ln.strip() for ln in e.content.splitlines() if 12 <= len(ln.strip()) <= 160]
            unique = [ln for ln in lines if sum(ln in t for t in texts) == 1]  # said once: a real needle
            line = next((ln for ln in unique if _ERRORISH.search(ln)), unique[0] if unique else None)
            if line:
                out.append(Needle("error line", line, s.seq))
                break
    path = next(((p, s.seq) for s in early if isinstance(s.event, AssistantMessage)
                 for c in s.event.tool_calls if (p := _call_path(c))), None)
    if path:
        out.append(Needle("file path", *path))
    for s in early:
        e = s.event
        if isinstance(e, UserMessage) and not e.is_meta:
            line = next((ln.strip() for ln in e.text.splitlines() if len(ln.strip()) >= 12), "")
            words = line if len(line) <= 80 else line[:80].rsplit(" ", 1)[0]
            if len(words) >= 12:
                out.append(Needle("user request", words, s.seq))
                break
    return out


def _call_path(call: ToolCall) -> str | None:
    """The first path of :meth:`ToolCall.paths` with a ``/`` in it, shorter than 200 characters."""
    return next((p for p in call.paths() if "/" in p and len(p) < 200), None)


def _visible(view: Any, text: str) -> bool:
    for m in view.messages:
        if text in m.content or any(text in c.arguments for c in m.tool_calls):
            return True
    return False


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run_job(engine_name: str, source: SessionSource, budget: Budget, estimator: str | None = None,
            config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run one job (see the module docstring); a JSON-ready result with per-request series.

    The engine, the estimator (``estimator`` forces a registered one; else the ``latch_select_estimator``
    hook's choice for the session's model) and ``config`` go through the host exactly as in ``latch
    replay`` (:func:`latch.host.loop.build_engine`), and every view through its request loop; the bench
    adds the wire-format validation and the needle probes."""
    try:
        rss0 = _rss_now_mb()
    except OSError:  # pragma: no cover - not Linux
        rss0 = None
    store = EventStore(":memory:")
    sid, model, needles = _load(store, source)
    events = list(store.events(sid))
    setup = build_engine(store, sid, stream=f"{engine_name}:bench", engine=engine_name, model=model,
                         estimator=estimator, config=config)
    engine = setup.engine
    b = budget.budget()
    hard = b.hard_limit_tokens
    loop = RequestLoop(store, sid, setup, b, session_context=SessionContext(workspace=store.session(sid).workspace),
                       system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    requests = model_requests(events)
    checkpoints = _checkpoints(len(requests))

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
        would = pricing.view_cost(res.recounted_tokens or 0, res.common_prefix_tokens,
                                  req.usage.output_tokens if req is not None and req.usage is not None else None,
                                  (req.model if req is not None else None) or model,
                                  at=pricing.parse_timestamp(req.ts if req is not None else None))
        priced.add(would)
        costs.append(pricing.usd(would.usd) if would is not None else None)
        last_view = view
        sent = res.recounted_tokens or 0
        view_caching.append(Usage(input_tokens=0, output_tokens=0, cache_read_tokens=res.common_prefix_tokens,
                                  cache_write_tokens=max(0, sent - res.common_prefix_tokens)))
        text = view_text(view)  # once, for both probes
        touched, named = working.score(view, res.until_seq, text=text)
        touched_total, named_total = touched_total + touched, named_total + named
        if req is not None and req.seq in by_seq:
            needed, present = probe.score(by_seq[req.seq], view, res.until_seq, text=text)
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
        problems += validate_openai_chat(to_openai_chat(view))
        problems += validate_anthropic_messages(to_anthropic_messages(view, max_tokens=max(1, b.reserve_tokens)))
        problems += validate_responses(to_responses(view, model=model or "unknown"))
        if problems:
            invalid.append(f"{where}: {problems[0]}")
        if k in checkpoints:
            for n in needles:
                if n.seq <= res.until_seq:
                    survival[n.label].append(_survives(engine, view, n, res.until_seq))
    store.close()
    rewrites = pricing.cache_rewrites(view_caching)  # the views' own full-prefix rewrites, as a transcript's
    peak = None
    if rss0 is not None:
        peak = max(0.0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss0)
    return {
        "engine": engine_name, "session": source.name, "budget": budget.name, "model": model,
        "estimator": setup.estimator_name,
        "events": len(events), "requests": len(requests), "hard_limit_tokens": hard,
        "tokens": tokens, "cacheability": cache, "seconds": seconds,
        "protocol_invalid": invalid, "budget_violations": over, "refused": loop.overflows,
        "needles": [asdict(n) for n in needles],
        "survival": {label: [sum(v), len(v)] for label, v in survival.items()},
        "final_view_messages": len(last_view.messages) if last_view is not None else 0,
        "coverage": coverage, "coverage_counts": counts, "coverage_needed": needed_total,
        "coverage_present": present_total,
        "working_set_touched": touched_total, "working_set_named": named_total,
        "cache_write_tokens": rewrites.write_tokens, "rewrite_write_tokens": rewrites.rewrite_write_tokens,
        "cost": costs, "cost_usd": pricing.usd(priced.usd),
        "cost_cache_read_tokens": priced.cache_read, "cost_input_tokens": priced.input_tokens,
        "cost_output_tokens": priced.output, "cache_read_share": _round(priced.cache_read_share),
        "priced_model": max(priced.models, key=lambda m: priced.models[m].priced) if priced.models else None,
        "peak_mb": round(peak, 1) if peak is not None else None,
    }


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


def _checkpoints(n: int) -> set[int]:
    if n == 0:
        return set()
    return {min(n - 1, (n * i) // CHECKPOINTS) for i in range(1, CHECKPOINTS)} | {n - 1}


def _survives(engine: Any, view: Any, needle: Needle, until: int) -> bool:
    if _visible(view, needle.text):
        return True
    try:
        found = engine.recall(needle.text, until_seq=until)
    except Exception:  # noqa: BLE001 - an engine whose recall fails loses the needle, the bench goes on
        return False
    return any(needle.text in r.text for r in found)


# ------------------------------------------------------------------------------------------ all jobs
def run_bench(engines: Sequence[str], sessions: Sequence[SessionSource], budgets: Sequence[Budget], *,
              jobs: int = 2, progress: Callable[[int, int], None] | None = None, estimator: str | None = None,
              config: Mapping[str, Any] | None = None, scheduler: str | None = None) -> list[dict[str, Any]]:
    """Every (engine, session, budget) job, each in a fresh process; results in (engine, session, budget) order.

    The jobs run through :func:`latch.bench.executor.run_tasks`, the biggest sessions first: locally
    (``scheduler=None``) in a process pool of ``jobs`` workers; with ``scheduler`` (``tcp://HOST:PORT`` of a
    running ``dask scheduler``, or ``local:N`` for a local Dask cluster of N workers) as Dask tasks through
    ``Client.get_executor()``, each in its own child process of the worker: the rows are the same as a local
    run's (timings and peak memory aside); a job whose worker is lost is re-run by the scheduler on another
    worker, and each job is counted once (its row is keyed by its place in the plan). A job that fails is its
    ``{"engine", "session", "budget", "error"}`` row. ``estimator`` (a registered estimator name) forces the
    estimator of every job, else each session's model picks it through the ``latch_select_estimator`` hook;
    ``config`` is Latch's configuration for every engine. Unknown engines or estimators raise
    :class:`latch.plugins.PluginError` before anything runs; an unusable scheduler raises
    :class:`~latch.bench.executor.SchedulerError`."""
    for name in engines:
        get_engine_factory(name)
    if estimator is not None:
        plugins.get_estimator(estimator)
    plan = [(e, s, b) for e in engines for s in sessions for b in budgets]
    tasks = [({"engine": e, "session": s.name, "budget": b.name}, (e, s, b, estimator, dict(config or {})))
             for e, s, b in plan]
    order = sorted(range(len(plan)), key=lambda i: -plan[i][1].weight)
    return run_tasks(run_job, tasks, jobs=jobs, scheduler=scheduler, order=order, progress=progress)


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def summarize(results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (engine, budget): the figures of the report table (see the module docstring), in
    :func:`frontier_order`."""
    results = list(results)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["engine"], r["budget"]), []).append(r)
    answered = _answered_by_all(results)
    rows = []
    for (engine, budget), rs in groups.items():
        ok = [r for r in rs if "error" not in r]
        same_needed = same_present = 0
        same_usd: float | None = None
        same_requests = 0
        for r in ok:
            common = answered.get((budget, r["session"]), set())
            same_requests += len(common)
            for i in common:
                c = (r.get("coverage_counts") or [None] * (i + 1))[i]
                if c is not None:
                    same_needed, same_present = same_needed + c[0], same_present + c[1]
                usd = r["cost"][i]
                if usd is not None:
                    same_usd = (same_usd or 0.0) + usd
        toks = [t for r in ok for t in r["tokens"] if t is not None]
        cache = [c for r in ok for c in r["cacheability"] if c is not None]
        secs = [s for r in ok for s in r["seconds"]]
        got = sum(r["survival"][k][0] for r in ok for k in r["survival"])
        checked = sum(r["survival"][k][1] for r in ok for k in r["survival"])
        peaks = [r["peak_mb"] for r in ok if r.get("peak_mb") is not None]
        needed_present = (sum(r.get("coverage_needed", 0) for r in ok), sum(r.get("coverage_present", 0) for r in ok))
        touched = sum(r.get("working_set_touched", 0) for r in ok)
        written = sum(r.get("cache_write_tokens", 0) for r in ok)
        paid = [r for r in ok if r.get("cost_usd") is not None]
        usd_total = sum(r["cost_usd"] for r in paid) if paid else None
        reads = sum(r["cost_cache_read_tokens"] for r in paid)
        prompt = sum(r["cost_input_tokens"] for r in paid)
        rows.append({
            "engine": engine, "budget": budget,
            "estimators": ", ".join(sorted({r["estimator"] for r in ok if r.get("estimator")})) or None,
            "sessions": len(ok), "errors": len(rs) - len(ok),
            "requests": sum(r["requests"] for r in ok),
            "tokens_per_request": round(statistics.fmean(toks)) if toks else None,
            "tokens_total": sum(toks),
            "cacheability_median": round(statistics.median(cache), 3) if cache else None,
            "cacheability_p10": round(_pct(cache, 0.10), 3) if cache else None,
            "needle_survival": round(got / checked, 3) if checked else None,
            "needle_checks": checked,
            "coverage": round(needed_present[1] / needed_present[0], 3) if needed_present[0] else None,
            "coverage_needed": needed_present[0],
            "same_requests": same_requests,
            "coverage_same_requests": round(same_present / same_needed, 3) if same_needed else None,
            "cost_usd_same_requests": round(same_usd, 6) if same_usd is not None else None,
            "working_set_coverage": round(sum(r.get("working_set_named", 0) for r in ok) / touched, 3)
            if touched else None,
            "rewrite_waste": round(sum(r.get("rewrite_write_tokens", 0) for r in ok) / written, 3) if written else None,
            "tokens_per_session": round(sum(toks) / len(ok)) if ok else None,
            "protocol_invalid": sum(len(r["protocol_invalid"]) for r in ok),
            "budget_violations": sum(len(r["budget_violations"]) for r in ok),
            "refused": sum(r["refused"] for r in ok),
            "materialize_p50_ms": round(1000 * _pct(secs, 0.5), 2) if secs else None,
            "materialize_p99_ms": round(1000 * _pct(secs, 0.99), 2) if secs else None,
            "peak_mb": max(peaks) if peaks else None,
            "cost_usd_total": round(usd_total, 6) if usd_total is not None else None,
            "cost_usd_per_session": round(usd_total / len(paid), 6) if usd_total is not None else None,
            "cache_read_share": round(reads / prompt, 4) if prompt else None,
            "priced_sessions": len(paid),
        })
    return frontier_order(rows, results)


def _answered_by_all(results: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], set[int]]:
    """``{(budget, session): request indices every engine's view answered}``: the like-for-like request set of a
    budget (a request one engine refused counts for none), over the sessions every engine ran without error."""
    runs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    engines: dict[str, set[str]] = {}
    for r in results:
        engines.setdefault(r["budget"], set()).add(r["engine"])
        if "error" not in r:
            runs.setdefault((r["budget"], r["session"]), []).append(r)
    out = {}
    for (budget, session), rs in runs.items():
        if {r["engine"] for r in rs} != engines[budget]:
            continue
        n = min(len(r["tokens"]) for r in rs)
        out[(budget, session)] = {i for i in range(n) if all(r["tokens"][i] is not None for r in rs)}
    return out


def frontier_order(rows: list[dict[str, Any]], results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (:func:`summarize`) with ``"frontier"`` set and sorted by it, budget by budget (in the order the
    budgets first appear): the cost-vs-coverage frontier's rows (:func:`frontier_points`: ``"yes"``) cheapest
    first, then the dominated ones (``"no"``), then those that refused more requests than the fewest any engine
    refused at that budget (``"refuses"``), then the
    unpriced or uncovered (``None``), each group by total dollars then engine."""
    points = {(p["engine"], p["budget"]): p for p in frontier_points(list(results))}
    order = {b: i for i, b in enumerate(dict.fromkeys(r["budget"] for r in rows))}
    rank = {"yes": 0, "no": 1, "refuses": 2, None: 3}
    for r in rows:
        p = points.get((r["engine"], r["budget"]))
        r["frontier"] = None if p is None else "yes" if p["pareto"] else "refuses" if p["refuses_more"] else "no"
    return sorted(rows, key=lambda r: (order[r["budget"]], rank[r["frontier"]],
                                       r["cost_usd_total"] if r["cost_usd_total"] is not None else math.inf,
                                       r["engine"]))


_COLUMNS = (("engine", "engine"), ("budget", "budget (window:reserve:recent)"),
            ("frontier", "cost/coverage frontier"), ("sessions", "sessions"), ("requests", "requests"), ("tokens_per_request", "tokens/request (mean)"), ("tokens_total", "tokens total"),
            ("cacheability_median", "cacheability median"), ("cacheability_p10", "cacheability p10"),
            ("needle_survival", "needle survival"), ("coverage", "needed-context coverage"),
            ("working_set_coverage", "working-set coverage"), ("rewrite_waste", "cache-write rewrite waste"),
            ("tokens_per_session", "tokens/session"),
            ("protocol_invalid", "protocol-invalid requests"),
            ("budget_violations", "budget violations"), ("refused", "refused (overflow)"),
            ("same_requests", "requests every engine answered"),
            ("coverage_same_requests", "coverage on those"), ("cost_usd_same_requests", "cost $ on those"),
            ("materialize_p50_ms", "materialize p50 ms"), ("materialize_p99_ms", "materialize p99 ms"),
            ("peak_mb", "peak MB"), ("cost_usd_total", "cost $ total"),
            ("cost_usd_per_session", "cost $/session (priced)"), ("cache_read_share", "cache-read share"),
            ("estimators", "estimator(s)"))


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "–"
    if key in ("cacheability_median", "cacheability_p10", "needle_survival", "cache_read_share", "coverage",
               "working_set_coverage", "rewrite_waste", "coverage_same_requests"):
        return f"{100 * v:.1f}%"
    if key in ("cost_usd_total", "cost_usd_per_session", "cost_usd_same_requests"):
        return pricing.format_usd(v)
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def verdicts(rows: Sequence[Mapping[str, Any]], engine: str = "continuity") -> list[str]:
    """One line per budget: how ``engine`` compares with the baseline of the best needed-context coverage among
    the engines that refused no more than the fewest did (coverage, dollars, the frontier)."""
    out = []
    for budget in dict.fromkeys(r["budget"] for r in rows):
        at = [r for r in rows if r["budget"] == budget]
        mine = next((r for r in at if r["engine"] == engine), None)
        fair = [r for r in at if r["engine"] != engine and r["frontier"] != "refuses" and r["coverage"] is not None]
        if mine is None or mine["coverage"] is None or not fair:
            continue
        best = max(fair, key=lambda r: (r["coverage"], -(r["cost_usd_total"] or 0)))
        dollars = (f"{mine['cost_usd_total'] / best['cost_usd_total']:.0%} of its dollars"
                   if mine["cost_usd_total"] is not None and best["cost_usd_total"] else "dollars not comparable")
        better = mine["coverage"] >= best["coverage"]
        same = ""
        if mine.get("coverage_same_requests") is not None and best.get("coverage_same_requests") is not None:
            ratio = (f", at {mine['cost_usd_same_requests'] / best['cost_usd_same_requests']:.0%} of its dollars"
                     if mine.get("cost_usd_same_requests") is not None and best.get("cost_usd_same_requests") else "")
            same = (f" Like for like, on the {mine['same_requests']:,} requests every engine answered: "
                    f"{_cell('coverage', mine['coverage_same_requests'])} vs "
                    f"{_cell('coverage', best['coverage_same_requests'])}{ratio}.")
        out.append(f"- **{budget}**: {engine} covers {_cell('coverage', mine['coverage'])} of the needed context "
                   f"{'≥' if better else '<'} {best['engine']}'s {_cell('coverage', best['coverage'])} (the best "
                   f"baseline) at {dollars}; {'on' if mine['frontier'] == 'yes' else 'not on'} the cost/coverage "
                   f"frontier.{same}")
    return out


NARROW_COLUMNS = (("engine", "engine"), ("budget", "budget"), ("frontier", "frontier"), ("requests", "requests"),
                  ("tokens_per_request", "tokens/request"), ("coverage", "coverage"), ("refused", "refused"),
                  ("cost_usd_total", "cost $"))
"""The columns of the table ``latch bench`` prints (report.md has every column of :data:`_COLUMNS`; the
like-for-like figures are in report.md and in each verdict line)."""


def markdown_table(rows: Sequence[Mapping[str, Any]],
                   columns: Sequence[tuple[str, str]] = _COLUMNS) -> str:
    """The Markdown table of :func:`summarize` ``rows``: one row each, ``columns`` as (key, title) pairs (default:
    every figure)."""
    head = "| " + " | ".join(t for _, t in columns) + " |"
    sep = "|" + "|".join("---" if k in ("engine", "budget", "frontier") else "---:" for k, _ in columns) + "|"
    body = ["| " + " | ".join(_cell(k, r[k]) for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def budget_verdicts(rows: Sequence[Mapping[str, Any]], engine: str = "continuity") -> list[str]:
    """One plain line per budget of ``rows`` (:func:`summarize`): ``BUDGET: VERDICT`` as :func:`verdicts` words
    it, or why there is none (the engine was not run, or no other engine has a coverage to compare)."""
    said = {}
    for line in verdicts(rows, engine):
        budget, _, rest = line.removeprefix("- **").partition("**: ")
        said[budget] = rest
    out = []
    for budget in dict.fromkeys(r["budget"] for r in rows):
        if budget not in said:
            ran = any(r["engine"] == engine and r["budget"] == budget for r in rows)
            said[budget] = (f"no comparison: no other engine has a needed-context coverage to compare {engine} with"
                            if ran else f"no comparison: {engine} was not run")
        out.append(f"{budget}: {said[budget]}")
    return out


def cost_table(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown lines: what each engine's views of each session would cost (USD, cache-aware; one column per
    engine and budget, "unpriced" where the session's model has no price), with the rule in one sentence."""
    ok = [r for r in results if "error" not in r]
    keys = sorted({(r["engine"], r["budget"]) for r in ok})
    sessions = sorted({r["session"] for r in ok})
    if not keys:
        return []
    got = {(r["session"], r["engine"], r["budget"]): r.get("cost_usd") for r in ok}
    lines = ["Cost per session (USD): each view's prompt at the cache-read rate for its common prefix with the "
             "engine's previous request and the cache-write (Anthropic) or uncached (OpenAI, Gemini) rate for the "
             "rest, plus the transcript's output tokens; genai-prices' bundled table.", "",
             "| session | " + " | ".join(f"{e} ({b})" for e, b in keys) + " |",
             "|---|" + "---:|" * len(keys)]
    for name in sessions:
        cells = [pricing.format_usd(got[(name, e, b)]) if (name, e, b) in got else "–" for e, b in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_report(out: str | os.PathLike[str], results: Sequence[Mapping[str, Any]], *, engines: Sequence[str],
                 sessions: Sequence[SessionSource], budgets: Sequence[Budget], seconds: float) -> dict[str, Path]:
    """Write ``report.md``, ``report.json`` and the PNG plots into ``out``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    rows = summarize(results)
    doc = {"engines": list(engines), "budgets": [asdict(b) for b in budgets],
           "sessions": [asdict(s) for s in sessions], "seconds": round(seconds, 1), "summary": rows,
           "jobs": list(results)}
    paths = {"json": folder / "report.json", "markdown": folder / "report.md"}
    write_text(paths["json"], dumps(doc, indent=1) + "\n")

    errors = [r for r in results if "error" in r]
    notes = [f"- {r['engine']} on {r['session']} ({r['budget']}): {r['error']}" for r in errors]
    md = ["# latch bench", "",
          f"{len(engines)} engines × {len(sessions)} sessions × {len(budgets)} budgets in {seconds:,.0f} s. "
          "Tokens are Latch's estimate of each request as sent; cacheability is the common prefix with the previous "
          "request over the request, on the canonical serialization; needle survival counts checkpoints where an "
          "early fact was in the view or returned by the engine's recall. Rows are sorted per budget by the "
          "cost/coverage frontier: engines no other beats on both dollars and needed-context coverage first, "
          "cheapest first; an engine that refused more requests than the fewest any engine refused at that budget "
          "is never on it (its dollars and coverage are over fewer requests). Working-set coverage: of the files the "
          "session had read or changed so far, the share each view names; cache-write rewrite waste: the share of "
          "the views' cache-write tokens spent on requests that did not reuse the previous request's prefix.", "",
          markdown_table(rows), "", *verdicts(rows), ""]
    md += [*cost_table(results), ""]
    if notes:
        md += ["Failed jobs:", *notes, ""]
    by_budget: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        if "error" not in r:
            by_budget.setdefault(r["budget"], []).append(r)
    for budget, rs in by_budget.items():
        slug = re.sub(r"[^A-Za-z0-9]+", "-", budget).strip("-")
        names = sorted({r["session"] for r in rs}, key=lambda n: -max(x["requests"] for x in rs if x["session"] == n))
        cols = min(3, len(names))
        nrows = math.ceil(len(names) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.2 * nrows), squeeze=False)
        for ax, name in zip(axes.flat, names, strict=False):
            for r in sorted((x for x in rs if x["session"] == name), key=lambda x: x["engine"]):
                ax.plot(range(1, len(r["tokens"]) + 1), [t if t is not None else float("nan") for t in r["tokens"]],
                        label=r["engine"], linewidth=1)
            ax.set_title(name, fontsize=8)
            ax.set_xlabel("request", fontsize=7)
            ax.set_ylabel("tokens sent", fontsize=7)
            ax.tick_params(labelsize=6)
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"tokens per request along each session · budget {budget}", fontsize=10)
        fig.tight_layout()
        paths[f"tokens {budget}"] = folder / f"tokens_{slug}.png"
        with atomic_path(paths[f"tokens {budget}"]) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(engines), 3.6))
        data = [[c for r in rs if r["engine"] == e for c in r["cacheability"] if c is not None] for e in engines]
        ax.boxplot([d or [float("nan")] for d in data], showfliers=False)
        ax.set_xticks(range(1, len(engines) + 1), list(engines), fontsize=8)
        ax.set_ylabel("estimated cacheability", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.set_title(f"cacheability per request · budget {budget}", fontsize=9)
        fig.tight_layout()
        paths[f"cacheability {budget}"] = folder / f"cacheability_{slug}.png"
        with atomic_path(paths[f"cacheability {budget}"]) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
    md += ["Plots: " + ", ".join(f"[{p.name}]({p.name})" for k, p in paths.items() if p.suffix == ".png"), ""]
    write_text(paths["markdown"], "\n".join(md))
    return paths


FRONTIER_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""The frontier panel's marker shape of the i-th budget (cycled)."""


def frontier_points(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cost-vs-coverage frontier's points: one per (engine, budget) with a priced job and needed context,
    ``{"engine", "budget", "usd": total dollars over its sessions (cache-aware), "coverage": pooled needed-context
    coverage (present / needed identifiers, :mod:`latch.bench.coverage`), "sessions", "refused": requests refused
    with ContextOverflow, "refuses_more": it refused more than the fewest any engine refused at this budget,
    "pareto": not ``refuses_more`` and no other such point of the same budget has coverage at least as high for
    at most the dollars, one of them strictly better}``, in engine then budget order of appearance. A point that
    refuses more requests than another is never on the frontier: its dollars and coverage are over the requests
    it answered only (``raw-history`` once the conversation outgrows the budget); a request no engine can answer
    (a single tool result above the hard limit) disqualifies none. Failed jobs are left out."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        if "error" not in r:
            groups.setdefault((r["engine"], r["budget"]), []).append(r)
    points = []
    for (engine, budget), rs in groups.items():
        paid = [r["cost_usd"] for r in rs if r.get("cost_usd") is not None]
        needed = sum(r.get("coverage_needed", 0) for r in rs)
        if not paid or not needed:
            continue
        points.append({"engine": engine, "budget": budget, "usd": float(sum(paid)),
                       "coverage": sum(r.get("coverage_present", 0) for r in rs) / needed, "sessions": len(rs),
                       "refused": sum(r.get("refused", 0) for r in rs)})
    fewest: dict[str, int] = {}
    for p in points:
        fewest[p["budget"]] = min(fewest.get(p["budget"], p["refused"]), p["refused"])
    for p in points:
        p["refuses_more"] = p["refused"] > fewest[p["budget"]]
    answering = [p for p in points if not p["refuses_more"]]
    for p in points:
        p["pareto"] = not p["refuses_more"] and not any(
            q is not p and q["budget"] == p["budget"] and q["coverage"] >= p["coverage"] and q["usd"] <= p["usd"]
            and (q["coverage"], -q["usd"]) != (p["coverage"], -p["usd"]) for q in answering)
    return sorted(points, key=lambda p: p["engine"])


def engine_plot(results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget], *, frontier: bool = False) -> Any:
    """A matplotlib ``Figure`` comparing the engines (``latch bench --plot``): two panels, one above the other,
    tokens sent per request and dollars per request (cache-aware, :func:`latch.accounting.pricing.view_cost`), one box per (engine, budget) over
    every request of every session (whiskers 5-95 %, no fliers), colored by budget, ``n=`` requests above each
    box; dashed lines at each budget's hard limit (``window - reserve`` tokens) on the tokens panel; both axes
    logarithmic; the legend (budgets and their lines) outside the panels, on the right.

    With ``frontier`` a third panel below them: total dollars against needed-context coverage
    (:func:`frontier_points`), one marker per engine (its color) and budget (its shape,
    :data:`FRONTIER_MARKERS`), each budget's Pareto-optimal points joined by a dotted line; its legend (engines,
    then budgets) outside the panel, on the right."""
    import matplotlib  # optional dependency (the bench extra); the command checks it is installed

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ok = [r for r in results if "error" not in r]
    engines = sorted({r["engine"] for r in ok})
    names = [b.name for b in budgets]
    colors = {b: plt.get_cmap("tab10")(i % 10) for i, b in enumerate(names)}
    fig = plt.figure(figsize=(max(8.0, 3.0 + 0.9 * len(engines) * len(names)), 11.0 if frontier else 7.6),
                     layout="constrained")
    axes = fig.subplots(3 if frontier else 2, 1)
    axes[1].sharex(axes[0])
    width = 0.8 / max(1, len(names))
    panels = ((axes[0], "tokens", "tokens sent per request"), (axes[1], "cost", "dollars per request (cache-aware)"))
    for ax, key, label in panels:
        for i, engine in enumerate(engines):
            for j, budget in enumerate(names):
                values = [v for r in ok if r["engine"] == engine and r["budget"] == budget
                          for v in (r.get(key) or []) if v is not None and v > 0]
                x = i + (j - (len(names) - 1) / 2) * width
                if values:
                    box = ax.boxplot([values], positions=[x], widths=width * 0.85, whis=(5, 95), showfliers=False,
                                     patch_artist=True, manage_ticks=False)
                    for patch in box["boxes"]:
                        patch.set_facecolor(colors[budget])
                        patch.set_alpha(0.75)
                    for median in box["medians"]:
                        median.set_color("black")
                ax.text(x, 1.01, f"n={len(values)}", transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                        fontsize=6, rotation=90 if len(names) > 1 else 0)
        ax.set_xticks(range(len(engines)), engines, fontsize=8)
        ax.tick_params(axis="x", labelbottom=True)
        ax.set_xlim(-0.6, len(engines) - 0.4)
        ax.set_yscale("log")
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    for b in budgets:
        axes[0].axhline(b.context_window_tokens - b.reserve_tokens, color=colors[b.name], linestyle="--", linewidth=1)
    handles = [Patch(facecolor=colors[n], alpha=0.75, label=f"budget {n}") for n in names]
    handles += [Line2D([], [], color=colors[b.name], linestyle="--",
                       label=f"hard limit {b.context_window_tokens - b.reserve_tokens:,} tokens") for b in budgets]
    fig.legend(handles=handles, loc="outside right upper", fontsize=7, title="window:reserve:recent",
               title_fontsize=7)
    fig.suptitle("per engine: tokens and cost per request (boxes: quartiles, whiskers 5-95 %)", fontsize=9)
    if frontier:
        _frontier_panel(axes[2], results, names, engines)
    return fig


def _frontier_panel(ax: Any, results: Sequence[Mapping[str, Any]], names: Sequence[str],
                    engines: Sequence[str]) -> None:
    """Draw :func:`frontier_points` on ``ax`` (see :func:`engine_plot`)."""
    import matplotlib.pyplot as plt  # optional dependency (the bench extra)
    from matplotlib.lines import Line2D

    points = frontier_points(results)
    ink = {e: plt.get_cmap("Dark2")(i % 8) for i, e in enumerate(engines)}  # not the budgets' tab10 colors
    shape = {b: FRONTIER_MARKERS[j % len(FRONTIER_MARKERS)] for j, b in enumerate(names)}
    for p in points:
        color = ink.get(p["engine"], "gray")
        if p["refuses_more"]:  # hollow: over fewer requests than the others, not comparable on this panel
            ax.scatter([p["coverage"]], [p["usd"]], facecolors="none", edgecolors=[color],
                       marker=shape.get(p["budget"], "o"), s=40, linewidths=1.5, zorder=3)
        else:
            ax.scatter([p["coverage"]], [p["usd"]], color=color, marker=shape.get(p["budget"], "o"), s=40,
                       edgecolors="black", linewidths=0.5, zorder=3)
    for b in names:
        best = sorted((p["coverage"], p["usd"]) for p in points if p["budget"] == b and p["pareto"])
        if len(best) > 1:
            ax.plot([c for c, _ in best], [u for _, u in best], linestyle=":", color="gray", linewidth=1, zorder=2)
    ax.set_xlim(-0.02, 1.02)
    if points and all(p["usd"] > 0 for p in points):
        ax.set_yscale("log")
    ax.set_xlabel("needed-context coverage (present / needed identifiers)", fontsize=8)
    ax.set_ylabel("total dollars (cache-aware)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    missing = len({(r["engine"], r["budget"]) for r in results if "error" not in r}) - len(points)
    refusing = sum(1 for p in points if p["refuses_more"])
    ax.set_title("cost vs needed-context coverage (dotted: each budget's frontier"
                 + ("; hollow: refused more requests than the others, so over fewer requests" if refusing else "")
                 + ")"
                 + (f"; {missing} engine/budget pair(s) unpriced or with nothing needed, not shown" if missing else ""),
                 fontsize=8)
    handles = [Line2D([], [], linestyle="", marker="o", color=ink[e], markeredgecolor="black", label=e)
               for e in engines if any(p["engine"] == e for p in points)]
    handles += [Line2D([], [], linestyle="", marker=shape[b], color="white", markeredgecolor="black",
                       label=f"budget {b}") for b in names if any(p["budget"] == b for p in points)]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7,
                  title="engine / budget", title_fontsize=7)


def write_plot(path: str | os.PathLike[str], results: Sequence[Mapping[str, Any]],
               budgets: Sequence[Budget]) -> Path:
    """Save :func:`engine_plot` as a PNG at ``path`` (110 dpi); return the path."""
    import matplotlib.pyplot as plt  # optional dependency (the bench extra)

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = engine_plot(results, budgets, frontier=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return out
