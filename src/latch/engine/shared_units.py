"""Conversation units shared by every segmentation of the same stored events in one process.

A host segments each new event more than once before a model request: the request loop (the history's units and
their tokens, the whole-unit check) and the engine (its epoch's units) each run a :class:`~latch.engine.units.UnitBuilder`
over the same :class:`~latch.store.event_store.StoredEvent` objects (the store hands every reader the same decoded
object: :mod:`latch.store.decoded`). A unit is a function of the stored events it is made of and the event that closes
it, in feed order, so a second builder that completes a unit of the very same objects gets the first builder's
:class:`~latch.engine.units.Unit` back: built once, and priced once (:meth:`~latch.engine.units.Unit.cost` keeps its
tokens on the unit).

A unit's tokens depend on the estimator that priced them, so builders share units only through the
:class:`SharedUnits` of one estimator object (:func:`shared_units`). Memory is bounded by :data:`SHARED_UNITS` units
(the newest completed), whatever the history's length.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["SHARED_UNITS", "SharedUnits", "shared_units"]

SHARED_UNITS = 4096
"""Units a :class:`SharedUnits` keeps (the newest completed: a host's second segmentation of a burst of new events
trails its first by at most a few thousand events)."""
_ESTIMATORS = 8
"""Estimators :func:`shared_units` keeps a :class:`SharedUnits` for (the least recently asked for go first)."""

U = TypeVar("U")


class SharedUnits(Generic[U]):
    """The newest ``capacity`` units completed, each under the stored events it is made of. Thread-safe."""

    def __init__(self, capacity: int = SHARED_UNITS):
        self.capacity = capacity
        # (id(close), id(first), n) -> (close, stored events, unit); the entry holds its events, so no other object
        # takes their ids while it lives
        self._units: OrderedDict[tuple[int, int, int], tuple[Any, tuple[Any, ...], U]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._units)

    def unit(self, close: Any, stored: Sequence[Any], make: Callable[[], U]) -> U:
        """The unit of the stored events ``stored`` (feed order) completed by ``close``: the one kept for the same
        objects, else ``make()`` (then kept)."""
        key = (id(close), id(stored[0]), len(stored))
        hit = self._units.get(key)
        if hit is not None and hit[0] is close and all(a is b for a, b in zip(hit[1], stored, strict=True)):
            return hit[2]
        made = make()
        with self._lock:
            self._units[key] = (close, tuple(stored), made)
            while len(self._units) > self.capacity:
                self._units.popitem(last=False)
        return made


_BY_ESTIMATOR: OrderedDict[int, tuple[Any, SharedUnits[Any]]] = OrderedDict()
_REGISTRY_LOCK = threading.Lock()


def shared_units(estimator: Any) -> SharedUnits[Any]:
    """The :class:`SharedUnits` of the builders whose units ``estimator`` (the object) prices: every call with the
    same object returns the same one, for the :data:`_ESTIMATORS` estimators asked for last."""
    with _REGISTRY_LOCK:
        got = _BY_ESTIMATOR.get(id(estimator))
        if got is not None and got[0] is estimator:
            _BY_ESTIMATOR.move_to_end(id(estimator))
            return got[1]
        memo: SharedUnits[Any] = SharedUnits()
        _BY_ESTIMATOR[id(estimator)] = (estimator, memo)
        while len(_BY_ESTIMATOR) > _ESTIMATORS:
            _BY_ESTIMATOR.popitem(last=False)
        return memo
