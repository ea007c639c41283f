"""``latch context SESSION``: the /context report of the session's next view.

The configured engine materializes the view as of now on the session's main record stream
(``<engine>:main``, the stream an agent resuming the session continues), and the report shows the
token breakdown per component (≈: no provider usage exists for a fresh view), the first retained
seq, the tokens that left working memory since the previous request on that stream, reserve,
headroom, event and episode counts, and status (spec: "Bounded materialization"). The estimator
is the plugins' choice for the model (``latch_select_estimator``) unless ``--estimator NAME``
forces one; the engine gets it and the configuration through its ``EngineProfile``. The window
comes from the configuration's ``[models.NAME]`` entry, else Latch's model table, else Latch's
default (:func:`latch.config.model_window`), and the report says which (``window_source``:
``"config"``, ``"model-table"``, ``"engine"`` or ``"default"`` and ``window_entry`` in ``--json``). The engine is imported
when the command runs, never at module import.

Provider usage is authoritative: the session's estimate correction in effect (:func:`latch.host.corrections.
session_correction`: the largest ``EstimateCorrection`` of its log, else the newest replay run's in the scratch, else
the newest replay kept with ``latch replay --keep``) budgets the view
(the hard limit divided by its ratio) and the report says so: ratio, the provider's and the estimated tokens, the
request it came from and where it is recorded (``correction`` in ``--json``, ``null`` when none).
"""

from __future__ import annotations

import click
from rich.console import Console

from ..cli import pass_app
from ..host.corrections import corrected_budget, session_correction
from ..textsafe import Table, console, dumps, markup
from .replay import resolve_engine_factory, window_line, window_origin
from ..engine.report import context_report
from ..host.loop import HostError, RequestLoop, build_engine

__all__ = ["register"]

_LABELS = (("instructions_tokens", "instructions"), ("state_tokens", "canonical state"),
           ("recent_tokens", "recent conversation"), ("recall_tokens", "recall + episode index"),
           ("tools_tokens", "tools"), ("extension_tokens", "extension"))


def _n(v) -> str:
    return "–" if v is None else f"{v:,}"


def _print(con: Console, rep: dict, engine: str, estimator: str, model: str | None, window_source: str,
           window_entry: str | None = None) -> None:
    approx = "≈ " if rep["approximate"] else ""
    t = Table(title=f"/context · session {markup(rep['session'])} · engine {markup(engine)} · estimator "
                    f"{markup(estimator)} · epoch {rep['epoch']} ({markup(rep['rotation_reason'] or 'n/a')}) · "
                    f"status {markup(rep['status'])}",
              title_justify="left")
    t.add_column("component")
    t.add_column("tokens", justify="right")
    t.add_column("note")
    c = rep["components"]
    for key, label in _LABELS:
        note = ""
        if key == "recent_tokens":
            note = f"first retained seq {_n(rep['first_retained_seq'])}; limit {_n(rep['recent_limit_tokens'])}"
        elif key == "recall_tokens":
            note = f"episode index {approx}{_n(c['episode_tokens'])}"
        t.add_row(label, approx + _n(c[key]), note)
    t.add_row("[bold]total[/bold]", f"[bold]{approx}{_n(rep['total_tokens'])}[/bold]",
              f"of {_n(rep['hard_limit_tokens'])} = window {_n(rep['context_window_tokens'])} − reserve "
              f"{_n(rep['reserve_tokens'])}")
    t.add_row("headroom", approx + _n(rep["headroom_tokens"]), "")
    fix = rep.get("correction")
    t.add_row("left working memory", approx + _n(rep["left_tokens"]), "since the previous request")
    con.print(t)
    con.print(window_line(window_source, window_entry, model))
    if fix:
        at = f"request {fix['request']}" if fix.get("request") else "an earlier request"
        con.print(f"correction in effect: ×{fix['ratio']:.2f} (the provider counted {fix['provider_tokens']:,} tokens "
                  f"for a view estimated at {fix['estimated_tokens']:,}, {at}, {markup(fix['origin'])}); the hard "
                  f"limit {_n(rep['uncorrected_hard_limit_tokens'])} is divided by it", highlight=False)
    else:
        con.print("[dim]correction: none (no provider count above an estimate)[/dim]")
    if rep.get("exact_tokenizer"):
        con.print(f"[dim]tokens exact: {markup(rep['exact_tokenizer'])} (images by the provider's size rule)[/dim]")
    cache = rep["cacheability"]
    con.print(f"events {_n(rep['events'])} · episodes {_n(rep['episodes'])} · messages {_n(rep['messages'])} · "
              f"span {_n(rep['span_user_turns'])} user turn(s) · images {_n(rep['image_count'])} "
              f"({approx}{_n(rep['image_tokens'])} tokens)"
              + (f" · estimated cacheability {cache:.0%}" if cache is not None else ""))


def register(cli: click.Group) -> None:
    @cli.command("context")
    @click.argument("session")
    @click.option("--engine", "engine", default=None, help="Context engine plugin (default: [engine] name, "
                                                            "else continuity).")
    @click.option("--model", default=None, help="Model id for budgets and the estimator (default: the session's).")
    @click.option("--estimator", "estimator", default=None,
                  help="Estimator plugin by name, e.g. tiktoken, heuristic-openai, cabi (default: the one the "
                       "plugins select for the model).")
    @click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                  help="Config TOML (default: $LATCH_HOME/config.toml or the user config folder).")
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    @pass_app
    def context_cmd(app, session, engine, model, estimator, config_path, as_json):
        """The /context report of SESSION's next view: token breakdown, retention, headroom, status."""
        config = app.config(config_path)
        store = app.store(create=False)
        try:
            info = store.session(session)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
        resolve_engine_factory(engine, config, app.config_file)  # an unknown engine names its option or config
        try:
            setup = build_engine(store, info.id, stream=lambda name: f"{name}:main", engine=engine, model=model,
                                 estimator=estimator, config=config)
        except HostError as exc:
            raise click.UsageError(str(exc)) from None
        name, model = setup.engine_name, setup.model
        budget = setup.engine.default_budget()
        fix = session_correction(store, info.id)
        res = RequestLoop(store, info.id, setup, corrected_budget(budget, fix.pair() if fix else None)).run(None)
        if res.view is None:
            raise click.ClickException(f"context overflow: {res.overflow}")
        view = res.view
        rep = context_report(view)
        rep["correction"] = fix.to_json() if fix else None
        rep["uncorrected_hard_limit_tokens"] = budget.hard_limit_tokens
        window_source, window_entry = window_origin(config, model, budget.context_window_tokens, None)
        if as_json:
            click.echo(dumps({"engine": name, "estimator": setup.estimator_name, "model": model,
                              "window_source": window_source, "window_entry": window_entry, **rep}, indent=2))
        else:
            _print(console(highlight=False), rep, name, setup.estimator_name, model, window_source, window_entry)
