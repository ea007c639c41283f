"""``latch plugins``: every loaded plugin, the hooks it implements and what it registered."""

from __future__ import annotations

from typing import Any

import click

from ..plugins import PluginError, iter_plugins
from ..textsafe import Table, cell, console, dumps, plural


def plugins_report() -> list[dict[str, Any]]:
    """JSON-ready rows, in load order: built-ins first, then entry points by name.

    Each row: ``name``, ``source`` (``"built-in"`` or ``"<distribution> <version>"``),
    ``module``, ``builtin``, ``distribution``, ``version``, ``entry_point``, ``hooks``
    (sorted), ``registered`` (``{kind: [PLUGIN_NAME, ...]}``, only kinds with entries) and
    ``descriptions`` (``{PLUGIN_NAME: DESCRIPTION}`` of what it registered, ``""`` when absent).
    """
    return [
        {
            "name": info.name,
            "source": info.source,
            "module": info.module,
            "builtin": info.builtin,
            "distribution": info.distribution,
            "version": info.version,
            "entry_point": info.entry_point,
            "hooks": hooks,
            "registered": {kind: [r.name for r in regs] for kind, regs in registered.items()},
            "descriptions": {
                r.name: str(getattr(r.cls, "DESCRIPTION", "") or "") for regs in registered.values() for r in regs
            },
        }
        for info, hooks, registered in iter_plugins()
    ]


def register(cli: click.Group) -> None:
    @cli.command("plugins")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON list of plugins.")
    def plugins_cmd(as_json: bool) -> None:
        """List plugins, their hooks and what they registered (engines, estimators, ...).

        LATCH_LOAD_PLUGINS (allowlist), LATCH_DISABLE_PLUGINS (blocklist) and
        LATCH_TRACE_PLUGINS (trace hook calls to stderr) apply.
        """
        try:
            rows = plugins_report()
        except PluginError as exc:
            raise click.ClickException(str(exc)) from None
        if as_json:
            click.echo(dumps(rows, indent=2))
            return
        table = Table("plugin", "source", "hooks", "registered", title=plural(len(rows), "plugin"))
        for row in rows:
            registered = "\n".join(f"{kind}: {', '.join(names)}" for kind, names in row["registered"].items())
            hooks = "\n".join(h.removeprefix("latch_") for h in row["hooks"])
            table.add_row(
                cell(row["name"]),
                cell(row["source"]),
                cell(hooks, multiline=True),
                cell(registered or "-", multiline=True),
            )
        console(highlight=False, soft_wrap=False).print(table)
