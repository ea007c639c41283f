"""What the three baseline engines share: port plumbing, units, accounting and the budget check.

A baseline engine is built from an :class:`~latch.port.EngineProfile`. It reads the
session only through ``profile.reader`` and writes only ``manual_compact`` records through
``profile.writer``. Conversation units (a user message, an assistant message, or an assistant
tool-call turn with all of its results) come from :class:`latch.engine.units.UnitBuilder`, the
same segmentation the continuity engine uses, and are priced by the same
:class:`~latch.engine.units.TokenCounter`; a view therefore never splits a unit, never holds an
orphan call or result, and its ``tokens.total_tokens`` is exactly the sum a recount of its system
field, tools and messages gives.

Request layout (every baseline)::

    system:   request.system_prompt                                  (instructions_tokens)
    tools:    request.tools                                          (tools_tokens)
    messages: [session context]                                      (instructions_tokens)
              [extension]           when request.extension is set    (extension_tokens)
              [strategy-specific]   e.g. the summary message         (state_tokens)
              unit, unit, ...       the strategy's conversation      (recent_tokens)

The session context is :func:`latch.engine.units.render_session_context`, the same first message
every engine sends.

Cache epochs: the baselines rewrite their prefix (dropping, masking, summarizing), which breaks a
provider's prompt cache. They report it honestly: ``view.epoch`` counts up whenever a request's
canonical bytes (:func:`latch.engine.units.request_lines`) are not the previous request's plus a
tail, with ``metrics["rotation_reason"]`` saying why, so replay shows how often each engine
invalidates the cache. (Epochs are tracked in memory, per engine instance.)

Budget: everything above is at most ``budget.hard_limit_tokens`` (window - reserve). When even
the fixed part plus the newest whole unit cannot fit, ``materialize`` raises
:class:`~latch.port.ContextOverflow` with the breakdown: never an over-budget request.

Configuration: the profile's config is Latch's whole configuration; an engine reads its own
table ``[engines.<PLUGIN_NAME>]`` (e.g. ``[engines.observation-masking] keep_turns = 5``), and
the budget from ``[models.<name>]``/``[context]`` through :func:`latch.config.budget_for_model`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from latch import hotpaths
from latch.config import budget_for_model
from latch.port import (
    ComponentTokens,
    ContextBudget,
    ContextOverflow,
    ContextRequest,
    ContextView,
    EngineProfile,
    RecalledEvent,
    ViewMessage,
)
from latch.engine.units import (TokenCounter, Unit, UnitBuilder, header_lines, message_line, render_session_context,
                                resolve_estimator)

__all__ = ["BaselineEngine", "Selection", "MANUAL_COMPACT"]

RECALL_ROWS = 64
"""FTS rows :meth:`BaselineEngine.recall` looks at, newest first."""
MANUAL_COMPACT = "manual_compact"
"""Kind of the record ``manual_compact`` appends through the writer (payload: ``{"reason": str}``)."""


class Selection:
    """What a strategy returns: ``prefix`` messages (e.g. a summary, counted as state) and the kept ``units``.

    ``metrics`` is merged into the view's metrics.
    """

    __slots__ = ("prefix", "units", "metrics")

    def __init__(self, units: Sequence[Unit], prefix: Sequence[ViewMessage] = (),
                 metrics: Mapping[str, Any] | None = None):
        self.units = list(units)
        self.prefix = tuple(prefix)
        self.metrics = dict(metrics or {})


class BaselineEngine:
    """Base class: subclasses set ``PLUGIN_NAME``, ``DEFAULTS`` and implement :meth:`select`."""

    PLUGIN_NAME: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    DEFAULTS: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, profile: EngineProfile):
        self.profile = profile
        self._reader = profile.reader
        self._writer = profile.writer
        self._latch_config: Mapping[str, Any] = dict(profile.config or {})
        self._options = self._read_options(self._latch_config)
        self._counter = TokenCounter(resolve_estimator(profile.model, profile.estimator))
        self._reset_units()

    @classmethod
    def factory(cls, profile: EngineProfile) -> "BaselineEngine":
        """The :data:`~latch.port.ContextEngineFactory` of this engine."""
        return cls(profile)

    # ------------------------------------------------------------------ configuration
    def _read_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        table = ((config.get("engines") or {}).get(self.PLUGIN_NAME)) or {}
        if not isinstance(table, Mapping):
            raise ValueError(f"[engines.{self.PLUGIN_NAME}] must be a table, got {type(table).__name__}")
        unknown = sorted(set(table) - set(self.DEFAULTS))
        if unknown:
            raise ValueError(f"[engines.{self.PLUGIN_NAME}]: unknown option(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(self.DEFAULTS)) or 'none'}")
        options = {**self.DEFAULTS, **table}
        self._check_options(options)
        return options

    def _check_options(self, options: dict[str, Any]) -> None:
        """Validate option types (``ValueError`` naming the option); subclasses extend."""

    @staticmethod
    def _positive_int(options: Mapping[str, Any], key: str, where: str, *, allow_none: bool = False) -> None:
        value = options[key]
        if value is None and allow_none:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"[engines.{where}] {key} must be a positive integer, got {value!r}")

    @property
    def config(self) -> Mapping[str, Any]:
        """This engine's effective options (defaults merged with ``[engines.<PLUGIN_NAME>]``)."""
        return dict(self._options)

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Replace Latch's configuration (the engine re-reads its table and the model budget)."""
        options = self._read_options(config)
        self._latch_config = dict(config)
        self._options = options
        self._reset_units()

    def set_estimator(self, estimator: Any) -> None:
        """Price everything with ``estimator`` (a :class:`latch.estimators.Estimator`) from now on."""
        self._counter = TokenCounter(estimator)
        self._reset_units()

    def default_budget(self) -> ContextBudget:
        """The model's budget under the configuration (:func:`latch.config.budget_for_model`)."""
        return budget_for_model(self._latch_config, self.profile.model)

    # ------------------------------------------------------------------ units
    def _reset_units(self) -> None:
        self._builder = UnitBuilder()
        self._units: list[Unit] = []
        self._fed_seq = 0
        self._prev: tuple[int, int, int | None, list[bytes]] | None = None  # until, epoch, first seq, lines

    def units(self, until_seq: int) -> list[Unit]:
        """Every unit complete as of ``until_seq`` (incremental while requests move forward)."""
        if until_seq < self._fed_seq:
            self._reset_units()
        if until_seq > self._fed_seq:
            for stored in self._reader.events(after_seq=self._fed_seq, until_seq=until_seq):
                self._units.extend(self._builder.feed(stored))
            self._fed_seq = until_seq
        return self._units

    def cost(self, unit: Unit) -> int:
        return unit.cost(self._counter)

    def compact_boundary(self, until_seq: int) -> int:
        """The seq of the newest ``manual_compact`` at or before ``until_seq`` (0 when none)."""
        seqs = [at for _, _, at, _ in self._writer.records([MANUAL_COMPACT]) if at <= until_seq]
        return max(seqs, default=0)

    def fit_suffix(self, units: Sequence[Unit], available: int) -> int:
        """Index of the first unit of the largest suffix of whole ``units`` within ``available`` tokens.

        Returns ``len(units)`` when not even the newest unit fits (the caller decides: overflow).
        """
        if not units:
            return 0
        sums = [0]
        for u in units:
            sums.append(sums[-1] + self.cost(u))
        start = hotpaths.suffix_start(sums, available)
        return len(units) if sums[-1] - sums[start] > available else start

    # ------------------------------------------------------------------ the port
    def select(self, units: list[Unit], available: int, budget: ContextBudget,
               compacted: Sequence[Unit] = ()) -> Selection:
        """Choose the conversation within ``available`` tokens (prefix + units); subclasses implement.

        ``units`` are the units after the last manual compaction, ``compacted`` those before it
        (dropped by default; the summary engine summarizes them).
        """
        raise NotImplementedError

    def materialize(self, request: ContextRequest) -> ContextView:
        """Build the view as of ``request.until_seq`` (``None``: now). See the module docstring."""
        budget = request.budget or self.default_budget()
        until = request.until_seq if request.until_seq is not None else self._reader.max_seq()
        counter = self._counter
        head = [render_session_context(request.session_context)]
        extension: list[ViewMessage] = []
        if request.extension:
            extension.append(ViewMessage(role="user", content=request.extension, kind="extension"))
        instructions = counter.system(request.system_prompt) + sum(counter.message(m) for m in head)
        tools = counter.tools(request.tools)
        extension_tokens = sum(counter.message(m) for m in extension)
        available = budget.hard_limit_tokens - instructions - tools - extension_tokens

        boundary = self.compact_boundary(until)
        every = self.units(until)
        cut = next((i for i, u in enumerate(every) if u.first_seq > boundary), len(every))
        compacted, units = every[:cut], every[cut:]
        if available < 0 or (units and available < self.cost(units[-1])):
            raise ContextOverflow(
                f"{self.PLUGIN_NAME}: the newest unit cannot fit the hard budget",
                {"instructions_tokens": instructions, "tools_tokens": tools, "extension_tokens": extension_tokens,
                 "newest_unit_tokens": self.cost(units[-1]) if units else 0,
                 "hard_limit_tokens": budget.hard_limit_tokens})
        chosen = self.select(units, available, budget, compacted)

        state = sum(counter.message(m) for m in chosen.prefix)
        recent = sum(self.cost(u) for u in chosen.units)
        if state + recent > available:  # a strategy bug must never reach a provider
            raise AssertionError(f"{self.PLUGIN_NAME} selected {state + recent} tokens for {available} available")
        messages = (*head, *extension, *chosen.prefix, *(m for u in chosen.units for m in u.messages))
        first = chosen.units[0].first_seq if chosen.units else None
        epoch, reason = self._epoch(until, first, header_lines(request.system_prompt, request.tools)
                                    + [message_line(m) for m in messages])
        images = [u.images for u in chosen.units]
        kept = len(chosen.units)
        metrics = {
            "engine": self.PLUGIN_NAME,
            "units_total": len(units),
            "units_kept": kept,
            "units_dropped": len(units) - kept,
            "manual_compact_seq": boundary or None,
            "image_count": sum(n for n, _ in images),
            "image_tokens": sum(t for _, t in images),
            "rotation_reason": reason,
            **chosen.metrics,
        }
        return ContextView(
            session_id=request.session_id,
            system=request.system_prompt,
            tools=tuple(request.tools),
            messages=messages,
            tokens=ComponentTokens(instructions_tokens=instructions, state_tokens=state, recent_tokens=recent,
                                   tools_tokens=tools, extension_tokens=extension_tokens),
            budget=budget,
            epoch=epoch,
            first_retained_seq=first,
            metrics=metrics,
        )

    def _epoch(self, until: int, first: int | None, lines: list[bytes]) -> tuple[int, str | None]:
        """``(epoch, rotation reason)``: a new epoch whenever ``lines`` do not extend the previous request's."""
        prev = self._prev
        epoch, reason = 1, None  # epochs count from 1, as ContinuityEngine's generations do
        if prev is not None:
            p_until, epoch, p_first, p_lines = prev
            if until < p_until or lines[:len(p_lines)] != p_lines:
                epoch += 1
                reason = ("earlier request" if until < p_until else
                          "dropped oldest units" if p_first is not None and (first is None or first > p_first) else
                          "rewrote earlier messages")
        self._prev = (until, epoch, first, lines)
        return epoch, reason

    def manual_compact(self, reason: str = "manual") -> None:
        """Drop everything up to the current last event from future views (a ``manual_compact`` record).

        The summary engine summarizes that history instead of dropping it.
        """
        self._writer.append(MANUAL_COMPACT, self._reader.max_seq(), {"reason": reason})

    def recall(self, query: str, *, limit_tokens: int = 4000, until_seq: int | None = None) -> list[RecalledEvent]:
        """FTS matches for ``query`` (newest first until ``limit_tokens``), returned in seq order."""
        out: list[RecalledEvent] = []
        used = 0
        for stored in self._reader.search(query, limit=RECALL_ROWS, until_seq=until_seq):
            text = stored.event.searchable_text()
            tokens = self._counter.text(text)
            if used + tokens > limit_tokens:
                continue
            used += tokens
            out.append(RecalledEvent(seq=stored.seq, kind=stored.kind, text=text, tokens=tokens))
        return sorted(out, key=lambda r: r.seq)
