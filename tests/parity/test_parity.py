"""Parity: the C++ module ``latch._native`` gives exactly the reference's answers (``latch.hotpaths._py``).

Runs under any ``LATCH_IMPL`` (both modules are imported directly); skips when the
native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import itertools
import os
import platform
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latch.hotpaths import _py

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

PROFILES = _py.PROFILES
ANY_CHAR = st.characters(exclude_categories=())  # every code point, lone surrogates included

# Structured text: runs of one character class, long enough to cross 16-byte blocks and run caps.
_ALPHABETS = (
    "abcxyz",
    "ABCXYZ",
    "0123456789",
    " ",
    "\t\v\f",
    "\n\r",
    ".,;:!?-_()[]{}<>/\\\"'`~@#$%^&*+=|",
    "\x00\x01\x1b\x7f",
    "éüßñ",
    "абвгдЯ",
    "αβγ",
    "漢字仮名한글",
    "😀🎉",
    "\ud800\udfff",
    "\u200b\ufeff",
)
_run = st.builds(
    lambda alpha, n, seed: "".join(alpha[(seed + i * 7) % len(alpha)] for i in range(n)),
    st.sampled_from(_ALPHABETS),
    st.integers(1, 40),
    st.integers(0, 1000),
)
# One character repeated across the vectorized path's limits (16 per piece, 64 per block).
_long_run = st.builds(
    lambda ch, n: ch * n,
    st.sampled_from(" \n\t=-.a A0\x01é"),
    st.sampled_from([15, 16, 17, 18, 63, 64, 65, 66, 127, 128, 129, 200]),
)
STRUCTURED = st.lists(_run | _long_run, max_size=30).map("".join)
TEXTS = st.one_of(
    st.text(alphabet=ANY_CHAR, max_size=300),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=300),  # PEP 393 kind 1 (ASCII)
    st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=300),  # kind 1 (latin-1)
    st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=()), max_size=300),  # kind 2
    STRUCTURED,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, profile=st.sampled_from(PROFILES))
def test_estimate_tokens_matches_reference(text, profile):
    assert native.estimate_tokens(text, profile) == _py.estimate_tokens(text, profile)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(TEXTS, max_size=12), profile=st.sampled_from(PROFILES))
def test_estimate_tokens_batch_matches_reference(texts, profile):
    got = native.estimate_tokens_batch(texts, profile)
    assert got.dtype == np.int64 and got.shape == (len(texts),)
    assert got.tolist() == [_py.estimate_tokens(t, profile) for t in texts]
    assert got.tolist() == _py.estimate_tokens_batch(texts, profile).tolist()


@pytest.mark.parametrize("profile", PROFILES)
def test_estimate_long_ascii_crosses_every_block_boundary(profile):
    # Lengths around the 16/32/64-byte strides of the vectorized ASCII path, each offset.
    base = "The quick brown Fox, 12345 HTTPServer\tjumps.\n  over_the-lazy dog!! " * 8
    for n in range(len(base)):
        assert native.estimate_tokens(base[:n], profile) == _py.estimate_tokens(base[:n], profile), n


@pytest.mark.parametrize("wide", ["", "é", "漢", "😀"], ids=["ascii", "latin1", "ucs2", "ucs4"])
def test_estimate_large_text_split_across_threads(wide):
    # Over 2 MiB characters: the native side may cut it at letter/whitespace boundaries and
    # estimate the parts on several threads; the sum must equal the reference's single walk.
    rng = random.Random(3)
    words = ["alpha", "Beta", "HTTPServer", "x1", "4096", "--", "==", "a.b", "\n\n  ", "\t", wide or "z", "(", ")"]
    text = " ".join(rng.choice(words) for _ in range(560_000))
    assert len(text) > 2 * 1024 * 1024
    assert native.estimate_tokens(text, "openai") == _py.estimate_tokens(text, "openai")


@pytest.mark.parametrize("chars", [600_000, 1_100_000])
def test_estimate_mid_size_text_split_into_parts(chars):
    # From 512 Ki characters the native side cuts a text into parts of about 64 Ki that the calling
    # thread and its helpers claim in turn (9 parts, then 16); the sum must equal the single walk.
    rng = random.Random(chars)
    words = ["alpha", "Beta", "HTTPServer", "x1", "4096", "--", "a.b", "\n\n  ", "\t", "é", "(", ")"]
    text = " ".join(rng.choice(words) for _ in range(chars // 4))
    assert len(text) > 512 * 1024
    assert native.estimate_tokens(text, "openai") == _py.estimate_tokens(text, "openai")
    snippets = [text[i : i + 300] for i in range(0, len(text), 300)]
    assert native.estimate_tokens_batch(snippets).tolist() == _py.estimate_tokens_batch(snippets).tolist()


def test_estimate_wide_text_with_long_ascii_stretches():
    # UCS-2/UCS-4 strings: ASCII stretches of 64+ characters are narrowed to bytes for the
    # vectorized path; the neighbours (LETTER or not) must keep their meaning.
    rng = random.Random(5)
    ascii_runs = ["alpha Beta HTTPServer x1 4096 ", "== -- ... ", "\n\n    ", "a" * 70, "=" * 70, " " * 70]
    wide = ["д", "Ж", "漢", "😀", "\ud800", "\u2500", "\u00a0"]
    for _ in range(300):
        text = "".join(
            rng.choice(ascii_runs) * rng.randrange(1, 5) + rng.choice(wide) * rng.randrange(0, 3)
            for _ in range(rng.randrange(1, 6))
        )
        for profile in PROFILES:
            assert native.estimate_tokens(text, profile) == _py.estimate_tokens(text, profile), (text, profile)


def test_estimate_letter_right_after_a_long_ascii_stretch():
    # The vectorized path reads a long ASCII stretch in chunks of 64 blocks (4 Ki characters) and the
    # block after each; the LETTER that ends the stretch changes the piece before it (a joined PUNCT,
    # an absorbed space) at every offset around the end of a chunk and of the block after it.
    fill = "alpha Beta x1 4096 == (a.b) \n"
    for n in [*range(4096 - 70, 4096 + 70), *range(8192 - 2, 8192 + 3)]:
        for before in " .":
            for end in ("é", "éx", "д", "дx"):
                text = (fill * (n // len(fill) + 1))[: n - 1] + before + end
                assert native.estimate_tokens(text) == _py.estimate_tokens(text), (n, before, end)


def test_estimate_script_letters_and_long_runs_of_one_punct_character():
    # Narrow letters of different scripts side by side (each script has its own run table), and runs
    # of one PUNCT character past 16 (a per-code-point slope: the vectorized path prices it from the
    # run's first byte) at every alignment to the 64-byte blocks, in every string kind.
    rng = random.Random(11)
    letters = ["д", "é", "α", "ש", "ب", "ա", "\u0800", "漢", "😀", "\ud800"]
    for lead in range(0, 70, 3):
        for n in (15, 16, 17, 18, 40, 63, 64, 65, 127, 128, 129, 130, 192, 300):
            for ch in "&[=-`~.":
                for tail in ("", "x", "é", "漢", "😀"):
                    text = "ab " * (lead // 3) + "x" * (lead % 3) + ch * n + tail
                    assert native.estimate_tokens(text) == _py.estimate_tokens(text), (lead, n, ch, tail)
    for _ in range(300):
        text = "".join(
            rng.choice(letters) * rng.randrange(1, 20) + rng.choice(["", " ", "a", "-"])
            for _ in range(rng.randrange(1, 12))
        )
        for profile in PROFILES:
            assert native.estimate_tokens(text, profile) == _py.estimate_tokens(text, profile), (text, profile)


# Pieces of every kind the vectorized path prices, and ones that end in the middle of a run of pieces.
_PIECES = ("lowercase", "Capital", "HTTPCAPS", "0123456789", "=", "([{", " ", "\n", ".\n", "\t", "\x01", "-x")


def test_estimate_pieces_across_pairs_of_blocks():
    # The vectorized path prices two 64-byte blocks at a time when their pieces fit one vector (64),
    # else one block at a time: pieces of 1..130 characters that start at every offset around the
    # 64- and 128-byte boundaries, between text with few pieces per block and text with one per byte.
    sparse, dense = "aaaaaaaa bbbbbbbb ", "a,b;c.d(e)f"
    for lead in [*range(44, 70), *range(108, 134)]:
        for piece in _PIECES:
            for n in (1, 16, 17, 63, 65, 100, 127):
                body = (piece * (n // len(piece) + 1))[:n]
                for fill in (sparse, dense):
                    head = (fill * (lead // len(fill) + 1))[:lead]
                    text = head + body + "z" + fill * 14
                    assert native.estimate_tokens(text) == _py.estimate_tokens(text), (lead, piece, n, fill)


def test_estimate_blocks_alternating_few_and_many_pieces():
    # Pairs of blocks with more than 64 pieces between pairs with few, at random lengths and offsets.
    rng = random.Random(7)
    parts = ["a,b;c.d(e)f" * 6, "x y z 1 2 ", "w" * 70, "Word " * 12, "=" * 30, "\n\n  ", "\x02\x03" * 40]
    for _ in range(200):
        text = "".join(rng.choice(parts)[: rng.randrange(1, 90)] for _ in range(rng.randrange(2, 20)))
        for profile in PROFILES:
            assert native.estimate_tokens(text, profile) == _py.estimate_tokens(text, profile), (text, profile)


# What the AVX-512 and the AVX2 kernels need of the CPU (Linux's names in /proc/cpuinfo).
_KERNEL_FLAGS = {"avx512f", "avx512bw", "avx512cd", "avx512vl", "avx512vbmi", "avx512_vbmi2", "avx512_vpopcntdq"}
_KERNEL_FLAGS |= {"gfni", "bmi2", "popcnt"}
_AVX2_FLAGS = {"avx2", "bmi1", "bmi2", "popcnt"}


def _cpu_flags() -> set[str] | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    return next((set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags")), None)


def test_estimator_kernel_runs_where_the_cpu_has_it():
    flags = _cpu_flags()
    if flags is None or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("no x86-64 CPU flags to compare with")
    if os.environ.get("LATCH_NATIVE_KERNEL"):
        pytest.skip("LATCH_NATIVE_KERNEL chose the kernel")
    want = "avx512" if _KERNEL_FLAGS <= flags else "avx2" if _AVX2_FLAGS <= flags else "scalar"
    assert native.ESTIMATOR_KERNEL == want


_SCALAR_CHECK = """
import random
from latch import _native as native
from latch.hotpaths import _py
assert native.ESTIMATOR_KERNEL == "scalar", native.ESTIMATOR_KERNEL
rng = random.Random(9)
words = ["alpha", "Beta", "HTTPServer", "x1", "4096", "--", "==", "a.b", "\\n\\n  ", "\\t", "\\x01", "(", "é", "漢"]
texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 200))) for _ in range(300)]
texts += ["a,b;c.d(e)f" * 30, "=" * 200, " " * 130 + "x", "Word " * 100, "z" * 40 + "\\n" * 70]
texts.append(" ".join(rng.choice(words) for _ in range(150_000)))  # over 512 Ki: shared out across threads
for profile in _py.PROFILES:
    for t in texts:
        assert native.estimate_tokens(t, profile) == _py.estimate_tokens(t, profile), (t[:80], profile)
    assert native.estimate_tokens_batch(texts, profile).tolist() == _py.estimate_tokens_batch(texts, profile).tolist()
"""


# Word runs of latin-1 text: lowercase and capital runs (across the 16-letter run tables), capitals
# before a lowercase letter ("HTTPServer"), latin-1 letters inside ASCII words, and the characters
# a word run can meet (digits, punctuation, a space before the next word, the end of the text).
_WORD_PART = st.builds(
    lambda alpha, n, seed: "".join(alpha[(seed + i * 5) % len(alpha)] for i in range(n)),
    st.sampled_from(("qzjxe", "QZJXE", "éÀßÿ", "µªº", "0189", " ", ".-'", "_(", "\n")),
    st.sampled_from([1, 1, 2, 3, 15, 16, 17, 18, 33]),
    st.integers(0, 100),
)
LATIN1_WORDS = st.lists(_WORD_PART | st.sampled_from(["HTTPServer", "aBc", "XMLHttp", "I", "iOS"]), max_size=16).map(
    "".join
)


@settings(max_examples=400, deadline=None)
@given(text=LATIN1_WORDS, profile=st.sampled_from(PROFILES))
def test_estimate_latin1_word_runs_match_reference(text, profile):
    assert native.estimate_tokens(text, profile) == _py.estimate_tokens(text, profile)
    assert native.estimate_tokens(text + "\u0100", profile) == _py.estimate_tokens(text + "\u0100", profile)


def test_estimate_scalar_walker_matches_reference():
    # LATCH_NATIVE_KERNEL=scalar: the path of every CPU without the kernel's instruction sets.
    env = {**os.environ, "LATCH_NATIVE_KERNEL": "scalar"}
    res = subprocess.run([sys.executable, "-c", _SCALAR_CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]


def test_estimate_large_batch_split_across_threads():
    # Over 2 MiB characters in total: the batch may be shared out across threads, in order.
    rng = random.Random(4)
    words = ["alpha", "Beta", "x1", "4096", "--", "\n", "é", "漢字", "😀", "("]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 400))) for _ in range(3600)]
    assert sum(map(len, texts)) > 2 * 1024 * 1024
    assert native.estimate_tokens_batch(texts, "cjk").tolist() == _py.estimate_tokens_batch(texts, "cjk").tolist()


def test_estimate_errors_match_reference():
    with pytest.raises(ValueError, match="unknown estimator profile 'gpt'"):
        native.estimate_tokens("x", "gpt")
    with pytest.raises(ValueError, match="unknown estimator profile 'gpt'"):
        _py.estimate_tokens("x", "gpt")
    with pytest.raises(TypeError, match="must be str, not bytes"):
        native.estimate_tokens(b"x")
    with pytest.raises(TypeError, match="item 1 must be str, not int"):
        native.estimate_tokens_batch(["a", 3])


def _prefix(units):
    return list(itertools.accumulate(units, initial=0))


BUDGETS = st.one_of(st.integers(-10, 3_000_000), st.integers(-(2**70), 2**70))


@settings(max_examples=400, deadline=None)
@given(units=st.lists(st.integers(0, 100_000), max_size=200), budget=BUDGETS)
def test_suffix_start_matches_reference(units, budget):
    prefix = _prefix(units)
    want = _py.suffix_start(prefix, budget)
    assert native.suffix_start(prefix, budget) == want
    assert native.suffix_start(tuple(prefix), budget) == want
    if -(2**63) <= budget < 2**63:
        assert native.suffix_start(np.asarray(prefix, dtype=np.int64), budget) == want
        assert native.suffix_start(np.asarray(prefix, dtype=np.int32), budget) == want


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50), budget=BUDGETS)
def test_suffix_start_same_probes_on_unsorted_input(values, budget):
    # Not a valid prefix-sum array, but both sides run CPython's bisect loop, so they still agree.
    assert native.suffix_start(values, budget) == _py.suffix_start(values, budget)


def test_suffix_start_rejects_non_integers():
    with pytest.raises(TypeError):
        native.suffix_start([0, "5", 10], 3)
    with pytest.raises(TypeError):
        native.suffix_start([0, 5, 10], 2.5)


@st.composite
def episode_sets(draw):
    n = draw(st.integers(0, 40))
    seq_ints = st.one_of(st.integers(-50, 10_000), st.integers(-(2**62), 2**62))
    term_counts = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    file_counts = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    n_terms, n_files = sum(term_counts), sum(file_counts)
    return dict(
        term_indptr=_prefix(term_counts),
        term_ids=draw(st.lists(st.integers(0, 25), min_size=n_terms, max_size=n_terms)),
        file_indptr=_prefix(file_counts),
        file_ids=draw(st.lists(st.integers(0, 8), min_size=n_files, max_size=n_files)),
        markers=draw(st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 63), min_size=n, max_size=n)),
        last_seq=draw(st.lists(seq_ints | st.sampled_from([7, 7, 7]), min_size=n, max_size=n)),
        query_terms=draw(st.lists(st.integers(0, 25), max_size=10)),
        current_files=draw(st.lists(st.integers(0, 8), max_size=4)),
        now_seq=draw(seq_ints),
        k=draw(st.integers(-2, 45)),
    )


@settings(max_examples=200, deadline=None)
@given(case=episode_sets(), as_numpy=st.booleans())
def test_score_episodes_matches_reference(case, as_numpy):
    want = _py.score_episodes(**case)
    args = {k: (np.asarray(v, dtype=np.int64) if as_numpy and isinstance(v, list) else v) for k, v in case.items()}
    assert native.score_episodes(**args) == want


def test_score_episodes_ties_break_by_seq_then_index():
    # Five episodes with identical scores except the recency term; 2 and 4 share last_seq 30.
    case = dict(
        term_indptr=[0] * 6,
        term_ids=[],
        file_indptr=[0] * 6,
        file_ids=[],
        markers=[0] * 5,
        last_seq=[10, 20, 30, 20, 30],
        query_terms=[],
        current_files=[],
        now_seq=10**9,
        k=5,
    )
    assert _py.score_episodes(**case) == [4, 2, 3, 1, 0]
    assert native.score_episodes(**case) == [4, 2, 3, 1, 0]


def test_score_episodes_errors():
    with pytest.raises(ValueError, match="need n\\+1 entries"):
        native.score_episodes([0], [], [0, 0], [], [0], [1], [], [], 1, 1)
    with pytest.raises(ValueError, match="term_indptr slice lies outside term_ids"):
        native.score_episodes([0, 3], [1, 2], [0, 0], [], [0], [1], [1], [], 1, 1)


def _corpus_texts(corpus_dir):
    from latch.importers import builtin_importers

    importers = builtin_importers()
    if not importers:
        pytest.skip("no transcript importers are installed yet")
    from corpus_support import importable_corpus_items, parse_item

    return [
        pe.event.searchable_text() for item in importable_corpus_items() for pe in parse_item(item, importers).events
    ]


@pytest.mark.corpus
def test_every_corpus_event_text_matches_reference(corpus_dir):
    texts = _corpus_texts(corpus_dir)
    assert len(texts) > 1000
    for profile in PROFILES:
        want = [_py.estimate_tokens(t, profile) for t in texts]
        assert [native.estimate_tokens(t, profile) for t in texts] == want, profile
        assert native.estimate_tokens_batch(texts, profile).tolist() == want, profile
