"""``ruff check`` and ``ruff format --check`` (on src, tests, benchmarks and plugins) and ``mypy`` (strict on the
packages ``[tool.mypy]`` lists) pass with the project's configuration in pyproject.toml; all are in the test extra
and ``.ci/run`` runs them too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed (it is in the test extra)")
def test_ruff_check_passes():
    folders = ["src", "tests", "benchmarks", "plugins"]
    out = subprocess.run(["ruff", "check", "--no-cache", *folders], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed (it is in the test extra)")
def test_the_code_is_ruff_formatted():
    folders = ["src", "tests", "benchmarks", "plugins"]
    out = subprocess.run(
        ["ruff", "format", "--check", "--no-cache", *folders], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("mypy") is None, reason="mypy is not installed (it is in the test extra)")
def test_mypy_strict_layers_pass():
    out = subprocess.run(["mypy", "--no-incremental"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
