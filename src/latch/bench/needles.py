"""Needles: facts each benched session holds early on, and whether an engine keeps them (``latch bench``).

For the generated scenario the planted constraint, decision and exact diagnostic (:mod:`latch.bench.stress`);
for a transcript, picked deterministically from its first quarter (:func:`corpus_needles`). At
:func:`checkpoints` after a needle's event a needle *survives* (:func:`survives`) when its text is in the view
or the engine's ``recall(needle)`` returns it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..events import AssistantMessage, ToolCall, ToolResult, UserMessage
from ..records import dataclass

__all__ = ["Needle", "corpus_needles", "checkpoints", "survives", "CHECKPOINTS"]

CHECKPOINTS = 8


@dataclass(frozen=True)
class Needle:
    """A fact held by event ``seq``: ``text`` must stay visible or recallable."""

    label: str
    text: str
    seq: int


_ERRORISH = re.compile(r"error|fail|exception|traceback|not found|denied|invalid|cannot|panic", re.I)


def corpus_needles(events: Sequence[Any]) -> list[Needle]:
    """Needles of a transcript, from its first quarter, in a fixed order: the first error line said only once
    in the session, the first file path a tool call names, the first line of the first user request (at
    most 80 characters, cut at a word)."""
    early = events[: max(1, len(events) // 4)]
    texts = [s.event.searchable_text() for s in events]
    out: list[Needle] = []
    for s in early:
        e = s.event
        if isinstance(e, ToolResult) and e.is_error and not e.missing:
            lines = [ln.strip() for ln in e.content.splitlines() if 12 <= len(ln.strip()) <= 160]
            unique = [ln for ln in lines if sum(ln in t for t in texts) == 1]  # said once: a real needle
            line = next((ln for ln in unique if _ERRORISH.search(ln)), unique[0] if unique else None)
            if line:
                out.append(Needle("error line", line, s.seq))
                break
    path = next(
        (
            (p, s.seq)
            for s in early
            if isinstance(s.event, AssistantMessage)
            for c in s.event.tool_calls
            if (p := _call_path(c))
        ),
        None,
    )
    if path:
        out.append(Needle("file path", *path))
    for s in early:
        e = s.event
        if isinstance(e, UserMessage) and not e.is_meta:
            line = next((ln.strip() for ln in e.text.splitlines() if len(ln.strip()) >= 12), "")
            words = line if len(line) <= 80 else line[:80].rsplit(" ", 1)[0]
            if len(words) >= 12:
                out.append(Needle("user request", words, s.seq))
                break
    return out


def _call_path(call: ToolCall) -> str | None:
    """The first path of :meth:`ToolCall.paths` with a ``/`` in it, shorter than 200 characters."""
    return next((p for p in call.paths() if "/" in p and len(p) < 200), None)


def _visible(view: Any, text: str) -> bool:
    for m in view.messages:
        if text in m.content or any(text in c.arguments for c in m.tool_calls):
            return True
    return False


def checkpoints(n: int) -> set[int]:
    """The request indices (0-based, of ``n`` requests) where needles are checked: eight evenly spaced, and the
    last request."""
    if n == 0:
        return set()
    return {min(n - 1, (n * i) // CHECKPOINTS) for i in range(1, CHECKPOINTS)} | {n - 1}


def survives(engine: Any, view: Any, needle: Needle, until: int) -> bool:
    """``needle`` is in ``view`` or ``engine.recall(needle.text, until_seq=until)`` returns it (an engine whose
    recall raises loses it)."""
    if _visible(view, needle.text):
        return True
    try:
        found = engine.recall(needle.text, until_seq=until)
    except Exception:  # noqa: BLE001 - an engine whose recall fails loses the needle, the bench goes on
        return False
    return any(needle.text in r.text for r in found)
