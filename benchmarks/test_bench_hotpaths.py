"""Hot paths: the C++ module against the pure-Python reference (and tiktoken's exact cl100k for the
estimator), measured in the same run.

Run: ``python -m pytest benchmarks/test_bench_hotpaths.py --benchmark-only``. Each native row's
``extra_info`` holds its throughput and ``ratio_to_reference`` (reference time / native time per
byte or per call; the reference rows run first); the bulk and snippet rows also hold
``ratio_to_tiktoken`` and ``estimator_kernel`` (which ASCII path ran: ``LATCH_NATIVE_KERNEL=scalar`` or
``=avx2`` picks one). Targets: bulk ASCII >= 10 GB/s, >= 200x the reference, >= 400x
tiktoken; 300-byte snippets batched >= 3 GB/s (``goal_GB_per_s`` and ``ratio_to_goal`` in those rows). CI runs this file once with ``--benchmark-disable`` as a smoke test (every row also
checks that native and reference agree).
"""

from __future__ import annotations

import itertools
import os
import random

import numpy as np
import pytest

from latch.hotpaths import _py

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

REF_BULK_BYTES = 256 * 1024  # the reference and tiktoken read a slice; rates are per byte
REF_SNIPPETS = 500
GOAL_BULK_GB_PER_S = 10.0
GOAL_SNIPPETS_BATCH_GB_PER_S = 3.0
_per_unit: dict[str, float] = {}  # row -> median seconds per byte (estimator) or per call


def _goal(benchmark, gb_per_s: float) -> None:
    """This row's throughput goal and its throughput over the goal (>= 1 when met)."""
    if benchmark.stats is None:
        return
    benchmark.extra_info["goal_GB_per_s"] = gb_per_s
    benchmark.extra_info["ratio_to_goal"] = round(benchmark.extra_info["GB_per_s"] / gb_per_s, 3)


def _record(
    benchmark, row: str, units: int, *, unit: str = "byte", ref: str | None = None, peer: str | None = None
) -> None:
    """Store this row's median time per unit and, for native rows, its ratios to earlier rows."""
    if benchmark.stats is None:  # --benchmark-disable: nothing was timed
        return
    per = benchmark.stats.stats.median / units
    _per_unit[row] = per
    if unit == "byte":
        benchmark.extra_info["MB_per_s"] = round(1 / per / 1e6, 2)
        benchmark.extra_info["GB_per_s"] = round(1 / per / 1e9, 3)
    else:
        benchmark.extra_info[f"us_per_{unit}"] = round(per * 1e6, 4)
    if row.startswith(("bulk/native", "snippets/native")):
        benchmark.extra_info["estimator_kernel"] = native.ESTIMATOR_KERNEL  # "avx512", "avx2" or "scalar"
    if ref in _per_unit:
        benchmark.extra_info["ratio_to_reference"] = round(_per_unit[ref] / per, 1)
    if peer in _per_unit:
        benchmark.extra_info["ratio_to_tiktoken"] = round(_per_unit[peer] / per, 1)


# ---- estimator: bulk ASCII ------------------------------------------------------------------------


def test_estimate_bulk_reference(benchmark, bulk_ascii):
    text = bulk_ascii[:REF_BULK_BYTES]
    benchmark.pedantic(_py.estimate_tokens, args=(text,), rounds=3, iterations=1)
    _record(benchmark, "bulk/reference", len(text))


def test_estimate_bulk_tiktoken(benchmark, bulk_ascii, cl100k):
    text = bulk_ascii[:REF_BULK_BYTES]
    benchmark.pedantic(cl100k.encode_ordinary, args=(text,), rounds=3, iterations=1)
    _record(benchmark, "bulk/tiktoken", len(text))


def test_estimate_bulk_native(benchmark, bulk_ascii):
    assert native.estimate_tokens(bulk_ascii[:REF_BULK_BYTES]) == _py.estimate_tokens(bulk_ascii[:REF_BULK_BYTES])
    benchmark(native.estimate_tokens, bulk_ascii)
    _record(benchmark, "bulk/native", len(bulk_ascii), ref="bulk/reference", peer="bulk/tiktoken")
    _goal(benchmark, GOAL_BULK_GB_PER_S)
    benchmark.extra_info["cpus"] = os.cpu_count()


def test_estimate_bulk_native_one_thread(benchmark, bulk_ascii):
    """The kernel on one thread: 256 KiB, under the size from which a text is shared out across threads
    (bulk/native over this row is the speed-up the other cores add)."""
    text = bulk_ascii[:REF_BULK_BYTES]
    benchmark(native.estimate_tokens, text)
    _record(benchmark, "bulk/native_one_thread", len(text), ref="bulk/reference", peer="bulk/tiktoken")
    if benchmark.stats is not None and "bulk/native" in _per_unit:
        # The speed-up the other cores add (at most cpus): what sharing a text out across threads costs.
        benchmark.extra_info["bulk_speedup_over_one_thread"] = round(
            _per_unit["bulk/native_one_thread"] / _per_unit["bulk/native"], 2
        )
        benchmark.extra_info["cpus"] = os.cpu_count()


# ---- estimator: 300-byte snippets -----------------------------------------------------------------


def _each(estimate, texts):
    for t in texts:
        estimate(t)


def test_estimate_snippets_reference(benchmark, snippets):
    few = snippets[:REF_SNIPPETS]
    benchmark.pedantic(_each, args=(_py.estimate_tokens, few), rounds=3, iterations=1)
    _record(benchmark, "snippets/reference", sum(map(len, few)))


def test_estimate_snippets_tiktoken(benchmark, snippets, cl100k):
    few = snippets[:REF_SNIPPETS]
    benchmark.pedantic(_each, args=(cl100k.encode_ordinary, few), rounds=3, iterations=1)
    _record(benchmark, "snippets/tiktoken", sum(map(len, few)))


def test_estimate_snippets_native(benchmark, snippets):
    benchmark(_each, native.estimate_tokens, snippets)
    _record(benchmark, "snippets/native", sum(map(len, snippets)), ref="snippets/reference", peer="snippets/tiktoken")


def test_estimate_snippets_native_batch(benchmark, snippets):
    want = _py.estimate_tokens_batch(snippets[:REF_SNIPPETS])
    assert native.estimate_tokens_batch(snippets[:REF_SNIPPETS]).tolist() == want.tolist()
    benchmark(native.estimate_tokens_batch, snippets)
    _record(
        benchmark, "snippets/native_batch", sum(map(len, snippets)), ref="snippets/reference", peer="snippets/tiktoken"
    )
    _goal(benchmark, GOAL_SNIPPETS_BATCH_GB_PER_S)


def test_estimate_snippets_native_batch_one_thread(benchmark, snippets):
    """The batch on one thread: 1,500 snippets (450 KB), under the size from which a batch is shared out
    across threads, so this row is the per-core cost of a snippet (the kernel's fixed cost per text shows
    here: bulk/native_one_thread over this row)."""
    few = snippets[:1500]
    benchmark(native.estimate_tokens_batch, few)
    _record(
        benchmark,
        "snippets/native_batch_one_thread",
        sum(map(len, few)),
        ref="snippets/reference",
        peer="snippets/tiktoken",
    )


# ---- episode scoring ------------------------------------------------------------------------------

SCORE_SIZES = (10**3, 10**4, 10**5)


def _episodes(n: int) -> dict:
    """n episodes, 1..12 terms (vocabulary 5,000) and 0..3 files (200) each; a 20-term query."""
    rng = np.random.default_rng(n)
    term_counts = rng.integers(1, 13, n)
    file_counts = rng.integers(0, 4, n)
    return dict(
        term_indptr=np.concatenate(([0], np.cumsum(term_counts))).astype(np.int64),
        term_ids=rng.integers(0, 5000, int(term_counts.sum())).astype(np.int64),
        file_indptr=np.concatenate(([0], np.cumsum(file_counts))).astype(np.int64),
        file_ids=rng.integers(0, 200, int(file_counts.sum())).astype(np.int64),
        markers=rng.integers(0, 64, n).astype(np.int64),
        last_seq=np.sort(rng.integers(1, 50 * n, n)).astype(np.int64),
        query_terms=rng.integers(0, 5000, 20).astype(np.int64),
        current_files=rng.integers(0, 200, 3).astype(np.int64),
        now_seq=50 * n,
        k=20,
    )


@pytest.fixture(scope="module")
def episode_sets() -> dict[int, tuple[dict, dict]]:
    """Per size: (numpy arrays for native, Python lists for the reference)."""
    out = {}
    for n in SCORE_SIZES:
        arrays = _episodes(n)
        lists = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in arrays.items()}
        out[n] = (arrays, lists)
    return out


@pytest.mark.parametrize("n", SCORE_SIZES)
def test_score_reference(benchmark, episode_sets, n):
    _, lists = episode_sets[n]
    benchmark.pedantic(_py.score_episodes, kwargs=lists, rounds=3, iterations=1)
    _record(benchmark, f"score/{n}/reference", 1, unit="call")


@pytest.mark.parametrize("n", SCORE_SIZES)
def test_score_native(benchmark, episode_sets, n):
    arrays, lists = episode_sets[n]
    got = benchmark(native.score_episodes, **arrays)
    assert len(got) == 20
    if n <= 10**4:
        assert got == _py.score_episodes(**lists)
    _record(benchmark, f"score/{n}/native", 1, unit="call", ref=f"score/{n}/reference")


# ---- unit-suffix budgeting ------------------------------------------------------------------------

SUFFIX_SIZES = (10**3, 10**5, 10**6)


@pytest.fixture(scope="module")
def prefix_sums() -> dict[int, tuple[list[int], np.ndarray, int]]:
    """Per size: running sums of unit sizes 1..4,000 tokens (list, int64 array) and a budget that
    keeps about 40 units."""
    rng = random.Random(11)
    out = {}
    for n in SUFFIX_SIZES:
        sums = list(itertools.accumulate((rng.randrange(1, 4000) for _ in range(n)), initial=0))
        out[n] = (sums, np.asarray(sums, dtype=np.int64), 80_000)
    return out


@pytest.mark.parametrize("n", SUFFIX_SIZES)
def test_suffix_reference(benchmark, prefix_sums, n):
    sums, _, budget = prefix_sums[n]
    benchmark(_py.suffix_start, sums, budget)
    _record(benchmark, f"suffix/{n}/reference", 1, unit="call")


@pytest.mark.parametrize("n", SUFFIX_SIZES)
def test_suffix_native_list(benchmark, prefix_sums, n):
    sums, _, budget = prefix_sums[n]
    assert native.suffix_start(sums, budget) == _py.suffix_start(sums, budget)
    benchmark(native.suffix_start, sums, budget)
    _record(benchmark, f"suffix/{n}/native_list", 1, unit="call", ref=f"suffix/{n}/reference")


@pytest.mark.parametrize("n", SUFFIX_SIZES)
def test_suffix_native_array(benchmark, prefix_sums, n):
    sums, arr, budget = prefix_sums[n]
    assert native.suffix_start(arr, budget) == _py.suffix_start(sums, budget)
    benchmark(native.suffix_start, arr, budget)
    _record(benchmark, f"suffix/{n}/native_array", 1, unit="call", ref=f"suffix/{n}/reference")
