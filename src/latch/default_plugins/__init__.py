"""Built-in plugins, registered by :func:`latch.plugins.get_plugin_manager` through the same hooks as any other.

* :mod:`.engines`    ``latch_register_engines``: the continuity engine (the default)
* :mod:`.estimators` ``latch_register_estimators`` and ``latch_select_estimator``: the
  heuristic estimators, and the C-ABI estimator when its module is importable
* :mod:`.importers`  ``latch_register_importers``: the transcript importers shipped with Latch
* :mod:`.derivation` ``latch_register_derivation_rules``: the kernel's built-in derivation rules
* :mod:`.providers`  ``latch_register_providers``: the ``openai``, ``openai-compatible``,
  ``anthropic`` and ``openai-responses`` providers on the official SDKs
* :mod:`.web`        ``latch_register_uis`` and ``latch_register_commands``: the web UI and ``latch web``
* :mod:`.tui`        ``latch_register_uis`` and ``latch_register_commands``: the terminal UI and ``latch tui``
"""
