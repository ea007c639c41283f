"""The request loop's per-request reading of new events (segmenting them into units, pricing each unit, keeping its
seqs, finding the latest user instruction): :meth:`latch.host.loop.RequestLoop._feed` against the per-event loop it
replaced (every event's completed units priced through :meth:`~latch.engine.units.Unit.cost`, kept through
:meth:`~latch.engine.units.UnitSpans.add` and every event given to
:func:`~latch.kernel.derive.instruction_text`), in one run, side by side.

The events are :class:`latch.bench.scenario.ScenarioModel`'s (the ``latch stress`` producer's model), decoded once
and served from memory to both sides, so the store's read and decode (the same code for both) is left out. Both end
with the same ``history_tokens``, unit spans, event count and latest instruction (asserted). CPU time
(``time.process_time``), rounds interleaved, the median of each side.

``extra_info``: ``per_event_us_reference``, ``per_event_us_loop`` and ``ratio`` (loop over reference).

Measured on the shared 2-core box (loaded by two other helpers), 10^5 events: the loop reads 3.31 -> 3.05 us of CPU
per event (``ratio`` 0.92). In ``latch stress`` at 2x10^5 events this is about a tenth of the main process's time outside
the views; most of the rest is the first read and decode of each event (the engine would pay it otherwise), which
the run now does while it waits for its producer (:meth:`latch.host.loop.RequestLoop.advance`).

Run: ``python -m pytest benchmarks/test_bench_request_loop_feed.py --benchmark-only``
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Any

from latch.bench.scenario import ScenarioModel
from latch.bench.stress import MODEL, WORKSPACE
from latch.engine.units import UnitBuilder, UnitSpans
from latch.host.loop import RequestLoop, build_engine
from latch.kernel.derive import instruction_text
from latch.port import SessionContext
from latch.store import EventStore
from latch.store.event_store import StoredEvent

EVENTS = 100_000
SMOKE_EVENTS = 5_000
ROUNDS = 5


class _Served:
    """The store's ``events`` over events decoded beforehand."""

    def __init__(self, stored: list[StoredEvent]):
        self.stored = stored

    def events(self, session_id: str, *, after_seq: int = 0, until_seq: int | None = None) -> Any:
        return iter(self.stored[after_seq : until_seq if until_seq is not None else len(self.stored)])


def _reference_feed(loop: RequestLoop, until: int | None) -> None:
    """The per-event loop the request loop ran before."""
    for ev in loop.store.events(loop.session_id, after_seq=loop._fed_seq, until_seq=until):
        for u in loop._builder.feed(ev):
            loop.history_tokens += u.cost(loop.counter)
            loop.units.add(u)
        found = instruction_text(ev.event)
        if found is not None:
            loop.latest_instruction = (ev.seq, found[0])
        loop._fed_seq = ev.seq
        loop._events += 1


def _fresh(loop: RequestLoop, served: _Served) -> RequestLoop:
    loop.store = served  # type: ignore[assignment]
    loop._builder, loop.units = UnitBuilder(), UnitSpans()
    loop.history_tokens = loop._fed_seq = loop._events = 0
    loop.latest_instruction = None
    return loop


def test_request_loop_feed(benchmark, tmp_path, request):
    smoke = request.config.getoption("benchmark_disable", False)
    n = SMOKE_EVENTS if smoke else EVENTS
    events = list(itertools.islice(ScenarioModel(0, workspace=WORKSPACE).events(), n))
    served = _Served([StoredEvent(i + 1, "s", e.KIND, e, None, None) for i, e in enumerate(events)])
    with EventStore(tmp_path / "latch.db") as store:
        sid = store.create_session(workspace=WORKSPACE, source="bench", format="latch")
        setup = build_engine(store, sid, stream="continuity:bench", engine="continuity", model=MODEL)
        ctx = SessionContext(workspace=WORKSPACE)
        loops = {
            side: RequestLoop(store, sid, setup, setup.engine.default_budget(), session_context=ctx)
            for side in ("reference", "loop")
        }
        cpu: dict[str, list[float]] = {"reference": [], "loop": []}
        ends = {}
        for _ in range(1 if smoke else ROUNDS):
            for side, feed in (("reference", _reference_feed), ("loop", RequestLoop._feed)):
                loop = _fresh(loops[side], served)
                t = time.process_time()
                for until in range(5_000, n + 5_000, 5_000):  # a burst's reading, as latch stress asks
                    feed(loop, min(until, n))
                cpu[side].append(time.process_time() - t)
                ends[side] = (loop.history_tokens, list(loop.units), loop._events, loop.latest_instruction)
        assert ends["reference"] == ends["loop"] and ends["loop"][2] == n and ends["loop"][0] > 0
        benchmark.pedantic(lambda: RequestLoop._feed(_fresh(loops["loop"], served), None), rounds=1, iterations=1)
    ref, new = statistics.median(cpu["reference"]), statistics.median(cpu["loop"])
    benchmark.extra_info.update(
        {
            "events": n,
            "per_event_us_reference": round(1e6 * ref / n, 2),
            "per_event_us_loop": round(1e6 * new / n, 2),
            "ratio": round(new / ref, 3) if ref else None,
        }
    )
