"""The ``search_history`` tool: the agent's own exact full-text recall over its session (spec: "Sessions &
continuity"; :meth:`latch.store.EventStore.search`).

The newest ``limit`` matches (default :data:`DEFAULT_LIMIT`, at most :data:`MAX_LIMIT`) are chosen, then
shown oldest first, each as ``#SEQ KIND: TEXT`` with its text cut to :data:`HIT_LIMIT_CHARS` characters around
the first occurrence of a query word (the passage that matched, not the start of a long result);
the whole outcome is at most :data:`SEARCH_LIMIT_BYTES` bytes and :data:`SEARCH_LIMIT_TOKENS` tokens (the
oldest hits are dropped first). The assistant message holding the search call itself is never a hit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...events import AssistantMessage
from .base import ToolContext, ToolOutcome, schema

__all__ = [
    "SearchHistory",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "HIT_LIMIT_CHARS",
    "SEARCH_LIMIT_BYTES",
    "SEARCH_LIMIT_TOKENS",
]

DEFAULT_LIMIT = 10
MAX_LIMIT = 50
HIT_LIMIT_CHARS = 600
SEARCH_LIMIT_BYTES = 16 * 1024
SEARCH_LIMIT_TOKENS = 4000


def _passage(flat: str, query: str) -> str:
    """``flat`` cut to :data:`HIT_LIMIT_CHARS` characters around the first place a word of ``query`` occurs
    (case-insensitive; the start when none does), with ``…`` where text was cut."""
    if len(flat) <= HIT_LIMIT_CHARS:
        return flat
    low = flat.lower()
    found = [i for w in query.lower().split() if (i := low.find(w.strip('"'))) >= 0]
    at = min(found) if found else 0
    start = max(0, min(at - HIT_LIMIT_CHARS // 4, len(flat) - (HIT_LIMIT_CHARS - 2)))
    end = min(len(flat), start + HIT_LIMIT_CHARS - 2)
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def _line(seq: int, kind: str, text: str, query: str) -> str:
    return f"#{seq} {kind}: {_passage(' '.join(text.split()), query)}"


class SearchHistory:
    """``search_history(query, limit=10)``."""

    NAME: ClassVar[str] = "search_history"
    MUTATES: ClassVar[bool] = False
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "search_history",
        "Search this session's full history (messages, tool calls and results, recorded state) for exact "
        "words. Returns the newest matches, shown oldest first.",
        {
            "query": {"type": "string", "minLength": 1, "description": "Words that must all occur."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": f"How many matches at most (default {DEFAULT_LIMIT}).",
            },
        },
        ["query"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        limit = args.get("limit", DEFAULT_LIMIT)
        hits = []
        for s in ctx.store.search(args["query"], session_id=ctx.session_id, limit=limit + 1):
            e = s.event
            if ctx.call_id and isinstance(e, AssistantMessage) and any(c.id == ctx.call_id for c in e.tool_calls):
                continue  # the request for this search itself
            hits.append(s)
        hits = hits[:limit]
        if not hits:
            return ToolOutcome(f"no match for {args['query']!r} in this session")
        lines = [_line(s.seq, s.kind, s.event.searchable_text(), args["query"]) for s in hits]  # newest first
        kept: list[str] = []
        for line in lines:
            text = "\n".join([line] + kept[::-1])
            if kept and (len(text.encode("utf-8")) > SEARCH_LIMIT_BYTES or ctx.estimate(text) > SEARCH_LIMIT_TOKENS):
                break
            kept.append(line)
        header = f"[{len(kept)} of the newest matches, oldest first" + (
            f"; {len(lines) - len(kept)} older ones left out to stay short]" if len(kept) < len(lines) else "]"
        )
        return ToolOutcome("\n".join([header] + kept[::-1]))
