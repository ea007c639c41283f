"""Plan and task rules (TodoWrite, update_plan, write_todos, update_todo, TaskCreate/TaskUpdate)."""

from __future__ import annotations

import re
from typing import Any

from ...events import ToolCall, ToolResult
from ...lazyre import lazy_compile
from .common import call_arguments
from .facts import ActionChanged, ActionsReplaced
from .rules import DerivationContext, DerivationRule
from .shell_rules import process_id_text

_STATUS_WORDS = {
    "completed": "done",
    "complete": "done",
    "done": "done",
    "in_progress": "in_progress",
    "pending": "pending",
    "cancelled": "cancelled",
    "canceled": "cancelled",
}


_CHECKLIST_RE = lazy_compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX~>-])\]\s+(.+?)\s*$", re.M)
_CHECK_MARKS = {" ": "pending", "x": "done", "X": "done", "-": "in_progress", "~": "in_progress", ">": "in_progress"}


def checklist_items(text: str) -> list[dict[str, str]]:
    """The items of a markdown checklist (``- [ ] task``, ``- [x] done``, ``- [-]``/``[~]``/``[>]`` in
    progress; nested items included, other lines ignored) as ``{"content", "status"}`` dicts, in order."""
    return [{"content": m.group(2), "status": _CHECK_MARKS[m.group(1)]} for m in _CHECKLIST_RE.finditer(text)]


def _plan_facts(items: Any, source: str) -> list[Any]:
    if isinstance(items, str):  # a markdown checklist (Goose todo_write, Copilot CLI update_todo)
        items = checklist_items(items)
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        if isinstance(item, dict):
            text = item.get("content") or item.get("step") or item.get("text") or item.get("description")
            if isinstance(text, str) and text.strip():
                out.append((" ".join(text.split()), _STATUS_WORDS.get(str(item.get("status", "pending")), "pending")))
    return [ActionsReplaced(items=tuple(out), source=source)]


class PlanRule(DerivationRule):
    """Plan/todo tools: Claude Code ``TodoWrite``, Codex ``update_plan``, Gemini CLI ``write_todos``
    (``{"todos": [{"description", "status"}]}``), Goose ``todo__todo_write`` (``{"content": checklist}``)
    and Copilot CLI ``update_todo`` (``{"todos": checklist}``, a markdown checklist: :func:`checklist_items`)
    replace their action list (:class:`ActionsReplaced`); Claude Code 2.1.x tasks change one action at a
    time (:class:`ActionChanged`).

    ``TaskCreate`` (``{"subject", "description", "activeForm"}``) adds an action with the ``subject``
    text, keyed by the id its result names (``Task #1 created successfully: ...``); ``TaskUpdate``
    (``{"taskId", "status": "pending"|"in_progress"|"completed"|"deleted", "subject"?}``) updates that
    action's status (``completed`` → ``done``) or text, and ``deleted`` removes it. Failed calls and
    calls without a result change nothing.
    """

    PLUGIN_NAME = "plan"
    tools = frozenset(
        {"TodoWrite", "update_plan", "TaskCreate", "TaskUpdate", "write_todos", "todo__todo_write", "update_todo"}
    )

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:
        if result.is_error or result.missing:
            return []
        args = call_arguments(call)
        if call.name == "TaskCreate":
            return _task_created(call, args, result.content)
        if call.name == "TaskUpdate":
            return _task_updated(args)
        return _plan_facts(args.get("todos", args.get("plan", args.get("content"))), call.name)


TASK_SOURCE = "TaskCreate"
"""The ``source`` of the actions Claude Code's ``TaskCreate``/``TaskUpdate`` maintain."""
_TASK_CREATED_RE = lazy_compile(r"\bTask #?([A-Za-z0-9][\w-]*) created\b")


def _task_key(value: Any) -> str:
    return process_id_text(str(value)).lstrip("#") if isinstance(value, (str, int)) else ""


def _task_created(call: ToolCall, args: dict[str, Any], content: str) -> list[Any]:
    text = args.get("subject") or args.get("description")
    if not isinstance(text, str) or not text.strip():
        return []
    m = _TASK_CREATED_RE.search(content)
    key = m.group(1) if m else f"call:{call.id}"  # no id in the result: the action cannot be updated
    status = _STATUS_WORDS.get(str(args.get("status", "pending")), "pending")
    return [ActionChanged(TASK_SOURCE, key, " ".join(text.split()), status, created=True)]


def _task_updated(args: dict[str, Any]) -> list[Any]:
    key = _task_key(args.get("taskId", args.get("task_id", args.get("id"))))
    if not key:
        return []
    raw = args.get("status")
    status = "deleted" if raw == "deleted" else _STATUS_WORDS.get(str(raw)) if raw is not None else None
    subject = args.get("subject")
    text = " ".join(subject.split()) if isinstance(subject, str) and subject.strip() else None
    if status is None and text is None:
        return []
    return [ActionChanged(TASK_SOURCE, key, text, status)]
