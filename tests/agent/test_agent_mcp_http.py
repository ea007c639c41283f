"""MCP over streamable HTTP: a real SDK server (tests/mcp_server.py ``--http``: ``MCPServer``'s
streamable-HTTP app under uvicorn on a loopback port, in a subprocess) reached through the SDK's client by
:class:`latch.agent.mcp.McpHub` and the real agent loop, store and engine; the model is a scripted provider."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_agent_mcp import SERVER, Agent, Server, oa

from latch.agent.mcp import McpHub, McpServerConfig, mcp_servers, session_mcp_tools
from latch.config import ConfigError, validate_config
from latch.events import McpToolsListed
from latch.kernel.state import canonical_state
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

TOKEN_VAR = "LATCH_TEST_MCP_TOKEN_VALUE"
TOKEN = "s3cret-token-0f9a"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer(Server):
    """The test server as a streamable-HTTP subprocess on a fixed loopback port, restartable on that port."""

    def __init__(self, tmp_path: Path):
        super().__init__(tmp_path)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen | None = None
        self.log = tmp_path / "http-server.log"

    def start(self, db: Path | None = None) -> None:
        env = {**os.environ, **self.env(db), "LATCH_TEST_MCP_HEADER": TOKEN}
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(SERVER), "--http", str(self.port)], env=env, stdout=log, stderr=log
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the HTTP MCP server did not start: " + self.log.read_text())

    def kill(self) -> None:  # a crash: SIGKILL, no shutdown
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.kill()


@pytest.fixture
def http_server(tmp_path):
    s = HttpServer(tmp_path)
    yield s
    s.stop()


def config(server: HttpServer, **kw) -> McpServerConfig:
    return McpServerConfig("t", url=server.url, env_http_headers={"X-Test-Token": TOKEN_VAR}, **kw)


def test_http_server_crash_and_return_with_reordered_tools_keeps_the_tools_bytes_identical(
    tmp_path, http_server, monkeypatch
):
    monkeypatch.setenv(TOKEN_VAR, TOKEN)
    http_server.start(tmp_path / "latch.db")
    a = Agent(tmp_path, http_server, [], hub_config=config(http_server), assume_yes=True)
    try:
        assert a.warnings == []
        assert [e.name for e in a.entries] == ["mcp__t__add", "mcp__t__echo", "mcp__t__note"]
        assert [e.read_only for e in a.entries] == [True, True, False]
        a.provider._responses += [oa(calls=[("c1", "mcp__t__echo", {"text": "one"})])]
        first = a.loop.turn()
        assert first.results[0].content == "echo: one" and not first.results[0].is_error
        http_server.kill()  # the server crashes
        a.provider._responses += [oa(calls=[("c2", "mcp__t__echo", {"text": "two"})])]
        down = a.loop.turn()
        assert down.results[0].is_error and "not available" in down.results[0].content
        assert "\n" not in down.results[0].content
        http_server.set(tools=["note", "echo"])  # back on the same port, tools reordered, add missing
        http_server.start(tmp_path / "latch.db")
        a.provider._responses += [
            oa(
                calls=[
                    ("c3", "mcp__t__add", {"a": 1, "b": 2}),
                    ("c4", "mcp__t__echo", {"text": "three"}),
                    ("c5", "mcp__t__note", {"text": "after"}),
                ]
            ),
            oa("done"),
        ]
        back = a.loop.turn()
        missing, works, noted = back.results
        assert missing.is_error and "no longer offers the tool 'add'" in missing.content
        assert not works.is_error and works.content == "echo: three"
        assert noted.content == "noted" and [ln[0] for ln in http_server.note_lines()] == ["after"]
        last = a.loop.turn()
        steps = [first, down, back, last]
        tools = {json.dumps(s.body["tools"]).encode() for s in steps}
        assert len(tools) == 1  # every request of the session offered the same bytes
        assert [t["function"]["name"] for t in last.body["tools"] if "mcp__" in t["function"]["name"]] == [
            "mcp__t__add",
            "mcp__t__echo",
            "mcp__t__note",
        ]
        assert len(list(a.store.events(a.sid, kinds=[McpToolsListed.KIND]))) == 1
    finally:
        a.close()
    # the header's value was sent, never stored
    assert TOKEN.encode() not in (tmp_path / "latch.db").read_bytes()
    wal = tmp_path / "latch.db-wal"
    assert not wal.exists() or TOKEN.encode() not in wal.read_bytes()


def test_http_header_from_an_unset_variable_is_one_warning_and_no_request(tmp_path, http_server, monkeypatch):
    monkeypatch.delenv(TOKEN_VAR, raising=False)
    http_server.start()
    store = EventStore(tmp_path / "x.db")
    sid = store.create_session(workspace=str(tmp_path), source="latch run", format="latch")
    with McpHub([config(http_server)]) as hub:
        entries, warnings = session_mcp_tools(store, sid, hub)
        assert entries == ()
        assert warnings == [
            f"mcp server t: the environment variable {TOKEN_VAR} (for the X-Test-Token header) is "
            "not set (its tools are not offered in this session)"
        ]
        monkeypatch.setenv(TOKEN_VAR, "wrong")  # a wrong value: the server refuses, one line again
        text, is_error = hub.call("t", "echo", {"text": "x"})
        assert is_error and text.startswith("[not run: MCP server t is not available: ") and "\n" not in text
        monkeypatch.setenv(TOKEN_VAR, TOKEN)
        assert hub.call("t", "echo", {"text": "x"}) == ("echo: x", False)
    store.close()


def test_http_servers_come_from_the_config():
    cfg = validate_config(
        {
            "mcp": {
                "servers": {
                    "web": {
                        "url": "http://127.0.0.1:9/mcp",
                        "bearer_token_env_var": "WEB_TOKEN",
                        "env_http_headers": {"X-Api-Key": "WEB_KEY"},
                        "timeout": 7,
                    },
                    "cli": {"command": "srv"},
                }
            }
        }
    )
    cli, web = mcp_servers(cfg)
    assert (cli.transport, cli.target) == ("stdio", "srv")
    assert (web.name, web.transport, web.target, web.timeout) == ("web", "http", "http://127.0.0.1:9/mcp", 7.0)
    assert web.http_headers({"WEB_TOKEN": "abc", "WEB_KEY": "k"}) == {"X-Api-Key": "k", "Authorization": "Bearer abc"}


@pytest.mark.parametrize(
    "table, message",
    [
        ({"url": "ftp://x/mcp"}, "mcp.servers.x.url must be an http:// or https:// URL"),
        (
            {"url": "http://x/mcp", "command": "srv"},
            "'command' belongs to a stdio server (with command); a server with url takes url, bearer",
        ),
        (
            {"command": "srv", "env_http_headers": {}},
            "'env_http_headers' belongs to an HTTP server (with url); a server with command takes command, args",
        ),
        (
            {"url": "http://x/mcp", "bearer_token_env_var": "A B"},
            "bearer_token_env_var must be an environment variable",
        ),
        ({"url": "http://x/mcp", "env_http_headers": {"Bad Header": "V"}}, "'Bad Header' is not an HTTP header name"),
        ({"url": "http://x/mcp", "env_http_headers": {"X-K": "the value"}}, "env_http_headers.X-K must name an env"),
    ],
)
def test_bad_http_mcp_config_is_one_clear_error(table, message):
    with pytest.raises(ConfigError, match="^cfg.toml: ") as exc:
        validate_config({"mcp": {"servers": {"x": table}}}, "cfg.toml")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_http_mutating_tool_stales_passing_validation_and_a_read_only_one_does_not(tmp_path, http_server, monkeypatch):
    monkeypatch.setenv(TOKEN_VAR, TOKEN)
    http_server.start(tmp_path / "latch.db")
    a = Agent(tmp_path, http_server, [], hub_config=config(http_server), assume_yes=True)
    try:
        (a.ws / "test_ok.py").write_text("def test_ok():\n    assert True\n")
        a.provider._responses += [
            oa(calls=[("c1", "shell", {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider test_ok.py"})])
        ]
        a.loop.turn()
        st = canonical_state(a.store, a.sid)
        (obs,) = st.evidence
        assert obs["status"] == "passed" and obs["current"]
        g0 = st.generation
        a.provider._responses += [oa(calls=[("c2", "mcp__t__echo", {"text": "look"})])]
        assert a.loop.turn().results[0].content == "echo: look"
        st = canonical_state(a.store, a.sid)
        assert st.generation == g0 and st.evidence[0]["current"]
        a.provider._responses += [oa(calls=[("c3", "mcp__t__note", {"text": "changed"})])]
        assert a.loop.turn().results[0].content == "noted"
        ((text, seen),) = http_server.note_lines()
        assert text == "changed" and seen.split()[-2:] == ["tool_started", "mutation"]  # committed before it ran
        st = canonical_state(a.store, a.sid)
        assert st.generation == g0 + 1 and not st.evidence[0]["current"]
    finally:
        a.close()
