"""``latch.config``: TOML location, validation with file/key errors, per-model budgets."""

from __future__ import annotations

import pytest

from latch.config import ConfigError, budget_for_model, config_path, load_config, recall_tokens
from latch.engine.port import ContextBudget


def test_defaults_without_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LATCH_HOME", str(tmp_path))
    assert config_path() == tmp_path / "config.toml"
    assert load_config() == {}
    assert budget_for_model({}, "any-model") == ContextBudget(256_000, 32_000, 64_000)
    assert recall_tokens({}, 64_000) == 16_000


def test_per_model_overrides_exact_then_longest_prefix(tmp_path, monkeypatch):
    monkeypatch.setenv("LATCH_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text(
        "[context]\nrecent_tokens = 48000\nrecall_tokens = 5000\n"
        '[models."claude-sonnet-4"]\ncontext_window_tokens = 200000\n'
        '[models."claude-sonnet-4-5"]\ncontext_window_tokens = 1000000\nreserve_tokens = 64000\n'
        "[models.tiny]\ncontext_window_tokens = 32000\nreserve_tokens = 4000\n",
        encoding="utf-8",
    )
    cfg = load_config()
    assert budget_for_model(cfg, "claude-sonnet-4-20250514") == ContextBudget(200_000, 32_000, 48_000)
    assert budget_for_model(cfg, "claude-sonnet-4-5-20250929") == ContextBudget(1_000_000, 64_000, 48_000)
    assert budget_for_model(cfg, "tiny") == ContextBudget(32_000, 4_000, 48_000)
    # a model without a config entry gets Latch's model table (gpt-5: 272k prompt + 128k
    # output), and only a model the table does not know gets the defaults (was: gpt-5 -> 256,000 / 32,000)
    assert budget_for_model(cfg, "gpt-5") == ContextBudget(400_000, 128_000, 48_000)
    assert budget_for_model(cfg, "gpt-9") == ContextBudget(256_000, 32_000, 48_000)
    assert recall_tokens(cfg, 48_000) == 5_000


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '[context]\nrecent_tokens = "lots"\n',
            "context.recent_tokens must be a positive integer (tokens), got 'lots'",
        ),
        ("[models.m]\ncontext_window_tokens = 0\n", "models.m.context_window_tokens must be a positive integer"),
        (
            "[models.m]\ncontext_window_tokens = 1000\nreserve_tokens = 1000\n",
            "models.m: reserve_tokens (1000) must be below context_window_tokens (1000)",
        ),
        ("models = 3\n", "[models] must be a table"),
        ("[context\n", "invalid TOML"),
    ],
)
def test_bad_files_name_file_and_key(tmp_path, text, message):
    p = tmp_path / "bad.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(p)
    assert str(exc.value).startswith(str(p) + ": ")
    assert message in str(exc.value)


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")
