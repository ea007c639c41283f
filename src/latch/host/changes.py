"""What changed between two consecutive sent requests of the one request loop (``latch view --diff``, the
``changes`` of every ``latch replay --json`` request).

:func:`request_changes` compares a request's :class:`~latch.host.loop.RequestResult` with the previous one the
loop sent (a refused request is not sent, so the provider's cache still holds the one before it) and returns a
JSON-ready dict::

    {"previous": 8 | None,                 # number of the request compared with (None: the first request)
     "cache": "first" | "kept" | "rotated" | "broken",
     "rotation_reason": "recent_tokens" | ... | None,   # view.metrics["rotation_reason"], only when rotated
     "prefix_break": None | {"line": int, "at": "system" | "tools" | "message",
                             "message": int | None, "kind": str | None},
     "common_prefix_messages": int,         # leading messages shared with the previous request
     "common_prefix_tokens": int,          # the loop's recount of the shared lines
     "tokens": int, "tokens_delta": int,    # the view's total (as the engine reports it) and its change
     "units_appended": [seq, ...], "units_evicted": [seq, ...],   # conversation units by first seq
     "recall_added": [seq, ...], "recall_dropped": [seq, ...],    # recalled originals by seq
     "kernel_added": [{"message": int, "type": str | None, "revision": int | None,
                       "sections": [str, ...], "tokens": int}, ...],
     "kernel_dropped": int}

``cache`` is ``kept`` when the request extends the previous one line for line (the provider's prefix cache
holds), ``rotated`` when the engine started a new cache epoch (``view.epoch`` changed: a deliberate rewrite, its
reason from the engine's metrics), ``broken`` when the epoch stayed but the prefix did not (a violation the loop
reports). ``prefix_break`` is the first canonical line of the *previous* request that the new one does not
repeat: line 0 is the system field, 1 the tools, ``2 + i`` message ``i`` (0-based, with its ``kind``).
Units: tokens (the loop's estimator); seqs are event positions in the store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..engine.recall import recalled_seqs
from ..engine.units import Unit, UnitSpan
from ..lazyre import lazy_compile
from .loop import RequestResult

__all__ = ["Parsed", "request_changes", "seq_ranges"]

_KERNEL_HEAD = lazy_compile(r'<kernel-context type="([\w-]+)" generation="\d+" revision="(\d+)"')
_SECTION = lazy_compile(r"^<([a-z][a-z0-9-]*)[ >]", re.M)
HEADER_LINES = 2
"""Canonical lines before the messages: the system field and the tools."""


def _units(res: RequestResult, units: Mapping[int, Unit | UnitSpan]) -> list[int]:
    seen: dict[int, None] = {}
    for m in res.view.messages if res.view is not None else ():
        if m.kind == "conversation" and m.seq is not None:
            u = units.get(m.seq)
            seen[u.first_seq if u is not None else m.seq] = None
    return list(seen)


Parsed = dict[int, tuple[Any, list[int], str | None, int | None, list[str]]]
"""A caller's cache of parsed messages: ``id(message) -> (message, recalled seqs, kernel type, revision, sections)``
(the views of one epoch share message objects, so each is parsed once)."""


def _parse(m: Any, cache: Parsed) -> tuple[list[int], str | None, int | None, list[str]]:
    got = cache.get(id(m))
    if got is None or got[0] is not m:
        if len(cache) > 65_536:
            cache.clear()
        head = _KERNEL_HEAD.search(m.content) if m.kind == "kernel_context" else None
        sections = (
            [t for t in dict.fromkeys(_SECTION.findall(m.content)) if t != "kernel-context"]
            if m.kind == "kernel_context"
            else []
        )
        got = cache[id(m)] = (
            m,
            recalled_seqs(m.content),
            head.group(1) if head else None,
            int(head.group(2)) if head else None,
            sections,
        )
    return got[1], got[2], got[3], got[4]


def _recalled(res: RequestResult, cache: Parsed) -> list[int]:
    out: dict[int, None] = {}
    for m in res.view.messages if res.view is not None else ():
        if m.kind in ("kernel_context", "recall"):
            out.update(dict.fromkeys(_parse(m, cache)[0]))
    return list(out)


def _kernel(res: RequestResult, cache: Parsed) -> list[tuple[bytes, dict[str, Any]]]:
    out = []
    for i, m in enumerate(res.view.messages if res.view is not None else ()):
        if m.kind != "kernel_context":
            continue
        _, kind, revision, sections = _parse(m, cache)
        out.append(
            (
                res.lines[HEADER_LINES + i],
                {
                    "message": i,
                    "type": kind,
                    "revision": revision,
                    "sections": sections,
                    "tokens": res.line_tokens[HEADER_LINES + i],
                },
            )
        )
    return out


def request_changes(
    prev: RequestResult | None, cur: RequestResult, units: Mapping[int, Unit | UnitSpan], cache: Parsed | None = None
) -> dict[str, Any]:
    """The changes from ``prev`` (the previous sent request, ``None`` for the first) to ``cur`` (see the module
    docstring for the shape). ``units`` maps a seq to its conversation unit (:attr:`RequestLoop.units`; a seq it lacks is a unit
    of that one event);
    ``cache`` (:data:`Parsed`, owned by the caller and passed to every call of one replay) saves parsing the
    same KernelContext messages again. Raises ``ValueError`` when ``cur`` (or ``prev``) was refused (no view)."""
    cache = {} if cache is None else cache
    if cur.view is None or (prev is not None and prev.view is None):
        raise ValueError("a refused request (ContextOverflow) has no view to compare")
    total = cur.view.tokens.total_tokens
    now_units, now_recall, now_kernel = _units(cur, units), _recalled(cur, cache), _kernel(cur, cache)
    if prev is None:
        return {
            "previous": None,
            "cache": "first",
            "rotation_reason": None,
            "prefix_break": None,
            "common_prefix_messages": 0,
            "common_prefix_tokens": 0,
            "tokens": total,
            "tokens_delta": total,
            "units_appended": now_units,
            "units_evicted": [],
            "recall_added": now_recall,
            "recall_dropped": [],
            "kernel_added": [k for _, k in now_kernel],
            "kernel_dropped": 0,
        }
    assert prev.view is not None
    n = cur.common_prefix_lines
    broke = None
    if n < len(prev.lines):
        at = "system" if n == 0 else "tools" if n == 1 else "message"
        i = n - HEADER_LINES if at == "message" else None
        broke = {"line": n, "at": at, "message": i, "kind": prev.view.messages[i].kind if i is not None else None}
    status = "rotated" if cur.rotated else "broken" if cur.prefix_break or broke else "kept"
    before_units, before_recall = _units(prev, units), _recalled(prev, cache)
    before_kernel = {line for line, _ in _kernel(prev, cache)}
    now_lines = {line for line, _ in now_kernel}
    had_units, has_units, had_recall, has_recall = (
        set(before_units),
        set(now_units),
        set(before_recall),
        set(now_recall),
    )
    return {
        "previous": prev.request.number if prev.request is not None else None,
        "cache": status,
        "rotation_reason": cur.view.metrics.get("rotation_reason") if status == "rotated" else None,
        "prefix_break": broke,
        "common_prefix_messages": max(0, n - HEADER_LINES),
        "common_prefix_tokens": cur.common_prefix_tokens,
        "tokens": total,
        "tokens_delta": total - prev.view.tokens.total_tokens,
        "units_appended": [s for s in now_units if s not in had_units],
        "units_evicted": [s for s in before_units if s not in has_units],
        "recall_added": [s for s in now_recall if s not in had_recall],
        "recall_dropped": [s for s in before_recall if s not in has_recall],
        "kernel_added": [k for line, k in now_kernel if line not in before_kernel],
        "kernel_dropped": sum(1 for line in before_kernel if line not in now_lines),
    }


def seq_ranges(seqs: list[int], limit: int = 12) -> str:
    """``[3, 4, 5, 9]`` as ``"3..5, 9"`` (sorted; runs of consecutive seqs joined), at most ``limit`` pieces then
    ``"… (+N more)"``; ``"none"`` when empty. For report lines."""
    if not seqs:
        return "none"
    xs = sorted(set(seqs))
    runs: list[tuple[int, int]] = []
    for x in xs:
        if runs and x == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], x)
        else:
            runs.append((x, x))
    parts = [f"{a}" if a == b else f"{a}..{b}" for a, b in runs]
    more = len(parts) - limit
    return ", ".join(parts[:limit]) + (f", … (+{more} more)" if more > 0 else "")
