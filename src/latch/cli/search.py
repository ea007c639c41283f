"""``latch search QUERY``: full-text search over every event, for people.

A double-quoted span of QUERY is a phrase (its words next to each other, in order); other words must each occur
(:meth:`latch.store.EventStore.search_hits`; the engine's own recall, :meth:`~latch.store.EventStore.search`, is
unchanged). A query that is one tool-call id, as ``latch show`` prints it (``tool_result(ID)``), also finds that
call and its result. Each hit is one line::

    96d68eaa  #619  user: …Create a standalone **Rust library** (no Python…

the session's short id, the event's seq (``latch show SESSION --event SEQ`` prints it whole), its kind, and the
passage around the first match (:func:`passage`) with every match marked: bold in a terminal, between ``**`` in
a pipe. ``--sort recent`` (default: newest first) or ``relevance`` (FTS5 bm25); filters ``--role``, ``--tool``,
``--session``, ``--since``/``--until`` (local days, both included).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TypedDict

import click
from rich.text import Text

from ..events import AssistantMessage, ToolResult
from ..kernel.tombstones import tombstoned_sessions
from ..store import StoredEvent
from ..store.fts import MAX_QUERY_CHARS, quoted_chunks
from ..textsafe import console, dumps, plural, safe
from .listing import short_ids
from .main import AppContext, pass_app
from .params import Count

__all__ = ["register", "passage", "ROLES", "PASSAGE_CHARS"]

ROLES = {
    "user": ("user_message",),
    "assistant": ("assistant_message",),
    "tool": ("tool_result",),
    "system": ("system_note",),
}
"""``--role`` values and the event kinds each selects."""
PASSAGE_CHARS = 120
"""Characters of text shown around a match (``…`` marks a cut)."""
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_:.\-]{5,127}")


def _pattern(query: str) -> re.Pattern[str] | None:
    """A regular expression finding every chunk of ``query`` (:func:`~latch.store.fts.quoted_chunks`) in flat
    text, case-insensitively: a chunk's words in a row, separated by anything that is not a letter or digit."""
    alts = []
    for chunk in quoted_chunks(query):
        words = [w for w in re.split(r"[^\w]+|_", chunk) if w]
        if not words:
            continue
        body = r"[\W_]+".join(re.escape(w) for w in words)
        edge_l = r"(?<![^\W_])" if words[0][0].isascii() else ""
        edge_r = r"(?![^\W_])" if words[-1][-1].isascii() else ""
        alts.append(edge_l + body + edge_r)
    if not alts:
        return None
    return re.compile("|".join(sorted(alts, key=len, reverse=True)), re.IGNORECASE)


def passage(text: str, query: str, width: int = PASSAGE_CHARS) -> tuple[str, list[tuple[int, int]]]:
    """``text`` (whitespace collapsed) cut to ``width`` characters around the first match of ``query``, with
    ``…`` where cut, and the ``(start, end)`` spans of every match inside it. No match: the start of the text."""
    flat = " ".join(text.split())
    pat = _pattern(query)
    found = list(pat.finditer(flat)) if pat is not None else []
    at = found[0].start() if found else 0
    start = 0 if len(flat) <= width else max(0, min(at - width // 3, len(flat) - width))
    end = min(len(flat), start + width)
    lead = "…" if start else ""
    shown = lead + flat[start:end] + ("…" if end < len(flat) else "")
    off = len(lead) - start
    spans = [
        (max(m.start(), start) + off, min(m.end(), end) + off) for m in found if m.start() < end and m.end() > start
    ]
    return shown, spans


def _label(hit: StoredEvent) -> str:
    e = hit.event
    if isinstance(e, ToolResult):
        return f"tool_result({e.call_id})"
    if isinstance(e, AssistantMessage) and e.tool_calls:
        return "assistant [calls: " + ", ".join(f"{c.name}({c.id})" for c in e.tool_calls) + "]"
    if hit.kind.endswith("_message"):
        return hit.kind[: -len("_message")]
    return hit.kind


def _marked(text: str, spans: list[tuple[int, int]], styled: bool) -> Text:
    """``text`` made :func:`~latch.textsafe.safe` piece by piece, each span marked (style, or ``**``)."""
    out = Text()
    pos = 0
    for a, b in spans:
        if a < pos:
            continue
        out.append(safe(text[pos:a]))
        out.append(safe(text[a:b]), style="bold yellow") if styled else out.append(f"**{safe(text[a:b])}**")
        pos = b
    out.append(safe(text[pos:]))
    return out


class _Filters(TypedDict):
    """The filters ``call_events`` and ``search_hits`` share."""

    session_id: str | None
    kinds: list[str] | None
    tool: str | None
    since: str | None
    until: str | None
    exclude_sessions: Iterable[str]


def _day_bound(day: datetime | None, *, after: bool) -> str | None:
    """The UTC instant where local day ``day`` starts (``after``: where the next one starts), ISO 8601."""
    if day is None:
        return None
    local = day.replace(hour=0, minute=0, second=0, microsecond=0) + (timedelta(days=1) if after else timedelta())
    return local.astimezone().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def register(cli: click.Group) -> None:
    @cli.command("search", context_settings={"ignore_unknown_options": True})
    @click.argument("query")
    @click.option(
        "--sort",
        type=click.Choice(["recent", "relevance"]),
        default="recent",
        show_default=True,
        help="Newest first, or most relevant first (FTS5 bm25).",
    )
    @click.option(
        "--role",
        type=click.Choice(sorted(ROLES)),
        multiple=True,
        help="Only events of this role (repeatable): user, assistant, tool (results), system.",
    )
    @click.option("--tool", default=None, metavar="NAME", help="Only calls of tool NAME and their results.")
    @click.option("--session", default=None, help="Restrict to one session (id or prefix).")
    @click.option(
        "--since",
        type=click.DateTime(formats=["%Y-%m-%d"]),
        default=None,
        help="Only events on or after this day (YYYY-MM-DD, local time).",
    )
    @click.option(
        "--until",
        type=click.DateTime(formats=["%Y-%m-%d"]),
        default=None,
        help="Only events on or before this day (YYYY-MM-DD, local time).",
    )
    @click.option("--limit", type=Count(min=1), default=20, show_default=True)
    @click.option(
        "--include-forgotten", is_flag=True, help="Also search tombstoned sessions (`latch forget`) and their children."
    )
    @click.option("--json", "as_json", is_flag=True)
    @pass_app
    def search_cmd(
        app: AppContext,
        query: str,
        sort: str,
        role: tuple[str, ...],
        tool: str | None,
        session: str | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        include_forgotten: bool,
        as_json: bool,
    ) -> None:
        """Full-text search over every event: quoted phrases, the match shown and marked, newest first or by
        relevance.

        "Quoted words" match as a phrase; other words must each occur. Each hit shows the passage that matched, the match marked. A tool-call id (as `latch show` prints it)
        finds that call and its result. Forgotten (tombstoned) sessions are left out unless
        --include-forgotten, or --session names one. A QUERY may start with a dash (`latch search -foo`, or
        after `--`); one longer than 4,096 characters is refused.
        """
        if len(query) > MAX_QUERY_CHARS:
            raise click.UsageError(
                f"the query is {len(query):,} characters; at most {MAX_QUERY_CHARS:,} are searched (give fewer words)"
            )
        if since is not None and until is not None and since > until:
            raise click.UsageError(f"--since {since:%Y-%m-%d} is after --until {until:%Y-%m-%d}")
        store = app.store(create=False)
        sid = None
        if session is not None:
            try:
                sid = store.session(session).id
            except KeyError as exc:
                raise click.ClickException(str(exc.args[0])) from None
        hidden = () if include_forgotten or sid else tombstoned_sessions(store)
        kinds = [k for r in role for k in ROLES[r]] or None
        filters: _Filters = {
            "session_id": sid,
            "kinds": kinds,
            "tool": tool,
            "since": _day_bound(since, after=False),
            "until": _day_bound(until, after=True),
            "exclude_sessions": hidden,
        }
        chunks = quoted_chunks(query)
        by_id = (
            store.call_events(chunks[0], **filters)
            if len(chunks) == 1 and _ID.fullmatch(chunks[0]) and any(c.isdigit() or c == "_" for c in chunks[0])
            else []
        )
        ranked = store.search_hits(query, limit=limit, order=sort, **filters)
        seen = {h.seq for h in by_id}
        hits = [(h, None) for h in by_id] + [(h, r) for h, r in ranked if h.seq not in seen]
        hits = hits[:limit]
        if as_json:
            docs = []
            for h, rank in hits:
                shown, spans = passage(h.event.searchable_text(), query)
                docs.append(
                    {
                        "seq": h.seq,
                        "session": h.session_id,
                        "kind": h.kind,
                        "ts": h.ts,
                        "rank": rank,
                        "text": h.event.searchable_text(),
                        "passage": shown,
                        "matches": spans,
                    }
                )
            click.echo(dumps(docs))
            return
        con = console(highlight=False, soft_wrap=True)
        if not hits:
            con.print("no matches")
            return
        shorts = short_ids([s.id for s in store.sessions()])
        order = "newest first" if sort == "recent" else "most relevant first"
        con.print(
            f"{plural(len(hits), 'hit')}, {order}"
            + (f" (the first {limit}: --limit shows more)" if len(hits) == limit else ""),
            markup=False,
        )
        for h, _rank in hits:
            shown, spans = passage(h.event.searchable_text(), query)
            line = Text(f"{safe(shorts.get(h.session_id, h.session_id))}  #{h.seq}  {safe(_label(h))}: ")
            line.append_text(_marked(shown, spans, con.is_terminal))
            con.print(line)
