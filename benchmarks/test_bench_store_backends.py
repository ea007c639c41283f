"""The event store on PostgreSQL against SQLite, in one run: append and recall throughput, and what going
multi-host costs.

Both stores get the same events. Measured (medians over rounds, ``extra_info``):

* ``append_batch``: batches of :data:`BATCH` events (an import), events/s on each backend and the ratio;
* ``append_turn``: one turn's events per append (3 events: what the agent loop and a group worker write),
  appends/s and the ratio;
* ``recall``: the engine's exact recall (``search``, newest 20) over a log of :data:`LOG` events, queries/s and
  the ratio; ``people_search``: ``search_hits`` by relevance (``latch search --sort relevance``);
* ``round_trips_per_append``: statements one turn's append sends to the server (each one round trip). The
  server here is on this host (loopback TCP); on another host each round trip adds the network's RTT, so an
  append costs about ``round_trips_per_append x RTT`` more (``append_turn_ms_at_rtt_0.5ms``: at 0.5 ms, a
  datacenter LAN). Recall sends 2 to 4 statements per query.

Run: ``python -m pytest benchmarks/test_bench_store_backends.py --benchmark-only`` (skips with the reason
without PostgreSQL's server programs or psycopg; CI runs it once with --benchmark-disable).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pg_support import PostgresCluster, require_postgres

from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.store import EventStore

BATCH = 500
LOG = 6_000
TURNS = 60
QUERIES = [
    "module_17.py",
    "failing test",
    "x + 2",
    "returns",
    '"the test expects"',
    "src/module_4",
    "Reading module 3",
    "nothing-matches-this",
]


def _turn(i: int) -> list[Any]:
    return [
        UserMessage(f"please look at src/module_{i}.py and fix the failing test number {i}"),
        AssistantMessage(
            f"Reading module {i}.", (ToolCall(f"c{i}", "Read", json.dumps({"file_path": f"src/module_{i}.py"})),)
        ),
        ToolResult(f"c{i}", f"def f{i}(x):\n    return x + 1\n" * 6 + f"# the test expects x + 2 in module {i}"),
    ]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    require_postgres()
    c = PostgresCluster()
    try:
        yield c
    finally:
        c.close()


def _median(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


class _Counting:
    """A store connection that counts the statements it sends."""

    def __init__(self, inner: Any):
        self.inner, self.sent = inner, 0

    def execute(self, *a: Any) -> Any:
        self.sent += 1
        return self.inner.execute(*a)

    def executemany(self, *a: Any) -> Any:
        self.sent += 1  # psycopg 3 pipelines executemany: one round trip
        return self.inner.executemany(*a)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_append_and_recall_postgresql_vs_sqlite(benchmark, cluster, tmp_path):
    rounds, log = (1, 1_500) if benchmark.disabled else (5, LOG)  # CI's smoke run: small
    stores = {"sqlite": EventStore(tmp_path / "latch.db"), "postgresql": EventStore(cluster.new_database())}
    out: dict[str, Any] = {}
    try:
        sids = {k: s.create_session(external_key="bench") for k, s in stores.items()}
        batch = [e for i in range(BATCH // 3 + 1) for e in _turn(i)][:BATCH]
        for name, s in stores.items():
            n = iter(range(10**6))  # the same turns on both
            out[f"append_batch_events_per_s_{name}"] = round(
                BATCH / _median(lambda s=s, name=name: s.append(sids[name], batch), rounds)
            )
            per_turn = _median(
                lambda s=s, name=name, n=n: [s.append(sids[name], _turn(next(n))) for _ in range(TURNS)], rounds
            )
            out[f"append_turn_per_s_{name}"] = round(TURNS / per_turn)
        while stores["sqlite"].count_events() < log:
            for name, s in stores.items():
                s.append(sids[name], batch)
        assert stores["sqlite"].count_events() == stores["postgresql"].count_events()
        for name, s in stores.items():
            for q in QUERIES:  # the same hits on both (the parity tests pin it): checked here on this log too
                assert [e.seq for e in s.search(q)] == [e.seq for e in stores["sqlite"].search(q)], q
            out[f"recall_queries_per_s_{name}"] = round(
                len(QUERIES) / _median(lambda s=s: [s.search(q) for q in QUERIES], rounds)
            )
            out[f"people_search_queries_per_s_{name}"] = round(
                len(QUERIES) / _median(lambda s=s: [s.search_hits(q, order="relevance") for q in QUERIES], rounds)
            )
        pg = stores["postgresql"]
        counting = _Counting(pg._conn)
        pg._conn = counting  # type: ignore[assignment]
        pg.append(sids["postgresql"], _turn(10**6))
        out["round_trips_per_append"] = counting.sent
        pg._conn = counting.inner
        for what in ("append_batch_events_per_s", "append_turn_per_s", "recall_queries_per_s"):
            out[f"{what}_ratio_pg_to_sqlite"] = round(out[f"{what}_postgresql"] / out[f"{what}_sqlite"], 3)
        out["people_search_ratio_pg_to_sqlite"] = round(
            out["people_search_queries_per_s_postgresql"] / out["people_search_queries_per_s_sqlite"], 3
        )
        turn_ms = 1000 / out["append_turn_per_s_postgresql"]
        out["append_turn_ms_here"] = round(turn_ms, 2)
        out["append_turn_ms_at_rtt_0.5ms"] = round(turn_ms + 0.5 * out["round_trips_per_append"], 2)
        benchmark.pedantic(pg.search, args=("failing test",), rounds=rounds, iterations=1)
    finally:
        for s in stores.values():
            s.close()
    benchmark.extra_info.update(out)
    print(out)
