"""Provider-token forecasts (latch.accounting.forecast): the online fit of a session's provider counts against Latch's
estimates, and the replay's per-request forecasts, which use only the requests before them."""

from __future__ import annotations

import json

import pytest

from latch.accounting.forecast import ANCHOR_REQUESTS, MIN_STEP_TOKENS, RATE_BOUNDS, ProviderForecast
from latch.accounting.pricing import usd, view_cost
from latch.cli.replay import run_replay
from latch.host.ingest import import_file
from latch.store import EventStore


def test_nothing_observed_forecasts_nothing():
    f = ProviderForecast()
    assert f.forecast(10_000) is None and f.rate == 1.0 and f.intercept_tokens == 0
    assert f.to_json() == {"rate": 1.0, "intercept_tokens": 0, "requests": 0, "steps": 0, "stable": False}


def test_one_request_anchors_a_rate_of_one():
    f = ProviderForecast()
    f.observe(12_000, 9_000)
    assert f.rate == 1.0 and f.intercept_tokens == 0  # 9,000 - 12,000 clamps to 0: a fixed part is never negative
    assert f.forecast(12_000) == 12_000
    g = ProviderForecast()
    g.observe(8_000, 10_000)
    assert g.forecast(9_000) == 11_000  # the provider's count plus the estimated growth


def test_an_exact_linear_provider_is_forecast_exactly():
    f = ProviderForecast()
    for e in range(10_000, 20_000, 1_000):
        f.observe(e, 4_000 + round(0.6 * e))
    assert f.rate == pytest.approx(0.6) and f.intercept_tokens == 4_000
    assert f.forecast(30_000) == 22_000 and f.forecast(0) == 4_000 and f.forecast(-5) == 4_000
    assert f.to_json() == {"rate": 0.6, "intercept_tokens": 4_000, "requests": 10, "steps": 9, "stable": True}


def test_a_spike_does_not_move_the_median_rate_and_the_intercept_follows_the_latest_requests():
    f = ProviderForecast()
    counts = [
        (10_000, 10_000),
        (11_000, 10_500),
        (12_000, 11_000),
        (12_500, 41_250),
        (13_000, 41_500),
        (14_000, 42_000),
        (15_000, 42_500),
    ]  # request 4 carried 30,000 tokens the transcript lacks
    for e, p in counts:
        f.observe(e, p)
    assert f.rate == 0.5  # slopes 0.5, 0.5, 60.5, 0.5, 0.5, 0.5
    assert f.intercept_tokens == 35_000  # median of the last ANCHOR_REQUESTS: 35,000 each
    assert ANCHOR_REQUESTS == 3 and f.forecast(16_000) == 43_000


def test_small_steps_accumulate_and_a_shrinking_count_starts_over():
    f = ProviderForecast()
    f.observe(10_000, 10_000)
    for i in range(1, 5):  # 4 steps of 20 estimated tokens: too small alone
        f.observe(10_000 + 20 * i, 10_000 + 10 * i)
    assert MIN_STEP_TOKENS == 50 and f.to_json()["steps"] == 1  # 10,000 -> 10,060 (the third small step)
    assert f.rate == pytest.approx(30 / 60)
    f.observe(30_000, 5_000)  # the provider count shrank (a harness compaction): no slope, a new base
    f.observe(31_000, 5_900)
    assert f.to_json()["steps"] == 2 and f.rate == pytest.approx((0.5 + 0.9) / 2)


def test_the_rate_is_clamped_and_bad_pairs_are_ignored():
    f = ProviderForecast()
    f.observe(10_000, 1_000)
    f.observe(20_000, 1_001)
    assert f.rate == RATE_BOUNDS[0]
    f.observe(0, 5_000)
    f.observe(5_000, -1)
    assert f.requests == 2


def _chat(tmp_path, usage):
    """An OpenAI chat transcript: 4 user/assistant turns of growing size, each assistant turn with ``usage``."""
    messages = []
    for i, prompt in enumerate(usage):
        messages.append(
            {"role": "user", "content": f"step {i}: " + "please refactor the parser module " * (40 * i + 5)}
        )
        messages.append(
            {
                "role": "assistant",
                "content": f"done with step {i}",
                "usage": {"prompt_tokens": prompt, "completion_tokens": 10},
            }
        )
    p = tmp_path / "chat.json"
    p.write_text(json.dumps({"model": "gpt-4o", "messages": messages}))
    return p


def test_replay_forecasts_each_request_from_the_earlier_ones_only(tmp_path):
    usage = [3_000, 3_400, 3_800, 4_200, 4_600]
    with EventStore(":memory:") as store:
        sid, _, _ = import_file(store, _chat(tmp_path, usage), final=True)
        # the calibrated heuristic (over the provider's count: a rate below 1), not an exact tokenizer
        doc, _ = run_replay(store, sid, estimator="heuristic-o200k")
        bare, _ = run_replay(store, sid, harness=False, estimator="heuristic-o200k")
    assert {r["provider_forecast_tokens"] for r in bare["requests"]} == {None}
    assert bare["summary"]["provider_rate"] is None and bare["summary"]["forecast_ratio"]["requests"] == 0
    rows, h = doc["requests"], doc["harness"]
    fixed = h["system_tokens"] + h["tools_tokens"] + h["inferred_tokens"]
    f = ProviderForecast()
    for r in rows:  # the same fit, fed with what the JSON shows of the requests before each one
        assert r["provider_forecast_tokens"] == f.stable_forecast(r["total_tokens"])
        assert r["forecast_ratio"] == (
            round(r["provider_forecast_tokens"] / r["provider_prompt_tokens"], 3)
            if r["provider_forecast_tokens"] is not None
            else None
        )
        f.observe(fixed + r["history_tokens"], r["provider_prompt_tokens"])
    # two steps make a stable fit: requests 1-3 give two, request 4 is the first forecast
    assert [r["provider_forecast_tokens"] is not None for r in rows] == [False, False, False, True, True]
    total = 0.0
    for r in rows:  # the forecast priced like the view: its cached prefix scaled by forecast / estimate
        fc = r["provider_forecast_tokens"]
        if fc is None:
            assert r["cost"]["view_forecast_usd"] is None
            total += r["cost"]["view_usd"]
            continue
        prefix = min(fc, round(r["cost"]["view_cached_prefix_tokens"] * fc / r["total_tokens"]))
        want = view_cost(fc, prefix, 10, "gpt-4o")
        assert r["cost"]["view_forecast_usd"] == usd(want.usd) and want.cache_read == prefix
        total += r["cost"]["view_forecast_usd"]
    assert doc["summary"]["cost"]["view_forecast_usd"] == pytest.approx(total, abs=1e-7)
    assert doc["summary"]["cost"]["view_forecast_usd"] < doc["summary"]["cost"]["view_usd"]  # the rate is below 1
    assert doc["summary"]["provider_rate"] == f.to_json() and f.to_json()["steps"] == 4
    assert doc["summary"]["forecast_ratio"]["requests"] == 2
