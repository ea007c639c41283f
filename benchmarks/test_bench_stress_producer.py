"""The ``latch stress`` producer's CPU per event, by part, as the store grows.

The producer of :mod:`latch.bench.stress` generates the scenario's events (:class:`~latch.bench.scenario.ScenarioModel`)
and appends them in batches of 5,000, one transaction each. This benchmark does the same into a fresh store (no viewer)
and splits each batch's process CPU into:

* ``gen``: generating the events;
* ``encode``: :func:`~latch.store.event_store.encode_events` (canonical JSON payload, searchable text, FTS5
  preparation), the per-event Python work an append does before its write lock;
* ``sql``: the rest of :meth:`~latch.store.EventStore.append` (its own encoding subtracted): the events insert, the
  FTS5 insert and the commit, with FTS5's segment merges and the WAL checkpoint the commit runs;
* ``append``: the whole :meth:`~latch.store.EventStore.append` (``encode`` + ``sql``).

``encode`` is timed on a twin of the batch (the same events, other objects), so that the append encodes events
that have never been encoded, as the producer's are.

``extra_info``: microseconds per event of each part over the whole run (``<part>_us_per_event``) and over its last
fifth (``<part>_us_per_event_last``: the store at its largest; ``sql`` grows with it, through FTS5's merges), the
total, and the database's size. Measured on the loaded 2-core box at 10^6 events (a profile of the same loop, the
SQL split further): gen 13.9, encode 24.0, events insert 9.9, FTS5 insert 23.3, commit 26.9 s of CPU, the commit's
share growing from 16 to 35 us per event; of the commit, FTS5's merges about 10 s and the checkpoints about 6 s.

With the payload text, a call's indexed arguments and the FTS5 preparation in the native module, at 10^5 events on the
loaded box, alternated with the pure-Python-encoding code before it (same benchmark, two runs each): ``encode``
19.6 / 18.9 -> 8.5 / 8.1 us per event, ``append`` 62.4 / 61.2 -> 50.4 / 49.0 (``sql`` 42.8 / 42.3 -> 41.9 / 40.9,
unchanged). ``latch stress --events 1000000`` on a quiet box, every check passing with the same evidence, after then
before (native / before): appends 63.1 / 74.0 s, CPU (user + system) 177.8 / 188.9 s, wall 109.4 / 109.3 s (the
views, 75 s on both, pace the run).

Run: ``python -m pytest benchmarks/test_bench_stress_producer.py --benchmark-only`` (``LATCH_BENCH_FULL=1``: 3x10^5
events; else 10^5; with ``--benchmark-disable``, as CI runs it, 10^4).
"""

from __future__ import annotations

import itertools
import os
import time

from latch.bench.scenario import ScenarioModel
from latch.bench.stress import WORKSPACE
from latch.store import EventStore
from latch.store.event_store import encode_events

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
EVENTS, FULL_EVENTS, SMOKE_EVENTS = 100_000, 300_000, 10_000
BATCH = 5_000


def test_stress_producer_parts(benchmark, tmp_path):
    n = SMOKE_EVENTS if benchmark.disabled else FULL_EVENTS if FULL else EVENTS
    store = EventStore(tmp_path / "producer.db")
    sid = store.create_session(workspace=WORKSPACE, format="claude-code", source="latch stress")
    gen = ScenarioModel(0, workspace=WORKSPACE).events()
    twin = ScenarioModel(0, workspace=WORKSPACE).events()  # the same events as other objects, encoded apart
    parts: list[tuple[float, float, float, float]] = []
    for _ in range(n // BATCH):
        c = time.process_time()
        batch = list(itertools.islice(gen, BATCH))
        g = time.process_time()
        same = list(itertools.islice(twin, BATCH))
        s = time.process_time()
        encode_events(same)  # not the batch: an event keeps what encoding it parsed (a call's arguments)
        e = time.process_time()
        store.append(sid, batch)
        a = time.process_time()
        parts.append((g - c, e - s, max(0.0, (a - e) - (e - s)), a - e))
    assert store.count_events(sid) == n
    store.close()
    tail = parts[-max(1, len(parts) // 5) :]
    info: dict[str, float] = {"events": n}
    for i, name in enumerate(("gen", "encode", "sql", "append")):
        info[f"{name}_us_per_event"] = round(1e6 * sum(p[i] for p in parts) / n, 2)
        info[f"{name}_us_per_event_last"] = round(1e6 * sum(p[i] for p in tail) / (len(tail) * BATCH), 2)
    info["total_us_per_event"] = round(sum(info[f"{k}_us_per_event"] for k in ("gen", "encode", "sql")), 2)
    info["db_mb"] = round(sum(p.stat().st_size for p in tmp_path.glob("producer.db*")) / 1e6, 1)
    benchmark.extra_info.update(info)
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
