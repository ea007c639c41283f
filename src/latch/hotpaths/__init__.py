"""Hot-path dispatcher: native C++ (``latch._native``) or the pure-Python reference.

``LATCH_IMPL=auto|native|python`` (default ``auto``): ``native`` raises
``ImportError`` when the extension is missing; ``python`` forces the reference;
``auto`` prefers native. :data:`BACKEND` names the backend actually loaded.

Public entries (identical answers on both backends):

* :func:`estimate_tokens` ``(text: str, profile: str = "openai") -> int`` tokens
* :func:`suffix_fit` ``(unit_tokens: Sequence[int], budget: int) -> int`` start index
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
suffix_fit = _impl.suffix_fit

__all__ = ["BACKEND", "IMPL", "PROFILES", "estimate_tokens", "suffix_fit"]
