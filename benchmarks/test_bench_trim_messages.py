"""Suffix budgeting: Latch against LangChain's ``trim_messages`` on the same 10^5 messages.

Both sides answer the same question: the largest suffix of whole messages within ``BUDGET`` tokens,
with the same length-based token counter (``len(text) // 4 + 1`` per message), so the comparison is
about the algorithm, not the tokenizer:

* ``langchain``: ``trim_messages(messages, strategy="last", max_tokens=BUDGET, token_counter=...)``
  (a binary search that re-counts message lists);
* ``latch_request``: what Latch does per request: one :func:`latch.hotpaths.suffix_start` over the
  prefix-sum array it maintains as units arrive (a bisect);
* ``latch_from_scratch``: what Latch does with no maintained sums (:func:`latch.engine.units.suffix_fit`,
  as ``PolicyEngine.fit_suffix``): count messages from the newest back and stop at the first that does
  not fit (O(kept) counts, where LangChain's bisection counts every message several times);
* ``latch_prefix_sums_from_scratch``: count every message, build the prefix sums, then ``suffix_start``
  (what the maintained sums cost when built in one go).

Every row checks that it keeps exactly as many messages as LangChain. Each Latch row's
``extra_info`` holds ``ratio_to_langchain`` (LangChain time / Latch time; the LangChain row runs
first). Run: ``python -m pytest benchmarks/test_bench_trim_messages.py --benchmark-only``; CI runs
it once with ``--benchmark-disable``.
"""

# No `from __future__ import annotations` here: trim_messages reads count_message's annotation object.
import random

import numpy as np
import pytest

from latch import hotpaths
from latch.engine.units import suffix_fit

lc = pytest.importorskip("langchain_core.messages", reason="langchain-core is a test dependency")

MESSAGES = 100_000
BUDGET = 64_000
_median: dict[str, float] = {}


def count(text: str) -> int:
    return len(text) // 4 + 1


def count_message(message: lc.BaseMessage) -> int:
    """LangChain's per-message counter shape (it inspects the annotation to tell it from a list counter)."""
    return count(message.content)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """10^5 message texts with the corpus's spread of sizes (a few chars to a few KB), deterministic."""
    rng = random.Random(7)
    words = "the cache token budget session error test file path value request response module".split()
    pool = " ".join(rng.choice(words) for _ in range(40_000))
    out = []
    for _ in range(MESSAGES):
        n = min(len(pool) - 1, int(rng.lognormvariate(5.5, 1.2)))
        start = rng.randrange(len(pool) - n)
        out.append(pool[start : start + n])
    return out


@pytest.fixture(scope="module")
def expected(texts) -> int:
    """Messages a correct suffix budget keeps (by a plain reverse scan)."""
    used = kept = 0
    for t in reversed(texts):
        used += count(t)
        if used > BUDGET:
            break
        kept += 1
    return kept


def _record(benchmark, row: str) -> None:
    if benchmark.stats is None:  # --benchmark-disable
        return
    _median[row] = benchmark.stats.stats.median
    if row != "langchain" and "langchain" in _median:
        benchmark.extra_info["ratio_to_langchain"] = round(_median["langchain"] / _median[row], 1)


def test_langchain_trim_messages(benchmark, texts, expected):
    messages = [lc.HumanMessage(t) if i % 2 == 0 else lc.AIMessage(t) for i, t in enumerate(texts)]

    def trim():
        return lc.trim_messages(messages, strategy="last", max_tokens=BUDGET, token_counter=count_message)

    kept = benchmark.pedantic(trim, rounds=3, iterations=1)
    assert len(kept) == expected
    _record(benchmark, "langchain")


def test_latch_suffix_start_per_request(benchmark, texts, expected):
    prefix = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([count(t) for t in texts], out=prefix[1:])  # maintained incrementally by the engine
    start = benchmark(hotpaths.suffix_start, prefix, BUDGET)
    assert len(texts) - start == expected
    _record(benchmark, "latch_request")


def test_latch_suffix_start_from_scratch(benchmark, texts, expected):
    def trim():
        return min(suffix_fit(texts, count, BUDGET), len(texts) - 1)

    start = benchmark.pedantic(trim, rounds=5, iterations=1)
    assert len(texts) - start == expected
    _record(benchmark, "latch_from_scratch")


def test_latch_prefix_sums_from_scratch(benchmark, texts, expected):
    def trim():
        prefix = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum([count(t) for t in texts], out=prefix[1:])
        return hotpaths.suffix_start(prefix, BUDGET)

    start = benchmark.pedantic(trim, rounds=5, iterations=1)
    assert len(texts) - start == expected
    _record(benchmark, "latch_prefix_sums")
