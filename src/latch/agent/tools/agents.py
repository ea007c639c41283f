"""``spawn_agent``: delegate a sub-task to a child agent (spec: "Sessions & continuity", child agents).

The child is its own session (own L0-L3) in the same workspace. It starts from the ``brief`` and the
workspace's repository instructions only, runs to its end inside this call (synchronously, on the
same provider), and the call's result is the child's :class:`~latch.events.AgentReport`, rendered and
bounded (:data:`latch.agent.children.REPORT_LIMIT_BYTES`): the only thing that comes back. The work
itself is done by the loop's ``ctx.spawner`` (:meth:`latch.agent.loop.AgentLoop.spawn_agent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .base import ToolContext, ToolError, ToolOutcome, schema

__all__ = ["SpawnAgent"]


class SpawnAgent:
    """``spawn_agent(brief, tools=None, model=None)``: run a child agent on ``brief``; returns its report."""

    NAME: ClassVar[str] = "spawn_agent"
    MUTATES: ClassVar[bool] = False  # the child's own calls are each decided by the permission policy
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "spawn_agent",
        "Delegate a self-contained sub-task to a child agent working in the same workspace. The child sees "
        "only your brief and the repository instructions (none of this conversation), so make the brief "
        "complete: the goal, the files involved, how to validate. Returns the child's report: status, "
        "summary, files touched and validations it ran (informational; re-check what matters).",
        {
            "brief": {"type": "string", "minLength": 1, "description": "The complete task for the child."},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Tool names the child may use (default: yours, without spawn_agent).",
            },
            "model": {"type": "string", "minLength": 1, "description": "Model id for the child (default: yours)."},
            "background": {
                "type": "boolean",
                "description": "Return at once; the report arrives as a notification "
                "before a later request (default false).",
            },
        },
        ["brief"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        if ctx.spawner is None:
            raise ToolError("spawn_agent: child agents are not available in this session")
        return ctx.spawner(ctx.call_id, args)
