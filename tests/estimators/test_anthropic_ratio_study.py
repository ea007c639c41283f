"""``tools/anthropic_ratio_study.py`` (issues 11 item 4, 12): the Anthropic estimator study runs on the corpus and
measures what its docstring reports (consecutive Claude Code requests' provider prompt-token deltas against the
``anthropic`` profile's estimate of the appended messages)."""

from __future__ import annotations

import pytest
from corpus_support import CORPUS, load_tool

FILE = CORPUS / "claude-code" / "claude-reliability_python-to-rust-port.jsonl"


def _study():
    return load_tool("anthropic_ratio_study")


def test_the_study_measures_the_deltas_of_a_claude_code_file():
    if not FILE.is_file():
        pytest.skip("the corpus is not here")
    study = _study()
    row = study.summarize(study.file_deltas(FILE, "anthropic", 50))
    assert (row["sessions"], row["requests"], row["deltas"]) == (1, 39, 38)
    # the profile over-counts appended content by about 1.6x at the median; one delta (a turn whose tool results
    # carry harness reminders the JSONL lacks) is under
    assert 1.5 < row["ratio"]["median"] < 1.75 and row["under"] == 1 and row["ratio"]["min"] < 0.6
    exact = study.summarize(study.file_deltas(FILE, "tiktoken", 50))
    assert exact["ratio"]["median"] < 0.9  # Claude counts more tokens than cl100k for the same text
    assert row["estimate_tokens"] > exact["estimate_tokens"] * 4 / 3  # the heuristic is above cl100k x 4/3
