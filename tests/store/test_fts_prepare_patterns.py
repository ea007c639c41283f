"""The FTS5 text preparation's fast patterns give the index exactly what the plain patterns give.

``_SUFFIX_RE`` and ``_DOTTED_RE`` use possessive runs, ``_DOT_RE`` opens with its literal dot and the suffix step
runs only after ``_SUFFIX_HINT_RE`` finds a ``#`` or ``++`` after a letter or digit: the reference is the
preparation written with the plain patterns, and both must agree byte for byte on texts built from the characters
every step looks at (an index written before must stay the index written now). The reference is in
``fts_reference.py``."""

from __future__ import annotations

import random

import pytest
from fts_reference import PIECES
from fts_reference import plain_prepare_text as _reference

from latch.store import fts

_PIECES = PIECES


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
