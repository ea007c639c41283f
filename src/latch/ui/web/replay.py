"""The replay page's data: every model request of a stored session replayed once.

:class:`ReplayCache` runs :func:`latch.host.replay.run_replay` (the host's one request loop, its kernel
records in a run of the replay scratch database beside the store, never in the store's log) and keeps, per
session and its last event seq, the ``latch replay --json`` document and each request's view (its content,
:func:`view_content`, rendered when first asked for), so a reload does not recompute and a session that grew
is replayed again.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from io import StringIO
from typing import Any

from rich.console import Console
from rich.text import Text

from ...engine.context_report import COMPONENTS
from ...host.replay import run_replay
from ...records import dataclass
from ...store import EventStore
from ...textsafe import PIPE_WIDTH
from ..render import render_view_text, window_line

__all__ = ["ReplayCache", "view_content"]


def _tool(t: Mapping[str, Any]) -> dict[str, Any]:
    spec = t.get("function") if t.get("type") == "function" else t
    spec = spec if isinstance(spec, Mapping) else {}
    return {"name": str(spec.get("name", "?")), "description": str(spec.get("description") or "")}


def view_content(res: Any, *, total_requests: int, session: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """Request ``res``'s view (a :class:`~latch.host.loop.RequestResult`, or what of it the cache keeps) in the ``latch view --format text``
    shape: ``{"request", "total_requests", "seq", "session", "engine", "estimator", "model", "status"
    ("overflow" when refused, then ``error`` and nothing else), "epoch", "tokens": {component: tokens, ...,
    "total_tokens"}, "hard_limit_tokens", "context_window_tokens", "reserve_tokens", "first_retained_seq" (store-wide),
    "first_retained_event" (its position in the session, from the replay document's row), "system": {"tokens",
    "text"}, "tools": {"tokens", "items": [{"name", "description"}]}, "messages": [{"index",
    "role", "kind", "seq", "tokens", "content", "tool_call_id", "is_error", "tool_calls": [{"id", "name",
    "arguments"}], "media": [{"media_type", "byte_size", "sha256", "width", "height"}]}], "text"}``. ``text`` is
    exactly what ``latch view --format text`` prints for the request into a pipe (its rendering,
    :func:`latch.ui.render.render_view_text`). Strings are as stored (the server makes them inert)."""
    req = res.request
    head = {
        "request": req.number,
        "total_requests": total_requests,
        "seq": req.seq,
        "session": session,
        "engine": doc["engine"],
        "estimator": doc["estimator"],
        "model": doc["model"],
    }
    view = res.view
    if view is None:
        return {**head, "status": "overflow", "error": res.overflow}
    tok = view.tokens
    where = Text.from_markup(window_line(doc["budget"]["window_source"], doc["window_entry"], doc["model"])).plain
    out = StringIO()
    con = Console(file=out, width=PIPE_WIDTH, soft_wrap=True, emoji=False, highlight=False, color_system=None)
    rows = doc.get("requests") or []
    row = rows[req.number - 1] if 0 < req.number <= len(rows) else {}
    first_event = row.get("first_retained_event") if row.get("request") == req.number else None
    render_view_text(
        con,
        res,
        total_requests=total_requests,
        session=session,
        engine=doc["engine"],
        estimator=doc["estimator"],
        model=doc["model"],
        window=where.removeprefix("window: "),
        first_retained_event=first_event,
    )
    messages = [
        {
            "index": i,
            "role": m.role,
            "kind": m.kind,
            "seq": m.seq,
            "tokens": res.line_tokens[2 + i],
            "content": m.content,
            "tool_call_id": m.tool_call_id,
            "is_error": m.is_error,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls],
            "media": [
                {
                    "media_type": r.media_type,
                    "byte_size": r.byte_size,
                    "sha256": r.sha256,
                    "width": r.width,
                    "height": r.height,
                }
                for r in m.media
            ],
        }
        for i, m in enumerate(view.messages)
    ]
    return {
        **head,
        "status": view.status,
        "epoch": view.epoch,
        "tokens": {**{c: getattr(tok, c) for c in COMPONENTS}, "total_tokens": tok.total_tokens},
        "hard_limit_tokens": view.budget.hard_limit_tokens,
        "context_window_tokens": view.budget.context_window_tokens,
        "reserve_tokens": view.budget.reserve_tokens,
        "first_retained_seq": view.first_retained_seq,
        "first_retained_event": first_event,
        "system": {"tokens": res.line_tokens[0], "text": view.system},
        "tools": {"tokens": res.line_tokens[1], "items": [_tool(t) for t in view.tools]},
        "messages": messages,
        "text": out.getvalue(),
    }


@dataclass(frozen=True)
class _Seen:
    """What :func:`view_content` needs of a :class:`~latch.host.loop.RequestResult` (its canonical lines and
    violation lists are not kept)."""

    request: Any
    view: Any
    overflow: str | None
    line_tokens: list[int]


class ReplayCache:
    """Replays of the sessions of ``store`` with the default engine, estimator and budget (``config``: Latch's
    configuration, ``{}`` by default), one computed at a time, each kept until its session gets a new event.
    A request's view content is rendered when first asked for, then kept with its replay. ``computed`` counts
    the replays run (a reload that recomputes shows here)."""

    def __init__(self, store: EventStore, config: Mapping[str, Any] | None = None):
        self.store = store
        self.config = dict(config or {})
        self.computed = 0
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[int, dict[str, Any], list[_Seen], dict[int, dict[str, Any]]]] = {}

    def _entry(self, session_id: str) -> tuple[int, dict[str, Any], list[_Seen], dict[int, dict[str, Any]]]:
        last = self.store.max_seq(session_id)
        hit = self._cache.get(session_id)
        if hit is not None and hit[0] == last:
            return hit
        seen: list[_Seen] = []
        doc, _ = run_replay(
            self.store,
            session_id,
            config=self.config,
            on_result=lambda r: seen.append(_Seen(r.request, r.view, r.overflow, r.line_tokens)),
        )
        doc["last_seq"] = last
        self.computed += 1
        entry = self._cache[session_id] = (last, doc, seen, {})
        return entry

    def get(self, session_id: str) -> dict[str, Any]:
        """The ``latch replay --json`` document of ``session_id`` plus ``last_seq`` (the session's newest event
        seq it covers). Raises what :func:`~latch.host.replay.run_replay` raises (:class:`~latch.host.loop.HostError`
        for a bad budget, :class:`~latch.store.StoreError` when the scratch cannot be written)."""
        with self._lock:
            return self._entry(session_id)[1]

    def view(self, session_id: str, number: int) -> dict[str, Any] | None:
        """Request ``number``'s (1-based) :func:`view_content`, ``None`` outside the session's requests; raises
        as :meth:`get`."""
        with self._lock:
            _, doc, seen, views = self._entry(session_id)
            if not 1 <= number <= len(seen):
                return None
            if number not in views:
                views[number] = view_content(seen[number - 1], total_requests=len(seen), session=session_id, doc=doc)
            return views[number]
