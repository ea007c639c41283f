"""The generated estimator tables for Python and C++ hold the same values."""

from __future__ import annotations

import re
from pathlib import Path

from latch.hotpaths import _tables as T

INC = Path(__file__).resolve().parents[2] / "native" / "src" / "cp_class_table.inc"


def _cpp() -> str:
    return INC.read_text(encoding="utf-8")


def _array(src: str, name: str) -> list[int]:
    m = re.search(rf"\b{name}\[[^\]]*\](?:\[[^\]]*\])? = \{{(.*?)\}};", src, re.S)
    assert m, f"{INC.name}: array {name} not found"
    return [int(x) for x in re.findall(r"-?\d+", m.group(1))]


def _const(src: str, name: str) -> int:
    m = re.search(rf"constexpr int {name} = (-?\d+);", src)
    assert m, f"{INC.name}: constant {name} not found"
    return int(m.group(1))


def test_constants_match():
    src = _cpp()
    assert _const(src, "UNIT") == T.UNIT
    for i, name in enumerate(T.CLASS_NAMES):
        assert _const(src, name) == i
    for name in [k for k in vars(T) if k.startswith("OFF_")] + ["N_WEIGHTS", "RUN_SLOTS"]:
        assert _const(src, name) == getattr(T, name), name


def test_profiles_match():
    src = _cpp()
    names = re.search(r"PROFILE_NAMES\[N_PROFILES\] = \{(.*?)\};", src).group(1)
    assert re.findall(r'"(\w+)"', names) == list(T.PROFILE_TABLES)
    weights = _array(src, "PROFILE_WEIGHTS")
    scales = _array(src, "PROFILE_SCALE")
    for k, (w, scale) in enumerate(T.PROFILE_TABLES.values()):
        assert weights[k * T.N_WEIGHTS : (k + 1) * T.N_WEIGHTS] == list(w)
        assert tuple(scales[2 * k : 2 * k + 2]) == scale
    assert len(weights) == len(T.PROFILE_TABLES) * T.N_WEIGHTS


def test_code_point_tables_match():
    src = _cpp()
    stage1 = [T.STAGE1[i] << 8 | T.STAGE1[i + 1] for i in range(0, len(T.STAGE1), 2)]
    assert len(stage1) == 0x110000 >> 8
    assert _array(src, "STAGE1") == stage1
    assert bytes(_array(src, "STAGE2")) == T.STAGE2
    assert bytes(_array(src, "BIGRAM")) == T.BIGRAM


def test_spot_classes():
    def cls(ch: str) -> int:
        cp = ord(ch)
        block = T.STAGE1[2 * (cp >> 8)] << 8 | T.STAGE1[2 * (cp >> 8) + 1]
        return T.STAGE2[block * 256 + (cp & 255)]

    assert [cls(c) for c in "aZ5 \n!\x00"] == [T.LOWER, T.UPPER, T.DIGIT, T.SPACE, T.NEWLINE, T.PUNCT, T.CTRL]
    assert cls("\t") == T.SPACE and cls("\r") == T.NEWLINE and cls("\x7f") == T.CTRL
    assert cls("д") == T.LETTER  # Cyrillic: one cl100k token alone
    assert cls("的") == T.CJK1  # a single cl100k token
    assert cls("\ud800") == T.OTHER3 and cls("\udfff") == T.OTHER3  # lone surrogates
    assert cls("\U0010ffff") == T.OTHER4
