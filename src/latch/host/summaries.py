"""What tells sessions apart in a list (``latch sessions``): title, start, harness, model, requests, cost, status.

:func:`summarize` reads one session's events once and returns a :class:`SessionSummary`:

* ``title``: the harness's own title (:attr:`latch.store.SessionInfo.title`), else the first user prompt that is
  not harness-injected (``is_meta``), whitespace collapsed; raw transcript text (pass it through
  :func:`latch.textsafe.safe` to print it); ``None`` when there is neither.
* ``started``/``last``: the first and last event timestamps (aware datetimes; ``None`` when no event carries one:
  the transcript had none, and the import time is no date of the session).
* ``harness``: the session's format (``claude-code``, ``codex``, ``latch-run``...); ``model``: the model most
  model requests name (the first on a tie), ``None`` when none does.
* ``requests``: every model request (:func:`latch.host.loop.model_requests`); ``usd``: their summed price
  (:func:`latch.accounting.pricing.price_usage`, genai-prices at the request's time) or ``None`` when none is priced;
  ``unpriced``: how many requests have no price.
* ``status``: ``live`` (a ``latch run`` of it is running), ``interrupted`` (its run was killed or ended by an
  interrupt, or the transcript ends on a tool call without its result), ``refused`` (its run ended on an error
  the engine raised because the view could not fit), ``error``/``stopped``/``max turns`` (how a run ended
  otherwise), else ``done``.

:func:`session_tree` orders summaries as every session list shows them: newest first, children under their parent.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from decimal import Decimal
from typing import Any

from ..accounting import pricing
from ..events import AssistantMessage, ToolResult, UserMessage
from ..kernel.tombstones import tombstoned_sessions
from ..records import dataclass
from ..store import EventStore
from .loop import model_requests
from .runs import session_liveness

__all__ = [
    "SessionSummary",
    "summarize",
    "session_tree",
    "short_ids",
    "listed_sessions",
    "ID_CHARS",
    "STATUSES",
    "SUMMARY_KINDS",
]

STATUSES = ("done", "interrupted", "live", "refused", "error", "stopped", "max turns")
"""Every :attr:`SessionSummary.status`."""

SUMMARY_KINDS = ("user_message", "assistant_message", "usage", "tool_result", "run_started", "run_ended")
"""The event kinds :func:`summarize` reads."""

_REFUSAL_WORDS = ("overflow", "refus", "does not fit", "budget")


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session as ``latch sessions`` lists it (see the module docstring for each field)."""

    id: str
    parent_id: str | None
    title: str | None
    started: datetime | None
    last: datetime | None
    harness: str | None
    model: str | None
    requests: int
    usd: Decimal | None
    unpriced: int
    status: str
    events: int
    workspace: str | None
    source: str | None

    def cost_text(self) -> str:
        """The cost as the lists show it: ``–`` without requests, else :func:`latch.accounting.pricing.format_usd` of
        :attr:`usd` with ``+`` when some requests are unpriced."""
        if not self.requests:
            return "–"
        return pricing.format_usd(self.usd) + ("+" if self.usd is not None and self.unpriced else "")

    def started_text(self) -> str:
        """The start in local time, ``YYYY-MM-DD HH:MM``, or ``(undated)``."""
        return "(undated)" if self.started is None else self.started.astimezone().strftime("%Y-%m-%d %H:%M")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: datetimes as ISO 8601 (UTC offset kept), dollars as a float (``None`` when unpriced)."""
        return {
            "id": self.id,
            "parent": self.parent_id,
            "title": self.title,
            "started": None if self.started is None else self.started.isoformat(),
            "last": None if self.last is None else self.last.isoformat(),
            "harness": self.harness,
            "model": self.model,
            "requests": self.requests,
            "usd": pricing.usd(self.usd),
            "unpriced": self.unpriced,
            "status": self.status,
            "events": self.events,
            "workspace": self.workspace,
            "source": self.source,
        }


def _title(info: Any, events: list[Any]) -> str | None:
    if info.title:
        return " ".join(info.title.split())
    for ev in events:
        e = ev.event
        if isinstance(e, UserMessage) and not e.is_meta and e.text.strip():
            return " ".join(e.text.split())
    return None


def _status(events: list[Any]) -> str:
    live, run = session_liveness(events)
    if live:
        return "live"
    phase = run["phase"]
    if phase == "interrupted":
        return "interrupted"
    if phase == "ended":
        outcome = run["run"]["outcome"]
        if outcome == "error":
            detail = (run["run"]["detail"] or "").lower()
            return "refused" if any(w in detail for w in _REFUSAL_WORDS) else "error"
        return str({"done": "done", "max_turns": "max turns"}.get(outcome, outcome))
    pending: set[str] = set()
    for ev in events:
        e = ev.event
        if isinstance(e, AssistantMessage):
            pending.update(c.id for c in e.tool_calls)
        elif isinstance(e, ToolResult):
            if e.missing:
                return "interrupted"
            pending.discard(e.call_id)
    return "interrupted" if pending else "done"


def summarize(store: EventStore, info: Any) -> SessionSummary:
    """The :class:`SessionSummary` of the stored session ``info`` (a :class:`latch.store.SessionInfo`); reads
    its events of :data:`SUMMARY_KINDS` once. Never raises for odd data: an unparsable timestamp is skipped."""
    events = list(store.events(info.id, kinds=list(SUMMARY_KINDS)))
    stamps = [t for t in (pricing.parse_timestamp(ev.ts) for ev in events) if t is not None]
    models: Counter[str] = Counter()
    total: Decimal | None = None
    unpriced = 0
    reqs = model_requests(events)
    for req in reqs:
        if req.model:
            models[req.model] += 1
        price = pricing.price_usage(req.usage, req.model, at=pricing.parse_timestamp(req.ts))
        if price is None:
            unpriced += 1
        else:
            total = (total or Decimal(0)) + price.usd
    return SessionSummary(
        id=info.id,
        parent_id=info.parent_id,
        title=_title(info, events),
        started=min(stamps, default=None),
        last=max(stamps, default=None),
        harness=info.format,
        model=models.most_common(1)[0][0] if models else None,
        requests=len(reqs),
        usd=total,
        unpriced=unpriced,
        status=_status(events),
        events=info.events,
        workspace=info.workspace,
        source=info.source,
    )


def session_tree(summaries: list[SessionSummary]) -> list[tuple[SessionSummary, int]]:
    """``[(summary, depth), ...]``: the roots newest first (undated ones last), each followed by its children
    (oldest first, recursively) with their depth (0 for a root); a child whose parent is not in ``summaries`` is
    a root. ``latch sessions``, the TUI and the web list sessions in this order."""
    shown = {s.id for s in summaries}
    kids: dict[str, list[SessionSummary]] = {}
    roots: list[SessionSummary] = []
    for s in summaries:
        if s.parent_id is not None and s.parent_id in shown:
            kids.setdefault(s.parent_id, []).append(s)
        else:
            roots.append(s)

    def key(s: SessionSummary) -> float:
        return s.started.timestamp() if s.started else float("-inf")

    out: list[tuple[SessionSummary, int]] = []

    def walk(s: SessionSummary, depth: int) -> None:
        out.append((s, depth))
        for child in sorted(kids.get(s.id, ()), key=key):
            if all(child is not seen for seen, _ in out):
                walk(child, depth + 1)

    for root in sorted(roots, key=key, reverse=True):
        walk(root, 0)
    return out


ID_CHARS = 8
"""The least characters of an id :func:`short_ids` shows (more when needed to be unique)."""


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id's shortest prefix of at least :data:`ID_CHARS` characters that no other id starts with (the whole
    id when it is not longer, or when another id starts with all of it)."""
    out: dict[str, str] = {}
    ordered = sorted(ids)
    for i, sid in enumerate(ordered):
        n = ID_CHARS
        for other in (ordered[i - 1] if i else None, ordered[i + 1] if i + 1 < len(ordered) else None):
            if other is None:
                continue
            common = 0
            while common < min(len(sid), len(other)) and sid[common] == other[common]:
                common += 1
            n = max(n, common + 1)
        out[sid] = sid[:n]
    return out


def listed_sessions(store: EventStore) -> list[tuple[SessionSummary, int]]:
    """Every session of ``store`` but the forgotten ones (tombstoned, and their descendants), summarized and in
    :func:`session_tree` order with their depth: what the TUI and the web list (``latch sessions`` without
    filters)."""
    dead = tombstoned_sessions(store)
    return session_tree([summarize(store, info) for info in store.sessions() if info.id not in dead])
