"""Token estimators (spec: "Bounded materialization").

An :class:`Estimator` turns text into a conservative token count and images into tokens from their
dimensions. :class:`HeuristicEstimator` wraps the hot-path estimator (:mod:`latch.hotpaths`: the
native backend when built, else the pure-Python reference; identical counts) for one profile:

* ``openai``: calibrated against exact cl100k counts (GPT-4, GPT-3.5-turbo); never below them on the
  calibration set (``tests/estimators/test_estimator_calibration.py``), nor below o200k on the text-class suite.
* ``o200k``: fitted against exact o200k_base counts alone (GPT-4o, GPT-4.1, GPT-5, o1/o3/o4, chatgpt-4o):
  never below them on the text-class suite and the corpus windows (``tests/estimators/test_estimator_classes.py``).
  o200k spells Indic and other scripts in far fewer tokens than cl100k, so ``openai`` over-counts those
  models by up to 3x there; ``o200k`` must not be used for cl100k models (it is under cl100k on them).
* ``anthropic``: Anthropic's tokenizer is not available offline; this profile is the ``openai``
  estimate times 4/3, because published comparisons put Claude token counts at about 1.0-1.35x
  cl100k. At least as conservative as ``openai`` for every text.
* ``cjk``: for CJK-optimized tokenizers (Qwen, GLM, DeepSeek, Kimi, Yi): each CJK character
  costs one token, everything else as ``openai``. It is conservative only for tokenizers that
  really hold CJK characters as single tokens; use ``anthropic`` when unsure.

Every estimate is approximate until the provider reports real usage, which is authoritative.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # numpy loads when an array is made (about 0.2 s): a command that makes none never imports it
    import numpy as np

from .. import hotpaths
from ..port import Estimator

# Anthropic vision: images whose long edge exceeds 1568 px are scaled down, then cost
# width * height / 750 tokens; images are also scaled down to stay within about 1600 tokens.
ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_MAX_IMAGE_TOKENS = 1600
# OpenAI vision (detail "high"): fit within 2048 x 2048, scale the shortest side down to 768,
# then 85 tokens plus 170 per 512 px tile. The largest possible cost is 768 x 2048: 8 tiles.
OPENAI_FIT_EDGE = 2048
OPENAI_SHORT_EDGE = 768
OPENAI_TILE = 512
OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170
OPENAI_MAX_IMAGE_TOKENS = OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * 8


@runtime_checkable
class ChatFraming(Protocol):
    """Optional, on top of :class:`Estimator`: an estimator that knows its model's chat template.

    :class:`latch.engine.units.TokenCounter` then prices whole messages with it instead of the
    generic text-plus-overhead rule, so a view's total can equal the server's own prompt count
    (``latch-llamacpp`` does this for a llama.cpp server's GGUF template). All values are tokens.
    """

    message_overhead_tokens: int
    """Framing of one user message around its text (role and delimiters)."""

    def message_tokens(self, message: Any) -> int:
        """Tokens of one :class:`latch.port.ViewMessage` as the provider renders and frames it
        (its wire text, tool calls, the template's delimiters); 0 for a message the wire leaves out."""
        ...

    def system_tokens(self, text: str) -> int:
        """Tokens of the system prompt ``text`` (``""``: none sent) plus the request's fixed cost
        (what the template adds once per request, e.g. the generation prompt or a default system)."""
        ...

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens the template spends on the tool schemas ``tools`` (neutral or OpenAI shape)."""
        ...


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _scaled(width: int, height: int, limit: int, edge: int) -> tuple[int, int]:
    """Scale so that ``edge`` (the long or short side) is at most ``limit``; rounds up."""
    if edge <= limit:
        return width, height
    return _ceil_div(width * limit, edge), _ceil_div(height * limit, edge)


def anthropic_image_tokens(width: int | None, height: int | None) -> int:
    """Anthropic image tokens: ``ceil(w * h / 750)`` after scaling the long edge to <= 1568 px,
    at most 1600; 1600 when a dimension is unknown. ``ValueError`` on a dimension <= 0."""
    if width is None or height is None:
        return ANTHROPIC_MAX_IMAGE_TOKENS
    _check_dims(width, height)
    w, h = _scaled(width, height, ANTHROPIC_MAX_EDGE, max(width, height))
    return min(_ceil_div(w * h, ANTHROPIC_PIXELS_PER_TOKEN), ANTHROPIC_MAX_IMAGE_TOKENS)


def openai_image_tokens(width: int | None, height: int | None) -> int:
    """OpenAI image tokens (detail "high"): fit within 2048 x 2048, shortest side to <= 768 px,
    then ``85 + 170 * tiles`` of 512 px; 1445 (the maximum) when a dimension is unknown.
    ``ValueError`` on a dimension <= 0."""
    if width is None or height is None:
        return OPENAI_MAX_IMAGE_TOKENS
    _check_dims(width, height)
    w, h = _scaled(width, height, OPENAI_FIT_EDGE, max(width, height))
    w, h = _scaled(w, h, OPENAI_SHORT_EDGE, min(w, h))
    tiles = _ceil_div(w, OPENAI_TILE) * _ceil_div(h, OPENAI_TILE)
    return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles


def _check_dims(width: int, height: int) -> None:
    if width <= 0 or height <= 0:
        raise ValueError(f"image dimensions must be positive pixels, got {width} x {height}")


class HeuristicEstimator:
    """The calibrated heuristic of :mod:`latch.hotpaths` for one profile (see module docstring).

    ``ValueError`` naming the known profiles when ``profile`` is unknown. Images use the OpenAI
    rule for ``openai`` and ``o200k`` and the Anthropic rule (the larger of the two for the same image in most
    cases) for ``anthropic`` and ``cjk``.
    """

    def __init__(self, profile: str = "anthropic") -> None:
        if profile not in hotpaths.PROFILES:
            raise ValueError(f"unknown estimator profile {profile!r}; known: {', '.join(hotpaths.PROFILES)}")
        self.profile = profile
        self.name = f"heuristic-{profile}"
        self._image = openai_image_tokens if profile in ("openai", "o200k") else anthropic_image_tokens

    def estimate(self, text: str) -> int:
        return hotpaths.estimate_tokens(text, self.profile)

    def estimate_batch(self, texts: Iterable[str]) -> np.ndarray:
        return hotpaths.estimate_tokens_batch(list(texts), self.profile)

    def image_tokens(self, width: int | None, height: int | None) -> int:
        return self._image(width, height)

    def __repr__(self) -> str:
        return f"HeuristicEstimator({self.profile!r})"


_OPENAI_PREFIXES = ("gpt-", "gpt4", "chatgpt", "o1", "o3", "o4", "codex", "text-embedding", "davinci")
# Models tiktoken maps to o200k_base (tiktoken.model: MODEL_TO_ENCODING and MODEL_PREFIX_TO_ENCODING; gpt-oss
# is o200k_harmony, the same ordinary-text vocabulary); tests/estimators/test_estimator.py checks the two agree. Every
# other OpenAI name (gpt-4, gpt-4-turbo, gpt-3.5-turbo, embeddings) is cl100k.
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "gpt-oss", "o1", "o3", "o4", "codex")
_CJK_PREFIXES = ("qwen", "glm", "chatglm", "deepseek", "kimi", "moonshot", "yi-", "baichuan", "minimax")


def profile_for_model(model: str | None) -> str:
    """Profile for a model name (provider prefixes such as ``openai/`` and a fine-tune's ``ft:`` are
    ignored): ``claude`` -> ``anthropic``; the o200k models (``gpt-4o*``, ``gpt-4.1*``, ``gpt-4.5*``,
    ``gpt-5*``, ``chatgpt-4o*``, ``gpt-oss*``, ``o1``/``o3``/``o4*``, ``codex*``) -> ``o200k``; other
    ``gpt-`` names (``gpt-4``, ``gpt-3.5-turbo``: cl100k) -> ``openai``; Qwen, GLM, DeepSeek, Kimi, Yi,
    Baichuan, MiniMax -> ``cjk``; anything else, or ``None`` -> ``anthropic`` (the most conservative)."""
    name = (model or "").strip().lower().rsplit("/", 1)[-1].removeprefix("ft:")
    if "claude" in name:
        return "anthropic"
    if name.startswith(_O200K_PREFIXES):
        return "o200k"
    if name.startswith(_OPENAI_PREFIXES):
        return "openai"
    if name.startswith(_CJK_PREFIXES):
        return "cjk"
    return "anthropic"


def estimator_for_model(model: str | None) -> HeuristicEstimator:
    """The :class:`HeuristicEstimator` for :func:`profile_for_model` of ``model``."""
    return HeuristicEstimator(profile_for_model(model))


__all__ = [
    "ChatFraming",
    "Estimator",
    "HeuristicEstimator",
    "estimator_for_model",
    "profile_for_model",
    "anthropic_image_tokens",
    "openai_image_tokens",
]
