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
    name = "openai"            # a provider plugin: openai, openai-responses, anthropic, openai-compatible
    model = "gpt-4.1"
    base_url = "http://127.0.0.1:8080/v1"   # openai-compatible servers (llama.cpp, Ollama, vLLM)
    api_key_env = "OPENAI_API_KEY"          # the environment variable holding the key (never the key)
    max_turns = 50
    response_timeout = 600     # seconds one model response may take in all (retries and stream included)
    idle_timeout = 120         # seconds a model response may send nothing before it fails

    [mcp.servers.github]       # an MCP server started over stdio by ``latch run`` (tools mcp__github__*)
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_TOKEN = "..." }          # merged over a minimal safe environment
    timeout = 120              # seconds per tool call

    [mcp.servers.docs]         # an MCP server over streamable HTTP (tools mcp__docs__*)
    url = "http://127.0.0.1:8000/mcp"
    bearer_token_env_var = "DOCS_TOKEN"     # sent as "Authorization: Bearer $DOCS_TOKEN" (never stored)
    env_http_headers = { X-Api-Key = "DOCS_KEY" }   # header -> the environment variable holding its value

A model's window and reserve are chosen in one place, :func:`model_window`: the config's
``[models.NAME]`` entry, else Latch's model table (``latch/data/models.toml``, a data file: current
Claude, GPT, Gemini, Qwen, GLM, DeepSeek and Llama families, matched by the longest prefix), else the
defaults; :func:`budget_for_model` (every engine's ``default_budget``) builds on it.

``[engines.<name>]`` and tables named after a plugin are left to their owners; any other table or
key is reported by :func:`unknown_keys` (the CLI prints one warning line each). Every value checked here must be a positive integer of at
most :data:`MAX_TOKENS` (``reserve_tokens`` and ``recall_tokens`` may be 0; ``reserve_tokens`` must
stay below the window); a bad file raises :class:`ConfigError` naming the file, the key and the
problem. A ``recent_tokens`` above a model's ``context_window_tokens - reserve_tokens`` is legal:
the hard budget lowers the effective value (spec: "Bounded materialization").
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .cache_files import read_cache_file, write_cache_file
from .lazyre import lazy_compile
from .port import ContextBudget
from .records import dataclass

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
    "ModelWindow",
    "model_table",
    "use_model_table_cache",
    "model_table_entry",
    "model_window",
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


def _close_matches(word: str, known: list[str]) -> list[str]:
    """The closest of ``known`` to ``word`` (at most one), for a "did you mean" hint; difflib is imported only
    when a name is wrong."""
    import difflib

    return difflib.get_close_matches(word, known, n=1)


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
    import tomllib  # only when there is a file: a command without one never imports the TOML parser

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
        if "reserve_tokens" in table and "context_window_tokens" not in table:
            entry_key, known = model_table_entry(str(name))  # the window this entry's models get from the table
            if known and reserve >= known["context_window_tokens"]:
                raise ConfigError(
                    f"{where}: reserve_tokens ({reserve}) must be below the context window of "
                    f"{name} ({known['context_window_tokens']}, Latch's model table entry {entry_key}); "
                    f"set context_window_tokens too"
                )
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
    for key in ("response_timeout", "idle_timeout"):
        seconds = provider.get(key)
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0
        ):
            raise ConfigError(f"{source}: [provider] {key} must be a positive number of seconds, got {seconds!r}")
    _validate_mcp(out.get("mcp", {}), source)
    return out


MCP_STDIO_KEYS = ("command", "args", "env", "timeout")
MCP_HTTP_KEYS = ("url", "bearer_token_env_var", "env_http_headers", "timeout")
MCP_SERVER_KEYS = ("command", "args", "env", "url", "bearer_token_env_var", "env_http_headers", "timeout")
_SERVER_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_ENV_NAME_RE = lazy_compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME_RE = lazy_compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _validate_mcp(mcp: Any, source: str) -> None:
    """``[mcp.servers.NAME]`` tables, each one transport: stdio with ``command`` (required string), ``args``
    (strings), ``env`` (string values); or streamable HTTP with ``url`` (``http://`` or ``https://``),
    ``bearer_token_env_var`` (an environment variable's name) and ``env_http_headers`` (header name ->
    environment variable name; the values are read when connecting, never stored). Both take ``timeout``
    (seconds, 1 to 3600). NAME is letters, digits, ``_`` and ``-`` without ``__``."""
    if not isinstance(mcp, Mapping):
        raise ConfigError(f"{source}: [mcp] must be a table, got {type(mcp).__name__}")
    servers = mcp.get("servers", {})
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{source}: [mcp.servers] must be a table of [mcp.servers.<name>] tables")
    for name, table in servers.items():
        where = f"{source}: mcp.servers.{name}"
        if not name or not set(name) <= _SERVER_NAME_CHARS or "__" in name or len(name) > 32:
            raise ConfigError(f"{where}: the server name must be 1-32 letters, digits, _ or - (no '__')")
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table, got {type(table).__name__}")
        unknown = [k for k in table if k not in MCP_SERVER_KEYS]
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(MCP_SERVER_KEYS)})")
        if "url" in table:
            _validate_mcp_http(table, where)
        else:
            _validate_mcp_stdio(table, where)
        timeout = table.get("timeout", 120)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 1 <= timeout <= 3600:
            raise ConfigError(f"{where}.timeout must be a number of seconds from 1 to 3600, got {timeout!r}")


def _validate_mcp_stdio(table: Mapping[str, Any], where: str) -> None:
    command = table.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(
            f"{where}.command must be a non-empty string (or give url for an HTTP server), got {command!r}"
        )
    others = [k for k in table if k not in MCP_STDIO_KEYS]
    if others:
        raise ConfigError(
            f"{where}: {others[0]!r} belongs to an HTTP server (with url); a server with command "
            f"takes {', '.join(MCP_STDIO_KEYS)}"
        )
    args = table.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}.args must be a list of strings, got {args!r}")
    env = table.get("env", {})
    if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"{where}.env must be a table of strings")


def _validate_mcp_http(table: Mapping[str, Any], where: str) -> None:
    url = table.get("url")
    if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url) or any(c.isspace() for c in url):
        raise ConfigError(f"{where}.url must be an http:// or https:// URL, got {url!r}")
    others = [k for k in table if k not in MCP_HTTP_KEYS]
    if others:
        raise ConfigError(
            f"{where}: {others[0]!r} belongs to a stdio server (with command); a server with url "
            f"takes {', '.join(MCP_HTTP_KEYS)}"
        )
    var = table.get("bearer_token_env_var")
    if var is not None and (not isinstance(var, str) or not _ENV_NAME_RE.match(var)):
        raise ConfigError(f"{where}.bearer_token_env_var must be an environment variable's name, got {var!r}")
    headers = table.get("env_http_headers", {})
    if not isinstance(headers, Mapping):
        raise ConfigError(f'{where}.env_http_headers must be a table of header = "ENV_VAR"')
    for header, env_name in headers.items():
        if not _HEADER_NAME_RE.match(header):
            raise ConfigError(f"{where}.env_http_headers: {header!r} is not an HTTP header name")
        if not isinstance(env_name, str) or not _ENV_NAME_RE.match(env_name):
            raise ConfigError(f"{where}.env_http_headers.{header} must name an environment variable, got {env_name!r}")


KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "context": ("recent_tokens", "recall_tokens", "state_tokens"),
    "engine": ("name",),
    "provider": ("name", "model", "base_url", "api_key_env", "max_turns", "response_timeout", "idle_timeout"),
    "models": (),  # [models.<model id>] tables, each with MODEL_KEYS
    "engines": (),  # [engines.<engine name>] tables, owned by each engine
    "mcp": ("servers",),  # [mcp.servers.<name>] tables, each with MCP_SERVER_KEYS (checked by validate_config)
}
MODEL_KEYS = ("context_window_tokens", "reserve_tokens")


def _unknown(key: str, known: Iterable[str], what: str, source: str) -> str:
    close = _close_matches(key, list(known))
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
            lines += [
                _unknown(k, MODEL_KEYS, f"key models.{name}.{k}", source)
                for name, t in body.items()
                if isinstance(t, Mapping)
                for k in t
                if k not in MODEL_KEYS
            ]
        elif KNOWN_KEYS[table]:
            lines += [
                _unknown(k, KNOWN_KEYS[table], f"key [{table}] {k}", source) for k in body if k not in KNOWN_KEYS[table]
            ]
    return lines


def model_settings(config: Mapping[str, Any] | None, model: str | None) -> Mapping[str, Any]:
    """The config's ``[models.<name>]`` table for ``model``: exact id, else the longest key prefixing it, else ``{}``
    (Latch's model table is not consulted: see :func:`model_window`)."""
    return _config_entry(config, model)[1]


MODEL_TABLE = "models.toml"
"""Latch's model table, package data of ``latch/data`` (see the file's header for its rules)."""


MODEL_TABLE_CACHE_ENTRIES = 8
"""The most model tables (distinct contents of :data:`MODEL_TABLE`: other installations) the cache file keeps."""

_model_table_cache: Path | None = None


def use_model_table_cache(path: str | os.PathLike[str] | None) -> None:
    """Keep the parsed :func:`model_table` in the JSON file ``path`` (``None``: nothing kept, the default).

    The file maps a digest of :data:`MODEL_TABLE`'s bytes (BLAKE2b, 128 bits) to the validated table, so a later
    process whose table file is unchanged reads it without importing :mod:`tomllib`; a changed file is parsed and
    validated again. At most :data:`MODEL_TABLE_CACHE_ENTRIES` tables are kept. A cache file that cannot be read,
    holds something else or cannot be written is ignored.
    """
    global _model_table_cache
    _model_table_cache = Path(path) if path is not None else None
    model_table.cache_clear()


def _kept_tables() -> dict[str, Any]:
    if _model_table_cache is None:
        return {}
    tables = read_cache_file(_model_table_cache).get("tables")
    return tables if isinstance(tables, dict) else {}


def _kept_table(kept: Any) -> dict[str, dict[str, int]] | None:
    """``kept`` as a model table when it has the shape :func:`model_table` returns, else ``None``."""
    if not isinstance(kept, dict):
        return None
    for key, entry in kept.items():
        if not (isinstance(entry, dict) and set(entry) == set(MODEL_KEYS) and key == key.lower()):
            return None
        if not all(type(v) is int and v >= 0 for v in entry.values()):
            return None
    return kept


def _keep_table(digest: str, table: dict[str, dict[str, int]]) -> None:
    if _model_table_cache is None:
        return
    tables = _kept_tables()
    tables.pop(digest, None)
    tables[digest] = table
    tables = dict(list(tables.items())[-MODEL_TABLE_CACHE_ENTRIES:])
    write_cache_file(_model_table_cache, json.dumps({"tables": tables}, separators=(",", ":")))


@functools.lru_cache(maxsize=1)
def model_table() -> dict[str, dict[str, int]]:
    """Latch's model table: ``{key: {"context_window_tokens": int, "reserve_tokens": int}}``, keys lower case.

    Read once from the package data file :data:`MODEL_TABLE` and validated like a config's ``[models]``
    (a broken table raises :class:`ConfigError` naming the file: a packaging bug, never user input); with
    :func:`use_model_table_cache`, the parsed table of unchanged file contents is read from that cache instead.
    """
    source = f"latch/data/{MODEL_TABLE}"
    # the package's own folder, not importlib.resources (its import costs a command about 5 ms): latch is never
    # installed zipped (its native module is a shared library)
    raw = (Path(__file__).with_name("data") / MODEL_TABLE).read_bytes()
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    kept = _kept_table(_kept_tables().get(digest)) if _model_table_cache is not None else None
    if kept is not None:
        return kept
    import tomllib

    data = tomllib.loads(raw.decode("utf-8"))
    table = validate_config({"models": data.get("models", {})}, source)["models"]
    out: dict[str, dict[str, int]] = {}
    for key, entry in table.items():
        if set(entry) != set(MODEL_KEYS):
            raise ConfigError(f"{source}: models.{key} must set exactly {', '.join(MODEL_KEYS)}")
        out[key.lower()] = {k: int(entry[k]) for k in MODEL_KEYS}
    _keep_table(digest, out)
    return out


def model_table_entry(model: str | None) -> tuple[str | None, Mapping[str, int]]:
    """``(key, entry)`` of Latch's model table for ``model``, else ``(None, {})``.

    Matching is case-insensitive by the longest key prefixing the id; an id with a provider route
    (``anthropic/claude-sonnet-4-5``, ``openrouter/qwen/qwen3-coder``) is tried without it (the part after
    the last ``/``) when the whole id matches nothing.
    """
    if not model:
        return None, {}
    table = model_table()
    for candidate in dict.fromkeys((model.lower(), model.lower().rpartition("/")[2])):
        keys = [k for k in table if candidate.startswith(k)]
        if keys:
            key = max(keys, key=len)
            return key, table[key]
    return None, {}


def _config_entry(config: Mapping[str, Any] | None, model: str | None) -> tuple[str | None, Mapping[str, Any]]:
    models = (config or {}).get("models", {}) or {}
    if not model:
        return None, {}
    if model in models:
        return model, models[model]
    prefixes = [k for k in models if model.startswith(k)]
    if prefixes:
        key = max(prefixes, key=len)
        return key, models[key]
    return None, {}


@dataclass(frozen=True, slots=True)
class ModelWindow:
    """Where ``model``'s window and reserve (tokens) come from: ``source`` (and ``reserve_source``) is
    ``"config"`` (a ``[models.NAME]`` entry: ``entry`` is its NAME), ``"model-table"`` (Latch's model table:
    ``entry`` is its key) or ``"default"`` (:data:`DEFAULT_CONTEXT_WINDOW_TOKENS`, :data:`DEFAULT_RESERVE_TOKENS`)."""

    context_window_tokens: int
    reserve_tokens: int
    source: str
    entry: str | None = None
    reserve_source: str = "default"
    reserve_entry: str | None = None

    def describe(self) -> str:
        """One line for a report header: where the window came from (plain text, model ids unescaped)."""
        if self.source == "config":
            return f"config [models.{self.entry}]"
        if self.source == "model-table":
            return f"Latch's model table ({self.entry})"
        return "Latch's default"


def model_window(config: Mapping[str, Any] | None, model: str | None) -> ModelWindow:
    """The context window and reserve of ``model`` (tokens), each from the first that has it: the config's
    ``[models.NAME]`` entry (:func:`model_settings`), Latch's model table (:func:`model_table_entry`), the
    defaults. A table reserve that does not fit under a configured window is replaced by the default one.
    Raises :class:`ConfigError` when a configured reserve is not below the window the table gives.
    """
    ckey, conf = _config_entry(config, model)
    tkey, known = model_table_entry(model)
    if "context_window_tokens" in conf:
        window, source, entry = int(conf["context_window_tokens"]), "config", ckey
    elif known:
        window, source, entry = known["context_window_tokens"], "model-table", tkey
    else:
        window, source, entry = DEFAULT_CONTEXT_WINDOW_TOKENS, "default", None
    if "reserve_tokens" in conf:
        reserve, r_source, r_entry = int(conf["reserve_tokens"]), "config", ckey
    elif known and known["reserve_tokens"] < window:
        reserve, r_source, r_entry = known["reserve_tokens"], "model-table", tkey
    else:
        reserve, r_source, r_entry = DEFAULT_RESERVE_TOKENS, "default", None
    if reserve >= window:
        raise ConfigError(
            f"models.{ckey}: reserve_tokens ({reserve}) must be below the context window of {model} "
            f"({window}, from {ModelWindow(window, reserve, source, entry).describe()})"
        )
    return ModelWindow(window, reserve, source, entry, r_source, r_entry)


def budget_for_model(config: Mapping[str, Any] | None, model: str | None) -> ContextBudget:
    """The :class:`~latch.port.ContextBudget` of ``model`` under ``config``: window and reserve from
    :func:`model_window` (config entry, model table, defaults), ``recent_tokens`` from ``[context]``."""
    m = model_window(config, model)
    context = (config or {}).get("context", {}) or {}
    return ContextBudget(
        context_window_tokens=m.context_window_tokens,
        reserve_tokens=m.reserve_tokens,
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
