"""Pure-Python reference implementations (the readable definition of every hot path).

PLACEHOLDER estimator constants (to be replaced by the calibrated profile tables).
"""

from __future__ import annotations

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


def suffix_fit(unit_tokens: Sequence[int], budget: int) -> int:
    """Start index of the largest suffix of ``unit_tokens`` whose sum is ``<= budget``.

    A single oversized last unit is kept whole (returns ``len - 1``); an empty
    sequence returns 0.
    """
    n = len(unit_tokens)
    total = 0
    i = n
    while i > 0 and total + unit_tokens[i - 1] <= budget:
        total += unit_tokens[i - 1]
        i -= 1
    if i == n and n > 0:
        return n - 1
    return i
