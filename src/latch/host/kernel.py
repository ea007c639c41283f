"""The host's kernel cache: canonical state derived with the rules the plugins registered.

The kernel never asks the plugin manager (layering); the host builds one
:class:`~latch.kernel.ledger.KernelCache` per plugin manager, holding that manager's
derivation rules (``latch_register_derivation_rules``, in the documented order), and passes it to
:func:`~latch.kernel.canonical_state`. The cache lives as long as its manager
(:func:`latch.plugins.reset_plugin_manager` starts a new one) and keys ledgers by store object.
"""

from __future__ import annotations

import threading
import weakref

from ..kernel.ledger import KernelCache
from ..plugins import LatchPluginManager, get_plugin_manager, registered_derivation_rules

__all__ = ["kernel_cache"]

_BY_MANAGER: weakref.WeakKeyDictionary[LatchPluginManager, KernelCache] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def kernel_cache(pm: LatchPluginManager | None = None) -> KernelCache:
    """The :class:`KernelCache` of ``pm`` (default: the process-wide manager), built on first use.

    Raises :class:`latch.plugins.PluginError` when a plugin fails to load or two rules share a name.
    """
    pm = pm or get_plugin_manager()
    with _LOCK:
        cache = _BY_MANAGER.get(pm)
        if cache is None:
            cache = _BY_MANAGER[pm] = KernelCache([cls() for cls in registered_derivation_rules(pm)])
        return cache
