"""Built-in plugin: the web UI (:class:`latch.ui.web.WebUI`) and its command ``latch web``.

``latch web [--host 127.0.0.1] [--port 8765] [--token T]`` serves the store of ``--db`` (or the workspace's)
to a browser; see :mod:`latch.ui.web.app` for the routes. A host that is not loopback needs ``--token``, and
with a token every request must carry it (401 otherwise). Starlette, sse-starlette and uvicorn are imported
only when the server starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..store import is_postgres_url
from ..ui.web import WebUI

if TYPE_CHECKING:  # pragma: no cover
    import click


@hookimpl
def latch_register_uis() -> list[type]:
    """Register the built-in ``web`` UI."""
    return [WebUI]


def _web_command() -> click.Command:
    """``latch web``, built when the plugin host adds the commands: click loads with the CLI, not in every
    process that builds the plugin host (the bench's task server)."""
    import click

    @click.command("web")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
    @click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
    @click.option(
        "--token",
        default=None,
        envvar="LATCH_WEB_TOKEN",
        help="Secret every request must carry (Bearer header or ?token=); required off loopback.",
    )
    @click.pass_context
    def web_cmd(ctx: click.Context, host: str, port: int, token: str | None) -> None:
        """Serve the browser UI: sessions list and live session pages (transcript, state, activity)."""
        # asyncio and the routes load when `latch web` runs
        from ..ui.web.app import ListenError, check_bind, listen, serve

        # a missing 'web' extra is named before anything is said
        for module in ("starlette", "uvicorn", "sse_starlette"):
            importlib.import_module(module)

        try:
            check_bind(host, token)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        app = ctx.obj  # latch.cli.AppContext
        path = ":memory:" if app.db == ":memory:" else app.db if is_postgres_url(app.db) else str(app.db_path())
        try:  # bound before anything is said: a taken port or a host that does not resolve is one line, exit 1
            sock = listen(host, port)
        except ListenError as exc:
            click.echo(f"latch web: {exc}", err=True)
            ctx.exit(1)
        port = sock.getsockname()[1]  # --port 0: the one the system chose
        shown = f"http://{host}:{port}/" + ("?token=..." if token else "")
        click.echo(f"latch web: serving {path} at {shown} (Ctrl-C stops)", err=True)
        serve(path, host=host, port=port, token=token, sock=sock)

    return web_cmd


@hookimpl
def latch_register_commands(cli: click.Group) -> None:
    """Add ``latch web``."""
    cli.add_command(_web_command())
