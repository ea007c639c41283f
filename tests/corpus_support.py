"""Corpus helpers shared by tests and benchmarks: import as ``from corpus_support import ...``.

(``tests`` is on ``sys.path`` through ``pythonpath`` in pyproject's pytest config.)

The corpus is open: it grows over time and nothing here lists its files. A file's format is the
name of its top-level folder under the corpus (``claude-code/…``, including a Claude Code
session's ``<sessionId>/subagents/agent-<id>.jsonl`` files). A format with no importer yet must be
named in :data:`NO_IMPORTER_YET` with the reason; ``tests/test_corpus_present.py`` fails on a
corpus file whose format is neither imported nor listed there, and on a listed format that has
gained an importer (so the list cannot go stale).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO.parent / "shared" / "corpus").resolve()
DOCS = ("README.md", "FORMATS.md")

# Formats present in the corpus that no built-in importer reads yet (issue 17, item 2).
# Each entry: corpus folder -> why it is allowed to be skipped. Remove an entry when its
# importer lands; the corpus tests then run its files like every other.
NO_IMPORTER_YET: dict[str, str] = {
    "goose": "Goose sessions.db (SQLite): importer not written yet (issue 17)",
    "opencode": "OpenCode SQLite storage: importer not written yet (issue 17)",
}

# Units larger than a 28,000-token hard budget (window 32,000 - reserve 4,000) even alone, per corpus file:
# the engine refuses those requests with ContextOverflow (a refusal, not a violation). Checked against the
# refusal messages and the raw lines, cl100k counts by tiktoken:
# - spotter seq 18..22: a tool turn with a Read of an 86 KB source file (line 66 of the JSONL, 14,269 cl100k
#   tokens of JSON-escaped content), 31,150 estimated tokens under the openai heuristic;
# - entire-image seq 22..25: one tool turn (line 37) with two parallel Reads (lines 41 and 44: 45,496 and
#   37,175 characters, 13,530 + 11,083 cl100k tokens), 45,742 estimated tokens.
# Every other unit of the corpus fits.
OVERSIZED_AT_28K: dict[str, int] = {
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": 1,
    "claude-code/entire-image_session.jsonl": 1,
}


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
    """Every transcript in the corpus, sorted by path (empty when absent)."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.relative_to(CORPUS).parts[0] not in DOCS)


def corpus_name(path: Path) -> str:
    """``format/relative/path`` of a corpus file, the key of per-file expectations."""
    return path.relative_to(CORPUS).as_posix()


def corpus_format(path: Path) -> str:
    """The format of a corpus file: its top-level folder name (an importer's ``PLUGIN_NAME``)."""
    return path.relative_to(CORPUS).parts[0]


def importable_corpus_files() -> list[Path]:
    """The corpus files whose format has an importer (every file not in :data:`NO_IMPORTER_YET`)."""
    return [p for p in corpus_files() if corpus_format(p) not in NO_IMPORTER_YET]


def corpus_id(path: Path) -> str:
    """Test id of a corpus file: its path under the corpus."""
    return corpus_name(path)


def require_importer(path: Path) -> str:
    """The format of corpus file ``path``; skips (with the allowlist's reason) when it has no importer yet."""
    fmt = corpus_format(path)
    if fmt in NO_IMPORTER_YET:
        pytest.skip(f"{corpus_name(path)}: {NO_IMPORTER_YET[fmt]}")
    return fmt
