"""The decoded events one store object read last, shared by everything that reads them.

A host reads each new event several times before a model request (the request loop's units, the engine's
episodes and query context, the kernel ledger's facts), each in its own ``events()`` call: decoding the JSON
payload into an event is most of a read's cost. Events are append-only and immutable (frozen dataclasses), so a
row read again decodes to an equal event; :class:`DecodedEvents` keeps the :data:`DECODED_EVENTS` rows read last with
their decoded :class:`~latch.store.event_store.StoredEvent` and hands the same object back when the row read is
the same (same seq, session, kind, source_ref and ts, and a payload of the same length, beginning and end: a store
replaced under an open object decodes afresh; the payload is not hashed, which costs a good part of decoding it).
Memory is bounded by the count, not the history.

A seq names at most one row, and a row never changes once committed (the log is append-only: the database's
triggers refuse UPDATE and DELETE, spec: "L3 raw store"). So when every seq of ``after+1 .. k`` is kept, those kept
rows *are* the log between ``after`` and ``k``, whatever session or kind a reader asks for: :meth:`DecodedEvents.run`
hands them out without reading the database again. The request loop, the engine's ingest and the kernel ledger read
the same new events before each view; only the first of them reads and decodes them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["DECODED_EVENTS", "DecodedEvents"]

DECODED_EVENTS = 8192
"""Decoded events a store object keeps (the ones read last; about 3 KB each for a typical tool turn)."""

T = TypeVar("T")
_SHORT = 256
"""A longer string of a row is kept as its length and hash, not its text: the cache holds decoded events, not a
second copy of their JSON. A store's row ``(seq, session_id, kind, payload, source_ref, ts)`` keeps a longer payload
as its length and its first and last :data:`_EDGE` characters (a seq names one row that never changes: the payload
only tells a store replaced under an open object)."""
_EDGE = 32


class DecodedEvents(Generic[T]):
    """Rows (``seq`` first) and their decoded value, the ``capacity`` read last (least recently read go first).
    Thread-safe."""

    def __init__(self, capacity: int = DECODED_EVENTS):
        self.capacity = capacity
        # seq -> (row fingerprint, value), least recently read first. An OrderedDict drops its oldest entry and
        # moves a read one to the end in O(1); a dict's first entry is found by skipping every deleted slot before
        # it (about 20x slower per insert when full).
        self._by_seq: OrderedDict[Any, tuple[tuple[Any, ...], T]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_seq)

    def get(self, row: Sequence[Any], decode: Callable[[Sequence[Any]], T]) -> T:
        """The value of ``row``: the one kept for an identical row, else ``decode(row)`` (then kept)."""
        return self.get_all((row,), decode)[0]

    def get_all(self, rows: Sequence[Sequence[Any]], decode: Callable[[Sequence[Any]], T]) -> list[T]:
        """``[self.get(row, decode) for row in rows]``: equal values and the same rows kept in the same order, with
        one lock for the whole list (a fetched page: one call, not one per row). Rows are looked up before any is
        kept, so a row kept then but dropped by the list's own new rows before its turn is handed out as kept, and
        a row twice in the list decodes twice (equal values, not the same object)."""
        by_seq = self._by_seq
        out: list[T] = []
        done: list[tuple[Any, tuple[tuple[Any, ...], T]]] = []  # (seq, its entry: the one kept, or a new one)
        for row in rows:
            if len(row) == 6 and type(payload := row[3]) is str:
                p = payload if len(payload) <= _SHORT else (len(payload), payload[:_EDGE], payload[-_EDGE:])
                key: tuple[Any, ...] = (row[0], row[1], row[2], p, row[4], row[5])
            else:
                key = tuple(x if not isinstance(x, str) or len(x) <= _SHORT else (len(x), hash(x)) for x in row)
            hit = by_seq.get(key[0])
            if hit is not None and hit[0] == key:
                out.append(hit[1])
                done.append((key[0], hit))
            else:
                value = decode(row)
                out.append(value)
                done.append((key[0], (key, value)))
        with self._lock:
            for seq, entry in done:
                if seq in by_seq:  # read again, or a replaced row: now the one read last
                    by_seq[seq] = entry
                    by_seq.move_to_end(seq)
                else:
                    by_seq[seq] = entry
            while len(by_seq) > self.capacity:
                by_seq.popitem(last=False)
        return out

    def kept(self, seq: int) -> T | None:
        """The value kept for the row of ``seq`` (now the one read last), else ``None``."""
        with self._lock:
            hit = self._by_seq.get(seq)
            if hit is None:
                return None
            self._by_seq.move_to_end(seq)
            return hit[1]

    def run(self, after: int, until: int | None = None) -> list[T]:
        """The kept values of seqs ``after+1, after+2, ...`` (through ``until`` at most), up to the first seq not kept:
        the log's rows of that stretch, all of them, in seq order (see the module docstring). ``[]`` when
        ``after+1`` is not kept."""
        out: list[T] = []
        by_seq = self._by_seq
        end = len(by_seq) if until is None else min(len(by_seq), until - after)
        with self._lock:
            for seq in range(after + 1, after + 1 + end):
                hit = by_seq.get(seq)
                if hit is None:
                    break
                by_seq.move_to_end(seq)
                out.append(hit[1])
        return out
