"""Compatibility re-export of the ContextEngine port, which lives in :mod:`latch.port`.

``from latch.engine.port import ContextBudget, ...`` keeps working for third-party engines; new code
imports :mod:`latch.port` (a leaf module that imports only :mod:`latch.events`).
"""

from __future__ import annotations

from ..port import *  # noqa: F401,F403
from ..port import __all__  # noqa: F401
