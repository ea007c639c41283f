"""MCP tools through the official SDK (``mcp>=2,<3``; spec: "Agent Skills and MCP").

Servers come from the config's ``[mcp.servers.NAME]`` tables (validated by
:func:`latch.config.validate_config`): ``command``, ``args``, ``env`` start a stdio subprocess; ``url`` (with
optional ``bearer_token_env_var`` and ``env_http_headers``, header values read from the environment when
connecting, never stored) reaches a streamable-HTTP server; ``timeout`` is seconds per call. Both go through
the SDK's :class:`mcp.Client` (:class:`McpHub`: one background thread runs the SDK's event loop; every public
method is synchronous).

The session's tools are listed once, when it starts (:func:`session_mcp_tools`): every tool of every server,
named ``mcp__SERVER__TOOL``, its schema serialized canonically, sorted by that name, appended as one
:class:`~latch.events.McpToolsListed`. Every request of the session, resume included, offers exactly those
schemas (:func:`mcp_tools`), so a server that disconnects, restarts, or re-lists its tools in another order or
without one never changes the provider-visible tools: a call to a tool its server no longer lists, or made
while the server cannot be reached, is an error result (the hub reconnects on the next call).

A tool whose annotations do not promise ``readOnlyHint: true`` is a possible external mutation: the loop asks
permission for it like a shell command, commits its :class:`~latch.events.ToolStarted` before it runs, and
:class:`McpTool` appends a :class:`~latch.events.Mutation` (no paths: anything may have changed) before
calling the server, so validation evidence recorded earlier is stale (a new workspace generation). Results
are ordinary durable :class:`~latch.events.ToolResult` events (searchable, recallable).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ..events import McpToolEntry, McpToolsListed, Mutation, canonical_json
from ..records import dataclass
from ..store import EventLog
from .tools.base import ToolContext, ToolOutcome

__all__ = [
    "McpServerConfig",
    "McpHub",
    "McpTool",
    "McpUnavailable",
    "mcp_servers",
    "tool_entries",
    "session_mcp_tools",
    "mcp_tools",
    "TOOL_PREFIX",
    "DEFAULT_TIMEOUT_SECONDS",
    "CONNECT_TIMEOUT_SECONDS",
    "DESCRIPTION_LIMIT",
    "stderr_tail",
    "STDERR_TAIL_LINES",
]

TOOL_PREFIX = "mcp__"
DEFAULT_TIMEOUT_SECONDS = 120.0
"""Seconds one tool call may take unless the server's ``timeout`` says otherwise."""
CONNECT_TIMEOUT_SECONDS = 30.0
"""Seconds to start a server, initialize the session and list its tools."""
PING_TIMEOUT_SECONDS = 5.0
DESCRIPTION_LIMIT = 4096
"""Characters of a tool description offered to the model (longer ones are cut)."""
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpUnavailable(Exception):
    """A server cannot be reached (not started, exited, timed out); the message is one line."""


@dataclass(frozen=True)
class McpServerConfig:
    """One ``[mcp.servers.NAME]`` table. Stdio: ``command`` and ``args`` start it; ``env`` is merged over the
    SDK's safe default environment. Streamable HTTP: ``url`` (``command`` empty); ``bearer_token_env_var``
    names the environment variable sent as ``Authorization: Bearer VALUE``; ``env_http_headers`` maps header
    names to environment variable names (only names are kept here, never values). ``timeout`` is seconds per
    call."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    url: str | None = None
    bearer_token_env_var: str | None = None
    env_http_headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        """``"http"`` (streamable HTTP, with :attr:`url`) or ``"stdio"``."""
        return "http" if self.url else "stdio"

    @property
    def target(self) -> str:
        """What it connects to, for display: the URL, or the command line (arguments joined by spaces)."""
        return self.url if self.url else " ".join((self.command, *self.args))

    def http_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The HTTP headers to send, their values read from ``environ`` (default ``os.environ``) now.
        :class:`McpUnavailable` (one line naming the variable, never a value) when one is unset or empty."""
        environ = os.environ if environ is None else environ
        wanted = [(header, var, "") for header, var in self.env_http_headers.items()]
        if self.bearer_token_env_var:
            wanted.append(("Authorization", self.bearer_token_env_var, "Bearer "))
        out: dict[str, str] = {}
        for header, var, prefix in wanted:
            value = environ.get(var, "")
            if not value:
                raise McpUnavailable(f"the environment variable {var} (for the {header} header) is not set")
            out[header] = prefix + value
        return out


def mcp_servers(config: Mapping[str, Any] | None) -> list[McpServerConfig]:
    """The servers of a config already checked by :func:`latch.config.validate_config`, sorted by name."""
    servers = ((config or {}).get("mcp") or {}).get("servers") or {}
    return [
        McpServerConfig(
            name,
            t.get("command", ""),
            tuple(t.get("args", ())),
            dict(t.get("env", {})),
            float(t.get("timeout", DEFAULT_TIMEOUT_SECONDS)),
            t.get("url"),
            t.get("bearer_token_env_var"),
            dict(t.get("env_http_headers", {})),
        )
        for name, t in sorted(servers.items())
    ]


def tool_entries(server: str, tools: Sequence[Any]) -> tuple[list[McpToolEntry], list[str]]:
    """``(entries, warnings)`` of one server's listed tools (SDK :class:`mcp.types.Tool` objects): each
    named ``mcp__SERVER__TOOL`` with its canonical schema, sorted by name. A tool whose prefixed name is not
    1-64 letters, digits, ``_`` or ``-`` (what providers accept) is left out with a warning."""
    out: list[McpToolEntry] = []
    warnings: list[str] = []
    for t in tools:
        name = f"{TOOL_PREFIX}{server}__{t.name}"
        if not _NAME_RE.match(name):
            warnings.append(
                f"mcp server {server}: tool {t.name!r} left out: {name!r} is not a valid tool name "
                "(1-64 letters, digits, _ or -)"
            )
            continue
        description = " ".join((t.description or getattr(t, "title", None) or "").split())
        if len(description) > DESCRIPTION_LIMIT:
            description = description[: DESCRIPTION_LIMIT - 1] + "…"
        schema = {
            "name": name,
            "description": description or f"The {t.name} tool of MCP server {server}.",
            "input_schema": dict(t.input_schema or {"type": "object"}),
        }
        annotations = getattr(t, "annotations", None)
        read_only = bool(annotations is not None and getattr(annotations, "read_only_hint", None) is True)
        out.append(McpToolEntry(name, server, t.name, canonical_json(schema), read_only))
    return sorted(out, key=lambda e: e.name), warnings


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in result.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(base64.b64decode(block.data or "", validate=False)) if block.data else 0
            parts.append(f"[{kind} {block.mime_type}, {size:,} bytes, not shown]")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[binary resource {res.uri}, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.uri}]")
        else:
            parts.append(f"[{kind} content, not shown]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(canonical_json(result.structured_content))
    return "\n".join(parts) if parts else "(no output)"


def _one_line(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class _SdkNotes(logging.Handler):
    """The MCP SDK logs a misbehaving server (a line that is not JSON-RPC, a dropped stream) with a traceback on
    stderr. Latch keeps the newest such record as one line instead, for the error of the server being reached,
    and prints nothing: ``latch mcp list --connect`` says one line per failing server, ``latch run`` stays clean."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:  # its first line (a pydantic error goes on for dozens)
                first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
                text = f"{text}: {' '.join(first.split())}"
            self.last = text if len(text) <= 300 else text[:299] + "…"
        except Exception:  # a log record must never break a connection
            pass

    def take(self) -> str | None:
        got, self.last = self.last, None
        return got


_SDK_NOTES = _SdkNotes()


def _quiet_sdk_logs() -> None:
    """Route the ``mcp`` loggers to :data:`_SDK_NOTES` only (once per process)."""
    logger = logging.getLogger("mcp")
    if _SDK_NOTES not in logger.handlers:
        logger.addHandler(_SDK_NOTES)
        logger.propagate = False


async def _list_all(client: Any) -> list[Any]:
    """Every tool a server lists now (all pages, at most 100), in its order."""
    tools: list[Any] = []
    cursor = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


class _Conn:
    def __init__(self) -> None:
        self.client: Any = None
        self.tools: dict[str, Any] = {}
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.alive = False


STDERR_TAIL_LINES = 3
"""The most lines of a server's stderr an error about its failed start quotes (each at most 200 characters)."""


def stderr_tail(fh: Any, offset: int, lines: int = STDERR_TAIL_LINES) -> str:
    """The last ``lines`` non-blank lines written to the file ``fh`` from byte ``offset`` on, joined by `` | ``
    (the tail of a server's stderr since it was started); ``""`` when it wrote nothing or the file is unreadable."""
    try:
        size = os.fstat(fh.fileno()).st_size
        data = os.pread(fh.fileno(), min(size - offset, 64 * 1024), max(offset, size - 64 * 1024))
    except (OSError, ValueError):
        return ""
    got = [" ".join(x.split()) for x in data.decode("utf-8", "replace").splitlines() if x.strip()][-lines:]
    return " | ".join(x if len(x) <= 200 else x[:199] + "…" for x in got)


class McpHub:
    """Connections to the configured MCP servers through the SDK's client (stdio subprocesses, or
    streamable-HTTP endpoints).

    ``servers`` are :class:`McpServerConfig`; ``cwd`` is the servers' working directory (the workspace);
    ``log_dir`` receives each server's stderr as ``NAME.log`` (default: discarded). Servers start on first use
    (:meth:`list_tools`, :meth:`call`); a server found dead is restarted on the next use. :meth:`close` stops
    them all. Thread-safe: calls are serialized on the hub's own event loop thread.
    """

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        cwd: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
    ):
        self.servers = {s.name: s for s in servers}
        self.cwd = str(cwd) if cwd is not None else None
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.connect_timeout = connect_timeout
        self._conns: dict[str, _Conn] = {}
        self._logs: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False
        _quiet_sdk_logs()

    # -------------------------------------------------------------- the loop thread
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._closed:
            raise McpUnavailable("the MCP hub is closed")
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="latch-mcp", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    def _run(self, coro: Any, timeout: float) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise McpUnavailable(f"no answer within {timeout:g} s") from None

    def _errlog(self, name: str) -> Any:
        """The file server ``name``'s stderr goes to: ``log_dir/NAME.log``, else a temporary file (read back by
        :func:`stderr_tail` when the server fails to start)."""
        if self.log_dir is None:
            fh: Any = tempfile.TemporaryFile("w+", encoding="utf-8")
        else:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            fh = open(self.log_dir / f"{name}.log", "a+", encoding="utf-8")
        self._logs.append(fh)
        return fh

    async def _connect(self, name: str) -> _Conn:
        cfg = self.servers[name]
        old = self._conns.pop(name, None)
        if old is not None:
            old.stop.set()
        conn = _Conn()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        _SDK_NOTES.take()  # a note from before this connection is not about it

        errlog: Any = None
        started_at = 0

        async def runner() -> None:
            nonlocal errlog, started_at
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if cfg.url:  # streamable HTTP: an httpx2 client carrying the headers, closed with the session
                        http = await stack.enter_async_context(create_mcp_http_client(headers=cfg.http_headers()))
                        transport: Any = streamable_http_client(cfg.url, http_client=http)
                    else:
                        params = StdioServerParameters(
                            command=cfg.command, args=list(cfg.args), env=dict(cfg.env) or None, cwd=self.cwd
                        )
                        errlog = self._errlog(name)
                        started_at = os.fstat(errlog.fileno()).st_size
                        transport = stdio_client(params, errlog=errlog)
                    client = await stack.enter_async_context(Client(transport, cache=None))
                    tools = await _list_all(client)
                    conn.client, conn.tools, conn.alive = client, {t.name: t for t in tools}, True
                    ready.set_result(None)
                    await conn.stop.wait()
            except BaseException as exc:  # the server exited, or could not start: the next use reconnects
                if not ready.done():
                    note = _SDK_NOTES.take()
                    tail = stderr_tail(errlog, started_at) if errlog is not None else ""
                    ready.set_exception(
                        McpUnavailable(
                            _one_line(exc)
                            + (f" ({note})" if note else "")
                            + (f"; its stderr ended: {tail}" if tail else "")
                        )
                    )
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
            finally:
                conn.alive = False

        conn.task = asyncio.ensure_future(runner())
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except TimeoutError:
            conn.stop.set()
            conn.task.cancel()
            raise McpUnavailable(f"not ready within {self.connect_timeout:g} s") from None
        self._conns[name] = conn
        return conn

    async def _live(self, name: str) -> _Conn:
        """A connection whose server answers a fresh ``tools/list`` now (its live listing updated), reconnecting
        when the server exited since its last use (no tool was called yet, so reconnecting is safe)."""
        conn = self._conns.get(name)
        if conn is not None and conn.alive:
            try:
                conn.tools = {t.name: t for t in await asyncio.wait_for(_list_all(conn.client), PING_TIMEOUT_SECONDS)}
                return conn
            except Exception:
                conn.alive = False
        return await self._connect(name)

    async def _locked(self, coro: Any) -> Any:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await coro

    # -------------------------------------------------------------- public
    def list_tools(self, name: str) -> list[Any]:
        """The tools server ``name`` lists now (SDK ``Tool`` objects, in its order). :class:`McpUnavailable`
        (one line) when it cannot be started or listed; ``KeyError`` for a server not configured."""
        if name not in self.servers:
            raise KeyError(f"no MCP server {name!r} is configured (known: {', '.join(self.servers) or 'none'})")

        async def go() -> list[Any]:
            return list((await self._live(name)).tools.values())

        try:
            tools: list[Any] = self._run(self._locked(go()), self.connect_timeout + PING_TIMEOUT_SECONDS + 5)
            return tools
        except McpUnavailable as exc:
            raise McpUnavailable(f"mcp server {name}: {exc}") from None

    def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """``(text, is_error)`` of one call of ``tool`` on ``server``. Never raises: a server that is not
        configured, cannot be reached, no longer lists the tool, or fails the call gives an error text."""
        cfg = self.servers.get(server)
        if cfg is None:
            return f"[not run: MCP server {server!r} is not configured in this run]", True

        async def go() -> tuple[str, bool]:
            try:
                conn = await self._live(server)
            except McpUnavailable as exc:
                return f"[not run: MCP server {server} is not available: {exc}]", True
            if tool not in conn.tools:
                return (
                    f"[not run: MCP server {server} no longer offers the tool {tool!r} (it did when this "
                    f"session started; it lists: {', '.join(conn.tools) or 'nothing'})]"
                ), True
            try:
                result = await conn.client.call_tool(tool, dict(arguments), read_timeout_seconds=cfg.timeout)
            except Exception as exc:
                conn.alive = conn.alive and not isinstance(exc, (OSError, EOFError))
                return f"[MCP server {server}: the call failed: {_one_line(exc)}]", True
            return _result_text(result), bool(result.is_error)

        try:
            outcome: tuple[str, bool] = self._run(
                self._locked(go()), cfg.timeout + self.connect_timeout + PING_TIMEOUT_SECONDS + 5
            )
            return outcome
        except McpUnavailable as exc:
            return f"[MCP server {server}: {exc}; the call's outcome is unknown]", True

    def close(self) -> None:
        """Stop every server and the hub's thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        loop = self._loop
        if loop is not None:

            async def stop_all() -> None:
                tasks = []
                for conn in self._conns.values():
                    conn.stop.set()
                    if conn.task is not None:
                        tasks.append(conn.task)
                if tasks:
                    await asyncio.wait(tasks, timeout=5)

            try:
                asyncio.run_coroutine_threadsafe(stop_all(), loop).result(10)
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(10)
        for fh in self._logs:
            fh.close()

    def __enter__(self) -> McpHub:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def session_mcp_tools(
    store: EventLog, session_id: str, hub: McpHub | None
) -> tuple[tuple[McpToolEntry, ...], list[str]]:
    """``(entries, warnings)``: the MCP tools of the session, fixed at its start.

    The session's first :class:`~latch.events.McpToolsListed` when it has one (resume, or any later call:
    whatever the servers list now). Otherwise every server of ``hub`` is listed once (one warning line per
    server that fails or tool left out) and the entries, sorted by name, are appended as that event, but only
    while the session has no assistant turn yet: a session that started without MCP servers (no event) keeps
    offering none, so its tools never change mid-session.
    """
    for s in store.events(session_id, kinds=[McpToolsListed.KIND]):
        if isinstance(s.event, McpToolsListed):
            return tuple(s.event.tools), []
    started = any(True for _ in store.events(session_id, kinds=["assistant_message"]))
    entries: list[McpToolEntry] = []
    warnings: list[str] = []
    failed: dict[str, str] = {}
    names: tuple[str, ...] = tuple(hub.servers) if hub is not None else ()
    if hub is not None and not started:
        for name in names:
            try:
                listed = hub.list_tools(name)
            except McpUnavailable as exc:
                failed[name] = str(exc)
                warnings.append(f"{exc} (its tools are not offered in this session)")
                continue
            got, w = tool_entries(name, listed)
            entries += got
            warnings += w
    ordered = tuple(sorted(entries, key=lambda e: e.name))
    if names and not started:  # a session without servers (or started without them) gets no event
        store.append(session_id, [McpToolsListed(ordered, names, failed)])
    return ordered, warnings


class McpTool:
    """One MCP tool of the session (an instance per :class:`~latch.events.McpToolEntry`): ``NAME`` and
    ``SCHEMA`` come from the stored entry, never from a later listing; ``MUTATES`` unless ``readOnlyHint``."""

    RAW_ARGUMENTS: ClassVar[bool] = True

    def __init__(self, entry: McpToolEntry, hub: McpHub | None):
        self.entry, self.hub = entry, hub
        self.NAME = entry.name
        self.SCHEMA: Mapping[str, Any] = json.loads(entry.schema)
        self.MUTATES = not entry.read_only

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        if self.MUTATES:  # a possible external mutation, committed before the server runs it
            ctx.store.append(ctx.session_id, [Mutation(paths=(), tool=self.NAME)])
        if self.hub is None:
            return ToolOutcome(
                f"[not run: MCP server {self.entry.server} is not configured in this run]", is_error=True
            )
        text, is_error = self.hub.call(self.entry.server, self.entry.tool, args)
        return ToolOutcome(text, is_error=is_error)


def mcp_tools(entries: Sequence[McpToolEntry], hub: McpHub | None) -> tuple[McpTool, ...]:
    """The tool objects of ``entries`` (in their stored order) calling through ``hub``."""
    return tuple(McpTool(e, hub) for e in entries)
