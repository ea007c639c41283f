"""Text renderings the CLI and the UIs share: where a budget's window came from (:func:`window_line`), a view as
readable text (:func:`render_view_text`, its header's components :func:`header_components`) and what changed
between two requests (:func:`render_changes_text`). Transcript text is escaped (:mod:`latch.textsafe`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.text import Text

from ..host.changes import seq_ranges
from ..textsafe import cell, markup, safe

__all__ = ["window_line", "header_components", "render_view_text", "render_changes_text"]


def window_line(source: str, entry: str | None, model: str | None) -> str:
    """The report header's rich-markup line saying where the window came from (``source``/``entry`` as
    :func:`window_origin` gives them; the model id escaped)."""
    if source == "default":
        whose = f"model {markup(model)} has no \\[models] entry" if model else "the model is unknown"
        return f"[dim]window: Latch's default ({whose} in the config)[/dim]"
    where = {
        "--window": "set by --window",
        "run": "the budget its `latch run` was started with",
        "engine": "the engine's own default budget",
        "config": f"the config's \\[models.{markup(entry)}] entry",
        "model-table": f"Latch's model table (entry {markup(entry)})",
    }.get(source, markup(source))
    return f"[dim]window: {where}[/dim]"


def _n(v: Any) -> str:
    return "–" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


def _rule(con: Console, title: str) -> None:
    con.print(Text(f"── {title} ──", style="bold"))


def _body(con: Console, text: str, empty: str = "(empty)") -> None:
    con.print(cell(text, multiline=True) if text.strip() else Text(empty, style="dim"))


def _message_title(i: int, m: Any, tokens: int | None) -> str:
    parts = [f"[{i}] {safe(m.role)}", safe(m.kind)]
    if m.role == "tool":
        parts.append(f"result for {safe(m.tool_call_id)}" + (" (error)" if m.is_error else ""))
    if m.seq is not None:
        parts.append(f"seq {m.seq}")
    if tokens is not None:
        parts.append(f"{tokens:,} tokens")
    return " · ".join(parts)


def _print_message(con: Console, i: int, m: Any, tokens: int | None) -> None:
    _rule(con, _message_title(i, m, tokens))
    if m.content.strip() or not (m.tool_calls or m.media):
        _body(con, m.content)
    for c in m.tool_calls:
        con.print(cell(f"→ call {c.id} {c.name} {c.arguments}", multiline=True))
    for ref in m.media:
        size = f" {ref.width}x{ref.height}" if ref.width and ref.height else ""
        con.print(cell(f"[{ref.media_type}{size}, {ref.byte_size:,} bytes, sha256 {ref.sha256[:16]}]"), style="dim")


def header_components(tokens: Any) -> list[tuple[str, int]]:
    """``[(label, tokens), ...]`` of a view's components as the text header lists them, in order; they sum to
    ``tokens.total_tokens`` (a :class:`~latch.port.ComponentTokens`): ``harness (inferred)`` is listed when the
    host counted an inferred harness overhead (``harness_tokens`` > 0)."""
    parts = [
        ("instructions", tokens.instructions_tokens),
        ("state", tokens.state_tokens),
        ("recent", tokens.recent_tokens),
        ("recall", tokens.recall_tokens),
        ("tools", tokens.tools_tokens),
        ("extension", tokens.extension_tokens),
    ]
    if tokens.harness_tokens:
        parts.append(("harness (inferred)", tokens.harness_tokens))
    return parts


def render_view_text(
    con: Console,
    res: Any,
    *,
    total_requests: int,
    session: str,
    engine: str,
    estimator: str,
    model: str | None,
    window: str,
    first_retained_event: int | None = None,
) -> None:
    """Print request ``res`` (a :class:`~latch.host.loop.RequestResult` with a view) as readable text: header
    (its components, :func:`header_components`, sum to its total; ``first retained event``: the position in the
    session, 1-based, of the view's first retained event, ``first_retained_event``, with its store-wide seq),
    system, tools, every message (index, role, kind, seq, tokens), transcript text escaped."""
    view = res.view
    tok = view.tokens
    req = res.request
    con.print(
        cell(
            f"request {req.number} of {total_requests} · seq {req.seq} · session {session} · model {model or 'unknown'}"
        ),
        style="bold",
    )
    parts = ", ".join(f"{label} {n:,}" for label, n in header_components(tok))
    con.print(
        cell(
            f"engine {engine} · estimator {estimator} · epoch {view.epoch} ({view.status}) · "
            f"{tok.total_tokens:,} of {view.budget.hard_limit_tokens:,} tokens ({parts})"
        )
    )
    first = (
        "–"
        if view.first_retained_seq is None
        else f"{_n(first_retained_event)} (seq {view.first_retained_seq:,})"
        if first_retained_event is not None
        else f"seq {view.first_retained_seq:,}"
    )
    con.print(
        cell(
            f"window {view.budget.context_window_tokens:,} ({window}) · reserve "
            f"{view.budget.reserve_tokens:,} · {len(view.messages)} messages · first retained event "
            f"{first}"
        ),
        style="dim",
    )
    _rule(con, f"system · {res.line_tokens[0]:,} tokens")
    _body(con, view.system, "(empty: no system prompt in this request)")
    if tok.harness_tokens:
        con.print(
            Text(
                f"harness (inferred) · {tok.harness_tokens:,} tokens: the harness's own prompt and tools, "
                "not in the transcript (provider prompt − transcript), counted in the total",
                style="dim",
            )
        )
    _rule(con, f"tools · {len(view.tools)} · {res.line_tokens[1]:,} tokens")
    if not view.tools:
        con.print(Text("(none)", style="dim"))
    for t in view.tools:
        spec = t.get("function") if t.get("type") == "function" else t
        spec = spec if isinstance(spec, Mapping) else {}
        con.print(cell(f"{spec.get('name', '?')}: {spec.get('description') or ''}".rstrip(": "), multiline=True))
    for i, m in enumerate(view.messages):
        _print_message(con, i, m, res.line_tokens[2 + i])


def render_changes_text(con: Console, res: Any, changes: Mapping[str, Any]) -> None:
    """Print ``changes`` (:func:`latch.host.changes.request_changes` of ``res``) as readable lines, then the
    messages of ``res`` after the prefix it shares with the previous request."""
    n = res.request.number
    prev = changes["previous"]
    cache = changes["cache"]
    if cache == "first":
        con.print(cell(f"request {n}: the first request of the session (nothing cached before it)"), style="bold")
    else:
        line = f"request {n} vs request {prev}: cache {cache}"
        if cache == "rotated":
            line += f" (new epoch {res.view.epoch}, reason: {changes['rotation_reason'] or 'not given'})"
        brk = changes["prefix_break"]
        if brk is not None:
            where = f"message {brk['message']} ({brk['kind']})" if brk["at"] == "message" else f"the {brk['at']} field"
            line += f"; the cached prefix broke at {where} of request {prev}"
        elif cache == "kept":
            line += " (an append-only extension: the provider's prefix cache holds)"
        con.print(cell(line), style="bold")
        delta = changes["tokens_delta"]
        con.print(
            cell(
                f"shared prefix {changes['common_prefix_messages']:,} message(s), "
                f"{changes['common_prefix_tokens']:,} tokens · tokens {changes['tokens'] - delta:,} → "
                f"{changes['tokens']:,} ({delta:+,})"
            )
        )

    def seqs(key: str, what: str) -> str:
        xs = changes[key]
        return f"{len(xs)}" + (f" ({what} {seq_ranges(xs)})" if xs else "")

    con.print(
        cell(f"units appended {seqs('units_appended', 'first seqs')} · evicted {seqs('units_evicted', 'first seqs')}")
    )
    con.print(cell(f"recall added {seqs('recall_added', 'seqs')} · dropped {seqs('recall_dropped', 'seqs')}"))
    kernel = [
        f"{k['type'] or 'message'}"
        + (f" r{k['revision']}" if k["revision"] is not None else "")
        + (f" [{', '.join(k['sections'])}]" if k["sections"] else "")
        + f" {k['tokens']:,} tokens"
        for k in changes["kernel_added"]
    ]
    con.print(
        cell(
            f"kernel context: added {'; '.join(kernel) if kernel else 'nothing'} · dropped "
            f"{changes['kernel_dropped']} message(s)"
        )
    )
    start = changes["common_prefix_messages"]
    messages = res.view.messages
    _rule(
        con,
        f"messages {start}..{len(messages) - 1} (after the shared prefix)"
        if start < len(messages)
        else "no message after the shared prefix",
    )
    for i in range(start, len(messages)):
        _print_message(con, i, messages[i], res.line_tokens[2 + i])
