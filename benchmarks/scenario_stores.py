"""A store holding the first ``n`` events of the stress scenario (seed 0), shared by the recall benchmarks."""

from __future__ import annotations

import itertools
from pathlib import Path

from latch.bench.scenario import ScenarioModel
from latch.store import EventStore


def scenario_store(path: Path, n: int) -> tuple[EventStore, str]:
    """``(store, session id)``: a new store at ``path`` with ``n`` scenario events appended in batches of 5,000."""
    store = EventStore(str(path))
    sid = store.create_session(workspace="/work/shop", format="claude-code")
    gen = iter(ScenarioModel(0, workspace="/work/shop").events())
    for _ in range(0, n, 5_000):
        store.append(sid, list(itertools.islice(gen, 5_000)))
    return store, sid
