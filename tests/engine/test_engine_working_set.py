"""The default engine over the real kernel: after a rotation the snapshot says what the agent already did
(the working set), the episode index points at the archived episodes, and state updates within an epoch
carry only what the conversation does not show (spec: "Cache epochs and working memory", "Bounded
materialization")."""

from __future__ import annotations

import re

from kernel_support import session, state, turn

from latch.engine import ContinuityEngine
from latch.engine.port import ContextBudget, ContextRequest
from latch.events import UserMessage
from latch.host.session import StoreKernelWriter, StoreSessionReader
from latch.hotpaths import estimate_tokens
from latch.kernel import apply_kernel_tool

BUDGET = ContextBudget(context_window_tokens=12_000, reserve_tokens=1_000, recent_tokens=1_500)
CONFIG = {"context": {"recall_tokens": 300}}
PAGE = "\n".join(f"{i:4d}  value_{i} = compute_{i}(x) + offset  # line {i}" for i in range(60))


def engine(store, sid: str, stream: str = "continuity:ws") -> ContinuityEngine:
    return ContinuityEngine.for_model(
        None, reader=StoreSessionReader(store, sid), writer=StoreKernelWriter(store, sid, stream), config=CONFIG
    )


def script(store, sid: str) -> list[int]:
    """A session that reads and edits eight modules and runs their tests: one request per step."""
    apply_kernel_tool(store, sid, "set_goal", {"goal": "make every module pass its tests " + "carefully " * 30})
    until = []
    for i in range(8):
        turn(store, sid, "Read", {"file_path": f"/ws/src/mod_{i}.py"}, PAGE)
        until.append(store.max_seq())
        turn(store, sid, "Edit", {"file_path": f"/ws/src/mod_{i}.py", "old_string": "x", "new_string": "y"}, "ok")
        until.append(store.max_seq())
        turn(store, sid, "Bash", {"command": f"pytest -q tests/test_mod_{i}.py"}, "3 passed in 0.01s")
        until.append(store.max_seq())
        if i == 5:
            apply_kernel_tool(store, sid, "record_decision", {"decision": "keep offsets integral"})
    return until


def snapshot_state(view) -> str:
    snap = next(m.content for m in view.messages if m.kind == "kernel_context" and 'type="snapshot"' in m.content)
    return re.search(r'<canonical-state revision="\d+">\n(.*?)\n</canonical-state>', snap, re.S).group(1)


def test_after_every_rotation_the_snapshot_names_what_the_agent_did(store):
    sid = session(store, fmt="claude-code")
    until = script(store, sid)
    eng = engine(store, sid)
    views = [eng.materialize(ContextRequest(session_id=sid, until_seq=u, budget=BUDGET)) for u in until]
    rotated = [(k, v) for k, v in enumerate(views) if v.metrics["rotated"] and v.metrics["generation"] > 1]
    assert len(rotated) >= 4
    for k, view in rotated:
        text = snapshot_state(view)
        done = state(store, sid, until[k])
        for f in done.files:  # every file read or changed so far, each on one line of the working set
            assert re.search(rf"^- {re.escape(f['path'])}: read ×1", text, re.M), (k, f["path"])
        ran = [c["command"] for c in done.commands]
        assert not ran or f"Working set: commands run (newest first):\n- `{ran[-1]}` → ok" in text
        # the episode index is in every snapshot after the first rotation
        snap = next(m.content for m in view.messages if 'type="snapshot"' in m.content)
        assert "<episode-index" in snap and "episode #1 seq" in snap, k


def test_state_updates_within_an_epoch_carry_only_what_the_conversation_does_not_show(store):
    sid = session(store, fmt="claude-code")
    until = script(store, sid)
    eng = engine(store, sid)
    deltas = []
    for u in until:
        view = eng.materialize(ContextRequest(session_id=sid, until_seq=u, budget=ContextBudget()))
        deltas = [m.content for m in view.messages if 'type="delta"' in m.content and "<canonical-state" in m.content]
    assert view.epoch == 1  # the default budget holds the whole session: one epoch
    # 24 reads, edits and test runs: one update when the pass the snapshot showed current went stale (the
    # conversation shows the later passes and edits), and one for the decision
    stale, decision = deltas
    assert "- passed: pytest -q tests/test_mod_0.py (STALE: the workspace changed since)" in stale
    assert "Decisions:\n- [D1] keep offsets integral" in decision
    assert "Goal: unchanged, as stated in this epoch's snapshot" in decision and "carefully" not in decision
    assert "- src/mod_5.py: read ×1, changed ×1 by Edit" in decision


def test_a_resumed_engine_makes_the_same_views(store):
    sid = session(store, fmt="claude-code")
    until = script(store, sid)
    reference = engine(store, sid, "continuity:a")
    want = [reference.materialize(ContextRequest(session_id=sid, until_seq=u, budget=BUDGET)) for u in until]
    for cut in (4, 13, 19):
        first = engine(store, sid, f"continuity:b{cut}")
        for u in until[:cut]:
            first.materialize(ContextRequest(session_id=sid, until_seq=u, budget=BUDGET))
        resumed = engine(store, sid, f"continuity:b{cut}")
        for k in range(cut, len(until)):
            got = resumed.materialize(ContextRequest(session_id=sid, until_seq=until[k], budget=BUDGET))
            assert got == want[k], f"resume after request {cut} diverged at request {k}"


def test_the_working_set_drops_before_decisions_under_a_small_state_budget(store):
    sid = session(store, fmt="claude-code")
    script(store, sid)
    store.append(sid, [UserMessage(text="go on")])
    full = state(store, sid).render(10_000, estimate_tokens)
    small = state(store, sid).render(estimate_tokens(full) - 40, estimate_tokens)
    assert "Decisions:\n- [D1] keep offsets integral" in small
    assert (
        re.search(r"Working set: commands run \(newest first\) \(\d+ older omitted\):", small)
        or "Omitted for budget: 8 commands" in small
    )
    # newest first: what survives is the newest work
    assert "mod_7.py" in small and "mod_0.py" in full
