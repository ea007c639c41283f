"""The ``latch web`` server: a Starlette app over one store, read-only, with SSE for live sessions.

Routes (every one answers 401 without the token when the app has one: ``Authorization: Bearer T``, or
``?token=T`` for the page and its ``EventSource``, which cannot send headers):

* ``GET /`` and ``GET /s/{id}``: the page (``static/index.html``); ``GET /static/{file}``: its script and style.
* ``GET /api/sessions``: ``{"sessions": [{"id", "parent_id", "format", "source", "created_at", "events"}]}``.
* ``GET /api/sessions/{id}``: the snapshot (:func:`snapshot`); 404 for an unknown session.
* ``GET /api/sessions/{id}/events``: Server-Sent Events. Each stored event after the resume point is one
  message ``event: event``, ``id: <seq>``, ``data: {"seq", "kind", "item"}`` (``item``: the transcript item or
  ``null``); after each batch one ``event: status`` without an id, ``data: {"last_seq", "live", "activity",
  "usage", "state"}``. The resume point is the ``Last-Event-ID`` header (what a reconnecting browser sends),
  else ``?after=SEQ``, else 0; a value that is not a non-negative integer is a 400. New events are found by
  polling the store every ``poll_interval`` seconds, in ``seq`` order, so a stream has no gap and no
  duplicate, across server restarts too.

Every string sent is passed through :func:`latch.textsafe.safe` (``multiline``: newlines and tabs kept), so
control, bidi and escape characters arrive visible (``\\x1b``) and the page renders all text with
``textContent``. A session is *live* when this server has seen events appended to it since it started
(transient transport state, spec "Browser observation and reconnect"): only then is an unfinished tool call
``running``; after a restart it is ``interrupted`` until the run appends again.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from importlib import resources
from pathlib import Path
from typing import Any

from ..host import reducers as R
from ..store import EventStore
from ..textsafe import safe
from . import is_loopback
from ..host.kernel import kernel_cache
from ..kernel import canonical_state

__all__ = ["create_app", "snapshot", "serve", "check_bind"]

STATIC = resources.files("latch.web") / "static"
_STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".html": "text/html; charset=utf-8"}


def _display(value: Any) -> Any:
    """``value`` with every string made inert for display (:func:`latch.textsafe.safe`, multiline)."""
    if isinstance(value, str):
        return safe(value, multiline=True)
    if isinstance(value, dict):
        return {k: _display(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_display(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(_display(value), separators=(",", ":"))


def _session_row(info: Any) -> dict[str, Any]:
    return {"id": info.id, "parent_id": info.parent_id, "format": info.format, "source": info.source,
            "created_at": info.created_at, "events": info.events}


def _status(store: EventStore, sid: str, events: list[Any], live: bool) -> dict[str, Any]:
    state = canonical_state(store, sid, cache=kernel_cache())
    return {"last_seq": events[-1].seq if events else 0, "live": live, "activity": R.activity(events, live=live),
            "usage": R.usage_totals(events), "state": R.state_summary(state)}


def snapshot(store: EventStore, session_id: str, *, live: bool = False) -> dict[str, Any]:
    """The current view of a session, rebuilt from committed events by :mod:`latch.host.reducers`:
    ``{"session": {...}, "last_seq", "live", "transcript", "evidence", "requests", "activity", "usage",
    "state"}`` (``last_seq``: the session's newest event seq, 0 when it has none). Raises ``KeyError`` for
    an unknown session. Strings are returned as stored (the server makes them inert when it sends them)."""
    info = store.session(session_id)
    events = list(store.events(info.id))
    status = _status(store, info.id, events, live)
    return {"session": _session_row(info), **status, "transcript": R.transcript(events),
            "evidence": R.evidence(events), "requests": R.usage_requests(events)}


def check_bind(host: str, token: str | None) -> None:
    """Raise ``ValueError`` (one line) when binding ``host`` is not allowed: a non-loopback host needs a
    non-empty token."""
    if token is not None and not token.strip():
        raise ValueError("empty --token: give a secret string")
    if not is_loopback(host) and token is None:
        raise ValueError(f"binding {host} (not loopback) requires --token")


def create_app(db: str | Path, *, token: str | None = None, poll_interval: float = 0.2,
               retry_ms: int = 500) -> Any:
    """The Starlette app over the store at ``db`` (a path; opened once, read-only use). ``token``: required on
    every request when set. ``poll_interval``: seconds between store polls of an open stream; ``retry_ms``:
    the reconnect delay the stream asks browsers for."""
    from sse_starlette import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    store = EventStore(db)
    start_seq = store.max_seq()

    def live(sid: str) -> bool:
        return store.max_seq(sid) > start_seq

    def error(status: int, message: str) -> Response:
        return JSONResponse({"error": safe(message)}, status_code=status)

    def json_response(value: Any) -> Response:
        return Response(_dumps(value), media_type="application/json")

    def find(request: Request) -> Any:
        try:
            return store.session(request.path_params["sid"])
        except KeyError as exc:
            return error(404, str(exc.args[0]) if exc.args else "unknown session")

    async def page(request: Request) -> Response:
        return Response((STATIC / "index.html").read_text(encoding="utf-8"), media_type=_STATIC_TYPES[".html"])

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        path = STATIC / name
        suffix = Path(name).suffix
        if "/" in name or name.startswith(".") or suffix not in _STATIC_TYPES or not path.is_file():
            return error(404, f"no static file {name!r}")
        return Response(path.read_text(encoding="utf-8"), media_type=_STATIC_TYPES[suffix])

    async def sessions(request: Request) -> Response:
        rows = await asyncio.to_thread(store.sessions)
        return json_response({"sessions": [_session_row(s) for s in rows]})

    async def session(request: Request) -> Response:
        info = find(request)
        if isinstance(info, Response):
            return info
        return json_response(await asyncio.to_thread(snapshot, store, info.id, live=live(info.id)))

    async def events(request: Request) -> Response:
        info = find(request)
        if isinstance(info, Response):
            return info
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        if not raw.isascii() or not raw.isdigit():
            return error(400, f"bad resume point {raw!r}: give a non-negative event seq")
        after = int(raw)
        sid = info.id

        async def stream():
            history = await asyncio.to_thread(lambda: list(store.events(sid, until_seq=after)))
            seen = after
            first = True
            while True:
                new = await asyncio.to_thread(lambda: list(store.events(sid, after_seq=seen, limit=500)))
                for ev in new:
                    yield {"id": str(ev.seq), "event": "event",
                           "data": _dumps({"seq": ev.seq, "kind": ev.kind, "item": R.transcript_item(ev)})}
                if new:
                    seen = new[-1].seq
                    history.extend(new)
                if new or first:
                    status = await asyncio.to_thread(_status, store, sid, history, live(sid))
                    status["last_seq"] = seen
                    message = {"event": "status", "data": _dumps(status)}
                    if first:
                        message["retry"] = retry_ms
                    first = False
                    yield message
                if not new:
                    if await request.is_disconnected():
                        return
                    await asyncio.sleep(poll_interval)

        return EventSourceResponse(stream(), ping=15)

    app = Starlette(routes=[
        Route("/", page), Route("/s/{sid}", page), Route("/static/{name}", static),
        Route("/api/sessions", sessions), Route("/api/sessions/{sid}", session),
        Route("/api/sessions/{sid}/events", events),
    ])
    app.state.store = store
    return _TokenGate(app, token) if token is not None else app


class _TokenGate:
    """ASGI wrapper: a request without the token (``Authorization: Bearer T`` or ``?token=T``) gets 401."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.state = app.state
        self._token = token.encode("utf-8", "surrogatepass")

    def _ok(self, scope: dict[str, Any]) -> bool:
        from urllib.parse import parse_qs

        for name, value in scope.get("headers", ()):
            if name == b"authorization" and value.startswith(b"Bearer "):
                if hmac.compare_digest(value[7:], self._token):
                    return True
        for value in parse_qs(scope.get("query_string", b"").decode("ascii", "replace")).get("token", ()):
            if hmac.compare_digest(value.encode("utf-8", "surrogatepass"), self._token):
                return True
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self._ok(scope):
            from starlette.responses import JSONResponse

            await JSONResponse({"error": "missing or wrong token"}, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def serve(db: str | Path, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> None:
    """Run the server until interrupted. Raises ``ValueError`` for a bind :func:`check_bind` refuses."""
    import uvicorn

    check_bind(host, token)
    uvicorn.run(create_app(db, token=token), host=host, port=port, log_level="warning",
                timeout_graceful_shutdown=2)
