"""The terminal UI: a textual app over the durable event log, the same panels as the web page.

:class:`TerminalUI` is what the built-in plugin :mod:`latch.default_plugins.tui` registers through
``latch_register_uis``; ``latch tui [SESSION]`` (registered through ``latch_register_commands``) runs
:class:`latch.ui.tui.app.LatchTUI`. Textual is imported only when the app is built, so loading the plugin costs
nothing.
"""

from __future__ import annotations

__all__ = ["TerminalUI"]


class TerminalUI:
    """The terminal UI: sessions list; per session transcript, state/evidence, usage+cost, context, cache epochs."""

    PLUGIN_NAME = "tui"
    DESCRIPTION = (
        "terminal UI over the event log (latch tui): sessions, live transcript, state, evidence, usage, "
        "context, cache epochs"
    )
