"""Built-in plugin: the derivation rules shipped with Latch (:data:`latch.kernel.derive.BUILTIN_RULES`)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..kernel.derive import BUILTIN_RULES


@hookimpl
def latch_register_derivation_rules() -> list[type]:
    """Register the built-in rules (file tools, apply_patch, plans, Codex exec, process polls, shells), in the
    order they are tried, through the same hook as plugins; the host tries them after every plugin's."""
    return list(BUILTIN_RULES)
