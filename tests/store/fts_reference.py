"""The FTS5 text preparation written with the plain patterns: what ``latch.store.fts.prepare_text`` must give,
byte for byte (its fast patterns are pinned to this in ``test_fts_prepare_patterns.py`` and timed against it in
``benchmarks/test_bench_store.py``)."""

from __future__ import annotations

import re

from latch.store import fts

_SUFFIX = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9]*)(\+\+|#)(?![A-Za-z0-9+#])")
_DOT = re.compile(r"(?<![A-Za-z0-9.])\.([A-Za-z][A-Za-z0-9]*)(?![A-Za-z0-9])")
_DOTTED = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)+(?![A-Za-z0-9])")


def plain_prepare_text(text: str) -> str:
    chunks = [w for w in dict.fromkeys(text.split()) if "." in w]
    glued = _DOT.sub(fts._dot_glued, text)
    glued = _SUFFIX.sub(fts._suffix_glued, glued)
    prepared = fts._prepare_v1(glued)
    extra: dict[str, None] = {}
    for term in _DOTTED.findall(" ".join(chunks)):
        parts = term.split(".")[: fts.MAX_DOTTED_PARTS]
        for i in range(len(parts) - 1):
            for j in range(i + 2, len(parts) + 1):
                extra.setdefault("\ue02e".join(parts[i:j]))
    return prepared + "\n" + " ".join(extra) if extra else prepared
