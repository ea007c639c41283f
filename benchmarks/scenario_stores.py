"""Stores holding the first ``n`` events of the stress scenario (seed 0), shared by the recall benchmarks."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from latch.bench.scenario import ScenarioModel
from latch.store import EventStore

T = TypeVar("T")


def scenario_store(path: Path, n: int) -> tuple[EventStore, str]:
    """``(store, session id)``: a new store at ``path`` with ``n`` scenario events appended in batches of 5,000."""
    store = EventStore(str(path))
    sid = store.create_session(workspace="/work/shop", format="claude-code")
    gen = iter(ScenarioModel(0, workspace="/work/shop").events())
    for _ in range(0, n, 5_000):
        store.append(sid, list(itertools.islice(gen, 5_000)))
    return store, sid


def scenario_histories(
    tmp_path_factory: Any, name: str, derive: Callable[[EventStore, str], T]
) -> Iterator[Callable[[int], tuple[EventStore, str, T]]]:
    """A module fixture's body: yields ``get(n)``, the :func:`scenario_store` of ``n`` events (made at its first
    ``get``, in a folder named ``name``) with ``derive(store, sid)``; closes the stores afterwards."""
    built: dict[int, tuple[EventStore, str, T]] = {}

    def get(n: int) -> tuple[EventStore, str, T]:
        if n not in built:
            store, sid = scenario_store(tmp_path_factory.mktemp(name) / "s.db", n)
            built[n] = (store, sid, derive(store, sid))
        return built[n]

    yield get
    for store, _, _ in built.values():
        store.close()
