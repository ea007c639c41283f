"""A bench job's wire-format checks per request: each view rendered as the three request bodies (OpenAI chat,
Anthropic Messages, Responses) and each body validated whole (``whole``: ``validate_*(to_*(view))``, what a job
did before), against :class:`latch.providers.WireCheck` (``resumed``: each item rendered once, each body validated
from the first message that is not the same object as the previous body's), over the views of one job, in one run.

The views are those of ``run_job`` (continuity; ``LATCH_BENCH_FULL=1``: the Codex corpus session at
``256k:32k:64k``, the longest corpus job; else the example session at ``32k:4k:8k``), recorded once; then the two
ways check them in turn, :data:`ROUNDS` rounds each, CPU seconds (``time.process_time``), each round a fresh
:class:`~latch.providers.WireCheck`. Both give the same violations for every view (asserted). ``extra_info``:
``views``, ``messages`` (over all views), ``seconds_whole`` / ``seconds_resumed`` (median round, all views),
``ratio_resumed`` (resumed over whole).

On the shared 2-core box (load 7-9), ``LATCH_BENCH_FULL=1``: 174 views, 17,521 messages, 0.437 -> 0.045 s
(ratio 0.104).

Run: ``python -m pytest benchmarks/test_bench_wire_check.py --benchmark-only``
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from latch.bench import runner
from latch.bench.runner import SessionSource, parse_budgets, run_job
from latch.providers import (
    WireCheck,
    to_anthropic_messages,
    to_openai_chat,
    to_responses,
    validate_anthropic_messages,
    validate_openai_chat,
    validate_responses,
)

FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
ROUNDS = 3
ROOT = Path(__file__).resolve().parents[1]
CODEX = (ROOT.parent / "shared" / "corpus" / "codex" / "edgerunner_codex-session.jsonl").resolve()


class _Recording(WireCheck):
    """A job's WireCheck that keeps every view it is given."""

    views: list[Any] = []

    def problems(self, view: Any) -> list[str]:
        _Recording.views.append(view)
        return super().problems(view)


def _whole(views: list[Any], model: str, max_tokens: int) -> list[list[str]]:
    return [
        validate_openai_chat(to_openai_chat(v))
        + validate_anthropic_messages(to_anthropic_messages(v, max_tokens=max_tokens))
        + validate_responses(to_responses(v, model=model))
        for v in views
    ]


def _resumed(views: list[Any], model: str, max_tokens: int) -> list[list[str]]:
    check = WireCheck(model=model, max_tokens=max_tokens)
    return [check.problems(v) for v in views]


def test_wire_check_per_request(benchmark, monkeypatch):
    if FULL:
        if not CODEX.is_file():
            pytest.skip(f"needs the corpus session {CODEX}")
        source, budget = SessionSource(name="codex", path=str(CODEX)), parse_budgets("256k:32k:64k")[0]
    else:
        example = ROOT / "examples" / "invoice-rounding.claude.jsonl"
        source, budget = SessionSource(name="invoice", path=str(example)), parse_budgets("32k:4k:8k")[0]
    monkeypatch.setattr(runner, "WireCheck", _Recording)
    monkeypatch.setattr(_Recording, "views", [])
    row = run_job("continuity", source, budget)
    views = _Recording.views
    assert views and len(views) == sum(t is not None for t in row["tokens"])
    model, max_tokens = row["model"] or "unknown", max(1, budget.budget().reserve_tokens)
    benchmark.pedantic(_resumed, args=(views, model, max_tokens), rounds=1, iterations=1)
    seconds: dict[str, list[float]] = {"whole": [], "resumed": []}
    got: dict[str, list[list[str]]] = {}
    for _ in range(ROUNDS):
        for way, fn in (("whole", _whole), ("resumed", _resumed)):
            t = time.process_time()
            got[way] = fn(views, model, max_tokens)
            seconds[way].append(time.process_time() - t)
    assert got["resumed"] == got["whole"]
    med = {way: statistics.median(s) for way, s in seconds.items()}
    benchmark.extra_info.update(
        session=source.name,
        budget=budget.name,
        views=len(views),
        messages=sum(len(v.messages) for v in views),
        seconds_whole=round(med["whole"], 4),
        seconds_resumed=round(med["resumed"], 4),
        ratio_resumed=round(med["resumed"] / med["whole"], 3),
    )
