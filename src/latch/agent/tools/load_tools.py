"""The ``load_tools`` tool: tool schemas on demand when the full set does not fit a small window.

When the schemas of every offered tool take more than a share of the hard limit, ``latch run`` offers a core
set (files, shell, search, compact, skills, children) and ``load_tools``, whose description names every other
tool with the first sentence of its own description. ``load_tools(names)`` adds those tools from the next
request on (the pattern of deferred tools and on-demand MCP tools): the offered list changes once per call, so
the next request starts a new cache epoch, and stays fixed until the next call. A deferred tool the model calls
without loading it still runs: only its schema was left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from .base import ToolContext, ToolOutcome, schema

__all__ = ["LoadTools", "LOAD_TOOLS"]

LOAD_TOOLS = "load_tools"


def _first_sentence(text: str) -> str:
    line = " ".join(str(text).split())
    cut = line.find(". ")
    return (line if cut < 0 else line[: cut + 1])[:160]


class LoadTools:
    """``load_tools(names)``: see the module docstring. ``deferred`` maps each deferred tool's name to its
    description; ``load(names) -> str`` adds them to the offered tools and says what it did."""

    NAME: ClassVar[str] = LOAD_TOOLS
    MUTATES: ClassVar[bool] = False

    def __init__(self, deferred: Mapping[str, str], load: Callable[[Sequence[str]], str]):
        self._deferred = dict(deferred)
        self._load = load
        listed = "; ".join(f"{name}: {_first_sentence(d)}" if d else name for name, d in self._deferred.items())
        self.SCHEMA = schema(
            LOAD_TOOLS,
            "Offer more tools from the next request on (left out so far to leave room in a small context window). "
            f"Available: {listed}",
            {
                "names": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string", "enum": list(self._deferred)},
                    "description": "The tools to offer.",
                }
            },
            ["names"],
        )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(self._load(list(dict.fromkeys(args["names"]))))
