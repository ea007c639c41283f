"""``latch skills [--json]`` and ``latch mcp list [--json] [--connect]`` (spec: "Agent Skills and MCP").

``latch skills`` lists the Agent Skills ``latch run`` would offer a new session started in the current folder
(:func:`latch.agent.skills.discover_skills`: ``.latch/skills/``, ``skills/`` beside the config file,
``.claude/skills/``), in the session context's order (by name): name, source, description and folder. A
``SKILL.md`` that is skipped (invalid front matter, a name already found) is one ``warning:`` line on stderr
naming the file; with ``--json`` the document is ``{"skills": [{name, description, source, path}],
"warnings": [...]}`` on stdout (the warnings are in it, not on stderr).

``latch mcp list`` lists the ``[mcp.servers.NAME]`` tables of the same config as ``latch run``
(``--config FILE``, default ``$LATCH_HOME/config.toml``): name, transport (``stdio`` or ``http``) and the
command line or URL (never an ``env`` value or a header value). ``--connect`` starts or reaches each server
with the SDK's client and lists its tools as the model would see them (``mcp__NAME__TOOL``, read-only when
the tool's annotations promise ``readOnlyHint``); a server that cannot be reached is its error line, and the
command still exits 0. ``--json``: ``{"servers": [{name, transport, command | url, status, error, tools:
[{name, tool, read_only}]}]}`` (``status`` is ``not connected`` without ``--connect``, then ``ok`` or
``error``). Every file- or server-derived string is escaped (:mod:`latch.textsafe`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ..agent.mcp import McpHub, McpUnavailable, mcp_servers, tool_entries
from ..agent.skills import discover_skills
from ..textsafe import Table, cell, console, dumps, safe, warn
from .main import AppContext, pass_app

__all__ = ["register", "skills_document", "mcp_document"]


def skills_document(
    workspace: str | os.PathLike[str], user_dir: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """``{"skills": [...], "warnings": [...]}`` of the skills found for ``workspace`` (see the module doc)."""

    skills, warnings = discover_skills(workspace, user_dir)
    return {
        "skills": [{"name": s.name, "description": s.description, "source": s.source, "path": s.path} for s in skills],
        "warnings": list(warnings),
    }


def mcp_document(config: Any, *, connect: bool = False, cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``{"servers": [...]}`` of a checked config's MCP servers, sorted by name; with ``connect`` each one is
    listed now through :class:`latch.agent.mcp.McpHub` (see the module doc). Never raises for a server that
    cannot be reached."""

    servers = mcp_servers(config)
    docs: list[dict[str, Any]] = []
    hub = McpHub(servers, cwd=cwd) if connect and servers else None
    try:
        for s in servers:
            doc: dict[str, Any] = {"name": s.name, "transport": s.transport}
            if s.url:
                doc["url"] = s.url
            else:
                doc["command"] = [s.command, *s.args]
            doc.update(status="not connected", error=None, tools=[])
            if hub is not None:
                try:
                    listed = hub.list_tools(s.name)
                except McpUnavailable as exc:
                    doc.update(status="error", error=str(exc))
                except Exception as exc:  # the SDK's own failure: still one line for this server, never a traceback
                    text = " ".join(str(exc).split())[:300] or type(exc).__name__
                    doc.update(status="error", error=f"mcp server {s.name}: {type(exc).__name__}: {text}")
                else:
                    entries, left_out = tool_entries(s.name, listed)
                    doc.update(
                        status="ok",
                        error="; ".join(left_out) or None,
                        tools=[{"name": e.name, "tool": e.tool, "read_only": e.read_only} for e in entries],
                    )
            docs.append(doc)
    finally:
        if hub is not None:
            hub.close()
    return {"servers": docs}


def register(cli: click.Group) -> None:
    @cli.command("skills")
    @click.option("--json", "as_json", is_flag=True, help="Print the skills and warnings as JSON.")
    def skills_cmd(as_json: bool) -> None:
        """List the Agent Skills a new `latch run` session here would offer."""
        doc = skills_document(Path(os.getcwd()).resolve())
        if as_json:
            click.echo(dumps(doc, indent=2))
            return
        for w in doc["warnings"]:
            warn(w)
        con = console(highlight=False, soft_wrap=True)
        if not doc["skills"]:
            con.print(
                "no skills (looked in .latch/skills/, skills/ beside the config file, .claude/skills/)", markup=False
            )
            return
        table = Table("skill", "source", "description", "folder")
        for s in doc["skills"]:
            table.add_row(cell(s["name"]), cell(s["source"]), cell(s["description"]), cell(s["path"]))
        con.print(table)

    @cli.group("mcp")
    def mcp_group() -> None:
        """MCP servers of the configuration ([mcp.servers.NAME])."""

    @mcp_group.command("list")
    @click.option("--json", "as_json", is_flag=True, help="Print the servers (and tools) as JSON.")
    @click.option("--connect", is_flag=True, help="Start or reach each server and list its tools.")
    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config TOML (default: $LATCH_HOME/config.toml or the user config folder).",
    )
    @pass_app
    def mcp_list_cmd(app: AppContext, as_json: bool, connect: bool, config_path: str | None) -> None:
        """List the configured MCP servers (name, transport, command or URL); --connect adds their tools."""
        doc = mcp_document(app.config(config_path), connect=connect, cwd=Path(os.getcwd()).resolve())
        if as_json:
            click.echo(dumps(doc, indent=2))
            return
        con = console(highlight=False, soft_wrap=True)
        if not doc["servers"]:
            con.print("no MCP servers configured (add [mcp.servers.NAME] tables to the config)", markup=False)
            return
        table = Table("server", "transport", "command or url", "status")
        for s in doc["servers"]:
            target = s.get("url") or " ".join(s["command"])
            table.add_row(cell(s["name"]), cell(s["transport"]), cell(target), cell(s["status"]))
        con.print(table)
        if not connect:
            return
        for s in doc["servers"]:
            if s["status"] == "error":
                con.print(f"{safe(s['name'])}: {safe(s['error'])}", markup=False)
        tools = [(s["name"], t) for s in doc["servers"] for t in s["tools"]]
        if tools:
            tt = Table("tool", "server", "read-only")
            for server, t in tools:
                tt.add_row(cell(t["name"]), cell(server), cell("yes" if t["read_only"] else "no"))
            con.print(tt)
        for s in doc["servers"]:
            if s["status"] == "ok" and s["error"]:
                warn(s["error"])
