"""The harness's own prompt and tools: what every request of a session carried besides the conversation.

A coding agent's harness sends its system prompt, developer/permission instructions and tool schemas
with every model request. Where the transcript records them the importers store them as
:class:`~latch.events.SystemNote` events (subtypes ``system_prompt``, ``developer``, ``demonstration``; the tool
schemas as one note of subtype ``tools`` whose text is their canonical JSON array), and
:func:`recorded_harness` gathers them, so a replay sends them as the request's system field and tools, priced
and budgeted like everything else. Only the notes before the session's first model request count: they are
the fixed prefix; a developer message written later (a mode switch) is part of the conversation, not of the
harness.

A session run by Latch's own agent (``latch run``) records its harness as one
:class:`~latch.events.HarnessPrompt` event (system prompt, tool schemas and session context: workspace, mode,
repository instructions), and :func:`agent_harness` reads it back, so a replay or ``latch view`` of such a
session sends the same system field, tools and first (session context) message the provider got.

Where the transcript records none (Claude Code, Gemini CLI), :func:`infer_harness_tokens` infers the fixed
overhead from the provider's reported prompt sizes of the first requests: for each of the first
:data:`INFER_REQUESTS` requests with usage, ``provider prompt - (the estimate of the whole conversation so far +
the session context message)``, and takes the median (robust to one odd request, e.g. a first request that
carried extra context). The host counts it as ``ComponentTokens.harness_tokens``, marked inferred. A transcript
that records its system prompt but not the schemas of the tools it called (newer Codex rollouts: about 14-16k
tokens of tools) gets the rest inferred the same way, beyond the recorded prompt.

Units: tokens (the host's estimator).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine.units import TokenCounter, UnitBuilder, render_session_context
from ..events import AssistantMessage, HarnessPrompt, JSONNestingError, SystemNote, json_loads
from ..port import SessionContext
from ..records import dataclass

__all__ = [
    "HARNESS_SUBTYPES",
    "TOOLS_SUBTYPE",
    "INFER_REQUESTS",
    "MIN_REQUESTS",
    "ONE_REQUEST_FORMATS",
    "Harness",
    "HarnessChange",
    "recorded_harness",
    "agent_harness",
    "agent_harness_changes",
    "prompt_context",
    "infer_harness_tokens",
    "session_harness",
]

HARNESS_SUBTYPES = ("system_prompt", "developer", "demonstration")
"""``SystemNote`` subtypes that make the harness's system prompt (in this order of appearance, joined)."""
TOOLS_SUBTYPE = "tools"
"""``SystemNote`` subtype of the harness's tool schemas (text: a canonical JSON array of objects)."""
INFER_REQUESTS = 5
"""How many of the first requests with provider usage the inference uses."""
MIN_REQUESTS = 2
"""Fewer requests with usage than this infer nothing: one request's residual is not a fixed overhead (a Claude
Code compaction thread's only request carries the whole parent conversation, which its file does not hold),
but for the formats of :data:`ONE_REQUEST_FORMATS`."""
ONE_REQUEST_FORMATS = frozenset({"aider"})
"""Formats whose every request's reported prompt is the harness's own prompt plus the transcript's conversation, so
one request's residual is the overhead: Aider's ``Tokens: N sent`` counts its system prompt, repository map and
the run's chat, and each aider run is its own session (a run with one request: 1.6-1.8k sent against a 300-token
conversation)."""


@dataclass(frozen=True)
class HarnessChange:
    """A ``latch run`` session's harness prompt from model request ``request`` (1-based) on: a resumed run that
    sent another ``system`` prompt, ``tools`` or ``session_context`` than the requests before it."""

    request: int
    system: str
    tools: tuple[Mapping[str, Any], ...]
    session_context: SessionContext


@dataclass(frozen=True)
class Harness:
    """A session's harness prompt.

    ``system``: the recorded system prompt and instructions (``""``: none recorded), ``tools``: the recorded
    tool schemas (JSON-ready dicts), ``notes``: how many notes made ``system``. ``inferred_tokens``: the fixed
    overhead inferred from provider usage when nothing is recorded (0: none inferred), from the residuals
    ``residuals`` (tokens, one per request used, in request order) of requests ``inferred_from`` (numbers).
    ``session_context``: the recorded session context of a ``latch run`` session (``None``: not recorded; the
    replay then uses the session's workspace alone); ``changes``: the prompts a resumed ``latch run`` sent from a
    later request on (:class:`HarnessChange`, in request order; a replay sends each from its request on).
    """

    system: str = ""
    tools: tuple[Mapping[str, Any], ...] = ()
    notes: int = 0
    inferred_tokens: int = 0
    inferred_from: tuple[int, ...] = ()
    residuals: tuple[int, ...] = ()
    session_context: SessionContext | None = None
    changes: tuple[HarnessChange, ...] = ()

    @property
    def source(self) -> str:
        """``"recorded"`` (system or tools from the transcript), ``"recorded+inferred"`` (the system recorded, the
        rest of the overhead inferred), ``"inferred"`` or ``"none"``."""
        if self.system or self.tools:
            return "recorded+inferred" if self.inferred_from else "recorded"
        return "inferred" if self.inferred_from else "none"


def recorded_harness(events: Iterable[Any]) -> tuple[str, tuple[Mapping[str, Any], ...], int]:
    """``(system, tools, notes)`` recorded in a session's stored events (``seq`` order).

    ``system`` joins (blank line between) the texts of the :data:`HARNESS_SUBTYPES` notes that come before the
    first :class:`~latch.events.AssistantMessage`; ``tools`` is the first :data:`TOOLS_SUBTYPE` note's array
    (anywhere in the session: importers append it after the conversation); a tools note that is not a JSON
    array of objects is ignored (it was not written by an importer). ``notes`` counts the joined notes.
    """
    parts: list[str] = []
    tools: tuple[Mapping[str, Any], ...] | None = None
    started = False
    for s in events:
        ev = s.event
        if isinstance(ev, AssistantMessage):
            started = True
        elif isinstance(ev, SystemNote):
            if ev.subtype == TOOLS_SUBTYPE:
                if tools is None:
                    tools = _tools(ev.text)
            elif ev.subtype in HARNESS_SUBTYPES and not started and ev.text.strip():
                parts.append(ev.text)
    return "\n\n".join(parts), tools or (), len(parts)


def agent_harness(events: Iterable[Any]) -> HarnessPrompt | None:
    """The first :class:`~latch.events.HarnessPrompt` of a session's stored events (what ``latch run`` sent with
    its first request), or ``None`` when the session has none (it was imported). A resumed run that sent a
    different prompt recorded another one later: :func:`agent_harness_changes`."""
    for s in events:
        if isinstance(s.event, HarnessPrompt):
            return s.event
    return None


def agent_harness_changes(events: Iterable[Any]) -> tuple[tuple[int, HarnessPrompt], ...]:
    """``((request number, prompt), ...)``: every :class:`~latch.events.HarnessPrompt` of a ``latch run`` session
    after the first, with the model request (1-based) it was first sent with, in order. ``latch run`` records a
    prompt in the transaction of the first answer sent with it (a resumed run that sends another prompt records
    it with its first answer), so a prompt belongs to the request of the last ``AssistantMessage`` before it."""
    out: list[tuple[int, HarnessPrompt]] = []
    answers = 0
    first = True
    for s in events:
        if isinstance(s.event, AssistantMessage):
            answers += 1
        elif isinstance(s.event, HarnessPrompt):
            if not first and answers:
                out.append((answers, s.event))
            first = False
    return tuple(out)


def prompt_context(prompt: HarnessPrompt) -> SessionContext:
    """The session context a ``latch run`` request rendered with ``prompt`` (workspace, repository instructions,
    mode)."""
    return SessionContext(
        workspace=prompt.workspace, repository_instructions=prompt.repository_instructions, mode=prompt.mode
    )


def _tools(text: str) -> tuple[Mapping[str, Any], ...] | None:
    try:
        value = json_loads(text)
    except (ValueError, JSONNestingError):
        return None
    if isinstance(value, list) and all(isinstance(t, dict) for t in value):
        return tuple(value)
    return None


def infer_harness_tokens(
    events: Iterable[Any],
    requests: Sequence[Any],
    counter: TokenCounter,
    session_context: SessionContext,
    *,
    first: int = INFER_REQUESTS,
    known_tokens: int = 0,
    min_requests: int = MIN_REQUESTS,
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """``(tokens, request numbers used, residuals)``: the fixed prompt overhead the provider counted beyond the
    conversation, inferred from the first ``first`` of ``requests`` (:class:`~latch.host.loop.ModelRequest`,
    in order) whose usage reports a prompt size.

    For each such request the residual is ``usage.prompt_tokens - (tokens of every conversation unit with
    seq <= until_seq + the session context message + known_tokens)``, counted with ``counter`` (``known_tokens``: the
    recorded part of the harness, when some is); ``tokens`` is the median of
    the residuals, rounded, at least 0. ``events`` are the session's stored events in ``seq`` order (only
    those up to the last request used are read). ``(0, (), ())`` when fewer than ``min_requests`` (default
    :data:`MIN_REQUESTS`) requests report usage.
    """
    chosen = [r for r in requests if r.usage is not None and r.usage.prompt_tokens][: max(first, 0)]
    if len(chosen) < max(1, min_requests):
        return 0, (), ()
    base = counter.message(render_session_context(session_context)) + known_tokens
    builder = UnitBuilder()
    history = 0
    residuals: list[int] = []
    pending = iter(chosen)
    r = next(pending)
    for s in events:
        while r is not None and s.seq > r.until_seq:
            residuals.append(r.usage.prompt_tokens - history - base)
            r = next(pending, None)
        if r is None:
            break
        for u in builder.feed(s):
            history += u.cost(counter)
    while r is not None:  # requests at the end of the events
        residuals.append(r.usage.prompt_tokens - history - base)
        r = next(pending, None)
    return max(0, round(statistics.median(residuals))), tuple(q.number for q in chosen), tuple(residuals)


def session_harness(
    events: Sequence[Any],
    requests: Sequence[Any],
    counter: TokenCounter,
    session_context: SessionContext,
    format: str | None = None,
) -> Harness:
    """The :class:`Harness` of a session: the recorded prompt and tools (:func:`recorded_harness`) when the
    transcript has either, else the overhead inferred from provider usage (:func:`infer_harness_tokens`; from one
    request for a ``format`` of :data:`ONE_REQUEST_FORMATS`). A session run by ``latch run`` has its
    :func:`agent_harness`: its system prompt, tools and session context."""
    agent = agent_harness(events)
    if agent is not None:
        changes = tuple(
            HarnessChange(n, p.system_prompt, _tools(p.tools) or (), prompt_context(p))
            for n, p in agent_harness_changes(events)
        )
        return Harness(
            agent.system_prompt,
            _tools(agent.tools) or (),
            1 if agent.system_prompt else 0,
            session_context=prompt_context(agent),
            changes=changes,
        )
    system, tools, notes = recorded_harness(events)
    if tools:
        return Harness(system, tools, notes)
    if system and any(isinstance(s.event, AssistantMessage) and s.event.tool_calls for s in events):
        # the prompt is recorded, the schemas of the tools it called are not: infer what the provider counted
        # beyond the prompt
        tokens, used, residuals = infer_harness_tokens(
            events, requests, counter, session_context, known_tokens=counter.system(system)
        )
        return Harness(
            system,
            (),
            notes,
            inferred_tokens=tokens,
            inferred_from=used if tokens else (),
            residuals=residuals if tokens else (),
        )
    if system:
        return Harness(system, (), notes)
    tokens, used, residuals = infer_harness_tokens(
        events, requests, counter, session_context, min_requests=1 if format in ONE_REQUEST_FORMATS else MIN_REQUESTS
    )
    return Harness(inferred_tokens=tokens, inferred_from=used, residuals=residuals)
