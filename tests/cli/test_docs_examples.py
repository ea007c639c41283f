"""The examples of the README and of docs/ run: every ```python block of docs/ (each file's blocks in order, in
one namespace, from the repository root), and every `latch ...` line of a ```bash block that names no
placeholder, against a store holding the README's example session."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
EXAMPLE = "examples/invoice-rounding.claude.jsonl"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
# a line naming something the reader fills in, or a command that needs a model, a server, a terminal or minutes
_PLACEHOLDER = re.compile(r"SESSION|FILE|DIR\b|<|\.\.\.|~|\bN\b|KEY|ROOT_|NAME\b|QUERY|OUT\.|\$")
_NOT_HERE = ("latch run", "latch web", "latch tui", "latch bench", "latch stress", "latch import --discover")


def _blocks(path: Path, lang: str) -> list[str]:
    return [body for kind, body in _BLOCK.findall(path.read_text(encoding="utf-8")) if kind == lang]


def _commands() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for block in _blocks(path, "bash"):
            for line in block.splitlines():
                line = line.split(" #")[0].strip()
                for part in (p.strip() for p in line.split("&&")):
                    if part.startswith("latch ") and not _PLACEHOLDER.search(part) and not part.startswith(_NOT_HERE):
                        found.append((path.name, part))
    return found


PYTHON_DOCS = [p for p in DOCS if _blocks(p, "python")]


def test_the_docs_hold_examples_of_both_kinds():
    assert {p.name for p in PYTHON_DOCS} >= {"embedding.md"}
    assert ("README.md", f"latch replay {EXAMPLE} --window 16000 --reserve 2000 --recent 3000") in _commands()


@pytest.mark.parametrize("path", PYTHON_DOCS, ids=lambda p: p.name)
def test_python_examples_run(path, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LATCH_HOME", str(tmp_path / "home"))
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    for k, block in enumerate(_blocks(path, "python"), 1):
        try:
            exec(compile(block, f"{path.name} python block {k}", "exec"), namespace)
        except OSError as exc:  # the C ABI library comes with the native build only (as tests/parity/test_cabi.py)
            if "pure-Python build" in str(exc) and importlib.util.find_spec("latch._native") is None:
                pytest.skip(f"{path.name}: latch._native is not built (pure-Python install): {exc}")
            raise


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("docs-ws")
    env = {**os.environ, "LATCH_HOME": str(ws / "home"), "COLUMNS": "100"}
    env.pop("LATCH_DB", None)
    subprocess.run(
        [sys.executable, "-m", "latch", "import", str(ROOT / EXAMPLE)], cwd=ws, env=env, check=True, capture_output=True
    )
    return ws, env


@pytest.mark.parametrize("where, command", _commands(), ids=[f"{w}: {c}" for w, c in _commands()])
def test_shell_examples_run(workspace, where, command):
    ws, env = workspace
    args = [a.replace(EXAMPLE, str(ROOT / EXAMPLE)) for a in shlex.split(command)[1:]]
    out = subprocess.run(
        [sys.executable, "-m", "latch", *args], cwd=ws, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{where}: {command}\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}"
    assert "Traceback" not in out.stderr
