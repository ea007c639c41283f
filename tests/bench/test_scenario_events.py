"""The generated scenario's events: the same seed gives the same events, byte for byte, in every version (``latch
stress`` and the benchmarks compare runs by them). Pinned by the SHA-256 of their kinds and canonical payloads."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from latch.bench.scenario import ScenarioModel
from latch.events import MediaRef, canonical_payload

IMAGES = (MediaRef("ab" * 32, "image/png", 100, 4, 3), MediaRef("cd" * 32, "image/png", 200, 8, 6))


def _digest(model: ScenarioModel, n: int) -> str:
    h = hashlib.sha256()
    for e in itertools.islice(model.events(), n):
        h.update(f"{e.KIND}\n{canonical_payload(e)}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@pytest.mark.parametrize(
    ("seed", "n", "images", "digest"),
    [
        (0, 20_000, (), "f2029cac9fefae6b5ad04da2a5f7adf67d9d8057c9d777832ce4d7912ebf8617"),
        (3, 5_000, IMAGES, "7e7229530180f18d7c7071a9a036a75889052cdc74cbe1c5a539c402ba2aa711"),
    ],
)
def test_a_seed_gives_the_same_events(seed, n, images, digest):
    assert _digest(ScenarioModel(seed, images=images), n) == digest
