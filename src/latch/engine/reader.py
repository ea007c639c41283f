"""Compatibility re-export: the store adapters of the port live in :mod:`latch.host.session`.

``from latch.engine.reader import StoreSessionReader, StoreKernelWriter, EmptyState`` keeps working;
nothing in ``latch.engine`` imports this module (the engine never sees the store; issue 10 item 2).
"""

from __future__ import annotations

from ..host.session import EmptyState, StoreKernelWriter, StoreSessionReader

__all__ = ["StoreSessionReader", "StoreKernelWriter", "EmptyState"]
