"""The ``latch`` command (click + rich).

Subcommands live in :mod:`latch.commands` (one module each, registered through
``register(cli)``) and in plugins (hook ``latch_register_commands``). User
mistakes exit with status 2 and a one-line message, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

from . import __version__

COMMAND_MODULES = ("sessions", "doctor", "replay", "context", "state", "plugins_cmd", "bench", "stress")


class AppContext:
    """Shared CLI state: the ``--db`` path, lazily opened store."""

    def __init__(self, db: str | None):
        self.db = db
        self._store = None

    def store(self):
        if self._store is None:
            from .store import EventStore

            self._store = EventStore(self.db) if self.db else EventStore()
        return self._store


pass_app = click.make_pass_decorator(AppContext)


class LatchGroup(click.Group):
    def invoke(self, ctx):
        from .importers.base import TranscriptError
        from .plugins import PluginError

        try:
            return super().invoke(ctx)
        except (TranscriptError, PluginError) as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=LatchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="latch")
@click.option("--db", type=click.Path(dir_okay=False), envvar="LATCH_DB",
              help="SQLite database (default: one per workspace under the Latch data folder; LATCH_HOME overrides).")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """Latch: a context window that never forgets and never overflows."""
    ctx.obj = AppContext(db)


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"latch.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"latch.commands.{name}":
                continue
            raise
        mod.register(cli)
    try:
        from .plugins import register_plugin_commands
    except ImportError:
        return
    register_plugin_commands(cli)


def main(argv: list[str] | None = None) -> None:
    _load_commands()
    cli.main(args=argv, prog_name="latch")


if __name__ == "__main__":  # pragma: no cover
    main()
