"""The native estimator's vectorized ASCII kernels against the pure-Python reference at their edges.

The kernels cut text into 64-byte blocks (the AVX2 one classifies 32 bytes at a time) and hand runs that
fill a whole block back to the scalar walker, so the texts here put runs and pieces across 32- and
64-byte boundaries: whitespace and PUNCT runs past 64 and 128 characters, pieces past 16 characters,
text that ends mid-word, and non-ASCII characters right after ASCII ones. The hypothesis test runs the
kernel this CPU selects; the subprocess checks force the AVX2 kernel (where the CPU has it, including an
AVX-512 machine) and the scalar walker over the same kind of texts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.hotpaths import _py

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

PROFILES = _py.PROFILES

_RUN_CHARS = " \t\n\r\x0b\x0c=-.,;:()[]{}\"'/\\`~!@#$%^&*_+|<>?"
_WORDS = ("abc", "ABC", "aB", "Ab1", "0189", "xyzQ", "HTTPServer", "qz", "Zq")
_SINGLES = ("é", "漢", "😀", "\x7f", "\x01", "ß", "\u00a0", "Ā", "µ", "×")
_GLUE = (" ", "\n", " \n ", ".\n", "\n\n  ", "= ", " x", "a.b", ',"', '":"', "\r\n", "-x", "x-", " (")

_SEGMENT = st.one_of(
    st.builds(lambda ch, n: ch * n, st.sampled_from(_RUN_CHARS), st.integers(1, 200)),
    st.builds(
        lambda a, b, n, m: a * n + b * m,
        st.sampled_from(_RUN_CHARS),
        st.sampled_from(_RUN_CHARS),
        st.integers(1, 70),
        st.integers(1, 70),
    ),
    st.builds(lambda w, n: (w * (n // len(w) + 1))[:n], st.sampled_from(_WORDS), st.integers(1, 40)),
    st.sampled_from(_SINGLES),
    st.sampled_from(_GLUE),
)
_FILL = "ab cd "


@st.composite
def edge_texts(draw) -> str:
    lead = draw(st.integers(0, 130))  # where the first segment lands against the 32- and 64-byte blocks
    head = (_FILL * (lead // len(_FILL) + 1))[:lead]
    return head + "".join(draw(st.lists(_SEGMENT, max_size=12)))


@settings(max_examples=500, deadline=None)
@given(text=edge_texts(), profile=st.sampled_from(PROFILES))
def test_kernel_edges_match_reference(text, profile):
    assert native.estimate_tokens(text, profile) == _py.estimate_tokens(text, profile)


def test_kernel_block_boundaries_match_reference():
    # Every piece kind ending, and every run starting, at each offset around the 32-, 64- and 128-byte marks.
    for lead in [*range(26, 40), *range(58, 72), *range(120, 136)]:
        head = (_FILL * (lead // len(_FILL) + 1))[:lead]
        for body in (" " * 70, "\n" * 65, "=" * 130, "=-" * 40, "a" * 17, "HTTP" * 5 + "s", "1" * 33, "é", "x漢"):
            for tail in ("", "z", " z", "é"):
                text = head + body + tail
                assert native.estimate_tokens(text) == _py.estimate_tokens(text), (lead, body[:8], tail)


_FORCED_CHECK = f"""
import random, sys
from latch import _native as native
from latch.hotpaths import _py
assert native.ESTIMATOR_KERNEL == sys.argv[1], native.ESTIMATOR_KERNEL
rng = random.Random(11)
run_chars, words, singles, glue = {_RUN_CHARS!r}, {_WORDS!r}, {_SINGLES!r}, {_GLUE!r}
def segment():
    k = rng.randrange(5)
    if k == 0:
        return rng.choice(run_chars) * rng.randrange(1, 200)
    if k == 1:
        return rng.choice(run_chars) * rng.randrange(1, 70) + rng.choice(run_chars) * rng.randrange(1, 70)
    if k == 2:
        w, n = rng.choice(words), rng.randrange(1, 40)
        return (w * (n // len(w) + 1))[:n]
    return rng.choice(singles if k == 3 else glue)
texts = []
for _ in range(1500):
    lead = rng.randrange(0, 131)
    texts.append(("ab cd " * 30)[:lead] + "".join(segment() for _ in range(rng.randrange(0, 13))))
for profile in _py.PROFILES:
    for t in texts[::4]:
        assert native.estimate_tokens(t, profile) == _py.estimate_tokens(t, profile), (t[:80], profile)
    assert native.estimate_tokens_batch(texts, profile).tolist() == _py.estimate_tokens_batch(texts, profile).tolist()
"""


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return next((set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags")), set())


@pytest.mark.parametrize("kernel", ["avx2", "scalar"])
def test_forced_kernel_edges_match_reference(kernel):
    if kernel == "avx2" and not {"avx2", "bmi1", "bmi2", "popcnt"} <= _cpu_flags():
        pytest.skip("this CPU has no AVX2 kernel")
    env = {**os.environ, "LATCH_NATIVE_KERNEL": kernel}
    res = subprocess.run(
        [sys.executable, "-c", _FORCED_CHECK, kernel], env=env, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-2000:]
