"""Exact token counts of texts, kept between processes (the CLI's ``cache/token-counts.json``).

An exact estimator (``EXACT`` and a ``TOKENIZER`` name, :class:`latch.engine.units.TokenCounter`) counts the
same texts again in every process: the system prompt, the tool schemas, the canonical state block and the other
messages that are not one event's rendering (those have the store's per-event counts,
:class:`latch.port.TokenCountCache`). Loading the tokenizer's vocabulary alone takes about 0.3 s (o200k), so a
command that replays what it replayed before should not need it. With :func:`use_count_cache` (the CLI passes
``cache/token-counts.json`` under the Latch data folder), :func:`cached_counter` looks each text up by
``TOKENIZER`` and a digest of its UTF-8 bytes (BLAKE2b, 128 bits) and counts only what is missing; the file is
written at exit (:func:`save_count_cache`), merged with what other processes wrote meanwhile, at most
:data:`COUNT_CACHE_ENTRIES` counts (the newest). A file that cannot be read or written is ignored. Without
:func:`use_count_cache` (the default, e.g. a library host) nothing is kept and the counter is the estimator's.
``latch bench`` passes its file to each job process (:func:`counts_kept_in` around the job, saved at its end:
a task process ends without running ``atexit``), so a job whose texts an earlier run counted (about 3,000 of them
for the Codex corpus session's jobs) never loads the vocabulary.

The ``TOKENIZER`` name is the cache's key: an estimator that changes its counts must change its name
(``latch_tiktoken``'s names its long-run rule).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .cache_files import read_cache_file, write_cache_file

__all__ = [
    "COUNT_CACHE_ENTRIES",
    "use_count_cache",
    "count_cache_file",
    "counts_kept_in",
    "cached_counter",
    "save_count_cache",
]

COUNT_CACHE_ENTRIES = 20_000
"""The most counts the file keeps (the oldest go first): about 1.4 MB, read at the first count."""

_file: Path | None = None
_memo: dict[str, int] | None = None
_fresh: dict[str, int] = {}  # counted by this process, not in the file yet
_exit_hook = False


def use_count_cache(path: str | os.PathLike[str] | None) -> None:
    """Keep this process's exact counts in the JSON file ``path`` (``None``: nothing kept, the default)."""
    global _file, _memo, _exit_hook
    _file, _memo = (Path(path) if path is not None else None), None
    if _file is not None and not _exit_hook:
        atexit.register(save_count_cache)
        _exit_hook = True


def count_cache_file() -> Path | None:
    """The file :func:`use_count_cache` set (``None``: nothing kept)."""
    return _file


@contextmanager
def counts_kept_in(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within the block, counts kept in ``path`` (:func:`use_count_cache`; ``None``: nothing kept) and saved to it
    at the block's end (:func:`save_count_cache`), then the file in use before again. The counts this process had
    not saved yet are saved to that earlier file first."""
    before = _file
    save_count_cache()
    use_count_cache(path)
    try:
        yield
    finally:
        save_count_cache()
        use_count_cache(before)


def _read() -> dict[str, int]:
    if _file is None:
        return {}
    counts = read_cache_file(_file).get("counts")
    if not isinstance(counts, dict):
        return {}
    return {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


def _known() -> dict[str, int]:
    global _memo
    if _memo is None:
        _memo = _read()
        _memo.update(_fresh)
    return _memo


def _remember(key: str, tokens: int) -> None:
    for table in (_known(), _fresh):
        table[key] = tokens
        if len(table) > 2 * COUNT_CACHE_ENTRIES:  # a long run: keep the newest, memory stays bounded
            for old in list(table)[:COUNT_CACHE_ENTRIES]:
                del table[old]


def cached_counter(tokenizer: str, count: Callable[[str], int]) -> Callable[[str], int]:
    """``count`` (tokens of a text) through the kept counts of ``tokenizer``; ``count`` itself when no file is
    in use (:func:`use_count_cache`)."""
    if _file is None:
        return count
    prefix = f"{tokenizer}\x00"

    def counted(text: str) -> int:
        key = prefix + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        got = _known().get(key)
        if got is None:
            got = int(count(text))
            _remember(key, got)
        return got

    return counted


def save_count_cache() -> None:
    """Write this process's new counts to the :func:`use_count_cache` file (merged with the file as it is now;
    its folder is created). Nothing without a file or without new counts; never raises for a file system error."""
    if _file is None or not _fresh:
        return
    counts = _read()
    counts.update(_fresh)
    if len(counts) > COUNT_CACHE_ENTRIES:
        counts = dict(list(counts.items())[-COUNT_CACHE_ENTRIES:])
    if write_cache_file(_file, json.dumps({"counts": counts}, separators=(",", ":"))):
        _fresh.clear()
