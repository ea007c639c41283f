"""The FTS5 text preparation's fast patterns give the index exactly what the plain patterns give.

``_SUFFIX_RE`` and ``_DOTTED_RE`` use possessive runs, ``_DOT_RE`` opens with its literal dot and the suffix step
runs only after ``_SUFFIX_HINT_RE`` finds a ``#`` or ``++`` after a letter or digit: the reference below is the
preparation written with the plain patterns, and both must agree byte for byte on texts built from the characters
every step looks at (an index written before must stay the index written now)."""

from __future__ import annotations

import random
import re

import pytest

from latch.store import fts

_SUFFIX = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9]*)(\+\+|#)(?![A-Za-z0-9+#])")
_DOT = re.compile(r"(?<![A-Za-z0-9.])\.([A-Za-z][A-Za-z0-9]*)(?![A-Za-z0-9])")
_DOTTED = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)+(?![A-Za-z0-9])")


def _reference(text: str) -> str:
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


_PIECES = [
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


@pytest.mark.parametrize("seed", range(4))
def test_prepare_text_matches_the_plain_patterns(seed):
    rnd = random.Random(seed)
    for _ in range(5000):
        text = "".join(rnd.choice(_PIECES) for _ in range(rnd.randrange(0, 24)))
        assert fts.prepare_text(text) == _reference(text), text


@pytest.mark.parametrize(
    "text",
    [
        "C# and C++ in .NET 8, not C#C# or c+++",
        "see src/.env and os.path.join(a.b) then node.js v1.2.3.",
        "x = y++ # a comment\n_foo# bar#1 9a# ++ #",
        "数据.NET 🔥fix.py",
    ],
)
def test_prepare_text_of_glued_and_dotted_terms(text):
    assert fts.prepare_text(text) == _reference(text)
