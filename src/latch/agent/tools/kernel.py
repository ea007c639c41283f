"""Kernel tools as agent tools: every entry of :data:`latch.kernel.tools.KERNEL_TOOLS` (``set_goal``,
``add_constraint``, ``record_decision``, ``propose_hypothesis``, ``reject_hypothesis``,
``require_validation``, ...), each dispatched to :func:`latch.kernel.tools.apply_kernel_tool`, which
appends one durable StateUpdate. A :class:`~latch.kernel.tools.KernelToolError` (naming the field) is an
error outcome; the store is then unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...kernel.tools import KERNEL_TOOLS, KernelToolError, apply_kernel_tool
from .base import ToolContext, ToolOutcome

__all__ = ["KernelTool", "KERNEL_AGENT_TOOLS"]


class KernelTool:
    """Base of the generated kernel tool classes (one per :data:`KERNEL_TOOLS` entry)."""

    NAME: ClassVar[str] = ""
    SCHEMA: ClassVar[Mapping[str, Any]] = {}
    MUTATES: ClassVar[bool] = False

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        try:
            stored = apply_kernel_tool(ctx.store, ctx.session_id, self.NAME, dict(args))
        except KernelToolError as exc:
            return ToolOutcome(str(exc), is_error=True)
        return ToolOutcome(f"{self.NAME}: recorded (#{stored.seq})")


def _tool_class(entry: Mapping[str, Any]) -> type[KernelTool]:
    name = str(entry["name"])
    cls_name = "".join(part.title() for part in name.split("_")) + "Tool"
    return type(
        cls_name,
        (KernelTool,),
        {
            "NAME": name,
            "SCHEMA": entry,
            "MUTATES": False,
            "__doc__": f"The ``{name}`` kernel tool.",
            "__module__": __name__,
        },
    )


KERNEL_AGENT_TOOLS: tuple[type[KernelTool], ...] = tuple(_tool_class(t) for t in KERNEL_TOOLS)
"""One class per kernel tool, in :data:`KERNEL_TOOLS` order."""
