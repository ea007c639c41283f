"""Materialize latency against history length, and recall latency on a long history.

A synthetic session (4 events per turn: a user prompt, a tool call, its result, an answer, over a
5,000-word vocabulary) is appended straight to a store in 20,000-event batches. Each timed round
appends one more turn (outside the timing) and materializes the next view on a warm engine, so the
timing is the per-request cost an agent pays: ingesting the new events, canonical state, a recall
query for the new user turn, the epoch bookkeeping and the durable records.

Goal: p50 at 10^6 events no more than 1.5x p50 at 10^3 (cost independent of history length). The
ratio is ``extra_info["ratio_to_1e3"]`` of the larger sizes. ``state="kernel"`` is the real path
(the kernel's canonical state, :func:`latch.kernel.canonical_state`); ``state="none"`` gives the
engine an empty state, isolating the engine's own cost from the kernel's. Default sizes: 10^3 and
10^4; ``LATCH_BENCH_FULL=1`` adds 10^5 and 10^6 (building 10^6 events takes a few minutes).

Run: ``LATCH_BENCH_FULL=1 python -m pytest benchmarks/test_bench_materialize.py --benchmark-only``
"""

from __future__ import annotations

import json
import os
import random
import statistics

import pytest

from latch import hotpaths
from latch.engine import continuity_context_engine_factory
from latch.engine.port import ContextRequest, EngineProfile
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.session import EmptyState, StoreKernelWriter, StoreSessionReader
from latch.store import EventStore

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
SIZES = [1_000, 10_000] + ([100_000, 1_000_000] if FULL else [])
BATCH = 20_000
ROUNDS = 40
_VOCAB = [
    f"{s}{t}"
    for s in ("parse", "cache", "token", "store", "index", "route", "query", "build", "merge", "split")
    for t in ("r", "er", "ing", "ed", "or", "al", "ion", "ment")
] + [f"word{i}" for i in range(5_000)]
_P50: dict[tuple[str, int], float] = {}


def _turn(rng: random.Random, i: int):
    words = " ".join(rng.choice(_VOCAB) for _ in range(10))
    path = f"src/pkg{rng.randrange(300)}/mod{rng.randrange(50)}.py"
    return [
        UserMessage(f"step {i}: fix {words} in {path}"),
        AssistantMessage(
            f"Looking at {path}.", (ToolCall(f"c{i}", "Bash", json.dumps({"command": f"pytest {path}"})),)
        ),
        ToolResult(f"c{i}", f"{' '.join(rng.choice(_VOCAB) for _ in range(40))}\n1 failed", is_error=True, exit_code=1),
        AssistantMessage(f"The failure comes from {words}."),
    ]


class _NoStateReader(StoreSessionReader):
    def canonical_state(self, until_seq=None):
        return EmptyState()


class _Session:
    """One synthetic session of ``n_events`` and a warm engine per state variant."""

    def __init__(self, path, n_events: int):
        self.store = EventStore(path)
        self.sid = self.store.create_session(external_key=f"bench:{n_events}")
        self.rng = random.Random(11)
        self.turns = 0
        self.engines: dict[str, object] = {}
        batch = []
        while self.turns * 4 < n_events:
            batch.extend(_turn(self.rng, self.turns))
            self.turns += 1
            if len(batch) >= BATCH:
                self.store.append(self.sid, batch)
                batch = []
        if batch:
            self.store.append(self.sid, batch)

    def engine(self, state: str):
        if state not in self.engines:
            reader = (StoreSessionReader if state == "kernel" else _NoStateReader)(self.store, self.sid)
            eng = self.engines[state] = continuity_context_engine_factory(
                EngineProfile(
                    session_id=self.sid,
                    model=None,
                    reader=reader,
                    writer=StoreKernelWriter(self.store, self.sid, f"continuity:bench-{state}"),
                )
            )
            eng.materialize(ContextRequest(session_id=self.sid))  # cold start, not timed
        return self.engines[state]

    def add_turn(self, request: ContextRequest):
        """pytest-benchmark setup: one more turn in the log, then the request to time."""
        self.store.append(self.sid, _turn(self.rng, self.turns))
        self.turns += 1
        return (request,), {}


_SESSIONS: dict[int, _Session] = {}


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    def get(n: int) -> _Session:
        if n not in _SESSIONS:
            _SESSIONS[n] = _Session(tmp_path_factory.mktemp(f"materialize{n}") / "latch.db", n)
        return _SESSIONS[n]

    yield get
    for s in _SESSIONS.values():
        s.store.close()
    _SESSIONS.clear()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("state", ["kernel", "none"])
def test_materialize_p50(benchmark, sessions, state, n):
    s = sessions(n)
    eng = s.engine(state)
    request = ContextRequest(session_id=s.sid)
    view = benchmark.pedantic(eng.materialize, setup=lambda: s.add_turn(request), rounds=ROUNDS, iterations=1)
    assert view.tokens.total_tokens <= view.budget.hard_limit_tokens
    benchmark.extra_info.update(events=n, state=state, backend=hotpaths.BACKEND, epoch=view.epoch)
    if benchmark.stats is not None:
        _P50[state, n] = statistics.median(benchmark.stats.stats.data)
        if n != SIZES[0] and (state, SIZES[0]) in _P50:
            benchmark.extra_info["ratio_to_1e3"] = round(_P50[state, n] / _P50[state, SIZES[0]], 3)


_RECALL: dict[str, float] = {}


def _p95(data: list[float]) -> float:
    return sorted(data)[min(len(data) - 1, int(0.95 * len(data)))]


@pytest.mark.parametrize("n", [SIZES[-1]])
@pytest.mark.parametrize("plan", ["fts5", "candidates", "kept"])
def test_recall_latency(benchmark, sessions, n, plan, monkeypatch):
    """Exact recall on the longest history. ``plan="fts5"`` runs every search as the one FTS5 query (the plan
    before the candidate search, measured in the same run); ``"candidates"`` is the store's plan
    (:mod:`latch.store.fts_search`), every search run afresh (a query the engine has not seen); ``"kept"`` is the
    engine as it runs, its searches kept across requests (:mod:`latch.engine.recall_search`: a query it has
    seen, as most terms of a turn's query are). Goal: p95 <= 2 ms at 10^6 events; ``extra_info["p95_ms"]``, and
    ``ratio_to_fts5`` (p95 over the FTS5 plan's) on the other rows."""
    s = sessions(n)
    eng = s.engine("none")
    if plan != "kept":
        monkeypatch.setattr(eng._recall_cache, "searches", None)
    if plan == "fts5":
        monkeypatch.setattr(s.store._candidates, "plan", lambda *a, **k: None)
    query = "why does parseing fail in src/pkg7/mod3.py with word4242"
    got = benchmark(eng.recall, query, limit_tokens=4_000)
    assert got, "the archival region holds matching turns"
    benchmark.extra_info.update(events=n, backend=hotpaths.BACKEND, recalled=len(got), plan=plan)
    if benchmark.stats is not None:
        _RECALL[plan] = _p95(benchmark.stats.stats.data)
        benchmark.extra_info["p95_ms"] = round(_RECALL[plan] * 1e3, 3)
        if plan != "fts5" and "fts5" in _RECALL:
            benchmark.extra_info["ratio_to_fts5"] = round(_RECALL[plan] / _RECALL["fts5"], 3)
