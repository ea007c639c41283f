"""``summary``: history beyond a threshold is replaced by one summary message.

The compaction most harnesses ship: while the conversation since the last summary stays under
``threshold_tokens`` (default: the budget's ``recent_tokens``) it is sent whole; when it grows
past it, every unit but the newest ``keep_tokens`` (default: half the threshold) is folded into
one user-role summary message (``kind="summary"``) placed before the kept units. The boundary
only moves when the threshold is crossed again (hysteresis), so the summary is stable between
compactions. Units the hard budget cannot hold next to a ``summary_tokens`` summary are folded
in as well, and ``manual_compact`` folds everything up to that point: nothing leaves the view
without entering the summary (the summary may still lose facts; the log keeps them all).

The summarizer is pluggable (option ``summarizer``: a callable, or ``"module:attribute"``)::

    def summarize(units: Sequence[Unit], max_tokens: int, count: Callable[[str], int]) -> str

It gets the summarized units in order (``unit.messages`` are provider-neutral ``ViewMessage``s)
and must answer within ``max_tokens`` as measured by ``count``; a longer answer is cut. The
default, :func:`extractive_summary`, runs no model: the first sentence of each user request,
the files edited, and the last error lines, bounded.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from latch.engine.units import Unit
from latch.events import argument_paths, parse_arguments
from latch.port import ViewMessage

from .base import BaselineEngine, Selection

__all__ = ["SummaryEngine", "extractive_summary", "Summarizer"]

Summarizer = Callable[[Sequence[Unit], int, Callable[[str], int]], str]

REQUEST_CHARS = 160
ERROR_CHARS = 200
ERRORS_KEPT = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")
_EDIT_TOOLS = frozenset(
    """edit multiedit write write_file edit_file create create_file insert apply_patch
str_replace replace notebookedit notebook_edit""".split()
)
_EDITOR_WRITE = frozenset(("create", "str_replace", "insert", "write"))
_PATCH_FILE = re.compile(r"\*\*\* (?:Update|Add|Delete) File: ([^\s\"\\]+)")


def _cut(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def first_sentence(text: str) -> str:
    """The first sentence (or line) of ``text``, whitespace-collapsed, at most 160 characters."""
    stripped = text.strip()
    return _cut(_SENTENCE_END.split(stripped, maxsplit=1)[0], REQUEST_CHARS)


def edited_files(name: str, arguments: str) -> list[str]:
    """Paths an edit/write/patch call touches (from its JSON arguments or ``*** Update File:`` lines)."""
    found = _PATCH_FILE.findall(arguments)
    lname = name.lower()
    args = parse_arguments(arguments)
    if isinstance(args, dict):
        editor_write = "editor" in lname and args.get("command") in _EDITOR_WRITE
        if lname in _EDIT_TOOLS or editor_write:
            found += argument_paths(args)
    return found


def extractive_summary(units: Sequence[Unit], max_tokens: int, count: Callable[[str], int]) -> str:
    """Deterministic summary of ``units`` within ``max_tokens`` (by ``count``).

    Sections: ``User requests`` (first sentence of each user turn), ``Files edited`` (in
    first-edit order), ``Last errors`` (last line of the newest three error results). Over
    budget, the oldest requests go first (down to the newest one), then files, then errors, then
    the last request; ``""`` when nothing fits.
    """
    requests: list[str] = []
    files: dict[str, None] = {}
    errors: list[str] = []
    for unit in units:
        if unit.user_turn and unit.messages[0].content.strip():
            requests.append(first_sentence(unit.messages[0].content))
        for m in unit.messages:
            for call in m.tool_calls:
                files.update(dict.fromkeys(edited_files(call.name, call.arguments)))
            if m.role == "tool" and m.is_error:
                lines = [ln for ln in m.content.splitlines() if ln.strip()]
                if lines:
                    errors.append(_cut(lines[-1], ERROR_CHARS))
    file_list = list(files)
    errors = errors[-ERRORS_KEPT:]

    def render() -> str:
        parts = []
        if requests:
            parts.append("User requests:\n" + "\n".join(f"- {r}" for r in requests))
        if file_list:
            parts.append("Files edited: " + ", ".join(file_list))
        if errors:
            parts.append("Last errors:\n" + "\n".join(f"- {e}" for e in errors))
        return "\n".join(parts)

    text = render()
    while text and count(text) > max_tokens:  # shed the oldest requests, then files, errors, the last request
        if len(requests) > 1:
            del requests[0]
        elif file_list:
            del file_list[0]
        elif errors:
            del errors[0]
        else:
            requests.clear()
        text = render()
    return text


def _resolve_summarizer(value: Any) -> Summarizer:
    if value is None:
        return extractive_summary
    if callable(value):
        return value
    if isinstance(value, str) and ":" in value:
        module, _, attr = value.partition(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"[engines.summary] summarizer {value!r} cannot be loaded: {exc}") from None
        if callable(found):
            return found
    raise ValueError(f"[engines.summary] summarizer must be a callable or 'module:attribute', got {value!r}")


class SummaryEngine(BaselineEngine):
    """Fold history beyond ``threshold_tokens`` into one summary message; keep the newest units verbatim."""

    PLUGIN_NAME: ClassVar[str] = "summary"
    DESCRIPTION: ClassVar[str] = (
        "Replaces history beyond a threshold with one summary message "
        "(pluggable summarizer; default: deterministic extractive)."
    )
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "threshold_tokens": None,
        "keep_tokens": None,
        "summary_tokens": 2000,
        "summarizer": None,
    }

    def _check_options(self, options: dict[str, Any]) -> None:
        for key in ("threshold_tokens", "keep_tokens"):
            self._positive_int(options, key, self.PLUGIN_NAME, allow_none=True)
        self._positive_int(options, "summary_tokens", self.PLUGIN_NAME)
        self._summarize = _resolve_summarizer(options["summarizer"])

    def _reset_units(self) -> None:
        super()._reset_units()
        self._state: tuple[int, int, int, int] | None = None  # (anchor seq, units seen, boundary, tail tokens)
        self._summary: tuple[tuple[int, int, int], ViewMessage | None] | None = None

    def boundary(self, units: list[Unit], threshold: int, keep: int, tail_limit: int) -> int:
        """Index of the first unit kept verbatim (units before it are summarized).

        Hysteresis: the tail grows until it exceeds ``threshold``, then shrinks to ``keep``; it is
        also shrunk to ``tail_limit`` (what the hard budget leaves beside a full summary). The
        newest unit always stays. Incremental while units are only appended.
        """
        anchor = units[0].first_seq if units else 0
        state = self._state
        if state is None or state[0] != anchor or state[1] > len(units):
            state = (anchor, 0, 0, 0)
        _, seen, b, tail = state
        for i in range(seen, len(units)):
            tail += self.cost(units[i])
            if tail > threshold:
                while b < i and tail > keep:
                    tail -= self.cost(units[b])
                    b += 1
        while b < len(units) - 1 and tail > tail_limit:
            tail -= self.cost(units[b])
            b += 1
        self._state = (anchor, len(units), b, tail)
        return b

    def summary_message(self, summarized: Sequence[Unit], budget_tokens: int) -> ViewMessage | None:
        """One user-role message summarizing ``summarized`` within ``budget_tokens`` (message tokens), or None."""
        key = (summarized[0].first_seq, summarized[-1].close_seq, budget_tokens)
        if self._summary is not None and self._summary[0] == key:
            return self._summary[1]
        head = (
            f"[Summary of the earlier conversation: {len(summarized)} units, seq {key[0]}-{key[1]}, "
            f"replaced by this summary; the originals stay in the session log.]\n"
        )
        overhead = self._counter.message(ViewMessage(role="user", content=head, kind="summary"))
        body = (
            self._summarize(summarized, budget_tokens - overhead, self._counter.text)
            if budget_tokens > overhead
            else ""
        )
        while body and self._counter.message(ViewMessage(role="user", content=head + body)) > budget_tokens:
            body = body[: len(body) * 3 // 4]  # the summarizer overran its budget: cut it
        message = ViewMessage(role="user", content=head + body, kind="summary") if body else None
        self._summary = (key, message)
        return message

    def select(self, units: list[Unit], available: int) -> Selection:
        o = self._options
        threshold = min(o["threshold_tokens"] or self.budget.recent_tokens, available)
        keep = min(o["keep_tokens"] or threshold // 2, threshold)
        b = self.boundary(units, threshold, keep, available - o["summary_tokens"]) if units else 0
        kept = units[b:]
        summarized = [*self.compacted, *units[:b]]
        prefix: list[ViewMessage] = []
        if summarized:
            room = min(o["summary_tokens"], available - sum(self.cost(u) for u in kept))
            message = self.summary_message(summarized, room)
            if message is not None:
                prefix.append(message)
        return Selection(
            kept,
            prefix,
            metrics={
                "summarized_units": len(summarized),
                "summary_tokens": sum(self._counter.message(m) for m in prefix),
            },
        )
