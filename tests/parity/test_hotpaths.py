"""The hot-path dispatcher (``LATCH_IMPL``) and the reference semantics of budgeting and scoring,
with values worked out by hand."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from array import array

import numpy as np
import pytest

from latch import hotpaths
from latch.hotpaths import _py

NATIVE_BUILT = importlib.util.find_spec("latch._native") is not None


def _backend_under(impl: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LATCH_IMPL": impl}
    code = "from latch import hotpaths; print(hotpaths.BACKEND, hotpaths.IMPL, hotpaths.estimate_tokens.__module__)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_latch_impl_python_forces_the_reference():
    out = _backend_under("python")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["python", "python", "latch.hotpaths._py"]


def test_latch_impl_rejects_unknown_values():
    out = _backend_under("fast")
    assert out.returncode != 0
    assert "LATCH_IMPL must be auto, native or python, not 'fast'" in out.stderr


def test_latch_impl_native_loads_the_module_or_fails_loudly():
    out = _backend_under("native")
    if NATIVE_BUILT:
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[:2] == ["native", "native"]
    else:
        assert out.returncode != 0
        assert "LATCH_IMPL=native but the native module latch._native is not built" in out.stderr


@pytest.mark.skipif(not NATIVE_BUILT, reason="the native module is not built")
def test_native_backend_leaves_the_reference_unimported():
    """The reference builds its tables at import: a process the native module serves never imports it."""
    code = (
        "import sys; from latch import hotpaths, plugins; hotpaths.estimate_tokens('x'); "
        "plugins.get_plugin_manager(); print(hotpaths.BACKEND, 'latch.hotpaths._py' in sys.modules)"
    )
    env = {**os.environ, "LATCH_IMPL": "native"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["native", "False"]


def test_auto_prefers_native_when_built():
    out = _backend_under("auto")
    assert out.stdout.split()[0] == ("native" if NATIVE_BUILT else "python")


@pytest.mark.skipif(os.environ.get("LATCH_REQUIRE_NATIVE", "") in ("", "0"), reason="LATCH_REQUIRE_NATIVE is not set")
def test_native_backend_is_loaded_when_required():
    # CI installs with LATCH_REQUIRE_NATIVE=1: the module must exist and auto/native must pick it.
    import latch._native  # noqa: F401

    if hotpaths.IMPL != "python":
        assert hotpaths.BACKEND == "native"


def test_public_names():
    assert hotpaths.PROFILES == _py.PROFILES
    assert hotpaths.MARKER_BITS == (
        "validation_passed",
        "validation_failed",
        "reground",
        "mutation",
        "evidence",
        "failure",
    )
    got = hotpaths.estimate_tokens_batch(["", "hello world", "漢字"], "openai")
    assert got.dtype == np.int64 and got.shape == (3,)
    assert got.tolist() == [hotpaths.estimate_tokens(t) for t in ["", "hello world", "漢字"]]
    assert got[0] == 0


# Units [5, 5, 10, 20] -> prefix sums [0, 5, 10, 20, 40].
PREFIX = [0, 5, 10, 20, 40]


@pytest.mark.parametrize(
    ("budget", "start"),
    [
        (40, 0),  # everything fits
        (1000, 0),
        (35, 1),  # units 1..3 = 35
        (34, 2),  # units 2..3 = 30
        (30, 2),
        (29, 3),  # only unit 3 (20)
        (20, 3),
        (19, 3),  # the last unit alone is too big: kept whole
        (0, 3),
        (-5, 3),
    ],
)
def test_suffix_start_by_hand(budget, start):
    assert _py.suffix_start(PREFIX, budget) == start
    assert hotpaths.suffix_start(PREFIX, budget) == start
    assert hotpaths.suffix_start(np.array(PREFIX, dtype=np.int64), budget) == start


def test_suffix_start_degenerate():
    for empty in ([], [0], np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)):
        assert hotpaths.suffix_start(empty, 10) == 0
    assert hotpaths.suffix_start([0, 7], 3) == 0  # one oversized unit is kept whole
    assert hotpaths.suffix_start([0, 0, 0], 0) == 0  # zero-token units always fit


def test_score_episodes_by_hand():
    # now_seq 100. ep0: terms {1,2,3} & query {2,3,99} = 2 -> 2000; validation_passed 300; recency 50*1000//100
    # = 500 -> 2800. ep1: 1 term -> 1000; failure 700; 900 -> 2600. ep2: file 11 -> 2500; recency 200 -> 2700.
    case = dict(
        term_indptr=[0, 3, 4, 4],
        term_ids=[1, 2, 3, 2],
        file_indptr=[0, 1, 1, 3],
        file_ids=[10, 10, 11],
        markers=[0b000001, 0b100000, 0],
        last_seq=[50, 90, 20],
        query_terms=[2, 3, 99],
        current_files=[11],
        now_seq=100,
        k=2,
    )
    assert hotpaths.score_episodes(**case) == [0, 2]
    assert hotpaths.score_episodes(**{**case, "k": 10}) == [0, 2, 1]
    assert hotpaths.score_episodes(**{**case, "k": -1}) == []
    arrays = {k: np.asarray(v, dtype=np.int64) if isinstance(v, list) else v for k, v in case.items()}
    assert hotpaths.score_episodes(**arrays) == [0, 2]
    # int64 buffers are read in place (the episode index's array("q") columns and views of them): same answer
    buffers = {k: array("q", v) if isinstance(v, list) else v for k, v in case.items()}
    assert hotpaths.score_episodes(**buffers) == [0, 2]
    padded = {k: memoryview(array("q", [*v, 7, 7]))[: len(v)] if isinstance(v, list) else v for k, v in case.items()}
    assert hotpaths.score_episodes(**{**padded, "k": 10}) == [0, 2, 1]
    # another item type (int32) is converted, as a list is
    assert hotpaths.score_episodes(**{**buffers, "term_ids": array("i", case["term_ids"])}) == [0, 2]
    with pytest.raises(ValueError):  # the lengths of a view, not of the array under it, are checked
        hotpaths.score_episodes(**{**buffers, "markers": memoryview(array("q", [0, 0, 0, 0]))[:2]})


def test_score_episodes_negative_recency_floors():
    # (1000 * -1) // 3 = -334 (floor, not truncation): ep0 scores -334, ep1 (seq 0) scores 0.
    case = dict(
        term_indptr=[0, 0, 0],
        term_ids=[],
        file_indptr=[0, 0, 0],
        file_ids=[],
        markers=[0, 0],
        last_seq=[-1, 0],
        query_terms=[],
        current_files=[],
        now_seq=3,
        k=2,
    )
    assert hotpaths.score_episodes(**case) == [1, 0]


def test_score_episodes_rejects_inconsistent_lengths():
    with pytest.raises(ValueError, match="need n\\+1 entries"):
        hotpaths.score_episodes([0, 1], [5], [0], [], [0], [1], [5], [], 1, 1)
