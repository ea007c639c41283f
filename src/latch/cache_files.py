"""Latch's JSON caches (model table, price table, token counts, installed plugins): each file is written whole in
one step, and a cache that cannot be written never fails the command that wanted to keep it."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["read_cache_file", "write_cache_file"]


def read_cache_file(path: Path) -> dict[str, Any]:
    """The JSON object the file ``path`` holds; ``{}`` when it is absent, unreadable, not JSON or not an object
    (a damaged cache is one that was never written). Never raises."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def write_cache_file(path: Path, text: str) -> bool:
    """Replace the file ``path`` by ``text`` (UTF-8) in one step: a temporary file beside it (named after this
    process), then ``os.replace``, so a reader sees the old file or the new one, never half of one. The folder is
    created. Returns ``False``, leaving no temporary file behind, when the file system refuses (``OSError``: no
    permission, the folder is a file, no space; ``ValueError``: a path no file system takes); never raises them."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            tmp.unlink(missing_ok=True)
        return False
    return True
