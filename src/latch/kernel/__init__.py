"""L1 canonical state, validation evidence, workspace generations, file state, tombstones, disproofs.

Public entry points (spec: "Sessions & continuity", "Port boundary", "Episodes",
"File state and compaction"):

* :func:`canonical_state` ``(store, session_id, until_seq=None) -> CanonicalState``
  (``.revision``, ``.generation``, ``.render(budget_tokens, estimate)``,
  ``.to_json()``, ``.is_empty``, ``.recent_files(n)``), O(1) per request and
  shared per revision; :class:`StateOverflow` when goal and constraints alone
  exceed the budget;
* :mod:`latch.kernel.tools`: ``KERNEL_TOOLS`` schemas and ``apply_kernel_tool``;
* :mod:`latch.kernel.derive`: derivation rules (plugins add theirs through the
  ``latch_register_derivation_rules`` hook; :class:`~latch.kernel.ledger.KernelCache` holds them);
* :mod:`latch.kernel.files`: ``read_file``/``read_artifact`` (bounded pages) and
  ``guarded_write``;
* :mod:`latch.kernel.tombstones`: ``forget_session``, ``tombstoned_sessions``;
* :mod:`latch.kernel.events`: the kernel event kinds.
"""

from __future__ import annotations

from . import events  # noqa: F401  (the kernel event kinds, declared in latch.events)
from .state import CanonicalState, StateOverflow, canonical_state
from .tools import KERNEL_TOOLS, KernelToolError, apply_kernel_tool

__all__ = ["CanonicalState", "StateOverflow", "canonical_state", "KERNEL_TOOLS", "KernelToolError", "apply_kernel_tool"]
