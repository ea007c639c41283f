"""``ruff check src`` passes with the project's configuration (``[tool.ruff]`` in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed (it is in the test extra)")
def test_ruff_check_src_passes():
    out = subprocess.run(["ruff", "check", "--no-cache", "src"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
