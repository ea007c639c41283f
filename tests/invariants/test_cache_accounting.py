"""Invariant tier: cache-accounting semantics (spec: "Context metrics").

Three quantities, never conflated:

* estimated architecture cacheability = common_prefix_tokens / request_tokens (Latch's canonical
  serialization and estimator);
* provider prefix utilization = cache_read_tokens / common_prefix_tokens of that request;
* measured provider cache hit rate = cache_read / (cache_read + cache_miss), from provider-reported
  categories (miss = uncached input + cache writes).

An unknown category stays unknown (``None``), never 0.
"""

from __future__ import annotations

import pytest
from invariant_helpers import continuity, grow, new_session, request

from latch.events import Usage
from latch.providers import common_prefix_bytes, common_prefix_tokens


def test_cacheability_is_common_prefix_over_request_tokens(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    views = grow(store, sid, engine, 30)
    assert views[0].metrics["common_prefix_tokens"] == 0  # nothing was sent before
    same = rotated = 0
    for prev, cur in zip(views, views[1:], strict=False):
        m = cur.metrics
        assert m["request_tokens"] == cur.tokens.total_tokens
        assert m["cacheability"] == m["common_prefix_tokens"] / m["request_tokens"]
        if cur.epoch == prev.epoch:  # append-only: the whole previous request is the reusable prefix
            assert m["common_prefix_tokens"] == prev.metrics["request_tokens"]
            same += 1
        else:  # a rotation keeps the system field, tools and session context
            assert 0 < m["common_prefix_tokens"] < prev.metrics["request_tokens"]
            rotated += 1
    assert same and rotated


def test_provider_utilization_and_hit_rate_come_from_reported_categories(store):
    sid = new_session(store)
    engine = continuity(store, sid)
    grow(store, sid, engine, 4)
    sent = engine.materialize(request(sid))  # the request the provider then answers
    common = sent.metrics["common_prefix_tokens"]
    store.append(
        sid, [Usage(input_tokens=300, output_tokens=50, cache_read_tokens=common // 2, cache_write_tokens=700)]
    )
    provider = engine.materialize(request(sid)).metrics["provider"]
    assert provider["common_prefix_tokens"] == common
    assert provider["prefix_utilization"] == (common // 2) / common
    assert provider["cache_hit_rate"] == (common // 2) / (common // 2 + 300 + 700)
    assert provider["prompt_tokens"] == 300 + common // 2 + 700


@pytest.mark.parametrize(
    "usage,unknown",
    [
        (Usage(input_tokens=1200, output_tokens=80), ("cache_read_tokens", "prefix_utilization", "cache_hit_rate")),
        (Usage(cache_read_tokens=900, output_tokens=80), ("input_tokens", "prompt_tokens", "cache_hit_rate")),
    ],
)
def test_unknown_categories_stay_unknown(store, usage, unknown):
    sid = new_session(store)
    engine = continuity(store, sid)
    grow(store, sid, engine, 3)
    engine.materialize(request(sid))
    store.append(sid, [usage])
    provider = engine.materialize(request(sid)).metrics["provider"]
    for key in unknown:
        assert provider[key] is None, (key, provider)


def test_common_prefix_is_measured_on_canonical_bytes_at_a_character_boundary():
    a = "système: caché ✓\n".encode()
    b = "système: cachè ✓\n".encode()
    n = common_prefix_bytes(a, b)
    assert a[:n] == b[:n] and a[:n].decode() == "système: cach"
    assert common_prefix_tokens(a, b, len) == len("système: cach")
    assert common_prefix_tokens(b"", b"x", len) == 0
