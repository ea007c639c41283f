"""Shared semantic reducers: pure functions over durable events for the user interfaces.

Every function takes stored events (:class:`latch.store.StoredEvent`, in ``seq`` order, of one session)
and returns JSON-ready data; none reads the store, the clock or the network, so the CLI, the web page and
a reconnecting client all rebuild the same view from the same committed history (spec: "Browser
observation and reconnect"). Activity is presentation only (spec: "Transient interface activity"): it says
whether the provider *reported* reasoning, never the reasoning text, and a tool call started but without a
result is ``"running"`` only while the caller says the run is live; otherwise it is ``"interrupted"``,
never completed.

* :func:`transcript_item` / :func:`transcript`  conversation items (user, assistant, tool, system, compaction)
* :func:`usage_requests` / :func:`usage_totals`  per-request context numbers and their totals (tokens)
* :func:`evidence`                                 recorded validation (``ValidationEvidence`` events)
* :func:`activity`                                 reasoning reported, tools running or interrupted
* :func:`state_summary`                            the counts of a :class:`~latch.kernel.state.CanonicalState`
* :func:`request_costs`                            dollars per request (the bundled price table, :mod:`.cost`)
* :func:`context_breakdown`                        what filled the context at each request (tokens, characters)
* :func:`cache_epochs`                             provider cache epochs and the cache breaks between them
* :func:`runs` / :func:`run_status`                the durable run lifecycle: running, ended or interrupted
* :func:`commands`                                 run commands (steer, stop, compact) and whether they applied
* :func:`session_view`                             all of the above but the run lifecycle for one session
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..accounting.pricing import cost_dict, parse_timestamp, price_usage, total
from ..events import (
    AssistantMessage,
    CompactionMarker,
    RunCommandApplied,
    RunCommandQueued,
    RunEnded,
    RunStarted,
    SteeringDelivered,
    SteeringQueued,
    SystemNote,
    ToolResult,
    ToolStarted,
    Usage,
    UserMessage,
    ValidationEvidence,
)
from .calls import call_summary, result_line
from .state_text import canonical_view, state_summary

__all__ = [
    "transcript_item",
    "transcript",
    "usage_requests",
    "usage_totals",
    "evidence",
    "activity",
    "state_summary",
    "request_costs",
    "context_breakdown",
    "cache_epochs",
    "session_view",
    "runs",
    "run_status",
    "commands",
    "CACHE_BREAK_TOLERANCE",
]


def transcript_item(ev: Any) -> dict[str, Any] | None:
    """The transcript item of one stored event, or ``None`` when the event is not conversation.

    Shape: ``{"seq": int, "role": "user"|"assistant"|"tool"|"system"|"compaction", "text": str}`` plus, for an
    assistant, ``tool_calls`` (``[{"id", "name", "summary"}]``, ``summary``: the call's command or path,
    :func:`latch.host.calls.call_summary`), ``reasoning_reported`` (bool) and ``model``; for a tool result
    ``call_id``, ``name``, ``is_error`` and ``line`` (the result in one line, :func:`latch.host.calls.result_line`);
    for a system note ``subtype``. Text is returned as stored
    (rendering it inertly is the caller's job)."""
    e = ev.event
    base: dict[str, Any] = {"seq": ev.seq}
    if isinstance(e, UserMessage):
        return {**base, "role": "user", "text": e.text, "is_meta": e.is_meta}
    if isinstance(e, AssistantMessage):
        return {
            **base,
            "role": "assistant",
            "text": e.text,
            "model": e.model,
            "reasoning_reported": bool(e.reasoning_reported),
            "tool_calls": [{"id": c.id, "name": c.name, "summary": call_summary(c)} for c in e.tool_calls],
        }
    if isinstance(e, ToolResult):
        return {
            **base,
            "role": "tool",
            "text": e.content,
            "call_id": e.call_id,
            "name": e.name,
            "is_error": bool(e.is_error),
            "line": result_line(e.content, is_error=bool(e.is_error), missing=bool(e.missing)),
        }
    if isinstance(e, SystemNote):
        return {**base, "role": "system", "text": e.text, "subtype": e.subtype}
    if isinstance(e, CompactionMarker):
        return {
            **base,
            "role": "compaction",
            "text": e.summary,
            "pre_tokens": e.pre_tokens,
            "post_tokens": e.post_tokens,
        }
    return None


def transcript(events: Iterable[Any]) -> list[dict[str, Any]]:
    """The transcript items of ``events`` in order (see :func:`transcript_item`)."""
    return [item for item in map(transcript_item, events) if item is not None]


def usage_requests(events: Iterable[Any]) -> list[dict[str, Any]]:
    """One entry per ``Usage`` event (one model request), in order: ``{"seq", "request_id", "model",
    "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "prompt_tokens"}``, tokens as
    the provider reported them (``None`` where unknown); ``prompt_tokens`` is the request's context size
    (uncached input + cache read + cache write, ``None`` when input is unknown)."""
    out = []
    for ev in events:
        e = ev.event
        if isinstance(e, Usage):
            out.append(
                {
                    "seq": ev.seq,
                    "request_id": e.request_id,
                    "model": e.model,
                    "input_tokens": e.input_tokens,
                    "cache_read_tokens": e.cache_read_tokens,
                    "cache_write_tokens": e.cache_write_tokens,
                    "output_tokens": e.output_tokens,
                    "prompt_tokens": e.prompt_tokens,
                }
            )
    return out


_TOKEN_FIELDS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


def usage_totals(events: Iterable[Any]) -> dict[str, Any]:
    """Totals over the ``Usage`` events: ``{"requests": int, "input_tokens", "cache_read_tokens",
    "cache_write_tokens", "output_tokens"}``; a total is ``None`` when no request reported that category
    (unknown is not 0), else the sum of the known values. ``max_prompt_tokens`` is the largest request's
    context size (``None`` without one)."""
    reqs = usage_requests(events)
    totals: dict[str, Any] = {"requests": len(reqs)}
    for f in _TOKEN_FIELDS:
        known = [r[f] for r in reqs if r[f] is not None]
        totals[f] = sum(known) if known else None
    prompts = [r["prompt_tokens"] for r in reqs if r["prompt_tokens"] is not None]
    totals["max_prompt_tokens"] = max(prompts) if prompts else None
    return totals


def evidence(events: Iterable[Any]) -> list[dict[str, Any]]:
    """The recorded validation runs in order: ``{"seq", "command", "status", "requirements", "exit_code",
    "summary"}``."""
    return [
        {
            "seq": ev.seq,
            "command": ev.event.command,
            "status": ev.event.status,
            "requirements": list(ev.event.requirements),
            "exit_code": ev.event.exit_code,
            "summary": ev.event.summary,
        }
        for ev in events
        if isinstance(ev.event, ValidationEvidence)
    ]


def activity(events: Iterable[Any], *, live: bool) -> dict[str, Any]:
    """Presentation activity of a session: ``{"reasoning_reported": bool, "tools": [{"call_id", "name",
    "seq", "status"}], "running": int, "interrupted": int}``.

    ``reasoning_reported`` is whether the latest assistant message reported reasoning (never its text).
    ``tools`` lists every ``ToolStarted`` with no ``ToolResult`` of the same ``call_id`` after it: its
    ``status`` is ``"running"`` when ``live`` (the caller knows the run is still executing) and
    ``"interrupted"`` otherwise -- an unfinished historical phase is never shown as completed."""
    reasoning = False
    open_calls: dict[str, dict[str, Any]] = {}
    for ev in events:
        e = ev.event
        if isinstance(e, AssistantMessage):
            reasoning = bool(e.reasoning_reported)
        elif isinstance(e, ToolStarted):
            open_calls[e.call_id] = {"call_id": e.call_id, "name": e.name, "seq": ev.seq}
        elif isinstance(e, ToolResult):
            open_calls.pop(e.call_id, None)
    status = "running" if live else "interrupted"
    tools = [{**t, "status": status} for t in open_calls.values()]
    return {
        "reasoning_reported": reasoning,
        "tools": tools,
        "running": len(tools) if live else 0,
        "interrupted": 0 if live else len(tools),
    }


def request_costs(events: Iterable[Any]) -> dict[str, Any]:
    """Dollar cost of every ``Usage`` event, priced by :func:`latch.accounting.pricing.price_usage` at the event's
    timestamp: ``{"requests": [{"seq", "model", "usd", "cost"}], "totals": CostTotals.as_dict()}`` where
    ``cost`` is :func:`~latch.accounting.pricing.cost_dict` (``None`` and ``usd`` ``None`` when unpriced: an unknown
    model or unknown input/output tokens)."""
    rows, costs = [], []
    for ev in events:
        if isinstance(ev.event, Usage):
            c = price_usage(ev.event, at=parse_timestamp(ev.ts))
            costs.append(c)
            d = cost_dict(c)
            rows.append({"seq": ev.seq, "model": ev.event.model, "usd": d["usd"] if d else None, "cost": d})
    return {"requests": rows, "totals": total(costs).as_dict()}


_ROLES = ("user", "assistant", "tool", "system")


def context_breakdown(events: Iterable[Any]) -> list[dict[str, Any]]:
    """What filled the context at each model request (one entry per ``Usage`` event, in order):
    ``{"request": n (1-based), "seq", "prompt_tokens", "cache_read_tokens", "cache_write_tokens",
    "uncached_tokens", "output_tokens", "chars": {"user", "assistant", "tool", "system"}, "items": int,
    "since_compaction_seq"}``. Tokens are the provider's (``None`` where unknown); ``chars`` counts the
    transcript characters of each role before the request since the last compaction (what the harness could
    have sent: a breakdown of the conversation, not a recount of the prompt); ``items`` counts those items."""
    out: list[dict[str, Any]] = []
    chars = dict.fromkeys(_ROLES, 0)
    items = 0
    since: int | None = None
    for ev in events:
        e = ev.event
        if isinstance(e, CompactionMarker):
            chars, items, since = dict.fromkeys(_ROLES, 0), 0, ev.seq
            continue
        if isinstance(e, Usage):
            out.append(
                {
                    "request": len(out) + 1,
                    "seq": ev.seq,
                    "prompt_tokens": e.prompt_tokens,
                    "cache_read_tokens": e.cache_read_tokens,
                    "cache_write_tokens": e.cache_write_tokens,
                    "uncached_tokens": e.input_tokens,
                    "output_tokens": e.output_tokens,
                    "chars": dict(chars),
                    "items": items,
                    "since_compaction_seq": since,
                }
            )
            continue
        item = transcript_item(ev)
        if item is not None and item["role"] in chars:
            chars[item["role"]] += len(item["text"] or "")
            items += 1
    return out


CACHE_BREAK_TOLERANCE = 0.5
"""A request breaks the provider cache when it reads less than this share of the tokens the previous request
had cached (read + written): a prefix cache that held reads nearly all of it."""


def cache_epochs(events: Iterable[Any]) -> dict[str, Any]:
    """Provider cache epochs from the reported usage (spec: "Cache epochs and working memory", "Context
    metrics"): ``{"requests": [{"request", "seq", "epoch", "cache": "first"|"kept"|"broken"|"unknown",
    "reason"}], "epochs": [{"epoch", "first_request", "last_request", "start_seq", "end_seq", "requests",
    "cache_read_tokens", "cache_write_tokens"}], "breaks": [{"request", "seq", "epoch", "reason",
    "cache_read_tokens", "previous_cached_tokens"}]}``.

    The first request starts epoch 1. A later request with cache counts is ``broken`` (and starts the next
    epoch) when it reads less than :data:`CACHE_BREAK_TOLERANCE` of the previous request's cached tokens
    (read + write, when those were above 0); the ``reason`` is ``"compaction"`` when a compaction lies between
    the two requests, else ``"prefix changed"``. A request without cache counts is ``unknown`` (it neither
    starts nor breaks an epoch). Tokens as reported; seqs are event positions."""
    reqs: list[dict[str, Any]] = []
    epochs: list[dict[str, Any]] = []
    breaks: list[dict[str, Any]] = []
    prev_cached: int | None = None
    compacted = False
    for ev in events:
        e = ev.event
        if isinstance(e, CompactionMarker):
            compacted = True
            continue
        if not isinstance(e, Usage):
            continue
        n = len(reqs) + 1
        known = e.cache_read_tokens is not None or e.cache_write_tokens is not None
        read, write = e.cache_read_tokens or 0, e.cache_write_tokens or 0
        reason = None
        if not epochs:
            cache = "first"
        elif not known:
            cache = "unknown"
        elif prev_cached and read < prev_cached * CACHE_BREAK_TOLERANCE:
            cache, reason = "broken", "compaction" if compacted else "prefix changed"
        else:
            cache = "kept"
        if cache in ("first", "broken"):
            epochs.append(
                {
                    "epoch": len(epochs) + 1,
                    "first_request": n,
                    "last_request": n,
                    "start_seq": ev.seq,
                    "end_seq": ev.seq,
                    "requests": 0,
                    "cache_read_tokens": 0,
                    "cache_write_tokens": 0,
                }
            )
        ep = epochs[-1]
        ep.update(
            last_request=n,
            end_seq=ev.seq,
            requests=ep["requests"] + 1,
            cache_read_tokens=ep["cache_read_tokens"] + read,
            cache_write_tokens=ep["cache_write_tokens"] + write,
        )
        if cache == "broken":
            breaks.append(
                {
                    "request": n,
                    "seq": ev.seq,
                    "epoch": ep["epoch"],
                    "reason": reason,
                    "cache_read_tokens": read,
                    "previous_cached_tokens": prev_cached,
                }
            )
        reqs.append({"request": n, "seq": ev.seq, "epoch": ep["epoch"], "cache": cache, "reason": reason})
        if known:
            prev_cached, compacted = read + write, False
    return {"requests": reqs, "epochs": epochs, "breaks": breaks}


def session_view(events: Iterable[Any], state: Any, *, live: bool = False) -> dict[str, Any]:
    """Everything a UI shows of one session, from its stored events (in ``seq`` order) and its canonical state:
    ``{"last_seq", "live", "transcript", "evidence", "requests", "usage", "activity", "state", "costs",
    "context", "cache", "canonical"}`` (the reducers above; ``canonical``: the state and its evidence as ``latch
    state`` and ``latch evidence`` print them, :func:`latch.host.state_text.canonical_view`; ``last_seq`` 0
    without events). ``latch show --json``, the web
    snapshot and the TUI all build this, so they agree by construction (spec: "Browser observation and
    reconnect")."""
    evs = list(events)
    return {
        "last_seq": evs[-1].seq if evs else 0,
        "live": live,
        "transcript": transcript(evs),
        "evidence": evidence(evs),
        "requests": usage_requests(evs),
        "usage": usage_totals(evs),
        "activity": activity(evs, live=live),
        "state": state_summary(state),
        "costs": request_costs(evs),
        "context": context_breakdown(evs),
        "cache": cache_epochs(evs),
        "canonical": canonical_view(state),
    }


def runs(events: Iterable[Any]) -> list[dict[str, Any]]:
    """The ``latch run`` processes of a session, in start order: ``{"run_id", "seq", "pid", "host",
    "started_at", "process_start", "ended" (bool), "end_seq", "outcome", "ended_at", "exit_code", "detail"}``
    (the end fields ``None`` while no :class:`~latch.events.RunEnded` of that run exists)."""
    out: dict[str, dict[str, Any]] = {}
    for ev in events:
        e = ev.event
        if isinstance(e, RunStarted):
            out[e.run_id] = {
                "run_id": e.run_id,
                "seq": ev.seq,
                "pid": e.pid,
                "host": e.host,
                "started_at": e.started_at,
                "process_start": e.process_start,
                "ended": False,
                "end_seq": None,
                "outcome": None,
                "ended_at": None,
                "exit_code": None,
                "detail": None,
            }
        elif isinstance(e, RunEnded) and e.run_id in out:
            out[e.run_id].update(
                ended=True,
                end_seq=ev.seq,
                outcome=e.outcome,
                ended_at=e.ended_at,
                exit_code=e.exit_code,
                detail=e.detail,
            )
    return list(out.values())


def run_status(events: Iterable[Any], *, alive: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any]:
    """The phase of a session's latest run: ``{"phase": None|"running"|"ended"|"interrupted", "run": the
    latest :func:`runs` entry or None, "runs": int}``. ``ended``: its :class:`~latch.events.RunEnded` exists
    (``run["outcome"]`` says how); ``running``: no end and ``alive(run)`` (the caller's check of its process);
    ``interrupted``: no end and the process is gone (a killed run: never live, never completed). ``None``
    when no run was recorded (an imported session)."""
    all_runs = runs(events)
    if not all_runs:
        return {"phase": None, "run": None, "runs": 0}
    last = all_runs[-1]
    phase = "ended" if last["ended"] else "running" if alive(last) else "interrupted"
    return {"phase": phase, "run": last, "runs": len(all_runs)}


def commands(events: Iterable[Any]) -> list[dict[str, Any]]:
    """The commands sent to the session's runs, in order: ``{"id", "command": "steer"|"stop"|"compact",
    "seq", "status", "applied_seq", "run_id", "text"}``. A steer (a :class:`~latch.events.SteeringQueued`) is
    ``queued`` until its :class:`~latch.events.SteeringDelivered`, then ``delivered``; a stop or compact is
    ``queued`` until its :class:`~latch.events.RunCommandApplied`, then that event's result (``applied`` or
    ``moot``). ``text`` is the steering text (``None`` for the others)."""
    out: dict[str, dict[str, Any]] = {}
    for ev in events:
        e = ev.event
        if isinstance(e, SteeringQueued):
            out[e.message_id] = {
                "id": e.message_id,
                "command": "steer",
                "seq": ev.seq,
                "status": "queued",
                "applied_seq": None,
                "run_id": None,
                "text": e.text,
            }
        elif isinstance(e, RunCommandQueued):
            out[e.command_id] = {
                "id": e.command_id,
                "command": e.command,
                "seq": ev.seq,
                "status": "queued",
                "applied_seq": None,
                "run_id": None,
                "text": None,
            }
        elif isinstance(e, SteeringDelivered) and e.message_id in out:
            out[e.message_id].update(status="delivered", applied_seq=ev.seq)
        elif isinstance(e, RunCommandApplied) and e.command_id in out:
            out[e.command_id].update(status=e.result, applied_seq=ev.seq, run_id=e.run_id)
    return list(out.values())
