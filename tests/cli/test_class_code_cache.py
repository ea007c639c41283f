"""Dataclass methods compiled once and kept between CLI processes (``latch.classcode``): a class defined again gets
its code from the file, a changed class gets new code, and a file of another interpreter is never read."""

from __future__ import annotations

import dataclasses
import importlib.util
import marshal
import os
import subprocess
import sys
import textwrap

import pytest

from latch import classcode

POINT = """
from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 0
"""

POINT_3D = """
from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 0
    z: int = 0
"""


def _define(source: str) -> type:
    ns: dict[str, object] = {"__name__": __name__}
    exec(textwrap.dedent(source), ns)
    return ns["Point"]  # type: ignore[return-value]


@pytest.fixture
def cache(tmp_path):
    """A class-code file, this process's state as a fresh process has it; the previous state restored after."""
    before = classcode._cache_file
    path = tmp_path / "cache" / "dataclass-code.marshal"
    classcode.use_class_code_cache(path)
    yield path
    classcode.use_class_code_cache(before)


def test_a_class_defined_again_gets_its_code_from_the_file(cache):
    first = _define(POINT)
    assert classcode._fresh  # compiled by this process
    classcode.save_class_code_cache()
    assert cache.is_file() and not classcode._fresh

    classcode.use_class_code_cache(cache)  # a new process
    Point = _define(POINT)
    assert classcode._fresh == {}  # nothing compiled: every method came from the file
    p = Point(1, 2)
    assert (p, repr(p), hash(p) == hash(Point(1, 2)), p == Point(1)) == (Point(1, 2), "Point(x=1, y=2)", True, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    assert repr(first(1)) == "Point(x=1, y=0)"


def test_a_changed_class_gets_new_code(cache):
    _define(POINT)
    classcode.save_class_code_cache()
    classcode.use_class_code_cache(cache)
    Point = _define(POINT_3D)
    assert classcode._fresh  # its source is new: compiled
    p = Point(1, 2, 3)
    assert repr(p) == "Point(x=1, y=2, z=3)" and p != Point(1, 2) and p.z == 3


def test_a_file_of_another_interpreter_or_damaged_is_not_read(cache):
    _define(POINT)
    classcode.save_class_code_cache()
    data = cache.read_bytes()
    magic = importlib.util.MAGIC_NUMBER
    assert data.startswith(magic)
    cache.write_bytes(b"\0\0\r\n" + data[len(magic) :])
    classcode.use_class_code_cache(cache)
    assert classcode._codes == {}
    cache.write_bytes(magic + b"\xff not marshal")
    classcode.use_class_code_cache(cache)
    assert classcode._codes == {}
    cache.write_bytes(magic + marshal.dumps({"source": "not code"}))
    classcode.use_class_code_cache(cache)
    assert classcode._codes == {}
    assert repr(_define(POINT)(4)) == "Point(x=4, y=0)"


def test_without_a_file_dataclasses_compile_as_usual(cache):
    classcode.use_class_code_cache(None)
    assert "exec" not in vars(dataclasses)
    assert repr(_define(POINT)(5)) == "Point(x=5, y=0)" and classcode._fresh == {}


def test_the_command_keeps_the_file_in_its_data_folder(tmp_path):
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home")}
    run = [sys.executable, "-c", "from latch.cli import main; main()", "--version"]
    first = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    kept = tmp_path / "home" / "cache" / f"dataclass-code-{sys.implementation.cache_tag}.marshal"
    assert kept.is_file() and kept.read_bytes().startswith(importlib.util.MAGIC_NUMBER)
    second = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert second.stdout == first.stdout and second.stderr == first.stderr == ""


def test_the_file_keeps_at_most_its_bound_the_newest(cache, monkeypatch):
    monkeypatch.setattr(classcode, "CLASS_CODE_ENTRIES", 3)
    _define(POINT)
    classcode.save_class_code_cache()
    _define(POINT_3D)
    newest = set(classcode._fresh)  # the sources the 3-D class alone has
    classcode.save_class_code_cache()
    table = marshal.loads(cache.read_bytes()[len(importlib.util.MAGIC_NUMBER) :])
    assert len(table) == 3 and set(table) <= newest
