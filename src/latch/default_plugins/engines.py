"""Built-in plugin: the continuity engine (``PLUGIN_NAME = "continuity"``), Latch's default engine.

Registered like any third-party engine: the class carries ``PLUGIN_NAME`` and its
``factory(profile)`` classmethod is exactly ``ContinuityEngine.for_model(...)``.
"""

from __future__ import annotations

from ..engine.continuity import ContinuityEngine
from ..hookspecs import hookimpl


@hookimpl
def latch_register_engines() -> list[type]:
    """Register the built-in ``continuity`` engine (ContinuityEngine) through the same hook as plugins."""
    return [ContinuityEngine]
