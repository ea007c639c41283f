"""The environment tool processes get: the agent's secrets removed (spec: "Sessions & continuity": what a tool
returns is stored, searchable and resent to the model, so a key a tool can print reaches the model).

:func:`tool_environment` is ``os.environ`` without the provider keys Latch knows (:data:`PROVIDER_KEYS`), any
variable whose name looks like a secret (:data:`SECRET_NAME`: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
``*_PASSWORD``, ...) and the names the caller adds (the ``--api-key-env`` variable, MCP header and token
variables); a variable named in ``LATCH_TOOL_ENV_PASS`` (comma-separated) is kept whatever its name. The shell
tool, background processes and stdio MCP servers start with it. As a second line, :func:`redact` replaces the
removed values (8 characters or more) in tool results before they are stored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["PROVIDER_KEYS", "SECRET_NAME", "PASS_ENV", "tool_environment", "secret_values", "redact", "REDACTED"]

PROVIDER_KEYS = frozenset(
    {
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENROUTER_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "MISTRAL_API_KEY",
        "GROQ_API_KEY",
        "DEEPSEEK_API_KEY",
        "XAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
    }
)
"""Provider and forge credentials removed by name."""
SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_KEY|ACCESS_KEY)(_|$)", re.IGNORECASE
)
"""A variable name that looks like a secret."""
PASS_ENV = "LATCH_TOOL_ENV_PASS"
"""Comma-separated variable names tool processes keep even when they look like secrets."""
REDACTED = "[redacted secret]"
_MIN_SECRET_CHARS = 8


def _removed(name: str, also: frozenset[str], keep: frozenset[str]) -> bool:
    return name not in keep and (name in PROVIDER_KEYS or name in also or SECRET_NAME.search(name) is not None)


def _keep(base: Mapping[str, str]) -> frozenset[str]:
    return frozenset(n.strip() for n in base.get(PASS_ENV, "").split(",") if n.strip())


def tool_environment(base: Mapping[str, str] | None = None, *, also: Iterable[str] = ()) -> dict[str, str]:
    """``base`` (default ``os.environ``) without its secrets (see the module docstring); ``also``: more names."""
    env = dict(os.environ if base is None else base)
    extra, keep = frozenset(also), _keep(env)
    return {k: v for k, v in env.items() if not _removed(k, extra, keep)}


def secret_values(base: Mapping[str, str] | None = None, *, also: Iterable[str] = ()) -> tuple[str, ...]:
    """The values :func:`tool_environment` removes, longest first, those of at least 8 characters."""
    env = dict(os.environ if base is None else base)
    extra, keep = frozenset(also), _keep(env)
    found = {v for k, v in env.items() if _removed(k, extra, keep) and len(v) >= _MIN_SECRET_CHARS}
    return tuple(sorted(found, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of a value of ``secrets`` replaced by :data:`REDACTED`."""
    for value in secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    return text
