"""The ContextEngine port (spec: "Port boundary").

``materialize(ContextRequest) -> ContextView`` plus ``config``, ``set_config``,
``set_estimator``, ``default_budget``, ``manual_compact`` and ``recall`` is the
whole contract between the host and a context engine. The port exposes no
EventStore or SQLite handle: an engine reads its session through a read-only
:class:`SessionReader` and writes only its own kernel-context, epoch and
materialization records through a narrow :class:`KernelWriter`; the host hands both sealed
(:mod:`latch.host.sealed`), so no attribute, closure or frame of them leads to the store. With an exact
estimator, the host may also hand it a :class:`TokenCountCache`: the durable
per-event exact token counts, so an event is tokenized once, not per request.

A :data:`ContextEngineFactory` builds the engine for one session from its
durable profile (:class:`EngineProfile`); the default factory,
``latch.engine.continuity_context_engine_factory``, is exactly
``ContinuityEngine.for_model(...)``. The host never constructs an engine itself
and never falls back to the default when another factory is configured.

Units: every ``*_tokens`` field is in estimated tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .events import MediaRef
from .records import dataclass

if TYPE_CHECKING:  # numpy loads when an estimator makes an array, not with the port
    import numpy as np

__all__ = [
    "ContextBudget",
    "MaterializeBudget",
    "SessionContext",
    "ContextRequest",
    "ViewMessage",
    "ViewToolCall",
    "ComponentTokens",
    "ContextView",
    "MaterializedContext",
    "RecalledEvent",
    "Estimator",
    "CanonicalStateView",
    "ContextOverflow",
    "ContextEngine",
    "SessionReader",
    "KernelWriter",
    "TokenCountCache",
    "EngineProfile",
    "ContextEngineFactory",
]


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """Token budget of one request (spec: "Bounded materialization").

    Hard invariant: ``instructions + state + recent + recall + tools + extension
    <= context_window_tokens - reserve_tokens``. ``recent_tokens`` is the
    conversation high-water mark (``context.recent_tokens``); the hard budget
    can lower the effective value.
    """

    context_window_tokens: int = 256_000
    reserve_tokens: int = 32_000
    recent_tokens: int = 64_000

    def __post_init__(self) -> None:
        problem = ContextBudget.problem(self.context_window_tokens, self.reserve_tokens, self.recent_tokens)
        if problem is not None:
            raise ValueError(f"ContextBudget: {problem}")

    @staticmethod
    def problem(context_window_tokens: object, reserve_tokens: object, recent_tokens: object = 0) -> str | None:
        """What is wrong with these token counts as a budget (one line), else ``None``: each an ``int`` (not a
        ``bool``), the window above 0, the reserve and ``recent_tokens`` not negative, the reserve below the
        window. Constructing a :class:`ContextBudget` raises ``ValueError`` with this line."""
        values = (
            ("context_window_tokens", context_window_tokens),
            ("reserve_tokens", reserve_tokens),
            ("recent_tokens", recent_tokens),
        )
        for name, value in values:
            if not isinstance(value, int) or isinstance(value, bool):
                return f"{name} must be a whole number of tokens, got {value!r}"
            if value < 0:
                return f"{name} must not be negative, got {value}"
        assert isinstance(context_window_tokens, int) and isinstance(reserve_tokens, int)
        if context_window_tokens <= 0:
            return f"context_window_tokens must be above 0, got {context_window_tokens}"
        if reserve_tokens >= context_window_tokens:
            return (
                f"reserve_tokens ({reserve_tokens:,}) must be below context_window_tokens ({context_window_tokens:,})"
            )
        return None

    @property
    def hard_limit_tokens(self) -> int:
        """``context_window_tokens - reserve_tokens``."""
        return self.context_window_tokens - self.reserve_tokens


MaterializeBudget = ContextBudget


@dataclass(frozen=True, slots=True)
class SessionContext:
    """Session-specific context rendered as the first provider-visible message.

    Kept apart from the session-independent system prompt so system + tools stay
    byte-identical across sessions (provider prefix cache).
    """

    workspace: str | None = None
    repository_instructions: str = ""
    mode: str = "default"


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """What the host asks for before one model request.

    ``until_seq`` materializes the session as of that event (``None`` = now);
    replay uses it to rebuild the view before each historical request.
    ``tools`` are provider tool schemas (JSON-ready dicts), reserved with
    ``extension`` before the engine allocates its own sections.
    """

    session_id: str
    system_prompt: str = ""
    session_context: SessionContext = field(default_factory=SessionContext)
    tools: tuple[Mapping[str, Any], ...] = ()
    extension: str = ""
    until_seq: int | None = None
    query: str | None = None
    budget: ContextBudget | None = None


@dataclass(frozen=True, slots=True)
class ViewToolCall:
    """One tool call in a view: ``id`` links it to its tool message; ``arguments`` is a JSON string."""

    id: str
    name: str
    arguments: str  # JSON string


@dataclass(frozen=True, slots=True)
class ViewMessage:
    """One provider-visible message, provider-neutral (OpenAI/Anthropic vocabulary).

    ``role`` is ``"user"``, ``"assistant"`` or ``"tool"``. ``tool_calls`` only on
    assistant messages; ``tool_call_id``/``is_error`` only on tool messages.
    ``kind`` says where it came from: ``session_context``, ``kernel_context``
    (durable KernelContext snapshot/delta), ``conversation`` (an original
    event, ``seq`` set) or ``recall``.
    """

    role: str
    content: str
    kind: str = "conversation"
    tool_calls: tuple[ViewToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False
    media: tuple[MediaRef, ...] = ()
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class ComponentTokens:
    """Per-component estimated tokens; ``episode_tokens`` is *inside* ``recall_tokens``.

    ``harness_tokens`` is the harness's own fixed prompt (system prompt and tool schemas) that the
    transcript does not record, *inferred* by the host from the provider's reported usage
    (:mod:`latch.host.harness`); engines leave it 0 (what they send is in the other components).
    """

    instructions_tokens: int = 0
    state_tokens: int = 0
    recent_tokens: int = 0
    recall_tokens: int = 0
    episode_tokens: int = 0
    tools_tokens: int = 0
    extension_tokens: int = 0
    harness_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return (
            self.instructions_tokens
            + self.state_tokens
            + self.recent_tokens
            + self.recall_tokens
            + self.tools_tokens
            + self.extension_tokens
            + self.harness_tokens
        )


@dataclass(frozen=True, slots=True)
class ContextView:
    """The materialized request: system field, tools, messages, and its accounting.

    ``epoch`` is the cache epoch generation (within one epoch each request extends the previous
    one byte for byte); ``metrics`` holds the engine's durable per-request metrics (spec: "Context
    metrics"); ``status`` is ``"ok"``, ``"new_epoch"`` (this request started an epoch) or
    ``"oversized_unit"`` (a single unit larger than ``recent_tokens`` is kept whole).
    """

    session_id: str
    system: str
    tools: tuple[Mapping[str, Any], ...]
    messages: tuple[ViewMessage, ...]
    tokens: ComponentTokens
    budget: ContextBudget
    epoch: int = 0
    first_retained_seq: int | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    status: str = "ok"


MaterializedContext = ContextView


@dataclass(frozen=True, slots=True)
class RecalledEvent:
    """One original event returned by ``recall``: its ``seq``, ``kind``, text and estimated ``tokens``."""

    seq: int
    kind: str
    text: str
    tokens: int


class ContextOverflow(Exception):
    """Raised when even the hard budget cannot hold the request; ``breakdown`` has the tokens."""

    def __init__(self, message: str, breakdown: Mapping[str, int]):
        self.message = message
        self.breakdown = dict(breakdown)
        parts = ", ".join(f"{k}={v}" for k, v in self.breakdown.items())
        super().__init__(f"{message} ({parts})")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across process pools (bench workers)
        return type(self), (self.message, self.breakdown), self.__dict__


@runtime_checkable
class Estimator(Protocol):
    """A conservative token estimator for one model family (spec: "Bounded materialization").

    :class:`latch.estimators.HeuristicEstimator` is the built-in one; a plugin supplies others through
    the ``latch_select_estimator`` hook. An estimator whose counts are a provider's exact tokenizer may
    also set ``EXACT = True`` and ``TOKENIZER`` (its name), and may follow
    :class:`latch.estimators.ChatFraming`.
    """

    name: str

    def estimate(self, text: str) -> int:
        """Tokens of ``text`` (>= 0; 0 only for ``""``)."""
        ...

    def estimate_batch(self, texts: Iterable[str]) -> np.ndarray:
        """Tokens of each text: a numpy ``int64`` array, one entry per text."""
        ...

    def image_tokens(self, width: int | None, height: int | None) -> int:
        """Tokens of one image of ``width`` x ``height`` pixels; a conservative fallback when either
        is unknown (``None``). Never derived from the encoded size."""
        ...


@runtime_checkable
class CanonicalStateView(Protocol):
    """What an engine reads of a session's canonical state (:class:`latch.kernel.CanonicalState`)
    at one event (spec: "Cache epochs and working memory").

    ``revision`` counts the state's changes; ``is_empty`` says :meth:`render` has nothing to write.
    :meth:`render` returns the state's text within ``budget_tokens`` tokens as counted by ``estimate``
    (``goal_stated``: the goal line only says it is unchanged). The built-in engine also reads, when
    present: ``goal`` (str or ``None``), ``goal_line`` (str), ``update_key`` (str), ``current_passes``
    (frozenset of requirement keys), ``repeated_failures(n)`` (dicts) and ``recent_files(n)`` (paths).
    """

    @property
    def revision(self) -> int: ...

    @property
    def is_empty(self) -> bool: ...

    def render(self, budget_tokens: int, estimate: Callable[[str], int], *, goal_stated: bool = False) -> str: ...


@runtime_checkable
class SessionReader(Protocol):
    """Read-only access to one session's durable history (no SQLite handle)."""

    session_id: str

    def events(
        self, *, after_seq: int = 0, until_seq: int | None = None, kinds: Sequence[str] | None = None
    ) -> Iterator[Any]: ...

    def search(
        self,
        query: str,
        *,
        limit: int = 20,
        before_seq: int | None = None,
        until_seq: int | None = None,
        mode: str = "or",
    ) -> list[Any]: ...

    def max_seq(self) -> int: ...

    def get_artifact(self, sha256: str) -> tuple[MediaRef, bytes]: ...

    def canonical_state(self, until_seq: int | None = None) -> CanonicalStateView: ...


@runtime_checkable
class KernelWriter(Protocol):
    """The only write path an engine has: its own records in its own stream.

    A record is ``(kind, at_seq, payload)``: ``at_seq`` anchors it to the event
    log (the last event the engine had seen), ``payload`` is JSON-ready.
    ``append_many`` writes a batch in one transaction (all or nothing);
    ``records`` returns ``(id, kind, at_seq, payload)`` in append order, only
    ids above ``after_id``.
    """

    def append(self, kind: str, at_seq: int, payload: Mapping[str, Any]) -> int: ...

    def append_many(self, records: Sequence[tuple[str, int, Mapping[str, Any]]]) -> list[int]: ...

    def records(
        self, kinds: Sequence[str] | None = None, *, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]: ...


@runtime_checkable
class TokenCountCache(Protocol):
    """Durable exact token counts of one session's events, per tokenizer.

    A count is that of one provider-visible message rendered from event ``seq`` (content, calls, ids,
    media and message overhead, as :meth:`latch.engine.units.TokenCounter.message` prices it);
    ``digest`` identifies the rendering (the same event may be rendered differently by another
    engine), so a count is only reused for the same bytes. ``tokenizer`` is the exact estimator's
    ``TOKENIZER`` name. ``get`` returns ``None`` when nothing was recorded; ``put`` records (it may
    buffer; the host makes it durable) and never replaces a recorded count.
    """

    def get(self, tokenizer: str, seq: int, digest: str) -> int | None: ...

    def put(self, tokenizer: str, seq: int, digest: str, tokens: int) -> None: ...


@runtime_checkable
class ContextEngine(Protocol):
    """The port every context engine implements."""

    @property
    def config(self) -> Mapping[str, Any]: ...

    def set_config(self, config: Mapping[str, Any]) -> None: ...

    def set_estimator(self, estimator: Estimator) -> None: ...

    def default_budget(self) -> ContextBudget: ...

    def materialize(self, request: ContextRequest) -> ContextView: ...

    def manual_compact(self, reason: str = "manual") -> None: ...

    def recall(self, query: str, *, limit_tokens: int = 4000, until_seq: int | None = None) -> list[RecalledEvent]: ...


@dataclass(frozen=True)
class EngineProfile:
    """The durable/effective profile an engine is built from (one session)."""

    session_id: str
    model: str | None
    reader: SessionReader
    writer: KernelWriter
    config: Mapping[str, Any] = field(default_factory=dict)
    estimator: Estimator | None = None
    parent_session_id: str | None = None
    token_counts: TokenCountCache | None = None  # exact per-event counts; used only with an exact estimator


ContextEngineFactory = Callable[[EngineProfile], ContextEngine]
