"""``latch report SESSION_OR_FILE...``: what sessions cost, like ccusage: requests, tokens by kind, dollars.

Each argument is a transcript file (imported first, idempotently, like ``latch replay``: every session of it,
as a Goose or OpenCode database or an Aider history holds several; its forgotten sessions are skipped) or a stored session
(id or unique prefix). A session's sub-agent sessions (its children in the store, e.g. Claude Code's
``subagents/`` files) count with it. Every model request (:func:`latch.host.loop.model_requests`) counts
once; its provider usage gives the tokens by kind (uncached input, cache read, cache write, output: Latch's
normalized :class:`~latch.events.Usage`) and its price (:func:`latch.accounting.pricing.price_usage`, genai-prices'
bundled table, at the request's timestamp). A request without usage, or of a model genai-prices has no price
for, is counted as *unpriced*; its tokens still count. The cache-read share is cache-read tokens over all
prompt tokens (uncached + cache read + cache write) of the rows' requests.

With no argument every session of the store counts (forgotten ones left out). ``--daily``/``--monthly`` (the
request's local day or month) or ``--by project|model|harness`` make the rows those groups instead of models
(``"group_by"`` and ``"groups": {KEY: ROW}`` in the JSON); ``--since``/``--until`` (local days, both included)
count only the requests made in between.

Output: one row per model and a total (and one row per session when there are several), every number whole:
on a narrow terminal the cache-read share, priced and cache-write columns are left out (in that order, said in
a footer, :func:`latch.textsafe.fitted_table`); ``--json`` prints
``{"sessions": [...], "named_sessions": [...], "child_sessions": [...], "models": {MODEL: ROW}, "by_session":
{ID: ROW}, "total": ROW}`` (``sessions``: every session counted, the named ones and their sub-agent sessions;
``named_sessions``: those the arguments name; ``child_sessions``: the sub-agent sessions added) where a ROW is
``{"requests", "with_usage", "priced", "unpriced", "uncached_input_tokens", "cache_read_tokens",
"cache_write_tokens", "output_tokens", "usd" (None when nothing was priced), "cache_read_share"}``, and
``"cache_rewrites": {"by_session": {ID: {"requests", "rewrites" (request numbers), "rewrite_write_tokens",
"write_tokens", "share"}}, "total": {the same, "rewrites" a count} or None}``: the requests that wrote the cached
prefix again (:func:`latch.accounting.pricing.cache_rewrites`; sessions whose provider reports no cache writes have
none). A forgotten
session, an unknown id or an unreadable file is one error line (exit 1) and nothing is reported.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from ..accounting import pricing
from ..accounting.pricing import format_usd, usd
from ..host.ingest import SessionForgotten, imported_session_ids
from ..host.loop import model_requests
from ..kernel.tombstones import tombstoned_sessions
from ..store import EventLog, EventStore
from ..textsafe import Column, console, dumps, fitted_table, markup, plural, safe
from .main import AppContext, pass_app

__all__ = ["register", "session_report"]


def _row() -> dict[str, Any]:
    return {
        "requests": 0,
        "with_usage": 0,
        "priced": 0,
        "unpriced": 0,
        "uncached_input_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": 0,
        "usd": None,
    }


def _add(row: dict[str, Any], usage: Any, cost: Any) -> None:
    row["requests"] += 1
    if usage is not None:
        row["with_usage"] += 1
        row["uncached_input_tokens"] += usage.input_tokens or 0
        row["cache_read_tokens"] += usage.cache_read_tokens or 0
        row["cache_write_tokens"] += usage.cache_write_tokens or 0
        row["output_tokens"] += usage.output_tokens or 0
    if cost is None:
        row["unpriced"] += 1
    else:
        row["priced"] += 1
        row["usd"] = (row["usd"] or Decimal(0)) + cost.usd


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    prompt = row["uncached_input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
    return {
        **row,
        "usd": usd(row["usd"]),
        "cache_read_share": round(row["cache_read_tokens"] / prompt, 4) if prompt else None,
    }


GROUPINGS = ("daily", "monthly", "project", "model", "harness")
"""What ``groups`` rows can be keyed by: the request's local day or month, its session's workspace or harness, its
model."""


def _group_key(grouping: str, info: Any, name: str, at: datetime | None) -> str:
    if grouping in ("daily", "monthly"):
        if at is None:
            return "undated"
        return at.astimezone().strftime("%Y-%m-%d" if grouping == "daily" else "%Y-%m")
    if grouping == "project":
        return (info.workspace if info is not None else None) or "(no workspace)"
    if grouping == "harness":
        return (info.format if info is not None else None) or "(unknown)"
    return name


def session_report(
    store: EventLog,
    session_ids: list[str],
    *,
    group_by: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """The report document (see the module docstring) of ``session_ids`` and their sub-agent sessions.

    ``group_by`` (one of :data:`GROUPINGS`) adds ``"group_by"`` and ``"groups": {KEY: ROW}`` (sorted by key);
    ``since``/``until`` (aware datetimes, ``until`` excluded) count only the requests made in between (a request
    without a timestamp is then left out)."""
    children: dict[str, list[str]] = {}
    for s in store.sessions():
        if s.parent_id:
            children.setdefault(s.parent_id, []).append(s.id)
    order: list[str] = []
    todo = list(session_ids)
    while todo:
        sid = todo.pop(0)
        if sid not in order:
            order.append(sid)
            todo.extend(sorted(children.get(sid, ())))
    models: dict[str, dict[str, Any]] = {}
    by_session: dict[str, dict[str, Any]] = {}
    total = _row()
    rewrites: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    infos = {s.id: s for s in store.sessions()} if group_by in ("project", "harness") else {}
    for sid in order:
        srow = by_session.setdefault(sid, _row())
        usages: list[Any] = []
        for req in model_requests(store.events(sid, kinds=["assistant_message", "usage"])):
            at = pricing.parse_timestamp(req.ts)
            if (since is not None or until is not None) and (
                at is None or (since is not None and at < since) or (until is not None and at >= until)
            ):
                continue
            usage = req.usage
            usages.append(usage)
            cost = pricing.price_usage(usage, req.model, at=at)
            name = cost.model_id if cost is not None else (req.model or "unknown")
            rows = [models.setdefault(name, _row()), srow, total]
            if group_by is not None:
                rows.append(groups.setdefault(_group_key(group_by, infos.get(sid), name, at), _row()))
            for row in rows:
                _add(row, usage, cost)
        rewrites[sid] = pricing.cache_rewrites(usages)
    named = list(dict.fromkeys(session_ids))
    found = [r for r in rewrites.values() if r.requests]
    all_rewrites = pricing.CacheRewrites(
        sum(r.requests for r in found),
        (),
        sum(r.rewrite_write_tokens for r in found),
        sum(r.write_tokens for r in found),
    )
    doc: dict[str, Any] = (
        {} if group_by is None else {"group_by": group_by, "groups": {k: _finish(r) for k, r in sorted(groups.items())}}
    )
    return {
        **doc,
        "sessions": order,
        "named_sessions": named,
        "child_sessions": [sid for sid in order if sid not in named],
        "models": {m: _finish(r) for m, r in sorted(models.items())},
        "by_session": {s: _finish(r) for s, r in by_session.items()},
        "total": _finish(total),
        "cache_rewrites": {
            "by_session": {s: r.as_dict() for s, r in rewrites.items() if r.requests},
            "total": {**all_rewrites.as_dict(), "rewrites": sum(len(r.rewrites) for r in found)} if found else None,
        },
    }


def _resolve(app: AppContext, store: EventStore, arg: str) -> list[str]:
    """The session ids ``arg`` names: every session of a transcript file (a Goose or OpenCode database
    or an Aider history holds several; forgotten ones are skipped, all forgotten is an error), or the one stored session."""
    if Path(arg).is_file():
        forgotten: list[str] = []
        try:
            imported = imported_session_ids(store, arg, None, final=True, forgotten=forgotten)
        except SessionForgotten as exc:
            forgotten.append(exc.session_id)
            imported = []
        if not imported and forgotten:
            raise click.ClickException(
                f"{safe(arg)}: session {forgotten[0]} is forgotten (tombstoned by "
                "`latch forget`); forgotten sessions are not reported"
            ) from None
        return [str(sid) for sid in imported]
    try:
        sid = store.session(arg).id
    except KeyError as exc:
        raise click.ClickException(f"{safe(str(exc.args[0]))} (and no such file)") from None
    if sid in tombstoned_sessions(store):
        raise click.ClickException(
            f"session {sid} is forgotten (tombstoned by `latch forget`); forgotten sessions are not reported"
        )
    return [str(sid)]


_HEAD = (
    ("requests", "requests"),
    ("priced", "priced"),
    ("uncached_input_tokens", "input"),
    ("cache_read_tokens", "cache read"),
    ("cache_write_tokens", "cache write"),
    ("output_tokens", "output"),
    ("usd", "cost"),
    ("cache_read_share", "cache-read share"),
)


def _cells(row: dict[str, Any]) -> list[str]:
    out = []
    for key, _ in _HEAD:
        v = row[key]
        if key == "usd":
            out.append(format_usd(v))
        elif key == "cache_read_share":
            out.append("–" if v is None else f"{v:.1%}")
        else:
            out.append(f"{v:,}")
    return out


# left out first when the table does not fit (said in a footer): the cells the other columns imply least
_OPTIONAL = {"cache_read_share": 1, "priced": 2, "cache_write_tokens": 3}


def _table(con: Any, first: str, rows: list[list[Any]]) -> list[str]:
    """Print one report table (``first``: its first column's header); returns the headers left out."""
    cols = [Column(first), *(Column(h, justify="right", optional=_OPTIONAL.get(k, 0)) for k, h in _HEAD)]
    t, dropped = fitted_table(con, cols, rows)
    con.print(t)
    return dropped


def _print(con: Any, doc: dict[str, Any]) -> None:
    grouping = doc.get("group_by")
    if grouping is not None:
        rows = [[markup(k), *_cells(r)] for k, r in doc["groups"].items()]
        first = {"daily": "day", "monthly": "month"}.get(grouping, grouping)
        dropped = _table(con, first, [*rows, ["[bold]total[/bold]", *_cells(doc["total"])]])
    else:
        rows = [[markup(m), *_cells(r)] for m, r in doc["models"].items()]
        dropped = _table(con, "model", [*rows, ["[bold]total[/bold]", *_cells(doc["total"])]])
    if len(doc["by_session"]) > 1 and grouping is None and not doc.get("every_session"):
        dropped += [
            h
            for h in _table(con, "session", [[sid, *_cells(r)] for sid, r in doc["by_session"].items()])
            if h not in dropped
        ]
    if dropped:
        con.print(
            f"[dim]{', '.join(dropped)} left out (too narrow): `latch report --json` has every column[/dim]",
            highlight=False,
        )
    tot = doc["total"]
    if tot["unpriced"]:
        bare = tot["requests"] - tot["with_usage"]
        why = [f"{bare:,} without provider usage"] if bare else []
        if tot["unpriced"] - bare:
            why.append(
                f"{tot['unpriced'] - bare:,} of a model genai-prices has no price for, or without input or "
                "output counts"
            )
        con.print(
            f"[dim]{tot['unpriced']:,} of {tot['requests']:,} request(s) unpriced ({'; '.join(why)}); their "
            "tokens still count[/dim]"
        )
    rw = doc["cache_rewrites"]["total"]
    if rw and rw["write_tokens"]:
        con.print(
            f"cache rewrites: {rw['rewrites']:,} of {rw['requests']:,} request(s) wrote the cached prefix again: "
            f"{rw['rewrite_write_tokens']:,} of {rw['write_tokens']:,} cache-write tokens ({rw['share']:.1%}) "
            "[dim](the provider's cache had lost the prefix: `latch replay` names the requests)[/dim]",
            highlight=False,
        )
    con.print(
        "[dim]input: uncached prompt tokens; cache-read share: cache reads over all prompt tokens; "
        "prices: genai-prices' bundled table (offline)[/dim]"
    )


def register(cli: click.Group) -> None:
    @cli.command("report")
    @click.argument("targets", nargs=-1, metavar="[SESSION_OR_FILE]...")
    @click.option("--daily", "period", flag_value="daily", help="One row per day (local time) of the requests.")
    @click.option("--monthly", "period", flag_value="monthly", help="One row per month (local time).")
    @click.option(
        "--by",
        type=click.Choice(["project", "model", "harness"]),
        default=None,
        help="One row per project (workspace), model or harness.",
    )
    @click.option(
        "--since",
        type=click.DateTime(formats=["%Y-%m-%d"]),
        default=None,
        help="Only requests on or after this day (YYYY-MM-DD, local time).",
    )
    @click.option(
        "--until",
        type=click.DateTime(formats=["%Y-%m-%d"]),
        default=None,
        help="Only requests on or before this day (YYYY-MM-DD, local time).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    @pass_app
    def report_cmd(
        app: AppContext,
        targets: tuple[str, ...],
        period: str | None,
        by: str | None,
        since: datetime | None,
        until: datetime | None,
        as_json: bool,
    ) -> None:
        """What sessions cost: requests, tokens by kind, dollars and cache-read share, per model (like ccusage).
        SESSION_OR_FILE is a stored session (id or prefix) or a transcript file (imported first); none: every
        session of the store (forgotten ones left out)."""
        if period is not None and by is not None:
            raise click.UsageError(f"--{period} and --by {by} both choose the rows; give one")
        if since is not None and until is not None and since > until:
            raise click.UsageError(f"--since {since:%Y-%m-%d} is after --until {until:%Y-%m-%d}")
        store = app.store(create=bool(targets))
        ids: list[str] = []
        for arg in targets:
            for sid in _resolve(app, store, arg):
                if sid not in ids:
                    ids.append(sid)
        if not targets:
            dead = tombstoned_sessions(store)
            every = store.sessions()
            known = {s.id for s in every}
            ids = [s.id for s in every if s.id not in dead and (s.parent_id is None or s.parent_id not in known)]
        start = None if since is None else since.astimezone()
        end = None if until is None else (until + timedelta(days=1)).astimezone()
        doc = session_report(store, ids, group_by=period or by, since=start, until=end)
        if not targets:
            doc["every_session"] = True
        if as_json:
            click.echo(dumps(doc, indent=2))
            return
        con = console(highlight=False)
        if not targets:
            con.print(
                f"[bold]every session[/bold]: {plural(len(doc['sessions']), 'session')} · "
                f"{plural(doc['total']['requests'], 'request', fmt=',')}"
            )
            _print(con, doc)
            return
        named, added = doc["named_sessions"], doc["child_sessions"]
        counted = plural(len(named), "session") + (f" (+{plural(len(added), 'child session')})" if added else "")
        con.print(
            f"[bold]{counted}[/bold] · {plural(doc['total']['requests'], 'request', fmt=',')} · "
            f"{markup(', '.join(named))}" + (f" · child sessions: {markup(', '.join(added))}" if added else "")
        )
        _print(con, doc)
