"""The canonical request serialization and the common prefix of two requests (spec: "Context metrics").

Cacheability is measured on Latch's canonical serialization, not on a
provider's wire bytes, so it compares engines independently of the provider:
``common_prefix_tokens(previous, current) / request_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine.units import request_lines
from ..port import ContextView

__all__ = ["canonical_request_bytes", "common_prefix_bytes", "common_prefix_tokens"]


def canonical_request_bytes(view: ContextView) -> bytes:
    """The view's provider-neutral request as bytes: one canonical-JSON line for the system
    field, one for the tools, one per message (``kind``/``seq`` excluded), each ending in ``\\n``.

    Within a cache epoch each request's bytes start with the previous request's bytes.
    """
    return b"".join(line + b"\n" for line in request_lines(view))


def common_prefix_bytes(prev: bytes, cur: bytes) -> int:
    """Length in bytes of the longest common prefix, backed off to a UTF-8 character boundary."""
    lo, hi = 0, min(len(prev), len(cur))
    if prev[:hi] == cur[:hi]:
        lo = hi
    else:  # binary search on memcmp: prev[:lo] == cur[:lo] and prev[:hi] != cur[:hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if prev[:mid] == cur[:mid]:
                lo = mid
            else:
                hi = mid
    while 0 < lo < len(cur) and (cur[lo] & 0xC0) == 0x80:
        lo -= 1
    return lo


def common_prefix_tokens(prev_bytes: bytes, cur_bytes: bytes, estimate: Callable[[str], int]) -> int:
    """Estimated tokens of the common prefix of two canonical requests (0 when nothing is shared).

    ``estimate(text) -> tokens`` is the request's estimator.
    """
    n = common_prefix_bytes(prev_bytes, cur_bytes)
    return estimate(cur_bytes[:n].decode("utf-8")) if n else 0
