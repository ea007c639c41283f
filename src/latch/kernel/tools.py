"""Kernel tools: how an agent writes canonical state (spec: "Sessions & continuity", L1).

:data:`KERNEL_TOOLS` holds one JSON-ready schema per tool in the neutral
function-tool shape ``{"name", "description", "input_schema"}`` (Anthropic's
Messages ``tools`` entry as is; :func:`openai_tools` wraps them for OpenAI's
``{"type": "function", "function": {..., "parameters"}}``). The list and every
schema are constant, so system + tools stay byte-identical across requests.

:func:`apply_kernel_tool` validates a call against its schema and the current
state (an unknown id is an error), then appends one durable
:class:`~latch.kernel.events.StateUpdate`. Errors raise :class:`KernelToolError`
naming the tool and the field; the store is then unchanged.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..events import JSONNestingError, json_loads
from .events import StateUpdate
from .ledger import KernelCache
from .state import CanonicalState, canonical_state

if TYPE_CHECKING:
    from ..store import EventLog, StoredEvent

__all__ = ["KERNEL_TOOLS", "KernelToolError", "apply_kernel_tool", "openai_tools", "tool_schema"]


def _str(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description, **extra}


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


_STATUS = ["pending", "in_progress", "done", "cancelled"]

KERNEL_TOOLS: list[dict[str, Any]] = [
    _tool(
        "set_goal",
        "Set the task's goal (replaces the previous goal). The goal is rendered in every request.",
        {"goal": _str("The goal, one or two sentences.")},
        ["goal"],
    ),
    _tool(
        "add_constraint",
        "Record a rule the work must respect. Constraints are never dropped from context.",
        {
            "constraint": _str("The constraint, stated as a rule."),
            "replaces": _str("Id of a constraint this one replaces (e.g. C2)."),
        },
        ["constraint"],
    ),
    _tool(
        "record_decision",
        "Record a decision so it is not reopened later.",
        {
            "decision": _str("What was decided."),
            "rationale": _str("Why."),
            "supersedes": _str("Id of an earlier decision this one replaces (e.g. D1)."),
        },
        ["decision"],
    ),
    _tool(
        "propose_hypothesis",
        "Record a hypothesis under investigation.",
        {"hypothesis": _str("The hypothesis.")},
        ["hypothesis"],
    ),
    _tool(
        "reject_hypothesis",
        "Reject a hypothesis; it is never shown as active again.",
        {"hypothesis": _str("Its id (e.g. H3) or exact text."), "reason": _str("Why it is wrong.")},
        ["hypothesis", "reason"],
    ),
    _tool(
        "add_note",
        "Keep a note (the lowest-priority memory; dropped first under pressure).",
        {"note": _str("The note.")},
        ["note"],
    ),
    _tool(
        "ask_question",
        "Record an open question, or answer one by id.",
        {
            "question": _str("The question."),
            "id": _str("Id of an existing question (e.g. Q1) to answer."),
            "answer": _str("The answer."),
        },
        [],
    ),
    _tool(
        "plan_action",
        "Add a planned action, or update one by id.",
        {
            "action": _str("The action."),
            "id": _str("Id of an existing action (e.g. A2) to update."),
            "status": {"type": "string", "enum": _STATUS, "description": "Its status (default pending)."},
        },
        [],
    ),
    _tool(
        "set_criterion",
        "Add a success criterion, or mark one met by id.",
        {
            "criterion": _str("The criterion."),
            "id": _str("Id of an existing criterion (e.g. K1)."),
            "met": {"type": "boolean", "description": "Whether it is met."},
        },
        [],
    ),
    _tool(
        "require_validation",
        "Require a validation before completion; only a pass at the current workspace generation certifies it.",
        {
            "requirement": _str("The exact requirement (e.g. 'unit tests pass')."),
            "command": _str("The proving command (e.g. 'pytest -q'); defaults to the requirement text."),
        },
        ["requirement"],
    ),
    _tool(
        "record_disproof",
        "Record durably that a suspected problem is not real, and why. Every later session "
        "of this workspace and every child sees it until a cited file changes.",
        {
            "claim": _str("The suspected problem (e.g. 'the binary cannot be reproduced from this tree')."),
            "reason": _str("Why it is not a real problem."),
            "evidence": {
                "type": "array",
                "items": _str("A reference: command, file:line, seq."),
                "description": "Evidence references.",
            },
            "files": {
                "type": "array",
                "items": _str("A workspace file path."),
                "description": "Files the reasoning depends on; a change to one makes it stale.",
            },
        },
        ["claim", "reason"],
    ),
]

_BY_NAME = {t["name"]: t for t in KERNEL_TOOLS}


class KernelToolError(ValueError):
    """A kernel tool call is invalid; the message names the tool and the field."""


def tool_schema(name: str) -> dict[str, Any]:
    """The schema of kernel tool ``name``; :class:`KernelToolError` when unknown."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KernelToolError(f"unknown kernel tool {name!r} (known: {', '.join(_BY_NAME)})") from None


def openai_tools() -> list[dict[str, Any]]:
    """:data:`KERNEL_TOOLS` in OpenAI's function-tool shape."""
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
        }
        for t in KERNEL_TOOLS
    ]


_TYPES: dict[str, type[Any]] = {"string": str, "boolean": bool, "array": list, "object": dict}


def _check(tool: str, field: str, value: Any, schema: dict[str, Any]) -> None:
    expected = schema["type"]
    if not isinstance(value, _TYPES[expected]):
        raise KernelToolError(f"{tool}: field {field!r} must be a {expected}, got {type(value).__name__}")
    if expected == "string":
        if len(value.strip()) < schema.get("minLength", 0):
            raise KernelToolError(f"{tool}: field {field!r} must not be empty")
        if "enum" in schema and value not in schema["enum"]:
            raise KernelToolError(f"{tool}: field {field!r} must be one of {', '.join(schema['enum'])}, got {value!r}")
    elif expected == "array":
        for i, item in enumerate(value):
            _check(tool, f"{field}[{i}]", item, schema["items"])


def validate_arguments(name: str, arguments: Any) -> dict[str, Any]:
    """``arguments`` (dict or JSON text) checked against the schema of ``name``; returns the dict."""
    schema = tool_schema(name)["input_schema"]
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json_loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise KernelToolError(f"{name}: arguments are not valid JSON ({exc.msg} at column {exc.colno})") from None
        except JSONNestingError:
            raise KernelToolError(f"{name}: arguments are nested too deeply") from None
    if not isinstance(arguments, dict):
        raise KernelToolError(f"{name}: arguments must be a JSON object, got {type(arguments).__name__}")
    for field in schema["required"]:
        if field not in arguments:
            raise KernelToolError(f"{name}: field {field!r} is required")
    for field, value in arguments.items():
        if field not in schema["properties"]:
            raise KernelToolError(f"{name}: unknown field {field!r} (allowed: {', '.join(schema['properties'])})")
        _check(name, field, value, schema["properties"][field])
    return dict(arguments)


def _check_ids(name: str, args: dict[str, Any], state: CanonicalState) -> None:
    refs = {
        "add_constraint": ("replaces", state.constraints),
        "record_decision": ("supersedes", state.decisions),
        "ask_question": ("id", state.questions),
        "plan_action": ("id", state.actions),
        "set_criterion": ("id", state.criteria),
    }
    text_field = {"ask_question": "question", "plan_action": "action", "set_criterion": "criterion"}.get(name)
    if text_field and text_field not in args and "id" not in args:
        raise KernelToolError(f"{name}: field {text_field!r} is required (or 'id' to update an existing one)")
    if name in refs:
        field, items = refs[name]
        ref = args.get(field)
        if ref is not None and ref not in {x["id"] for x in items}:
            raise KernelToolError(f"{name}: field {field!r}: no such id {ref!r}")
    if name == "reject_hypothesis":
        ref = args["hypothesis"]
        match = [h for h in state.hypotheses if ref in (h["id"], h["text"])]
        if not match:
            raise KernelToolError(f"{name}: field 'hypothesis': no hypothesis {ref!r}")
        if match[0]["status"] == "rejected":
            raise KernelToolError(f"{name}: field 'hypothesis': {match[0]['id']} is already rejected")


def apply_kernel_tool(
    store: EventLog, session_id: str, name: str, arguments: Any, *, cache: KernelCache | None = None
) -> StoredEvent:
    """Validate a kernel tool call and append its :class:`StateUpdate` to ``session_id``.

    ``arguments`` is a dict or its JSON text; ids are checked against the canonical state in
    ``cache`` (a :class:`~latch.kernel.ledger.KernelCache`, default the built-in one). Returns the stored event (with its
    ``seq``). Raises :class:`KernelToolError` (store unchanged) for an unknown
    tool, invalid JSON, a missing/unknown/mistyped field or an unknown id.
    """
    args = validate_arguments(name, arguments)
    sid = store.session(session_id).id
    _check_ids(name, args, canonical_state(store, sid, cache=cache))
    (seq,) = store.append(sid, [StateUpdate(tool=name, arguments=args)])
    return store.get(seq)
