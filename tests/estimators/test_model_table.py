"""Latch's model table: a data file of context windows and output reserves, matched by the
longest prefix, overridden by the config's ``[models.NAME]``; the headers say where the window came from."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from latch.cli import _load_commands, cli
from latch.config import (
    ConfigError,
    ModelWindow,
    budget_for_model,
    model_table,
    model_table_entry,
    model_window,
    use_model_table_cache,
    validate_config,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"


@pytest.mark.parametrize(
    "model, key, window, reserve",
    [
        ("claude-opus-4-6", "claude", 200_000, 32_000),
        ("claude-haiku-4-5-20251001", "claude", 200_000, 32_000),
        ("claude-3-5-sonnet-20241022", "claude-3-5", 200_000, 8_192),
        ("claude-3-opus-20240229", "claude-3", 200_000, 4_096),
        ("gpt-4o-mini", "gpt-4o", 128_000, 16_384),
        ("gpt-4.1-nano", "gpt-4.1", 1_047_576, 32_000),
        ("gpt-5.6-sol", "gpt-5", 400_000, 128_000),
        ("gpt-5-chat-latest", "gpt-5-chat", 128_000, 16_384),
        ("o3-mini", "o3", 200_000, 32_000),
        ("o4-mini-2025-04-16", "o4-mini", 200_000, 32_000),
        ("gemini-2.5-flash", "gemini-2.5", 1_048_576, 32_000),
        ("gemini-3.1-pro-preview-customtools", "gemini-3", 1_048_576, 32_000),
        ("qwen3:0.6b", "qwen3", 32_768, 8_192),
        ("qwen3-coder-30b-a3b", "qwen3-coder", 262_144, 32_000),
        ("qwen3-coder-plus", "qwen3-coder-plus", 1_000_000, 32_000),
        ("glm-4.7", "glm-4.7", 200_000, 32_000),
        ("glm-4.5-air", "glm-4", 131_072, 32_000),
        ("deepseek-chat", "deepseek", 128_000, 8_192),
        ("deepseek-reasoner", "deepseek-reasoner", 128_000, 32_000),
        ("llama3.1:8b", "llama3.1", 131_072, 8_192),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3", 131_072, 8_192),  # routed, mixed case
        ("openrouter/anthropic/claude-sonnet-4.5", "claude", 200_000, 32_000),
    ],
)
def test_longest_prefix_of_the_model_table(model, key, window, reserve):
    assert model_table_entry(model)[0] == key
    assert model_window({}, model) == ModelWindow(window, reserve, "model-table", key, "model-table", key)
    assert budget_for_model({}, model).hard_limit_tokens == window - reserve


@pytest.mark.parametrize("model", ["gpt-9", "mistral-large", "", None, "xclaude"])
def test_a_model_the_table_does_not_know_gets_the_defaults(model):
    assert model_window({}, model) == ModelWindow(256_000, 32_000, "default")


def test_the_table_is_a_data_file_with_every_family():
    text = (REPO / "src" / "latch" / "data" / "models.toml").read_text(encoding="utf-8")
    keys = set(tomllib.loads(text)["models"])
    assert keys == set(model_table())
    for family in (
        "claude",
        "gpt-4o",
        "gpt-4.1",
        "gpt-5",
        "o3",
        "gemini-2.5",
        "gemini-3",
        "qwen3",
        "glm-4",
        "deepseek",
        "llama-3.1",
    ):
        assert family in keys
    assert all(e["reserve_tokens"] < e["context_window_tokens"] for e in model_table().values())


def _kept(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))["tables"]


def test_the_parsed_table_is_kept_and_read_back_while_the_file_is_unchanged(tmp_path):
    cache = tmp_path / "cache" / "models.json"
    parsed = dict(model_table())
    try:
        use_model_table_cache(cache)
        assert model_table() == parsed  # parsed (nothing kept yet) and kept under the file's digest
        ((digest, kept),) = _kept(cache).items()
        assert kept == parsed and len(digest) == 32
        # a later process reads the kept table: what the cache holds for this digest is what model_table returns
        kept["gpt-5"] = {"context_window_tokens": 123_456, "reserve_tokens": 1_000}
        cache.write_text(json.dumps({"tables": {digest: kept}}), encoding="utf-8")
        use_model_table_cache(cache)
        assert model_table()["gpt-5"] == {"context_window_tokens": 123_456, "reserve_tokens": 1_000}
        assert model_window({}, "gpt-5.6-sol").context_window_tokens == 123_456
        # another installation's table (another digest) is kept beside it, not read
        cache.write_text(json.dumps({"tables": {"0" * 32: kept}}), encoding="utf-8")
        use_model_table_cache(cache)
        assert model_table() == parsed
        assert list(_kept(cache)) == ["0" * 32, digest]
    finally:
        use_model_table_cache(None)
    assert model_table() == parsed


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"tables": []}',
        '{"tables": {"DIGEST": {"gpt-5": {"context_window_tokens": 1}}}}',  # a key missing
        '{"tables": {"DIGEST": {"gpt-5": {"context_window_tokens": "1", "reserve_tokens": 1}}}}',
        '{"tables": {"DIGEST": {"gpt-5": {"context_window_tokens": true, "reserve_tokens": 1}}}}',
        '{"tables": {"DIGEST": {"GPT-5": {"context_window_tokens": 1, "reserve_tokens": 1}}}}',
        '{"tables": {"DIGEST": ["gpt-5"]}}',
    ],
)
def test_a_damaged_kept_table_is_parsed_again(tmp_path, content):
    cache = tmp_path / "models.json"
    parsed = dict(model_table())
    try:
        use_model_table_cache(cache)
        model_table()
        (digest,) = _kept(cache)
        cache.write_text(content.replace("DIGEST", digest), encoding="utf-8")
        use_model_table_cache(cache)
        assert model_table() == parsed
        assert _kept(cache)[digest] == parsed  # and kept again
    finally:
        use_model_table_cache(None)


def test_a_cache_that_cannot_be_written_is_ignored(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    parsed = dict(model_table())
    try:
        use_model_table_cache(blocker / "cache" / "models.json")  # its folder cannot be made
        assert model_table() == parsed
    finally:
        use_model_table_cache(None)


def test_pyproject_ships_the_package_folder_whole():
    # scikit-build-core copies every file of wheel.packages (data files included) into the wheel
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["scikit-build"]["wheel"]["packages"] == ["src/latch"]
    assert "data" not in " ".join(pyproject["tool"]["scikit-build"].get("wheel", {}).get("exclude", []))


def test_config_entries_override_the_table_key_by_key():
    cfg = validate_config(
        {
            "models": {
                "claude-opus-4-6": {"context_window_tokens": 1_000_000},  # the 1M beta: window only
                "gpt-5": {"reserve_tokens": 64_000},  # reserve only
                "qwen3": {"context_window_tokens": 131_072, "reserve_tokens": 16_000},
            }
        }
    )
    assert model_window(cfg, "claude-opus-4-6") == ModelWindow(
        1_000_000, 32_000, "config", "claude-opus-4-6", "model-table", "claude"
    )
    assert model_window(cfg, "gpt-5.1-codex") == ModelWindow(400_000, 64_000, "model-table", "gpt-5", "config", "gpt-5")
    assert model_window(cfg, "qwen3:0.6b") == ModelWindow(131_072, 16_000, "config", "qwen3", "config", "qwen3")
    assert model_window(cfg, "claude-opus-4-5") == ModelWindow(
        200_000, 32_000, "model-table", "claude", "model-table", "claude"
    )  # exact/prefix only


def test_a_table_reserve_too_big_for_a_configured_window_falls_back_to_the_default():
    cfg = validate_config({"models": {"gpt-5": {"context_window_tokens": 100_000}}})
    assert model_window(cfg, "gpt-5") == ModelWindow(100_000, 32_000, "config", "gpt-5", "default", None)


def test_a_configured_reserve_above_the_tables_window_is_a_config_error():
    with pytest.raises(
        ConfigError,
        match=r"models.llama-3.1: reserve_tokens \(200000\) must be below the context "
        r"window of llama-3.1 \(131072, Latch's model table entry llama-3.1\)",
    ):
        validate_config({"models": {"llama-3.1": {"reserve_tokens": 200_000}}}, "cfg.toml")


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def invoke(*args):
        return CliRunner().invoke(
            cli, ["--db", str(db), *args], env={"LATCH_HOME": str(tmp_path / "home")}, catch_exceptions=False
        )

    return invoke


def test_replay_and_context_headers_say_where_the_window_came_from(run, tmp_path):
    res = run("replay", str(EXAMPLE))
    assert (
        "window 200,000 · reserve 32,000 · recent 64,000 tokens\nwindow: Latch's model table (entry claude)\n"
        in res.output
    )
    doc = json.loads(run("replay", str(EXAMPLE), "--json", "-").output)
    assert (doc["budget"]["window_source"], doc["window_entry"], doc["summary"]["hard_limit_tokens"]) == (
        "model-table",
        "claude",
        168_000,
    )
    cfg = tmp_path / "c.toml"
    cfg.write_text('[models."claude-sonnet"]\ncontext_window_tokens = 1000000\n', encoding="utf-8")
    res = run("replay", str(EXAMPLE), "--config", str(cfg))
    assert "window 1,000,000 · reserve 32,000" in res.output
    assert "window: the config's [models.claude-sonnet] entry" in res.output
    assert "window: set by --window" in run("replay", str(EXAMPLE), "--window", "50000").output
    bad = tmp_path / "bad.toml"  # valid alone (no table key prefixes "llama"), too big for llama-3's 8k window
    bad.write_text('[models."llama"]\nreserve_tokens = 10000\n', encoding="utf-8")
    res = run("replay", str(EXAMPLE), "--model", "llama-3-8b", "--config", str(bad))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert (
        "models.llama: reserve_tokens (10000) must be below the context window of llama-3-8b (8192, from "
        "Latch's model table (llama-3))" in res.output
    )
    sid = doc["session"]
    rep = json.loads(run("context", sid, "--json").output)
    assert (rep["window_source"], rep["window_entry"], rep["context_window_tokens"]) == (
        "model-table",
        "claude",
        200_000,
    )
    assert "window: Latch's model table (entry claude)" in run("context", sid).output
