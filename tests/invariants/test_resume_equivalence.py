"""Invariant tier: resume equivalence (spec: "Cache epochs and working memory": "resume replays the same
kernel history").

Two stores receive the same events. In one, a single engine serves every request; in the other the
engine is dropped after ``k`` requests and a new one is built through the factory on the same
store and stream. Every later view and every durable record must be byte-identical.
"""

from __future__ import annotations

import pytest
from invariant_helpers import STREAM, continuity, new_session, request, wire

from latch.bench.scenario import ScenarioModel
from latch.events import UserMessage
from latch.kernel.tools import apply_kernel_tool
from latch.store import EventStore

REQUESTS = 26


def _run(path, resume_at: int | None, compact_at: int | None):
    store = EventStore(path)
    sid = new_session(store, "resume")
    model = ScenarioModel(21, workspace="/work/shop")
    engine = continuity(store, sid)
    out = []
    for i in range(REQUESTS):
        if i == resume_at:
            engine = continuity(store, sid)  # a fresh process would do exactly this
        if i == compact_at:
            engine.manual_compact("user asked")
        out.append(wire(engine.materialize(request(sid))))
        store.append(sid, model.request())
        if i % 9 == 4:
            apply_kernel_tool(store, sid, "add_note", {"note": f"note {i}"})
            store.append(sid, [UserMessage(f"continue with step {i}")])
    records = [(k, at, p) for _, k, at, p in store.kernel_records(sid, STREAM)]
    store.close()
    return out, records


@pytest.mark.parametrize(
    "resume_at,compact_at",
    [(6, None), (15, None), (18, 11), (11, 11)],
    ids=["early", "mid-run", "after-compact", "compact-then-resume"],
)
def test_a_new_engine_on_the_same_store_produces_byte_identical_views(tmp_path, resume_at, compact_at):
    straight, straight_records = _run(tmp_path / "a.db", None, compact_at)
    resumed, resumed_records = _run(tmp_path / "b.db", resume_at, compact_at)
    rotations = sum(not b.startswith(a) for a, b in zip(straight, straight[1:], strict=False))
    assert rotations >= 2, "the run should cross cache epochs"
    for i, (a, b) in enumerate(zip(straight, resumed, strict=False)):
        assert a == b, f"request {i} differs after resuming at {resume_at}"
    assert straight_records == resumed_records
