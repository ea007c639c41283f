"""Invariant tier: append-only cache epochs (spec: "Cache epochs and working memory").

Within an epoch each request's canonical serialization is a byte prefix of the next one; state
changes append a KernelContext delta at a higher revision instead of rewriting earlier messages;
a rotation starts a fresh snapshot.
"""

from __future__ import annotations

import re

from invariant_helpers import continuity, grow, new_session, wire

from latch.bench.scenario import ScenarioModel
from latch.kernel.tools import apply_kernel_tool

_REVISION = re.compile(r'<kernel-context type="(snapshot|delta)" generation="(\d+)" revision="(\d+)"')


def _kernel_headers(view) -> list[tuple[str, int, int]]:
    out = []
    for m in view.messages:
        if m.kind == "kernel_context":
            kind, gen, rev = _REVISION.match(m.content).groups()
            out.append((kind, int(gen), int(rev)))
    return out


def test_each_request_extends_the_previous_one_within_an_epoch(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    decisions = iter(range(1000))

    def decide(i):
        if i % 7 == 3:  # an ordinary state change mid-epoch
            apply_kernel_tool(store, sid, "record_decision", {"decision": f"decision number {next(decisions)}"})

    views = grow(store, sid, engine, 60, between=decide)
    appends = rotations = 0
    for prev, cur in zip(views, views[1:], strict=False):
        if cur.epoch == prev.epoch:
            assert wire(cur).startswith(wire(prev)), f"epoch {cur.epoch} rewrote its prefix"
            assert cur.messages[: len(prev.messages)] == prev.messages
            appends += 1
        else:
            assert cur.epoch == prev.epoch + 1
            assert cur.metrics["rotation_reason"] in ("recent_tokens", "hard_budget")
            rotations += 1
    assert appends >= 20 and rotations >= 3, (appends, rotations)

    # A state change inside an epoch became a delta with a higher revision, appended after a snapshot.
    deltas = [v for v in views if any(k == "delta" for k, _, _ in _kernel_headers(v))]
    assert deltas
    for v in views:
        heads = _kernel_headers(v)
        assert heads[0][0] == "snapshot" and all(k == "delta" for k, _, _ in heads[1:])
        assert all(g == v.epoch for _, g, _ in heads)
        revs = [r for _, _, r in heads]
        assert revs == sorted(set(revs)), f"revisions must strictly increase within an epoch: {revs}"


def test_a_rotation_starts_a_fresh_snapshot_and_keeps_the_newest_whole_units(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    views = grow(store, sid, engine, 40, model=ScenarioModel(5, workspace="/work/shop"))
    rotated = [v for p, v in zip(views, views[1:], strict=False) if v.epoch != p.epoch]
    assert rotated
    for v in rotated:
        assert v.messages[0].kind == "session_context" and v.messages[1].kind == "kernel_context"
        assert _kernel_headers(v)[0][0] == "snapshot"
        # hysteresis: the kept conversation is at most three quarters of recent_tokens (or one oversized unit)
        limit = v.metrics["recent_limit_tokens"]
        assert v.metrics["retained_tokens"] <= limit * 3 // 4 or v.metrics["units"] == 1
