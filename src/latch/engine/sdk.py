"""The engine SDK: a base class that owns the ContextEngine port plumbing (spec: "Port boundary").

A policy engine subclasses :class:`PolicyEngine`, sets ``PLUGIN_NAME`` (and ``DESCRIPTION``,
``DEFAULTS`` for its ``[engines.<PLUGIN_NAME>]`` table) and overrides one method::

    class KeepLast(PolicyEngine):
        PLUGIN_NAME = "keep-last"
        DEFAULTS = {"units": 20}

        def select(self, units, room):
            return self.fit(units[-self.options["units"]:], room)

``select(units, room_tokens)`` gets the whole conversation units complete as of the request
(a user message, an assistant message, or an assistant tool-call turn with all of its results, as
:class:`latch.engine.units.UnitBuilder` segments them, the segmentation ContinuityEngine uses) and
the estimated tokens left for the conversation; it returns the kept units (a list) or a
:class:`Selection` (a prefix such as a summary, the units and extra metrics). ``self.budget`` is
the request's :class:`~latch.port.ContextBudget` and ``self.compacted`` the units before the last
``manual_compact``, both set for the duration of ``select``.

What the base class does for every engine:

* **Incremental units**: the session is read through ``profile.reader`` only after the last seq
  already segmented, so a request costs O(new events) to read, not O(history); a request for an
  earlier ``until_seq`` starts over. Unit costs are cached per unit.
* **Request layout**: system prompt and tools (reserved first), the session context
  (:func:`latch.engine.units.render_session_context`), ``request.extension``, then the selection.
* **Budget**: everything is at most ``budget.hard_limit_tokens`` (window - reserve), priced with
  :class:`latch.engine.units.TokenCounter` and the profile's estimator. When even the fixed part plus
  the newest whole unit cannot fit, ``materialize`` raises :class:`~latch.port.ContextOverflow`
  with the breakdown; a ``select`` that returns more than ``room`` raises ``AssertionError``
  (a policy bug never reaches a provider).
* **Cache epochs**: ``view.epoch`` counts up (from 1) whenever a request's canonical bytes
  (:func:`latch.engine.units.request_lines`) are not the previous request's plus a tail, and
  ``metrics["rotation_reason"]`` says why (tracked per engine instance).
* **Recall**: the host's FTS (``profile.reader.search``), newest first within ``limit_tokens``.
* **Configuration**: ``self.options`` is ``DEFAULTS`` merged with ``[engines.<PLUGIN_NAME>]``; an
  unknown option or a non-table raises ``ValueError`` naming it; the budget comes from
  :func:`latch.config.budget_for_model`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..config import budget_for_model
from ..port import (
    ComponentTokens,
    ContextBudget,
    ContextOverflow,
    ContextRequest,
    ContextView,
    EngineProfile,
    Estimator,
    RecalledEvent,
    ViewMessage,
)
from .units import (
    TokenCounter,
    Unit,
    UnitBuilder,
    header_lines,
    message_line,
    render_session_context,
    resolve_estimator,
    suffix_fit,
)

__all__ = ["PolicyEngine", "Selection", "MANUAL_COMPACT", "RECALL_ROWS"]

RECALL_ROWS = 64
"""FTS rows :meth:`PolicyEngine.recall` looks at, newest first."""
MANUAL_COMPACT = "manual_compact"
"""Kind of the record ``manual_compact`` appends through the writer (payload: ``{"reason": str}``)."""


class Selection:
    """What ``select`` may return: ``prefix`` messages (e.g. a summary, counted as state tokens) and the kept
    ``units`` (recent tokens); ``metrics`` is merged into the view's metrics."""

    __slots__ = ("prefix", "units", "metrics")

    def __init__(
        self, units: Sequence[Unit], prefix: Sequence[ViewMessage] = (), metrics: Mapping[str, Any] | None = None
    ):
        self.units = list(units)
        self.prefix = tuple(prefix)
        self.metrics = dict(metrics or {})


class PolicyEngine:
    """Base class of a policy engine: subclasses set ``PLUGIN_NAME`` and implement :meth:`select`."""

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
        self.budget: ContextBudget = self.default_budget()
        self.compacted: Sequence[Unit] = ()
        self._reset_units()

    @classmethod
    def factory(cls, profile: EngineProfile) -> PolicyEngine:
        """The :data:`~latch.port.ContextEngineFactory` of this engine (Latch builds every engine through it)."""
        return cls(profile)

    # ------------------------------------------------------------------ configuration
    def _read_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        table = ((config.get("engines") or {}).get(self.PLUGIN_NAME)) or {}
        if not isinstance(table, Mapping):
            raise ValueError(f"[engines.{self.PLUGIN_NAME}] must be a table, got {type(table).__name__}")
        unknown = sorted(set(table) - set(self.DEFAULTS))
        if unknown:
            raise ValueError(
                f"[engines.{self.PLUGIN_NAME}]: unknown option(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(self.DEFAULTS)) or 'none'}"
            )
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
    def options(self) -> Mapping[str, Any]:
        """This engine's effective options (``DEFAULTS`` merged with ``[engines.<PLUGIN_NAME>]``)."""
        return self._options

    @property
    def config(self) -> Mapping[str, Any]:
        """A copy of :attr:`options` (the port's ``config``)."""
        return dict(self._options)

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Replace Latch's configuration (the engine re-reads its table and the model budget)."""
        options = self._read_options(config)
        self._latch_config = dict(config)
        self._options = options
        self._reset_units()

    def set_estimator(self, estimator: Estimator) -> None:
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
        self._compact_id = 0
        self._compact_seqs: list[int] = []
        self._prev: tuple[int, int, int | None, list[bytes]] | None = None  # until, epoch, first seq, lines
        self._lines: dict[int, tuple[Unit, list[bytes]]] = {}  # id(unit) -> (unit, its canonical lines)

    def units(self, until_seq: int) -> list[Unit]:
        """Every unit complete as of ``until_seq``: reads only the events after the last call's (do not mutate)."""
        if until_seq < self._fed_seq:
            self._reset_units()
        if until_seq > self._fed_seq:
            for stored in self._reader.events(after_seq=self._fed_seq, until_seq=until_seq):
                self._units.extend(self._builder.feed(stored))
            self._fed_seq = until_seq
        return self._units

    def _unit_lines(self, unit: Unit) -> list[bytes]:
        """The canonical lines of ``unit``'s messages, serialized once per unit object."""
        got = self._lines.get(id(unit))
        if got is None or got[0] is not unit:
            got = self._lines[id(unit)] = (unit, [message_line(m) for m in unit.messages])
        return got[1]

    def cost(self, unit: Unit) -> int:
        """Estimated tokens of ``unit`` (cached on the unit)."""
        return unit.cost(self._counter)

    def fit(self, units: Sequence[Unit], room: int) -> list[Unit]:
        """The longest suffix of whole ``units`` within ``room`` tokens, walking back from the newest (O(kept))."""
        used, start = 0, len(units)
        while start > 0 and used + self.cost(units[start - 1]) <= room:
            start -= 1
            used += self.cost(units[start])
        return list(units[start:])

    def fit_suffix(self, units: Sequence[Unit], available: int) -> int:
        """Index of the first unit of the largest suffix of whole ``units`` within ``available`` tokens.

        Returns ``len(units)`` when not even the newest unit fits (the caller decides: overflow).
        """
        return suffix_fit(units, self.cost, available)

    def compact_boundary(self, until_seq: int) -> int:
        """The seq of the newest ``manual_compact`` at or before ``until_seq`` (0 when none); reads new records only."""
        for rid, _, at, _ in self._writer.records([MANUAL_COMPACT], after_id=self._compact_id):
            self._compact_id = max(self._compact_id, rid)
            self._compact_seqs.append(at)
        return max((at for at in self._compact_seqs if at <= until_seq), default=0)

    # ------------------------------------------------------------------ the port
    def select(self, units: list[Unit], room: int) -> Selection | Sequence[Unit]:
        """Choose the conversation within ``room`` tokens: the kept units, or a :class:`Selection`."""
        raise NotImplementedError(f"{type(self).__name__} must implement select(units, room)")

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
        cut = 0
        if boundary:
            cut = next((i for i, u in enumerate(every) if u.first_seq > boundary), len(every))
        compacted, units = (every[:cut], every[cut:]) if cut else ((), every)
        if available < 0 or (units and available < self.cost(units[-1])):
            raise ContextOverflow(
                f"{self.PLUGIN_NAME}: the newest unit cannot fit the hard budget",
                {
                    "instructions_tokens": instructions,
                    "tools_tokens": tools,
                    "extension_tokens": extension_tokens,
                    "newest_unit_tokens": self.cost(units[-1]) if units else 0,
                    "hard_limit_tokens": budget.hard_limit_tokens,
                },
            )
        self.budget, self.compacted = budget, compacted
        try:
            chosen = self.select(units, available)
        finally:
            self.compacted = ()
        if not isinstance(chosen, Selection):
            chosen = Selection(chosen)

        state = sum(counter.message(m) for m in chosen.prefix)
        recent = sum(self.cost(u) for u in chosen.units)
        if state + recent > available:  # a policy bug must never reach a provider
            raise AssertionError(f"{self.PLUGIN_NAME} selected {state + recent} tokens for {available} available")
        messages = (*head, *extension, *chosen.prefix, *(m for u in chosen.units for m in u.messages))
        first = chosen.units[0].first_seq if chosen.units else None
        lines = header_lines(request.system_prompt, request.tools)
        lines += [message_line(m) for m in (*head, *extension, *chosen.prefix)]
        for u in chosen.units:
            lines += self._unit_lines(u)
        epoch, reason = self._epoch(until, first, lines)
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
            tokens=ComponentTokens(
                instructions_tokens=instructions,
                state_tokens=state,
                recent_tokens=recent,
                tools_tokens=tools,
                extension_tokens=extension_tokens,
            ),
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
            if until < p_until or lines[: len(p_lines)] != p_lines:
                epoch += 1
                reason = (
                    "earlier request"
                    if until < p_until
                    else "dropped oldest units"
                    if p_first is not None and (first is None or first > p_first)
                    else "rewrote earlier messages"
                )
        self._prev = (until, epoch, first, lines)
        return epoch, reason

    def manual_compact(self, reason: str = "manual") -> None:
        """Drop everything up to the current last event from future views (a ``manual_compact`` record)."""
        self._writer.append(MANUAL_COMPACT, self._reader.max_seq(), {"reason": reason})

    def recall(self, query: str, *, limit_tokens: int = 4000, until_seq: int | None = None) -> list[RecalledEvent]:
        """FTS matches for ``query`` (newest first until ``limit_tokens`` tokens), returned in seq order."""
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
