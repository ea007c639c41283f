"""Regular expressions compiled at their first use, not when their module is imported.

A module-level ``re.compile`` costs every process that imports the module (tens of microseconds to a millisecond a
pattern), whether or not it ever matches: ``latch replay`` imports about eighty patterns and uses a handful.
:func:`lazy_compile` returns a stand-in that compiles on the first attribute asked (``search``, ``match``, ``sub``,
``pattern``, ...); from then on those attributes are the compiled pattern's own (bound methods and values kept on
the stand-in), so a match costs what it costs on a compiled pattern. What it returns is typed as
:class:`re.Pattern`; it is not one for ``isinstance`` or for ``re.search(pattern, ...)``, so pass it only where its
methods are called.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

__all__ = ["compile_pending", "lazy_compile", "pending"]

_KEPT = (
    "search",
    "match",
    "fullmatch",
    "finditer",
    "findall",
    "sub",
    "subn",
    "split",
    "scanner",
    "pattern",
    "flags",
    "groups",
    "groupindex",
)


class _LazyPattern:
    __slots__ = ("_source", *_KEPT)

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for what is not kept yet: before the first use
        compiled = re.compile(*self._source)
        for kept in _KEPT:
            object.__setattr__(self, kept, getattr(compiled, kept))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._source[0]!r}, {self._source[1]!r})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done when the pattern is first used (raises :class:`re.error` then, not
    here, for a bad pattern)."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))


def _is_pending(value: object) -> bool:
    if not isinstance(value, _LazyPattern):
        return False
    try:
        object.__getattribute__(value, "search")  # kept once compiled
    except AttributeError:
        return True
    return False


def pending(namespace: Mapping[str, object]) -> list[str]:
    """The names in ``namespace`` (a module's ``vars``) bound to a :func:`lazy_compile` pattern not compiled yet."""
    return [name for name, value in list(namespace.items()) if _is_pending(value)]


def compile_pending(namespace: Mapping[str, object]) -> int:
    """Compile now each :func:`lazy_compile` pattern of ``namespace`` (a module's ``vars``) not compiled yet, as its
    first use would (raises :class:`re.error` for a bad pattern). Returns how many were compiled."""
    names = pending(namespace)
    for name in names:
        getattr(namespace[name], "pattern")  # noqa: B009 - the first lookup compiles it
    return len(names)
