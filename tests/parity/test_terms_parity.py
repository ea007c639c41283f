"""Parity: the native episode term scanner (``latch._native.ascii_terms``) gives exactly the reference's terms
(``latch.hotpaths._py.ascii_terms``), and the engine's ``extract_terms`` agrees with both backends.

Skips when the native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import hotpaths
from latch.hotpaths import _py

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

# Words around the scanner's limits (3 and 32 characters), stop words in any case, digits and underscores
# at a word's start, and the ASCII characters that end a word.
_PIECES = st.one_of(
    st.sampled_from(sorted(hotpaths.STOP_WORDS)),
    st.sampled_from(["The", "AND", "Please", "x" * 31 + "Y", "a" * 32, "b" * 33, "ab", "abc", "_abc", "9abc"]),
    st.text(alphabet="abcXYZ019_", min_size=1, max_size=40),
    st.text(alphabet=" \t\n.,:;/-'\"()[]{}<>=+*#@!?\\|`~$%^&\x00\x7f", min_size=1, max_size=3),
)
ASCII_TEXTS = st.one_of(
    st.lists(_PIECES, max_size=40).map("".join),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=400),
)


@settings(max_examples=500, deadline=None)
@given(text=ASCII_TEXTS)
def test_ascii_terms_match_reference(text):
    assert native.ascii_terms(text) == _py.ascii_terms(text)


def test_ascii_terms_examples():
    text = "Fix the Parser_Cache in src/a9.py: 9abc _abc ab abc " + "x" * 32 + " " + "y" * 33 + " don't PLEASE"
    want = ["fix", "parser_cache", "src", "abc", "x" * 32, "don"]
    assert _py.ascii_terms(text) == want
    assert native.ascii_terms(text) == want


def test_ascii_terms_repeated_words_are_equal_strings():
    assert native.ascii_terms("token Token TOKEN") == ["token"] * 3


def test_stop_words_are_the_same_on_both_backends():
    assert frozenset(native.STOP_WORDS) == hotpaths.STOP_WORDS


@pytest.mark.parametrize("impl", [_py.ascii_terms, native.ascii_terms], ids=["reference", "native"])
def test_ascii_terms_errors(impl):
    with pytest.raises(ValueError, match="ascii_terms: text must be ASCII"):
        impl("caf\u00e9 latte")
    with pytest.raises(TypeError, match="ascii_terms: text must be str, not bytes"):
        impl(b"bytes")


@settings(max_examples=200, deadline=None)
@given(text=ASCII_TEXTS | st.text(max_size=200))
def test_extract_terms_same_on_both_backends(text):
    from latch.engine.episodes import extract_terms

    native_terms = extract_terms(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(hotpaths, "ascii_terms", _py.ascii_terms)
        assert extract_terms(text) == native_terms


def test_ascii_terms_past_the_native_term_table_bound():
    """More distinct terms than the native module keeps between calls (2**16): the table starts over and every
    term is still right, in this call and the next."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [f"w{letters[i // 676 % 26]}{letters[i // 26 % 26]}{letters[i % 26]}{i // 17576}x" for i in range(140_000)]
    text = " ".join(words)
    assert len(set(words)) == 140_000
    assert native.ascii_terms(text) == _py.ascii_terms(text) == words
    assert native.ascii_terms(text[:5000]) == _py.ascii_terms(text[:5000])
