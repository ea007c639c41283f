"""Parity: the native FTS5 preparation (``latch._native.fts_prepare_text``) gives the index exactly the text of
the reference (``latch.store.fts._prepare_text_py``): glued terms, dotted terms, standalone CJK characters and
symbols, byte for byte, so an index written by either backend is the same index.

Skips when the native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import pytest
from fts_reference import PIECES
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.store import fts

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

# The characters and terms every step of the preparation looks at (fts_reference.PIECES), a dotted term longer
# than MAX_DOTTED_PARTS, more standalone characters (a skin tone, ©) and characters next to them (a line separator,
# the private-use glue character).
_PIECES = st.one_of(
    st.sampled_from(
        [
            *PIECES,
            "a.b.c.d.e.f.g.h.i.j",
            "os.path.join",
            "\U0001f3fb",
            "©",
            "\u2028",
            "\ue02e",
        ]
    ),
    st.text(alphabet="ab.+#1 ", min_size=1, max_size=12),
)
TEXTS = st.one_of(
    st.lists(_PIECES, max_size=40).map("".join),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200),
)


@settings(max_examples=1000, deadline=None)
@given(text=TEXTS)
def test_fts_prepare_text_matches_reference(text):
    assert native.fts_prepare_text(text) == fts._prepare_text_py(text)


def test_every_standalone_boundary_matches_reference():
    # each range of the reference's table, its ends and the code points just outside them
    points = {cp + d for a, b in fts._STANDALONE for cp in (a, b) for d in (-1, 0, 1)}
    for cp in sorted(p for p in points if 0 <= p < 0x110000 and not 0xD800 <= p < 0xE000):
        text = f"x{chr(cp)}y"
        assert native.fts_prepare_text(text) == fts._prepare_text_py(text), hex(cp)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain words, nothing to do",
        "C# and C++ in .NET 8, not C#C# or c+++",
        "see src/.env and os.path.join(a.b) then node.js v1.2.3.",
        "x = y++ # a comment\n_foo# bar#1 9a# ++ #",
        "数据.NET 🔥fix.py",
        "a.b.c.d.e.f.g.h.i.j a.b.c",
    ],
)
def test_fts_prepare_text_examples(text):
    assert native.fts_prepare_text(text) == fts._prepare_text_py(text) == fts.prepare_text(text)


def test_unchanged_text_is_returned_as_is():
    text = "nothing to glue, split or add here"
    assert native.fts_prepare_text(text) is text


def test_lone_surrogate_falls_back_to_the_reference():
    with pytest.raises(UnicodeEncodeError):
        native.fts_prepare_text("a\ud800b")
    assert fts.prepare_text("a\ud800b.c") == fts._prepare_text_py("a\ud800b.c") == "a b.c\nb\ue02ec"


def test_not_a_str():
    with pytest.raises(TypeError, match="fts_prepare_text: text must be str, not bytes"):
        native.fts_prepare_text(b"bytes")


def _dotted(i: int) -> str:
    """The ``i``-th of many distinct dotted terms (two to nine parts)."""
    return ".".join(f"p{i}x{k}" for k in range(2 + i % 8))


@pytest.mark.parametrize("count", [1, 5, 40, 300])
def test_many_dotted_terms_each_once_in_order(count):
    # enough distinct terms to grow the table of terms already written, each repeated, in ASCII and beside CJK
    terms = [_dotted(i) for i in range(count)]
    for text in (" ".join(terms + terms[::-1]), "数 " + " and ".join(terms) + " C++ .NET", "x.y " * count):
        assert native.fts_prepare_text(text) == fts._prepare_text_py(text)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECES | st.builds(_dotted, st.integers(0, 60)), min_size=30, max_size=300))
def test_long_texts_match_reference(pieces):
    for sep in (" ", "", "\n"):
        text = sep.join(pieces)
        assert native.fts_prepare_text(text) == fts._prepare_text_py(text)
