"""File state: bounded reads with observations, and guarded writes (spec: "File state and compaction").

* :func:`read_file` returns one bounded :class:`Page` of a file and appends a
  :class:`~latch.kernel.events.FileObservation`: SHA-256 and size of the whole
  file when it is at most :data:`HASH_LIMIT_BYTES` (64 KiB); larger files are
  read in pages with no whole-file hash.
* :func:`read_artifact` pages a stored artifact the same way.
* :func:`guarded_write` re-hashes the bytes on disk just before writing: a
  mismatch with the hash the model last saw appends an
  :class:`~latch.kernel.events.ExternalChange` and raises :class:`StaleFileError`
  (the model must re-read); identical bytes are no change (no event, generation
  unchanged); otherwise a :class:`~latch.kernel.events.Mutation` is committed
  *before* the bytes are written, so a crash can only over-count a change.

A page's ``content`` (what the ToolResult carries) is at most
:data:`PAGE_LIMIT_BYTES` (24 KiB of UTF-8) and :data:`PAGE_LIMIT_TOKENS` (8,000
estimated tokens), whatever the line count; the rest is reachable with
``offset=page.next_offset``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import hotpaths
from .events import ExternalChange, FileObservation, Mutation

__all__ = ["HASH_LIMIT_BYTES", "PAGE_LIMIT_BYTES", "PAGE_LIMIT_TOKENS", "Page", "WriteResult", "StaleFileError",
           "bounded_page", "read_file", "read_artifact", "guarded_write"]

HASH_LIMIT_BYTES = 64 * 1024
PAGE_LIMIT_BYTES = 24 * 1024
PAGE_LIMIT_TOKENS = 8000


class StaleFileError(Exception):
    """The file on disk is not the one the model last read (an external change); re-read it."""

    def __init__(self, path: str, expected: str | None, actual: str | None):
        self.path, self.expected, self.actual = path, expected, actual
        now = f"now sha256 {actual[:12]}" if actual else "now missing"
        was = f"sha256 {expected[:12]}" if expected else "absent"
        super().__init__(f"{path}: changed outside the agent (expected {was}, {now}); re-read it before editing")

    def __reduce__(self):
        return type(self), (self.path, self.expected, self.actual), self.__dict__


@dataclass(frozen=True, slots=True)
class Page:
    """One bounded page: ``content`` (text, with a continuation note when more remains),
    its byte ``offset``, ``next_offset`` (``None`` at the end), ``total_bytes``,
    ``sha256`` of the whole source when hashed, and its estimated ``tokens``."""

    content: str
    offset: int
    next_offset: int | None
    total_bytes: int
    sha256: str | None
    tokens: int


@dataclass(frozen=True, slots=True)
class WriteResult:
    """Outcome of :func:`guarded_write`: ``changed`` is False for identical bytes; ``seq`` of the Mutation."""

    path: str
    changed: bool
    sha256_before: str | None
    sha256_after: str
    seq: int | None


def _default_estimate() -> Callable[[str], int]:
    return hotpaths.estimate_tokens


def bounded_page(data: bytes, offset: int = 0, estimate: Callable[[str], int] | None = None,
                 *, label: str = "file", limit_tokens: int = PAGE_LIMIT_TOKENS) -> tuple[str, int | None, int]:
    """``(content, next_offset, tokens)`` of the largest page of ``data`` from byte ``offset`` within
    :data:`PAGE_LIMIT_BYTES` bytes and ``limit_tokens`` tokens (at most :data:`PAGE_LIMIT_TOKENS`).

    Invalid UTF-8 is replaced (U+FFFD). ``ValueError`` for an offset outside the data.
    """
    limit_tokens = max(1, min(limit_tokens, PAGE_LIMIT_TOKENS))
    if not 0 <= offset <= len(data):
        raise ValueError(f"offset {offset} is outside the {label} ({len(data)} bytes)")
    estimate = estimate or _default_estimate()

    def page(end: int) -> str:
        body = data[offset:end].decode("utf-8", "replace")
        if end < len(data):
            body += f"\n[… {len(data) - end} more bytes of this {label}; continue with offset={end}]"
        return body

    def fits(end: int) -> bool:
        text = page(end)
        return len(text.encode("utf-8")) <= PAGE_LIMIT_BYTES and estimate(text) <= limit_tokens

    hi = min(len(data), offset + PAGE_LIMIT_BYTES)
    if not fits(hi):
        lo = offset  # page(offset) is a continuation note only, which always fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        while hi > offset + 1 and hi < len(data) and 0x80 <= data[hi] < 0xC0:
            hi -= 1  # never split a UTF-8 sequence
    text = page(hi)
    return text, (hi if hi < len(data) else None), estimate(text)


def _resolve(store, session_id: str, path: str | os.PathLike[str]) -> tuple[Path, str]:
    info = store.session(session_id)
    base = Path(info.workspace) if info.workspace else Path.cwd()
    p = Path(path)
    absolute = (p if p.is_absolute() else base / p).resolve()
    try:
        rel = absolute.relative_to(base.resolve()).as_posix()
    except ValueError:
        rel = absolute.as_posix()
    return absolute, rel


def _umask() -> int:
    """The process's file-creation mask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file(store, session_id: str, path: str | os.PathLike[str], *, offset: int = 0,
              estimate: Callable[[str], int] | None = None, limit_tokens: int = PAGE_LIMIT_TOKENS) -> Page:
    """Read one bounded page of ``path`` (relative to the session's workspace; at most ``limit_tokens`` tokens,
    :func:`bounded_page`) and record the observation.

    Raises ``OSError`` when the file cannot be read, ``ValueError`` for a bad offset.
    """
    absolute, rel = _resolve(store, session_id, path)
    data = absolute.read_bytes()
    sha = _sha(data) if len(data) <= HASH_LIMIT_BYTES else None
    content, next_offset, tokens = bounded_page(data, offset, estimate, label="file", limit_tokens=limit_tokens)
    length = (next_offset if next_offset is not None else len(data)) - offset
    store.append(store.session(session_id).id,
                 [FileObservation(path=rel, sha256=sha, size=len(data), offset=offset, length=length)])
    return Page(content, offset, next_offset, len(data), sha, tokens)


def read_artifact(store, sha256: str, *, offset: int = 0, estimate: Callable[[str], int] | None = None,
                  limit_tokens: int = PAGE_LIMIT_TOKENS) -> Page:
    """One bounded page of a stored artifact from byte ``offset`` (as :func:`bounded_page`, at most
    ``limit_tokens`` tokens). ``KeyError`` when unknown, ``ValueError`` for an offset outside it."""
    _, data = store.get_artifact(sha256)
    content, next_offset, tokens = bounded_page(data, offset, estimate, label="artifact", limit_tokens=limit_tokens)
    return Page(content, offset, next_offset, len(data), sha256, tokens)


def guarded_write(store, session_id: str, path: str | os.PathLike[str], new_bytes: bytes,
                  expected_sha256: str | None) -> WriteResult:
    """Write ``new_bytes`` to ``path`` only if its current bytes hash to ``expected_sha256``.

    ``expected_sha256=None`` means the file must not exist yet. On mismatch an
    ExternalChange is appended and :class:`StaleFileError` raised (file
    untouched). Identical bytes: nothing is written or appended. Otherwise the
    Mutation is appended, then the bytes are written atomically (temp file + rename).
    """
    absolute, rel = _resolve(store, session_id, path)
    sid = store.session(session_id).id
    try:
        current: bytes | None = absolute.read_bytes()
    except FileNotFoundError:
        current = None
    actual = _sha(current) if current is not None else None
    if actual != expected_sha256:
        store.append(sid, [ExternalChange(path=rel, expected_sha256=expected_sha256, actual_sha256=actual)])
        raise StaleFileError(rel, expected_sha256, actual)
    after = _sha(new_bytes)
    if current == new_bytes:
        return WriteResult(rel, False, actual, after, None)
    (seq,) = store.append(sid, [Mutation(paths=(rel,), tool="guarded_write", sha256_before=actual,
                                         sha256_after=after)])
    absolute.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=absolute.parent, prefix=f".{absolute.name}.", suffix=".latch")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(new_bytes)
        if current is not None:
            os.chmod(tmp, absolute.stat().st_mode & 0o7777)
        else:  # a new file gets the mode any program's new file gets (mkstemp's is 0600)
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, absolute)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return WriteResult(rel, True, actual, after, seq)
