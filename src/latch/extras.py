"""The optional parts of the distribution ``latch-context`` and the one line that names a missing one.

The core install (store, engine, estimators, importers, ``replay``, ``view``, ``bench``) needs no extra. The
extras (``pyproject.toml``): ``agent`` (``latch run``: the provider SDKs and MCP), ``web`` (``latch web``),
``tui`` (``latch tui``), ``bench`` (plots), ``cluster`` (``latch bench --scheduler``) and ``all``.
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "EXTRA_OF_MODULE", "missing_extra"]

DISTRIBUTION = "latch-context"
"""The distribution's name (``pip install latch-context``); the import name is ``latch``."""

EXTRA_OF_MODULE = {
    "openai": "agent",
    "anthropic": "agent",
    "mcp": "agent",
    "starlette": "web",
    "uvicorn": "web",
    "sse_starlette": "web",
    "textual": "tui",
    "matplotlib": "bench",
    "dask": "cluster",
    "distributed": "cluster",
    "psycopg": "postgres",
}
"""Top-level module → the extra that installs it."""


def missing_extra(exc: ImportError, command: str | None = None) -> str | None:
    """One line naming the extra that installs the module ``exc`` could not import (``None`` when no extra
    provides it), for ``command`` (e.g. ``"latch run"``) when given."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(name)
    if extra is None:
        return None
    who = command or "this command"
    return (
        f"{who} needs the '{extra}' extra (module {name!r} is not installed): "
        f"pip install '{DISTRIBUTION}[{extra}]' (from a checkout: pip install '.[{extra}]')"
    )
