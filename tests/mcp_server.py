"""A small stdio MCP server built on the official SDK (``mcp.server.mcpserver.MCPServer``), for tests.

Which tools it registers, and in which order, comes from the JSON file named by ``LATCH_TEST_MCP_STATE``
(``{"tools": ["echo", "add", "note"], "crash": false}``; default: all, in that order), so a test can restart it
with its tools reordered or one missing; ``"crash": true`` makes it exit at once (a server that is down).
It writes its pid to ``LATCH_TEST_MCP_PID`` (when set) so a test can kill it. With ``--http PORT`` it serves
the SDK's streamable-HTTP app (``MCPServer.streamable_http_app()``, path ``/mcp``) under uvicorn on
``127.0.0.1:PORT`` instead of stdio; when ``LATCH_TEST_MCP_HEADER`` is set, every request must carry the
header ``X-Test-Token`` with that value (else 401). Tools:

* ``echo(text)``: read-only (``readOnlyHint``), returns ``echo: TEXT``;
* ``add(a, b)``: read-only, returns the sum;
* ``note(text)``: not read-only: appends a line ``TEXT<TAB>KINDS`` to the file ``LATCH_TEST_MCP_NOTES`` and
  returns ``noted``; KINDS are the event kinds of the SQLite store ``LATCH_TEST_MCP_DB`` (when set) at that
  moment, oldest first.
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def echo(text: str) -> str:
    """Echo the text back."""
    return "echo: " + text


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def note(text: str) -> str:
    """Append a line to the notes file (changes the world outside the workspace)."""
    seen = ""
    if os.environ.get("LATCH_TEST_MCP_DB"):  # what the store held while this ran (commit-before-execution pins)
        import sqlite3

        with sqlite3.connect(os.environ["LATCH_TEST_MCP_DB"]) as db:
            seen = " ".join(k for (k,) in db.execute("SELECT kind FROM events ORDER BY seq"))
    with open(os.environ["LATCH_TEST_MCP_NOTES"], "a", encoding="utf-8") as fh:
        fh.write(f"{text}\t{seen}\n")
    return "noted"


TOOLS = {"echo": (echo, True), "add": (add, True), "note": (note, False)}


def main() -> None:
    state = {"tools": list(TOOLS), "crash": False}
    path = os.environ.get("LATCH_TEST_MCP_STATE")
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            state.update(json.load(fh))
    if state.get("crash"):
        sys.exit(3)
    if os.environ.get("LATCH_TEST_MCP_PID"):
        with open(os.environ["LATCH_TEST_MCP_PID"], "w", encoding="utf-8") as fh:
            fh.write(str(os.getpid()))
    server = MCPServer("latch-test")
    for name in state["tools"]:
        fn, read_only = TOOLS[name]
        server.add_tool(fn, name=name, annotations=ToolAnnotations(read_only_hint=True) if read_only else None)
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(server, int(sys.argv[2]))
    else:
        server.run("stdio")


def serve_http(server: MCPServer, port: int) -> None:
    """The SDK's streamable-HTTP Starlette app under uvicorn on the loopback ``port`` (until killed)."""
    import uvicorn

    app = server.streamable_http_app()
    token = os.environ.get("LATCH_TEST_MCP_HEADER")
    if token:
        inner = app

        async def app(scope, receive, send):  # type: ignore[no-redef]
            headers = dict(scope.get("headers") or ())
            if scope["type"] == "http" and headers.get(b"x-test-token", b"").decode() != token:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            await inner(scope, receive, send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
