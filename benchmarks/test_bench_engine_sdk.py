"""The engine SDK: a policy engine's per-request cost is O(new events), not O(history).

Two measurements, both of the engine alone (``materialize``; the import and the host's checks are not timed):

* **Codex corpus replay**: the view before every model request of the Codex corpus transcript
  (``shared/corpus/codex``), in order, on a fresh engine. ``keep-last-units`` on the SDK
  (:class:`latch.engine.sdk.PolicyEngine`, plugins/latch-example) against the same policy written the
  obvious way, the pre-SDK example: every request re-reads the whole session and re-segments it
  (:class:`_Rebuild`). Goal: the SDK engine replays the file at least 10x faster
  (``extra_info["speedup"]``, asserted when timings are collected), and under 2 s on this 2-core machine (``extra_info["seconds"]``;
  reported, not asserted: the machine is shared).
* **Flat per-request cost**: one more turn appended, then one request, on a warm SDK engine over a synthetic
  session of 10^3 and 10^4 events (``LATCH_BENCH_FULL=1`` adds 10^5). Goal: p50 at the larger sizes at
  most 2x p50 at 10^3 (``extra_info["ratio_to_1e3"]``, asserted when timings are collected).

Run: ``python -m pytest benchmarks/test_bench_engine_sdk.py --benchmark-only``
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest

from latch.engine.port import ContextOverflow, ContextRequest, EngineProfile
from latch.engine.units import UnitBuilder
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.ingest import import_file
from latch.host.session import StoreKernelWriter, StoreSessionReader
from latch.port import ContextBudget
from latch.store import EventStore

latch_example = pytest.importorskip("latch_example", reason="pip install ./plugins/latch-example")

CODEX = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "codex"
FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
SIZES = [1_000, 10_000] + ([100_000] if FULL else [])
BUDGET = ContextBudget(256_000, 32_000, 64_000)
SPEEDUP_TARGET = 10.0
FLAT_TARGET = 2.0
_P50: dict[int, float] = {}


class _Rebuild(latch_example.KeepLastUnits):
    """The same policy the pre-SDK way: the whole session read and segmented again on every request."""

    def units(self, until_seq):
        return UnitBuilder().feed_all(self._reader.events(until_seq=until_seq))


def _engine(cls, store, sid):
    return cls(
        EngineProfile(
            session_id=sid,
            model=None,
            reader=StoreSessionReader(store, sid),
            writer=StoreKernelWriter(store, sid, "bench:sdk"),
        )
    )


def _replay(cls, store, sid, untils) -> float:
    engine = _engine(cls, store, sid)
    start = time.perf_counter()
    for until in untils:
        try:
            engine.materialize(ContextRequest(session_id=sid, until_seq=until, budget=BUDGET))
        except ContextOverflow:
            pass
    return time.perf_counter() - start


@pytest.fixture(scope="module")
def codex(tmp_path_factory):
    files = sorted(CODEX.glob("*.jsonl")) if CODEX.is_dir() else []
    if not files:
        pytest.skip(f"no Codex corpus file under {CODEX}")
    store = EventStore(tmp_path_factory.mktemp("codex") / "latch.db")
    sid, _, _ = import_file(store, files[0])
    untils = [s.seq - 1 for s in store.events(sid) if isinstance(s.event, AssistantMessage)]
    yield store, sid, untils
    store.close()


def test_codex_replay_sdk_vs_rebuild(benchmark, codex):
    store, sid, untils = codex
    naive = _replay(_Rebuild, store, sid, untils)
    sdk = benchmark.pedantic(_replay, args=(latch_example.KeepLastUnits, store, sid, untils), rounds=3, iterations=1)
    benchmark.extra_info.update(
        requests=len(untils),
        seconds=round(sdk, 3),
        rebuild_seconds=round(naive, 3),
        speedup=round(naive / sdk, 1),
        speedup_target=SPEEDUP_TARGET,
    )
    if not benchmark.disabled:
        assert naive / sdk >= SPEEDUP_TARGET, f"SDK {sdk:.2f} s vs rebuild {naive:.2f} s"


def _turn(i: int):
    path = f"src/pkg{i % 300}/mod{i % 50}.py"
    return [
        UserMessage(f"step {i}: fix {path}"),
        AssistantMessage(
            f"Looking at {path}.", (ToolCall(f"c{i}", "Bash", json.dumps({"command": f"pytest {path}"})),)
        ),
        ToolResult(f"c{i}", f"collected {i} items\n1 failed", is_error=True, exit_code=1),
        AssistantMessage(f"The failure is in {path}."),
    ]


@pytest.mark.parametrize("n", SIZES)
def test_per_request_cost_is_flat(benchmark, tmp_path, n):
    store = EventStore(tmp_path / "latch.db")
    sid = store.create_session()
    turns = n // 4
    for start in range(0, turns, 5_000):
        store.append(sid, [e for i in range(start, min(turns, start + 5_000)) for e in _turn(i)])
    engine = _engine(latch_example.KeepLastUnits, store, sid)
    request = ContextRequest(session_id=sid, budget=BUDGET)
    engine.materialize(request)  # cold start, not timed
    counter = iter(range(turns, turns + 10_000))

    def one_more_turn():
        store.append(sid, _turn(next(counter)))
        return (request,), {}

    view = benchmark.pedantic(engine.materialize, setup=one_more_turn, rounds=30, iterations=1)
    assert view.metrics["units_total"] > n // 4
    benchmark.extra_info.update(events=n)
    if benchmark.stats is not None:
        _P50[n] = statistics.median(benchmark.stats.stats.data)
        if n != SIZES[0] and SIZES[0] in _P50:
            ratio = _P50[n] / _P50[SIZES[0]]
            benchmark.extra_info.update(ratio_to_1e3=round(ratio, 3), flat_target=FLAT_TARGET)
            assert ratio <= FLAT_TARGET
    store.close()
