"""The code of dataclass methods, compiled once and kept between CLI processes.

:mod:`dataclasses` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and (frozen)
``__setattr__`` / ``__delattr__`` as Python source and compiles it when the class is defined: about a millisecond a
class, every time a process imports it (``.pyc`` files keep a module's own code, not these). The ``latch`` command
calls :func:`use_class_code_cache` before it imports the rest of Latch: the source :mod:`dataclasses` compiles is
then looked up in a file (``cache/dataclass-code-<cache tag>.marshal`` under the Latch data folder,
:func:`default_cache_path`) and compiled only when it is not there. The key is the source text itself, so a class
whose fields change gets its new code, and the file holds the interpreter's magic number, so another Python never
reads it. What a process compiled is added to the file at exit (at most :data:`CLASS_CODE_ENTRIES` sources, the
newest). A file that cannot be read or written is ignored: the methods are then compiled as without it.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["CLASS_CODE_ENTRIES", "default_cache_path", "use_class_code_cache", "save_class_code_cache"]

CLASS_CODE_ENTRIES = 3_000
"""The most sources :func:`use_class_code_cache`'s file keeps (the oldest go first): about 3 MB, read in about 10 ms
(a replay's classes: about 530)."""

_MAGIC = importlib.util.MAGIC_NUMBER
_cache_file: Path | None = None
_codes: dict[str, CodeType] = {}
_fresh: dict[str, CodeType] = {}  # compiled by this process, not in the file yet
_exit_hook = False


def default_cache_path() -> Path:
    """``cache/dataclass-code-<cache tag>.marshal`` under the Latch data folder (``$LATCH_HOME``, else
    platformdirs' user data folder: :func:`latch.store.data_dir`, which this module cannot import before the
    classes it serves)."""
    home = os.environ.get("LATCH_HOME")
    if home:
        root = Path(home).expanduser()
    else:
        import platformdirs

        root = Path(platformdirs.user_data_dir("latch", appauthor=False))
    return root / "cache" / f"dataclass-code-{sys.implementation.cache_tag}.marshal"


def _read(path: Path) -> dict[str, CodeType]:
    try:
        data = path.read_bytes()
    except (OSError, ValueError):
        return {}
    if data[: len(_MAGIC)] != _MAGIC:
        return {}
    try:
        table = marshal.loads(data[len(_MAGIC) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    """:func:`exec` for :mod:`dataclasses`: a source string's code comes from the cache, else it is compiled (as
    ``exec`` compiles it: file name ``<string>``) and remembered."""
    if type(source) is str:
        code = _codes.get(source)
        if code is None:
            code = compile(source, "<string>", "exec")
            _codes[source] = _fresh[source] = code
        source = code
    builtins.exec(source, globals, locals)


def use_class_code_cache(path: str | os.PathLike[str] | None) -> None:
    """Compile the methods of the dataclasses defined from now on through the file ``path`` (``None``: compile
    them as :mod:`dataclasses` does, the default). Affects every dataclass of the process; the methods are the
    same either way (the same source gives the same code)."""
    global _cache_file, _exit_hook
    _cache_file = Path(path) if path is not None else None
    _codes.clear()
    _fresh.clear()
    if _cache_file is None:
        if getattr(dataclasses, "exec", None) is _exec:
            del dataclasses.exec  # type: ignore[attr-defined]
        return
    _codes.update(_read(_cache_file))
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    if not _exit_hook:
        atexit.register(save_class_code_cache)
        _exit_hook = True


def save_class_code_cache() -> None:
    """Add what this process compiled to the :func:`use_class_code_cache` file (merged with the file as it is now;
    at most :data:`CLASS_CODE_ENTRIES` sources, the newest; its folder is created). Nothing without a file or
    without anything new; never raises for a file system error."""
    if _cache_file is None or not _fresh:
        return
    table = _read(_cache_file)
    for source in _fresh:
        table.pop(source, None)
    table.update(_fresh)
    if len(table) > CLASS_CODE_ENTRIES:
        table = dict(list(table.items())[-CLASS_CODE_ENTRIES:])
    tmp = _cache_file.with_name(f"{_cache_file.name}.{os.getpid()}.tmp")
    try:
        _cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_MAGIC + marshal.dumps(table))
        os.replace(tmp, _cache_file)  # a reader sees the old file or the new one, never half of one
    except (OSError, ValueError):  # a folder that cannot be written (or a path no file system takes)
        with contextlib.suppress(OSError, ValueError):
            tmp.unlink(missing_ok=True)
        return
    _fresh.clear()
