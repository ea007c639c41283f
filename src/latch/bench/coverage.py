"""Needed-context coverage: did the view still hold what the agent needed next?

A deterministic, offline probe. For each model request N of a transcript, the *needed* identifiers are
those the real agent's response N used (its text and its tool calls' names and argument values:
:func:`response_text`; a parameter name comes from the tool schema every request carries) that had already
appeared in the raw
history before it (any earlier event's searchable text). Coverage of request N is the fraction of them
present verbatim in view N (any message's content or tool-call arguments, the recall section included);
a request that needed nothing has no coverage (``None``), not 1.

**The rule** (:func:`identifiers`): a maximal run of ``[A-Za-z0-9_./-]`` (ends trimmed of ``.``, ``/``
and ``-``), at least 4 characters, that looks like a file path, a dotted or snake_case symbol, or an id:
it holds a ``/``, a ``_``, or a ``.`` followed by a letter, or it mixes letters and at least 4 digits
(hashes, call ids, issue numbers). Words of prose, plain numbers and short names never count.

**Blind spots**: a fact the agent used without naming it (a number it reasoned from, a constraint it
obeyed) is invisible; an identifier it names because it just made it up (a new file it creates) is only
counted when the name was already in the history, which is right, but a name the agent re-derived
without needing the view counts as needed anyway; identifiers in languages whose symbols have no ``_``
or ``.`` (``camelCase`` alone) are missed; a paraphrase (a shortened path, a different quoting) counts as
absent; the probe reads the next response only, not the turns after it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["identifiers", "response_text", "view_text", "CoverageProbe", "WorkingSetProbe"]

_RUN = re.compile(r"[A-Za-z0-9_./\-]{4,}")
_DOTTED = re.compile(r"\.[A-Za-z]")
_DIGITS = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
MIN_CHARS = 4


def identifiers(text: str) -> list[str]:
    """The identifiers of ``text`` under the module's rule, in first-seen order, each once."""
    out: dict[str, None] = {}
    for run in _RUN.findall(text):
        tok = run.strip("./-")
        if len(tok) < MIN_CHARS or tok in out or tok.isalpha():  # (letters alone: a word of prose)
            continue
        if "/" in tok or "_" in tok or _DOTTED.search(tok) or (_LETTER.search(tok) and len(_DIGITS.findall(tok)) >= 4):
            out[tok] = None
    return list(out)


def _values(value: Any) -> list[str]:
    """The scalar values of parsed JSON (strings, numbers), depth first; keys are left out."""
    if isinstance(value, dict):
        return [v for x in value.values() for v in _values(x)]
    if isinstance(value, list):
        return [v for x in value for v in _values(x)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def response_text(event: Any) -> str:
    """What a response says: an assistant message's text and its tool calls' names and argument *values* (a
    parameter name such as ``old_string`` comes from the tool's schema, which every request carries, not from
    the context); any other event's searchable text."""
    calls = getattr(event, "tool_calls", None)
    if calls is None:
        text: str = event.searchable_text()
        return text
    parts = [event.text] if event.text else []
    for c in calls:
        value = c.args()
        parts.append(c.name)
        parts.extend(_values(value) if isinstance(value, (dict, list)) else [c.arguments])
    return "\n".join(parts)


def view_text(view: Any) -> str:
    """Every provider-visible string of ``view``'s messages (content and tool-call arguments), one per line."""
    parts: list[str] = []
    for m in view.messages:
        parts.append(m.content)
        parts.extend(c.arguments for c in m.tool_calls)
    return "\n".join(parts)


class _History:
    """Stored events in seq order, handed out once each: :meth:`until` the next ones up to a seq."""

    def __init__(self, events: Iterable[Any]):
        self._events = iter(events)
        self._pending: Any = None

    def until(self, until_seq: int) -> Iterator[Any]:
        while True:
            stored = self._pending if self._pending is not None else next(self._events, None)
            self._pending = None
            if stored is None:
                return
            if stored.seq > until_seq:
                self._pending = stored
                return
            yield stored


class CoverageProbe:
    """Feeds the raw history in seq order (O(new events) per request) and scores each view.

    :meth:`score` ``(response_event, view, until_seq)`` returns ``(needed, present)`` counts for one request
    after reading the history up to ``until_seq`` from ``events`` (stored events in seq order).
    """

    def __init__(self, events: Iterable[Any]):
        self._history = _History(events)
        self._seen: set[str] = set()

    def _advance(self, until_seq: int) -> None:
        for stored in self._history.until(until_seq):
            self._seen.update(identifiers(stored.event.searchable_text()))

    def score(self, response: Any, view: Any, until_seq: int, *, text: str | None = None) -> tuple[int, int]:
        """``(needed, present)``: identifiers of ``response`` seen before it, and how many of them view holds
        (``text``: the view's :func:`view_text` when the caller has it)."""
        self._advance(until_seq)
        needed = [t for t in identifiers(response_text(response)) if t in self._seen]
        if not needed:
            return 0, 0
        text = view_text(view) if text is None else text
        return len(needed), sum(1 for t in needed if t in text)


class WorkingSetProbe:
    """Working-set coverage: of the files the session's tool calls had named up to a request (their path
    arguments, :meth:`latch.events.ToolCall.paths`, each under 300 characters), how many the view names
    (the path, or its last two components, verbatim anywhere in it). :meth:`score` ``(view, until_seq)`` gives
    ``(touched, named)``; the history is read once, in seq order.

    A path without a line break is in the view's text exactly when it is in one of the strings the text joins with
    line breaks (:func:`view_text`), and a view shares most of those strings with the view before it, so a string
    the last view held is searched only for the paths named since (what it held is kept, the rest forgotten), not
    for every path in the whole text at every request."""

    def __init__(self, events: Iterable[Any]):
        self._history = _History(events)
        self._paths: dict[str, None] = {}
        self._needles: list[tuple[str, str]] = []  # each path and its tail, in the order first named
        self._spanning: list[int] = []  # the paths whose needles hold a line break: searched in the whole text
        self._in: dict[str, tuple[int, frozenset[int]]] = {}  # the last view's strings: needles searched, found

    def score(self, view: Any, until_seq: int, *, text: str | None = None) -> tuple[int, int]:
        for stored in self._history.until(until_seq):
            for call in getattr(stored.event, "tool_calls", ()) or ():
                for p in call.paths():
                    if 0 < len(p) < 300 and p not in self._paths:
                        self._paths[p] = None
                        if "\n" in p:
                            self._spanning.append(len(self._needles))
                        self._needles.append((p, _tail(p)))
        if not self._paths:
            return 0, 0
        needles, n = self._needles, len(self._needles)
        found: set[int] = set()
        kept: dict[str, tuple[int, frozenset[int]]] = {}  # this view's strings only: no more than the view holds
        for part in _view_parts(view):
            searched, hits = kept.get(part) or self._in.get(part) or (0, _NONE)
            if searched < n:
                new = [i for i in range(searched, n) if needles[i][0] in part or needles[i][1] in part]
                hits = hits.union(new) if new else hits
            kept[part] = (n, hits)
            found.update(hits)
        self._in = kept
        if self._spanning:
            text = view_text(view) if text is None else text
            found.update(i for i in self._spanning if needles[i][0] in text or needles[i][1] in text)
        return n, len(found)


_NONE: frozenset[int] = frozenset()


def _view_parts(view: Any) -> Iterator[str]:
    """The strings :func:`view_text` joins, in its order."""
    for m in view.messages:
        yield m.content
        for c in m.tool_calls:
            yield c.arguments


def _tail(path: str) -> str:
    """The last two components of ``path`` (``src/app.py`` of ``/home/me/repo/src/app.py``)."""
    parts = [x for x in path.replace("\\", "/").split("/") if x]
    return "/".join(parts[-2:]) if len(parts) > 1 else path
