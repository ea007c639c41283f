"""Latch configuration: one TOML file read with :mod:`tomllib`.

Location (first match): an explicit path (``--config``), ``$LATCH_HOME/config.toml``, the platformdirs
user config folder's ``config.toml`` (e.g. ``~/.config/latch/config.toml``). A missing file means
the defaults. Known keys (spec: "Bounded materialization", "Cache epochs and working memory")::

    [context]
    recent_tokens = 64000      # conversation high-water mark of a cache epoch (tokens)
    recall_tokens = 16000      # recalled originals + episode index per cache epoch (default recent_tokens / 4)
    state_tokens = 8000        # canonical state rendering (default max(2000, recent_tokens / 8))

    [models."claude-sonnet-4"] # exact model id, or the longest key that prefixes the model id
    context_window_tokens = 200000
    reserve_tokens = 32000     # the model's output plus safety (tokens)

    [engine]
    name = "continuity"        # read by latch.plugins.engine_name

    [provider]                 # defaults of ``latch run`` (its flags win)
    name = "openai"            # a provider plugin: openai, anthropic, openai-compatible
    model = "gpt-4.1"
    base_url = "http://127.0.0.1:8080/v1"   # openai-compatible servers (llama.cpp, Ollama, vLLM)
    api_key_env = "OPENAI_API_KEY"          # the environment variable holding the key (never the key)
    max_turns = 50

``[engines.<name>]`` and tables named after a plugin are left to their owners; any other table or
key is reported by :func:`unknown_keys` (the CLI prints one warning line each). Every value checked here must be a positive integer of at
most :data:`MAX_TOKENS` (``reserve_tokens`` and ``recall_tokens`` may be 0; ``reserve_tokens`` must
stay below the window); a bad file raises :class:`ConfigError` naming the file, the key and the
problem. A ``recent_tokens`` above a model's ``context_window_tokens - reserve_tokens`` is legal:
the hard budget lowers the effective value (spec: "Bounded materialization").
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .port import ContextBudget

__all__ = [
    "ConfigError",
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "DEFAULT_RESERVE_TOKENS",
    "DEFAULT_RECENT_TOKENS",
    "MAX_TOKENS",
    "RECALL_SHARE",
    "config_path",
    "load_config",
    "validate_config",
    "unknown_keys",
    "model_settings",
    "budget_for_model",
    "recall_tokens",
    "state_tokens",
]

DEFAULT_CONTEXT_WINDOW_TOKENS = 256_000
# Reserve = the response plus safety. 32,000 covers the default output cap of today's coding agents
# (Claude Code asks for 32k output tokens); no extra safety margin is added because the estimator is
# calibrated never to undercount, so the view's estimate is already an upper bound of its real size.
DEFAULT_RESERVE_TOKENS = 32_000
DEFAULT_RECENT_TOKENS = 64_000
MAX_TOKENS = 100_000_000
"""Upper bound of every token budget (config keys, ``--window``/``--reserve``/``--recent``): 100x today's largest windows."""
RECALL_SHARE = 4
"""Without ``[context] recall_tokens``, recall + index get ``recent_tokens // RECALL_SHARE`` per epoch."""


class ConfigError(Exception):
    """The configuration file is unreadable or holds a bad value (message: ``FILE: KEY: problem``)."""


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The config file to read: ``explicit``, else ``$LATCH_HOME/config.toml``, else platformdirs'."""
    if explicit is not None:
        return Path(explicit).expanduser()
    home = os.environ.get("LATCH_HOME")
    if home:
        return Path(home).expanduser() / "config.toml"
    import platformdirs

    return Path(platformdirs.user_config_dir("latch", appauthor=False)) / "config.toml"


def load_config(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Parse and validate the config file (see :func:`config_path`); ``{}`` when the default file is absent.

    An explicit ``path`` that does not exist is an error. Raises :class:`ConfigError`.
    """
    p = config_path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        if path is not None:
            raise ConfigError(f"{p}: no such config file") from None
        return {}
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        parsed = tomllib.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: invalid TOML: {exc}") from None
    return validate_config(parsed, str(p))


def _positive(value: Any, where: str, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        kind = "a non-negative" if allow_zero else "a positive"
        raise ConfigError(f"{where} must be {kind} integer (tokens), got {value!r}")
    if value > MAX_TOKENS:
        raise ConfigError(f"{where} must be at most {MAX_TOKENS:,} tokens, got {value:,}")
    return value


def validate_config(data: Mapping[str, Any], source: str = "<config>") -> dict[str, Any]:
    """Check the keys this module knows; return ``data`` as a plain dict. Raises :class:`ConfigError`."""
    out = dict(data)
    context = out.get("context", {})
    if not isinstance(context, Mapping):
        raise ConfigError(f"{source}: [context] must be a table, got {type(context).__name__}")
    for key in ("recent_tokens", "recall_tokens", "state_tokens"):
        if key in context:
            _positive(context[key], f"{source}: context.{key}", allow_zero=key == "recall_tokens")
    models = out.get("models", {})
    if not isinstance(models, Mapping):
        raise ConfigError(f"{source}: [models] must be a table of [models.<name>] tables")
    for name, table in models.items():
        where = f"{source}: models.{name}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table, got {type(table).__name__}")
        if "context_window_tokens" in table:
            _positive(table["context_window_tokens"], f"{where}.context_window_tokens")
        if "reserve_tokens" in table:
            _positive(table["reserve_tokens"], f"{where}.reserve_tokens", allow_zero=True)
        window = table.get("context_window_tokens", DEFAULT_CONTEXT_WINDOW_TOKENS)
        reserve = table.get("reserve_tokens", DEFAULT_RESERVE_TOKENS)
        if reserve >= window:
            raise ConfigError(f"{where}: reserve_tokens ({reserve}) must be below context_window_tokens ({window})")
    engine = out.get("engine", {})
    if not isinstance(engine, Mapping):
        raise ConfigError(f"{source}: [engine] must be a table, got {type(engine).__name__}")
    name = engine.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(f"{source}: [engine] name must be a non-empty string, got {name!r}")
    provider = out.get("provider", {})
    if not isinstance(provider, Mapping):
        raise ConfigError(f"{source}: [provider] must be a table, got {type(provider).__name__}")
    for key in ("name", "model", "base_url", "api_key_env"):
        value = provider.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{source}: [provider] {key} must be a non-empty string, got {value!r}")
    if "max_turns" in provider:
        turns = provider["max_turns"]
        if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= 10_000:
            raise ConfigError(f"{source}: [provider] max_turns must be an integer from 1 to 10000, got {turns!r}")
    return out


KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "context": ("recent_tokens", "recall_tokens", "state_tokens"),
    "engine": ("name",),
    "provider": ("name", "model", "base_url", "api_key_env", "max_turns"),
    "models": (),  # [models.<model id>] tables, each with MODEL_KEYS
    "engines": (),  # [engines.<engine name>] tables, owned by each engine
}
MODEL_KEYS = ("context_window_tokens", "reserve_tokens")


def _unknown(key: str, known: Iterable[str], what: str, source: str) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{source}: unknown {what}{hint}; ignored"


def unknown_keys(data: Mapping[str, Any], source: str = "<config>", owned: Iterable[str] = ()) -> list[str]:
    """One warning line (``FILE: unknown KEY (did you mean ...?); ignored``) per table or key Latch does not
    know, with the closest known name as a hint. ``owned`` names top-level tables a plugin reads."""
    owned = set(owned)
    lines = []
    for table, body in data.items():
        if table in owned:
            continue
        if table not in KNOWN_KEYS:
            lines.append(_unknown(table, KNOWN_KEYS, f"table [{table}]", source))
            continue
        if not isinstance(body, Mapping):
            continue
        if table == "models":
            lines += [_unknown(k, MODEL_KEYS, f"key models.{name}.{k}", source)
                      for name, t in body.items() if isinstance(t, Mapping) for k in t if k not in MODEL_KEYS]
        elif KNOWN_KEYS[table]:
            lines += [_unknown(k, KNOWN_KEYS[table], f"key [{table}] {k}", source)
                      for k in body if k not in KNOWN_KEYS[table]]
    return lines


def model_settings(config: Mapping[str, Any] | None, model: str | None) -> Mapping[str, Any]:
    """The ``[models.<name>]`` table for ``model``: exact id, else the longest key prefixing it, else ``{}``."""
    models = (config or {}).get("models", {}) or {}
    if not model:
        return {}
    if model in models:
        return models[model]
    prefixes = [k for k in models if model.startswith(k)]
    return models[max(prefixes, key=len)] if prefixes else {}


def budget_for_model(config: Mapping[str, Any] | None, model: str | None) -> "ContextBudget":
    """The :class:`~latch.port.ContextBudget` of ``model`` under ``config`` (defaults where a key is absent)."""
    m = model_settings(config, model)
    context = (config or {}).get("context", {}) or {}
    return ContextBudget(
        context_window_tokens=int(m.get("context_window_tokens", DEFAULT_CONTEXT_WINDOW_TOKENS)),
        reserve_tokens=int(m.get("reserve_tokens", DEFAULT_RESERVE_TOKENS)),
        recent_tokens=int(context.get("recent_tokens", DEFAULT_RECENT_TOKENS)),
    )


def recall_tokens(config: Mapping[str, Any] | None, recent_tokens: int) -> int:
    """Tokens of recalled originals + episode index per cache epoch: ``[context] recall_tokens``,
    else ``recent_tokens // RECALL_SHARE``."""
    value = ((config or {}).get("context", {}) or {}).get("recall_tokens")
    return int(value) if value is not None else recent_tokens // RECALL_SHARE


def state_tokens(config: Mapping[str, Any] | None, recent_tokens: int) -> int:
    """Tokens the canonical state may render into: ``[context] state_tokens``, else
    ``max(2000, recent_tokens // 8)``."""
    value = ((config or {}).get("context", {}) or {}).get("state_tokens")
    return int(value) if value is not None else max(2_000, recent_tokens // 8)
