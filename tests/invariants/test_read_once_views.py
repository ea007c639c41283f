"""Views read from the decoded stretch equal views read from the database.

Before each view the request loop, the engine's ingest and the kernel ledger read the same new events; a store
object hands a stretch it holds decoded to the later readers without reading the database again
(:meth:`latch.store.decoded.DecodedEvents.run`). The same session, viewed through a store object that always reads
the database, must give the same requests byte for byte, the same token figures and records, and the same canonical
state, at every view (rotations and epoch extensions both)."""

from __future__ import annotations

import itertools

from store_backends import reopen

from latch.bench.scenario import ScenarioModel
from latch.events import UserMessage
from latch.host.kernel import kernel_cache
from latch.host.loop import RequestLoop, build_engine
from latch.kernel import canonical_state
from latch.port import ContextBudget, SessionContext
from latch.store.decoded import DecodedEvents

WORKSPACE = "/work/shop"
BUDGET = ContextBudget(context_window_tokens=24_000, reserve_tokens=2_000, recent_tokens=6_000)


class _NoStretch(DecodedEvents):
    """The decoded events of a store object that never hands out a stretch: every read goes to the database."""

    def run(self, after, until=None):
        return []


def _loop(store, sid, name):
    setup = build_engine(store, sid, stream=f"continuity:{name}", engine="continuity", model="claude-sonnet-4-5")
    ctx = SessionContext(workspace=WORKSPACE)
    return RequestLoop(store, sid, setup, BUDGET, session_context=ctx, system_prompt="Be careful.")


def test_views_from_the_decoded_stretch_equal_views_read_from_the_database(store):
    sid = store.create_session(workspace=WORKSPACE, format="claude-code")
    store.append(sid, [UserMessage("Fix the invoice rounding; totals must match the ledger to the cent.")])
    plain = reopen(store)
    plain._decoded = _NoStretch()
    loops = {"stretch": _loop(store, sid, "stretch"), "plain": _loop(plain, sid, "plain")}
    events = ScenarioModel(3, workspace=WORKSPACE).events()
    views = rotations = last = 0
    for _ in range(6):
        store.append(sid, list(itertools.islice(events, 700)))
        assistants = list(store.events(sid, after_seq=store.max_seq() - 300, kinds=("assistant_message",), limit=3))
        for a in assistants:
            got = {name: loop.run(a.seq - 1) for name, loop in loops.items()}
            one, two = got["stretch"], got["plain"]
            assert one.view is not None and two.view is not None
            assert one.lines == two.lines and one.line_tokens == two.line_tokens
            assert one.view.tokens == two.view.tokens and one.view.metrics == two.view.metrics
            assert (one.events, one.history_tokens, one.violations) == (two.events, two.history_tokens, [])
            states = [canonical_state(s, sid, a.seq - 1, cache=kernel_cache()) for s in (store, plain)]
            assert states[0].to_json() == states[1].to_json()
            views += 1
            last = a.seq - 1
            rotations += bool(one.view.metrics.get("rotated"))
    records = [loop.setup.writer.records() for loop in loops.values()]
    assert [(k, s, p) for _, k, s, p in records[0]] == [(k, s, p) for _, k, s, p in records[1]]
    assert views >= 15 and rotations >= 3  # rotations (a whole batch ingested) and epoch extensions both
    assert len(store._decoded.run(last - 100, last)) == 100  # the stretch was there to be served
    plain.close()
