"""The FTS5 text preparation written with the plain patterns: what ``latch.store.fts.prepare_text`` must give,
byte for byte (its fast patterns are pinned to this in ``test_fts_prepare_patterns.py`` and timed against it in
``benchmarks/test_bench_store.py``)."""

from __future__ import annotations

import re

from latch.store import fts

PIECES = [
    *"aZq09._+#-/ \n\t(",
    "++",
    "C#",
    "c++",
    ".NET",
    "x.y",
    "v1.2.3",
    "é",
    "数据",
    "🔥",
    "\u00a0",
    "\x1c",
    "_",
    "..",
]
"""The characters and terms every step of the preparation looks at (letters, digits, '.', '+', '#', glued and
dotted terms, a CJK word, an emoji, a no-break space): texts for the tests that pin a preparation to another."""

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
