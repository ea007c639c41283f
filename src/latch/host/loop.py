"""The one request loop: for a session and an engine, per model request, the view and what a host checks.

``latch replay``, ``latch context``, ``latch bench`` and ``latch stress`` build their engine with
:func:`build_engine` and materialize through :class:`RequestLoop`; no other recount, common-prefix or
request-listing code exists. The agent runtime is meant to drive the same loop.

Per request (:meth:`RequestLoop.run`) the loop:

* feeds the session's new events (``seq <= until_seq``) to one :class:`~latch.engine.units.UnitBuilder`
  (the conversation units, and their tokens: ``history_tokens``, the whole raw conversation so far);
* asks the engine for the view (a :class:`~latch.port.ContextOverflow` is a refusal, recorded, never an
  over-budget view);
* recounts the provider-visible request with the host's estimator, one rule for the system prompt
  (:meth:`~latch.engine.units.TokenCounter.system`: its text plus one message overhead, for every
  engine), the tool schemas and every message;
* checks it (spec: "Bounded materialization", "Cache epochs"): the reported total and the recount
  within ``window - reserve``; no orphaned or reordered tool call/result and no split unit
  (:func:`~latch.engine.units.view_violations`); within one cache epoch, every request's canonical
  lines start with the previous sent request's lines (append-only);
* checks that the latest user instruction (:func:`latch.kernel.derive.instruction_text`, ``seq <= until_seq``)
  is in the view: its original message (same ``seq``), or its first :data:`INSTRUCTION_PROBE_CHARS`
  characters (whitespace collapsed) in some message's text, e.g. the canonical state's
  ``Latest user instruction`` line;
* measures the common prefix with the previous request that was actually sent (a refused request
  is not sent, so the cache still holds the one before it), in tokens of whole leading lines.

Units: tokens everywhere; ``seconds`` is wall time of ``materialize`` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field, replace
from typing import Any

from .. import plugins
from ..engine.units import TokenCounter, UnitBuilder, UnitSpans, header_lines, message_line, view_violations
from ..events import AssistantMessage, Usage, UserMessage
from ..kernel.derive import instruction_text
from ..port import ContextBudget, ContextOverflow, ContextRequest, ContextView, EngineProfile, SessionContext
from ..records import dataclass
from ..store import EventLog, EventStore
from .sealed import seal_reader, seal_token_counts, seal_writer
from .session import (
    OverlayKernelWriter,
    OverlayTokenCounts,
    ReplayKernelWriter,
    StoreKernelWriter,
    StoreSessionReader,
    StoreTokenCounts,
)

__all__ = [
    "INSTRUCTION_PROBE_CHARS",
    "instruction_present",
    "collapse_whitespace",
    "HostError",
    "EngineSetup",
    "ModelRequest",
    "RequestResult",
    "RequestLoop",
    "build_engine",
    "model_requests",
    "transcript_model",
    "estimator_name",
]


INSTRUCTION_PROBE_CHARS = 200
"""How many leading characters of the latest user instruction must appear in a view that has not kept its
original message."""


def collapse_whitespace(text: str) -> str:
    """``text`` with every run of whitespace made one space and no leading or trailing whitespace."""
    return " ".join(text.split())


def instruction_present(
    messages: Sequence[Any], seq: int, text: str, collapsed: Callable[[Any], str] | None = None
) -> bool:
    """Whether the instruction of event ``seq`` (``text`` as :func:`~latch.kernel.derive.instruction_text`
    gives it) is in ``messages``: the message of that ``seq``, or the first :data:`INSTRUCTION_PROBE_CHARS`
    characters of ``text`` (without a trailing ``…``) in some message's whitespace-collapsed content
    (``collapsed(message)``, default :func:`collapse_whitespace` of its ``content``: a caller checking many
    views of shared messages passes a cached one). O(size of the view)."""
    if any(getattr(m, "seq", None) == seq for m in messages):
        return True
    probe = text.rstrip("…")[:INSTRUCTION_PROBE_CHARS]
    collapse = collapsed or (lambda m: collapse_whitespace(m.content))
    return any(probe in collapse(m) for m in messages if probe[:1] in m.content)


class HostError(ValueError):
    """A host choice cannot be honoured: an unknown engine or estimator (one line, naming it)."""


@dataclass(frozen=True)
class ModelRequest:
    """One model request of a transcript: the ``number``-th assistant message (1-based) at ``seq``; the
    view is materialized as of ``until_seq`` (the event just before it); ``usage`` is the provider's
    report for that request when the transcript has one; ``ts`` the assistant message's stored timestamp
    (ISO 8601, or ``None``) and ``model`` the model that answered (the usage's, else the message's, else
    ``None``)."""

    number: int
    seq: int
    until_seq: int
    usage: Usage | None = None
    ts: str | None = None
    model: str | None = None


def model_requests(events: Iterable[Any]) -> list[ModelRequest]:
    """Every model request of a session's stored events (in ``seq`` order): one per ``AssistantMessage``,
    with the first ``Usage`` that follows it before the next assistant message."""
    out: list[ModelRequest] = []
    prev_seq = 0
    for s in events:
        if isinstance(s.event, AssistantMessage):
            out.append(
                ModelRequest(len(out) + 1, s.seq, prev_seq, ts=getattr(s, "ts", None), model=s.event.model or None)
            )
        elif isinstance(s.event, Usage) and out and out[-1].usage is None:
            last = out[-1]
            out[-1] = ModelRequest(last.number, last.seq, last.until_seq, s.event, last.ts, s.event.model or last.model)
        prev_seq = s.seq
    return out


def transcript_model(events: Iterable[Any]) -> str | None:
    """The first model id an event of the session names, else ``None``."""
    for s in events:
        m = getattr(s.event, "model", None)
        if isinstance(m, str) and m:
            return m
    return None


def estimator_name(estimator: Any) -> str:
    """The name a report shows for ``estimator``: its ``name``, else its class's ``PLUGIN_NAME`` or name."""
    cls = type(estimator)
    return getattr(estimator, "name", None) or getattr(cls, "PLUGIN_NAME", None) or cls.__name__


@dataclass
class EngineSetup:
    """An engine built for one session, with the choices the host made once: ``engine_name`` (the plugin),
    ``estimator`` (instance) and its ``counter``, ``model``, ``config`` (Latch's configuration, also in
    ``EngineProfile.config``), the kernel-record ``writer``, ``hysteretic`` (held to the rotation bound) and
    ``keeps_instruction`` (held to "the latest user instruction is in every view": the engine's class sets
    ``KEEPS_LATEST_INSTRUCTION = True``, as ``continuity`` does; baselines that drop old messages do not).
    ``token_counts`` is the session's durable exact-count cache, shared by the engine and the recount, when
    the estimator is exact (:attr:`~latch.engine.units.TokenCounter.exact`), else ``None``."""

    engine_name: str
    engine: Any
    estimator: Any
    counter: TokenCounter
    model: str | None
    config: dict[str, Any]
    writer: StoreKernelWriter
    hysteretic: bool
    token_counts: StoreTokenCounts | None = None
    keeps_instruction: bool = False

    @property
    def estimator_name(self) -> str:
        return estimator_name(self.estimator)


def build_engine(
    store: EventLog,
    session_id: str,
    *,
    stream: str | Callable[[str], str],
    engine: str | None = None,
    model: str | None = None,
    estimator: str | None = None,
    config: Mapping[str, Any] | None = None,
    scratch: bool = False,
    overlay: bool = False,
    build: Callable[[EngineProfile], Any] | None = None,
    parent_session_id: str | None = None,
) -> EngineSetup:
    """Build the session's engine through the plugin host, resolving every choice once.

    ``engine``: a registered engine plugin name (``None``: ``[engine] name`` of ``config``, else
    ``continuity``); ``estimator``: a registered estimator ``PLUGIN_NAME`` forced by the user (``None``:
    the ``latch_select_estimator`` hook's choice for ``model``); ``model`` ``None`` means the model the
    session's events name. Kernel records go to ``stream`` (or ``stream(engine name)``): with ``scratch``, a
    run of the store's replay scratch database (:class:`~latch.host.session.ReplayKernelWriter`; a replay);
    with ``overlay``, an in-memory overlay over the stream's records in the store
    (:class:`~latch.host.session.OverlayKernelWriter`, and exact counts kept in memory:
    :class:`~latch.host.session.OverlayTokenCounts`): the engine sees the stream as it is and writes nothing
    (a read-only report); else the store's own kernel records. ``scratch`` and ``overlay`` together, or
    ``scratch`` on a fenced store (a replay never writes for a lease), are a ``ValueError``. Raises :class:`HostError` for an unknown
    engine or estimator (there is no fallback to another one). With an exact estimator the engine's profile
    carries the session's :class:`~latch.host.session.StoreTokenCounts` (``EngineSetup.token_counts``).
    ``estimator`` may also be an estimator instance (used as is). ``build`` (an agent's supervisor: the root
    factory or the child policy) builds the engine from its profile instead of the ``engine`` plugin, whose
    name then comes from the built engine's class (``PLUGIN_NAME``); ``parent_session_id`` goes into the
    profile (a child session).
    """
    cfg = dict(config or {})
    try:
        name = plugins.engine_name(engine, cfg) if build is None else ""
        factory = plugins.get_engine_factory(name) if build is None else build
        if model is None:
            model = transcript_model(store.events(session_id, kinds=["assistant_message"]))
        chosen = (
            plugins.select_estimator(model)
            if estimator is None
            else plugins.get_estimator(estimator)
            if isinstance(estimator, str)
            else estimator
        )
    except plugins.PluginError as exc:
        raise HostError(str(exc)) from None
    if scratch and overlay:
        raise ValueError("build_engine: scratch and overlay exclude each other")
    writer: StoreKernelWriter
    stream_name = stream(name) if callable(stream) else stream
    if scratch:
        if not isinstance(store, EventStore):
            raise ValueError("build_engine: a replay's scratch belongs to an EventStore, not a fenced store")
        writer = ReplayKernelWriter(store, session_id, stream_name)
    else:
        writer = (OverlayKernelWriter if overlay else StoreKernelWriter)(store, session_id, stream_name)
    counts_class = OverlayTokenCounts if overlay else StoreTokenCounts
    counts = counts_class(store, session_id) if TokenCounter(chosen).exact else None
    eng = factory(
        EngineProfile(
            session_id=session_id,
            model=model,
            reader=seal_reader(StoreSessionReader(store, session_id)),
            writer=seal_writer(writer),
            config=cfg,
            estimator=chosen,
            token_counts=seal_token_counts(counts),
            parent_session_id=parent_session_id,
        )
    )
    if build is not None:
        name = getattr(type(eng), "PLUGIN_NAME", None) or type(eng).__name__
    hysteretic = bool(getattr(eng, "HYSTERETIC_EPOCHS", name == plugins.DEFAULT_ENGINE))
    keeps = bool(getattr(eng, "KEEPS_LATEST_INSTRUCTION", name == plugins.DEFAULT_ENGINE))
    return EngineSetup(name, eng, chosen, TokenCounter(chosen, counts), model, cfg, writer, hysteretic, counts, keeps)


@dataclass
class RequestResult:
    """What the loop saw at one request.

    ``view`` is ``None`` when the engine refused (``overflow`` holds the one-line reason). ``events`` is the
    number of the session's events with ``seq <= until_seq``; ``history_tokens`` the whole conversation's
    units so far. ``line_tokens`` is aligned with ``[system, tools, *view.messages]`` (the recount, term by
    term); ``recounted_tokens`` their sum plus the loop's ``harness_tokens``. ``common_prefix_tokens`` / ``cacheability`` compare with the
    previous sent request (``cacheability`` is ``None`` for the first). ``rotated``: a new cache epoch;
    ``prefix_break``: same epoch but not an append-only extension. ``lines`` are the request's canonical
    lines (aligned with ``line_tokens``) and ``common_prefix_lines`` how many of them open the previous sent
    request too (0 for the first). The violation lists hold one line each, prefixed with ``where``.
    """

    until_seq: int | None
    request: ModelRequest | None
    view: ContextView | None
    overflow: str | None
    seconds: float
    events: int
    history_tokens: int
    recounted_tokens: int | None = None
    line_tokens: list[int] = field(default_factory=list)
    common_prefix_tokens: int = 0
    cacheability: float | None = None
    rotated: bool = False
    prefix_break: bool = False
    lines: list[bytes] = field(default_factory=list)
    common_prefix_lines: int = 0
    budget_violations: list[str] = field(default_factory=list)
    protocol_violations: list[str] = field(default_factory=list)
    epoch_violations: list[str] = field(default_factory=list)
    instruction_violations: list[str] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        """Every violation line every engine is held to: over budget, protocol (orphans, order, split units),
        append-only breaks. ``instruction_violations`` (the latest user instruction missing) is apart: only an
        engine that keeps it (:attr:`EngineSetup.keeps_instruction`) is held to it."""
        return [*self.budget_violations, *self.protocol_violations, *self.epoch_violations]


class RequestLoop:
    """Materialize and check views of one session, request after request (see the module docstring).

    ``budget`` is the request budget (its ``hard_limit_tokens`` is the checked limit); ``system_prompt``,
    ``tools`` and ``session_context`` go into every request. ``harness_tokens`` (>= 0) is a fixed prompt overhead
    the request carries that the loop cannot send itself (a harness prompt the transcript does not record,
    inferred: :mod:`latch.host.harness`): the engine is asked for a view within ``window - harness_tokens``
    (``engine_budget``), and every view's ``tokens.harness_tokens`` is set to it, so the reported total, the
    recount (``recounted_tokens``) and the budget check count it; ``view.budget`` is ``budget``. Being a fixed
    prefix, it is part of the common prefix of every request after the first. Views must be asked for in non-decreasing
    ``until_seq`` order (a session is replayed forwards; the events appended meanwhile are read as they come).
    Counters over the run: ``requests``, ``rotations``, ``prefix_breaks``, ``overflows``, ``max_total_tokens``;
    ``latest_instruction`` is ``(seq, text)`` of the newest user instruction fed so far (``None``: none yet).
    """

    def __init__(
        self,
        store: EventLog,
        session_id: str,
        setup: EngineSetup,
        budget: ContextBudget,
        *,
        session_context: SessionContext | None = None,
        system_prompt: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        harness_tokens: int = 0,
    ):
        self.store, self.session_id, self.setup, self.budget = store, session_id, setup, budget
        self.hard = budget.hard_limit_tokens
        if harness_tokens < 0:
            raise ValueError(f"harness_tokens must be >= 0, got {harness_tokens}")
        self.harness_tokens = harness_tokens
        if session_context is None:
            session_context = SessionContext(workspace=store.session(session_id).workspace)
        self.session_context = session_context
        self.system_prompt, self.tools = system_prompt, tuple(tools)
        self.counter = setup.counter
        self._builder = UnitBuilder()
        # seq -> its conversation unit's seqs, over the session, for units of several events: a one-event unit is
        # never split and is named by its one seq, so a seq missing here reads the same to view_violations and
        # request_changes (and a session of 10^6 events keeps no entry for its plain messages); held as int arrays,
        # so the garbage collector has nothing per unit to traverse
        self.units = UnitSpans()
        self.history_tokens = 0
        self._fed_seq = 0
        self._events = 0
        self.latest_instruction: tuple[int, str] | None = None  # (seq, text) of the newest user instruction fed
        self._prev: tuple[int, list[bytes], list[int]] | None = None  # epoch, lines, line tokens of the last sent
        # id(message) -> (message, line, tokens) and (message, whitespace-collapsed content), for the messages of
        # the last view: the next view of its epoch shares them (it extends that view), and nothing older is kept
        # alive (a long run's rotated epochs would otherwise stay in memory through their messages and lines)
        self._seen: dict[int, tuple[Any, bytes, int]] = {}
        self._collapsed: dict[int, tuple[Any, str]] = {}
        self.requests = self.rotations = self.prefix_breaks = self.overflows = self.max_total_tokens = 0

    def set_budget(self, budget: ContextBudget) -> None:
        """Budget every later view with ``budget``: :attr:`budget` and the checked limit :attr:`hard` (its
        ``hard_limit_tokens``) change together. ``budget`` validated itself when it was made
        (:class:`~latch.port.ContextBudget`: a whole-token window above its reserve); anything else raises
        ``TypeError``."""
        if not isinstance(budget, ContextBudget):
            raise TypeError(f"RequestLoop.set_budget: a ContextBudget, got {type(budget).__name__}")
        self.budget, self.hard = budget, budget.hard_limit_tokens

    @property
    def engine_budget(self) -> ContextBudget:
        """The budget the engine is asked to fit: :attr:`budget` (as it is now: a host may replace it between
        requests) less ``harness_tokens`` of window (the window stays above the reserve)."""
        b, h = self.budget, self.harness_tokens
        if not h:
            return b
        return replace(b, context_window_tokens=max(b.reserve_tokens + 1, b.context_window_tokens - h))

    @property
    def fed_seq(self) -> int:
        """The newest seq read and segmented so far (0 before the first)."""
        return self._fed_seq

    def advance(self, until_seq: int) -> None:
        """Read and segment the session's events through ``until_seq`` now: what :meth:`run` does first for a
        view as of a later seq, so a host can do it while it waits for the session to grow (the view, its
        counters and its checks come out the same). ``until_seq`` must not pass the ``until_seq`` of a later
        :meth:`run` (views are asked for in non-decreasing order); at or before :attr:`fed_seq` it does nothing."""
        self._feed(until_seq)

    def _feed(self, until: int | None) -> None:
        if until is not None and until <= self._fed_seq:
            return
        feed, prices, add = self._builder.feed, self.counter.prices, self.units.add
        for ev in self.store.events(self.session_id, after_seq=self._fed_seq, until_seq=until):
            for u in feed(ev):
                self.history_tokens += sum(prices(u.messages))  # u.cost(counter), with nothing kept on the unit
                if len(u.seqs) > 1:  # the unit's seqs only (several): its text is not kept for the whole session
                    add(u)
            if isinstance(ev.event, UserMessage):  # instruction_text answers None for every other event
                found = instruction_text(ev.event)
                if found is not None:
                    self.latest_instruction = (ev.seq, found[0])
            self._fed_seq = ev.seq
            self._events += 1

    def _line(self, m: Any) -> tuple[bytes, int]:
        got = self._seen.get(id(m))
        if got is None or got[0] is not m:  # views of one epoch share message objects: line and tokens once
            got = self._seen[id(m)] = (m, message_line(m), self.counter.message(m))
        return got[1], got[2]

    def _collapse(self, m: Any) -> str:
        got = self._collapsed.get(id(m))
        if got is None or got[0] is not m:  # like _line: a message shared by many views is collapsed once
            got = self._collapsed[id(m)] = (m, collapse_whitespace(m.content))
        return got[1]

    def run(
        self, until_seq: int | None = None, *, request: ModelRequest | None = None, where: str | None = None
    ) -> RequestResult:
        """The view as of ``until_seq`` (``None``: the whole session), checked; see :class:`RequestResult`.
        ``where`` names the request in violation lines (default ``request N (seq S)`` or ``view at seq S``)."""
        self._feed(until_seq)
        self.requests += 1
        if where is None:
            where = (
                f"request {request.number} (seq {request.seq})"
                if request is not None
                else f"view at seq {until_seq}"
                if until_seq is not None
                else "view"
            )
        t = time.perf_counter()
        try:
            view = self.setup.engine.materialize(
                ContextRequest(
                    session_id=self.session_id,
                    system_prompt=self.system_prompt,
                    session_context=self.session_context,
                    tools=self.tools,
                    until_seq=until_seq,
                    budget=self.engine_budget,
                )
            )
        except ContextOverflow as exc:
            self.overflows += 1
            if self.setup.token_counts is not None:
                self.setup.token_counts.flush()
            why = str(exc)
            if self.harness_tokens:  # the engine saw the hard limit less the harness: say what took the rest
                why += (
                    f"; the harness's {self.harness_tokens:,} inferred tokens leave the engine "
                    f"{self.engine_budget.hard_limit_tokens:,} of the {self.budget.hard_limit_tokens:,}-token "
                    f"hard limit"
                )
            return RequestResult(
                until_seq, request, None, why, time.perf_counter() - t, self._events, self.history_tokens
            )
        seconds = time.perf_counter() - t
        harness = self.harness_tokens
        if harness:
            view = replace(view, tokens=replace(view.tokens, harness_tokens=harness), budget=self.budget)
        lines = header_lines(view.system, view.tools)
        line_tokens = [self.counter.system(view.system), self.counter.tools(view.tools)]
        for m in view.messages:
            line, tok = self._line(m)
            lines.append(line)
            line_tokens.append(tok)
        recount = sum(line_tokens) + harness
        total = view.tokens.total_tokens
        self.max_total_tokens = max(self.max_total_tokens, total)
        res = RequestResult(
            until_seq,
            request,
            view,
            None,
            seconds,
            self._events,
            self.history_tokens,
            recount,
            line_tokens,
            lines=lines,
        )
        if total > self.hard or recount > self.hard:
            res.budget_violations.append(f"{where}: {max(total, recount)} tokens over the hard limit {self.hard}")
        res.protocol_violations.extend(f"{where}: {v}" for v in view_violations(view.messages, self.units))
        latest = self.latest_instruction
        if latest is not None and not instruction_present(view.messages, *latest, collapsed=self._collapse):
            res.instruction_violations.append(
                f"{where}: the latest user instruction (seq {latest[0]}) is not in the view"
            )
        shown = {id(m) for m in view.messages}  # keep what the next view can share: this view's messages
        self._seen = {k: v for k, v in self._seen.items() if k in shown}
        self._collapsed = {k: v for k, v in self._collapsed.items() if k in shown}
        prev = self._prev
        if prev is not None:
            p_epoch, p_lines, p_tokens = prev
            n = 0
            while n < min(len(lines), len(p_lines)) and lines[n] == p_lines[n]:
                n += 1
            res.common_prefix_lines = n
            res.common_prefix_tokens = sum(line_tokens[:n]) + (harness if n else 0)
            res.cacheability = res.common_prefix_tokens / recount if recount else 0.0
            if view.epoch != p_epoch:
                res.rotated = True
                self.rotations += 1
            elif n < len(p_lines):
                res.prefix_break = True
                self.prefix_breaks += 1
                res.epoch_violations.append(
                    f"{where}: not an append-only extension of the previous request in epoch {view.epoch}"
                )
        self._prev = (view.epoch, lines, line_tokens)
        if self.setup.token_counts is not None:
            self.setup.token_counts.flush()  # counts of the events first seen in this request become durable
        return res

    def replay(
        self,
        requests: Sequence[ModelRequest],
        progress: Callable[[int, int], None] | None = None,
        harness_changes: Sequence[Any] = (),
    ) -> Iterator[RequestResult]:
        """:meth:`run` for each of ``requests`` in order; ``progress(done, total)`` after each.
        ``harness_changes`` (:class:`latch.host.harness.HarnessChange`, in request order): from each one's
        ``request`` number on, the requests carry its ``system``, ``tools`` and ``session_context`` (a resumed
        ``latch run`` that sent another prompt; the engine sees a new header)."""
        pending = sorted(harness_changes, key=lambda c: c.request)
        for k, r in enumerate(requests, 1):
            while pending and pending[0].request <= r.number:
                change = pending.pop(0)
                self.system_prompt, self.tools = change.system, tuple(change.tools)
                self.session_context = change.session_context
            yield self.run(r.until_seq, request=r)
            if progress:
                progress(k, len(requests))
