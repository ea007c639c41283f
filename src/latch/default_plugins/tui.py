"""Built-in plugin: the terminal UI (:class:`latch.ui.tui.TerminalUI`) and its command ``latch tui``.

``latch tui [SESSION]`` opens the store of ``--db`` (or the workspace's) in a textual app: the sessions list,
or SESSION (an id or unique prefix) directly; see :mod:`latch.ui.tui.app` for the panels. Textual is imported only
when the app starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..store import is_postgres_url
from ..ui.tui import TerminalUI

if TYPE_CHECKING:  # pragma: no cover
    import click


@hookimpl
def latch_register_uis() -> list[type]:
    """Register the built-in ``tui`` UI."""
    return [TerminalUI]


def _tui_command() -> click.Command:
    """``latch tui``, built when the plugin host adds the commands: click loads with the CLI, not in every
    process that builds the plugin host (the bench's task server)."""
    import click

    @click.command("tui")
    @click.argument("session", required=False)
    @click.option(
        "--poll",
        "poll_interval",
        type=click.FloatRange(min=0.05),
        default=0.5,
        show_default=True,
        help="Seconds between store polls for new events.",
    )
    @click.pass_context
    def tui_cmd(ctx: click.Context, session: str | None, poll_interval: float) -> None:
        """Browse sessions in the terminal: transcript, state and evidence, usage and cost, context, cache epochs."""
        from ..ui.tui.app import LatchTUI  # textual is imported only when the app starts

        app = ctx.obj  # latch.cli.AppContext
        store = app.store(create=False)
        if session is not None:
            try:
                store.session(session)
            except KeyError as exc:
                raise click.ClickException(str(exc.args[0])) from None
        path = ":memory:" if app.db == ":memory:" else app.db if is_postgres_url(app.db) else str(app.db_path())
        try:
            ui = LatchTUI(path, session=session, poll_interval=poll_interval)
        except KeyError as exc:  # a forgotten (tombstoned) session
            raise click.ClickException(str(exc.args[0])) from None
        ui.run()

    return tui_cmd


@hookimpl
def latch_register_commands(cli: click.Group) -> None:
    """Add ``latch tui``."""
    cli.add_command(_tui_command())
