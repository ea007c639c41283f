"""The ``compact`` tool: the model ends its context epoch itself, with a handoff note (spec: "Cache epochs and
working memory": ``/compact`` is the sole compact action; this tool is the model's way to ask for it).

``compact(note)`` records ``note`` in the canonical state (one durable ``add_note`` StateUpdate, prefixed
``Handoff:``) and returns; the agent loop then applies the manual compact action at that safe boundary
(every call of the response has its result), so the next request starts a fresh cache epoch with no earlier
conversation. Nothing is deleted: the note, the working set and the rest of the canonical state are in the
new epoch's snapshot; ``search_history`` and recall still reach every earlier event. This is the pattern of
Codex's ``new_context`` and the OpenHands SDK's agent-reset condenser.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...kernel.tools import KernelToolError, apply_kernel_tool
from .base import ToolContext, ToolOutcome, schema

__all__ = ["Compact", "HANDOFF_PREFIX"]

HANDOFF_PREFIX = "Handoff: "
"""How a handoff note starts in the canonical state's notes."""


class Compact:
    """``compact(note)``: see the module docstring."""

    NAME: ClassVar[str] = "compact"
    MUTATES: ClassVar[bool] = False
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "compact",
        "End this context epoch: the next request starts fresh, without the conversation so far (nothing is lost: "
        "the canonical state, its working set and search_history keep it). Write the handoff note your next "
        "context needs: what is done, what is next, what to watch out for.",
        {"note": {"type": "string", "minLength": 1, "description": "The handoff note, kept in the canonical state."}},
        ["note"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        try:
            stored = apply_kernel_tool(ctx.store, ctx.session_id, "add_note", {"note": HANDOFF_PREFIX + args["note"]})
        except KernelToolError as exc:
            return ToolOutcome(str(exc), is_error=True)
        return ToolOutcome(
            f"compact: handoff note recorded (#{stored.seq}); the next request starts a fresh context "
            "epoch with the canonical state, the working set and this note"
        )
