"""Token estimator: pinned counts, profiles, surrogates, batch API, image tokens, model mapping.

Pinned counts are derived by hand from the rules in ``latch/hotpaths/_py.py`` and the weight
table in ``tools/gen_tables.py`` (UNIT = 256 units per token); a refit changes them on purpose.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import hotpaths
from latch.estimators import (
    Estimator,
    HeuristicEstimator,
    anthropic_image_tokens,
    estimator_for_model,
    openai_image_tokens,
    profile_for_model,
)
from latch.hotpaths import _py
from latch.hotpaths import _tables as T

W = T.PROFILE_TABLES["openai"][0]

# text -> (openai, anthropic, cjk, o200k); o200k from its own weights (W2 below):
# "Hello, world!" 383 + 295 + 394 + 3 x 18 (wo, rl, ld: class 1) + 295 = 1421 -> 6; "你好" 2 x 265 -> 3;
# "\ud800x" 856 + 283 -> 5; "12345" 2 x 284 -> 3; "  \n\n   x" 353 + 467 + 283 = 1103 -> 5.
PINNED = {
    "": (0, 0, 0, 0),
    # "Hello": Capitalized sub-word of 5 (460; its pairs he, el, ll, lo are class 0: 0); ",": PUNCT
    # run of 1 before a space (281); " world": the space joins the word; lowercase sub-word of 5
    # (474) + pairs wo, rl, ld of class 1 (3 x 0); "!" (281). 1496 units = 5.8 tokens -> 6;
    # anthropic ceil(1496 * 4 / (3 * 256)) = 8.
    "Hello, world!": (6, 8, 6, 6),
    # two CJK1 characters: 2 x 265 = 530 units -> 3; cjk profile 2 x 256 -> 2.
    "你好": (3, 3, 2, 3),
    # a lone surrogate is OTHER3 (850) + "x" (274) = 1124 -> 5; anthropic ceil(4496 / 768) = 6.
    "\ud800x": (5, 6, 5, 5),
    # two digit groups (123|45): 2 x 352 = 704 -> 3; anthropic ceil(2816 / 768) = 4.
    "12345": (3, 4, 3, 3),
    # whitespace run: "  \n\n" (run(OFF_NEWLINE, 4) = 259), then 3 spaces of which the last joins
    # "x" (run(OFF_SPACE, 2) = 451), "x" (274): 984 -> 4; anthropic ceil(3936 / 768) = 6.
    "  \n\n   x": (4, 6, 4, 5),
}


def test_weights_used_by_the_pinned_derivations():
    assert T.UNIT == 256
    assert (W[T.OFF_WORD_CAPITAL + 5], W[T.OFF_PUNCT + 1], W[T.OFF_WORD_LOWER + 5]) == (460, 281, 474)
    assert (W[T.OFF_BIGRAM], W[T.OFF_BIGRAM + 1], W[T.OFF_DIGIT]) == (0, 0, 352)
    assert (W[T.OFF_CHAR + T.CJK1], W[T.OFF_CHAR + T.OTHER3], W[T.OFF_WORD_LOWER + 1]) == (265, 850, 274)
    assert (W[T.OFF_NEWLINE + 4], W[T.OFF_SPACE + 2]) == (259, 451)
    assert T.PROFILE_TABLES["anthropic"][1] == (4, 3)
    W2 = T.PROFILE_TABLES["o200k"][0]
    assert (W2[T.OFF_WORD_CAPITAL + 5], W2[T.OFF_PUNCT + 1], W2[T.OFF_WORD_LOWER + 5], W2[T.OFF_BIGRAM + 1]) == (
        383,
        295,
        394,
        18,
    )
    assert (W2[T.OFF_CHAR + T.CJK1], W2[T.OFF_CHAR + T.OTHER3], W2[T.OFF_WORD_LOWER + 1], W2[T.OFF_DIGIT]) == (
        265,
        856,
        283,
        284,
    )
    assert (W2[T.OFF_NEWLINE + 4], W2[T.OFF_SPACE + 2], T.PROFILE_TABLES["o200k"][1]) == (353, 467, (1, 1))


@pytest.mark.parametrize("text", list(PINNED))
def test_pinned_counts(text):
    expected = dict(zip(_py.PROFILES, PINNED[text], strict=True))
    for profile in _py.PROFILES:
        assert _py.estimate_tokens(text, profile) == expected[profile], profile
        assert hotpaths.estimate_tokens(text, profile) == expected[profile], profile


def test_pieces_follow_the_documented_segmentation():
    assert [p for p in _py._pieces("HTTPServer fooBar") if p[0] < T.OFF_DIGIT] == [
        (T.OFF_WORD_CAPS, 4),
        (T.OFF_WORD_CAPITAL, 6),
        (T.OFF_WORD_LOWER, 3),
        (T.OFF_WORD_CAPITAL, 3),
    ]
    assert list(_py._pieces("a(b")) == [(T.OFF_WORD_LOWER, 1), (T.OFF_PUNCT_JOIN, 1), (T.OFF_WORD_LOWER, 1)]
    assert list(_py._pieces("----")) == [(T.OFF_PUNCT_SAME, 4)]
    assert list(_py._pieces("):\n  x")) == [
        (T.OFF_PUNCT, 2),
        (T.OFF_NEWLINE_PUNCT, 1),
        (T.OFF_SPACE, 1),
        (T.OFF_WORD_LOWER, 1),
    ]
    assert list(_py._pieces("привет")) == [(T.OFF_WORD_NARROW, 6)]
    assert list(_py._pieces("1234567")) == [(T.OFF_DIGIT, 3)]


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(ValueError, match="known: openai, anthropic, cjk"):
        _py.estimate_tokens("x", "gpt2")
    with pytest.raises(ValueError, match="unknown estimator profile 'gpt2'"):
        HeuristicEstimator("gpt2")


def test_every_single_character_costs_at_least_one_token():
    chars = [chr(c) for c in range(0, 0x3000)] + ["\ud800", "\udfff", "\U0010ffff", "\U0001f600", "\ufffd"]
    got = _py.estimate_tokens_batch(chars, "openai")
    assert got.min() >= 1


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=200))
def test_any_string_profiles_ordered_and_batch_matches(text):
    o, a, c = (_py.estimate_tokens(text, p) for p in ("openai", "anthropic", "cjk"))
    assert a >= o >= c >= 0
    assert (o == 0) == (text == "")
    batch = _py.estimate_tokens_batch([text, text + text], "openai")
    assert batch.dtype == np.int64
    assert batch[0] == o


def test_batch_equals_single():
    texts = ["", "Hello, world!", "你好", "\ud800x", "def f(x):\n    return x + 1\n", "a" * 50]
    for profile in _py.PROFILES:
        batch = hotpaths.estimate_tokens_batch(texts, profile)
        assert batch.dtype == np.int64 and batch.shape == (len(texts),)
        assert batch.tolist() == [_py.estimate_tokens(t, profile) for t in texts]


def test_heuristic_estimator_satisfies_the_protocol():
    est = HeuristicEstimator("openai")
    assert isinstance(est, Estimator)
    assert est.name == "heuristic-openai"
    assert est.estimate("Hello, world!") == 6
    assert est.estimate_batch(iter(["Hello, world!", ""])).tolist() == [6, 0]


def test_anthropic_image_tokens():
    assert anthropic_image_tokens(200, 200) == 54  # 40000 / 750 = 53.3
    assert anthropic_image_tokens(1000, 1000) == 1334  # 1e6 / 750 = 1333.3
    # long edge 2000 -> 1568 x 784 = 1229312 px -> 1640, capped at 1600
    assert anthropic_image_tokens(2000, 1000) == 1600
    assert anthropic_image_tokens(None, 500) == 1600
    with pytest.raises(ValueError, match="positive"):
        anthropic_image_tokens(0, 10)


def test_openai_image_tokens():
    assert openai_image_tokens(512, 512) == 255  # one tile
    assert openai_image_tokens(1024, 1024) == 765  # -> 768 x 768, 4 tiles (OpenAI's worked example)
    assert openai_image_tokens(2048, 4096) == 1105  # -> 1024 x 2048 -> 768 x 1536, 6 tiles
    assert openai_image_tokens(None, None) == 1445  # 768 x 2048: 8 tiles, the maximum
    assert HeuristicEstimator("openai").image_tokens(1024, 1024) == 765
    assert HeuristicEstimator("cjk").image_tokens(1000, 1000) == 1334
    assert HeuristicEstimator("anthropic").image_tokens(None, None) == 1600


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("claude-sonnet-4-5", "anthropic"),
        ("vertex_ai/claude-sonnet-4@20250514", "anthropic"),
        ("gpt-4o", "o200k"),
        ("openai/gpt-5-codex", "o200k"),
        ("o3-mini", "o200k"),
        ("gpt-4.1-mini", "o200k"),
        ("chatgpt-4o-latest", "o200k"),
        ("ft:gpt-4o-2024-08-06:org::id", "o200k"),
        ("gpt-4", "openai"),
        ("gpt-4-turbo", "openai"),
        ("openai/gpt-3.5-turbo", "openai"),
        ("lm_studio/qwen3.6-35b-a3b", "cjk"),
        ("deepseek-chat", "cjk"),
        ("llama-3.1-70b", "anthropic"),
        (None, "anthropic"),
    ],
)
def test_profile_for_model(model, profile):
    assert profile_for_model(model) == profile
    assert estimator_for_model(model).profile == profile


# Every OpenAI chat model tiktoken knows, by exact name and by a dated variant of each prefix.
TIKTOKEN_MODELS = (
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4o-2024-08-06",
    "chatgpt-4o-latest",
    "gpt-4.1",
    "gpt-4.1-nano",
    "gpt-4.5-preview",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-codex",
    "o1",
    "o1-mini",
    "o1-preview",
    "o3",
    "o3-mini",
    "o4-mini",
    "o4-mini-2025-04-16",
    "gpt-4",
    "gpt-4-turbo",
    "gpt-4-0613",
    "gpt-4-32k",
    "gpt-3.5-turbo",
    "gpt-3.5-turbo-0125",
    "gpt-35-turbo",
    "text-embedding-3-small",
    "text-embedding-ada-002",
    "gpt-oss-120b",
)


@pytest.mark.parametrize("model", TIKTOKEN_MODELS)
def test_profile_for_model_follows_tiktokens_model_map(model):
    """The o200k profile exactly for the models ``tiktoken.model`` maps to o200k (``o200k_harmony`` for
    gpt-oss: the same ordinary-text vocabulary), the cl100k-fitted ``openai`` for its cl100k models."""
    tiktoken_model = pytest.importorskip("tiktoken.model")
    encoding = tiktoken_model.encoding_name_for_model(model)
    want = {"o200k_base": "o200k", "o200k_harmony": "o200k", "cl100k_base": "openai"}[encoding]
    assert profile_for_model(model) == want
    assert profile_for_model(f"openai/{model}") == want
