"""``latch replay FILE --html OUT.html``: one self-contained HTML page of a replay.

:func:`render_html` takes the replay document (:func:`latch.cli.replay.run_replay`'s JSON) and the
session's view from the shared reducers (:func:`latch.host.reducers.session_view`) and returns the page:

* a summary (requests, epochs, violations, the requests the budget refused, costs of the transcript and of
  Latch's views in dollars, compared like for like: the same requests on both sides);
* an inline SVG chart: one bar per request (the view's tokens, coloured by the engine's cache epoch), the
  provider's reported prompt tokens as a line, and a marker at every cache break -- the engine's rotations and
  in-epoch breaks (``changes.cache``) and the provider's cache breaks (:func:`~latch.host.reducers.cache_epochs`)
  -- each with its reason in a ``<title>``;
* the per-request table (view tokens by component, cacheability, provider tokens, cost of both, cache state);
* the provider cache epochs and breaks;
* the transcript, each tool call with its command or path and its result in one line.

Nothing is loaded from anywhere: no script at all, styles inline, and a Content-Security-Policy that forbids
scripts and every network fetch. Every string from the transcript, the file name or a plugin is made
:func:`~latch.textsafe.safe` and then HTML-escaped (``html.escape`` with quotes), so ``<script>`` in a
transcript is text.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from ..accounting.pricing import format_usd
from ..host import reducers as R
from ..host.kernel import kernel_cache
from ..kernel import canonical_state
from ..store import EventStore
from ..textsafe import safe, write_text

__all__ = ["render_html", "write_html", "CSP"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
"""The page's Content-Security-Policy: no script, no fetch, inline styles only."""

_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f")

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}tr.broken td{background:#fde2e2}tr.rotated td{background:#fff4d6}
.summary dt{font-weight:600;float:left;clear:left;width:16em}.summary dd{margin-left:17em}
.item{border-left:3px solid #ccc;margin:.5em 0;padding:.2em .6em}.item pre{white-space:pre-wrap;margin:.2em 0}
.user{border-color:#4e79a7}.assistant{border-color:#59a14f}.tool{border-color:#edc948}.system{border-color:#b07aa1}
.compaction{border-color:#e15759}.role{font-weight:600}svg text{font-size:11px}
"""


def _e(value: Any) -> str:
    """``value`` as inert HTML text: :func:`safe` (multiline) then ``html.escape`` with quotes."""
    return html.escape(safe("" if value is None else str(value), multiline=True), quote=True)


def _n(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, float):
        return f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) else _e(value)


def _usd(value: float | None) -> str:
    return _e(format_usd(value))


def _refused(doc: Mapping[str, Any]) -> str:
    """How many requests the budget refused (no view), and the first one's reason; ``0`` when none."""
    refused = [r for r in doc["requests"] if r.get("status") == "overflow"]
    if not refused:
        return "0"
    return (
        f"{len(refused):,} of {len(doc['requests']):,} (no view: left out of the cost comparison); first: "
        f"request {refused[0]['request']}: {_e(refused[0].get('error') or '')}"
    )


def _compared(cost: Mapping[str, Any]) -> str:
    """The like-for-like cost comparison: the transcript's cost of the requests that got a view vs Latch's views."""
    n = cost.get("compared_requests")
    return (
        f"on the {_n(n)} requests with a view: {_usd(cost.get('original_compared_usd'))} as the transcript ran "
        f"them vs {_usd(cost.get('view_usd'))} Latch's views"
    )


def _breaks(doc: Mapping[str, Any], view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every cache break of the replay: ``{"request", "source": "latch"|"provider", "kind", "reason"}``."""
    out: list[dict[str, Any]] = []
    for r in doc["requests"]:
        ch = r.get("changes") or {}
        if ch.get("cache") in ("rotated", "broken"):
            out.append(
                {
                    "request": r["request"],
                    "source": "latch",
                    "kind": ch["cache"],
                    "reason": ch.get("rotation_reason") or (ch.get("prefix_break") or {}).get("at") or "",
                }
            )
    for b in view["cache"]["breaks"]:
        out.append({"request": b["request"], "source": "provider", "kind": "broken", "reason": b["reason"]})
    return out


def _chart(doc: Mapping[str, Any], view: Mapping[str, Any]) -> str:
    reqs = doc["requests"]
    width, height, left, bottom, top = 900, 260, 60, 30, 10
    plot_w, plot_h = width - left - 10, height - bottom - top
    peak = max([r.get("total_tokens") or 0 for r in reqs] + [r.get("provider_prompt_tokens") or 0 for r in reqs] + [1])
    step = plot_w / max(len(reqs), 1)

    def y(tokens: float) -> float:
        return top + plot_h - plot_h * tokens / peak

    parts = [
        f'<svg id="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="tokens per request">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 10}" y2="{top + plot_h}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>',
        f'<text x="{left - 4}" y="{top + 10}" text-anchor="end">{peak:,}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
        f'<text x="{left}" y="{height - 8}">request 1</text>',
        f'<text x="{width - 10}" y="{height - 8}" text-anchor="end">request {len(reqs)}</text>',
    ]
    for i, r in enumerate(reqs):
        tokens = r.get("total_tokens") or 0
        colour = _PALETTE[(int(r.get("epoch") or 1) - 1) % len(_PALETTE)]
        x = left + i * step
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{y(tokens):.1f}" width="{max(step - 1, 0.5):.1f}" '
            f'height="{top + plot_h - y(tokens):.1f}" fill="{colour}"><title>request {r["request"]}: '
            f"{tokens:,} view tokens, epoch {_e(r.get('epoch'))}</title></rect>"
        )
    points = [
        f"{left + (i + 0.5) * step:.1f},{y(r['provider_prompt_tokens']):.1f}"
        for i, r in enumerate(reqs)
        if r.get("provider_prompt_tokens") is not None
    ]
    if points:
        parts.append(
            f'<polyline class="provider" points="{" ".join(points)}" fill="none" stroke="#222" '
            'stroke-width="1.5"><title>provider prompt tokens</title></polyline>'
        )
    for b in _breaks(doc, view):
        x = left + (b["request"] - 1) * step
        colour = "#e15759" if b["source"] == "provider" else "#f28e2b"
        parts.append(
            f'<line class="break {b["source"]}" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
            f'stroke="{colour}" stroke-width="3" stroke-dasharray="6 3"><title>request {b["request"]}: {b["source"]} cache '
            f"{_e(b['kind'])} ({_e(b['reason'])})</title></line>"
        )
    parts.append("</svg>")
    return "".join(parts)


_COLUMNS = (
    ("request", "request"),
    ("seq", "seq"),
    ("epoch", "epoch"),
    ("total_tokens", "view tokens"),
    ("state_tokens", "state"),
    ("recent_tokens", "recent"),
    ("recall_tokens", "recall"),
    ("harness_tokens", "harness"),
    ("common_prefix_tokens", "cached prefix"),
    ("cacheability", "cacheability"),
    ("provider_prompt_tokens", "provider prompt"),
    ("provider_cache_read_tokens", "provider cache read"),
)


def render_html(doc: Mapping[str, Any], view: Mapping[str, Any], source: str) -> str:
    """The page of one replay: ``doc`` (``run_replay``'s document), ``view`` (the session's
    :func:`~latch.host.reducers.session_view`) and ``source`` (the transcript's path, shown escaped). Returns the
    whole HTML document as a string (UTF-8 when written)."""
    s = doc["summary"]
    cost = s.get("cost") or {}
    provider = view["cache"]
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>latch replay · {_e(source)}</title><style>{_STYLE}</style></head><body>",
        f'<h1>latch replay · <span id="source">{_e(source)}</span></h1>',
        '<dl class="summary" id="summary">',
        f"<dt>session</dt><dd>{_e(doc['session'])}</dd>",
        f"<dt>engine · estimator</dt><dd>{_e(doc['engine'])} · {_e(doc['estimator'])}</dd>",
        f"<dt>model</dt><dd>{_e(doc.get('model'))}</dd>",
        f"<dt>requests</dt><dd>{s['requests']:,}</dd>",
        f"<dt>Latch cache epochs</dt><dd>{_n(s.get('epochs'))} (rotations {_n(s.get('rotations'))}, prefix breaks "
        f"within an epoch {_n(s.get('prefix_breaks_within_epoch'))})</dd>",
        f"<dt>provider cache epochs</dt><dd>{len(provider['epochs'])} ({len(provider['breaks'])} cache breaks)</dd>",
        f"<dt>violations</dt><dd>{len(s['violations'])}</dd>",
        f'<dt>refused requests</dt><dd id="refused">{_refused(doc)}</dd>',
        f'<dt>cost of the transcript</dt><dd id="cost-original">{_usd(cost.get("original_usd"))} '
        f"({_n(cost.get('original_priced_requests'))} priced requests)</dd>",
        f'<dt>like for like</dt><dd id="cost-compared">{_compared(cost)}</dd>',
        f'<dt>cost of Latch\'s views</dt><dd id="cost-view">{_usd(cost.get("view_usd"))}</dd>',
        "</dl>",
    ]
    for v in s["violations"]:
        out.append(f'<p class="violation">{_e(v)}</p>')
    out += [
        "<h2>Tokens per request and cache breaks</h2>",
        _chart(doc, view),
        "<p>Bars: the tokens of Latch's view (colour: its cache epoch); line: the provider's prompt tokens; "
        "dashed: cache breaks (orange: Latch rotated or broke its prefix, red: the provider's cache broke).</p>",
        '<h2>Requests</h2><table id="requests"><thead><tr>',
    ]
    out += [f"<th>{label}</th>" for _, label in _COLUMNS]
    out.append('<th>transcript cost</th><th>view cost</th><th class="l">cache</th></tr></thead><tbody>')
    for r in doc["requests"]:
        ch = r.get("changes") or {}
        state = ch.get("cache") or ""
        reason = ch.get("rotation_reason") or ""
        rc = r.get("cost") or {}
        out.append(
            f'<tr class="{_e(state)}">'
            + "".join(f"<td>{_n(r.get(k))}</td>" for k, _ in _COLUMNS)
            + f"<td>{_usd(rc.get('original_usd'))}</td><td>{_usd(rc.get('view_usd'))}</td>"
            f'<td class="l">{_e(state)}{" (" + _e(reason) + ")" if reason else ""}</td></tr>'
        )
    out.append("</tbody></table>")
    out.append(
        '<h2>Provider cache epochs</h2><table id="epochs"><thead><tr><th>epoch</th><th>requests</th>'
        "<th>seqs</th><th>cache read</th><th>cache write</th></tr></thead><tbody>"
    )
    for ep in provider["epochs"]:
        out.append(
            f"<tr><td>{ep['epoch']}</td><td>{ep['first_request']}–{ep['last_request']}</td>"
            f"<td>{ep['start_seq']}–{ep['end_seq']}</td><td>{_n(ep['cache_read_tokens'])}</td>"
            f"<td>{_n(ep['cache_write_tokens'])}</td></tr>"
        )
    out.append('</tbody></table><ul id="breaks">')
    for b in provider["breaks"]:
        out.append(
            f"<li>request {b['request']} (seq {b['seq']}): {_e(b['reason'])}, read "
            f"{_n(b['cache_read_tokens'])} of {_n(b['previous_cached_tokens'])} cached tokens</li>"
        )
    out.append('</ul><h2>Transcript</h2><div id="transcript">')
    results = {item["call_id"]: item["line"] for item in view["transcript"] if item["role"] == "tool"}
    for item in view["transcript"]:
        calls = "".join(
            f"<div>→ {_e(c['summary'])} ⇒ {_e(results.get(c['id'], '…'))}</div>" for c in item.get("tool_calls") or ()
        )
        out.append(
            f'<div class="item {_e(item["role"])}"><span class="role">#{item["seq"]} {_e(item["role"])}'
            f"{' ' + _e(item.get('name')) if item['role'] == 'tool' else ''}</span>"
            f"<pre>{_e(item['text'])}</pre>{calls}</div>"
        )
    out.append("</div></body></html>\n")
    return "".join(out)


def write_html(path: str, store: EventStore, doc: Mapping[str, Any], source: str) -> None:
    """Write the page of the replay document ``doc`` (one session of ``store``, replayed from ``source``) to
    ``path`` (:func:`latch.textsafe.write_text`): :func:`render_html` of ``doc`` and the session's view."""
    view = R.session_view(store.events(doc["session"]), canonical_state(store, doc["session"], cache=kernel_cache()))
    write_text(path, render_html(doc, view, source))
