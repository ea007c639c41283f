"""The harness's prompt in the replayed views of the real corpus.

Codex: the rollout records the system prompt (``session_meta.base_instructions``) and the developer/permission
instructions; replay sends them as the request's system, so request 1's view is within 0.9-1.3x of the
provider's prompt. Claude Code: the JSONL records no prompt; the overhead is inferred from the provider usage
(``harness_tokens``, in every view and the budget), and the views that still hold the whole conversation
(Latch evicted nothing yet, so they hold what the harness sent) have a median ratio within the band.
"""

from __future__ import annotations

import pytest
from corpus_support import corpus_format, corpus_name

from latch.accounting.forecast import ProviderForecast
from latch.cli.replay import run_replay
from latch.events import SystemNote
from latch.host.replay import RATIO_BAND, ratio_summary
from latch.providers import to_anthropic_messages, to_openai_chat, validate_anthropic_messages, validate_openai_chat

pytestmark = pytest.mark.corpus
LO, HI = RATIO_BAND
KNOWN_OVER = {
    # the heuristic over-counts this session's English prose and Rust by ~1.3x (corpus prose
    # is at 1.45x of the exact count, against the 1.15x goal); with the derived goal and latest instruction in
    # the state its whole-conversation views reach a median of 1.33. Bounded, not waived.
    "claude-code/claude-reliability_python-to-rust-port.jsonl": 1.45,
}

MISSED_FORECASTS = {
    # request 11 carried ~30,000 provider tokens more than request 10 while the JSONL grew by ~400 estimated tokens
    # (content Claude Code sent and did not log); no fit on earlier requests can see it coming
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": [11],
}


def test_harness_in_every_corpus_replay(corpus_session):
    path, store, sid = corpus_session
    doc, views = run_replay(store, sid, keep_views=True)
    h, rows, s = doc["harness"], doc["requests"], doc["summary"]
    assert s["violations"] == []
    notes = [
        e.event
        for e in store.events(sid, kinds=["system_note"])
        if isinstance(e.event, SystemNote) and e.event.subtype in ("system_prompt", "developer")
    ]
    fmt = corpus_format(path)
    if h["source"] in ("recorded", "recorded+inferred"):
        assert notes and all(v.system == views[0].system != "" for v in views)
        assert {r["harness_tokens"] for r in rows if r["total_tokens"] is not None} == {h["inferred_tokens"]}
    else:
        assert not any(v.system for v in views)
        assert {r["harness_tokens"] for r in rows if r["total_tokens"] is not None} == {h["inferred_tokens"]}
    loader = lambda sha256: store.get_artifact(sha256)[1]  # noqa: E731
    for view in (views[0], views[-1]):  # the harness's system prompt reaches both wire formats
        openai, anthropic = to_openai_chat(view, loader), to_anthropic_messages(view, loader)
        assert validate_openai_chat(openai) == [] and validate_anthropic_messages(anthropic) == []
        if view.system:
            assert openai["messages"][0] == {"role": "system", "content": view.system}
    for r in rows:
        if r["total_tokens"] is not None and r["provider_prompt_tokens"]:
            assert r["provider_ratio"] == round(r["total_tokens"] / r["provider_prompt_tokens"], 3)
    if fmt == "codex":
        # base instructions + developer instructions recorded; the tool schemas are not: their overhead is inferred
        assert h["source"] == "recorded+inferred" and h["notes"] >= 2 and h["inferred_tokens"] > 5_000
        assert views[0].system.startswith(next(n.text for n in notes if n.subtype == "system_prompt"))
        assert LO <= rows[0]["provider_ratio"] <= HI, rows[0]
    if fmt == "claude-code" and sum(1 for r in rows if r["provider_prompt_tokens"]) >= 2:
        assert h["source"] == "inferred" and h["inferred_tokens"] > 5_000, (corpus_name(path), h)
        complete = s["provider_ratio_complete_views"]
        hi = KNOWN_OVER.get(corpus_name(path), HI)
        assert complete["requests"] >= 2 and LO <= complete["median"] <= hi, (corpus_name(path), complete)
    # the provider-token forecast (latch.accounting.forecast) of each request is the fit on the earlier requests only; for
    # Claude Code and Codex, every view that still holds the whole conversation is within
    # the band, but for MISSED_FORECASTS. Other formats are reported, not held to it: Aider's "Tokens: N sent" counts
    # the repository map and added files its history lacks; sessions of 2-4 requests have one or two steps to fit.
    fixed = h["system_tokens"] + h["tools_tokens"] + h["inferred_tokens"]
    fit = ProviderForecast()
    for r in rows:
        assert r["provider_forecast_tokens"] == (
            fit.stable_forecast(r["total_tokens"]) if r["total_tokens"] is not None else None
        )
        if r["provider_prompt_tokens"]:
            fit.observe(fixed + r["history_tokens"], r["provider_prompt_tokens"])
    assert s["forecast_ratio_evicted_views"] == ratio_summary(
        [r["forecast_ratio"] for r in rows if r["total_tokens"] is not None and not r["view_complete"]]
    )
    if fmt not in ("claude-code", "codex"):
        return
    missed = [
        r["request"]
        for r in rows
        if r["view_complete"] and r["forecast_ratio"] is not None and not LO <= r["forecast_ratio"] <= HI
    ]
    assert missed == MISSED_FORECASTS.get(corpus_name(path), []), (corpus_name(path), missed)
