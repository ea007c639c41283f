"""A host's request loop and its engine pricing the same new events: with their counters sharing the estimator's
message prices (:class:`latch.engine.units.MessageCosts`) and with each pricing on its own.

``latch stress``'s viewer segments every new event twice (the request loop's units for ``history_tokens``, the
engine's units for its epoch) and prices every unit each time; the two sets of messages hold the same decoded
strings, so with shared prices the engine's pricing is a lookup. This benchmark segments and prices
:class:`latch.bench.scenario.ScenarioModel` events (seed 0, the stress producer's model), the loop's side and then the
engine's in turns of :data:`CHUNK` events, the same two ways, interleaved, in CPU time (``time.process_time``): ``shared`` (two counters of one estimator object, as
:func:`latch.host.loop.build_engine` makes them) and ``apart`` (two estimator objects of the same profile, so nothing
is shared: every message estimated twice).

``extra_info``: ``events``, ``us_per_event_shared`` and ``us_per_event_apart`` (best of the rounds),
``ratio_apart_to_shared_cpu`` (> 1: sharing is cheaper), ``estimates_shared`` and ``estimates_apart`` (texts the
estimator was asked for). Always asserted: both ways give every unit the same tokens, and the shared way estimates
each text once.

Measured on the shared 2-core box (AVX2, no AVX-512: the estimator runs its scalar walker, about 200 MB/s; load
average about 8 from other sessions), 20,000 events, three runs: shared 15.4 / 14.7 / 17.7 µs per event against apart
21.5 / 25.4 / 26.9 (ratios 1.39 / 1.74 / 1.52); 36,947 estimates against 73,894.

Run: ``python -m pytest benchmarks/test_bench_unit_prices.py --benchmark-only`` (``LATCH_BENCH_FULL=1``: 100,000
events; else 20,000; with ``--benchmark-disable``, 1,000).
"""

from __future__ import annotations

import itertools
import os
import time

from latch.bench.scenario import ScenarioModel
from latch.engine.units import TokenCounter, UnitBuilder
from latch.estimators import HeuristicEstimator
from latch.store import StoredEvent

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
EVENTS, FULL_EVENTS, SMOKE_EVENTS = 20_000, 100_000, 1_000
ROUNDS = 3
CHUNK = 2_000
"""Events the loop segments before the engine does (a stress burst is 5,000; the prices kept cover about 6,000)."""


class _Counting(HeuristicEstimator):
    """The ``anthropic`` heuristic (Claude's, as ``latch stress`` prices), counting the texts it estimates."""

    def __init__(self) -> None:
        super().__init__("anthropic")
        self.calls = 0

    def estimate(self, text: str) -> int:
        self.calls += 1
        return super().estimate(text)


def _stored(n: int) -> list[StoredEvent]:
    gen = ScenarioModel(0, workspace="/work/shop").events()
    return [
        StoredEvent(seq=i, session_id="bench", kind=ev.KIND, event=ev, source_ref=None, ts=None)
        for i, ev in enumerate(itertools.islice(gen, n), 1)
    ]


def _price_twice(stored: list[StoredEvent], loop: TokenCounter, engine: TokenCounter) -> tuple[float, list[int]]:
    """CPU seconds to segment and price ``stored`` as the request loop does, then as the engine does, in turns of
    :data:`CHUNK` events (the loop reads ahead of the engine's ingest by one burst at most); the units' tokens (the
    loop's, then the engine's)."""
    t = time.process_time()
    ours, theirs = UnitBuilder(), UnitBuilder()
    mine: list[int] = []
    other: list[int] = []
    for lo in range(0, len(stored), CHUNK):
        chunk = stored[lo : lo + CHUNK]
        mine += [u.cost(loop) for s in chunk for u in ours.feed(s)]
        other += [u.cost(engine) for s in chunk for u in theirs.feed(s)]
    return time.process_time() - t, mine + other


def _compare(n: int) -> dict[str, float]:
    stored = _stored(n)
    best = {"shared": float("inf"), "apart": float("inf")}
    calls = {}
    for r in range(ROUNDS):
        for way in ("shared", "apart") if r % 2 == 0 else ("apart", "shared"):
            one = _Counting()
            other = one if way == "shared" else _Counting()
            took, tokens = _price_twice(stored, TokenCounter(one), TokenCounter(other))
            half = len(tokens) // 2
            assert tokens[:half] == tokens[half:]  # the engine's units cost what the loop's do
            best[way] = min(best[way], took)
            calls[way] = one.calls + (other.calls if other is not one else 0)
            assert way != "apart" or one.calls == other.calls  # apart: each prices every text itself
    assert calls["shared"] * 2 == calls["apart"]  # shared: each text estimated once
    return {
        "events": n,
        "us_per_event_shared": round(1e6 * best["shared"] / n, 2),
        "us_per_event_apart": round(1e6 * best["apart"] / n, 2),
        "ratio_apart_to_shared_cpu": round(best["apart"] / best["shared"], 2) if best["shared"] else 0.0,
        "estimates_shared": calls["shared"],
        "estimates_apart": calls["apart"],
    }


def test_loop_and_engine_share_unit_prices(benchmark):
    n = FULL_EVENTS if FULL else SMOKE_EVENTS if benchmark.disabled else EVENTS
    got = benchmark.pedantic(_compare, args=(n,), rounds=1, iterations=1)
    benchmark.extra_info.update(got)
