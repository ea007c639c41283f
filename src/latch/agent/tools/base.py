"""The agent's tool protocol: :class:`ToolContext`, :class:`ToolOutcome`, :class:`Tool`, :func:`run_tool`,
(:func:`latch.agent.tools.builtin_tools` lists the built-in tools; spec: "Agent Skills and MCP"; ``notes/agent_contract.md``).

A tool is an object with a constant ``NAME``, a constant ``SCHEMA`` (the neutral function-tool shape
``{"name", "description", "input_schema"}`` of :data:`latch.kernel.tools.KERNEL_TOOLS`) and ``MUTATES``
(it may change the workspace). :func:`run_tool` finds the tool of a :class:`~latch.events.ToolCall`,
checks the arguments against its schema (an error outcome names the field), runs it and bounds the
content it returns (:data:`OUTCOME_LIMIT_BYTES`). A tool appends its own durable kernel events through
``ctx.store`` when they happen; the loop appends the :class:`~latch.events.ToolResult` after ``run``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ...events import RawArguments, ToolCall
from ...records import dataclass
from ...store import EventLog

if TYPE_CHECKING:  # the manager imports nothing from here at run time, but typing it would be a cycle
    from .processes import ProcessManager

__all__ = [
    "ToolContext",
    "ToolOutcome",
    "Tool",
    "ToolError",
    "run_tool",
    "tool_schemas",
    "check_arguments",
    "workspace_path",
    "bound_text",
    "OUTCOME_LIMIT_BYTES",
    "schema",
]

OUTCOME_LIMIT_BYTES = 32 * 1024
"""The most UTF-8 bytes of any outcome's content (a read_file page is 24 KiB plus its note)."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use: ``workspace`` (absolute, resolved; paths outside it are refused), the
    ``store`` and ``session_id`` it records facts in, the session's :class:`ProcessManager` and
    ``estimate`` (tokens of a text with the session's estimator). ``call_id`` is the id of the call
    being run (:func:`run_tool` sets it; ``""`` outside a call). ``spawner(call_id, args) -> ToolOutcome``
    runs a child agent for ``spawn_agent`` (the agent loop sets it; ``None``: no children here); ``group`` is
    ``(latch.agent.group.Group, agent name)`` for a member of an agent group (the group tools use it).
    ``room()`` is how many tokens one tool result may take in the next view (the agent loop sets it from its
    latest view; ``None``: no bound beyond the tools' own), so ``read_file`` pages fit a small window.
    ``keep_whole``: the caller bounds each result itself (the agent loop redacts secrets, then stores a long
    output whole as an artifact: :func:`spill`), so :func:`run_tool` leaves the content whole; else
    :func:`run_tool` cuts it to :data:`OUTCOME_LIMIT_BYTES` (:func:`bound_text`)."""

    workspace: Path
    store: EventLog
    session_id: str
    processes: ProcessManager
    estimate: Callable[[str], int]
    call_id: str = ""
    spawner: Callable[[str, Mapping[str, Any]], ToolOutcome] | None = None
    group: tuple[Any, str] | None = None
    room: Callable[[], int | None] | None = None
    keep_whole: bool = False


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns: ``content`` (what the ToolResult carries; bounded), ``is_error`` and the
    ``exit_code`` of a command (``None`` when there is none or it is unknown)."""

    content: str
    is_error: bool = False
    exit_code: int | None = None


class Tool(Protocol):
    """A built-in tool (see the module docstring)."""

    NAME: ClassVar[str]
    SCHEMA: ClassVar[Mapping[str, Any]]
    MUTATES: ClassVar[bool]

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome: ...


class ToolError(Exception):
    """A tool refuses a call; the message (one line) becomes an error outcome."""


def schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A constant schema in the neutral shape, keys in a fixed order (as :data:`KERNEL_TOOLS`)."""
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


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def check_arguments(tool_schema: Mapping[str, Any], args: Any) -> dict[str, Any]:
    """``args`` checked against ``tool_schema["input_schema"]`` (object, required, no unknown field, types,
    ``minimum``/``maximum``, ``enum``, string ``minLength``); returns a copy. ``ToolError`` naming the field."""
    name = tool_schema["name"]
    spec = tool_schema["input_schema"]
    if not isinstance(args, dict):
        kind = "text that is not JSON" if isinstance(args, RawArguments) else type(args).__name__
        raise ToolError(f"{name}: arguments must be a JSON object, got {kind}")
    for field in spec.get("required", ()):
        if field not in args:
            raise ToolError(f"{name}: field {field!r} is required")
    props = spec.get("properties", {})
    for field, value in args.items():
        if field not in props:
            raise ToolError(f"{name}: unknown field {field!r} (allowed: {', '.join(props)})")
        p = props[field]
        expected = p.get("type")
        ok = isinstance(value, _TYPES.get(expected, (object,)))
        if expected in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            raise ToolError(
                f"{name}: field {field!r} must be {'an' if expected == 'integer' else 'a'} {expected}, "
                f"got {type(value).__name__}"
            )
        if "minimum" in p and value < p["minimum"]:
            raise ToolError(f"{name}: field {field!r} must be at least {p['minimum']}, got {value}")
        if "maximum" in p and value > p["maximum"]:
            raise ToolError(f"{name}: field {field!r} must be at most {p['maximum']}, got {value}")
        if "enum" in p and value not in p["enum"]:
            raise ToolError(f"{name}: field {field!r} must be one of {', '.join(map(str, p['enum']))}")
        if expected == "string" and len(value) < p.get("minLength", 0):
            raise ToolError(f"{name}: field {field!r} must not be empty")
    return dict(args)


def workspace_path(ctx: ToolContext, raw: str) -> tuple[Path, str]:
    """``(absolute, relative)`` of path argument ``raw`` inside ``ctx.workspace`` (symlinks resolved).

    ``relative`` is the workspace-relative POSIX path the kernel records (``"."`` for the root).
    ``ToolError`` for an empty path, a NUL byte, or a path that leaves the workspace (``..``, an absolute
    path elsewhere, a symlink pointing out).
    """
    if not raw.strip():
        raise ToolError("path is empty")
    if "\x00" in raw:
        raise ToolError("path contains a NUL byte")
    root = Path(os.path.realpath(ctx.workspace))
    p = Path(raw)
    try:
        absolute = Path(os.path.realpath(p if p.is_absolute() else root / p))
    except OSError:  # a link was swapped while it was being resolved
        raise ToolError(f"{raw}: changed while its symlinks were being resolved (refused)") from None
    try:
        rel = absolute.relative_to(root).as_posix()
    except ValueError:
        raise ToolError(f"{raw}: outside the workspace {root} (refused)") from None
    return absolute, rel


def bound_text(text: str, limit_bytes: int = OUTCOME_LIMIT_BYTES) -> str:
    """``text`` cut to at most ``limit_bytes`` UTF-8 bytes (head kept, a marker saying how much was cut)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit_bytes:
        return text
    note = f"\n[… output cut: {len(data):,} bytes in all, the first {{}} shown]"
    keep = limit_bytes - len(note.format(limit_bytes).encode())
    head = data[:keep].decode("utf-8", "ignore")
    return head + note.format(len(head.encode("utf-8", "surrogatepass")))


def spill(text: str, store: EventLog, fits: Callable[[str], bool]) -> str:
    """``text`` stored whole as an artifact of ``store`` (``text/plain``, content-addressed: nothing is lost) and
    cut to the longest head, with a tail half as long, for which ``fits(result)`` holds, joined by a note naming
    the artifact's SHA-256 and the byte offset ``read_artifact`` continues from. Units: characters for the cut,
    bytes for the offsets."""
    data = text.encode("utf-8", "surrogatepass")
    sha = store.put_artifact(data, "text/plain; charset=utf-8").sha256

    def cut(head: int) -> str:
        tail = head // 2
        start = len(text[:head].encode("utf-8", "surrogatepass"))
        end = len(data) - len(text[len(text) - tail :].encode("utf-8", "surrogatepass")) if tail else len(data)
        note = (
            f"\n[… {len(text) - head - tail:,} of {len(text):,} characters left out to fit the context; the "
            f'whole output is stored: read_artifact(sha256="{sha}", offset={start}) reads on from here '
            f"(bytes {start:,}..{end:,} of {len(data):,} were left out)]\n"
        )
        return text[:head] + note + (text[len(text) - tail :] if tail else "")

    lo, hi = 0, len(text) * 2 // 3
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(cut(mid)):
            lo = mid
        else:
            hi = mid
    return cut(lo)


def run_tool(tools: Sequence[Tool], call: ToolCall, ctx: ToolContext) -> ToolOutcome:
    """Run ``call`` with the tool of its name among ``tools``.

    Never raises for a bad call: an unknown tool, arguments that are not a JSON object, a missing,
    unknown or mistyped field, or a tool's refusal (:class:`ToolError`) is an error outcome whose one
    line names the tool and the field. The content is bounded (:data:`OUTCOME_LIMIT_BYTES`) unless
    ``ctx.keep_whole``. A tool with a
    true ``RAW_ARGUMENTS`` attribute (an MCP tool, whose server validates against its own JSON Schema) gets any
    JSON object unchecked.
    """
    tool = next((t for t in tools if t.NAME == call.name), None)
    if tool is None:
        return ToolOutcome(f"unknown tool {call.name!r} (known: {', '.join(t.NAME for t in tools)})", is_error=True)
    try:
        raw = call.args() if call.arguments.strip() else {}
        if getattr(tool, "RAW_ARGUMENTS", False):  # the tool's own server checks them (MCP)
            if not isinstance(raw, dict):
                kind = "text that is not JSON" if isinstance(raw, RawArguments) else type(raw).__name__
                raise ToolError(f"{tool.NAME}: arguments must be a JSON object, got {kind}")
            args = dict(raw)
        else:
            args = check_arguments(tool.SCHEMA, raw)
        outcome = tool.run(args, replace(ctx, call_id=call.id))
    except ToolError as exc:
        return ToolOutcome(bound_text(str(exc)), is_error=True)
    return outcome if ctx.keep_whole else replace(outcome, content=bound_text(outcome.content))


def tool_schemas(tools: Sequence[Tool]) -> list[Mapping[str, Any]]:
    """``[t.SCHEMA for t in tools]``: what a request's ``tools`` field carries."""
    return [t.SCHEMA for t in tools]
