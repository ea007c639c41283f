"""Every corpus session replayed with the exact cl100k estimator (latch-tiktoken) through the host request loop
: each view's reported total equals the whole view recounted by tiktoken
(``test_exact_counts.recount``), and so does the loop's own recount."""

from __future__ import annotations

import pytest
from test_exact_counts import BUDGET, SYSTEM, TOOLS, _cl100k, recount

from latch.host.loop import RequestLoop, build_engine, model_requests

pytestmark = pytest.mark.corpus


def test_exact_views_recount_to_their_reported_totals(corpus_session):
    pytest.importorskip("latch_tiktoken")
    enc = _cl100k()
    _, store, sid = corpus_session
    setup = build_engine(store, sid, stream="continuity:exact", estimator="tiktoken")
    loop = RequestLoop(store, sid, setup, BUDGET, system_prompt=SYSTEM, tools=TOOLS)
    views = 0
    for r in loop.replay(model_requests(store.events(sid))):
        if r.view is None:  # a unit larger than the hard budget alone: refused, never sent
            continue
        views += 1
        assert r.protocol_violations == [] and r.budget_violations == []
        exact = recount(r.view, enc)
        assert (r.view.tokens.total_tokens, r.recounted_tokens) == (exact, exact), r.request
    assert views > 0
