"""``latch skills`` and ``latch mcp list``: the real CLI (click's ``CliRunner``) over real skill
folders, and ``--connect`` against real SDK servers (tests/mcp_server.py over stdio and over streamable HTTP)."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner
from test_agent_mcp import SERVER, Server
from test_agent_mcp_http import TOKEN, TOKEN_VAR, HttpServer

from latch.cli import _load_commands, cli

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

LONG = "a-skill-whose-name-is-long-enough-to-fold-in-a-narrow-table"


@pytest.fixture
def latch(tmp_path, monkeypatch):
    _load_commands()
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    home = tmp_path / "home"
    home.mkdir()

    def invoke(*args, columns=200, env=None):
        e = {"LATCH_HOME": str(home), "COLUMNS": str(columns), **(env or {})}
        return CliRunner().invoke(cli, ["--db", str(tmp_path / "latch.db"), *args], env=e, catch_exceptions=False)

    invoke.ws, invoke.home = ws, home
    return invoke


def write_skill(root, folder, front, body="Body.\n"):
    d = root / folder
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}")
    return d / "SKILL.md"


def test_latch_skills_lists_the_three_folders_in_order_with_warnings_naming_the_file(latch):
    write_skill(latch.ws / ".latch" / "skills", "pdf", "name: pdf\ndescription: Fill PDF forms.")
    write_skill(latch.home / "skills", "release", "name: release\ndescription: Cut a release.")
    write_skill(latch.ws / ".claude" / "skills", "alpha", 'name: alpha\ndescription: "zebra\\e[2J\\aring"')
    write_skill(latch.ws / ".claude" / "skills", "long", f"name: {LONG}\ndescription: Long.")
    bad = write_skill(latch.ws / ".latch" / "skills", "broken", "name: [unclosed\ndescription: x")
    r = latch("skills", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [(s["name"], s["source"]) for s in doc["skills"]] == [
        (LONG, "claude"),
        ("alpha", "claude"),
        ("pdf", "workspace"),
        ("release", "user"),
    ]
    assert doc["skills"][2]["path"] == str((latch.ws / ".latch" / "skills" / "pdf").resolve())
    assert doc["skills"][1]["description"] == "zebra\x1b[2J\x07ring"  # JSON escapes it: \u001b
    assert "\x1b" not in r.output
    (w,) = doc["warnings"]
    assert w.startswith(f"{bad}: skill skipped: front matter is not valid YAML")
    r = latch("skills", columns=60)
    assert r.exit_code == 0
    assert "\x1b" not in r.output and "\x07" not in r.output and "…" not in r.output
    assert [ln for ln in r.output.splitlines() if ln.startswith("warning: ")] == [f"warning: {w}"]
    r = latch("skills")
    assert LONG in r.output  # whole on one line when it fits
    assert "zebra\\x1b[2J\\x07ring" in r.output and "\x1b" not in r.output
    names = [ln.split()[1] for ln in r.output.splitlines() if ln.startswith("│")]
    assert names == [LONG, "alpha", "pdf", "release"]


def test_latch_skills_without_skills_says_where_it_looked(latch):
    r = latch("skills")
    assert r.exit_code == 0 and r.output.startswith("no skills (looked in .latch/skills/")
    assert json.loads(latch("skills", "--json").output) == {"skills": [], "warnings": []}


def _config(latch, server: Server, http: HttpServer) -> None:
    env_table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in {**server.env(), "SECRET": "topsecret-9"}.items())
    (latch.home / "config.toml").write_text(
        f"[mcp.servers.cli]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}]\n"
        f"env = {{ {env_table} }}\n\n"
        f'[mcp.servers.web]\nurl = {json.dumps(http.url)}\nenv_http_headers = {{ X-Test-Token = "{TOKEN_VAR}" }}\n'
    )


@pytest.fixture
def servers(tmp_path):
    (tmp_path / "srv").mkdir()
    s, h = Server(tmp_path / "srv"), HttpServer(tmp_path)
    yield s, h
    h.stop()


def test_latch_mcp_list_shows_the_servers_without_secrets(latch, servers):
    server, http = servers
    _config(latch, server, http)
    r = latch("mcp", "list", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc == {
        "servers": [
            {
                "name": "cli",
                "transport": "stdio",
                "command": [sys.executable, str(SERVER)],
                "status": "not connected",
                "error": None,
                "tools": [],
            },
            {
                "name": "web",
                "transport": "http",
                "url": http.url,
                "status": "not connected",
                "error": None,
                "tools": [],
            },
        ]
    }
    r = latch("mcp", "list", columns=50)
    assert r.exit_code == 0
    assert "topsecret" not in r.output and "…" not in r.output
    wide = latch("mcp", "list").output
    assert wide.count(http.url) == 1 and wide.count("not connected") == 2 and "topsecret" not in wide


def test_latch_mcp_list_connect_lists_tools_and_a_server_that_is_down(latch, servers):
    server, http = servers
    _config(latch, server, http)
    server.set(tools=["note", "echo"])
    r = latch("mcp", "list", "--connect", "--json", env={TOKEN_VAR: TOKEN})  # web is not started: down
    assert r.exit_code == 0, r.output
    cli_doc, web = json.loads(r.output)["servers"]
    assert cli_doc["status"] == "ok" and cli_doc["tools"] == [
        {"name": "mcp__cli__echo", "tool": "echo", "read_only": True},
        {"name": "mcp__cli__note", "tool": "note", "read_only": False},
    ]
    assert web["status"] == "error" and web["error"].startswith("mcp server web: ") and web["tools"] == []
    http.start()
    r = latch("mcp", "list", "--connect", env={TOKEN_VAR: TOKEN})
    assert r.exit_code == 0, r.output
    rows = [ln.split("│")[1:-1] for ln in r.output.splitlines() if ln.startswith("│")]
    tool_rows = [[c.strip() for c in row] for row in rows if row[0].strip().startswith("mcp__")]
    assert tool_rows == [
        ["mcp__cli__echo", "cli", "yes"],
        ["mcp__cli__note", "cli", "no"],
        ["mcp__web__add", "web", "yes"],
        ["mcp__web__echo", "web", "yes"],
        ["mcp__web__note", "web", "no"],
    ]
    assert TOKEN not in r.output


def test_latch_mcp_list_bad_config_is_one_line(latch):
    (latch.home / "config.toml").write_text('[mcp.servers.x]\nurl = "ftp://nope"\n')
    r = latch("mcp", "list")
    assert r.exit_code == 2 and "mcp.servers.x.url must be an http:// or https:// URL" in r.output
    assert "Traceback" not in r.output


def test_latch_mcp_list_connect_says_one_line_per_failing_server_never_a_traceback(tmp_path):
    """A real `latch mcp list --connect` process over servers that fail each its own way: a line that is not
    JSON-RPC (the SDK logs it with a traceback), a command that does not exist, a server that exits at once."""
    import os
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    garbage = "import sys, time; print('not json'); print('{\"jsonrpc\": 2}'); sys.stdout.flush(); time.sleep(3)"
    servers = {
        "garbage": [sys.executable, "-c", garbage],
        "missing": [str(tmp_path / "no-such-server")],
        "exits": [sys.executable, "-c", "raise SystemExit(3)"],
    }
    (home / "config.toml").write_text(
        "".join(
            f"[mcp.servers.{name}]\ncommand = {json.dumps(argv[0])}\nargs = {json.dumps(argv[1:])}\n\n"
            for name, argv in servers.items()
        )
    )
    env = {**os.environ, "LATCH_HOME": str(home), "COLUMNS": "200"}
    r = subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), "mcp", "list", "--connect"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and "Traceback" not in r.stdout
    notes = [ln for ln in r.stdout.splitlines() if not ln.startswith(("┏", "┃", "┡", "│", "└"))]
    assert [ln.split(":", 1)[0] for ln in notes] == ["exits", "garbage", "missing"]
    for ln in notes:
        name = ln.split(":", 1)[0]
        assert ln.startswith(f"{name}: mcp server {name}: ") and len(ln) < 400
    assert "Failed to parse JSONRPC message from server" in notes[1]
