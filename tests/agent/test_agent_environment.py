"""The environment of tool processes: secrets removed by name and pattern, a pass-through list, redaction."""

from __future__ import annotations

from latch.agent.environment import REDACTED, redact, secret_values, tool_environment

BASE = {
    "PATH": "/usr/bin",
    "HOME": "/home/me",
    "OPENAI_API_KEY": "sk-abcdefgh12345",
    "GH_TOKEN": "ghp_0123456789",
    "STRIPE_SECRET_KEY": "sk_live_0123456789",
    "DB_PASSWORD": "hunter2hunter2",
    "MY_APIKEY": "k-0123456789",
    "TOKENIZERS_PARALLELISM": "false",
    "NPM_CONFIG_PREFIX": "/opt/npm",
    "CUSTOM_CRED": "c-0123456789",
    "SHORT_TOKEN": "abc",
}


def test_secret_names_and_the_named_variable_are_removed_the_rest_kept():
    env = tool_environment(BASE, also=["CUSTOM_CRED"])
    assert sorted(env) == ["HOME", "NPM_CONFIG_PREFIX", "PATH", "TOKENIZERS_PARALLELISM"]


def test_a_pass_through_name_is_kept():
    env = tool_environment({**BASE, "LATCH_TOOL_ENV_PASS": "GH_TOKEN, DB_PASSWORD"})
    assert env["GH_TOKEN"] == "ghp_0123456789" and env["DB_PASSWORD"] == "hunter2hunter2"
    assert "OPENAI_API_KEY" not in env


def test_removed_values_are_redacted_longest_first_and_short_ones_left():
    values = secret_values(BASE, also=["CUSTOM_CRED"])
    assert "abc" not in values and values[0] == max(values, key=len)
    text = "key sk-abcdefgh12345 and ghp_0123456789 and c-0123456789; abc stays"
    assert redact(text, values) == f"key {REDACTED} and {REDACTED} and {REDACTED}; abc stays"
