"""``latch sessions``: the sessions of this workspace's store, newest first, each told apart at a glance.

Each session is two lines, at most 80 columns whatever the terminal or pipe::

    8463c716  2026-08-05 14:02  claude-sonnet-4-5 · 39 requests · $1.23 · done
              claude-code: Fix the rounding in invoice totals

the shortest unique id prefix of at least 8 characters (``latch show`` takes it), the local start time (or
``(undated)``: no event has a timestamp), then :class:`latch.host.summaries.SessionSummary`'s model, requests,
cost (``+``: some requests unpriced) and status, and on the second line the harness and the title (cut with
``…``; transcript text made :func:`~latch.textsafe.safe`). A child session (a sub-agent)
is listed under its parent, indented with ``└``; tombstoned sessions are omitted. Filters: ``--harness``
(the format, e.g. ``codex``), ``--since`` (started on or after that local day), ``--project`` (a substring of the
workspace path or source); a child whose parent is filtered out is listed at the top level.

The store is per workspace (:func:`latch.store.default_db_path`, under :func:`latch.store.data_dir`): an empty
one says so and how many other stores there are; ``--all-workspaces`` lists every store of the data folder
(path, workspace, sessions, last activity). ``--json`` prints the summaries
(:meth:`~latch.host.summaries.SessionSummary.as_dict`, plus ``first_seq``, ``last_seq``, ``format``, ``created_at``,
``depth`` and a child's ``child`` link).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.cells import cell_len, set_cell_size

from ..agent.children import child_link, child_result
from ..host.summaries import ID_CHARS, SessionSummary, session_tree, short_ids, summarize
from ..kernel.tombstones import tombstoned_sessions
from ..store import EventLog, EventStore, StoreError, data_dir
from ..textsafe import console, dumps, plural, safe
from .main import AppContext, pass_app

__all__ = ["register", "short_ids", "WIDTH"]

WIDTH = 80
"""Columns of every line ``latch sessions`` prints."""


def child_doc(store: EventLog, session_id: str) -> dict[str, Any] | None:
    """A child session's link and report for ``latch sessions``: ``{"call_id", "brief", "report": {"status",
    "summary"} | None}`` (:func:`latch.agent.children.child_link`), or ``None`` when no tool call links it."""

    link = child_link(store, session_id)
    if link is None:
        return None
    report = child_result(store, session_id)
    return {
        "call_id": link.call_id,
        "brief": _cut(" ".join(link.brief.split()), 100),
        "report": None
        if report is None
        else {"status": report.status, "summary": _cut(" ".join(report.summary.split()), 100)},
    }


def _local(t: datetime | None) -> str:
    return "(undated)       " if t is None else t.astimezone().strftime("%Y-%m-%d %H:%M")  # = started_text()


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` terminal cells (a CJK character takes two), cut with ``…``."""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, max(0, width - 1)).rstrip() + "…"


def _facts(s: SessionSummary, room: int) -> str:
    """Model · requests · cost · status in ``room`` columns: the model name is cut with ``…`` first, so the
    numbers and the status always show."""
    cost = s.cost_text()
    rest = [plural(s.requests, "request", fmt=","), cost, s.status]
    model = safe(s.model or "no model")
    over = cell_len(model) + len(" · ".join(rest)) + len(" · ") - room
    if over > 0:
        model = _cut(model, max(6, cell_len(model) - over))
    return " · ".join([model, *rest])


def _lines(s: SessionSummary, short: str, depth: int) -> list[str]:
    lead = "" if depth == 0 else "  " * (depth - 1) + "└ "
    head = f"{lead}{safe(short)}  {_local(s.started)}  "
    first = head + _facts(s, WIDTH - len(head))
    indent = " " * (len(lead) + max(len(short), ID_CHARS) + 2)
    title = safe(s.title) if s.title else "(no title)"
    return [_cut(first, WIDTH), _cut(f"{indent}{safe(s.harness or '?')}: {title}", WIDTH)]


def _other_stores(current: Path | None) -> list[Path]:
    folder = data_dir() / "workspaces"
    try:
        found = sorted(folder.glob("*.db"))
    except OSError:
        return []
    return [p for p in found if current is None or p.resolve() != current.resolve()]


def _store_row(path: Path) -> dict[str, Any]:
    """One store of ``--all-workspaces``: ``{"path", "workspaces" (the workspaces its sessions name), "sessions",
    "last" (the timestamp of its newest event, or None), "error" (why it could not be read, or None)}``."""
    row: dict[str, Any] = {"path": str(path), "workspaces": [], "sessions": 0, "last": None, "error": None}
    try:
        with EventStore(path, read_only=True) as store:
            dead = tombstoned_sessions(store)
            infos = [s for s in store.sessions() if s.id not in dead]
            row["sessions"] = len(infos)
            row["workspaces"] = sorted({s.workspace for s in infos if s.workspace})
            newest = max((s.last_seq for s in infos if s.last_seq is not None), default=None)
            row["last"] = None if newest is None else store.get(newest).ts
    except (StoreError, OSError) as exc:
        row["error"] = str(exc)
    return row


def register(cli: click.Group) -> None:
    @cli.command("sessions")
    @click.option(
        "--harness",
        default=None,
        metavar="FORMAT",
        help="Only sessions of this harness (its transcript format: claude-code, codex, latch...).",
    )
    @click.option(
        "--since",
        type=click.DateTime(formats=["%Y-%m-%d"]),
        default=None,
        help="Only sessions started on or after this day (YYYY-MM-DD, local time).",
    )
    @click.option(
        "--project",
        default=None,
        metavar="SUBSTRING",
        help="Only sessions whose workspace path or source contains SUBSTRING.",
    )
    @click.option(
        "--all-workspaces", is_flag=True, help="List every workspace's store under the Latch data folder instead."
    )
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
    @pass_app
    def sessions_cmd(
        app: AppContext,
        harness: str | None,
        since: datetime | None,
        project: str | None,
        all_workspaces: bool,
        as_json: bool,
    ) -> None:
        """List sessions, newest first: title, start, harness, model, requests, cost and status; sub-agent
        sessions under their parent (tombstoned ones are omitted)."""
        con = console(highlight=False, soft_wrap=True)
        if all_workspaces:
            current = None if app.db else app.db_path()
            rows = [_store_row(p) for p in _other_stores(None)]
            if as_json:
                click.echo(dumps(rows, indent=2))
                return
            con.print(f"{plural(len(rows), 'store')} under {safe(data_dir() / 'workspaces')}", markup=False)
            for row in rows:
                mark = "* " if current is not None and Path(row["path"]).resolve() == current.resolve() else "  "
                what = (
                    f"unreadable: {row['error']}"
                    if row["error"]
                    else f"{plural(row['sessions'], 'session')}, last {str(row['last'] or '–')[:16]}"
                )
                con.print(safe(f"{mark}{Path(row['path']).name}  {what}"), markup=False)
                for ws in row["workspaces"][:3]:
                    con.print(safe(f"    {ws}"), markup=False)
                if len(row["workspaces"]) > 3:
                    con.print(f"    and {len(row['workspaces']) - 3} more", markup=False)
            if rows:
                con.print(
                    "(* this workspace's store) `latch --db PATH sessions` lists one store's sessions", markup=False
                )
            return
        store = app.store(create=False)
        dead = tombstoned_sessions(store)
        infos = {s.id: s for s in store.sessions() if s.id not in dead}
        summaries = [summarize(store, info) for info in infos.values()]
        if harness is not None:
            summaries = [s for s in summaries if (s.harness or "").lower() == harness.lower()]
        if since is not None:
            day = since.date()
            summaries = [s for s in summaries if s.started is not None and s.started.astimezone().date() >= day]
        if project is not None:
            summaries = [s for s in summaries if project in (s.workspace or "") or project in (s.source or "")]
        ordered = session_tree(summaries)
        if as_json:
            docs = []
            for s, depth in ordered:
                info = infos[s.id]
                doc = {
                    **s.as_dict(),
                    "format": info.format,
                    "created_at": info.created_at,
                    "first_seq": info.first_seq,
                    "last_seq": info.last_seq,
                    "depth": depth,
                }
                if s.parent_id is not None:
                    doc["child"] = child_doc(store, s.id)
                docs.append(doc)
            click.echo(dumps(docs, indent=2))
            return
        filtered = harness is not None or since is not None or project is not None
        if not infos:
            where = "this workspace's store" if not app.db else "this store"
            con.print(f"0 sessions in {where} ({safe(app.db_label())})", markup=False)
            if not app.db:
                others = _other_stores(app.db_path())
                folder = safe(data_dir() / "workspaces")
                if others:
                    con.print(
                        f"Latch keeps one store per workspace folder; {plural(len(others), 'other store')} "
                        f"under {folder}:\n`latch sessions --all-workspaces` lists them",
                        markup=False,
                    )
                else:
                    con.print(
                        f"Latch keeps one store per workspace folder; there is no other under {folder}", markup=False
                    )
            return
        shorts = short_ids(list(infos))
        head = plural(len(ordered), "session") + (f" of {len(infos)}" if filtered else "") + ", newest first"
        con.print(head, markup=False)
        for s, depth in ordered:
            for line in _lines(s, shorts[s.id], depth):
                con.print(line, markup=False)
