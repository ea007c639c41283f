"""Which tool schemas a request carries: every tool's, or, when they would take too much of the hard limit, the
:data:`CORE_TOOLS` and ``load_tools`` for the rest (:mod:`latch.agent.tools.load_tools`; spec: "Agent Skills and
MCP")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..events import AssistantMessage, ToolResult
from ..store import EventLog
from .tools.load_tools import LOAD_TOOLS, LoadTools

__all__ = ["DEFER_SHARE", "CORE_TOOLS", "ToolOffer"]

DEFER_SHARE = 4
"""When every tool's schema together takes more than 1/DEFER_SHARE of the hard limit, ``latch run`` offers the
:data:`CORE_TOOLS` and ``load_tools`` for the rest (:mod:`latch.agent.tools.load_tools`)."""
CORE_TOOLS = (
    "read_file",
    "write_file",
    "edit_file",
    "shell",
    "process_output",
    "search_history",
    "compact",
    "read_artifact",
    "load_skill",
    "read_skill_resource",
    "spawn_agent",
)
"""The tools always offered."""


class ToolOffer:
    """The schemas of a session's tools (``schemas``, in the fixed order) and which of them are offered.

    With ``defer`` and the schemas over 1/:data:`DEFER_SHARE` of ``hard_limit_tokens`` (counted by ``counter``),
    every tool outside :data:`CORE_TOOLS` and ``keep`` is deferred: :attr:`loader` (a ``load_tools`` tool, else
    ``None``) loads them by name, the ones earlier ``load_tools`` calls of the session loaded are offered again, and
    ``on_load()`` is called whenever the list offered changes."""

    def __init__(
        self,
        store: EventLog,
        session_id: str,
        schemas: Sequence[Mapping[str, Any]],
        *,
        defer: bool,
        counter: Any,
        hard_limit_tokens: int,
        keep: Sequence[str],
        on_load: Callable[[], None],
    ):
        self.store, self.session_id, self.on_load = store, session_id, on_load
        self.schemas = [dict(sc) for sc in schemas]
        self.deferred: dict[str, str] = {}  # tool name -> description, of tools offered only on demand
        self.loaded: set[str] = set()
        self.loader: LoadTools | None = None
        if defer and counter.tools(self.schemas) * DEFER_SHARE > hard_limit_tokens:
            keep_names = {*CORE_TOOLS, *keep}
            self.deferred = {
                str(sc["name"]): str(sc.get("description") or "")
                for sc in self.schemas
                if sc.get("name") not in keep_names
            }
            if self.deferred:
                self.loader = LoadTools(self.deferred, self.load)
                self.loaded = self.loaded_before()

    def offered(self) -> list[dict[str, Any]]:
        """The schemas a request carries: every tool's in the fixed order, less the deferred ones not loaded,
        then ``load_tools`` while any remain deferred."""
        shown = [sc for sc in self.schemas if sc.get("name") not in self.deferred or sc.get("name") in self.loaded]
        if self.loader is not None and set(self.deferred) - self.loaded:
            shown.append(dict(self.loader.SCHEMA))
        return shown

    def loaded_before(self) -> set[str]:
        """The deferred tools earlier ``load_tools`` calls of this session loaded (a resumed run offers them)."""
        ok = {
            s.event.call_id
            for s in self.store.events(self.session_id, kinds=[ToolResult.KIND])
            if isinstance(s.event, ToolResult) and not s.event.is_error
        }
        found: set[str] = set()
        for s in self.store.events(self.session_id, kinds=[AssistantMessage.KIND]):
            for c in s.event.tool_calls if isinstance(s.event, AssistantMessage) else ():
                args = c.args() if c.name == LOAD_TOOLS and c.id in ok else None
                if isinstance(args, dict) and isinstance(args.get("names"), list):
                    found.update(n for n in args["names"] if n in self.deferred)
        return found

    def load(self, names: Sequence[str]) -> str:
        """``load_tools``: offer the deferred tools ``names`` from the next request on; the line the model sees."""
        unknown = [n for n in names if n not in self.deferred]
        if unknown:
            return f"not loaded: {', '.join(unknown)} (not among the tools offered on demand)"
        new = [n for n in names if n not in self.loaded]
        self.loaded.update(new)
        self.on_load()
        if not new:
            return f"already offered: {', '.join(names)}"
        return f"loaded: {', '.join(new)}: offered from the next request on"
