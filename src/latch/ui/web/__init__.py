"""The web UI: a local Starlette server over the durable event log, with one static page.

:class:`WebUI` is what the built-in plugin :mod:`latch.default_plugins.web` registers through
``latch_register_uis``; ``latch web`` (registered through ``latch_register_commands``) runs
:func:`latch.ui.web.app.serve`. Nothing here imports Starlette or uvicorn until a server is built, so loading the
plugin costs nothing.
"""

from __future__ import annotations

import ipaddress

__all__ = ["WebUI", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only listens on this machine (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class WebUI:
    """The browser UI: sessions list, live session page (transcript, state, activity) over SSE."""

    PLUGIN_NAME = "web"
    DESCRIPTION = "browser UI over the event log (latch web): sessions, live transcript, state, activity"
