"""``latch view SESSION_OR_FILE --request N``: the exact request Latch would send before model request N.

The session (an id or unique prefix of a stored session, or a transcript file, imported first like ``latch
replay`` does; a file holding several sessions, a Goose or OpenCode database or an Aider history (one per
aider run), needs ``--session ID``, an id or
unique prefix: without it the command prints one line listing the session ids with their request counts and
exits 2) is replayed through the host's one request loop (:class:`latch.host.loop.RequestLoop`, built by
:func:`latch.cli.replay.plan_replay` with the same engine, estimator, config and budget options as
``latch replay``; a session ``latch run`` recorded keeps the ``--window``/``--reserve``/``--recent`` it ran
with unless ``--window`` is given) up to request N, and request N's view is printed:

* ``--format openai``: the chat-completions request body (:func:`latch.providers.to_openai_chat`, with the
  model), JSON on stdout; it passes :func:`latch.providers.validate_openai_chat`;
* ``--format anthropic``: the Messages API body exactly as Latch's Anthropic provider sends it
  (:func:`latch.providers.to_anthropic_messages` with the model and ``max_tokens`` = the reserve, then
  :func:`latch.providers.anthropic_request`: its ``cache_control`` breakpoints), JSON on stdout; it passes
  :func:`latch.providers.validate_anthropic_messages`;
* ``--format responses``: the OpenAI Responses API body (:func:`latch.providers.to_responses` with the model:
  ``store`` false, ``include`` the encrypted reasoning), JSON on stdout; it passes
  :func:`latch.providers.validate_responses`;
* ``--format text`` (default): a readable rendering: the request's header (engine, epoch, tokens per
  component, an inferred harness overhead as ``harness (inferred)``, so they sum to the total; the first
  retained event as its position in the session, like ``latch replay``'s ``first seq``, with its store-wide
  seq), the system field, the tools, then every message with its role, kind, seq and tokens. Every
  string from the transcript passes :func:`latch.textsafe.safe` (control and bidi characters shown escaped).

Images are included as the wire formats carry them (base64 of the stored artifact). ``--diff`` prints what
changed since the previous sent request instead (:func:`latch.host.changes.request_changes`: units appended
and evicted, recall added and dropped, KernelContext messages added, whether the cached prefix held, and where
and why it broke), as text followed by the messages after the shared prefix, or with ``--format
openai|anthropic|responses`` as JSON ``{"session", "request", "changes"}``.

Errors: ``--request`` outside ``1..(number of model requests)`` is one line naming the range, exit 2; a
request the engine refuses (:class:`~latch.port.ContextOverflow`) is one line, exit 1. Like ``latch replay``,
the replay's kernel records go to a fresh ``<engine>:replay-<id>`` stream.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from ..events import AssistantMessage
from ..host.changes import request_changes
from ..host.corrections import ReplayCorrections
from ..host.ingest import SessionForgotten, imported_session_ids
from ..host.loop import model_requests
from ..providers import anthropic_request, to_anthropic_messages, to_openai_chat, to_responses
from ..store import EventLog
from ..textsafe import console, dumps, plural, safe
from ..ui.render import header_components, render_changes_text, render_view_text, window_line
from .main import AppContext, pass_app
from .params import Count
from .replay import check_replay_options, event_position, plan_replay, replay_options

__all__ = [
    "RequestOutOfRange",
    "SeveralSessions",
    "header_components",
    "render_view_text",
    "render_changes_text",
    "register",
]

FORMATS = ("text", "openai", "anthropic", "responses")

UNKNOWN_MODEL = "unknown"
"""The ``model`` of a wire body whose transcript names none and no ``--model`` was given (a note says so)."""


class RequestOutOfRange(click.ClickException):
    """``--request N`` outside the session's requests: one line, exit status 2 (a usage error)."""

    exit_code = 2


class SeveralSessions(click.ClickException):
    """A file holding several sessions (a Goose or OpenCode database, an Aider history) and no ``--session``: one
    line listing the session ids with their model-request counts, exit status 2."""

    exit_code = 2


def _request_count(store: EventLog, sid: str) -> int:
    return len(model_requests(store.events(sid, kinds=["assistant_message", "usage"])))


def _pick_session(store: EventLog, file: str, sids: list[str], session: str | None) -> str:
    """The session of ``file`` (imported as ``sids``) to view: the only one, or the one ``session`` (an id or a
    unique prefix) names. Raises :class:`SeveralSessions` (exit 2) listing the sessions and their request counts
    when the file holds several and ``session`` is ``None``, ``click.UsageError`` when ``session`` names none
    or several of them, ``click.ClickException`` when the file holds no session."""

    def listed() -> str:
        return ", ".join(f"{s} ({plural(_request_count(store, s), 'request')})" for s in sids)

    if session is not None:
        chosen = [s for s in sids if s == session] or [s for s in sids if s.startswith(session)]
        if len(chosen) != 1:
            what = "matches several sessions" if chosen else "names no session"
            raise click.UsageError(
                f"--session {safe(session)} {what} of {safe(file)} (its sessions: {listed() or 'none'})"
            )
        return chosen[0]
    if not sids:
        raise click.ClickException(f"{safe(file)}: no session to view")
    if len(sids) > 1:
        raise SeveralSessions(f"{safe(file)} holds {len(sids)} sessions, pick one with --session ID: {listed()}")
    return sids[0]


def register(cli: click.Group) -> None:
    @cli.command("view")
    @click.argument("target", metavar="SESSION_OR_FILE")
    @click.option(
        "--request", "number", type=Count(), required=True, help="Model request number (1-based, as in `latch replay`)."
    )
    @click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="text",
        show_default=True,
        help="openai / anthropic / responses: the wire request body as JSON (Chat Completions, "
        "Messages, Responses API); text: a readable rendering.",
    )
    @click.option("--diff", is_flag=True, help="Show what changed since the previous request instead.")
    @click.option(
        "--from", "transcript_format", default=None, help="Transcript format of a FILE (default: auto-detect)."
    )
    @click.option(
        "--session",
        "session",
        default=None,
        metavar="ID",
        help="A file holding several sessions (a Goose or OpenCode database, an Aider history: one per "
        "aider run): view this one (its Latch "
        "session id or a unique prefix); required for such a file.",
    )
    @replay_options
    @pass_app
    def view_cmd(
        app: AppContext,
        target: str,
        number: int,
        fmt: str,
        diff: bool,
        transcript_format: str | None,
        session: str | None,
        model: str | None,
        window: int | None,
        reserve: int | None,
        recent: int | None,
        engine: str | None,
        estimator: str | None,
        config_path: str | None,
        no_harness: bool,
    ) -> None:
        """The exact request Latch would send at model request N of SESSION_OR_FILE (system, tools, messages)."""
        config = app.config(config_path)
        check_replay_options(
            app, config, engine=engine, estimator=estimator, model=model, window=window, reserve=reserve
        )
        if Path(target).is_file():
            store = app.store()
            forgotten: list[str] = []
            try:
                sids = imported_session_ids(store, target, transcript_format, final=True, forgotten=forgotten)
            except SessionForgotten as exc:
                raise click.ClickException(
                    f"{safe(target)}: session {exc.session_id} is forgotten (tombstoned by `latch forget`)"
                ) from None
            if not sids and forgotten:
                raise click.ClickException(
                    f"{safe(target)}: session {forgotten[0]} is forgotten (tombstoned by `latch forget`)"
                )
            sid = _pick_session(store, target, sids, session)
        else:
            store = app.store(create=False)
            try:
                sid = store.session(target).id
            except KeyError as exc:
                raise click.ClickException(f"{exc.args[0]} (and no file {safe(target)})") from None
            if session is not None and not sid.startswith(session):
                raise click.UsageError(f"--session {safe(session)} is not session {sid} that {safe(target)} names")
        count = _request_count(store, sid)
        if count == 0:
            raise RequestOutOfRange(f"--request {number}: session {sid} has no model request (nothing to view)")
        if not 1 <= number <= count:
            raise RequestOutOfRange(
                f"--request {number} is out of range: session {sid} has {count} model request(s), 1..{count}"
            )
        plan = plan_replay(
            store,
            sid,
            engine=engine,
            model=model,
            estimator=estimator,
            config=config,
            window=window,
            reserve=reserve,
            recent=recent,
            harness=not no_harness,
        )
        last_sent = cur = None
        # provider usage budgets the later views exactly as `latch replay` does (host.corrections)
        fixes = ReplayCorrections(plan.loop, plan.budget, plan.setup.counter, plan.harness, plan.setup.writer)
        for res in plan.loop.replay(plan.requests[:number], None, plan.harness.changes if plan.harness else ()):
            fixes.observe(res)
            if res.request.number < number:
                last_sent = res if res.view is not None else last_sent
            cur = res
        assert cur is not None
        setup = plan.setup
        finish = getattr(setup.writer, "finish", None)
        if finish is not None:  # the scratch run is complete (and dropped by the next prune-replays)
            finish(keep=False)
        if cur.view is None:
            raise click.ClickException(f"request {number} was refused by the engine: {cur.overflow}")
        if diff:
            changes = request_changes(last_sent, cur, plan.loop.units)
            if fmt == "text":
                render_changes_text(console(highlight=False), cur, changes)
            else:
                click.echo(dumps({"session": sid, "request": number, "changes": changes}, indent=2))
            return
        loader = lambda sha256: store.get_artifact(sha256)[1]  # noqa: E731
        # a transcript without tool schemas: every request declares the session's whole tool vocabulary
        known = list(
            dict.fromkeys(
                c.name
                for s in store.events(sid, kinds=[AssistantMessage.KIND])
                if isinstance(s.event, AssistantMessage)
                for c in s.event.tool_calls
            )
        )
        wire_model = setup.model or UNKNOWN_MODEL  # every body names a model (the providers require one)
        if fmt in ("openai", "anthropic", "responses") and not setup.model:
            click.echo(
                f'note: the transcript names no model; the body says "model": "{UNKNOWN_MODEL}" (pass --model NAME)',
                err=True,
            )
        if fmt == "openai":
            click.echo(dumps(to_openai_chat(cur.view, loader, model=wire_model, known_tools=known), indent=2))
        elif fmt == "anthropic":
            reserve_tokens = plan.budget.reserve_tokens
            body = to_anthropic_messages(
                cur.view, loader, model=wire_model, max_tokens=reserve_tokens or None, known_tools=known
            )
            click.echo(dumps(anthropic_request(body, wire_model), indent=2))
        elif fmt == "responses":
            click.echo(dumps(to_responses(cur.view, loader, model=wire_model, known_tools=known), indent=2))
        else:
            where = Text.from_markup(window_line(plan.window_source, plan.window_entry, setup.model)).plain
            render_view_text(
                console(highlight=False),
                cur,
                total_requests=count,
                session=sid,
                engine=setup.engine_name,
                estimator=setup.estimator_name,
                model=setup.model,
                window=where.removeprefix("window: "),
                first_retained_event=event_position(plan.event_seqs, cur.view.first_retained_seq),
            )
