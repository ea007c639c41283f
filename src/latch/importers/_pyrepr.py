"""Safe parsing of dict-valued fields written as JSON or as a Python ``repr`` (SWE-agent, OpenHands)."""

from __future__ import annotations

import ast
from typing import Any

from .base import JSONNestingError, json_loads

__all__ = ["literal_mapping"]


def literal_mapping(value: Any) -> dict[str, Any] | None:
    """A dict from a dict, a JSON object string or a Python-repr dict string; else ``None``.

    Python reprs are parsed with :func:`ast.literal_eval` (literals only, never
    code execution).
    """
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = json_loads(value)
    except JSONNestingError:
        return None
    except ValueError:
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return parsed if isinstance(parsed, dict) else None
