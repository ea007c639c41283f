"""Conversation units, their provider-neutral rendering and token cost (spec: "Bounded materialization").

A *unit* is the smallest piece of conversation a view may hold or drop:

* a user message (``UserMessage``, meta or not);
* an assistant message without tool calls (one with neither text nor calls is not provider-visible);
* an assistant tool-call turn together with ALL its results, rendered as the assistant message and
  then one ``tool`` message per call, in call order. User messages and orphan results that arrive
  while the turn still waits for results are absorbed into it (rendered after the results), so a
  provider never sees text between a call and its result. When the next assistant message arrives
  before every result, the turn is closed with a ``[no result ...]`` error result per missing call.
  Until then the turn is *pending* and is no unit yet: a view never holds it, so a provider never
  gets a call without its result, and the turn enters the views whole, rendered once, when it
  closes (rendering it early and differently would break the cache-epoch byte-prefix rule). A
  legacy end-of-file placeholder (:attr:`~latch.events.ToolResult.eof_placeholder`, stored by
  earlier importers for a call still running) counts as no result yet: the real result stored
  after it closes the turn;
* a result whose call is unknown (``ToolResult.orphan``, an unknown ``call_id``, or a result that
  arrives after its turn closed) becomes its own unit rendered as a user-role note, since a provider
  rejects a tool message without its call.

System notes, usage, markers and kernel events are not provider-visible conversation.

A unit is *complete as of seq S* when its ``close_seq <= S``; units close in order, so the units
complete as of any S are a prefix of the unit list. Token costs are estimated once per unit
(:class:`TokenCounter`): message text, tool call names/arguments/ids, and image tokens from the
:class:`~latch.events.MediaRef` dimensions.

:func:`request_lines` is Latch's canonical serialization of a view (one canonical-JSON line for the
system field, one for the tools, one per message): "each request is the previous one plus a new
tail, byte for byte" is checked on these bytes. :func:`view_violations` is the protocol validator
used by ``latch replay`` and the tests.
"""

from __future__ import annotations

import copy
import hashlib
import operator
import weakref
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..count_cache import cached_counter
from ..estimators import ChatFraming, estimator_for_model
from ..events import (
    AssistantMessage,
    EventClassTable,
    MediaRef,
    ToolResult,
    UserMessage,
    canonical_bytes,
    slot_constructor,
)
from ..port import ContextView, Estimator, SessionContext, TokenCountCache, ViewMessage, ViewToolCall

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "TOOL_CALL_OVERHEAD_TOKENS",
    "TokenCounter",
    "MessageCosts",
    "message_costs",
    "MESSAGE_COSTS_KEPT",
    "NAMES_KEPT",
    "resolve_estimator",
    "suffix_fit",
    "render_session_context",
    "Unit",
    "UnitBuilder",
    "UnitSpan",
    "UnitSpans",
    "message_line",
    "line_digest",
    "request_lines",
    "view_violations",
]

MESSAGE_OVERHEAD_TOKENS = 4
"""Role and delimiters of one message (OpenAI's chat format spends 3-4 tokens per message)."""
TOOL_CALL_OVERHEAD_TOKENS = 8
"""Structure of one tool call or tool result (type, id/name/arguments keys)."""


def resolve_estimator(model: str | None, estimator: Estimator | None = None) -> Estimator:
    """``estimator`` if given, else :func:`latch.estimators.estimator_for_model` of ``model``.

    The engine-side default for an engine built without one; hosts choose through
    :func:`latch.plugins.select_estimator` (the ``latch_select_estimator`` hook) and pass the
    result in :attr:`~latch.port.EngineProfile.estimator`.
    """
    return estimator if estimator is not None else estimator_for_model(model)


def render_session_context(ctx: SessionContext) -> ViewMessage:
    """The session context as the first provider-visible message (spec: "Port boundary").

    Every engine sends this exact message first, so engine comparisons start from the same bytes::

        <session-context>
        workspace: /path/or/(unknown)
        mode: default
        <repository-instructions>        (only when the session has some)
        ...
        </repository-instructions>
        </session-context>

    A ``user``-role message of ``kind="session_context"`` (Anthropic requires a user message first).
    """
    lines = ["<session-context>", f"workspace: {ctx.workspace or '(unknown)'}", f"mode: {ctx.mode}"]
    if ctx.repository_instructions:
        lines += ["<repository-instructions>", ctx.repository_instructions, "</repository-instructions>"]
    lines.append("</session-context>")
    return ViewMessage(role="user", content="\n".join(lines), kind="session_context")


MESSAGE_COSTS_KEPT = 4096
"""Messages a :class:`MessageCosts` remembers per generation (it keeps two: the newest ``2 x`` this many at most)."""


class MessageCosts:
    """The token costs of the messages priced lately by the :class:`TokenCounter` s of one estimator.

    A host's request loop and its engine each segment and price the same new events, into message objects of their
    own that hold the same text objects (the events' decoded strings). A message's cost is a function of its
    ``content``, its tool calls' ``id``, ``name`` and ``arguments``, its ``tool_call_id`` and its ``media``, so an
    entry answers for a message only when each of those strings is the very object priced (``is``) and the media
    are equal: an equal price, never a stale one. Entries are keyed by the message's ``seq`` and the identity of its
    ``content`` (an entry holds its texts, so that identity names no other object while it is kept); two
    generations of at most :data:`MESSAGE_COSTS_KEPT` entries each, the older dropped whole when the newer fills.
    ``estimator`` is the estimator whose prices they are (held, so :func:`message_costs` never hands them to an
    estimator made later at the same address). Not locked: a lookup racing a write may miss, never answer wrongly."""

    __slots__ = ("estimator", "_new", "_old", "__weakref__")

    def __init__(self, estimator: Any = None) -> None:
        self.estimator = estimator  # whose prices these are (held: its id names no other object meanwhile)
        self._new: dict[tuple[Any, int], tuple[Any, ...]] = {}
        self._old: dict[tuple[Any, int], tuple[Any, ...]] = {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def get(self, m: ViewMessage) -> int | None:
        """The tokens kept for a message with the same texts as ``m``, else ``None``."""
        return self._kept(m, (m.seq, id(m.content)))

    def put(self, m: ViewMessage, tokens: int) -> None:
        """Keep ``tokens`` as the cost of ``m``'s texts."""
        self._keep(m, (m.seq, id(m.content)), tokens)

    def price(self, m: ViewMessage, cost: Callable[[ViewMessage], int]) -> int:
        """The tokens kept for ``m``'s texts, else ``cost(m)`` (then kept): :meth:`get` and :meth:`put` in one, the
        key made once."""
        return self.price_all((m,), cost)[0]

    def price_all(self, messages: Sequence[ViewMessage], cost: Callable[[ViewMessage], int]) -> list[int]:
        """``[price(m, cost) for m in messages]``: each message's kept tokens, else ``cost(m)`` (then kept), in one
        loop (a unit's messages are priced together)."""
        out: list[int] = []
        kept, keep = self._kept, self._keep
        for m in messages:
            key = (m.seq, id(m.content))
            tokens = kept(m, key)
            if tokens is None:
                tokens = cost(m)
                keep(m, key, tokens)
            out.append(tokens)
        return out

    def _kept(self, m: ViewMessage, key: tuple[Any, int]) -> int | None:
        got = self._new.get(key) or self._old.get(key)
        if got is not None and got[0] is m.content and got[1] is m.tool_call_id:
            if (got[2] is m.tool_calls or _same_calls(got[2], m.tool_calls)) and (
                got[3] is m.media or got[3] == m.media
            ):
                tokens: int = got[4]
                return tokens
        return None

    def _keep(self, m: ViewMessage, key: tuple[Any, int], tokens: int) -> None:
        new = self._new
        if len(new) >= MESSAGE_COSTS_KEPT:
            self._old, new = new, {}
            self._new = new
        new[key] = (m.content, m.tool_call_id, m.tool_calls, m.media, tokens)


def _same_calls(a: Sequence[ViewToolCall], b: Sequence[ViewToolCall]) -> bool:
    """Whether two messages' tool calls hold the very same ``id``, ``name`` and ``arguments`` strings."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):  # a loop, not all() over a generator: most messages hold one call
        if x.id is not y.id or x.name is not y.name or x.arguments is not y.arguments:
            return False
    return True


_MESSAGE_COSTS: weakref.WeakValueDictionary[int, MessageCosts] = weakref.WeakValueDictionary()
"""id(estimator) -> the :class:`MessageCosts` its live counters share (an entry holds its estimator, so the id names
that estimator while the entry lives)."""


def message_costs(estimator: Any) -> MessageCosts:
    """The :class:`MessageCosts` shared by every live :class:`TokenCounter` of ``estimator`` (a new one when none
    lives)."""
    got = _MESSAGE_COSTS.get(id(estimator))
    if got is None or got.estimator is not estimator:
        got = _MESSAGE_COSTS[id(estimator)] = MessageCosts(estimator)
    return got


NAMES_KEPT = 1024
"""Tool-call ids and tool names a :class:`TokenCounter` remembers the tokens of (an id is priced in its call and
again in its result; a session uses a few tool names)."""


class TokenCounter:
    """Uniform token costs over an estimator (tokens everywhere).

    ``estimator`` follows :class:`latch.estimators.Estimator`: ``estimate(text) -> int`` and
    ``image_tokens(width, height) -> int`` (``TypeError`` when either is missing). A non-image
    media reference (a document) costs one token per 2 bytes, a conservative stand-in until the
    provider reports.

    An *exact* estimator (class or instance attribute ``EXACT = True`` and a non-empty ``TOKENIZER``
    name, e.g. ``"tiktoken:cl100k_base"``) makes :attr:`exact` true: its counts are the provider's, so
    the engine reports them without a margin. With ``counts`` (a :class:`~latch.port.TokenCountCache`)
    and an exact estimator, :meth:`message` of a conversation message (one with a ``seq``) is looked
    up by ``(TOKENIZER, seq, digest of its canonical line)`` and counted (then recorded) only when
    missing: an event is tokenized once per tokenizer, at first use, not once per request.
    ``counts`` is ignored for a heuristic estimator. Every other text an exact estimator counts goes through
    :func:`latch.count_cache.cached_counter` (counts kept between processes when the host asked for it).
    Every counter of one estimator object shares its message prices (:func:`message_costs`): a message the host's
    request loop has priced costs the engine a lookup, not an estimate.

    An estimator that also follows :class:`latch.estimators.ChatFraming` (it knows its model's chat
    template, e.g. ``latch-llamacpp``) prices whole messages, the system prompt and the tools itself
    (:meth:`message`, :meth:`system`, :meth:`tools` delegate to it) and gives the per-message
    framing (:attr:`overhead`); otherwise the generic rule below applies (:data:`MESSAGE_OVERHEAD_TOKENS`
    per message, :data:`TOOL_CALL_OVERHEAD_TOKENS` per call or result).
    """

    def __init__(self, estimator: Estimator, counts: TokenCountCache | None = None):
        if not callable(getattr(estimator, "estimate", None)) or not callable(getattr(estimator, "image_tokens", None)):
            raise TypeError(
                f"estimator {estimator!r} needs estimate(text) and image_tokens(width, height) "
                f"(latch.estimators.Estimator)"
            )
        self.estimator = estimator
        self._memo: dict[str, int] = {}
        tokenizer = getattr(estimator, "TOKENIZER", None)
        self.exact = bool(getattr(estimator, "EXACT", False)) and isinstance(tokenizer, str) and bool(tokenizer)
        self.tokenizer: str | None = tokenizer if self.exact else None
        self.text: Callable[[str], int] = (
            cached_counter(self.tokenizer, estimator.estimate) if self.tokenizer is not None else estimator.estimate
        )
        self.counts = counts if self.exact else None
        self._costs = message_costs(estimator)
        self._names: dict[str, int] = {}  # tokens of call ids and tool names (at most NAMES_KEPT, emptied when full)
        self._system_memo: dict[str, int] = {}
        self.framing: ChatFraming | None = estimator if isinstance(estimator, ChatFraming) else None
        self.overhead: int = (
            int(self.framing.message_overhead_tokens) if self.framing is not None else MESSAGE_OVERHEAD_TOKENS
        )
        """Tokens of one user message's framing around its text (role and delimiters)."""

    def fixed(self, text: str) -> int:
        """:meth:`text` memoized, for strings sent again on every request (system prompt, tools,
        canonical state): estimated once, not once per request."""
        got = self._memo.get(text)
        if got is None:
            if len(self._memo) >= 256:
                self._memo.clear()
            got = self._memo[text] = self.text(text)
        return got

    def system(self, text: str) -> int:
        """Tokens of the system prompt: its text plus one message's overhead (it is a message in OpenAI's
        chat format and a block in Anthropic's), 0 when empty. The one rule every engine and every
        recount uses for it (so the baselines and the bench recount price the same overhead).
        With a :class:`~latch.estimators.ChatFraming` estimator: its ``system_tokens(text)``, which also
        holds the request's fixed cost (e.g. the generation prompt), memoized."""
        if self.framing is not None:
            got = self._system_memo.get(text)
            if got is None:
                if len(self._system_memo) >= 16:
                    self._system_memo.clear()
                got = self._system_memo[text] = int(self.framing.system_tokens(text))
            return got
        return self.fixed(text) + MESSAGE_OVERHEAD_TOKENS if text else 0

    def media(self, ref: MediaRef) -> int:
        if not ref.media_type.startswith("image/"):
            return max(1, (ref.byte_size + 1) // 2)
        return int(self.estimator.image_tokens(ref.width, ref.height))

    def message(self, m: ViewMessage) -> int:
        """Tokens of one provider-visible message (content, calls, ids, media, overhead); from the durable
        per-event cache when there is one (see the class docstring)."""
        counts, tokenizer = self.counts, self.tokenizer
        if counts is None or tokenizer is None or m.seq is None or m.kind != "conversation":
            return self._message(m)
        digest = line_digest(message_line(m))
        got = counts.get(tokenizer, m.seq, digest)
        if got is None:
            got = self._message(m)
            counts.put(tokenizer, m.seq, digest, got)
        return int(got)

    def prices(self, messages: Sequence[ViewMessage]) -> list[int]:
        """``[message(m) for m in messages]`` (tokens of each message, in order), the shared prices looked up in
        one loop when neither a durable count cache nor a chat template is involved."""
        if self.framing is None and self.counts is None:
            return self._costs.price_all(messages, self._estimate)
        message = self.message
        return [message(m) for m in messages]

    def _message(self, m: ViewMessage) -> int:
        if self.framing is not None:
            return int(self.framing.message_tokens(m))
        return self._costs.price(m, self._estimate)

    def _estimate(self, m: ViewMessage) -> int:
        text = self.text
        t = MESSAGE_OVERHEAD_TOKENS + text(m.content)
        if m.tool_calls or m.tool_call_id is not None:
            names = self._names  # call ids and tool names: each id is priced twice (call, result), names recur
            if len(names) >= NAMES_KEPT:
                names.clear()
            for c in m.tool_calls:
                cid, name = c.id, c.name
                n = names.get(cid)
                if n is None:
                    n = names[cid] = text(cid)
                k = names.get(name)
                if k is None:
                    k = names[name] = text(name)
                t += TOOL_CALL_OVERHEAD_TOKENS + n + k + text(c.arguments)
            result_of = m.tool_call_id
            if result_of is not None:
                n = names.get(result_of)
                if n is None:
                    n = names[result_of] = text(result_of)
                t += TOOL_CALL_OVERHEAD_TOKENS + n
        if m.media:
            for ref in m.media:
                t += self.media(ref)
        return t

    def image_tokens(self, m: ViewMessage) -> tuple[int, int]:
        """``(image_count, image_tokens)`` of one message."""
        refs = [r for r in m.media if r.media_type.startswith("image/")]
        return len(refs), sum(self.media(r) for r in refs)

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of the tool schemas as serialized by :func:`request_lines` (with a
        :class:`~latch.estimators.ChatFraming` estimator: as its ``tools_tokens(tools)`` prices them)."""
        if self.framing is not None:
            return int(self.framing.tools_tokens(tools)) if tools else 0
        return self.fixed(canonical_bytes(list(tools)).decode("utf-8")) if tools else 0


def suffix_fit(items: Sequence[Any], cost: Callable[[Any], int], budget: int) -> int:
    """Start index of the largest suffix of whole ``items`` within ``budget`` tokens, from scratch.

    ``cost(item)`` gives an item's tokens (``>= 0``). Items are costed from the newest back and the walk
    stops at the first that does not fit, so it asks ``cost`` only for the kept items and one more:
    O(kept), where prefix sums over everything followed by :func:`latch.hotpaths.suffix_start` cost O(n).
    Returns ``len(items)`` when not even the newest fits (``suffix_start`` keeps that one whole: take
    ``min(i, len(items) - 1)`` for its answer); 0 for no items. Spec: "Bounded materialization", item 3.
    """
    start, used = len(items), 0
    while start > 0:
        used += cost(items[start - 1])
        if used > budget:
            break
        start -= 1
    return start


class Unit:
    """One conversation unit: ``messages`` (provider-neutral), the visible event ``seqs``, ``close_seq``.

    ``user_turn`` is True for a non-meta user message (a user turn for span metrics).
    ``tokens``/``msg_tokens``/``images`` are filled by :meth:`cost` (lazily: a long history is segmented without
    estimating units that never reach a view).
    """

    __slots__ = ("first_seq", "close_seq", "seqs", "messages", "user_turn", "tokens", "msg_tokens", "images")

    def __init__(
        self,
        first_seq: int,
        close_seq: int,
        seqs: tuple[int, ...],
        messages: tuple[ViewMessage, ...],
        user_turn: bool = False,
    ):
        self.first_seq = first_seq
        self.close_seq = close_seq
        self.seqs = seqs
        self.messages = messages
        self.user_turn = user_turn
        self.tokens = -1
        self.msg_tokens: tuple[int, ...] = ()
        self.images = (0, 0)

    def cost(self, counter: TokenCounter) -> int:
        """Estimated tokens of the unit (cached; ``msg_tokens`` per message), image tokens included."""
        if self.tokens < 0:
            messages = self.messages
            self.msg_tokens = msg_tokens = tuple(counter.prices(messages))
            self.tokens = sum(msg_tokens)
            n = t = 0
            for m in messages:
                if m.media:  # most messages carry none
                    c, k = counter.image_tokens(m)
                    n, t = n + c, t + k
            if n or t:
                self.images = (n, t)
        return self.tokens

    def __repr__(self) -> str:
        return f"Unit(seqs={self.seqs}, close_seq={self.close_seq}, messages={len(self.messages)})"


class UnitSpan:
    """The seqs of one conversation unit (``first_seq``, ``close_seq``, ``seqs``) without its messages: what a
    whole-unit check (:func:`view_violations`) or a request diff needs of a unit that may long have left every
    view, at a few dozen bytes instead of the unit's text."""

    __slots__ = ("first_seq", "close_seq", "seqs")

    def __init__(self, unit: Unit):
        self.first_seq, self.close_seq, self.seqs = unit.first_seq, unit.close_seq, unit.seqs

    @classmethod
    def of(cls, first_seq: int, close_seq: int, seqs: tuple[int, ...]) -> UnitSpan:
        """The span with these seqs (``first_seq`` is ``seqs[0]``)."""
        span = cls.__new__(cls)
        span.first_seq, span.close_seq, span.seqs = first_seq, close_seq, seqs
        return span

    def __repr__(self) -> str:
        return f"UnitSpan(seqs={self.seqs}, close_seq={self.close_seq})"


SPANS_KEPT = 4096
"""Seqs a :class:`UnitSpans` remembers of those read lately, with their spans (a view reads the same recent seqs
request after request)."""


class UnitSpans(Mapping[int, UnitSpan]):
    """``{seq: UnitSpan}`` over the units of several events a session has completed, held as three int64
    arrays: every such unit's seqs in one sorted array, where each unit's seqs start, and each unit's
    ``close_seq``. About 8 bytes per seq and 16 per unit, and no Python object per unit, so a long session adds
    nothing for the garbage collector to traverse (a full collection's pause stays flat as the history grows).

    :meth:`add` takes units in the order :class:`UnitBuilder` completes them (their seqs ascend and never
    interleave); a lookup is a binary search, O(log n), and returns a :class:`UnitSpan` equal to
    ``UnitSpan(unit)``; the last :data:`SPANS_KEPT` seqs read are remembered with their answer. Iteration yields
    the seqs in ascending order. A one-event unit is not kept (it can never be split, and its one seq names it).
    """

    __slots__ = ("_seqs", "_starts", "_closes", "_read")

    def __init__(self) -> None:
        self._seqs = array("q")  # every kept unit's seqs, ascending
        self._starts = array("q", [0])  # unit i's seqs are _seqs[_starts[i]:_starts[i + 1]]
        self._closes = array("q")
        # seqs read lately: their span, None for no kept unit; at most SPANS_KEPT (emptied when full), so what a
        # collection traverses stays bounded
        self._read: dict[object, UnitSpan | None] = {}

    def add(self, unit: Unit | UnitSpan) -> bool:
        """Keep ``unit`` when it has several seqs (returns whether it was kept). Raises ``ValueError`` for a unit
        whose seqs do not ascend past every kept seq."""
        seqs = unit.seqs
        if len(seqs) < 2:
            return False
        last = self._seqs[-1] if self._seqs else None
        if (last is not None and seqs[0] <= last) or not all(map(operator.lt, seqs, seqs[1:])):
            raise ValueError(f"unit seqs {seqs} do not ascend past the last kept seq {last}")
        self._seqs.extend(seqs)
        self._starts.append(len(self._seqs))
        self._closes.append(unit.close_seq)
        return True

    def _index(self, seq: int) -> int:
        """Position of ``seq`` in ``_seqs`` (-1 when absent)."""
        i = bisect_right(self._seqs, seq) - 1
        return i if i >= 0 and self._seqs[i] == seq else -1

    def get(self, seq: int, default: Any = None) -> Any:
        """The unit of several events holding ``seq``, else ``default`` (most seqs of a view are one-event units:
        no ``KeyError`` raised and caught for them, as ``Mapping.get`` would)."""
        known = self._read.get(seq, self)
        if known is not self:
            return default if known is None else known
        if not isinstance(seq, int) or not self._seqs or seq > self._seqs[-1]:
            return default  # past every kept seq: a unit added later may hold it, so nothing is remembered
        i = self._index(seq)
        span = None
        if i >= 0:
            u = bisect_right(self._starts, i) - 1
            lo, hi = self._starts[u], self._starts[u + 1]
            span = UnitSpan.of(self._seqs[lo], self._closes[u], tuple(self._seqs[lo:hi]))
        if len(self._read) >= SPANS_KEPT:
            self._read.clear()
        self._read[seq] = span  # at or before the last kept seq: no unit added later can hold it
        return default if span is None else span

    def __getitem__(self, seq: int) -> UnitSpan:
        span: UnitSpan | None = self.get(seq)
        if span is None:
            raise KeyError(seq)
        return span

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and self._index(seq) >= 0

    def __iter__(self) -> Iterator[int]:
        return iter(self._seqs)

    def __len__(self) -> int:
        return len(self._seqs)

    @property
    def unit_count(self) -> int:
        """Units kept."""
        return len(self._closes)


# The segmentation makes a message or two per event, in the request loop and again in the engine: built by
# slot_constructor (the same instances, about half the cost of a frozen dataclass's __init__).
_view_message = slot_constructor(ViewMessage)
_view_tool_call = slot_constructor(ViewToolCall)


def _orphan_message(seq: int, r: ToolResult) -> ViewMessage:
    name = f" ({r.name})" if r.name else ""
    head = f"[result of tool call {r.call_id}{name}, whose call is not in this conversation]"
    return _view_message(role="user", content=f"{head}\n{r.content}", media=r.media, seq=seq)


def _missing_result(call_id: str) -> ViewMessage:
    return _view_message(
        role="tool",
        content="[no result: the turn ended before this call returned]",
        tool_call_id=call_id,
        is_error=True,
        seq=None,
    )


def _user_message(seq: int, u: UserMessage) -> ViewMessage:
    return _view_message(role="user", content=u.text, media=u.media, seq=seq)


_ASSISTANT, _RESULT, _USER, _OTHER = range(4)
_ROLES = EventClassTable(((AssistantMessage, _ASSISTANT), (ToolResult, _RESULT), (UserMessage, _USER)), _OTHER)
"""What the segmentation reads an event of each class as (a subclass reads as its event class)."""


_call_id = operator.attrgetter("id")


class _Turn:
    """An assistant tool-call turn waiting for its results."""

    __slots__ = ("seq", "msg", "results", "waiting", "absorbed", "seqs")

    def __init__(self, seq: int, msg: AssistantMessage):
        self.seq = seq
        self.msg = msg
        self.results: dict[str, tuple[int, ToolResult]] = {}
        self.waiting = set(map(_call_id, msg.tool_calls))
        self.absorbed: list[ViewMessage] = []
        self.seqs = [seq]

    def close(self, close_seq: int) -> Unit:
        m = self.msg
        call = _view_tool_call
        calls = tuple([call(c.id, c.name, c.arguments) for c in m.tool_calls])
        msgs = [_view_message(role="assistant", content=m.text, seq=self.seq, tool_calls=calls)]
        results = self.results
        for c in m.tool_calls:
            got = results.get(c.id)
            if got is None:
                msgs.append(_missing_result(c.id))
            else:
                r = got[1]
                msgs.append(
                    _view_message(
                        role="tool",
                        content=r.content,
                        tool_call_id=c.id,
                        is_error=r.is_error,
                        media=r.media,
                        seq=got[0],
                    )
                )
        msgs.extend(self.absorbed)
        return Unit(self.seq, close_seq, tuple(self.seqs), tuple(msgs))


class UnitBuilder:
    """Streaming segmentation of events into units (a deterministic state machine).

    :meth:`feed` takes events in seq order and returns the units they complete. The state at a
    unit boundary is empty, so segmenting from any unit's first seq gives the same units as
    segmenting from the start (resume loads only the current cache epoch).
    """

    def __init__(self) -> None:
        self._turn: _Turn | None = None

    @property
    def pending_seq(self) -> int | None:
        """First seq of the tool-call turn still waiting for results, or ``None``."""
        return self._turn.seq if self._turn is not None else None

    def feed(self, stored: Any) -> list[Unit]:
        """Accept one stored event (``seq``, ``event``); return the units it completes (0, 1 or 2)."""
        ev = stored.event
        role = _ROLES[type(ev)]
        if role == _OTHER:
            return []
        seq = stored.seq
        turn = self._turn
        if role == _ASSISTANT:
            out: list[Unit] = []
            if turn is not None:  # the next response came before every result: close with placeholders
                out.append(turn.close(seq))
                self._turn = None
            if ev.tool_calls:
                self._turn = _Turn(seq, ev)
            elif ev.text:
                out.append(Unit(seq, seq, (seq,), (_view_message(role="assistant", content=ev.text, seq=seq),)))
            return out
        if role == _RESULT:
            if ev.eof_placeholder:
                return []  # superseded by the real result when one is stored later
            if turn is not None:
                waiting = turn.waiting
                if ev.call_id in waiting and not ev.orphan:
                    waiting.discard(ev.call_id)
                    turn.results[ev.call_id] = (seq, ev)
                    turn.seqs.append(seq)
                    if not waiting:
                        self._turn = None
                        return [turn.close(seq)]
                    return []
                turn.absorbed.append(_orphan_message(seq, ev))
                turn.seqs.append(seq)
                return []
            return [Unit(seq, seq, (seq,), (_orphan_message(seq, ev),))]
        if turn is not None:
            turn.absorbed.append(_user_message(seq, ev))
            turn.seqs.append(seq)
            return []
        return [Unit(seq, seq, (seq,), (_user_message(seq, ev),), user_turn=not ev.is_meta)]

    def feed_all(self, stored_events: Iterable[Any]) -> list[Unit]:
        out: list[Unit] = []
        for s in stored_events:
            out.extend(self.feed(s))
        return out


# ------------------------------------------------------------------ canonical serialization
def line_digest(line: bytes) -> str:
    """The rendering digest a :class:`~latch.port.TokenCountCache` keys a message by: 32 hex digits of
    BLAKE2b over its canonical line (:func:`message_line`)."""
    return hashlib.blake2b(line, digest_size=16).hexdigest()


def message_line(m: ViewMessage) -> bytes:
    """Canonical JSON of the provider-visible fields of one message (no ``kind``/``seq``)."""
    d: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        d["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    if m.tool_call_id is not None:
        d["tool_call_id"] = m.tool_call_id
    if m.is_error:
        d["is_error"] = True
    if m.media:
        d["media"] = [
            {
                "sha256": r.sha256,
                "media_type": r.media_type,
                "byte_size": r.byte_size,
                "width": r.width,
                "height": r.height,
            }
            for r in m.media
        ]
    return canonical_bytes(d)


_HEADER_MEMO: list[tuple[str, list[Any], list[bytes]]] = []
"""The last header :func:`header_lines` serialized: ``(system, a deep copy of the tools, lines)``."""


def header_lines(system: str, tools: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """The request's first two canonical lines: ``{"system": system}`` and ``{"tools": [...]}`` (UTF-8 bytes;
    a new list each call). Every request of a session carries the same harness, so the last header is kept:
    a request whose system prompt and tools equal it (``==`` against a deep copy taken when it was
    serialized, so a schema changed in place is serialized again) gets its lines without re-encoding."""
    memo = _HEADER_MEMO
    if memo:
        m_system, m_tools, m_lines = memo[0]
        if (
            m_system == system
            and len(m_tools) == len(tools)
            and all(a == b for a, b in zip(m_tools, tools, strict=False))
        ):
            return list(m_lines)
    listed = list(tools)
    lines = [canonical_bytes({"system": system}), canonical_bytes({"tools": listed})]
    try:
        memo[:] = [(system, copy.deepcopy(listed), lines)]
    except Exception:  # a schema deepcopy cannot copy is serialized every time
        memo.clear()
    return list(lines)


def request_lines(view: ContextView) -> list[bytes]:
    """Latch's canonical serialization of a request: system line, tools line, one line per message.

    ``b"\\n".join(lines) + b"\\n"`` is the request's byte string; within a cache epoch each
    request's bytes start with the previous request's bytes.
    """
    return header_lines(view.system, view.tools) + [message_line(m) for m in view.messages]


# ------------------------------------------------------------------ protocol validation
def view_violations(messages: Sequence[ViewMessage], units: Mapping[int, Unit | UnitSpan] | None = None) -> list[str]:
    """Pairing, ordering and whole-unit violations of a view's messages (``[]`` when valid).

    * every assistant tool call is answered by the ``tool`` messages right after it, in call order;
    * no ``tool`` message without its call (an orphan), no duplicate answer;
    * with ``units`` (``{seq: unit}`` over the session), every unit that has a conversation message
      in the view has all of them (no split unit).
    """
    out: list[str] = []
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        if m.role == "tool":
            out.append(f"message {i}: tool result {m.tool_call_id!r} without its call (orphan)")
            i += 1
            continue
        if m.role == "assistant" and m.tool_calls:
            for j, call in enumerate(m.tool_calls):
                k = i + 1 + j
                if k >= n or messages[k].role != "tool":
                    out.append(f"message {i}: tool call {call.id!r} ({call.name}) is not answered (orphan call)")
                    break
                if messages[k].tool_call_id != call.id:
                    out.append(
                        f"message {k}: result {messages[k].tool_call_id!r} where call {call.id!r} "
                        f"was expected (call order)"
                    )
            i += 1 + len(m.tool_calls)
            continue
        i += 1
    if units is not None:
        # the view's units only: O(view), not O(session); keyed by first seq (units are disjoint), so a mapping
        # that makes its spans when asked (UnitSpans) groups the same way as one that holds them
        present: dict[int, tuple[Unit | UnitSpan, set[int]]] = {}
        for m in messages:
            if m.kind == "conversation" and m.seq is not None:
                u = units.get(m.seq)
                if u is not None:
                    present.setdefault(u.first_seq, (u, set()))[1].add(m.seq)
        for u, seen in present.values():
            missing = [s for s in u.seqs if s not in seen]
            if missing:
                out.append(f"unit seq {u.first_seq}..{u.close_seq} is split: seqs {missing} missing from the view")
    return out
