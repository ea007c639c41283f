"""Built-in plugin: the continuity engine (``PLUGIN_NAME = "continuity"``), Latch's default engine.

Registered like any third-party engine: the class carries ``PLUGIN_NAME`` and its
``factory(profile)`` classmethod is exactly ``ContinuityEngine.for_model(...)``. It is registered by name
(:class:`~latch.hookspecs.LazyClass`): :mod:`latch.engine.continuity` is imported when the engine is first used,
so a command that runs another engine (or none) never imports it.
"""

from __future__ import annotations

from ..hookspecs import LazyClass, hookimpl


@hookimpl
def latch_register_engines() -> list[LazyClass]:
    """Register the built-in ``continuity`` engine (ContinuityEngine) through the same hook as plugins."""
    return [LazyClass("continuity", "latch.engine.continuity:ContinuityEngine")]
