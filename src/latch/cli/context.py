"""``latch context SESSION``: the /context report of the session's next view, read-only.

The configured engine materializes the view as of now on the session's main record stream
(``<engine>:main``, the stream an agent resuming the session continues) through an in-memory overlay
(:class:`latch.host.session.OverlayKernelWriter`, built by :func:`latch.cli.replay.plan_replay` with
``overlay_main``): the engine sees every record already on the stream and the records it writes are dropped
with the report, so the command never changes the store (no kernel record, no token count) and a later
``latch run --resume`` continues the stream as it was. The request carries the session's harness like
``latch replay`` (:func:`latch.host.harness.session_harness`: a recorded system prompt and tools in the
``instructions`` and ``tools`` rows, an overhead inferred from provider usage as its own row ``harness
(inferred)``; a ``latch run`` session's latest recorded prompt) and the budget a resumed ``latch run`` gets (its
recorded ``--window``/``--reserve``/``--recent``, else the engine's default).

The report shows the token breakdown per component (≈: no provider usage exists for a fresh view), the first
retained event (its position in the session; ``first_retained_seq`` in ``--json`` is store-wide and
``first_retained_event`` the position), the tokens that left working memory since the previous request on that
stream, reserve, headroom, event and episode counts, the estimated cacheability against the stream's previous
view (``None``, "n/a", when the stream holds no earlier view) and status (spec: "Bounded materialization"). The
estimator is the plugins' choice for the model (``latch_select_estimator``) unless ``--estimator NAME`` forces
one. The window is the model's real one: the configuration's ``[models.NAME]`` entry, else Latch's model table,
else Latch's default (:func:`latch.config.model_window`), and the report says which (``window_source``:
``"config"``, ``"model-table"``, ``"engine"``, ``"run"`` or ``"default"`` and ``window_entry`` in ``--json``).

Provider usage is authoritative: the session's estimate correction in effect (:func:`latch.host.corrections.
session_correction`: the largest ``EstimateCorrection`` of its log, else the newest replay run's in the scratch, else
the newest replay kept with ``latch replay --keep``) budgets the view (the hard limit divided by its ratio) and the
report says so, apart from the window: ``context_window_tokens`` is the real window, ``uncorrected_hard_limit_tokens``
``window - reserve``, ``hard_limit_tokens`` the limit the view was held to and ``corrected_hard_limit_tokens`` the same
when a correction lowered it (``None`` without one); ``correction``: ratio, the provider's and the estimated tokens,
the request it came from and where it is recorded (``null`` when none).
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console

from ..engine.context_report import context_report
from ..host.corrections import corrected_budget, session_correction, session_rate
from ..host.harness import Harness
from ..store import EventStore
from ..textsafe import Table, console, dumps, markup
from .main import AppContext, pass_app
from .replay import event_position, harness_doc, harness_line, plan_replay, resolve_engine_factory, window_line

__all__ = ["register", "next_view_report"]

_LABELS = (
    ("instructions_tokens", "instructions"),
    ("state_tokens", "canonical state"),
    ("recent_tokens", "recent conversation"),
    ("recall_tokens", "recall + episode index"),
    ("tools_tokens", "tools"),
    ("extension_tokens", "extension"),
    ("harness_tokens", "harness (inferred)"),
)


def _n(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def _print(
    con: Console,
    rep: dict[str, Any],
    engine: str,
    estimator: str,
    model: str | None,
    window_source: str,
    window_entry: str | None = None,
) -> None:
    approx = "≈ " if rep["approximate"] else ""
    t = Table(
        title=f"/context · session {markup(rep['session'])} · engine {markup(engine)} · estimator "
        f"{markup(estimator)} · epoch {rep['epoch']} ({markup(rep['rotation_reason'] or 'n/a')}) · "
        f"status {markup(rep['status'])}",
        title_justify="left",
    )
    t.add_column("component")
    t.add_column("tokens", justify="right")
    t.add_column("note")
    c = rep["components"]
    h = rep.get("harness") or {}
    for key, label in _LABELS:
        note = ""
        if key == "harness_tokens" and not c[key]:
            continue  # no inferred harness: no row
        if key == "instructions_tokens" and h.get("source", "").startswith("recorded") and h.get("notes"):
            note = f"the transcript's system prompt ({h['notes']} note(s)) + session context"
        elif key == "tools_tokens" and h.get("source", "").startswith("recorded") and h.get("tools"):
            note = f"the transcript's {h['tools']} tool schema(s)"
        elif key == "harness_tokens":
            note = "not in the transcript: provider prompt − transcript"
        elif key == "recent_tokens":
            note = (
                f"first retained event {_n(rep['first_retained_event'])} (seq {_n(rep['first_retained_seq'])}); "
                f"limit {_n(rep['recent_limit_tokens'])}"
            )
        elif key == "recall_tokens":
            note = f"episode index {approx}{_n(c['episode_tokens'])}"
        t.add_row(label, approx + _n(c[key]), note)
    corrected = rep.get("corrected_hard_limit_tokens")
    limit = (
        f"of {_n(rep['hard_limit_tokens'])} = window {_n(rep['context_window_tokens'])} − reserve "
        f"{_n(rep['reserve_tokens'])}"
        if corrected is None
        else f"of {_n(corrected)} (corrected hard limit; window {_n(rep['context_window_tokens'])} − reserve "
        f"{_n(rep['reserve_tokens'])} = {_n(rep['uncorrected_hard_limit_tokens'])})"
    )
    t.add_row("[bold]total[/bold]", f"[bold]{approx}{_n(rep['total_tokens'])}[/bold]", limit)
    t.add_row("headroom", approx + _n(rep["headroom_tokens"]), "")
    fix = rep.get("correction")
    t.add_row("left working memory", approx + _n(rep["left_tokens"]), "since the previous request")
    con.print(t)
    con.print(window_line(window_source, window_entry, model))
    line = harness_line(rep)
    if line:
        con.print(line)
    if fix:
        at = f"request {fix['request']}" if fix.get("request") else "an earlier request"
        con.print(
            f"correction in effect: ×{fix['ratio']:.2f} (the provider counted {fix['provider_tokens']:,} tokens "
            f"for a view estimated at {fix['estimated_tokens']:,}, {at}, {markup(fix['origin'])}); the hard "
            f"limit {_n(rep['uncorrected_hard_limit_tokens'])} is divided by it: "
            f"{_n(rep['hard_limit_tokens'])}",
            highlight=False,
        )
    else:
        con.print("[dim]correction: none (no provider count above an estimate)[/dim]")
    rate = rep.get("provider_rate")
    if rate:
        con.print(
            f"usable share of the real window: {rep['usable_share']:.0%} in the provider's tokens (rate "
            f"{rate['rate']:.2f} per estimated token + {rate['intercept_tokens']:,}, fitted over "
            f"{rate['requests']:,} requests by {markup(rate['origin'])}); a run budgets on the provider's rate "
            f"from its third request",
            highlight=False,
        )
    if rep.get("exact_tokenizer"):
        con.print(f"[dim]tokens exact: {markup(rep['exact_tokenizer'])} (images by the provider's size rule)[/dim]")
    cache = rep["cacheability"]
    con.print(
        f"events {_n(rep['events'])} · episodes {_n(rep['episodes'])} · messages {_n(rep['messages'])} · "
        f"span {_n(rep['span_user_turns'])} user turn(s) · images {_n(rep['image_count'])} "
        f"({approx}{_n(rep['image_tokens'])} tokens) · estimated cacheability "
        + (f"{cache:.0%}" if cache is not None else "n/a (no earlier view on the stream)")
    )


def next_view_report(
    store: EventStore,
    session_id: str,
    *,
    engine: str | None = None,
    model: str | None = None,
    estimator: str | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The /context report (JSON-ready, the ``--json`` document) of ``session_id``'s next view, computed without
    writing to ``store`` (see the module docstring). Raises ``click.UsageError`` for an unknown engine or
    estimator or a bad budget, ``click.ClickException`` when the engine refuses the view (context overflow)."""
    plan = plan_replay(
        store, session_id, engine=engine, model=model, estimator=estimator, config=config, overlay_main=True
    )
    setup, loop, budget = plan.setup, plan.loop, plan.budget
    harness: Harness | None = plan.harness
    if harness is not None and harness.changes:  # a resumed latch run sends its latest prompt
        last = harness.changes[-1]
        loop.system_prompt, loop.tools, loop.session_context = last.system, tuple(last.tools), last.session_context
    fix = session_correction(store, session_id)
    loop.set_budget(corrected_budget(budget, fix.pair() if fix else None))
    res = loop.run(None)
    if res.view is None:
        raise click.ClickException(f"context overflow: {res.overflow}")
    view = res.view
    rep = context_report(view)
    rep["context_window_tokens"] = budget.context_window_tokens  # the model's window, never the corrected one
    rep["uncorrected_hard_limit_tokens"] = budget.hard_limit_tokens
    rep["corrected_hard_limit_tokens"] = loop.hard if fix else None
    rep["hard_limit_tokens"] = loop.hard
    rep["headroom_tokens"] = loop.hard - view.tokens.total_tokens
    rep["first_retained_event"] = event_position(plan.event_seqs, view.first_retained_seq)
    if not getattr(setup.writer, "stored", 1):  # nothing earlier on the stream: no prefix to share
        rep["cacheability"] = None
    rep["correction"] = fix.to_json() if fix else None
    rate = session_rate(store, session_id)
    rep["provider_rate"] = rate
    # the hard limit counted in the provider's tokens, over the real one: how much of the window a view may use
    rep["usable_share"] = (
        round((rate["intercept_tokens"] + rate["rate"] * loop.hard) / budget.hard_limit_tokens, 4)
        if rate and budget.hard_limit_tokens > 0
        else None
    )
    rep["harness"] = harness_doc(harness, setup.counter)
    return {
        "engine": setup.engine_name,
        "estimator": setup.estimator_name,
        "model": setup.model,
        "stream": setup.writer.stream,
        "window_source": plan.window_source,
        "window_entry": plan.window_entry,
        **rep,
    }


def register(cli: click.Group) -> None:
    @cli.command("context")
    @click.argument("session")
    @click.option(
        "--engine", "engine", default=None, help="Context engine plugin (default: [engine] name, else continuity)."
    )
    @click.option("--model", default=None, help="Model id for budgets and the estimator (default: the session's).")
    @click.option(
        "--estimator",
        "estimator",
        default=None,
        help="Estimator plugin by name, e.g. tiktoken, heuristic-openai, cabi (default: the one the "
        "plugins select for the model).",
    )
    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config TOML (default: $LATCH_HOME/config.toml or the user config folder).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    @pass_app
    def context_cmd(
        app: AppContext,
        session: str,
        engine: str | None,
        model: str | None,
        estimator: str | None,
        config_path: str | None,
        as_json: bool,
    ) -> None:
        """The /context report of SESSION's next view: token breakdown, retention, headroom, status."""
        config = app.config(config_path)
        store = app.store(create=False)
        try:
            info = store.session(session)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
        resolve_engine_factory(engine, config, app.config_file)  # an unknown engine names its option or config
        doc = next_view_report(store, info.id, engine=engine, model=model, estimator=estimator, config=config)
        if as_json:
            click.echo(dumps(doc, indent=2))
        else:
            _print(
                console(highlight=False),
                doc,
                doc["engine"],
                doc["estimator"],
                doc["model"],
                doc["window_source"],
                doc["window_entry"],
            )
