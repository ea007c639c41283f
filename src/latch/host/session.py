"""Host-side adapters of the port: an :class:`~latch.store.EventStore` seen as one session.

The engine only sees the protocols :class:`~latch.port.SessionReader`,
:class:`~latch.port.KernelWriter` and (with an exact estimator)
:class:`~latch.port.TokenCountCache`; these classes are what the host (the
agent loop, ``latch replay``, ``latch context``) builds for it. None exposes the
store or an SQLite handle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..events import MediaRef
from ..kernel import canonical_state
from ..kernel.ledger import KernelCache
from ..port import CanonicalStateView
from ..records import dataclass
from ..store import EventLog, EventStore, StoredEvent
from .kernel import kernel_cache

__all__ = [
    "StoreSessionReader",
    "StoreKernelWriter",
    "ReplayKernelWriter",
    "OverlayKernelWriter",
    "StoreTokenCounts",
    "OverlayTokenCounts",
    "EmptyState",
]


@dataclass(frozen=True, slots=True)
class EmptyState:
    """The canonical state of a session the kernel knows nothing about (revision 0)."""

    revision: int = 0
    is_empty: bool = True

    def render(self, *args: Any, **kwargs: Any) -> str:
        return ""


class StoreSessionReader:
    """Read-only :class:`~latch.port.SessionReader` over one session of ``store``.

    ``cache`` holds the derived canonical state (default: the host's, :func:`~latch.host.kernel.kernel_cache`,
    with every plugin's derivation rules; resolved at the first :meth:`canonical_state`).
    """

    def __init__(self, store: EventLog, session_id: str, *, cache: KernelCache | None = None):
        self._store = store
        self.session_id = session_id
        self._cache = cache

    def events(
        self, *, after_seq: int = 0, until_seq: int | None = None, kinds: Sequence[str] | None = None
    ) -> Iterator[StoredEvent]:
        """This session's events with ``after_seq < seq <= until_seq``, in seq order."""
        return self._store.events(self.session_id, after_seq=after_seq, until_seq=until_seq, kinds=kinds)

    def search(
        self,
        query: str,
        *,
        limit: int = 20,
        before_seq: int | None = None,
        until_seq: int | None = None,
        mode: str = "or",
    ) -> list[StoredEvent]:
        """FTS over this session, newest first; any string is a valid query (no token → ``[]``)."""
        return self._store.search(
            query, session_id=self.session_id, limit=limit, mode=mode, before_seq=before_seq, until_seq=until_seq
        )

    def max_seq(self) -> int:
        """The newest seq of this session (0 when it has no events)."""
        return self._store.max_seq(self.session_id)

    def get_artifact(self, sha256: str) -> tuple[MediaRef, bytes]:
        """An artifact's reference and exact bytes; ``KeyError`` when unknown."""
        return self._store.get_artifact(sha256)

    def canonical_state(self, until_seq: int | None = None) -> CanonicalStateView:
        """The kernel's canonical state as of ``until_seq`` (an :class:`EmptyState` before the kernel exists).

        The result has ``revision`` (int), ``is_empty`` (bool) and ``render() -> str``.
        """
        if self._cache is None:
            self._cache = kernel_cache()
        return canonical_state(self._store, self.session_id, until_seq, cache=self._cache)


class StoreKernelWriter:
    """:class:`~latch.port.KernelWriter` appending to ``stream`` of one session's kernel records.

    ``stream`` is chosen by the host: the engine name plus a run id (``"continuity:main"``,
    ``"continuity:bench"``), so runs never interfere with a live session. A replay writes through
    :class:`ReplayKernelWriter` (the scratch database beside the store) instead.
    """

    def __init__(self, store: EventLog, session_id: str, stream: str):
        self._store = store
        self.session_id = session_id
        self.stream = stream

    def append(self, kind: str, at_seq: int, payload: Mapping[str, Any]) -> int:
        return self.append_many([(kind, at_seq, payload)])[0]

    def append_many(self, records: Sequence[tuple[str, int, Mapping[str, Any]]]) -> list[int]:
        """Append ``(kind, at_seq, payload)`` records in one transaction; return their ids."""
        return self._store.append_kernel_records(self.session_id, self.stream, [(k, s, dict(p)) for k, s, p in records])

    def records(
        self, kinds: Sequence[str] | None = None, *, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]:
        """``(id, kind, at_seq, payload)`` of this stream with ``id > after_id``, in append order."""
        return self._store.kernel_records(self.session_id, self.stream, kinds=kinds, after_id=after_id)


class ReplayKernelWriter(StoreKernelWriter):
    """:class:`~latch.port.KernelWriter` of a replay: a run of the store's replay scratch database
    (:meth:`~latch.store.EventStore.replay_scratch`), not the store's own kernel records.

    Every batch is one scratch transaction; :meth:`finish` marks the run complete and, with ``keep``,
    promotes it into the store (:meth:`~latch.store.EventStore.keep_replay`, one transaction). A replay
    that never finishes (killed) leaves an unfinished run that nothing promotes and ``latch prune-replays``
    drops. Raises :class:`~latch.store.StoreError` when the scratch cannot be written.
    """

    def __init__(self, store: EventStore, session_id: str, stream: str):
        super().__init__(store, session_id, stream)
        self._replays = store
        self._scratch = store.replay_scratch()
        self.run_id = self._scratch.start(session_id, stream)
        self.kept = False

    def append_many(self, records: Sequence[tuple[str, int, Mapping[str, Any]]]) -> list[int]:
        """Append ``(kind, at_seq, payload)`` records to the run in one transaction; return their ids."""
        return self._scratch.append(self.run_id, [(k, s, dict(p)) for k, s, p in records])

    def records(
        self, kinds: Sequence[str] | None = None, *, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]:
        """``(id, kind, at_seq, payload)`` of this run with ``id > after_id``, in append order."""
        return self._scratch.records(self.run_id, kinds=kinds, after_id=after_id)

    def finish(self, *, keep: bool = False) -> None:
        """Mark the run finished; with ``keep``, move its records into the store's kernel records."""
        self._scratch.finish(self.run_id)
        if keep:
            self._replays.keep_replay(self.run_id)
            self.kept = True


class OverlayKernelWriter(StoreKernelWriter):
    """:class:`~latch.port.KernelWriter` that reads ``stream``'s records from the store and keeps its own appends
    in memory: a read-only materialization (``latch context``) on the stream an agent resuming the session
    continues (``<engine>:main``), seeing every record already there, never writing one.

    Appended records get ids above every id of the store's ``kernel_records`` when the writer was made (the
    order ``records`` returns them in); they are dropped with the writer. ``appended`` is how many it holds,
    ``stored`` how many records the stream had in the store when the writer was made.
    """

    def __init__(self, store: EventLog, session_id: str, stream: str):
        super().__init__(store, session_id, stream)
        known = store.kernel_records(session_id, stream)
        self.stored = len(known)
        self._next = (known[-1][0] if known else 0) + 1
        self._mine: list[tuple[int, str, int, dict[str, Any]]] = []

    @property
    def appended(self) -> int:
        return len(self._mine)

    def append_many(self, records: Sequence[tuple[str, int, Mapping[str, Any]]]) -> list[int]:
        """Keep ``(kind, at_seq, payload)`` records in memory (payloads copied); return their ids."""
        ids = []
        for kind, at_seq, payload in records:
            self._mine.append((self._next, kind, at_seq, dict(payload)))
            ids.append(self._next)
            self._next += 1
        return ids

    def records(
        self, kinds: Sequence[str] | None = None, *, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]:
        """The store's records of the stream, then this writer's, with ``id > after_id``, in append order."""
        stored = self._store.kernel_records(self.session_id, self.stream, kinds=kinds, after_id=after_id)
        first_mine = self._mine[0][0] if self._mine else None
        if first_mine is not None:
            stored = [r for r in stored if r[0] < first_mine]
        mine = [r for r in self._mine if r[0] > after_id and (not kinds or r[1] in kinds)]
        return [*stored, *mine]


class StoreTokenCounts:
    """:class:`~latch.port.TokenCountCache` over the store's ``token_counts`` table for one session.

    A tokenizer's recorded counts are read once (at its first :meth:`get`) into memory; :meth:`put` adds to
    memory at once and to the store in batches: when ``flush_every`` counts are waiting, and at every
    :meth:`flush` (the request loop flushes after each request). ``puts`` / ``hits`` count the calls that
    missed (were tokenized) and hit. ``StoreError`` from the store on a failed write.
    """

    def __init__(self, store: EventLog, session_id: str, *, flush_every: int = 512):
        self._store = store
        self.session_id = session_id
        self.flush_every = flush_every
        self._known: dict[str, dict[tuple[int, str], int]] = {}
        self._pending: dict[str, list[tuple[int, str, int]]] = {}
        self.puts = self.hits = 0

    def _table(self, tokenizer: str) -> dict[tuple[int, str], int]:
        got = self._known.get(tokenizer)
        if got is None:
            got = self._known[tokenizer] = self._store.token_counts(self.session_id, tokenizer)
        return got

    def get(self, tokenizer: str, seq: int, digest: str) -> int | None:
        """The recorded count of the rendering ``digest`` of event ``seq`` (tokens), else ``None``."""
        got = self._table(tokenizer).get((seq, digest))
        if got is not None:
            self.hits += 1
        return got

    def put(self, tokenizer: str, seq: int, digest: str, tokens: int) -> None:
        """Record ``tokens`` for that rendering (a count already recorded is kept)."""
        table = self._table(tokenizer)
        if (seq, digest) in table:
            return
        table[(seq, digest)] = tokens
        self.puts += 1
        pending = self._pending.setdefault(tokenizer, [])
        pending.append((seq, digest, tokens))
        if len(pending) >= self.flush_every:
            self.flush()

    def flush(self) -> int:
        """Write the waiting counts (one transaction per tokenizer); returns the rows added."""
        added = 0
        for tokenizer in list(self._pending):
            rows = self._pending.pop(tokenizer)
            if rows:
                added += self._store.put_token_counts(self.session_id, tokenizer, rows)
        return added


class OverlayTokenCounts(StoreTokenCounts):
    """:class:`StoreTokenCounts` that reads the store's recorded counts and never writes: new counts stay in
    memory (:meth:`flush` writes nothing and returns 0). For read-only reports (``latch context``)."""

    def flush(self) -> int:
        self._pending.clear()
        return 0
