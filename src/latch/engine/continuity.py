"""ContinuityEngine: the default :class:`~latch.port.ContextEngine` (spec: "Bounded
materialization", "Cache epochs and working memory", "Context metrics").

Every request gets a view built from the durable log, shaped as one *cache epoch*::

    system:   request.system_prompt                                   (provider system field)
    tools:    request.tools
    messages: [session context]                                       first message, stable
              [KernelContext snapshot]                                starts the epoch
              unit, unit, ..., [KernelContext delta], unit, ...       append-only

Within an epoch each request is the previous request plus a new tail, byte for byte on
:func:`~latch.engine.units.request_lines`: newly completed units are appended, then a delta when
something changed (a canonical state whose update key differs, i.e. something the conversation does not
show changed: the full current state, its goal stated once per epoch; a changed extension; archival
originals recalled for a new user turn or for the agent's new work, the identifiers of its latest turn and
tool results; a re-ground instruction when an active failure lineage, the unchanged writer blocker included,
reaches :data:`REGROUND_AFTER` failures: once per lineage and epoch, a snapshot counting the lineages its state
already shows). Recall and the episode index only reach the archival region (``seq < epoch start``). A
snapshot carries the canonical state with its working set (what the agent read, changed and ran), the
bodies of skills the agent loaded that the epoch no longer holds (at most :data:`SKILL_TOKENS`), the episode
index (at least :data:`INDEX_FLOOR_TOKENS` when the room allows) and recalled originals. Rotation starts a
new epoch (a fresh snapshot, then the newest whole units up to three quarters of the effective ``recent_tokens``) when the epoch's conversation exceeds
``recent_tokens`` (reason ``"recent_tokens"``), when kernel deltas would push the request over the
hard budget (``"hard_budget"``), when system/tools/session context change
(``"instructions_changed"``) or after :meth:`ContinuityEngine.manual_compact`
(``"manual_compact"``, keeping no earlier conversation). Nothing is ever compacted automatically
and rotation deletes nothing.

Budget (tokens), allocated in the spec's priority order: tools and extension are reserved first,
then the instructions (system prompt and session context) and the canonical state (its whole
render budget, ``[context] state_tokens``, is reserved; it is rendered only when sent); the hard
budget lowers ``recent_tokens`` when needed; recalled originals and the episode index share what
is left after ``recent_tokens``, at most ``[context] recall_tokens`` per epoch: half for the
snapshot (the episode index a quarter of that, raised towards :data:`INDEX_FLOOR_TOKENS` with what the
state's reservation left unused, so recall keeps its share), the rest for recall deltas of later user turns
and work (``episode_tokens`` is inside ``recall_tokens``); loaded skill bodies come first, within
:data:`SKILL_TOKENS` and the room left. ``instructions + state + recent + recall + tools + extension <=
window - reserve`` always holds; a single unit that cannot fit
raises :class:`~latch.port.ContextOverflow` with the breakdown.

Metrics (``view.metrics`` and the ``materialization`` record): ``generation``,
``epoch_start_seq``, ``first_retained_seq``, ``until_seq``, ``events``, ``episodes``, ``units``,
``span_user_turns``, ``rotated``, ``rotation_reason`` and ``retained_tokens`` (of the epoch's
start), ``left_tokens`` (left working memory since the previous request), ``request_tokens``,
``common_prefix_tokens`` and ``cacheability`` (their ratio, on the canonical serialization),
``hard_limit_tokens``, ``reserve_tokens``, ``recent_limit_tokens`` (effective), ``recall_limit_tokens``,
``headroom_tokens``, ``kernel_messages``, ``recalled_events``, ``image_count``, ``image_tokens``,
``components`` and ``provider``: the latest provider usage with ``prefix_utilization``
(cache_read / the previous request's common prefix) and ``cache_hit_rate`` (cache_read /
(cache_read + input + cache_write)); unknown stays ``None``.

Durable records, written only through the :class:`~latch.port.KernelWriter` in one
transaction per request: ``epoch``, ``kernel_context`` (the exact text as component ``parts``),
``manual_compact`` and ``materialization`` (the metrics). A new engine on the same stream loads
the last ``epoch`` record, every ``kernel_context`` revision after it and the epoch's events, and
produces byte-identical next views (resume equivalence).
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .. import hotpaths
from ..config import budget_for_model, state_tokens, validate_config
from ..config import recall_tokens as config_recall_tokens
from ..events import AssistantMessage, SystemNote, ToolCall, ToolResult, Usage, UserMessage
from ..port import (
    CanonicalStateView,
    ComponentTokens,
    ContextBudget,
    ContextOverflow,
    ContextRequest,
    ContextView,
    EngineProfile,
    Estimator,
    KernelWriter,
    RecalledEvent,
    SessionReader,
    TokenCountCache,
    ViewMessage,
)
from ..records import dataclass
from . import recall as recall_mod
from .episodes import EpisodeIndex
from .units import (
    MESSAGE_OVERHEAD_TOKENS,
    TokenCounter,
    Unit,
    UnitBuilder,
    header_lines,
    message_line,
    render_session_context,
    resolve_estimator,
)

__all__ = ["ContinuityEngine", "ENGINE_NAME", "INDEX_ENTRIES", "RECORD_KINDS", "REGROUND_AFTER"]

ENGINE_NAME = "continuity"
INDEX_ENTRIES = 16
INDEX_FLOOR_TOKENS = 512
REGROUND_AFTER = 3
"""An active failure lineage (same tool, same error signature, not closed by a success) that failed this many
times gets a re-ground instruction in the next delta (spec: "Cache epochs and working memory")."""
"""A snapshot after a rotation gives the episode index at least this many tokens when the room allows."""
WORK_TEXTS = 4
WORK_CHARS = 2_000
"""Recall follows the work: the latest assistant turn and up to ``WORK_TEXTS - 1`` of its tool results, each
cut to ``WORK_CHARS`` characters, join the user's latest turn in the recall query."""
SKILL_TOOLS = frozenset({"load_skill"})
"""Tools whose successful result is a skill body the agent loaded: retained verbatim across rotations."""
SKILL_TOKENS = 4_000
"""At most this many tokens of loaded skill bodies (newest load first) in a snapshot; the others are named."""
EPOCH, KERNEL, MATERIALIZATION, COMPACT = "epoch", "kernel_context", "materialization", "manual_compact"
RECORD_KINDS = (EPOCH, KERNEL, MATERIALIZATION, COMPACT)
_COMPONENTS = ("state", "extension", "episode", "recall")
STATE_SHARE = 4
"""The canonical state renders within ``[context] state_tokens`` and at most 1/STATE_SHARE of what
instructions, tools and extension leave."""
_READ_CHUNK = 50_000  # seqs per read while loading a long history


def _episode_index() -> Any:
    """A fresh :class:`latch.engine.episodes.EpisodeIndex`."""
    return EpisodeIndex()


def _arg_paths(call: ToolCall) -> list[str]:
    """File paths named by a tool call's JSON arguments (:meth:`ToolCall.paths`), shorter than 300 characters."""
    return [p for p in call.paths() if len(p) < 300]


_PATH_CALLS = 64
"""Tool calls :class:`_RecentPaths` lets wait before it reads them (bounded memory between requests)."""


class _RecentPaths:
    """The newest distinct file paths tool calls named (at most ``n``, the oldest mention first), read lazily.

    Equal to a ``deque(maxlen=n)`` that each path of each call, in order, moves to its end; but a call's arguments
    are parsed for paths only when :meth:`paths` is read (or more than ``wait`` calls wait), and then from the
    newest call back until ``n`` distinct paths are found: an older call cannot change the answer.
    """

    __slots__ = ("n", "wait", "_known", "_calls")

    def __init__(self, n: int = 8, wait: int = _PATH_CALLS):
        self.n, self.wait = n, wait
        self._known: list[str] = []  # the answer as of the calls before _calls
        self._calls: list[ToolCall] = []  # calls since, oldest first

    def add(self, calls: Sequence[ToolCall]) -> None:
        self._calls.extend(calls)
        if len(self._calls) > self.wait:
            self.paths()

    def paths(self) -> list[str]:
        if self._calls:
            newest: dict[str, None] = {}  # newest mention first
            for c in reversed(self._calls):
                for p in reversed(_arg_paths(c)):
                    newest.setdefault(p)
                if len(newest) >= self.n:
                    break
            merged = [*(p for p in self._known if p not in newest), *reversed(newest)]
            self._known = merged[-self.n :]
            self._calls.clear()
        return list(self._known)


def _section(tag: str, body: str, attrs: str = "") -> str:
    return f"<{tag}{attrs}>\n{body}\n</{tag}>\n"


def _state_body(section: str) -> str:
    """The rendered state inside a ``<canonical-state revision="N">`` section."""
    return section.split("\n", 1)[1].rsplit("\n</canonical-state>", 1)[0]


def _states_goal(body: str, state: CanonicalStateView) -> bool:
    """Whether the rendered state ``body`` states ``state``'s goal word for word (its ``goal_line``)."""
    line = getattr(state, "goal_line", None)
    if not isinstance(line, str) or not getattr(state, "goal", None):
        return False
    return "\n" + line + "\n" in "\n" + body + "\n"


def _skill_name(call: ToolCall) -> str:
    """The skill a ``load_skill`` call names (its ``name`` argument; the raw arguments when unreadable)."""
    try:
        args = json.loads(call.arguments)
    except ValueError:
        return call.arguments
    name = args.get("name") if isinstance(args, dict) else None
    return name if isinstance(name, str) else call.arguments


def _update_key(state: CanonicalStateView) -> str | None:
    """The state's :attr:`~latch.kernel.state.CanonicalState.update_key` (``None``: a state without one)."""
    key = getattr(state, "update_key", None)
    return key if isinstance(key, str) else None


def _current_passes(state: CanonicalStateView) -> frozenset[str] | None:
    """The state's :attr:`~latch.kernel.state.CanonicalState.current_passes` (``None``: a state without them)."""
    passes = getattr(state, "current_passes", None)
    return passes if isinstance(passes, frozenset) else None


def _repeated(state: CanonicalStateView) -> list[dict[str, Any]]:
    """The state's lineages at :data:`REGROUND_AFTER` failures or more (``[]``: a state without lineages)."""
    repeated = getattr(state, "repeated_failures", None)
    return list(repeated(REGROUND_AFTER)) if callable(repeated) else []


def _lineage_key(f: Mapping[str, Any]) -> str:
    return f"{f['tool']}\n{f['signature']}\n{f['first_seq']}"


def _reground_section(lineages: Sequence[Mapping[str, Any]]) -> str:
    """The re-ground instruction naming ``lineages`` (each cut to one line)."""

    def one(text: Any, limit: int) -> str:
        line = " ".join(str(text).split())
        return line if len(line) <= limit else line[: limit - 1] + "…"

    lines = [
        "The same action keeps failing the same way. Stop repeating it: re-read the goal and the files "
        "involved, check what you assumed, and change approach."
    ]
    for f in lineages:
        last = f" — last: {one(f['excerpt'], 200)}" if f.get("excerpt") and f["excerpt"] != f["signature"] else ""
        lines.append(f"- {one(f['tool'], 60)} ×{f['count']}: {one(f['signature'], 200)}{last}")
    return _section("reground", "\n".join(lines))


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


class _KernelMessage:
    """One durable KernelContext message: its exact text as ``(component, text)`` parts."""

    __slots__ = (
        "at_seq",
        "type",
        "revision",
        "parts",
        "message",
        "tokens",
        "recalled",
        "anchor",
        "query",
        "state_revision",
        "extension",
        "state_key",
        "passes",
        "reground",
    )

    def __init__(
        self,
        at_seq: int,
        type_: str,
        revision: int,
        parts: Sequence[Sequence[str]],
        counter: TokenCounter,
        *,
        recalled: Sequence[int] = (),
        anchor: int = 0,
        query: str | None = None,
        state_revision: int = 0,
        extension: str | None = None,
        state_key: str | None = None,
        passes: Sequence[str] | None = None,
        reground: Sequence[str] = (),
    ):
        self.at_seq = at_seq
        self.type = type_
        self.revision = revision
        self.parts = [(c, t) for c, t in parts]
        self.message = ViewMessage(role="user", content="".join(t for _, t in self.parts), kind="kernel_context")
        tokens = dict.fromkeys(_COMPONENTS, 0)
        tokens["state"] = counter.overhead
        for c, t in self.parts:
            tokens[c] += counter.text(t)
        if counter.exact:  # parts tokenized apart can merge at their seams: the whole message is the count
            tokens["state"] += counter.message(self.message) - sum(tokens.values())
        self.tokens = tokens
        self.recalled = tuple(recalled)
        self.anchor = anchor
        self.query = query
        self.state_revision = state_revision
        self.extension = extension
        self.state_key = state_key
        self.passes = None if passes is None else tuple(passes)
        self.reground = tuple(reground)  # keys of the failure lineages this message re-grounded (or showed)

    @property
    def total(self) -> int:
        return sum(self.tokens.values())

    def payload(self, generation: int) -> dict[str, Any]:
        return {
            "generation": generation,
            "revision": self.revision,
            "type": self.type,
            "parts": [[c, t] for c, t in self.parts],
            "recalled": list(self.recalled),
            "anchor": self.anchor,
            "query": self.query,
            "state_revision": self.state_revision,
            "extension": self.extension,
            "state_key": self.state_key,
            "passes": None if self.passes is None else list(self.passes),
            "reground": list(self.reground),
            "tokens": dict(self.tokens),
        }

    @classmethod
    def from_record(cls, at_seq: int, p: Mapping[str, Any], counter: TokenCounter) -> _KernelMessage:
        return cls(
            at_seq,
            p["type"],
            p["revision"],
            p["parts"],
            counter,
            recalled=p["recalled"],
            anchor=p["anchor"],
            query=p["query"],
            state_revision=p["state_revision"],
            extension=p["extension"],
            state_key=p.get("state_key"),
            passes=p.get("passes"),
            reground=p.get("reground", ()),
        )


class _Epoch:
    """A cache epoch: its complete units (with prefix sums) and its append-only message list.

    ``units`` holds every complete unit with ``first_seq >= start_seq``; the first ``shown`` are in
    ``messages``, whose element 0 is the session-context message. ``cum[i]`` is the tokens of
    ``messages[:i]``. Generation 0 is the collecting state before the first materialization.
    """

    def __init__(self, generation: int, start_seq: int, reason: str, retained_tokens: int, fingerprint: str):
        self.generation = generation
        self.start_seq = start_seq
        self.reason = reason
        self.retained_tokens = retained_tokens
        self.fingerprint = fingerprint
        self.units: list[Unit] = []
        self.prefix: list[int] = [0]
        self.dropped = False  # generation 0 forgot old units (they can never be retained)
        self.shown = 0
        self.user_turns = 0
        self.images = [0, 0]
        self.messages: list[ViewMessage] = []
        self.lines: list[bytes] = []
        self.cum: list[int] = [0]
        self.kernel: list[_KernelMessage] = []
        self.kernel_tokens = dict.fromkeys(_COMPONENTS, 0)
        self.state_revision = 0
        self.state_text = ""  # body of the newest state section in this epoch
        self.state_key: str | None = None  # update key of the newest state sent in this epoch
        self.passes: frozenset[str] = frozenset()  # the passes that state showed as current
        self.snapshot_state = ""  # body of the state section of the epoch's snapshot
        self.extension = ""
        self.anchor = 0
        self.work_anchor = 0  # the latest assistant turn whose work the epoch's recall has searched for
        self.query: str | None = None
        self.recalled: set[int] = set()
        self.regrounded: set[str] = set()  # failure lineages re-grounded (or shown by the snapshot) in this epoch

    def add_unit(self, u: Unit, counter: TokenCounter) -> None:
        self.units.append(u)
        self.prefix.append(self.prefix[-1] + u.cost(counter))

    def trim_front(self, keep_tokens: int) -> None:
        """Generation 0: forget units no first epoch can retain (bounded memory on a long history)."""
        i = hotpaths.suffix_start(self.prefix, keep_tokens)
        if i > 0:
            base = self.prefix[i]
            self.units = self.units[i:]
            self.prefix = [p - base for p in self.prefix[i:]]
            self.dropped = True

    @property
    def conv_tokens(self) -> int:
        return self.prefix[-1]

    @property
    def shown_conv_tokens(self) -> int:
        return self.prefix[self.shown]

    @property
    def kernel_total(self) -> int:
        return sum(self.kernel_tokens.values())

    @property
    def recall_used(self) -> int:
        return self.kernel_tokens["recall"] + self.kernel_tokens["episode"]

    def _push(self, m: ViewMessage, tokens: int) -> None:
        self.messages.append(m)
        self.lines.append(message_line(m))
        self.cum.append(self.cum[-1] + tokens)

    def push_session(self, m: ViewMessage, tokens: int) -> None:
        self._push(m, tokens)

    def show_units(self, upto: int | None = None) -> None:
        """Append the messages of units ``shown..upto`` (default: every complete unit)."""
        end = len(self.units) if upto is None else upto
        for u in self.units[self.shown : end]:
            for m, t in zip(u.messages, u.msg_tokens, strict=False):
                self._push(m, t)
            self.user_turns += u.user_turn
            self.images[0] += u.images[0]
            self.images[1] += u.images[1]
        self.shown = max(self.shown, end)

    def push_kernel(self, km: _KernelMessage) -> None:
        self.kernel.append(km)
        self._push(km.message, km.total)
        for c in _COMPONENTS:
            self.kernel_tokens[c] += km.tokens[c]
        if km.state_revision:
            self.state_revision = max(self.state_revision, km.state_revision)
            sec = next(t for c, t in km.parts if c == "state" and t.startswith("<canonical-state"))
            self.state_text = _state_body(sec)
            self.state_key = km.state_key
            self.passes = frozenset(km.passes or ())
            if km.type == "snapshot":
                self.snapshot_state = self.state_text
        if km.extension is not None:
            self.extension = km.extension
        self.anchor = max(self.anchor, km.anchor)
        if km.query is not None:
            self.query = km.query
        self.recalled.update(km.recalled)
        self.regrounded.update(km.reground)


@dataclass
class _Prev:
    """The previous materialization of this stream (prefix and provider-usage metrics)."""

    until_seq: int
    epoch: _Epoch
    n_messages: int
    header: tuple[str, str]  # sha256 of the system line and of the tools line
    common_prefix_tokens: int


@dataclass
class _Request:
    """Per-request quantities shared by the planning steps."""

    request: ContextRequest
    until: int
    hard: int
    fingerprint: str
    header: tuple[str, str]
    session_msg: ViewMessage
    session_t: int
    system_t: int
    tools_t: int
    state: CanonicalStateView
    state_rev: int
    state_budget: int
    ext_sec: str
    base: int
    recent_eff: int
    recall_cap: int
    query_texts: list[str]
    files: list[str]
    breakdown: dict[str, int]

    @property
    def instr_t(self) -> int:
        return self.system_t + self.session_t


class ContinuityEngine:
    """The default context engine (see the module docstring). Build it with :meth:`for_model`.

    One engine serves one session through ``reader`` and one record stream through ``writer``.
    Not thread-safe: the host calls it from its agent loop.
    """

    PLUGIN_NAME = ENGINE_NAME
    HYSTERETIC_EPOCHS = True  # replay checks rotations <= conversation / (0.25 x recent) + 1
    KEEPS_LATEST_INSTRUCTION = True  # the canonical state renders it: replay checks it is in every view
    DESCRIPTION = "Cache epochs over the durable log: canonical state, whole-unit recent memory, FTS recall, episodes."

    def __init__(
        self,
        model: str | None,
        *,
        reader: SessionReader,
        writer: KernelWriter,
        config: Mapping[str, Any] | None = None,
        estimator: Estimator | None = None,
        token_counts: TokenCountCache | None = None,
    ):
        self.model = model
        self._reader = reader
        self._writer = writer
        self._config: dict[str, Any] = validate_config(config or {}, "engine config")
        self._token_counts = token_counts
        self._counter = TokenCounter(resolve_estimator(model, estimator), token_counts)
        self._loaded = False

    @classmethod
    def for_model(
        cls,
        model: str | None,
        *,
        reader: SessionReader,
        writer: KernelWriter,
        config: Mapping[str, Any] | None = None,
        estimator: Estimator | None = None,
        token_counts: TokenCountCache | None = None,
    ) -> ContinuityEngine:
        """The engine of one session for ``model``: budget from ``config`` (``[models.<model>]``,
        ``[context]``), estimator ``estimator`` or the model's own; ``token_counts`` (a
        :class:`~latch.port.TokenCountCache`) holds the durable per-event counts of an exact estimator."""
        return cls(model, reader=reader, writer=writer, config=config, estimator=estimator, token_counts=token_counts)

    @classmethod
    def factory(cls, profile: EngineProfile) -> ContinuityEngine:
        """This engine's :data:`~latch.port.ContextEngineFactory`: exactly :meth:`for_model`."""
        return cls.for_model(
            profile.model,
            reader=profile.reader,
            writer=profile.writer,
            config=profile.config,
            estimator=profile.estimator,
            token_counts=profile.token_counts,
        )

    # ------------------------------------------------------------ port: configuration
    @property
    def config(self) -> Mapping[str, Any]:
        return self._config

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Replace the configuration (``ConfigError`` on a bad value); budgets apply from the next request."""
        self._config = validate_config(config, "engine config")

    def set_estimator(self, estimator: Estimator) -> None:
        """Estimate with ``estimator`` from now on; the epoch is reloaded from durable records and re-estimated."""
        self._counter = TokenCounter(estimator, self._token_counts)
        self._loaded = False

    @property
    def estimator(self) -> Estimator:
        return self._counter.estimator

    def default_budget(self) -> ContextBudget:
        return budget_for_model(self._config, self.model)

    # ------------------------------------------------------------ loading (resume)
    def _reset(self) -> None:
        self._builder = UnitBuilder()
        self._epoch = _Epoch(0, 1, "", 0, "")
        self._watermark = 0
        self._events = 0
        self._episodes = _episode_index()
        self._last_user: tuple[int, str] = (0, "")
        self._errors: deque[str] = deque(maxlen=3)
        self._paths = _RecentPaths(8)
        self._work: deque[Any] = deque(maxlen=WORK_TEXTS)  # the latest assistant turn and its tool results
        self._work_seq = 0  # seq of the latest assistant turn
        self._skill_calls: dict[str, str] = {}  # load_skill call id → skill name, until its result
        self._skills: dict[str, int] = {}  # skill name → seq of its newest loaded body, in load order
        self._provider: dict[str, Any] | None = None
        self._usage: tuple[int, Usage, int | None] | None = None  # the newest usage not yet in _provider
        self._prev: _Prev | None = None
        self._compact: int | None = None  # start seq of a pending manual compaction
        self._revision = 0  # last KernelContext revision of this stream
        self._recall_cache = recall_mod.RecallCache(self._counter)
        self._state_memo: tuple[tuple[int, int, bool], str, bool] | None = None

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._load()
            self._loaded = True

    def _load(self) -> None:
        """Rebuild the in-memory state from this stream's durable records and the event log."""
        self._reset()
        marks = self._writer.records(kinds=(EPOCH, COMPACT))
        epochs = [r for r in marks if r[1] == EPOCH]
        eid = epochs[-1][0] if epochs else 0
        compacts = [r for r in marks if r[1] == COMPACT and r[0] > eid]
        if compacts:
            self._compact = compacts[-1][3]["start_seq"]
        if not epochs:
            return
        _, _, e_at, ep_p = epochs[-1]
        recs = self._writer.records(kinds=(KERNEL, MATERIALIZATION), after_id=eid)
        mats = [r for r in recs if r[1] == MATERIALIZATION]
        if not mats:
            raise RuntimeError(f"kernel record stream is inconsistent: epoch record {eid} has no materialization")
        w, mp = mats[-1][2], mats[-1][3]
        start = ep_p["start_seq"]
        for chunk in self._read(0, start - 1):  # archival history: episode index and query context only
            self._observe(chunk, feed_units=False)
        ep = _Epoch(ep_p["generation"], start, ep_p["reason"], ep_p["retained_tokens"], ep_p["fingerprint"])
        self._epoch = ep
        for chunk in self._read(start - 1, w):
            self._observe(chunk, feed_units=True)
        session_msg = ViewMessage(role="user", content=ep_p["session_context"], kind="session_context")
        ep.push_session(session_msg, self._counter.message(session_msg))
        closes = [u.close_seq for u in ep.units]
        for _, kind, at, p in recs:
            if kind != KERNEL:
                continue
            km = _KernelMessage.from_record(at, p, self._counter)
            if km.type == "snapshot":
                ep.push_kernel(km)
                ep.show_units(bisect_right(closes, e_at))
            else:
                ep.show_units(bisect_right(closes, at))
                ep.push_kernel(km)
            self._revision = max(self._revision, km.revision)
        ep.show_units(bisect_right(closes, w))
        ep.anchor, ep.query = mp["recall_anchor"], mp["recall_query"]
        ep.work_anchor = mp.get("recall_work_anchor", 0)
        self._watermark = w
        self._provider, self._usage = mp["provider"], None
        self._prev = _Prev(w, ep, len(ep.messages), tuple(mp["header_sha256"]), mp["common_prefix_tokens"])

    def _read(self, after_seq: int, until_seq: int) -> Iterator[list[Any]]:
        """This session's events with ``after_seq < seq <= until_seq``, in bounded chunks."""
        lo = after_seq
        while lo < until_seq:
            hi = min(until_seq, lo + _READ_CHUNK)
            chunk = list(self._reader.events(after_seq=lo, until_seq=hi))
            if chunk:
                yield chunk
            lo = hi

    def _observe(self, chunk: list[Any], *, feed_units: bool) -> None:
        """Account new events: units, episode index, query context, provider usage, event count."""
        feed, counter = self._builder.feed, self._counter
        units, prefix = self._epoch.units, self._epoch.prefix
        for s in chunk:
            ev = s.event
            if feed_units:
                for u in feed(s):  # _Epoch.add_unit in line
                    units.append(u)
                    prefix.append(prefix[-1] + u.cost(counter))
            if isinstance(ev, UserMessage):
                if not ev.is_meta:
                    self._last_user = (s.seq, ev.text)
            elif isinstance(ev, ToolResult):
                if ev.is_error and not ev.missing:
                    self._errors.append(ev.content[:300])
                if not ev.missing:
                    self._work.append(ev)
                skill = self._skill_calls.pop(ev.call_id, None)
                if skill is not None and not (ev.is_error or ev.missing):
                    self._skills.pop(skill, None)
                    self._skills[skill] = s.seq
            elif isinstance(ev, AssistantMessage):
                self._work.clear()
                self._work.append(ev)  # its text is read when a request needs it, not for every event
                self._work_seq = s.seq
                for c in ev.tool_calls:
                    if c.name in SKILL_TOOLS:
                        self._skill_calls[c.id] = _skill_name(c)
                if ev.tool_calls:
                    self._paths.add(ev.tool_calls)  # parsed for paths only when a request falls back on them
            elif isinstance(ev, Usage):
                self._attribute_usage(s.seq, ev)
            elif isinstance(ev, SystemNote) and ev.subtype == "api_error":
                self._errors.append(ev.text[:300])
        if self._episodes is not None:
            self._episodes.extend(chunk)
        self._events += len(chunk)

    def _ingest(self, until_seq: int, keep_tokens: int) -> None:
        for chunk in self._read(self._watermark, until_seq):
            self._observe(chunk, feed_units=True)
            if self._epoch.generation == 0 and self._epoch.conv_tokens > 2 * keep_tokens:
                self._epoch.trim_front(keep_tokens)
        self._watermark = max(self._watermark, until_seq)

    def _attribute_usage(self, seq: int, u: Usage) -> None:
        """Provider usage reported after the previous materialization (of this stream) at ``seq``: kept as read,
        summed up by :meth:`_provider_usage` when a view asks (most usage events are followed by a newer one)."""
        prev = self._prev
        self._usage = (seq, u, prev.common_prefix_tokens if prev is not None and prev.until_seq < seq else None)

    def _provider_usage(self) -> dict[str, Any] | None:
        """The newest provider usage attributed (:meth:`_attribute_usage`) as the view's ``provider`` metrics."""
        if self._usage is not None:
            seq, u, common = self._usage
            self._usage = None
            self._provider = self._usage_metrics(seq, u, common)
        return self._provider

    @staticmethod
    def _usage_metrics(seq: int, u: Usage, common: int | None) -> dict[str, Any]:
        cr, inp, cw = u.cache_read_tokens, u.input_tokens, u.cache_write_tokens
        hit = None
        if cr is not None and inp is not None and cr + inp + (cw or 0) > 0:
            hit = cr / (cr + inp + (cw or 0))
        return {
            "usage_seq": seq,
            "prompt_tokens": u.prompt_tokens,
            "input_tokens": inp,
            "cache_read_tokens": cr,
            "cache_write_tokens": cw,
            "common_prefix_tokens": common,
            "prefix_utilization": (cr / common) if cr is not None and common else None,
            "cache_hit_rate": hit,
        }

    # ------------------------------------------------------------ rendering helpers
    def _files(self, state: CanonicalStateView) -> list[str]:
        """Open files: the canonical state's newest file entries, else paths of recent tool calls.
        The kernel's ``recent_files(n)`` costs O(n); its ``files`` tuple costs O(files) per revision."""
        recent = getattr(state, "recent_files", None)
        entries = recent(8) if callable(recent) else (getattr(state, "files", None) or ())
        found = [f.get("path") if isinstance(f, Mapping) else f for f in entries]
        files = [f for f in found if isinstance(f, str) and f]
        return files[-8:] or self._paths.paths()

    def _kernel_parts(
        self, type_: str, generation: int, revision: int, at_seq: int, sections: Sequence[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        head = f'<kernel-context type="{type_}" generation="{generation}" revision="{revision}" at-seq="{at_seq}">\n'
        if type_ == "snapshot":
            head += (
                "Authoritative task context kept by Latch; a later revision supersedes an earlier one. "
                "Older conversation is archived: the episode index points at it and recalled originals "
                "quote it exactly.\n"
            )
        return [("state", head), *sections, ("state", "</kernel-context>")]

    def _parts_cost(self, parts: Sequence[tuple[str, str]]) -> int:
        """Tokens of a kernel message of ``parts``, an upper bound when they are priced apart: with an exact
        tokenizer, joining two parts can cost up to one more token at their seam (BPE is not additive)."""
        seams = len(parts) - 1 if self._counter.exact and parts else 0
        return self._counter.overhead + sum(self._counter.fixed(t) for _, t in parts) + seams

    def _recall_section(self, items: Sequence[RecalledEvent], before_seq: int) -> str:
        body = "Original events from earlier in this session, found by exact search (oldest first):"
        if items:
            body += "\n" + "\n".join(r.text for r in items)
        return _section("recalled-originals", body, f' before-seq="{before_seq}"')

    def _recall(self, r: _Request, before_seq: int, limit: int, exclude: set[int]) -> tuple[list[RecalledEvent], str]:
        """Recalled originals and their section, within ``limit`` tokens including the section wrapper."""
        budget = limit - self._counter.text(self._recall_section((), before_seq))
        if budget <= 0:
            return [], ""
        items = recall_mod.recall(
            self._reader,
            self._recall_cache,
            recall_mod.query_terms(r.query_texts),
            before_seq=before_seq,
            limit_tokens=budget,
            until_seq=r.until,
            exclude=exclude,
        )
        return (items, self._recall_section(items, before_seq)) if items else ([], "")

    def _skills_section(self, before_seq: int, limit: int) -> tuple[list[int], str]:
        """``(seqs, section)``: the bodies of the skills loaded before ``before_seq`` (no longer in the epoch's
        conversation), verbatim, the newest load first while they fit ``limit`` tokens; the others are named."""
        archived = [(name, seq) for name, seq in self._skills.items() if seq < before_seq]
        if not archived or limit <= 0:
            return [], ""
        head = "Skills loaded earlier in this session, their load_skill results verbatim (follow them):"
        chosen: list[tuple[int, str]] = []
        left: list[str] = []
        for name, seq in reversed(archived):
            (stored,) = self._reader.events(after_seq=seq - 1, until_seq=seq)
            item = self._recall_cache.item(stored)
            trial = sorted([*chosen, (seq, item.text)])
            text = _section("loaded-skills", "\n".join([head, *(t for _, t in trial)]), f' before-seq="{before_seq}"')
            if self._counter.text(text) <= limit:
                chosen = trial
            else:
                left.append(name)
        if not chosen:
            return [], ""
        lines = [head, *(t for _, t in chosen)]
        if left:
            lines.append(f"Also loaded, left out for room (load_skill again when needed): {', '.join(sorted(left))}")
        text = _section("loaded-skills", "\n".join(lines), f' before-seq="{before_seq}"')
        if self._counter.text(text) > limit:  # the names line did not fit: leave it out
            text = _section("loaded-skills", "\n".join(lines[:-1]), f' before-seq="{before_seq}"')
        return [seq for seq, _ in chosen], text

    def _index(self, r: _Request, before_seq: int, limit: int) -> str:
        """The episode-index section over the archival region, within ``limit`` tokens (``""`` when empty)."""
        idx = self._episodes
        if idx is None or before_seq <= 1:
            return ""
        attrs = f' before-seq="{before_seq}"'
        budget = limit - self._counter.text(_section("episode-index", "", attrs))
        if budget <= 0:
            return ""
        entries = idx.select(
            " ".join(t for t in r.query_texts if t), r.files, r.until, k=INDEX_ENTRIES, before_seq=before_seq
        )
        body = idx.render(entries, self._counter.text, budget) if entries else ""
        return _section("episode-index", body, attrs) if body else ""

    # ------------------------------------------------------------ port: materialize
    def materialize(self, request: ContextRequest) -> ContextView:
        """Build the view before one model request (see the module docstring).

        Raises ``ValueError`` for another session or for an ``until_seq`` before this stream's last
        materialization, and :class:`ContextOverflow` (the kernel's ``StateOverflow`` included)
        when even the hard budget cannot hold the request; nothing is written then.
        """
        if request.session_id != self._reader.session_id:
            raise ValueError(
                f"request for session {request.session_id} sent to the engine of session {self._reader.session_id}"
            )
        self._ensure_loaded()
        until = self._reader.max_seq() if request.until_seq is None else request.until_seq
        if until < self._watermark:
            raise ValueError(
                f"materialize(until_seq={until}) is before this stream's last materialization "
                f"(seq {self._watermark}); a record stream only moves forward"
            )
        budget = request.budget or self.default_budget()
        self._ingest(until, budget.recent_tokens)
        r = self._prepare(request, until, budget)
        ep = self._epoch

        reason: str | None = None
        if self._compact is not None:
            reason = "manual_compact"
        elif ep.generation == 0:
            reason = "initial"
        elif r.fingerprint != ep.fingerprint:
            reason = "instructions_changed"
        elif ep.conv_tokens > r.recent_eff and len(ep.units) > 1:
            reason = "recent_tokens"
        delta = None
        if reason is None:
            delta, overflow = self._plan_delta(r, ep)
            if overflow:
                reason = "hard_budget"
        if reason is not None:
            new_ep, records, left = self._plan_epoch(reason, r)
            view, metrics = self._view(r, new_ep, None, left, budget)
        else:
            new_ep, records = ep, []
            view, metrics = self._view(r, ep, delta, 0, budget)
            if delta is not None:
                records.append((KERNEL, until, delta.payload(ep.generation)))
        new_user = self._last_user[0] > new_ep.anchor
        anchor = self._last_user[0] if new_user else new_ep.anchor
        query = request.query if request.query is not None else new_ep.query
        records.append(
            (
                MATERIALIZATION,
                until,
                {
                    **metrics,
                    "status": view.status,
                    "header_sha256": list(r.header),
                    "recall_anchor": anchor,
                    "recall_query": query,
                    "recall_work_anchor": self._work_seq,
                },
            )
        )
        self._writer.append_many(records)
        # commit (the records are durable)
        if new_ep is ep:
            ep.show_units()
            if delta is not None:
                ep.push_kernel(delta)
        else:
            self._epoch = new_ep
            self._compact = None
        self._revision = max([self._revision, *(k.revision for k in self._epoch.kernel)])
        self._epoch.anchor, self._epoch.query = anchor, query
        self._epoch.work_anchor = self._work_seq
        self._prev = _Prev(until, self._epoch, len(self._epoch.messages), r.header, metrics["common_prefix_tokens"])
        return view

    def _prepare(self, request: ContextRequest, until: int, budget: ContextBudget) -> _Request:
        """Fixed costs, reservations and effective limits of one request."""
        c = self._counter
        hard = budget.hard_limit_tokens
        session_msg = render_session_context(request.session_context)
        head = header_lines(request.system_prompt, request.tools)
        header = (_digest(head[0]), _digest(head[1]))
        fingerprint = _digest(b"\n".join([*head, message_line(session_msg)]))
        system_t = c.system(request.system_prompt)
        tools_t = c.tools(request.tools)
        state = self._reader.canonical_state(until)
        state_rev = int(getattr(state, "revision", 0) or 0)
        session_t = (
            c.message(session_msg) if c.framing is not None else MESSAGE_OVERHEAD_TOKENS + c.fixed(session_msg.content)
        )
        ext_sec = _section("extension", request.extension) if request.extension else ""
        state_budget = min(
            (hard - system_t - session_t - tools_t - c.fixed(ext_sec)) // STATE_SHARE,
            state_tokens(self._config, budget.recent_tokens),
        )
        # reserve the state's whole budget: the state is rendered only when it will be sent
        snap = self._kernel_parts(
            "snapshot",
            self._epoch.generation + 1,
            self._revision + 1,
            until,
            [("state", self._state_placeholder(state_rev)), *([("extension", ext_sec)] if ext_sec else [])],
        )
        base = system_t + session_t + tools_t + self._parts_cost(snap) + max(state_budget, 0)
        breakdown = {
            "instructions_tokens": system_t + session_t,
            "tools_tokens": tools_t,
            "state_and_extension_tokens": base - system_t - session_t - tools_t,
            "hard_limit_tokens": hard,
        }
        if base > hard or state_budget <= 0:
            raise ContextOverflow(
                "instructions, tools, extension and canonical state alone exceed the hard budget", breakdown
            )
        recent_eff = min(budget.recent_tokens, hard - base)
        recall_cap = max(0, min(config_recall_tokens(self._config, recent_eff), hard - base - recent_eff))
        goal = getattr(state, "goal", None)
        files = self._files(state)
        work = [e.searchable_text()[:WORK_CHARS] for e in self._work]
        query_texts = [
            request.query or "",
            self._last_user[1],
            *work,
            goal if isinstance(goal, str) else "",
            " ".join(files),
            *self._errors,
        ]
        return _Request(
            request,
            until,
            hard,
            fingerprint,
            header,
            session_msg,
            session_t,
            system_t,
            tools_t,
            state,
            state_rev,
            state_budget,
            ext_sec,
            base,
            recent_eff,
            recall_cap,
            query_texts,
            files,
            breakdown,
        )

    @staticmethod
    def _state_placeholder(revision: int) -> str:
        return _section("canonical-state", "(no canonical state recorded yet)", f' revision="{revision}"')

    def _state_section(self, r: _Request, goal_stated: bool = False) -> tuple[str, bool]:
        """``(canonical-state section, has content)``, rendered within ``r.state_budget`` tokens
        (memoized per revision, budget and goal form: rendering costs as much as the state is long);
        ``goal_stated``: the goal line says it is unchanged since the epoch's snapshot."""
        key = (r.state_rev, r.state_budget, goal_stated)
        if self._state_memo is None or self._state_memo[0] != key:
            empty = bool(getattr(r.state, "is_empty", False))
            body = (
                ""
                if empty
                else (
                    (
                        r.state.render(r.state_budget, self._counter.text, goal_stated=True)
                        if goal_stated
                        else r.state.render(r.state_budget, self._counter.text)
                    )
                    or ""
                )
            )
            sec = (
                _section("canonical-state", body, f' revision="{r.state_rev}"')
                if body
                else self._state_placeholder(r.state_rev)
            )
            self._state_memo = (key, sec, bool(body))
        return self._state_memo[1], self._state_memo[2]

    def _plan_delta(self, r: _Request, ep: _Epoch) -> tuple[_KernelMessage | None, bool]:
        """The delta to append to ``ep`` (or ``None``), and whether the request would exceed the hard budget."""
        ext = r.request.extension
        sections: list[tuple[str, str]] = []
        new_user = self._last_user[0] > ep.anchor or (r.request.query is not None and r.request.query != ep.query)
        key: str | None = None
        passes: frozenset[str] | None = None
        if r.state_rev > ep.state_revision:
            key = _update_key(r.state)
            passes = _current_passes(r.state)
            # something the conversation does not show changed, or a pass the epoch showed current went stale
            if key is None or key != ep.state_key or not ep.passes <= (passes or frozenset()):
                goal_stated = key is not None and _states_goal(ep.snapshot_state, r.state)
                state_sec, has_state = self._state_section(r, goal_stated)
                if has_state and _state_body(state_sec) != ep.state_text:
                    sections.append(("state", state_sec))
        fresh = [f for f in _repeated(r.state) if _lineage_key(f) not in ep.regrounded]
        if fresh:
            sections.append(("state", _reground_section(fresh)))
        if ext != ep.extension:
            sections.append(("extension", r.ext_sec or _section("extension", "(none)")))
        fixed = r.instr_t + r.tools_t + ep.kernel_total + ep.conv_tokens
        revision = self._revision + 1
        wrapper = self._parts_cost(self._kernel_parts("delta", ep.generation, revision, r.until, ()))
        cost = self._parts_cost(self._kernel_parts("delta", ep.generation, revision, r.until, sections))
        if fixed + (cost if sections else 0) > r.hard:
            return None, True
        items: list[RecalledEvent] = []
        if new_user or self._work_seq > ep.work_anchor:  # a new user turn, or new work by the agent
            left = r.recall_cap - ep.kernel_tokens["recall"]  # the epoch's recalled originals (the index apart)
            limit = min(left, r.hard - fixed - (cost if sections else wrapper))
            if not new_user:  # the agent's own work takes at most half of what is left: a user's turn may ask
                limit = min(limit, left // 2)
            items, text = self._recall(r, ep.start_seq, limit, ep.recalled)
            if items:
                sections.append(("recall", text))
        if not sections:
            return None, False
        with_state = any(c == "state" and t.startswith("<canonical-state") for c, t in sections)
        delta = _KernelMessage(
            r.until,
            "delta",
            revision,
            self._kernel_parts("delta", ep.generation, revision, r.until, sections),
            self._counter,
            recalled=[i.seq for i in items],
            anchor=self._last_user[0] if new_user else 0,
            query=r.request.query,
            state_revision=r.state_rev if with_state else 0,
            extension=ext if ext != ep.extension else None,
            state_key=key if with_state else None,
            passes=sorted(passes or ()) if with_state else None,
            reground=[_lineage_key(f) for f in fresh],
        )
        assert fixed + delta.total <= r.hard, "recall was sized to the room left"
        return delta, False

    def _plan_epoch(self, reason: str, r: _Request) -> tuple[_Epoch, list[tuple[str, int, dict[str, Any]]], int]:
        """A new epoch (not yet committed): kept units, snapshot, records, and the tokens that left."""
        old = self._epoch
        units, prefix = old.units, old.prefix
        n = len(units)
        compact = self._compact if self._compact is not None else 0
        if reason == "manual_compact":
            i = n
            while i > 0 and units[i - 1].first_seq >= compact:
                i -= 1
        elif reason in ("initial", "instructions_changed") and not old.dropped and prefix[n] <= r.recent_eff:
            i = 0
        else:
            i = hotpaths.suffix_start(prefix, r.recent_eff * 3 // 4)
        kept = units[i:]
        kept_t = prefix[n] - prefix[i]
        if kept:
            start_seq = kept[0].first_seq
        elif reason == "manual_compact":
            start_seq = compact
        else:
            start_seq = self._builder.pending_seq or r.until + 1
        state_sec, has_state = self._state_section(r)
        fixed = [("state", state_sec), *([("extension", r.ext_sec)] if r.ext_sec else [])]
        room = (
            r.hard
            - r.instr_t
            - r.tools_t
            - kept_t
            - self._parts_cost(self._kernel_parts("snapshot", old.generation + 1, self._revision + 1, r.until, fixed))
        )
        if room < 0:
            u = kept[-1]
            raise ContextOverflow(
                f"conversation unit seq {u.first_seq}..{u.close_seq} does not fit the hard budget even alone",
                {**r.breakdown, "unit_tokens": u.tokens},
            )
        generation, revision = old.generation + 1, self._revision + 1
        skill_seqs, skills_text = self._skills_section(start_seq, min(room, SKILL_TOKENS))
        skills_t = self._counter.text(skills_text) if skills_text else 0
        room -= skills_t
        limit = min(r.recall_cap // 2, room)  # the other half serves the epoch's later user turns
        # the episode index: a quarter of that, and at least INDEX_FLOOR_TOKENS taken from what the state's
        # reservation left unused (a small window's recall share alone cannot hold one entry)
        state_left = max(0, r.state_budget - self._counter.text(state_sec)) if has_state else 0
        index_text = self._index(
            r, start_seq, min(room, max(limit // 4, min(INDEX_FLOOR_TOKENS, limit // 4 + state_left)))
        )
        index_t = self._counter.text(index_text) if index_text else 0
        # what the index took beyond the state's unused reservation comes out of recall's share
        recall_limit = min(limit - max(0, index_t - state_left), room - index_t)
        items, recall_text = self._recall(r, start_seq, recall_limit, set(skill_seqs))
        sections = list(fixed)
        if skills_text:
            sections.append(("recall", skills_text))
        if index_text:
            sections.append(("episode", index_text))
        if recall_text:
            sections.append(("recall", recall_text))
        snap = _KernelMessage(
            r.until,
            "snapshot",
            revision,
            self._kernel_parts("snapshot", generation, revision, r.until, sections),
            self._counter,
            recalled=[*skill_seqs, *(i.seq for i in items)],
            anchor=self._last_user[0],
            query=r.request.query,
            state_revision=r.state_rev if has_state else 0,
            extension=r.request.extension,
            state_key=_update_key(r.state) if has_state else None,
            passes=sorted(_current_passes(r.state) or ()) if has_state else None,
            reground=[_lineage_key(f) for f in _repeated(r.state)] if has_state else (),
        )
        new = _Epoch(generation, start_seq, reason, kept_t, r.fingerprint)
        new.push_session(r.session_msg, r.session_t)
        new.push_kernel(snap)
        for u in kept:
            new.add_unit(u, self._counter)
        new.show_units()
        assert r.instr_t + r.tools_t + new.kernel_total + new.conv_tokens <= r.hard, "snapshot sized to the room"
        left = 0
        if old.generation > 0:  # the previous view minus what the new epoch sends again
            resent = prefix[old.shown] - prefix[i] if i < old.shown else 0
            left = old.kernel_total + old.shown_conv_tokens - resent
        payload = {
            "generation": generation,
            "start_seq": start_seq,
            "reason": reason,
            "retained_tokens": kept_t,
            "fingerprint": r.fingerprint,
            "session_context": r.session_msg.content,
            "recent_limit_tokens": r.recent_eff,
        }
        return new, [(EPOCH, r.until, payload), (KERNEL, r.until, snap.payload(generation))], left

    def _view(
        self, r: _Request, ep: _Epoch, delta: _KernelMessage | None, left: int, budget: ContextBudget
    ) -> tuple[ContextView, dict[str, Any]]:
        """The view of ``ep`` plus its not-yet-shown units and ``delta`` (nothing committed), and its metrics."""
        pending = ep.units[ep.shown :]
        msgs = [*ep.messages, *(m for u in pending for m in u.messages)]
        kt = dict(ep.kernel_tokens)
        if delta is not None:
            msgs.append(delta.message)
            for k in _COMPONENTS:
                kt[k] += delta.tokens[k]
        conv_t = ep.conv_tokens
        tokens = ComponentTokens(
            instructions_tokens=r.instr_t,
            state_tokens=kt["state"],
            recent_tokens=conv_t,
            recall_tokens=kt["recall"] + kt["episode"],
            episode_tokens=kt["episode"],
            tools_tokens=r.tools_t,
            extension_tokens=kt["extension"],
        )
        total = tokens.total_tokens
        if total > r.hard:
            raise AssertionError(f"accounting error: {total} tokens over the hard limit {r.hard}")
        common = self._common_prefix(ep, r)
        first = ep.units[0].first_seq if ep.units else None
        user_turns = ep.user_turns + sum(u.user_turn for u in pending)
        images = (ep.images[0] + sum(u.images[0] for u in pending), ep.images[1] + sum(u.images[1] for u in pending))
        status = "oversized_unit" if conv_t > r.recent_eff else ("new_epoch" if ep is not self._epoch else "ok")
        metrics = {
            "generation": ep.generation,
            "epoch_start_seq": ep.start_seq,
            "first_retained_seq": first,
            "until_seq": r.until,
            "events": self._events,
            "episodes": len(self._episodes) if self._episodes is not None else 0,
            "units": len(ep.units),
            "span_user_turns": user_turns,
            "rotated": ep is not self._epoch,
            "rotation_reason": ep.reason,
            "retained_tokens": ep.retained_tokens,
            "left_tokens": left,
            "request_tokens": total,
            "common_prefix_tokens": common,
            "cacheability": common / total if total else 0.0,
            "hard_limit_tokens": r.hard,
            "reserve_tokens": budget.reserve_tokens,
            "recent_limit_tokens": r.recent_eff,
            "recall_limit_tokens": r.recall_cap,
            "headroom_tokens": r.hard - total,
            "kernel_messages": len(ep.kernel) + (delta is not None),
            "recalled_events": len(ep.recalled) + (len(delta.recalled) if delta is not None else 0),
            "image_count": images[0],
            "image_tokens": images[1],
            "components": {
                "instructions_tokens": tokens.instructions_tokens,
                "state_tokens": tokens.state_tokens,
                "recent_tokens": tokens.recent_tokens,
                "recall_tokens": tokens.recall_tokens,
                "episode_tokens": tokens.episode_tokens,
                "tools_tokens": tokens.tools_tokens,
                "extension_tokens": tokens.extension_tokens,
            },
            "provider": dict(provider) if (provider := self._provider_usage()) else None,
            "exact_tokenizer": self._counter.tokenizer,  # None: heuristic estimates
        }
        view = ContextView(
            session_id=r.request.session_id,
            system=r.request.system_prompt,
            tools=tuple(r.request.tools),
            messages=tuple(msgs),
            tokens=tokens,
            budget=budget,
            epoch=ep.generation,
            first_retained_seq=first,
            metrics=metrics,
            status=status,
        )
        return view, metrics

    def _common_prefix(self, ep: _Epoch, r: _Request) -> int:
        """Estimated tokens of the longest common line prefix with the previous request."""
        prev = self._prev
        if prev is None or prev.header[0] != r.header[0]:
            return 0
        if prev.header[1] != r.header[1]:
            return r.system_t
        header_t = r.system_t + r.tools_t
        if prev.epoch is ep:  # append-only: the previous messages are this epoch's first ones
            return header_t + ep.cum[prev.n_messages]
        old, k = prev.epoch, 0
        limit = min(prev.n_messages, len(ep.lines))
        while k < limit and old.lines[k] == ep.lines[k]:
            k += 1
        return header_t + ep.cum[k]

    # ------------------------------------------------------------ port: compaction and recall
    def manual_compact(self, reason: str = "manual") -> None:
        """``/compact``: append a ``manual_compact`` record; the next request starts a fresh epoch
        that keeps no earlier conversation (raw events, state and recall stay)."""
        self._ensure_loaded()
        until = max(self._watermark, self._reader.max_seq())
        self._ingest(until, self.default_budget().recent_tokens)
        start = self._builder.pending_seq or until + 1
        self._writer.append(COMPACT, until, {"reason": reason, "start_seq": start})
        self._compact = start

    def recall(self, query: str, *, limit_tokens: int = 4000, until_seq: int | None = None) -> list[RecalledEvent]:
        """Exact recall of ``query`` from the archival region (``seq`` before the current epoch), chronological.

        Before the first materialization nothing is archival, so the result is empty.
        """
        self._ensure_loaded()
        before = self._epoch.start_seq if self._epoch.generation > 0 else 1
        return recall_mod.recall(
            self._reader,
            self._recall_cache,
            recall_mod.query_terms([query]),
            before_seq=before,
            limit_tokens=limit_tokens,
            until_seq=until_seq,
        )
