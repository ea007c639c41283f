"""Pure-Python reference implementations (the readable definition of every hot path).

PLACEHOLDER estimator constants (to be replaced by the calibrated profile tables).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

PROFILES = ("openai", "anthropic", "cjk")


def estimate_tokens(text: str, profile: str = "openai") -> int:
    """Conservative token estimate of ``text`` (tokens). ``ValueError`` on unknown profile."""
    if profile not in PROFILES:
        raise ValueError(f"unknown estimator profile {profile!r}; known: {', '.join(PROFILES)}")
    quarters = 0
    wide = 4 if profile == "cjk" else 8
    for ch in text:
        cp = ord(ch)
        if cp < 128:
            quarters += 1 if ch.isalnum() or ch == " " else 2
        else:
            quarters += wide
    return (quarters + 3) // 4


def suffix_start(prefix_sums: Sequence[int], budget: int) -> int:
    """Start index of the largest suffix of whole units that fits ``budget`` tokens.

    ``prefix_sums`` has ``n + 1`` non-decreasing entries, ``prefix_sums[0] == 0``
    and ``prefix_sums[i]`` = tokens of units ``0..i-1`` (a maintained running
    sum, so each call is one bisect: O(log n)). Returns ``i`` such that units
    ``i..n-1`` sum to ``<= budget`` and ``i`` is minimal; when even the last
    unit alone exceeds the budget it is kept whole (returns ``n - 1``). An empty
    sequence (``n == 0``) returns 0. Spec: "Bounded materialization", item 3.
    """
    n = len(prefix_sums) - 1
    if n <= 0:
        return 0
    total = prefix_sums[n]
    i = bisect_left(prefix_sums, total - budget, 0, n + 1)
    return min(i, n - 1)


# Episode scoring (spec: "Episodes"). Fixed-point integer score, identical on both backends:
#   score = W_TERM * |terms ∩ query| + W_FILE * |files ∩ current_files|
#         + sum(MARKER_WEIGHTS[b] for each bit b set in markers)
#         + (W_RECENCY * last_seq) // max(now_seq, 1)
# Top-k ordered by score desc, then last_seq desc, then index desc (deterministic).
W_TERM = 1000
W_FILE = 2500
W_RECENCY = 1000
MARKER_BITS = ("validation_passed", "validation_failed", "reground", "mutation", "evidence", "failure")
MARKER_WEIGHTS = (300, 800, 600, 400, 500, 700)


def _overlap(ids: Sequence[int], lo: int, hi: int, wanted: set[int]) -> int:
    return sum(1 for j in range(lo, hi) if ids[j] in wanted)


def score_episodes(term_indptr: Sequence[int], term_ids: Sequence[int], file_indptr: Sequence[int],
                   file_ids: Sequence[int], markers: Sequence[int], last_seq: Sequence[int],
                   query_terms: Sequence[int], current_files: Sequence[int], now_seq: int, k: int) -> list[int]:
    """Indices of the ``k`` best episodes (CSR layout: episode ``i`` owns
    ``term_ids[term_indptr[i]:term_indptr[i+1]]``, ids unique within an episode).

    ``markers[i]`` is a bitmask over :data:`MARKER_BITS`. Returns at most ``k``
    indices, best first. ``ValueError`` on inconsistent array lengths.
    """
    n = len(markers)
    if len(term_indptr) != n + 1 or len(file_indptr) != n + 1 or len(last_seq) != n:
        raise ValueError("score_episodes: term_indptr/file_indptr need n+1 entries and last_seq n entries")
    q = set(int(t) for t in query_terms)
    f = set(int(x) for x in current_files)
    denom = max(int(now_seq), 1)
    keyed = []
    for i in range(n):
        s = W_TERM * _overlap(term_ids, term_indptr[i], term_indptr[i + 1], q)
        s += W_FILE * _overlap(file_ids, file_indptr[i], file_indptr[i + 1], f)
        m = int(markers[i])
        for b, w in enumerate(MARKER_WEIGHTS):
            if m >> b & 1:
                s += w
        s += (W_RECENCY * int(last_seq[i])) // denom
        keyed.append((-s, -int(last_seq[i]), -i))
    keyed.sort()
    return [-t[2] for t in keyed[: max(k, 0)]]
