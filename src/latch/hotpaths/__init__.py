"""Hot-path dispatcher: native C++ (``latch._native``) or the pure-Python reference.

``LATCH_IMPL=auto|native|python`` (default ``auto``): ``native`` raises
``ImportError`` when the extension is missing; ``python`` forces the reference;
``auto`` prefers native. :data:`BACKEND` names the backend actually loaded.

Public entries (identical answers on both backends; ``tests/test_parity.py``):

* :func:`estimate_tokens` ``(text: str, profile: str = "openai") -> int`` tokens
* :func:`estimate_tokens_batch` ``(texts: Iterable[str], profile: str = "openai") -> numpy int64 array``
* :func:`suffix_start` ``(prefix_sums, budget_tokens) -> int`` start index of the fitting suffix
* :func:`score_episodes` ``(CSR arrays..., now_seq, k) -> list[int]`` top-k episode indices

Array arguments accept numpy int64 arrays or sequences of ``int``. The C ABI
over the same kernels is :mod:`latch.hotpaths.cabi`.
"""

from __future__ import annotations

import os

from . import _py

IMPL = os.environ.get("LATCH_IMPL", "auto").strip().lower() or "auto"
if IMPL not in ("auto", "native", "python"):
    raise ImportError(f"LATCH_IMPL must be auto, native or python, not {IMPL!r}")

_impl = _py
BACKEND = "python"
if IMPL in ("auto", "native"):
    try:
        from .. import _native  # type: ignore[attr-defined]
    except ImportError as exc:  # pragma: no cover - depends on build
        if IMPL == "native":
            raise ImportError("LATCH_IMPL=native but the native module latch._native is not built") from exc
    else:
        _impl = _native
        BACKEND = "native"

PROFILES = _py.PROFILES
estimate_tokens = _impl.estimate_tokens
estimate_tokens_batch = _impl.estimate_tokens_batch
suffix_start = _impl.suffix_start
score_episodes = _impl.score_episodes
MARKER_BITS = _py.MARKER_BITS

__all__ = ["BACKEND", "IMPL", "PROFILES", "estimate_tokens", "estimate_tokens_batch", "suffix_start",
           "score_episodes", "MARKER_BITS"]
