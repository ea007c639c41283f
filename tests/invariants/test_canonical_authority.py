"""Invariant tier: canonical authority (spec: "Cache epochs and working memory", "Stress guarantees").

A higher kernel revision is current truth: each state update carries the complete current state, a
superseded decision is not current in the newest section, and a rejected hypothesis never renders
as active memory, in a delta or in the snapshot of a later epoch.
"""

from __future__ import annotations

import re

from invariant_helpers import continuity, grow, new_session, request

from latch.events import UserMessage
from latch.kernel import canonical_state
from latch.kernel.tools import apply_kernel_tool

_STATE = re.compile(r'<canonical-state revision="(\d+)">\n(.*?)\n</canonical-state>', re.S)


def _states(view) -> list[tuple[int, str]]:
    return [
        (int(r), body) for m in view.messages if m.kind == "kernel_context" for r, body in _STATE.findall(m.content)
    ]


def _current(view) -> tuple[int, str]:
    states = _states(view)
    assert states, "the view has no canonical-state section"
    return max(states)


def test_the_highest_revision_is_current_truth(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    apply_kernel_tool(store, sid, "record_decision", {"decision": "Store amounts as float cents"})
    v1 = engine.materialize(request(sid))
    rev1, body1 = _current(v1)
    assert "[D1] Store amounts as float cents" in body1

    apply_kernel_tool(store, sid, "record_decision", {"decision": "Store amounts as Decimal", "supersedes": "D1"})
    store.append(sid, [UserMessage("Go on with the Decimal version.")])
    v2 = engine.materialize(request(sid))
    rev2, body2 = _current(v2)
    assert rev2 > rev1
    assert "[D2] Store amounts as Decimal" in body2 and "float cents" not in body2
    # The old section is provenance: still in the append-only epoch, at a lower revision.
    assert v2.epoch == v1.epoch and (rev1, body1) in _states(v2)
    assert canonical_state(store, sid).revision == rev2


def test_a_rejected_hypothesis_never_renders_active(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    hypothesis = "The cache key ignores the tenant id"
    apply_kernel_tool(store, sid, "propose_hypothesis", {"hypothesis": hypothesis})
    _, body = _current(engine.materialize(request(sid)))
    assert f"[H1] {hypothesis}" in body
    apply_kernel_tool(store, sid, "reject_hypothesis", {"hypothesis": "H1", "reason": "the key includes tenant"})

    def lines_about_h1(view):
        return [line for _, b in _states(view) for line in b.splitlines() if hypothesis in line]

    views = grow(store, sid, engine, 40)  # several rotations: later epochs start from fresh snapshots
    epochs = {v.epoch for v in views}
    assert len(epochs) >= 3
    for v in views:
        rev, body = _current(v)
        current = [line for line in body.splitlines() if hypothesis in line]
        assert current == [f"- [H1] REJECTED: {hypothesis} (the key includes tenant)"], (v.epoch, current)
    # Once a new epoch starts, the superseded active line is no longer provider-visible at all.
    last = views[-1]
    assert last.epoch > views[0].epoch
    assert all("REJECTED" in line for line in lines_about_h1(last))
