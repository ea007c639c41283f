"""Group tools for an agent that is a member of an agent group (spec: "Group coordination durability"):
``create_task``, ``claim_task``, ``complete_task``, ``send_message``, each one durable event of the
group's root session through :class:`latch.agent.group.Group` (``ctx.group`` is ``(group, agent
name)``; a session outside a group gets an error outcome). A refused operation
(:class:`~latch.agent.group.GroupError`) is a one-line error outcome and the store is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..group import GroupError, new_message_id, reconnecting
from .base import ToolContext, ToolError, ToolOutcome, schema

__all__ = ["CreateTask", "ClaimTask", "CompleteTask", "SendMessage", "GROUP_TOOLS"]


def _group(ctx: ToolContext, name: str) -> Any:
    if ctx.group is None:
        raise ToolError(f"{name}: this session is not a member of an agent group")
    return ctx.group


class _GroupTool:
    NAME: ClassVar[str] = ""
    SCHEMA: ClassVar[Mapping[str, Any]] = {}
    MUTATES: ClassVar[bool] = False

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        group, agent = _group(ctx, self.NAME)
        try:
            return ToolOutcome(self.apply(group, agent, args))
        except GroupError as exc:
            return ToolOutcome(str(exc), is_error=True)

    def apply(self, group: Any, agent: str, args: Mapping[str, Any]) -> str:
        raise NotImplementedError


class CreateTask(_GroupTool):
    NAME = "create_task"
    SCHEMA = schema(
        "create_task",
        "Add a task to your agent group, optionally after other tasks.",
        {
            "task_id": {"type": "string", "minLength": 1, "description": "A unique id."},
            "title": {"type": "string", "minLength": 1, "description": "What the task is."},
            "brief": {"type": "string", "description": "The complete brief a worker starts from."},
            "depends_on": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Task ids that must complete first.",
            },
        },
        ["task_id", "title"],
    )

    def apply(self, group: Any, agent: str, args: Mapping[str, Any]) -> str:
        deps = args.get("depends_on") or []
        if not all(isinstance(d, str) for d in deps):
            raise ToolError("create_task: field 'depends_on' must be a list of task ids")
        group.create_task(args["task_id"], args["title"], brief=args.get("brief", ""), depends_on=deps)
        return f"task {args['task_id']} created"


class ClaimTask(_GroupTool):
    NAME = "claim_task"
    SCHEMA = schema(
        "claim_task",
        "Claim a ready task of your group; exactly one agent gets it.",
        {"task_id": {"type": "string", "minLength": 1, "description": "The task to claim."}},
        ["task_id"],
    )

    def apply(self, group: Any, agent: str, args: Mapping[str, Any]) -> str:
        won = group.claim_task(args["task_id"], agent)
        return f"task {args['task_id']}: {'claimed by you' if won else 'already claimed by another agent'}"


class CompleteTask(_GroupTool):
    NAME = "complete_task"
    SCHEMA = schema(
        "complete_task",
        "Mark a task you own as completed (or failed) with a short summary.",
        {
            "task_id": {"type": "string", "minLength": 1, "description": "Your task."},
            "status": {"type": "string", "enum": ["completed", "failed"], "description": "Default completed."},
            "summary": {"type": "string", "description": "What was done."},
        },
        ["task_id"],
    )

    def apply(self, group: Any, agent: str, args: Mapping[str, Any]) -> str:
        group.complete_task(
            args["task_id"], agent, status=args.get("status", "completed"), summary=args.get("summary", "")
        )
        return f"task {args['task_id']}: {args.get('status', 'completed')}"


class SendMessage(_GroupTool):
    NAME = "send_message"
    SCHEMA = schema(
        "send_message",
        "Send information to another agent of your group; it arrives at its next "
        "request (it never wakes an idle agent).",
        {
            "recipient": {"type": "string", "minLength": 1, "description": "The agent's name."},
            "text": {"type": "string", "minLength": 1, "description": "The message."},
        },
        ["recipient", "text"],
    )

    def apply(self, group: Any, agent: str, args: Mapping[str, Any]) -> str:
        mid = new_message_id()  # fixed before the first try: a repeat after a lost reply queues nothing more
        reconnecting(lambda: group.send_message(agent, args["recipient"], args["text"], message_id=mid))
        return f"message {mid[:8]} queued for {args['recipient']}"


GROUP_TOOLS = (CreateTask(), ClaimTask(), CompleteTask(), SendMessage())
"""The group tools, in this fixed order (offered to group members only)."""
