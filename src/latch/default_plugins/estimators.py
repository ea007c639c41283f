"""Built-in plugin: the heuristic estimators, the C-ABI estimator, and the default estimator choice.

* ``heuristic-openai``, ``heuristic-o200k``, ``heuristic-anthropic``, ``heuristic-cjk``: :class:`latch.estimators.HeuristicEstimator`
  for each profile (the hot-path estimator, native or pure Python);
* ``cabi``: :class:`latch.estimators.cabi.AbiEstimator` (any shared library implementing ``latch.h``),
  registered when that module imports;
* ``latch_select_estimator`` (``trylast``): the heuristic estimator of the model's profile
  (:func:`latch.estimators.estimator_for_model`), so any plugin that answers wins.
"""

from __future__ import annotations

import importlib

from ..estimators import HeuristicEstimator, estimator_for_model
from ..hookspecs import hookimpl


class HeuristicOpenAIEstimator(HeuristicEstimator):
    """Built-in heuristic estimator, ``openai`` profile (cl100k-calibrated, never under the exact count)."""

    PLUGIN_NAME = "heuristic-openai"
    DESCRIPTION = "Conservative heuristic calibrated on cl100k (GPT-4, GPT-3.5-turbo)."

    def __init__(self) -> None:
        super().__init__("openai")


class HeuristicO200kEstimator(HeuristicEstimator):
    """Built-in heuristic estimator, ``o200k`` profile (fitted on o200k_base, never under it on the class suite)."""

    PLUGIN_NAME = "heuristic-o200k"
    DESCRIPTION = "Conservative heuristic fitted on o200k (GPT-4o, GPT-4.1, GPT-5, o-series models)."

    def __init__(self) -> None:
        super().__init__("o200k")


class HeuristicAnthropicEstimator(HeuristicEstimator):
    """Built-in heuristic estimator, ``anthropic`` profile (the openai estimate × 4/3)."""

    PLUGIN_NAME = "heuristic-anthropic"
    DESCRIPTION = "Conservative heuristic for Claude models (4/3 of the openai profile)."

    def __init__(self) -> None:
        super().__init__("anthropic")


class HeuristicCJKEstimator(HeuristicEstimator):
    """Built-in heuristic estimator, ``cjk`` profile (one token per CJK character) for CJK-optimized models."""

    PLUGIN_NAME = "heuristic-cjk"
    DESCRIPTION = "Heuristic for CJK-optimized tokenizers (one token per CJK character)."

    def __init__(self) -> None:
        super().__init__("cjk")


def _abi_estimator() -> list[type]:
    try:
        cabi = importlib.import_module("latch.estimators.cabi")
    except ImportError:  # cffi missing: no C-ABI estimator
        return []
    return [cabi.AbiEstimator]


@hookimpl
def latch_register_estimators() -> list[type]:
    """Register the built-in estimators (heuristic profiles and the C-ABI loader) through the same hook as plugins."""
    return [
        HeuristicOpenAIEstimator,
        HeuristicO200kEstimator,
        HeuristicAnthropicEstimator,
        HeuristicCJKEstimator,
        *_abi_estimator(),
    ]


@hookimpl(trylast=True)
def latch_select_estimator(model: str | None) -> HeuristicEstimator:
    """Last-resort answer of the firstresult hook: the heuristic estimator for ``model``'s profile."""
    return estimator_for_model(model)
