"""``latch state``, ``latch evidence``, ``latch forget`` (spec: "Sessions & continuity")."""

from __future__ import annotations

import click

from ..config import MAX_TOKENS
from ..host.kernel import kernel_cache
from ..host.state_text import evidence_lines, evidence_status, state_lines
from ..kernel import StateOverflow, canonical_state
from ..kernel.tombstones import forget_session, tombstoned_sessions
from ..store import EventLog
from ..textsafe import Table, cell, console, dumps, echo, plural, safe
from .main import AppContext, pass_app
from .params import Count


def _session_id(store: EventLog, session: str) -> str:
    try:
        return store.session(session).id
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from None


def _forget_target(store: EventLog, session: str) -> str:
    """The session ``forget`` means: an exact id, else the one visible (not yet forgotten) session the
    prefix names, else the one forgotten session it names. ``ClickException`` when empty, none or ambiguous."""
    if not session.strip():
        raise click.ClickException("empty session id")
    ids = [s.id for s in store.sessions() if s.id.startswith(session)]
    if session in ids:
        return session
    if not ids:
        raise click.ClickException(f"no session {session!r}")
    dead = tombstoned_sessions(store)
    visible = [i for i in ids if i not in dead]
    if len(visible) == 1 or len(ids) == 1:
        return (visible or ids)[0]
    if visible:
        raise click.ClickException(f"session prefix {session!r} is ambiguous ({len(visible)} sessions)")
    raise click.ClickException(f"session prefix {session!r} names {plural(len(ids), 'session')}, all already forgotten")


def register(cli: click.Group) -> None:
    @cli.command("state")
    @click.argument("session")
    @click.option("--json", "as_json", is_flag=True, help="Print the whole state as JSON.")
    @click.option(
        "--until", "until_seq", type=Count(min=0), default=None, help="Reduce the log only up to this global seq."
    )
    @click.option(
        "--budget",
        type=click.IntRange(min=1, max=MAX_TOKENS),
        default=None,
        help="Render within this many estimated tokens (default: everything).",
    )
    @pass_app
    def state_cmd(app: AppContext, session: str, as_json: bool, until_seq: int | None, budget: int | None) -> None:
        """Show the canonical state (L1) of SESSION: derived files, mutations, generation, evidence, failures."""
        store = app.store(create=False)
        state = canonical_state(store, _session_id(store, session), until_seq, cache=kernel_cache())
        if as_json:
            click.echo(dumps(state.to_json(), indent=2))
            return
        con = console(highlight=False, soft_wrap=True)
        try:
            lines = state_lines(state, budget)
        except StateOverflow as exc:
            raise click.ClickException(str(exc)) from None
        con.print(lines[0], markup=False)
        con.print(safe("\n".join(lines[1:]), multiline=True), markup=False)

    @cli.command("evidence")
    @click.argument("session")
    @click.option("--json", "as_json", is_flag=True, help="Print evidence and the verdict as JSON.")
    @pass_app
    def evidence_cmd(app: AppContext, session: str, as_json: bool) -> None:
        """Show SESSION's validation evidence (current and stale) and the certification verdict."""
        store = app.store(create=False)
        state = canonical_state(store, _session_id(store, session), cache=kernel_cache())
        if as_json:
            click.echo(
                dumps(
                    {
                        "generation": state.generation,
                        "evidence": list(state.evidence),
                        "processes": list(state.processes),
                        "certification": state.certification,
                    },
                    indent=2,
                )
            )
            return
        con = console(highlight=False, soft_wrap=True)
        report = evidence_status(state)
        t = Table(
            "requirement",
            "status",
            "generation",
            "state",
            "set",
            title=f"evidence · workspace generation {state.generation:,}",
        )
        for r in report["requirements"]:
            t.add_row(
                cell(r["requirement"]),
                cell(r["status"]),
                f"{r['generation']:,}",
                "current" if r["current"] else "STALE",
                str(r["set"]),
            )
        con.print(t)
        for line in evidence_lines(report)[1 + max(1, len(report["requirements"])) :]:
            con.print(safe(line), markup=False)

    @cli.command("forget")
    @click.argument("session")
    @click.option("--reason", default="", help="Why (kept in the tombstone).")
    @pass_app
    def forget_cmd(app: AppContext, session: str, reason: str) -> None:
        """Tombstone SESSION: history and resume omit it; its events, children and artifacts stay."""
        store = app.store()
        sid, seq = forget_session(store, _forget_target(store, session), reason)
        if seq is None:
            echo(f"session {sid} was already tombstoned; nothing appended")
        else:
            echo(
                f"session {sid} tombstoned (seq {seq}): `latch sessions` and `latch search` omit it and its "
                "children; events, artifacts and workspace generation are unchanged"
            )
