"""The generated scenario's text pools: drawn as ``rng.choice``/``rng.randrange``/``rng.random`` calls draw them."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from latch.bench import scenario
from latch.bench.scenario import _CJK_PHRASES, _IDENTS, _WORDS, ScenarioModel, scenario_pools


def _pool(rng: random.Random, size: int, line: Callable[[random.Random], str]) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        parts.append(line(rng))
        total += len(parts[-1])
    return "".join(parts)


def _prose(rng: random.Random) -> str:
    n = rng.randrange(6, 22)
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + ". " + ("\n" if rng.random() < 0.2 else "")


def _code(rng: random.Random) -> str:
    w, v, i = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_IDENTS)
    return rng.choice(
        (
            f"def {w}_{i}(self, {v}_{rng.randrange(9)}):\n",
            f"    return self.{i}.{w}({v}, {rng.randrange(1000)})\n",
            f'    if {v} is None:\n        raise ValueError("{w} {v} missing")\n',
            f"class {i.capitalize()}{w.capitalize()}:\n",
            f'    {v}_{w} = Decimal("{rng.randrange(100)}.{rng.randrange(100):02d}")\n',
            f"# {w} {v} {i}\n",
            f"from .{w} import {i}_{v}\n",
            "\n",
        )
    )


def _log(rng: random.Random) -> str:
    return (
        f"2025-03-{rng.randrange(1, 29):02d} 10:{rng.randrange(60):02d}:{rng.randrange(60):02d} "
        f"{rng.choice(('INFO', 'DEBUG', 'WARN'))} {rng.choice(_IDENTS)}: {rng.choice(_WORDS)} "
        f"{rng.choice(_WORDS)} in {rng.randrange(999)}ms\n"
    )


def _cjk(rng: random.Random) -> str:
    return "，".join(rng.choice(_CJK_PHRASES) for _ in range(rng.randrange(2, 6))) + "。"


def reference_pools(seed: int, chars: int) -> tuple[str, str, str, str]:
    """The pools drawn by the public ``random.Random`` calls, one line at a time."""
    rng = random.Random(f"pools:{seed}")
    return (
        _pool(rng, chars, _prose),
        _pool(rng, chars, _code),
        _pool(rng, chars // 4, _log),
        _pool(rng, chars // 8, _cjk),
    )


@pytest.mark.parametrize(("seed", "chars"), [(0, ScenarioModel.POOL_CHARS), (1, 5000), (7, 20_000), (123, 64)])
def test_pools_are_the_ones_the_random_calls_draw(seed, chars):
    assert scenario_pools.__wrapped__(seed, chars) == reference_pools(seed, chars)


def test_pools_are_made_once_per_seed():
    scenario_pools.cache_clear()
    first = ScenarioModel(5)
    again = ScenarioModel(5)
    assert first._prose is again._prose and first._code is again._code
    assert ScenarioModel(6)._prose != first._prose
    assert scenario.scenario_pools.cache_info().misses == 2
