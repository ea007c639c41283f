"""``latch replay FILE``: materialize the view before every model request of a transcript.

The file is imported once (idempotent; a forgotten session, see ``latch forget``, is refused with
one line), then every ``AssistantMessage`` of the session counts as one model request: the engine
materializes the view as of the event just before it (``until_seq``) into a fresh kernel-record
stream (``<engine>:replay-<id>``), so replays never interfere with each other or with a live
session. The estimator is the ``latch_select_estimator`` plugins' choice for
the model (``latch.plugins.select_estimator``), or the one ``--estimator NAME`` forces; the engine
prices with it too (``EngineProfile.estimator``). Each view is checked independently of the
engine's own accounting, for every engine:

* budget: the reported total and a recount with the replay's estimator stay within
  ``window - reserve``;
* protocol: no orphaned tool call or result, results right after their call in call order
  (:func:`latch.engine.units.view_violations`), no split unit;
* cache epochs, as the engine numbers them (``view.epoch``): within one epoch each request's
  canonical bytes start with the previous request's (``prefix_breaks_within_epoch`` must be 0);
* no automatic compaction record in the stream.

Rotations (epoch changes, i.e. cache rewrites) are reported for every engine. Only an engine with
hysteretic epochs (``continuity``, or a class declaring ``HYSTERETIC_EPOCHS = True``) is held to
its bound ``rotations <= conversation_tokens / (0.25 * recent_tokens) + 1``; other strategies
(sliding windows, observation masking) rewrite their prefix by design. ``recent_tokens`` here is
the effective value: the hard budget lowers it (spec: "the hard request budget can lower the
effective limit"), to ``window - reserve`` at most and to the smallest ``recent_limit_tokens`` the
engine reports in a view's metrics.

A request the engine refuses with :class:`~latch.port.ContextOverflow` is listed (status
``overflow``), never an over-budget view. The exit status is 1 when any violation exists.

The engine, the estimators and the plugin host are imported when a command runs, never when this
module is imported, so ``latch`` starts (and ``latch doctor`` reports) even when the hot-path
backend cannot load.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.measure import Measurement

from ..cli import pass_app
from ..config import MAX_TOKENS
from ..events import AssistantMessage, Usage
from ..textsafe import PIPE_WIDTH, Table, console, dumps, markup, safe
from . import output_file

__all__ = ["resolve_engine_factory", "resolve_estimator_choice", "estimator_name", "run_replay", "register"]

PROGRESS_MIN_REQUESTS = 40


def resolve_engine_factory(name: str | None, config: Mapping[str, Any] | None = None,
                           config_file: str | None = None) -> tuple[str, Callable]:
    """``(engine name, ContextEngineFactory)`` through :func:`latch.plugins.get_engine_factory`.

    ``name`` ``None`` means ``[engine] name`` of the config (read from ``config_file``, named in
    errors), else ``continuity``. Raises ``click.UsageError`` for an unknown engine (there is no
    fallback to another engine).
    """
    from .. import plugins

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
    from .. import plugins

    if name is None:
        return plugins.select_estimator(model)
    try:
        return plugins.get_estimator(name)
    except plugins.PluginError as exc:
        raise click.UsageError(str(exc)) from None


def estimator_name(estimator: Any) -> str:
    """The name a report shows for ``estimator``: its ``name``, else its class's ``PLUGIN_NAME`` or name."""
    cls = type(estimator)
    return getattr(estimator, "name", None) or getattr(cls, "PLUGIN_NAME", None) or cls.__name__


def _hysteretic(engine_name: str, engine: Any) -> bool:
    """Whether ``engine`` rotates with hysteresis (and is therefore held to the rotation bound)."""
    from ..plugins import DEFAULT_ENGINE

    return bool(getattr(engine, "HYSTERETIC_EPOCHS", engine_name == DEFAULT_ENGINE))


def _transcript_model(events: list[Any]) -> str | None:
    for s in events:
        m = getattr(s.event, "model", None)
        if m:
            return m
    return None


def _requests(events: list[Any]) -> list[tuple[int, int, Usage | None]]:
    """``(assistant seq, until_seq, provider usage of that request)`` for every model request."""
    out: list[tuple[int, int, Usage | None]] = []
    prev_seq = 0
    for s in events:
        if isinstance(s.event, AssistantMessage):
            out.append((s.seq, prev_seq, None))
        elif isinstance(s.event, Usage) and out and out[-1][2] is None:
            out[-1] = (out[-1][0], out[-1][1], s.event)
        prev_seq = s.seq
    return out


def run_replay(store: Any, session_id: str, *, engine: str | None = None, model: str | None = None,
               estimator: str | None = None, config: Mapping[str, Any] | None = None, window: int | None = None,
               reserve: int | None = None, recent: int | None = None,
               progress: Callable[[int, int], None] | None = None,
               keep_views: bool = False) -> tuple[dict[str, Any], list[Any]]:
    """Replay ``session_id`` of ``store``; return ``(document, views)`` (views only with ``keep_views``).

    ``engine`` and ``estimator`` are plugin names (``None``: the configured engine, the model's
    estimator); ``config`` is Latch's configuration, passed to the engine as
    ``EngineProfile.config``. The document is ``{"session", "engine", "estimator", "stream",
    "model", "budget", "requests": [...], "summary": {...}}`` as written by ``latch replay
    --json``; ``budget`` holds ``context_window_tokens``, ``reserve_tokens``, ``recent_tokens``
    (effective: at most ``window - reserve``), ``requested_recent_tokens`` (as configured or
    passed) and ``window_source`` (``"--window"``, ``"config"``: a ``[models.NAME]`` entry, or
    ``"default"``: Latch's default window, no entry matches the model); each request has the
    component tokens (``state_tokens`` is the canonical state's size), ``total_tokens``,
    ``epoch``, ``first_retained_seq``, ``cacheability``, ``recent_limit_tokens`` (the engine's
    effective limit, when it reports one). ``progress(done, total)`` is called after each request.
    """
    from ..port import ContextOverflow, ContextRequest, EngineProfile, SessionContext
    from ..host.session import StoreKernelWriter, StoreSessionReader
    from ..engine.report import COMPONENTS
    from ..engine.units import TokenCounter, Unit, UnitBuilder, header_lines, message_line, view_violations

    from ..config import model_settings

    config = dict(config or {})
    engine_name, factory = resolve_engine_factory(engine, config)
    events = list(store.events(session_id))
    model = model or _transcript_model(events)
    chosen = resolve_estimator_choice(estimator, model)
    counter = TokenCounter(chosen)
    stream = f"{engine_name}:replay-{uuid.uuid4().hex[:12]}"
    reader = StoreSessionReader(store, session_id)
    writer = StoreKernelWriter(store, session_id, stream)
    eng = factory(EngineProfile(session_id=session_id, model=model, reader=reader, writer=writer, config=config,
                                estimator=chosen))
    hysteretic = _hysteretic(engine_name, eng)
    budget = eng.default_budget()
    overrides = {k: v for k, v in (("context_window_tokens", window), ("reserve_tokens", reserve),
                                   ("recent_tokens", recent)) if v is not None}
    budget = replace(budget, **overrides)
    if budget.reserve_tokens >= budget.context_window_tokens:
        raise click.UsageError(f"--reserve ({budget.reserve_tokens}) must be below --window "
                               f"({budget.context_window_tokens})")
    hard = budget.hard_limit_tokens
    requested_recent = budget.recent_tokens
    budget = replace(budget, recent_tokens=min(requested_recent, hard))
    if window is not None:
        window_source = "--window"
    elif "context_window_tokens" in model_settings(config, model):
        window_source = "config"
    else:
        window_source = "default"
    info = store.session(session_id)
    ctx = SessionContext(workspace=info.workspace)
    requests = _requests(events)

    builder = UnitBuilder()
    units: dict[int, Unit] = {}
    history = 0
    pos = 0
    rows: list[dict[str, Any]] = []
    views: list[Any] = []
    violations: list[str] = []
    prev: tuple[int, bytes, list[bytes], list[int]] | None = None  # epoch, bytes, lines, line tokens
    rotations = breaks = overflows = 0
    seen: dict[int, tuple[Any, bytes, int]] = {}  # id(message) -> (message, line, tokens): views share messages
    for k, (a_seq, until, usage) in enumerate(requests, 1):
        while pos < len(events) and events[pos].seq <= until:
            for u in builder.feed(events[pos]):
                history += u.cost(counter)
                for s in u.seqs:
                    units[s] = u
            pos += 1
        row: dict[str, Any] = {"request": k, "seq": a_seq, "until_seq": until, "events": pos,
                               "history_tokens": history,
                               "provider_prompt_tokens": usage.prompt_tokens if usage else None,
                               "provider_cache_read_tokens": usage.cache_read_tokens if usage else None}
        try:
            view = eng.materialize(ContextRequest(session_id=session_id, session_context=ctx, until_seq=until,
                                                  budget=budget))
        except ContextOverflow as exc:
            overflows += 1
            rows.append({**row, "status": "overflow", "error": str(exc), "total_tokens": None})
            if progress:
                progress(k, len(requests))
            continue
        if keep_views:
            views.append(view)
        head = header_lines(view.system, view.tools)
        lines, line_tokens = head, [counter.fixed(view.system) if view.system else 0, counter.tools(view.tools)]
        for m in view.messages:
            got = seen.get(id(m))
            if got is None or got[0] is not m:
                got = seen[id(m)] = (m, message_line(m), counter.message(m))
            lines.append(got[1])
            line_tokens.append(got[2])
        recount = sum(line_tokens)
        data = b"\n".join(lines) + b"\n"
        total = view.tokens.total_tokens
        where = f"request {k} (seq {a_seq})"
        if total > hard or recount > hard:
            violations.append(f"{where}: {max(total, recount)} tokens over the hard limit {hard}")
        violations.extend(f"{where}: {v}" for v in view_violations(view.messages, units))
        common = 0
        if prev is not None:
            if view.epoch != prev[0]:
                rotations += 1
            elif not data.startswith(prev[1]):
                breaks += 1
                violations.append(f"{where}: not an append-only extension of the previous request in epoch "
                                  f"{view.epoch}")
            i = 0
            while i < min(len(lines), len(prev[2])) and lines[i] == prev[2][i]:
                common += line_tokens[i]
                i += 1
        rows.append({
            **row, "status": view.status, "total_tokens": total, "recounted_tokens": recount,
            **{c: getattr(view.tokens, c) for c in COMPONENTS},
            "epoch": view.epoch, "first_retained_seq": view.first_retained_seq,
            "common_prefix_tokens": common, "cacheability": common / recount if recount else 0.0,
            "left_tokens": view.metrics.get("left_tokens"), "rotation_reason": view.metrics.get("rotation_reason"),
            "image_count": view.metrics.get("image_count"), "image_tokens": view.metrics.get("image_tokens"),
            "recent_limit_tokens": view.metrics.get("recent_limit_tokens"),
            "headroom_tokens": hard - total, "messages": len(view.messages),
        })
        prev = (view.epoch, data, lines, line_tokens)
        if progress:
            progress(k, len(requests))
    compactions = sum(1 for r in writer.records() if "compact" in r[1])
    if compactions:
        violations.append(f"{compactions} compaction record(s) in the replay stream (never automatic)")
    done = [r for r in rows if r["total_tokens"] is not None]
    bound = recent_eff = None
    if hysteretic:
        recent_eff = min([budget.recent_tokens, *(r["recent_limit_tokens"] for r in done
                                                   if isinstance(r["recent_limit_tokens"], int)
                                                   and r["recent_limit_tokens"] > 0)])
        bound = history / (0.25 * recent_eff) + 1
        if rotations > bound:
            violations.append(f"{rotations} rotations exceed the hysteresis bound {bound:.1f} "
                              f"(conversation {history} tokens, effective recent {recent_eff})")
    summary = {
        "requests": len(rows), "violations": violations, "rotations": rotations,
        "prefix_breaks_within_epoch": breaks, "automatic_compactions": compactions, "overflows": overflows,
        "hysteretic_epochs": hysteretic, "rotation_bound": round(bound, 2) if bound is not None else None,
        "rotation_bound_recent_tokens": recent_eff,
        "conversation_tokens": history,
        "max_total_tokens": max((r["total_tokens"] for r in done), default=0), "hard_limit_tokens": hard,
        "mean_cacheability": (sum(r["cacheability"] for r in done[1:]) / (len(done) - 1)) if len(done) > 1 else None,
        "epochs": len({r["epoch"] for r in done}),
    }
    doc = {"session": session_id, "engine": engine_name, "estimator": estimator_name(chosen), "stream": stream,
           "model": model,
           "budget": {"context_window_tokens": budget.context_window_tokens,
                      "reserve_tokens": budget.reserve_tokens, "recent_tokens": budget.recent_tokens,
                      "requested_recent_tokens": requested_recent, "window_source": window_source},
           "requests": rows, "summary": summary}
    return doc, views


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


# (header, request key) of the per-request table (the README's tour names them), components in the
# spec's order. Optional columns that are None or 0 in every row (tools, extension: replay sends
# none; provider: no usage reported) are left out, so the table fits a 100-column terminal; the
# per-request cacheability is in --json and its mean in the summary.
_COLUMNS = (("req", "request"), ("events", "events"), ("instr", "instructions_tokens"), ("state", "state_tokens"),
            ("recent", "recent_tokens"), ("recall", "recall_tokens"), ("tools", "tools_tokens"),
            ("ext", "extension_tokens"), ("view", "total_tokens"), ("raw", "history_tokens"),
            ("first seq", "first_retained_seq"), ("prefix", "common_prefix_tokens"), ("epoch", "epoch"),
            ("provider", "provider_prompt_tokens"))
_OPTIONAL = ("tools_tokens", "extension_tokens", "provider_prompt_tokens")
_LEGEND = {"instr": "system + session context", "state": "canonical state", "view": "tokens sent",
           "raw": "whole conversation so far", "first seq": "first event still in the view",
           "prefix": "tokens shared with the previous request (cacheable)",
           "provider": "prompt tokens the provider reported"}


def _cell(r: dict[str, Any], key: str) -> str:
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
    if b["window_source"] == "default":
        whose = f"model {markup(doc['model'])} has no \\[models] entry" if doc["model"] else "the model is unknown"
        con.print(f"[dim]window: Latch's default ({whose} in the config)[/dim]")
    columns = [(h, k) for h, k in _COLUMNS if k not in _OPTIONAL or any(r.get(k) for r in rows)]
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for header, _ in columns:
        t.add_column(header, justify="right")  # numbers stay whole: see Table
    for r in rows:
        t.add_row(*(_cell(r, k) for _, k in columns))
    if Measurement.get(con, con.options.update_width(PIPE_WIDTH), t).maximum > con.options.max_width:
        t.padding = (0, 0, 0, 0)  # one space between columns: the example's 12 columns fit 80
    con.print(t)
    con.print("[dim]tokens ≈; " + "; ".join(f"{h}: {_LEGEND[h]}" for h, _ in columns if h in _LEGEND) + "[/dim]")
    s = doc["summary"]

    def check(ok: bool, text: str) -> None:
        con.print(("[green]✓[/green] " if ok else "[red]✗[/red] ") + text)

    con.print(f"\n[bold]{s['requests']} requests[/bold] · {s['epochs']} cache epoch(s), {s['rotations']} rotation(s) · "
              f"max {s['max_total_tokens']:,} of {s['hard_limit_tokens']:,} tokens")
    con.print(f"conversation {s['conversation_tokens']:,} tokens"
              + (f" · mean cacheability {s['mean_cacheability']:.0%}" if s["mean_cacheability"] is not None else ""))
    v = s["violations"]
    check(not any("hard limit" in x for x in v), "budget never exceeded (window − reserve)")
    check(not any("orphan" in x or "call order" in x for x in v), "no orphaned tool call or result")
    check(not any("split" in x for x in v), "no split unit")
    check(s["prefix_breaks_within_epoch"] == 0,
          f"append-only within each epoch ({s['prefix_breaks_within_epoch']} prefix breaks)")
    check(s["automatic_compactions"] == 0, f"no automatic compaction ({s['automatic_compactions']})")
    if s["hysteretic_epochs"]:
        check(not any("hysteresis" in x for x in v), f"rotations within the hysteresis bound ({s['rotation_bound']})")
    else:
        con.print(f"[blue]i[/blue] {s['rotations']} cache rewrite(s) (no rotation bound: {doc['engine']} does not "
                  f"rotate with hysteresis)")
    if s["overflows"]:
        con.print(f"[yellow]![/yellow] {s['overflows']} request(s) refused with ContextOverflow "
                  f"(a unit larger than the hard budget)")
    for x in v[:20]:
        con.print(f"  [red]{markup(x)}[/red]")
    if len(v) > 20:
        con.print(f"  … {len(v) - 20} more violations")


def _stdout_console() -> Console:
    """Rich console for the report: the terminal's width; full width when piped (see :func:`console`)."""
    return console(highlight=False)


def register(cli: click.Group) -> None:
    @cli.command("replay")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--format", "fmt", default=None, help="Transcript format (default: auto-detect).")
    @click.option("--model", default=None, help="Model id for budgets and the estimator (default: the transcript's).")
    @click.option("--window", type=click.IntRange(min=1, max=MAX_TOKENS), default=None,
                  help="context_window_tokens override.")
    @click.option("--reserve", type=click.IntRange(min=0, max=MAX_TOKENS), default=None,
                  help="reserve_tokens override.")
    @click.option("--recent", type=click.IntRange(min=1, max=MAX_TOKENS), default=None,
                  help="recent_tokens override (lowered to window − reserve when larger).")
    @click.option("--engine", "engine", default=None, help="Context engine plugin (default: [engine] name, "
                                                            "else continuity).")
    @click.option("--estimator", "estimator", default=None,
                  help="Estimator plugin by name, e.g. tiktoken, heuristic-openai, cabi (default: the one the "
                       "plugins select for the model).")
    @click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                  help="Config TOML (default: $LATCH_HOME/config.toml or the user config folder).")
    @click.option("--json", "json_out", type=click.Path(dir_okay=False, allow_dash=True), default=None,
                  callback=output_file, help="Write the per-request report as JSON to this file ('-' for stdout).")
    @click.option("--live", is_flag=True,
                  help="The transcript is still being written: store only its settled events; the open tail "
                       "(e.g. a response still streaming) waits for the next import.")
    @pass_app
    def replay_cmd(app, file, fmt, model, window, reserve, recent, engine, estimator, config_path, json_out, live):
        """Replay FILE: materialize the view before every model request and check the invariants."""
        from ..host.ingest import SessionForgotten, import_file

        config = app.config(config_path)
        # bad options fail before anything is imported
        resolve_engine_factory(engine, config, app.config_file)
        if estimator is not None:
            resolve_estimator_choice(estimator, model)
        if window is not None and reserve is not None and reserve >= window:
            raise click.UsageError(f"--reserve ({reserve}) must be below --window ({window})")
        store = app.store()
        try:
            sid, _, _ = import_file(store, file, fmt, final=not live)
        except SessionForgotten as exc:
            raise click.ClickException(f"{safe(file)}: session {exc.session_id} is forgotten (tombstoned by "
                                       "`latch forget`); forgotten sessions are not replayed") from None
        n_requests = len(_requests(list(store.events(sid, kinds=["assistant_message", "usage"]))))
        options = dict(engine=engine, model=model, estimator=estimator, config=config, window=window,
                       reserve=reserve, recent=recent)
        if n_requests >= PROGRESS_MIN_REQUESTS:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            err = console(stderr=True)
            with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=err, transient=True, disable=not err.is_terminal) as bar:
                task = bar.add_task("replay", total=n_requests)
                doc, _ = run_replay(store, sid, **options,
                                    progress=lambda done, total: bar.update(task, completed=done))
        else:
            doc, _ = run_replay(store, sid, **options)
        if json_out == "-":
            click.echo(dumps(doc, indent=2))
        else:
            _print(_stdout_console(), doc, file)
            if json_out:
                with open(json_out, "w", encoding="utf-8") as f:
                    f.write(dumps(doc, indent=2) + "\n")
        if doc["summary"]["violations"]:
            sys.exit(1)
