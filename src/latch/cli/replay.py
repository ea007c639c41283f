"""``latch replay FILE``: materialize the view before every model request of a transcript.

The file is imported once (idempotent; a forgotten session, see ``latch forget``, is refused with
one line; a Claude Code session's sub-agent files ``<sessionId>/subagents/agent-*.jsonl`` with it, as
``latch import`` brings them, each replayed after it like the sessions of a file holding several), then every ``AssistantMessage`` of the session counts as one model request: the engine
materializes the view as of the event just before it (``until_seq``) into a fresh kernel-record
stream (``<engine>:replay-<id>``), so replays never interfere with each other or with a live
session. The stream is a run of the scratch database beside the store (:mod:`latch.store.replays`),
not the store: ``--keep`` promotes the finished run into the store, ``latch prune-replays`` drops
the scratch's runs (finished and killed ones) and reports the bytes freed. The estimator is the ``latch_select_estimator`` plugins' choice for
the model (``latch.plugins.select_estimator``), or the one ``--estimator NAME`` forces; the engine
prices with it too (``EngineProfile.estimator``). Each view is checked independently of the
engine's own accounting, for every engine:

* budget: the reported total and a recount with the replay's estimator stay within
  ``window - reserve``;
* protocol: no orphaned tool call or result, results right after their call in call order
  (:func:`latch.engine.units.view_violations`), no split unit;
* cache epochs, as the engine numbers them (``view.epoch``): within one epoch each request's
  canonical bytes start with the previous request's (``prefix_breaks_within_epoch`` must be 0);
* no automatic compaction record in the stream;
* the latest user instruction is in every view (its message, or its text, e.g. in the canonical state):
  a violation for an engine that keeps it (``continuity``, or a class declaring ``KEEPS_LATEST_INSTRUCTION =
  True``), counted (``views_without_latest_instruction``) and reported for every other engine.

Rotations (epoch changes, i.e. cache rewrites) are reported for every engine: the table's ``cache``
column marks each rotation with the engine's reason and each prefix break (left out, and listed under
the table, when the terminal is too narrow), and every request of the JSON has ``changes`` since the
previous sent request (:func:`latch.host.changes.request_changes`, as ``latch view --diff`` prints it). Only an engine with
hysteretic epochs (``continuity``, or a class declaring ``HYSTERETIC_EPOCHS = True``) is held to
its bound ``rotations <= conversation_tokens / (0.25 * recent_tokens) + 1``; other strategies
(sliding windows, observation masking) rewrite their prefix by design. ``recent_tokens`` here is
the effective value: the hard budget lowers it (spec: "the hard request budget can lower the
effective limit"), to ``window - reserve`` at most and to the smallest ``recent_limit_tokens`` the
engine reports in a view's metrics.

A request the engine refuses with :class:`~latch.port.ContextOverflow` is listed (status
``overflow``), never an over-budget view. The exit status is 1 when any violation exists, when every request
was refused (no view could be built: a failed check names the first refusal), and when the transcript holds no
model request (said in one line).

The engine, the estimators and the plugin host are imported when a command runs, never when this
module is imported, so ``latch`` starts (and ``latch doctor`` reports) even when the hot-path
backend cannot load.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.measure import Measurement

from .. import plugins
from ..accounting.pricing import format_usd
from ..config import MAX_TOKENS, model_window
from ..host.ingest import SessionForgotten, imported_session_ids, parse_file
from ..host.loop import HostError, model_requests, transcript_model
from ..host.replay import (
    RATIO_BAND,
    ReplayPlan,
    event_position,
    harness_doc,
    provider_ratio,
    ratio_summary,
    window_origin,
)
from ..host.replay import budget_problem as _budget_problem
from ..host.replay import plan_replay as _plan_replay
from ..host.replay import run_replay as _run_replay
from ..importers.base import TranscriptError
from ..store import EventStore, ReplayScratch, StoreError, replay_scratch_path
from ..store.replays import scratch_bytes
from ..textsafe import PIPE_WIDTH, Table, cell, console, dumps, markup, plural, safe, write_text
from ..ui.render import window_line
from .main import AppContext, pass_app
from .outputs import output_file

__all__ = [
    "resolve_engine_factory",
    "resolve_estimator_choice",
    "budget_problem",
    "ReplayPlan",
    "plan_replay",
    "run_replay",
    "window_origin",
    "window_line",
    "replay_options",
    "register",
    "RATIO_BAND",
    "provider_ratio",
    "ratio_summary",
    "harness_doc",
    "harness_line",
    "ratio_line",
    "event_position",
]

PROGRESS_MIN_REQUESTS = 40


def resolve_engine_factory(
    name: str | None, config: Mapping[str, Any] | None = None, config_file: str | None = None
) -> tuple[str, Callable[..., Any]]:
    """``(engine name, ContextEngineFactory)`` through :func:`latch.plugins.get_engine_factory`.

    ``name`` ``None`` means ``[engine] name`` of the config (read from ``config_file``, named in
    errors), else ``continuity``. Raises ``click.UsageError`` for an unknown engine (there is no
    fallback to another engine). Commands call it before importing anything, so a typo costs nothing.
    """
    try:
        chosen = plugins.engine_name(name, config if config is not None else {})
        return chosen, plugins.get_engine_factory(chosen)
    except plugins.PluginError as exc:
        by_config = name is None and ((config or {}).get("engine") or {}).get("name") is not None
        where = f" (chosen by [engine] name in {config_file or 'the config'})" if by_config else ""
        raise click.UsageError(f"{exc}{where}") from None


def resolve_estimator_choice(name: str | None, model: str | None) -> Any:
    """The estimator instance: ``--estimator NAME`` (a registered ``PLUGIN_NAME``, e.g. ``tiktoken``,
    ``heuristic-openai``, ``cabi``) when given, else :func:`latch.plugins.select_estimator` of
    ``model``. Raises ``click.UsageError`` for an unknown or unusable ``name``."""
    if name is None:
        return plugins.select_estimator(model)
    try:
        return plugins.get_estimator(name)
    except plugins.PluginError as exc:
        raise click.UsageError(str(exc)) from None


def harness_line(doc: Mapping[str, Any]) -> str | None:
    """The report header's rich-markup line about the harness prompt, or ``None`` when there is none."""
    h = doc.get("harness") or {}
    if h.get("source") in ("recorded", "recorded+inferred"):
        parts = ([f"system prompt ({h['notes']} note(s), {h['system_tokens']:,} tokens)"] if h["notes"] else []) + (
            [f"{h['tools']} tool schema(s) ({h['tools_tokens']:,} tokens)"] if h["tools"] else []
        )
        line = f"harness: the transcript's {' and '.join(parts)}, sent with every request"
        if h.get("inferred_tokens"):
            line += (
                f"; {h['inferred_tokens']:,} more tokens inferred (its tool schemas are not in the transcript: "
                "provider prompt − transcript), counted in every view and budget"
            )
        return f"[dim]{line}[/dim]"
    if h.get("source") == "inferred":
        used = h["inferred_from"]
        span = f"{used[0]}" if len(used) == 1 else f"{used[0]}–{used[-1]}"
        return (
            f"[dim]harness: {h['inferred_tokens']:,} tokens inferred (not in the transcript: provider prompt − "
            f"transcript, median of request(s) {span}), counted in every request's view and budget[/dim]"
        )
    return None


def ratio_line(s: Mapping[str, Any]) -> str | None:
    """The summary's rich-markup lines comparing the views with the provider's prompt figures, or ``None`` with no
    provider figure. Two questions, kept apart: how exact Latch's count is (on the views that still hold the whole
    conversation, so they hold what the harness sent: Latch's conservative estimate and its provider-token forecast,
    each ÷ the provider's figure), and how much of the harness's prompt the other views kept (the engine evicted:
    the forecast ÷ the provider's figure), then the forecast's fit."""
    r = s.get("provider_ratio") or {}
    if not r.get("requests"):
        return None
    lo, hi = r["band"]
    c = s.get("provider_ratio_complete_views") or {}
    fc = s.get("forecast_ratio_complete_views") or {}
    fe = s.get("forecast_ratio_evicted_views") or {}
    rate = s.get("provider_rate")
    if c.get("requests"):
        lines = [
            f"[blue]i[/blue] views that hold the whole conversation ({c['requests']:,}), ÷ the provider's prompt: "
            f"Latch's estimate median {c['median']:.2f}× (range {c['min']:.2f}–{c['max']:.2f}×, {c['within']:,}/"
            f"{c['requests']:,} within {lo}–{hi}×)"
            + (
                f", its forecast in provider tokens median {fc['median']:.2f}× (range {fc['min']:.2f}–"
                f"{fc['max']:.2f}×, {fc['within']:,}/{fc['requests']:,} within)"
                if fc.get("requests")
                else ""
            )
        ]
    else:
        lines = [
            f"[blue]i[/blue] no view holds the whole conversation; Latch's estimate ÷ the provider's prompt: median "
            f"{r['median']:.2f}× (range {r['min']:.2f}–{r['max']:.2f}×, {r['within']:,}/{r['requests']:,} within "
            f"{lo}–{hi}×)"
        ]
    if fe.get("requests"):
        lines.append(
            f"[blue]i[/blue] views after eviction ({fe['requests']:,}): forecast ÷ the provider's prompt median "
            f"{fe['median']:.2f}× (range {fe['min']:.2f}–{fe['max']:.2f}×): the share of what the harness "
            f"sent that Latch's view holds"
        )
    if rate and rate.get("requests"):
        rough = " (few steps: rough)" if rate["steps"] < 3 else ""
        lines.append(
            f"[dim]forecast: {rate['rate']:.2f} provider tokens per estimated token + "
            f"{rate['intercept_tokens']:,}, fitted on each request's earlier requests ({rate['steps']:,} "
            f"step(s) in all){rough}[/dim]"
        )
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


# (header, request key) of the per-request table (docs/replay.md's tour names them), components in the
# spec's order. Optional columns that are None or 0 in every row (tools, extension: replay sends
# none; provider: no usage reported) are left out, so the table fits a 100-column terminal; the
# per-request cacheability is in --json and its mean in the summary.
_COLUMNS = (
    ("req", "request"),
    ("events", "events"),
    ("instr", "instructions_tokens"),
    ("state", "state_tokens"),
    ("recent", "recent_tokens"),
    ("recall", "recall_tokens"),
    ("tools", "tools_tokens"),
    ("ext", "extension_tokens"),
    ("view", "total_tokens"),
    ("raw", "history_tokens"),
    ("first seq", "first_retained_event"),
    ("prefix", "common_prefix_tokens"),
    ("epoch", "epoch"),
    ("provider", "provider_prompt_tokens"),
)
_OPTIONAL = ("tools_tokens", "extension_tokens", "provider_prompt_tokens")
_LEGEND = {
    "instr": "system + session context",
    "state": "canonical state",
    "view": "tokens sent",
    "raw": "whole conversation so far",
    "first seq": "first event still in the view (its number in this session: 1 is the session's first)",
    "prefix": "tokens shared with the previous request (cacheable)",
    "provider": "prompt tokens the provider reported",
}


_LEGEND["cost"] = "what the transcript's request cost (its provider usage, genai-prices)"
_LEGEND["cache"] = (
    "rotated: a new cache epoch (the engine's reason); broken: the cached prefix broke "
    "within an epoch (see `latch view --diff`)"
)


def _cache_mark(changes: Mapping[str, Any] | None) -> str:
    """The cache column's cell: ``rotated (REASON)``, ``broken (at …)`` or ``""`` (prefix kept, first request)."""
    if not changes or changes["cache"] in ("first", "kept"):
        return ""
    if changes["cache"] == "rotated":
        return f"rotated ({changes['rotation_reason'] or 'no reason given'})"
    brk = changes.get("prefix_break") or {}
    at = f"message {brk['message']}" if brk.get("at") == "message" else brk.get("at", "?")
    return f"broken (at {at})"


def _table(
    con: Console,
    columns: list[tuple[str, str]],
    rows: list[dict[str, Any]],
    marks: Mapping[int, str] | None,
    *,
    force: bool = False,
) -> Table | None:
    """The per-request table (with the ``cache`` column when ``marks`` is given): one space of padding, or none
    when that does not fit the console; ``None`` when even that does not fit, unless ``force``."""
    t, fits = _layout(con, columns, rows, marks)
    return t if fits or force or marks is None else None


def _layout(
    con: Console, columns: list[tuple[str, str]], rows: list[dict[str, Any]], marks: Mapping[int, str] | None
) -> tuple[Table, bool]:
    """``(table, fits)``: the per-request table of ``columns`` (and the ``cache`` column with ``marks``), with one
    space of padding when that fits the console, else none; ``fits`` says whether it fits (measured once per
    padding: a table of a long session measures in tenths of a second)."""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for header, _ in columns:
        t.add_column(header, justify="right")  # numbers stay whole: see Table
    if marks is not None:
        t.add_column("cache", justify="left")
    for r in rows:
        cells: list[Any] = [_cell(r, k) for _, k in columns]
        if marks is not None:
            cells.append(cell(marks.get(r["request"], "")))
        t.add_row(*cells)
    width = con.options.max_width
    if width >= PIPE_WIDTH:  # a measurement at PIPE_WIDTH never exceeds it (rich clamps): a pipe always fits
        return t, True
    if Measurement.get(con, con.options.update_width(PIPE_WIDTH), t).maximum <= width:
        return t, True
    t.padding = (0, 0, 0, 0)  # one space between columns: the example's 12 columns fit 80
    return t, Measurement.get(con, con.options.update_width(PIPE_WIDTH), t).maximum <= width


def _cell(r: dict[str, Any], key: str) -> str:
    if key == "original_usd":  # the optional cost column: what the transcript's request cost
        got = (r.get("cost") or {}).get("original_usd")
        return format_usd(got) if got is not None else "–"
    if r["total_tokens"] is None and key not in ("request", "events", "history_tokens", "provider_prompt_tokens"):
        return "[red]overflow[/red]" if key == "total_tokens" else ""
    return _fmt(r[key])


def _print(con: Console, doc: dict[str, Any], source: str) -> None:
    b = doc["budget"]
    rows = doc["requests"]
    con.print(f"[bold]{markup(source)}[/bold] · session {doc['session']} · model {markup(doc['model'] or 'unknown')}")
    con.print(f"engine [bold]{markup(doc['engine'])}[/bold] · estimator {markup(doc['estimator'])}")
    recent = f"{b['recent_tokens']:,}"
    if b["requested_recent_tokens"] != b["recent_tokens"]:
        recent = f"{b['requested_recent_tokens']:,} → {b['recent_tokens']:,} (limited by window − reserve)"
    con.print(f"window {b['context_window_tokens']:,} · reserve {b['reserve_tokens']:,} · recent {recent} tokens")
    con.print(window_line(b["window_source"], doc.get("window_entry"), doc["model"]))
    harness = harness_line(doc)
    if harness:
        con.print(harness)
    columns = [(h, k) for h, k in _COLUMNS if k not in _OPTIONAL or any(r.get(k) for r in rows)]
    marks = {r["request"]: _cache_mark(r.get("changes")) for r in rows}
    marked = [(n, m) for n, m in marks.items() if m]
    priced = any((r.get("cost") or {}).get("original_usd") is not None for r in rows)
    # the cost column is optional too: shown only when a request is priced and the table still fits (the cache
    # column first); when it does not fit, the footer says so and the summary keeps the session's cost
    at = next((i for i, (_, k) in enumerate(columns) if k == "provider_prompt_tokens"), len(columns))
    costed = [*columns[:at], ("cost", "original_usd"), *columns[at:]]  # "provider" stays the last column
    options: list[tuple[list[tuple[str, str]], Mapping[int, str] | None]] = []
    if marked:
        options += [(costed, marks)] if priced else []
        options.append((columns, marks))
    if priced:
        options.append((costed, None))
    chosen = next(((c, m, t) for c, m in options for t, fits in [_layout(con, c, rows, m)] if fits), None)
    if chosen is None:
        t = _table(con, columns, rows, None, force=True)
        shown = None
    else:
        columns, shown, t = chosen
    dropped = bool(marked) and shown is None  # the cache column does not fit: its marks go in a footer
    cost_dropped = priced and columns is not costed
    con.print(t)
    legend = [f"{h}: {_LEGEND[h]}" for h, _ in columns if h in _LEGEND]
    if marked and not dropped:
        legend.append(f"cache: {_LEGEND['cache']}")
    exact = doc.get("exact_tokenizer")
    tokens = f"tokens exact ({markup(exact)})" if exact else "tokens ≈"
    con.print(f"[dim]{tokens}; " + "; ".join(legend) + "[/dim]")
    if dropped:
        con.print(
            "[dim]cache column left out (too narrow); per request: "
            + ", ".join(f"{n} {markup(m)}" for n, m in marked)
            + "[/dim]"
        )
    if cost_dropped:
        con.print(
            "[dim]cost column left out (too narrow); the session's cost is in the summary and each "
            "request's in --json[/dim]"
        )
    s = doc["summary"]

    def check(ok: bool, text: str) -> None:
        con.print(("[green]✓[/green] " if ok else "[red]✗[/red] ") + text)

    largest = (
        f"max {s['max_total_tokens']:,} of {s['hard_limit_tokens']:,} tokens"
        if s["overflows"] < s["requests"]
        else f"no view (hard limit {s['hard_limit_tokens']:,} tokens)"
    )
    share = s.get("usable_share")
    if share is not None and s["overflows"] < s["requests"]:
        # from request 3 the limit is in the provider's tokens: Latch's (conservative) estimate of a view may be above
        largest = (
            f"max {s['max_total_tokens']:,} tokens (Latch's estimate) · hard limit {s['hard_limit_tokens']:,} "
            f"provider tokens, {share['median']:.0%} of it usable (range {share['min']:.0%}–{share['max']:.0%}) on "
            "the provider's rate from request "
            f"{share['from_request']}"
        )
    con.print(
        f"\n[bold]{plural(s['requests'], 'request')}[/bold] · {s['epochs']} cache epoch(s), {s['rotations']} rotation(s) · "
        + largest
    )
    con.print(
        f"conversation {s['conversation_tokens']:,} tokens"
        + (f" · mean cacheability {s['mean_cacheability']:.0%}" if s["mean_cacheability"] is not None else "")
    )
    con.print(_cost_line(s.get("cost"), doc["model"]))
    rewrites = _rewrite_line(s.get("cache_rewrites"))
    if rewrites is not None:
        con.print(rewrites)
    v = s["violations"]
    ratio = ratio_line(s)
    if ratio:
        con.print(ratio)
    over = s.get("forecasts_over_window")
    if over:
        con.print(
            f"[yellow]![/yellow] forecast above the model's window ({doc['budget']['context_window_tokens']:,} "
            f"tokens) at {plural(len(over), 'request')} ({', '.join(map(str, over[:10]))}"
            f"{', …' if len(over) > 10 else ''}): the provider would count those views over its window"
        )
    if s["requests"] and s["overflows"] >= s["requests"]:  # no view: the checks below would hold vacuously
        first = next((r for r in doc["requests"] if r["status"] == "overflow"), None)
        why = f": request {first['request']}: {markup(first['error'])}" if first and first.get("error") else ""
        check(
            False, f"no view could be built: all {plural(s['requests'], 'request')} refused with ContextOverflow{why}"
        )
        return
    check(
        not any("hard limit" in x for x in v),
        "budget never exceeded (window − reserve"
        + (", in the provider's tokens on its rate" if s.get("usable_share") else "")
        + ")",
    )
    check(not any("orphan" in x or "call order" in x for x in v), "no orphaned tool call or result")
    check(not any("split" in x for x in v), "no split unit")
    check(
        s["prefix_breaks_within_epoch"] == 0,
        f"append-only within each epoch ({s['prefix_breaks_within_epoch']} prefix breaks)",
    )
    check(s["automatic_compactions"] == 0, f"no automatic compaction ({s['automatic_compactions']})")
    misses = s.get("views_without_latest_instruction", 0)
    if s.get("keeps_latest_instruction", True):
        check(
            not misses,
            "latest user instruction present in every view" + (f" ({misses} view(s) without it)" if misses else ""),
        )
    elif misses:
        con.print(
            f"[blue]i[/blue] {misses} view(s) without the latest user instruction ({markup(doc['engine'])} "
            "does not keep it)"
        )
    else:
        con.print("[blue]i[/blue] latest user instruction present in every view")
    if s["hysteretic_epochs"]:
        check(not any("hysteresis" in x for x in v), f"rotations within the hysteresis bound ({s['rotation_bound']})")
    else:
        con.print(
            f"[blue]i[/blue] {s['rotations']} cache rewrite(s) (no rotation bound: {doc['engine']} does not "
            f"rotate with hysteresis)"
        )
    if s["overflows"]:
        first = next((r for r in doc["requests"] if r["status"] == "overflow"), None)
        why = f": request {first['request']}: {markup(first['error'])}" if first and first.get("error") else ""
        con.print(f"[yellow]![/yellow] {plural(s['overflows'], 'request')} refused with ContextOverflow{why}")
    for x in v[:20]:
        con.print(f"  [red]{markup(x)}[/red]")
    if len(v) > 20:
        con.print(f"  … {len(v) - 20} more violations")


def _stored_session(app: AppContext, target: str) -> str | None:
    """The id of the stored session ``target`` names (an id or a unique prefix) when ``target`` is no file and a
    store exists, else ``None`` (the import then reports the missing file)."""
    if Path(target).exists() or not app.store_exists():
        return None
    try:
        return str(app.store(create=False).session(target).id)
    except KeyError:
        return None


def _replay_one(store: EventStore, sid: str, n_requests: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """The replay document of session ``sid`` (:func:`run_replay` with ``options``), with a progress bar on a
    terminal for a long session."""
    err = console(stderr=True)
    if n_requests < PROGRESS_MIN_REQUESTS or not err.is_terminal:  # no bar: rich.progress is not even imported
        return run_replay(store, sid, **options)[0]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True
    ) as bar:
        task = bar.add_task("replay", total=n_requests)
        return run_replay(store, sid, **options, progress=lambda done, total: bar.update(task, completed=done))[0]


def _rewrite_line(r: Mapping[str, Any] | None) -> str | None:
    """The summary's line on the transcript's cache rewrites (``None`` when it reported no cache writes)."""
    if not r or not r["write_tokens"]:
        return None
    if not r["rewrites"]:
        return f"cache rewrites as the transcript ran it: none ({r['requests']:,} request(s) with cache figures)"
    shown = ", ".join(map(str, r["rewrites"][:8])) + (", …" if len(r["rewrites"]) > 8 else "")
    return (
        f"cache rewrites as the transcript ran it: {len(r['rewrites'])} of {r['requests']:,} request(s) wrote "
        f"the cached prefix again (request {shown}): {r['rewrite_write_tokens']:,} of {r['write_tokens']:,} "
        f"cache-write tokens ({r['share']:.1%}) [dim](hit rate hides it: the cache had lost the prefix)[/dim]"
    )


def _cost_line(c: Mapping[str, Any] | None, model: str | None) -> str:
    """The summary's cost line (rich markup): the transcript's cost and cache-read share, Latch's views' cost. When
    the budget refused some requests, Latch's views are compared like for like: with the transcript's cost of the
    same requests (``original_compared_usd``), and the refused requests are counted."""
    if not c or (c["original_usd"] is None and c["view_usd"] is None):
        return f"cost: {'unpriced'} [dim](no genai-prices price for model {markup(model or 'unknown')})[/dim]"
    parts = []
    refused = c.get("refused_requests") or 0
    if c["original_usd"] is not None:
        share = c["original_cache_read_share"]
        parts.append(
            f"cost {format_usd(c['original_usd'])} as the transcript ran it ({c['original_priced_requests']} "
            f"priced request(s)" + (f"; cache reads {share:.0%} of input" if share is not None else "") + ")"
        )
    else:
        parts.append("cost of the transcript: unpriced (no provider usage)")
    if c["view_usd"] is not None:
        vshare = c["view_cache_read_share"]
        same = c.get("original_compared_usd")
        like = (
            f"on the {c['compared_requests']:,} request(s) with a view ({refused:,} refused, left out of both "
            f"sides): {format_usd(same)} as the transcript ran them vs "
            if refused and same is not None
            else ""
        )
        parts.append(
            like + f"Latch's views would cost {format_usd(c['view_usd'])} at Latch's conservative token "
            "estimate"
            + (f" (cache reads {vshare:.0%})" if vshare is not None else "")
            + (
                f", about {format_usd(c['view_forecast_usd'])} at the provider's count (forecast)"
                if c.get("view_forecast_usd") is not None
                else ""
            )
            + ("" if c.get("original_usd") is not None else "; output tokens unknown, counted as 0")
        )
    return " · ".join(parts) + f" [dim]· priced as {markup(c['priced_model'] or '')} (genai-prices)[/dim]"


def _stdout_console() -> Console:
    """Rich console for the report: the terminal's width; full width when piped (see :func:`console`)."""
    return console(highlight=False)


def replay_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The engine, estimator, config and budget options of ``latch replay`` (and ``latch view``): ``model``,
    ``window``, ``reserve``, ``recent``, ``engine``, ``estimator``, ``config_path``, ``no_harness`` keyword
    arguments."""
    decorators = [
        click.option(
            "--model", default=None, help="Model id for budgets and the estimator (default: the transcript's)."
        ),
        click.option(
            "--window", type=click.IntRange(min=1, max=MAX_TOKENS), default=None, help="context_window_tokens override."
        ),
        click.option(
            "--reserve", type=click.IntRange(min=0, max=MAX_TOKENS), default=None, help="reserve_tokens override."
        ),
        click.option(
            "--recent",
            type=click.IntRange(min=1, max=MAX_TOKENS),
            default=None,
            help="recent_tokens override (lowered to window − reserve when larger).",
        ),
        click.option(
            "--engine", "engine", default=None, help="Context engine plugin (default: [engine] name, else continuity)."
        ),
        click.option(
            "--estimator",
            "estimator",
            default=None,
            help="Estimator plugin by name, e.g. tiktoken, heuristic-openai, cabi (default: the one the "
            "plugins select for the model).",
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False),
            default=None,
            help="Config TOML (default: $LATCH_HOME/config.toml or the user config folder).",
        ),
        click.option(
            "--no-harness",
            "no_harness",
            is_flag=True,
            help="The conversation alone: leave out the harness's recorded system prompt and tools, or "
            "its overhead inferred from provider usage (harness_tokens).",
        ),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


def plan_replay(store: EventStore, session_id: str, **options: Any) -> ReplayPlan:
    """:func:`latch.host.replay.plan_replay` for a command: an unknown engine names its option first, and a
    :class:`~latch.host.loop.HostError` is a ``click.UsageError`` (one line)."""
    resolve_engine_factory(options.get("engine"), options.get("config"))
    try:
        return _plan_replay(store, session_id, **options)
    except HostError as exc:
        raise click.UsageError(str(exc)) from None


def run_replay(store: EventStore, session_id: str, **options: Any) -> tuple[dict[str, Any], list[Any]]:
    """:func:`latch.host.replay.run_replay` for a command: an unknown engine names its option first, and a
    :class:`~latch.host.loop.HostError` is a ``click.UsageError`` (one line)."""
    resolve_engine_factory(options.get("engine"), options.get("config"))
    try:
        return _run_replay(store, session_id, **options)
    except HostError as exc:
        raise click.UsageError(str(exc)) from None


def budget_problem(*args: Any, **kwargs: Any) -> None:
    """:func:`latch.host.replay.budget_problem` as a ``click.UsageError``."""
    try:
        _budget_problem(*args, **kwargs)
    except HostError as exc:
        raise click.UsageError(str(exc)) from None


def check_replay_options(
    app: AppContext,
    config: Mapping[str, Any],
    *,
    engine: str | None,
    estimator: str | None,
    model: str | None,
    window: int | None,
    reserve: int | None,
    file: str | None = None,
    fmt: str | None = None,
) -> None:
    """Fail on a bad engine, estimator or ``--reserve``/``--window`` pair before anything is imported
    (``click.UsageError`` naming the option at fault). Without ``model``, the model the transcript ``file``
    names decides the default window and reserve (the file is parsed, never stored: a file that does not
    parse is left to the import to report)."""
    resolve_engine_factory(engine, config, app.config_file)
    if estimator is not None:
        resolve_estimator_choice(estimator, model)
    if window is None and reserve is None:
        return
    if model is None and file is None:  # the session's model decides the defaults: plan_replay checks them
        if window is not None and reserve is not None:
            budget_problem(window, reserve, window, reserve)
        return
    if model is None and window is not None and reserve is not None and not config.get("models"):
        # both options given: the model's defaults are not used, and without a [models] entry its window cannot
        # fail either (:func:`latch.config.model_window` raises only for a configured reserve; every model-table
        # entry has its reserve below its window, tested), so the transcript is not parsed for its model
        budget_problem(window, reserve, window, reserve)
        return
    if model is None and file is not None:
        try:
            model = transcript_model(parse_file(file, fmt).events)
        except (TranscriptError, OSError):
            model = None
    default = model_window(config, model)
    budget_problem(
        window if window is not None else default.context_window_tokens,
        reserve if reserve is not None else default.reserve_tokens,
        window,
        reserve,
        f" for model {safe(model)}" if model else "",
    )


def register(cli: click.Group) -> None:
    @cli.command("replay")
    @click.argument("file", metavar="FILE_OR_SESSION", type=click.Path(dir_okay=False))
    @click.option("--format", "fmt", default=None, help="Transcript format (default: auto-detect).")
    @replay_options
    @click.option(
        "--json",
        "json_out",
        type=click.Path(dir_okay=False, allow_dash=True),
        default=None,
        is_flag=False,
        flag_value="-",
        metavar="[FILE]",
        callback=output_file,
        help="Print the per-request report as JSON to stdout instead of the table (like every command's --json); "
        "`--json FILE` is kept as an alias of --json-out FILE.",
    )
    @click.option(
        "-o",
        "--json-out",
        "json_file",
        type=click.Path(dir_okay=False, allow_dash=True),
        default=None,
        callback=output_file,
        help="Also write the per-request report as JSON to this file ('-': stdout).",
    )
    @click.option(
        "--html",
        "html_file",
        type=click.Path(dir_okay=False),
        default=None,
        callback=output_file,
        help="Also write a self-contained HTML report to this file: per-request table, cache epochs and "
        "breaks as an inline SVG chart, costs, the transcript (no scripts, nothing fetched).",
    )
    @click.option(
        "--live",
        is_flag=True,
        help="The transcript is still being written: store only its settled events; the open tail "
        "(e.g. a response still streaming) waits for the next import.",
    )
    @click.option(
        "--keep",
        is_flag=True,
        help="Keep the replay's kernel records in the store (stream <engine>:replay-<id>); by default "
        "they go to the scratch database beside it, which `latch prune-replays` empties.",
    )
    @click.option(
        "--session",
        "session",
        default=None,
        metavar="ID",
        help="A file holding several sessions (a Goose or OpenCode database, an Aider history: one per "
        "aider run, a Claude Code session with its sub-agent files): replay only this one "
        "(its Latch session id or a unique prefix); by default every session is replayed.",
    )
    @pass_app
    def replay_cmd(
        app: AppContext,
        file: str,
        fmt: str | None,
        model: str | None,
        window: int | None,
        reserve: int | None,
        recent: int | None,
        engine: str | None,
        estimator: str | None,
        config_path: str | None,
        json_out: str | None,
        json_file: str | None,
        html_file: str | None,
        live: bool,
        keep: bool,
        no_harness: bool,
        session: str | None,
    ) -> None:
        """Replay FILE (or a stored SESSION): materialize the view before every model request and check the
        invariants.

        A file holding several sessions is replayed session after session (a report each; the JSON is then
        a list of per-session documents), or only the one --session names. A Claude Code session's sub-agent
        files (<sessionId>/subagents/agent-*.jsonl) are imported with it and replayed after it."""
        config = app.config(config_path)
        # bad options fail before anything is imported
        check_replay_options(
            app,
            config,
            engine=engine,
            estimator=estimator,
            model=model,
            window=window,
            reserve=reserve,
            file=file,
            fmt=fmt,
        )
        forgotten: list[str] = []
        stored = _stored_session(app, file)
        if stored is not None:  # not a file: a session of the store (one `latch run` recorded, say)
            store, sids = app.store(create=False), [stored]
        else:
            store = app.store()
            try:
                sids = imported_session_ids(store, file, fmt, final=not live, forgotten=forgotten, companions=True)
            except SessionForgotten as exc:
                raise click.ClickException(
                    f"{safe(file)}: session {exc.session_id} is forgotten (tombstoned by "
                    "`latch forget`); forgotten sessions are not replayed"
                ) from None
        if session is not None:
            chosen = [sid for sid in sids if sid == session] or [sid for sid in sids if sid.startswith(session)]
            if len(chosen) != 1:
                listed = ", ".join([*sids, *(f"{f} (forgotten)" for f in forgotten)]) or "none"
                what = "matches several sessions" if chosen else "names no session"
                raise click.UsageError(f"--session {safe(session)} {what} of {safe(file)} (its sessions: {listed})")
            sids = chosen
        elif not sids and forgotten:
            raise click.ClickException(
                f"{safe(file)}: session {forgotten[0]} is forgotten (tombstoned by "
                "`latch forget`); forgotten sessions are not replayed"
            )
        counts = {
            sid: len(model_requests(list(store.events(sid, kinds=["assistant_message", "usage"])))) for sid in sids
        }
        empty = [sid for sid in sids if counts[sid] == 0]
        if len(sids) == len(empty):
            what = f"session {sids[0]} has" if len(sids) == 1 else f"none of its {len(sids)} sessions has"
            raise click.ClickException(
                f"{safe(file)}: {what} no model request (no assistant message): nothing to replay"
            )
        options = dict(
            engine=engine,
            model=model,
            estimator=estimator,
            config=config,
            window=window,
            reserve=reserve,
            recent=recent,
            keep=keep,
            harness=not no_harness,
        )
        docs = [_replay_one(store, sid, counts[sid], options) for sid in sids if counts[sid]]
        if json_out not in (None, "-"):  # `--json FILE`: the alias of --json-out FILE
            json_out, json_file = None, json_file or json_out
        out: Any = docs[0] if len(sids) == 1 else docs
        if html_file and len(docs) != 1:
            raise click.UsageError(
                f"--html writes one session's report and {safe(file)} holds {len(docs)} "
                "replayed sessions: add --session ID"
            )
        # the files first: a reader that stops reading stdout (`| head -1`) ends the command at the next print
        if json_file not in (None, "-"):
            write_text(json_file, dumps(out, indent=2) + "\n")
        if html_file:
            from .replay_html import write_html  # lazy: the page's modules (session view, state) load for --html

            write_html(html_file, store, docs[0], file)
        if "-" in (json_out, json_file):
            click.echo(dumps(out, indent=2))
        else:
            con = _stdout_console()
            if len(sids) > 1:
                con.print(
                    f"[bold]{markup(safe(file))}: {len(sids)} sessions[/bold] ("
                    + ", ".join(f"{sid} {counts[sid]} request(s)" for sid in sids)
                    + ")"
                    + (f"; forgotten, not replayed: {', '.join(forgotten)}" if forgotten else ""),
                    highlight=False,
                )
            for i, doc in enumerate(docs):
                if len(sids) > 1:
                    con.print(f"\n[bold]── session {i + 1} of {len(docs)}: {doc['session']} ──[/bold]", highlight=False)
                _print(con, doc, file)
            for sid in empty if len(sids) > 1 else ():
                con.print(f"[blue]i[/blue] session {sid} has no model request: not replayed", highlight=False)
        if any(
            doc["summary"]["violations"]
            or (doc["summary"]["requests"] and doc["summary"]["overflows"] >= doc["summary"]["requests"])
            for doc in docs
        ):
            sys.exit(1)

    @cli.command("prune-replays")
    @pass_app
    def prune_replays_cmd(app: AppContext) -> None:
        """Drop the kernel records of past replays (the scratch database beside the store) and say how many
        bytes that freed. Runs kept with `latch replay --keep` are in the store and stay; a replay still
        running is left alone; a killed one is dropped."""
        problem = app.db_problem()
        if problem:
            raise StoreError(f"cannot open the Latch store at {problem}")
        path = replay_scratch_path(app.db_path()) if app.db != ":memory:" else None
        con = console(highlight=False)
        if path is None or not path.is_file():
            con.print(f"no replay records to prune (no {markup(safe(str(path)) if path else 'scratch database')})")
            return
        before = scratch_bytes(path)
        scratch = ReplayScratch(path)
        try:
            dropped, kept = scratch.prune()
        finally:
            scratch.close()
        freed = max(0, before - scratch_bytes(path))
        killed = sum(1 for r in dropped if not r.finished)
        records = sum(r.records for r in dropped)
        con.print(
            f"dropped {len(dropped)} replay run(s) ({records:,} kernel records"
            + (f"; {killed} unfinished: killed" if killed else "")
            + f"), freed {freed:,} bytes "
            f"({markup(safe(str(path)))})"
        )
        if kept:
            con.print(f"[yellow]![/yellow] {len(kept)} replay run(s) still running, kept")
