"""The first-party plugin distributions, installed for real (``pip install ./plugins/...``):
they appear in ``latch plugins`` and their engines run under ``latch replay --engine``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from latch import plugins

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = ("latch-tiktoken", "latch-baselines", "latch-example")
LATCH = [sys.executable, "-c", "from latch.cli import main; main()"]


@pytest.fixture(autouse=True)
def _installed():
    missing = []
    for dist in DISTRIBUTIONS:
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            missing.append(dist)
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {', '.join(missing)} is not installed")
        pytest.skip(f"not installed: {', '.join(missing)} (pip install ./plugins/<name>)")
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def run_latch(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LATCH_")}
    environ.update(LATCH_HOME=str(tmp_path / "home"), COLUMNS="200", **env)
    return subprocess.run([*LATCH, *args], env=environ, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_latch_plugins_lists_every_first_party_registration(tmp_path):
    out = run_latch("plugins", "--json", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert {"baselines", "example", "tiktoken"} <= set(rows)
    assert rows["baselines"]["source"] == "latch-baselines 0.1.0"
    assert rows["baselines"]["registered"] == {"engines": ["sliding-window", "observation-masking", "summary"]}
    assert rows["example"]["registered"] == {"engines": ["keep-last-units"]}
    assert rows["example"]["descriptions"] == {
        "keep-last-units": "Example engine: the newest N whole units (default 20) that fit the budget."}
    assert rows["tiktoken"]["registered"] == {"estimators": ["tiktoken"]}
    assert rows["tiktoken"]["hooks"] == ["latch_register_estimators", "latch_select_estimator"]
    engines = [e for row in rows.values() for e in row["registered"].get("engines", [])]
    assert {"continuity", "sliding-window", "observation-masking", "summary", "keep-last-units"} <= set(engines)


def test_empty_allowlist_hides_them(tmp_path):
    out = run_latch("plugins", "--json", tmp_path=tmp_path, LATCH_LOAD_PLUGINS="")
    assert out.returncode == 0, out.stderr
    assert [row["builtin"] for row in json.loads(out.stdout)] == [True] * len(plugins.DEFAULT_PLUGINS)


def test_the_example_engine_replays_through_the_cli(tmp_path):
    # The README's replay budget. (keep-last-units slides its window without hysteresis, so under a
    # recent_tokens far above the session's size replay's continuity-style rotation bound flags it.)
    example = REPO / "examples" / "invoice-rounding.claude.jsonl"
    out = run_latch("replay", str(example), "--engine", "keep-last-units", "--window", "16000", "--reserve", "2000",
                    "--recent", "3000", "--json", "-", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["engine"] == "keep-last-units"
    assert doc["summary"]["violations"] == [] and doc["summary"]["requests"] > 0
    assert max(r["total_tokens"] for r in doc["requests"]) <= 14_000


def test_config_selects_the_engine_and_the_cli_overrides_it(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('[engine]\nname = "summary"\n', encoding="utf-8")
    example = str(REPO / "examples" / "invoice-rounding.claude.jsonl")
    out = run_latch("replay", example, "--json", "-", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["engine"] == "summary"
    out = run_latch("replay", example, "--engine", "sliding-window", "--json", "-", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["engine"] == "sliding-window"


def test_an_unknown_engine_is_a_usage_error_not_a_fallback(tmp_path):
    example = REPO / "examples" / "invoice-rounding.claude.jsonl"
    out = run_latch("replay", str(example), "--engine", "keep-last-unit", tmp_path=tmp_path)
    assert out.returncode == 2
    assert "unknown engine 'keep-last-unit' (did you mean 'keep-last-units'?)" in out.stderr
    assert "Traceback" not in out.stderr


def test_engine_factories_are_the_classes_factories():
    from latch_baselines import ObservationMaskingEngine, SlidingWindowEngine, SummaryEngine
    from latch_example import KeepLastUnits

    assert plugins.get_engine_factory("sliding-window") == SlidingWindowEngine.factory
    assert plugins.get_engine_factory("observation-masking") == ObservationMaskingEngine.factory
    assert plugins.get_engine_factory("summary") == SummaryEngine.factory
    assert plugins.get_engine_factory("keep-last-units") == KeepLastUnits.factory
