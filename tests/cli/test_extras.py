"""The lean core and its extras (latch.extras, pyproject.toml): the core's commands run without the optional
packages, and a command that needs one names its extra in one line.

A missing package is simulated in a real ``latch`` process by ``sys.modules[name] = None`` (Python then
raises ``ModuleNotFoundError`` for it, as for a package that is not installed); .ci/run also installs the core
alone into a fresh virtualenv and runs ``latch replay`` and ``latch web`` there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from latch.extras import DISTRIBUTION, EXTRA_OF_MODULE, missing_extra

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "invoice-rounding.claude.jsonl"
OPTIONAL = sorted(EXTRA_OF_MODULE)


def _without(modules: list[str], *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    code = f"import sys\nfor m in {modules!r}: sys.modules[m] = None\nfrom latch.cli import main\nmain({list(args)!r})"
    env = {**os.environ, "LATCH_HOME": str(home), "PYTHONIOENCODING": "utf-8"}
    env.pop("LATCH_DB", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=home, timeout=120)


def test_the_core_dependencies_hold_no_optional_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    core = " ".join(project["dependencies"]).lower()
    for package in ("openai", "anthropic", "mcp", "starlette", "uvicorn", "textual", "matplotlib", "dask", "psycopg"):
        assert package not in core, package
    extras = project["optional-dependencies"]
    assert set(extras["all"][0].partition("[")[2].rstrip("]").split(",")) == set(EXTRA_OF_MODULE.values())
    assert f"{DISTRIBUTION}[all]" in extras["test"]


def test_every_plugin_depends_on_this_distribution_not_the_unrelated_latch():
    for pyproject in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
        assert DISTRIBUTION in deps and "latch" not in deps, pyproject


def test_replay_runs_without_any_optional_package(tmp_path):
    out = _without(
        OPTIONAL, "replay", str(EXAMPLE), "--window", "16000", "--reserve", "2000", "--recent", "3000", home=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "latest user instruction present in every view" in out.stdout


@pytest.mark.parametrize(
    "args, extra, module",
    [
        (["run", "hello"], "agent", "mcp"),
        (["web", "--port", "0"], "web", "starlette"),
        (["tui"], "tui", "textual"),
    ],
)
def test_a_command_without_its_extra_names_it_in_one_line(tmp_path, args, extra, module):
    out = _without(OPTIONAL, *args, home=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == (
        f"Error: latch {args[0]} needs the '{extra}' extra (module {module!r} is not installed): "
        f"pip install 'latch-context[{extra}]' (from a checkout: pip install '.[{extra}]')\n"
    )


def test_an_import_error_of_another_module_is_not_blamed_on_an_extra():
    assert missing_extra(ModuleNotFoundError("x", name="numpy")) is None
    assert missing_extra(ModuleNotFoundError("x", name="distributed.client"), "latch bench") == (
        "latch bench needs the 'cluster' extra (module 'distributed' is not installed): "
        "pip install 'latch-context[cluster]' (from a checkout: pip install '.[cluster]')"
    )


def test_a_postgresql_store_without_psycopg_names_the_extra_and_hides_the_password(tmp_path):
    out = _without(OPTIONAL, "--db", "postgresql://me:s3cret@db.invalid/latch", "sessions", home=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == (
        "Error: the store at postgresql://me:***@db.invalid/latch needs the 'postgres' extra (module "
        "'psycopg' is not installed): pip install 'latch-context[postgres]' (from a checkout: pip "
        "install '.[postgres]')\n"
    )
