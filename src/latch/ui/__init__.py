"""The user interfaces' shared rendering (:mod:`latch.ui.render`), the web UI (:mod:`latch.ui.web`) and the
terminal UI (:mod:`latch.ui.tui`): they read the store through the host, never the CLI."""
