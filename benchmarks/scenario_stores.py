"""Stores holding the first ``n`` events of the stress scenario (seed 0), shared by the recall benchmarks."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from latch.bench.scenario import ScenarioModel
from latch.engine.recall import RecallCache, query_terms, recall
from latch.engine.units import TokenCounter, resolve_estimator
from latch.events import AssistantMessage, ToolResult, UserMessage
from latch.host.session import StoreSessionReader
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


class _Recording(StoreSessionReader):
    """A session reader that keeps the arguments of every store search."""

    def __init__(self, store: EventStore, sid: str):
        super().__init__(store, sid)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def search(self, query: str, **kw: Any) -> Any:
        kw.setdefault("mode", "or")  # (the reader's default)
        self.calls.append((query, {**kw, "session_id": self.session_id}))
        return super().search(query, **kw)


def recorded_searches(
    store: EventStore, sid: str, newest: int, views: int, window: int = 3_000
) -> list[tuple[str, dict[str, Any]]]:
    """Every store search recall makes in ``views`` views spread over the session's newest ``newest`` events, as
    ``(query, keyword arguments of EventStore.search)``: each view's query from its last 200 events (the last user
    message, the last three assistant turns, the last four errors), recalled from before its newest ``window``
    events, at most 8,000 tokens."""
    counter = TokenCounter(resolve_estimator("claude-sonnet-4-5", None))
    reader = _Recording(store, sid)
    top = store.max_seq(sid)
    for until in range(top - newest, top, newest // views):
        recent = list(store.events(sid, after_seq=until - 200, until_seq=until))
        user = [e.event.text for e in recent if isinstance(e.event, UserMessage)][-1:]
        work = [e.event.searchable_text()[:2_000] for e in recent if isinstance(e.event, AssistantMessage)][-3:]
        errors = [e.event.content[:2_000] for e in recent if isinstance(e.event, ToolResult) and e.event.is_error]
        recall(
            reader,
            RecallCache(counter),
            query_terms([*user, *work, *errors[-4:]]),
            before_seq=until - window,
            limit_tokens=8_000,
        )
    return reader.calls


VIEWER_BUDGETS = (6_000, 5_000, 2_500, 1_200)
"""Token budgets of a burst's requests (the stress viewer's recall shares shrink as an epoch recalls)."""


def viewer_requests(store: EventStore, sid: str, every: int, burst: int = 4) -> list[tuple[list[str], int, int, int]]:
    """``(terms, before_seq, until_seq, limit_tokens)`` of the stress viewer's recalls, bursts in order: every
    ``every`` events a burst of ``burst`` requests recalls from below the burst's epoch start, each with the query a
    continuity view builds from its newest user turn, the agent's newest work and the errors seen lately, within a
    shrinking budget (:data:`VIEWER_BUDGETS`)."""
    out = []
    for start in range(every, store.max_seq(sid) - 4 * burst, every):
        for k, budget in enumerate(VIEWER_BUDGETS[:burst]):
            until = start + 4 * k + 16
            recent = list(store.events(sid, after_seq=until - 200, until_seq=until))
            user = [e.event.text for e in recent if isinstance(e.event, UserMessage)][-1:]
            work = [e.event.searchable_text()[:2_000] for e in recent if isinstance(e.event, AssistantMessage)][-3:]
            errors = [e.event.content[:2_000] for e in recent if isinstance(e.event, ToolResult) and e.event.is_error]
            out.append((query_terms([*user, *work, *errors[-4:]]), start, until, budget))
    return out


def viewer_recalls(reader: StoreSessionReader, cache: RecallCache, requests) -> list[list[int]]:
    """The recalled seqs of each of :func:`viewer_requests`' ``requests``, in order, through one ``cache``: within a
    burst (the same ``before_seq``) an event recalled once is excluded from the later requests, as the viewer does."""
    got: list[list[int]] = []
    epoch, recalled = -1, set()
    for terms, before, until, budget in requests:
        if before != epoch:
            epoch, recalled = before, set()
        items = recall(reader, cache, terms, before_seq=before, limit_tokens=budget, until_seq=until, exclude=recalled)
        recalled.update(r.seq for r in items)
        got.append([r.seq for r in items])
    return got
