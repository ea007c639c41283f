"""The ``latch web`` server: a Starlette app over one store, with SSE for live sessions and a command inbox.

Routes (every one answers 401 without the token when the app has one: ``Authorization: Bearer T``, or
``?token=T`` for the page and its ``EventSource``, which cannot send headers):

* ``GET /`` and ``GET /s/{id}``: the page (``static/index.html``); ``GET /static/{file}``: its script and style.
* ``GET /api/sessions``: ``{"sessions": [...]}``, what ``latch sessions`` lists (:func:`session_rows`: id, title,
  start, harness, model, requests, cost, status; children after their parent with their ``depth``).
* ``GET /api/sessions/{id}``: the snapshot (:func:`snapshot`); 404 for an unknown session.
* ``GET /api/sessions/{id}/events``: Server-Sent Events. Each stored event after the resume point is one
  message ``event: event``, ``id: <seq>``, ``data: {"seq", "kind", "item"}`` (``item``: the transcript item or
  ``null``); after each batch one ``event: status`` without an id, ``data: {"last_seq", "live", "activity",
  "usage", "state", "costs", "context", "cache", "canonical"}`` (the reducers of :func:`latch.host.reducers.session_view`). The resume point is the ``Last-Event-ID`` header (what a reconnecting browser sends),
  else ``?after=SEQ``, else 0; a value that is not a non-negative integer is a 400. New events are found by
  polling the store every ``poll_interval`` seconds, in ``seq`` order, so a stream has no gap and no
  duplicate, across server restarts too.
* ``GET /s/{id}/replay``: the replay page. ``GET /api/sessions/{id}/replay``: the session's ``latch replay
  --json`` document (:func:`latch.host.replay.run_replay` with the default engine, estimator and budget;
  per model request its tokens, ``epoch``, ``rotation_reason``, ``changes`` and ``cost``) plus ``last_seq``;
  computed once per session and newest event seq (:class:`latch.ui.web.replay.ReplayCache`; the replay's kernel
  records go to the scratch replay database, never to the store). ``GET /api/sessions/{id}/replay/{n}``:
  request ``n``'s view content in the ``latch view --format text`` shape (:func:`latch.ui.web.replay.
  view_content`: system, tools, messages, and ``text``, what ``latch view`` prints); 404 outside ``1..N``;
  a replay the budget refuses is a 400, a scratch that cannot be written a 500, each one ``{"error"}`` line.
* ``POST /api/sessions/{id}/commands`` with a JSON body ``{"command": "steer"|"stop"|"compact", "text": str
  (steer only), "id": str (optional receipt id, 1-64 of A-Za-z0-9_-: a retry with the same id adds nothing)}``
  and the ``X-Latch-Token`` header (:func:`_refuse_command`: 415, 401, 403 otherwise): the command is stored
  durably in the session (:class:`latch.host.runs.RunCommands`) and the answer is 202 ``{"receipt": {"id",
  "command", "status", "seq"}}``; 400 for a bad body, 409 for ``stop`` when no run is running. The running
  ``latch run`` applies it at its next safe boundary (steer: delivered before the next request; compact: the
  next request rotates; stop: the run ends, exit 0) and records that it did. ``GET
  /api/sessions/{id}/commands/{cid}`` is the receipt's current status (404 for an unknown id). Receipts are
  transport state; the queued and applied events are the durable record (spec: "Browser observation and
  reconnect").

Every string sent is passed through :func:`latch.textsafe.safe` (``multiline``: newlines and tabs kept), so
control, bidi and escape characters arrive visible (``\\x1b``) and the page renders all text with
``textContent``. A session is *live* when its latest ``latch run`` is running by the durable run lifecycle
(:func:`latch.host.runs.session_liveness`: a ``run_started`` without a ``run_ended`` whose process is alive): only
then is an unfinished tool call ``running``; a killed run is ``interrupted`` (never live or completed), on this
server and after a restart alike. A session no ``latch run`` recorded (an import, a test) is live while this
server sees events appended to it since it started. Snapshots (in their ``session``) and ``status`` messages
also carry ``run``
(:func:`latch.host.reducers.run_status`), ``commands`` (:func:`latch.host.reducers.commands`) and ``group``
(:func:`latch.agent.group.group_view`: members, tasks and claims of the session's agent group, or ``null``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import socket
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

from ...agent.group import group_view
from ...host import reducers as R
from ...host.kernel import kernel_cache
from ...host.loop import HostError
from ...host.runs import NoRunningRun, RunCommands, session_liveness
from ...host.state_text import canonical_view
from ...host.summaries import listed_sessions, short_ids
from ...kernel import canonical_state
from ...kernel.tombstones import forgotten_message, tombstoned_sessions
from ...store import EventStore, StoredEvent, StoreError
from ...textsafe import safe
from . import is_loopback

__all__ = ["create_app", "snapshot", "session_rows", "serve", "listen", "ListenError", "check_bind", "group_view"]

STATIC = resources.files("latch.ui.web") / "static"
_STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
}


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
    return {
        "id": info.id,
        "parent_id": info.parent_id,
        "format": info.format,
        "title": info.title,
        "source": info.source,
        "created_at": info.created_at,
        "events": info.events,
    }


def session_rows(store: EventStore) -> list[dict[str, Any]]:
    """``GET /api/sessions``'s rows, as ``latch sessions`` lists them (:func:`latch.host.summaries.listed_sessions`:
    newest first, each child after its parent; forgotten sessions left out): each session's
    :meth:`~latch.host.summaries.SessionSummary.as_dict` plus ``short`` (the shortest unique id prefix),
    ``depth`` (0 for a root), ``started_text`` and ``cost_text`` (what ``latch sessions`` prints), ``format``
    and ``created_at``."""
    listed = listed_sessions(store)
    shorts = short_ids([s.id for s, _ in listed])
    out = []
    for s, depth in listed:
        info = store.session(s.id)
        out.append(
            {
                **s.as_dict(),
                "parent_id": s.parent_id,
                "short": shorts[s.id],
                "depth": depth,
                "started_text": s.started_text(),
                "cost_text": s.cost_text(),
                "format": info.format,
                "created_at": info.created_at,
            }
        )
    return out


def _state(store: EventStore, sid: str) -> Any:
    return canonical_state(store, sid, cache=kernel_cache())


def _status(store: EventStore, sid: str, events: list[Any], observed: bool) -> dict[str, Any]:
    state = _state(store, sid)
    live, run = session_liveness(events, observed=observed)
    return {
        "last_seq": events[-1].seq if events else 0,
        "live": live,
        "activity": R.activity(events, live=live),
        "usage": R.usage_totals(events),
        "state": R.state_summary(state),
        "costs": R.request_costs(events),
        "context": R.context_breakdown(events),
        "cache": R.cache_epochs(events),
        "run": run,
        "commands": R.commands(events),
        "group": group_view(store, sid),
        "canonical": canonical_view(state),
    }


def snapshot(store: EventStore, session_id: str, *, live: bool = False) -> dict[str, Any]:
    """The current view of a session, rebuilt from committed events by :mod:`latch.host.reducers`:
    ``{"session": {"id", "parent_id", "format", "source", "created_at", "events", "run", "commands", "group"},
    **session_view}`` (:func:`latch.host.reducers.session_view`: ``last_seq``, ``live``, ``transcript``,
    ``evidence``, ``requests``, ``activity``, ``usage``, ``state``, ``costs``, ``context``, ``cache``; so the
    snapshot minus ``session`` is exactly what ``latch show --json`` and the TUI build; ``run``:
    :func:`latch.host.reducers.run_status`; ``commands``: :func:`latch.host.reducers.commands`; ``group``:
    :func:`latch.agent.group.group_view`) (``last_seq``: the session's newest event seq, 0 when it has none).
    ``live`` comes from the durable run lifecycle (:func:`latch.host.runs.session_liveness`: the latest run
    started, not ended, its process alive); the ``live`` argument is only the fallback for a session no
    ``latch run`` recorded. Raises ``KeyError`` for an unknown session. Strings are returned as stored (the
    server makes them inert when it sends them)."""
    info = store.session(session_id)
    events = list(store.events(info.id))
    is_live, run = session_liveness(events, observed=live)
    row = {**_session_row(info), "run": run, "commands": R.commands(events), "group": group_view(store, info.id)}
    return {"session": row, **R.session_view(events, _state(store, info.id), live=is_live)}


def check_bind(host: str, token: str | None) -> None:
    """Raise ``ValueError`` (one line) when binding ``host`` is not allowed: a non-loopback host needs a
    non-empty token."""
    if token is not None and not token.strip():
        raise ValueError("empty --token: give a secret string")
    if not is_loopback(host) and token is None:
        raise ValueError(f"binding {host} (not loopback) requires --token")


def create_app(db: str | Path, *, token: str | None = None, poll_interval: float = 0.2, retry_ms: int = 500) -> Any:
    """The Starlette app over the store at ``db`` (a path; opened once; it writes only queued commands). ``token``: required on
    every request when set. ``poll_interval``: seconds between store polls of an open stream; ``retry_ms``:
    the reconnect delay the stream asks browsers for."""
    from sse_starlette import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    # the replay machinery (latch.cli.replay: engine, estimators, plugin host) loads when a server starts,
    # not with the plugin host of every command (`latch --help` lists `web`)
    from .replay import ReplayCache

    store = EventStore(db)
    start_seq = store.max_seq()
    replays = ReplayCache(store)

    def observed(sid: str) -> bool:  # the fallback for sessions no `latch run` recorded (session_liveness)
        return store.max_seq(sid) > start_seq

    def error(status: int, message: str) -> Response:
        return JSONResponse({"error": safe(message)}, status_code=status)

    def json_response(value: Any) -> Response:
        return Response(_dumps(value), media_type="application/json")

    def find(request: Request) -> Any:
        """The session the path names, else the error response: 404 unknown, 410 forgotten (a tombstoned
        session or a descendant of one: normal history selectors omit it, its transcript included)."""
        try:
            info = store.session(request.path_params["sid"])
        except KeyError as exc:
            return error(404, str(exc.args[0]) if exc.args else "unknown session")
        if info.id in tombstoned_sessions(store):
            return error(410, forgotten_message(info.id))
        return info

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
        return json_response({"sessions": await asyncio.to_thread(session_rows, store)})

    async def session(request: Request) -> Response:
        info = find(request)
        if isinstance(info, Response):
            return info
        return json_response(await asyncio.to_thread(snapshot, store, info.id, live=observed(info.id)))

    async def replay(request: Request, call: Any, *args: Any) -> Any:
        info = find(request)
        if isinstance(info, Response):
            return info
        try:
            return await asyncio.to_thread(call, info.id, *args)
        except (HostError, StoreError) as exc:
            return error(400 if isinstance(exc, HostError) else 500, f"replay of {info.id}: {exc}")

    async def replay_table(request: Request) -> Response:
        got = await replay(request, replays.get)
        return got if isinstance(got, Response) else json_response(got)

    async def replay_view(request: Request) -> Response:
        raw = request.path_params["n"]
        number = int(raw) if raw.isascii() and raw.isdigit() else 0
        got = await replay(request, replays.view, number)
        if isinstance(got, Response):
            return got
        if got is None:
            doc = await replay(request, replays.get)
            count = len(doc["requests"])
            return error(
                404,
                f"request {raw!r} is out of range: session {doc['session']} has {count} model request(s), 1..{count}",
            )
        return json_response(got)

    async def events(request: Request) -> Response:
        info = find(request)
        if isinstance(info, Response):
            return info
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
            return error(400, f"bad resume point {raw[:40]!r}: give a non-negative event seq")
        after = int(raw)
        sid = info.id
        last = await asyncio.to_thread(store.max_seq)
        if after > last:
            return error(400, f"resume point {after} is past the store's last event ({last})")

        def read_after(after_seq: int) -> list[StoredEvent]:
            return list(store.events(sid, after_seq=after_seq, limit=500))

        async def stream() -> AsyncIterator[dict[str, Any]]:
            history = await asyncio.to_thread(lambda: list(store.events(sid, until_seq=after)))
            seen = after
            first = True
            while True:
                new = await asyncio.to_thread(read_after, seen)
                for ev in new:
                    yield {
                        "id": str(ev.seq),
                        "event": "event",
                        "data": _dumps({"seq": ev.seq, "kind": ev.kind, "item": R.transcript_item(ev)}),
                    }
                if new:
                    seen = new[-1].seq
                    history.extend(new)
                if new or first:
                    status = await asyncio.to_thread(_status, store, sid, history, observed(sid))
                    status["last_seq"] = seen
                    message: dict[str, Any] = {"event": "status", "data": _dumps(status)}
                    if first:
                        message["retry"] = retry_ms
                    first = False
                    yield message
                if not new:
                    if await request.is_disconnected():
                        return
                    await asyncio.sleep(poll_interval)

        return EventSourceResponse(stream(), ping=15)

    async def command(request: Request) -> Response:
        info = find(request)
        if isinstance(info, Response):
            return info
        refused = _refuse_command(request, token)
        if refused is not None:
            return error(*refused)
        raw = await request.body()
        try:
            body = json.loads(raw) if len(raw) <= MAX_COMMAND_BYTES else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            return error(
                400,
                f"the body must be a JSON object of at most {MAX_COMMAND_BYTES} bytes: "
                '{"command": "steer"|"stop"|"compact", "text": ..., "id": ...}',
            )
        cmd, text, rid = body.get("command"), body.get("text"), body.get("id")
        try:
            receipt = await asyncio.to_thread(
                lambda: RunCommands(store, info.id).send(cmd, text, receipt=rid, source="web")
            )
        except NoRunningRun as exc:
            return error(409, str(exc))
        except ValueError as exc:
            return error(400, str(exc))
        return Response(_dumps({"receipt": receipt}), status_code=202, media_type="application/json")

    async def receipt(request: Request) -> Response:
        info = find(request)
        if isinstance(info, Response):
            return info
        got = await asyncio.to_thread(RunCommands(store, info.id).receipt, request.path_params["cid"])
        if got is None:
            return error(404, f"no command {request.path_params['cid']!r} in session {info.id}")
        return json_response({"receipt": got})

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/s/{sid}", page),
            Route("/s/{sid}/replay", page),
            Route("/static/{name}", static),
            Route("/api/sessions", sessions),
            Route("/api/sessions/{sid}", session),
            Route("/api/sessions/{sid}/events", events),
            Route("/api/sessions/{sid}/replay", replay_table),
            Route("/api/sessions/{sid}/replay/{n}", replay_view),
            Route("/api/sessions/{sid}/commands", command, methods=["POST"]),
            Route("/api/sessions/{sid}/commands/{cid}", receipt),
        ]
    )
    app.state.store = store
    app.state.replays = replays
    return _TokenGate(app, token) if token is not None else _LoopbackHostGate(app)


MAX_COMMAND_BYTES = 65_536
"""The largest command body accepted (bytes)."""

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")


def _refuse_command(request: Any, token: str | None) -> tuple[int, str] | None:
    """Why a command POST is refused (``(status, message)``), or ``None``: it must be ``application/json``
    (415), carry the ``X-Latch-Token`` header (the app's token when it has one; any value on a token-less
    loopback server) (401), come from this server's own origin when the browser says where it comes from
    (403), and, without a token, name a loopback ``Host`` (403: a DNS-rebound name is refused). A cross-site
    form cannot send JSON or a custom header, so a page of another site cannot queue a command."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return 415, "a command is a JSON body (Content-Type: application/json)"
    sent = request.headers.get("x-latch-token")
    if sent is None or (
        token is not None
        and not hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass"))
    ):
        return 401, "a command needs the X-Latch-Token header (the server's --token)"
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if origin is not None and origin.split("://", 1)[-1] != host:
        return 403, "a command must come from this server's own page (Origin does not match Host)"
    if token is None and host.rsplit(":", 1)[0] not in _LOOPBACK_NAMES and host not in _LOOPBACK_NAMES:
        return 403, "without --token, commands are accepted for a loopback Host only"
    return None


def _loopback_host(header: str) -> bool:
    """Whether a ``Host`` header names this machine: ``localhost``, ``127.x.x.x`` or ``[::1]``, any port."""
    name = header.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    return bool(name) and is_loopback(name)


class _LoopbackHostGate:
    """ASGI wrapper of a server without a token (it listens on loopback only): a request whose ``Host`` does not
    name this machine gets 403, so a page whose name was rebound to 127.0.0.1 (DNS rebinding) reads nothing."""

    def __init__(self, app: Any):
        self.app = app
        self.state = app.state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
            if not _loopback_host(host):
                from starlette.responses import JSONResponse

                await JSONResponse(
                    {
                        "error": "this server answers loopback Host names only (localhost, 127.0.0.1, "
                        "[::1]); serve another name with --host and --token"
                    },
                    status_code=403,
                )(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _TokenGate:
    """ASGI wrapper: a request without the token (``Authorization: Bearer T``, ``X-Latch-Token: T`` or
    ``?token=T``) gets 401."""

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
            if name == b"x-latch-token" and hmac.compare_digest(value, self._token):
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


class ListenError(OSError):
    """The server cannot listen on the address asked for (one line: ``cannot listen on HOST:PORT: reason``)."""


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` and listening (``port`` 0: a free one; ``getsockname()`` says
    which). Raises :class:`ListenError` when the host does not resolve or the address is taken or refused."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ListenError(f"cannot listen on {safe(host)}:{port}: {reason.lower()}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no conflict
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {safe(host)}:{port}: {(exc.strerror or str(exc)).lower()}") from None
    return sock


def serve(
    db: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Run the server until interrupted, on ``sock`` (from :func:`listen`) or a socket it binds itself.
    Raises ``ValueError`` for a bind :func:`check_bind` refuses and :class:`ListenError` when it cannot listen."""
    import uvicorn

    check_bind(host, token)
    sock = sock or listen(host, port)
    server = uvicorn.Server(
        uvicorn.Config(create_app(db, token=token), log_level="warning", timeout_graceful_shutdown=2)
    )
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
