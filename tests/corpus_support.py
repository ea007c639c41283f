"""Corpus helpers shared by tests and benchmarks: import as ``from corpus_support import ...``.

(``tests`` is on ``sys.path`` through ``pythonpath`` in pyproject's pytest config.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO.parent / "shared" / "corpus").resolve()


def corpus_available() -> bool:
    return CORPUS.is_dir() and any(CORPUS.rglob("*.*"))


def require_corpus() -> Path:
    """Return the corpus folder; skip when absent, fail when ``CI`` is set."""
    if corpus_available():
        return CORPUS
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but the corpus folder {CORPUS} is missing")
    pytest.skip(f"corpus folder {CORPUS} is absent (it lives beside the repository)")


def corpus_files() -> list[Path]:
    """Every transcript in the corpus (empty when absent)."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name not in ("README.md", "FORMATS.md"))
