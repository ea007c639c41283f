"""The agent's built-in tools, one module each (``notes/agent_contract.md``; spec: "Agent Skills and MCP").

* :mod:`.base`: :class:`ToolContext`, :class:`ToolOutcome`, :class:`Tool`, :func:`run_tool`;
* :mod:`.files`: ``read_file``, ``write_file``, ``edit_file``, ``read_artifact``;
* :mod:`.shell`: ``shell`` and ``process_output``; :mod:`.processes`: :class:`ProcessManager`;
* :mod:`.search_history`: ``search_history``;
* :mod:`.kernel`: the kernel tools of :data:`latch.kernel.tools.KERNEL_TOOLS`;
* :mod:`.agents`: ``spawn_agent`` (a child agent; offered by :func:`agent_tools`, not a built-in).

:func:`builtin_tools` returns them in one fixed order; every schema is a constant, so the request's
``tools`` (``[t.SCHEMA for t in builtin_tools()]``) serialize to the same bytes in every session.
"""

from __future__ import annotations

from .agents import SpawnAgent
from .base import (
    OUTCOME_LIMIT_BYTES,
    Tool,
    ToolContext,
    ToolError,
    ToolOutcome,
    bound_text,
    check_arguments,
    run_tool,
    tool_schemas,
    workspace_path,
)
from .compact import Compact
from .files import EditFile, ReadArtifact, ReadFile, WriteFile
from .kernel import KERNEL_AGENT_TOOLS, KernelTool
from .processes import ProcessManager
from .search_history import SearchHistory
from .shell import ProcessOutput, Shell

__all__ = [
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolError",
    "run_tool",
    "builtin_tools",
    "tool_schemas",
    "check_arguments",
    "workspace_path",
    "bound_text",
    "OUTCOME_LIMIT_BYTES",
    "ProcessManager",
    "ReadFile",
    "ReadArtifact",
    "WriteFile",
    "EditFile",
    "Shell",
    "ProcessOutput",
    "SearchHistory",
    "Compact",
    "KernelTool",
    "BUILTIN_TOOL_CLASSES",
    "SpawnAgent",
    "agent_tools",
]

BUILTIN_TOOL_CLASSES: tuple[type, ...] = (
    ReadFile,
    WriteFile,
    EditFile,
    Shell,
    ProcessOutput,
    SearchHistory,
    Compact,
    ReadArtifact,
    *KERNEL_AGENT_TOOLS,
)
"""The built-in tool classes in their fixed order."""

_TOOLS: tuple[Tool, ...] = tuple(cls() for cls in BUILTIN_TOOL_CLASSES)


def builtin_tools() -> tuple[Tool, ...]:
    """The built-in tools in their fixed order: read_file, write_file, edit_file, shell, process_output,
    search_history, compact, read_artifact, then every kernel tool in :data:`~latch.kernel.tools.KERNEL_TOOLS` order (stateless
    instances, shared)."""
    return _TOOLS


_AGENT_TOOLS: tuple[Tool, ...] = (*_TOOLS, SpawnAgent())


def agent_tools() -> tuple[Tool, ...]:
    """What ``latch run`` offers a root agent: :func:`builtin_tools` then ``spawn_agent``, in that fixed order."""
    return _AGENT_TOOLS
