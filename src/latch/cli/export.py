"""``latch export SESSION --format md|html|jsonl``: one session as a readable transcript or as its stored events.

* ``md`` (default): Markdown. A title (:attr:`latch.host.summaries.SessionSummary.title`), a list of the
  session's facts (id, harness, model, start, requests, cost, status, source), then each user, assistant,
  system and compaction item in order under a ``##`` heading with its seq; each tool call is one list item,
  its command or path (:func:`latch.host.calls.call_summary`) in a code span, then ``→`` and its result in one
  line (:func:`latch.host.calls.result_line`; ``(no result)`` when the transcript has none). ``latch show
  SESSION --event SEQ`` prints a result whole.
* ``html``: the same as one self-contained page (no script, inline style, a Content-Security-Policy that
  forbids every fetch); every string is made :func:`~latch.textsafe.safe` then HTML-escaped; each call's whole
  result is in a closed ``<details>``.
* ``jsonl``: the stored events, one JSON object a line: ``{"seq", "session", "kind", "ts", "event"}``
  (``event``: the event's payload, as ``latch show --event SEQ --json`` prints it; control and bidi characters
  written as ``\\uNNNN``).

Transcript text in ``md`` is made safe (control and bidi characters shown escaped) and otherwise kept as it is
(Markdown in a message renders as Markdown). ``--out FILE`` writes the file (atomically) instead of stdout.
Errors: an unknown or forgotten (``latch forget``) session is one line, exit 1.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import click

from ..accounting.pricing import format_usd
from ..host.calls import call_results, call_summary, excerpt
from ..host.summaries import SessionSummary, summarize
from ..kernel.tombstones import forgotten_message, tombstoned_sessions
from ..textsafe import dumps, safe, write_text
from .main import AppContext, pass_app
from .outputs import output_file

__all__ = ["FORMATS", "render_markdown", "render_html", "render_jsonl", "register"]

FORMATS = ("md", "html", "jsonl")

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
"""The HTML page's Content-Security-Policy: no script, no fetch, inline styles only."""

_HEADINGS = {
    "user_message": "user",
    "assistant_message": "assistant",
    "system_note": "system",
    "compaction_marker": "compaction",
}


def _facts(s: SessionSummary) -> list[tuple[str, str]]:
    cost = (
        "–"
        if not s.requests
        else format_usd(s.usd)
        + (f" ({s.unpriced:,} of {s.requests:,} requests unpriced)" if s.unpriced and s.usd is not None else "")
    )
    return [
        ("session", s.id),
        ("harness", s.harness or "?"),
        ("model", s.model or "unknown"),
        ("started", s.started.isoformat(timespec="seconds") if s.started else "(undated)"),
        ("requests", f"{s.requests:,}"),
        ("cost", cost),
        ("status", s.status),
        ("source", s.source or "–"),
    ]


TITLE_CHARACTERS = 80
"""The most characters of the title heading (the whole first prompt is the first item)."""


def _title(s: SessionSummary) -> str:
    return excerpt(s.title, TITLE_CHARACTERS) if s.title else f"Session {s.id}"


def _items(events: Iterable[Any], results: dict[str, str]) -> list[dict[str, Any]]:
    """The conversation items in order: ``{"seq", "role", "text", "calls": [(summary, call_id, result line)],
    "ts"}``; tool results are folded into their calls (an orphan result is an item of its own)."""
    called: set[str] = set()
    out: list[dict[str, Any]] = []
    for ev in events:
        e = ev.event
        if ev.kind == "assistant_message":
            calls = [(call_summary(c), c.id, results.get(c.id, "(no result)")) for c in e.tool_calls]
            called.update(c.id for c in e.tool_calls)
            out.append({"seq": ev.seq, "role": "assistant", "text": e.text, "calls": calls, "ts": ev.ts})
        elif ev.kind == "tool_result" and e.call_id not in called:
            out.append(
                {"seq": ev.seq, "role": f"tool result ({e.call_id})", "text": e.content, "calls": [], "ts": ev.ts}
            )
        elif ev.kind == "user_message":
            out.append(
                {
                    "seq": ev.seq,
                    "role": "user" + (" (harness)" if e.is_meta else ""),
                    "text": e.text,
                    "calls": [],
                    "ts": ev.ts,
                }
            )
        elif ev.kind in _HEADINGS:
            text = e.searchable_text() if hasattr(e, "searchable_text") else ""
            out.append({"seq": ev.seq, "role": _HEADINGS[ev.kind], "text": text, "calls": [], "ts": ev.ts})
    return out


def _code(text: str) -> str:
    """``text`` as a Markdown code span: fenced with one backtick more than its longest run of them."""
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(summary: SessionSummary, events: list[Any]) -> str:
    """The Markdown transcript of a session (its :class:`~latch.host.summaries.SessionSummary` and stored events
    in seq order); every transcript string made :func:`~latch.textsafe.safe`."""
    out = [f"# {safe(_title(summary))}", ""]
    out += [
        f"- {k}: {_code(safe(v))}" if k in ("session", "source") else f"- {k}: {safe(v)}" for k, v in _facts(summary)
    ]
    for item in _items(events, call_results(events)):
        out += ["", f"## {item['role']} · #{item['seq']}", ""]
        if item["text"].strip():
            out.append(safe(item["text"].strip(), multiline=True))
            if item["calls"]:
                out.append("")
        out += [f"- {_code(safe(s))} → {safe(r)}" for s, _, r in item["calls"]]
    return "\n".join(out) + "\n"


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;max-width:60em;margin:1.5em auto;padding:0 1em;color:#222;background:#fff}
h1{font-size:1.4em}dl{display:grid;grid-template-columns:auto 1fr;gap:.1em .8em}dt{color:#666}dd{margin:0}
.item{border-left:3px solid #ccc;margin:.8em 0;padding:.2em .8em}.item h2{font-size:.9em;color:#555;margin:.2em 0}
.user{border-color:#4e79a7}.assistant{border-color:#59a14f}.system,.compaction{border-color:#b07aa1}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0;font-family:ui-monospace,monospace}
ul.calls{list-style:none;padding-left:0}code{background:#f3f3f3;padding:0 .2em;overflow-wrap:anywhere}
.result{color:#555}.error{color:#b00}details{margin:.1em 0 .4em 1em}
"""


def _e(value: Any) -> str:
    """``value`` as inert HTML text: :func:`safe` (multiline) then ``html.escape`` with quotes."""
    return html.escape(safe("" if value is None else str(value), multiline=True), quote=True)


def render_html(summary: SessionSummary, events: list[Any]) -> str:
    """The transcript of a session as one self-contained HTML page (see the module docstring)."""
    title = _title(summary)
    whole = {ev.event.call_id: ev.event.content for ev in events if ev.kind == "tool_result"}
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        '<dl id="facts">',
        *(f"<dt>{k}</dt><dd>{_e(v)}</dd>" for k, v in _facts(summary)),
        "</dl>",
    ]
    for item in _items(events, call_results(events)):
        role = item["role"].split(" ")[0]
        out.append(
            f'<section class="item {_e(role)}" data-seq="{item["seq"]}"><h2>{_e(item["role"])} · #{item["seq"]}</h2>'
        )
        if item["text"].strip():
            out.append(f"<pre>{_e(item['text'].strip())}</pre>")
        if item["calls"]:
            out.append('<ul class="calls">')
            for s, cid, r in item["calls"]:
                cls = "result error" if r.startswith("ERROR: ") else "result"
                out.append(f'<li data-call="{_e(cid)}"><code>{_e(s)}</code> → <span class="{cls}">{_e(r)}</span>')
                if cid in whole and "\n" in whole[cid].strip():
                    out.append(f"<details><summary>whole result</summary><pre>{_e(whole[cid])}</pre></details>")
                out.append("</li>")
            out.append("</ul>")
        out.append("</section>")
    out.append("</body></html>\n")
    return "".join(out)


def render_jsonl(events: Iterable[Any]) -> str:
    """The stored events, one JSON object a line (``{"seq", "session", "kind", "ts", "event"}``)."""
    return "".join(
        dumps({"seq": ev.seq, "session": ev.session_id, "kind": ev.kind, "ts": ev.ts, "event": ev.event.to_payload()})
        + "\n"
        for ev in events
    )


def register(cli: click.Group) -> None:
    @cli.command("export")
    @click.argument("session")
    @click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="md",
        show_default=True,
        help="md / html: a readable transcript (each tool call with its command or path and its "
        "result in one line); jsonl: the stored events, one JSON object a line.",
    )
    @click.option(
        "--out",
        "out",
        type=click.Path(dir_okay=False),
        default=None,
        callback=output_file,
        help="Write to this file instead of stdout.",
    )
    @pass_app
    def export_cmd(app: AppContext, session: str, fmt: str, out: str | None) -> None:
        """Export SESSION (id or unique prefix) as Markdown, a self-contained HTML page or its stored events as
        JSON lines."""
        store = app.store(create=False)
        try:
            info = store.session(session)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
        if info.id in tombstoned_sessions(store):
            raise click.ClickException(forgotten_message(info.id))
        events = list(store.events(info.id))
        if fmt == "jsonl":
            text = render_jsonl(events)
        else:
            summary = summarize(store, info)
            text = (render_markdown if fmt == "md" else render_html)(summary, events)
        if out is None:
            click.echo(text, nl=False)
        else:
            write_text(out, text)
            click.echo(f"wrote {safe(out)} ({fmt}, {len(events):,} events)", err=True)
