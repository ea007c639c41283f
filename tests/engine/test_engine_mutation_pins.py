"""Direct tests of properties that a mutation of the continuity engine broke while every other test passed
(spec: "Bounded materialization", "Cache epochs and working memory"):

* the scored episode index is capped at 16 entries, whatever room the budget leaves;
* an original already recalled in the epoch is never sent again in a later delta of the same epoch.
"""

from __future__ import annotations

import re

from latch.engine import ContinuityEngine
from latch.engine.port import ContextBudget, ContextRequest
from latch.events import AssistantMessage, UserMessage
from latch.host.session import StoreKernelWriter, StoreSessionReader

STREAM = "continuity:test"


def engine(store, sid, config=None) -> ContinuityEngine:
    return ContinuityEngine.for_model(
        "gpt-4o", reader=StoreSessionReader(store, sid), writer=StoreKernelWriter(store, sid, STREAM), config=config
    )


def kernel_texts(view) -> list[str]:
    return [m.content for m in view.messages if m.kind == "kernel_context"]


def test_the_episode_index_holds_at_most_16_entries_with_room_for_many_more(store):
    sid = store.create_session(workspace="/ws", format="latch")
    for i in range(120):  # every user turn starts an episode
        store.append(
            sid,
            [
                UserMessage(f"task {i}: tune the parser module number {i} for the lexer cache"),
                AssistantMessage(text=f"tuned parser module {i} " + "details " * 40),
            ],
        )
    eng = engine(store, sid, {"context": {"recall_tokens": 120_000}})
    budget = ContextBudget(context_window_tokens=400_000, reserve_tokens=4_000, recent_tokens=6_000)
    view = eng.materialize(ContextRequest(session_id=sid, budget=budget))
    (snap,) = kernel_texts(view)
    index = snap.split("<episode-index", 1)[1].split("</episode-index>", 1)[0]
    entries = re.findall(r"^episode #\d+ seq ", index, re.MULTILINE)
    assert len(entries) == 16
    assert view.metrics["episodes"] >= 100  # far more archived episodes than the cap, all scored
    assert view.tokens.episode_tokens < 16 * 200  # and the room was not what stopped it
    assert view.metrics["recall_limit_tokens"] > 20 * view.tokens.episode_tokens


def test_an_original_recalled_in_the_epoch_is_not_sent_again_in_a_later_delta(store):
    sid = store.create_session(workspace="/ws", format="latch")
    store.append(sid, [UserMessage("the deploy key rotation uses vault path secret/zx81 for the rotation")])
    for i in range(60):
        store.append(sid, [UserMessage(f"unrelated chore {i} " + "filler " * 30), AssistantMessage(text=f"done {i}")])
    eng = engine(store, sid, {"context": {"recall_tokens": 20_000}})
    budget = ContextBudget(context_window_tokens=200_000, reserve_tokens=4_000, recent_tokens=3_000)
    first = eng.materialize(ContextRequest(session_id=sid, budget=budget, query="zx81 rotation"))
    assert sum("secret/zx81" in t for t in kernel_texts(first)) == 1  # recalled once, by the snapshot
    for i in range(3):  # later user turns ask about the same original
        store.append(sid, [UserMessage(f"what was the vault path zx81 for the rotation again? ({i})")])
        view = eng.materialize(ContextRequest(session_id=sid, budget=budget))
        assert view.epoch == first.epoch  # the same epoch: deltas, not a new snapshot
        assert sum("secret/zx81" in t for t in kernel_texts(view)) == 1, i
