"""The newest decoded events of one store object, shared by everything that reads them.

A host reads each new event several times before a model request (the request loop's units, the engine's
episodes and query context, the kernel ledger's facts), each in its own ``events()`` call: decoding the JSON
payload into an event is most of a read's cost. Events are append-only and immutable (frozen dataclasses), so a
row read again decodes to an equal event; :class:`DecodedEvents` keeps the last :data:`DECODED_EVENTS` rows with
their decoded :class:`~latch.store.event_store.StoredEvent` and hands the same object back when the row read is
the same (same seq, session, kind, source_ref and ts, and a payload of the same length and hash: a store replaced
under an open object decodes afresh). Memory is bounded by the count, not the history.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["DECODED_EVENTS", "DecodedEvents"]

DECODED_EVENTS = 8192
"""Decoded events a store object keeps (the newest read; about 3 KB each for a typical tool turn)."""

T = TypeVar("T")
_SHORT = 256
"""A longer string of a row is kept as its length and hash, not its text: the cache holds decoded events, not a
second copy of their JSON. A store's row ``(seq, session_id, kind, payload, source_ref, ts)`` keeps its payload so
whatever its length."""


class DecodedEvents(Generic[T]):
    """Rows (``seq`` first) and their decoded value, the newest ``capacity`` inserted (FIFO). Thread-safe."""

    def __init__(self, capacity: int = DECODED_EVENTS):
        self.capacity = capacity
        # seq -> (row fingerprint, value), oldest first. An OrderedDict drops its oldest entry in O(1); a dict's
        # first entry is found by skipping every deleted slot before it (about 20x slower per insert when full).
        self._by_seq: OrderedDict[Any, tuple[tuple[Any, ...], T]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_seq)

    def get(self, row: Sequence[Any], decode: Callable[[Sequence[Any]], T]) -> T:
        """The value of ``row``: the one kept for an identical row, else ``decode(row)`` (then kept)."""
        if len(row) == 6 and type(payload := row[3]) is str:  # a store's row: only its payload is long
            key: tuple[Any, ...] = (row[0], row[1], row[2], len(payload), hash(payload), row[4], row[5])
        else:
            key = tuple(x if not isinstance(x, str) or len(x) <= _SHORT else (len(x), hash(x)) for x in row)
        hit = self._by_seq.get(key[0])
        if hit is not None and hit[0] == key:
            return hit[1]
        value = decode(row)
        with self._lock:
            self._by_seq[key[0]] = (key, value)
            while len(self._by_seq) > self.capacity:
                self._by_seq.popitem(last=False)
        return value
