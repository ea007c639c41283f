"""Built-in plugin: the transcript importers shipped with Latch (:func:`latch.importers.builtin_importers`)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..importers import builtin_importers


@hookimpl
def latch_register_importers() -> list[type]:
    """Register the built-in transcript importers (:func:`latch.importers.builtin_importers`) through the same hook as plugins."""
    return builtin_importers()
