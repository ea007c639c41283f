"""File state: bounded reads with observations, and guarded writes (spec: "File state and compaction").

* :func:`read_file` returns one bounded :class:`Page` of a file and appends a
  :class:`~latch.kernel.events.FileObservation`: SHA-256 and size of the whole
  file when it is at most :data:`HASH_LIMIT_BYTES` (64 KiB); larger files are
  read in pages with no whole-file hash, and only the requested page's bytes are
  read (memory stays bounded whatever the file's size).
* :func:`read_artifact` pages a stored artifact the same way.
* :func:`current_bytes` is the bytes of a file now (no event).
* :func:`guarded_write` re-hashes the bytes on disk just before writing: a
  mismatch with the hash the model last saw appends an
  :class:`~latch.kernel.events.ExternalChange` and raises :class:`StaleFileError`
  (the model must re-read); identical bytes are no change (no event, generation
  unchanged); otherwise a :class:`~latch.kernel.events.Mutation` is committed
  *before* the bytes are written, so a crash can only over-count a change.

Every path is resolved once (symlinks followed) and must lie in the session's workspace (``PermissionError``
otherwise). The file is then reached from the workspace root through directory file descriptors, one component
at a time with ``O_NOFOLLOW`` (``openat``), and written by a rename inside the directory already opened: a
symlink swapped into the path after it was resolved is refused (``OSError`` ELOOP), never followed out of the
workspace. Only regular files are read: a FIFO, a device or a socket is refused (``OSError``), never waited on.

A page's ``content`` (what the ToolResult carries) is at most
:data:`PAGE_LIMIT_BYTES` (24 KiB of UTF-8) and :data:`PAGE_LIMIT_TOKENS` (8,000
estimated tokens), whatever the line count; the rest is reachable with
``offset=page.next_offset``.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import hotpaths
from ..records import dataclass
from .events import ExternalChange, FileObservation, Mutation

if TYPE_CHECKING:
    from ..store import EventLog

__all__ = [
    "HASH_LIMIT_BYTES",
    "PAGE_LIMIT_BYTES",
    "PAGE_LIMIT_TOKENS",
    "Page",
    "WriteResult",
    "StaleFileError",
    "bounded_page",
    "read_file",
    "read_artifact",
    "guarded_write",
    "current_bytes",
]

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

    def __reduce__(self) -> tuple[Any, ...]:
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


def bounded_page(
    data: bytes,
    offset: int = 0,
    estimate: Callable[[str], int] | None = None,
    *,
    label: str = "file",
    limit_tokens: int = PAGE_LIMIT_TOKENS,
) -> tuple[str, int | None, int]:
    """``(content, next_offset, tokens)`` of the largest page of ``data`` from byte ``offset`` within
    :data:`PAGE_LIMIT_BYTES` bytes and ``limit_tokens`` tokens (at most :data:`PAGE_LIMIT_TOKENS`).

    Invalid UTF-8 is replaced (U+FFFD). ``ValueError`` for an offset outside the data.
    """
    if not 0 <= offset <= len(data):
        raise ValueError(f"offset {offset} is outside the {label} ({len(data)} bytes)")
    return _window_page(data[offset : offset + PAGE_LIMIT_BYTES + 1], offset, len(data), estimate, label, limit_tokens)


def _window_page(
    window: bytes, offset: int, total: int, estimate: Callable[[str], int] | None, label: str, limit_tokens: int
) -> tuple[str, int | None, int]:
    """:func:`bounded_page` of a ``total``-byte whole of which ``window`` holds the bytes from ``offset`` (at
    least the next :data:`PAGE_LIMIT_BYTES` + 1, or up to the end)."""
    limit_tokens = max(1, min(limit_tokens, PAGE_LIMIT_TOKENS))
    estimate = estimate or _default_estimate()
    data = memoryview(window)

    def page(end: int) -> str:
        body = bytes(data[: end - offset]).decode("utf-8", "replace")
        if end < total:
            body += f"\n[… {total - end} more bytes of this {label}; continue with offset={end}]"
        return body

    def fits(end: int) -> bool:
        text = page(end)
        return len(text.encode("utf-8")) <= PAGE_LIMIT_BYTES and estimate(text) <= limit_tokens

    hi = min(total, offset + PAGE_LIMIT_BYTES, offset + len(window))
    if not fits(hi):
        lo = offset  # page(offset) is a continuation note only, which always fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        while hi > offset + 1 and hi < total and hi - offset < len(window) and 0x80 <= data[hi - offset] < 0xC0:
            hi -= 1  # never split a UTF-8 sequence
    text = page(hi)
    return text, (hi if hi < total else None), estimate(text)


def _resolve(store: EventLog, session_id: str, path: str | os.PathLike[str]) -> tuple[Path, str]:
    """``(root, rel)``: the session's workspace (resolved) and ``path`` resolved once, relative to it (POSIX).
    ``PermissionError`` when the resolved path is not inside the workspace."""
    info = store.session(session_id)
    root = Path(os.path.realpath(info.workspace if info.workspace else os.getcwd()))
    p = Path(path)
    try:
        absolute = Path(os.path.realpath(p if p.is_absolute() else root / p))
    except OSError as exc:  # a link changed while it was being resolved
        raise OSError(errno.ELOOP, f"{path}: changed while its symlinks were being resolved (refused)") from exc
    try:
        rel = absolute.relative_to(root).as_posix()
    except ValueError:
        raise PermissionError(errno.EACCES, f"{path}: outside the workspace {root} (refused)") from None
    if rel == ".":
        raise IsADirectoryError(errno.EISDIR, f"{path}: is the workspace folder")
    return root, rel


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SWAPPED = "a symlink appeared in the path after it was resolved (refused: it could lead outside the workspace)"


def _refuse_symlink(exc: OSError, dir_fd: int, name: str) -> None:
    """Raise ``OSError`` ELOOP (a symlink swapped in) when ``name`` in ``dir_fd`` is a symlink that ``exc``
    (ELOOP, or ENOTDIR from ``O_DIRECTORY``) refused to follow; return otherwise."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
        return
    try:
        link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        link = exc.errno == errno.ELOOP
    if link:
        raise OSError(errno.ELOOP, _SWAPPED) from None


def _open_dir(root: Path, parts: list[str], *, create: bool = False) -> int:
    """A file descriptor of folder ``root/parts...``, reached one component at a time without following a
    symlink (``create``: missing folders are made, mode 0777 less the umask). ``FileNotFoundError`` when a
    folder is missing, ``OSError`` ELOOP when a component is a symlink."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts:
            if create:
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                _refuse_symlink(exc, fd, name)
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_at(dir_fd: int, name: str) -> tuple[bytes, int]:
    """``(bytes, mode)`` of regular file ``name`` in folder ``dir_fd``, opened without following a symlink and
    without blocking (``FileNotFoundError``; ``OSError`` for a symlink, a FIFO, a device, a socket)."""
    with _open_at(dir_fd, name) as fh:
        return fh.read(), os.fstat(fh.fileno()).st_mode


def _open_at(dir_fd: int, name: str) -> io.BufferedReader:
    """Regular file ``name`` in folder ``dir_fd`` opened for binary reading, as :func:`_read_at` opens it."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        _refuse_symlink(exc, dir_fd, name)
        raise
    fh = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket is never read)")
    except BaseException:
        fh.close()
        raise
    return fh


def _read(root: Path, rel: str) -> tuple[bytes, int]:
    *folders, name = rel.split("/")
    dir_fd = _open_dir(root, folders)
    try:
        return _read_at(dir_fd, name)
    finally:
        os.close(dir_fd)


def _read_window(root: Path, rel: str, offset: int) -> tuple[bytes, int, str | None]:
    """``(window, size, sha256)`` of file ``rel``: the bytes from ``offset`` that a page can hold
    (:data:`PAGE_LIMIT_BYTES` and one more, to see where a UTF-8 sequence ends), the file's size, and the SHA-256
    of the whole file when it is at most :data:`HASH_LIMIT_BYTES` (else ``None``). Reads at most
    ``max(HASH_LIMIT_BYTES, PAGE_LIMIT_BYTES + 1)`` bytes, whatever the file's size (a 2 GiB file pages in bounded
    memory). ``ValueError`` for an offset outside the file."""
    *folders, name = rel.split("/")
    dir_fd = _open_dir(root, folders)
    try:
        with _open_at(dir_fd, name) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size <= HASH_LIMIT_BYTES:  # small: read whole (and hash) as before; the size is what was read
                data = fh.read(HASH_LIMIT_BYTES + 1)
                if len(data) <= HASH_LIMIT_BYTES:
                    if not 0 <= offset <= len(data):
                        raise ValueError(f"offset {offset} is outside the file ({len(data)} bytes)")
                    return data[offset : offset + PAGE_LIMIT_BYTES + 1], len(data), _sha(data)
                size = max(size, os.fstat(fh.fileno()).st_size)  # it grew while read: page it
            if not 0 <= offset <= size:
                raise ValueError(f"offset {offset} is outside the file ({size} bytes)")
            fh.seek(offset)
            return fh.read(PAGE_LIMIT_BYTES + 1), size, None
    finally:
        os.close(dir_fd)


def current_bytes(store: EventLog, session_id: str, path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path`` (in the session's workspace) now, read as :func:`read_file` reads (no event).

    Raises ``FileNotFoundError``, ``PermissionError`` (outside the workspace), ``OSError`` (a symlink swapped in,
    not a regular file)."""
    root, rel = _resolve(store, session_id, path)
    return _read(root, rel)[0]


def _umask() -> int:
    """The process's file-creation mask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file(
    store: EventLog,
    session_id: str,
    path: str | os.PathLike[str],
    *,
    offset: int = 0,
    estimate: Callable[[str], int] | None = None,
    limit_tokens: int = PAGE_LIMIT_TOKENS,
) -> Page:
    """Read one bounded page of ``path`` (relative to the session's workspace; at most ``limit_tokens`` tokens,
    :func:`bounded_page`) and record the observation.

    Raises ``OSError`` when the file cannot be read, ``ValueError`` for a bad offset.
    """
    root, rel = _resolve(store, session_id, path)
    window, size, sha = _read_window(root, rel, offset)
    content, next_offset, tokens = _window_page(window, offset, size, estimate, "file", limit_tokens)
    length = (next_offset if next_offset is not None else size) - offset
    store.append(
        store.session(session_id).id, [FileObservation(path=rel, sha256=sha, size=size, offset=offset, length=length)]
    )
    return Page(content, offset, next_offset, size, sha, tokens)


def read_artifact(
    store: EventLog,
    sha256: str,
    *,
    offset: int = 0,
    estimate: Callable[[str], int] | None = None,
    limit_tokens: int = PAGE_LIMIT_TOKENS,
) -> Page:
    """One bounded page of a stored artifact from byte ``offset`` (as :func:`bounded_page`, at most
    ``limit_tokens`` tokens). ``KeyError`` when unknown, ``ValueError`` for an offset outside it."""
    _, data = store.get_artifact(sha256)
    content, next_offset, tokens = bounded_page(data, offset, estimate, label="artifact", limit_tokens=limit_tokens)
    return Page(content, offset, next_offset, len(data), sha256, tokens)


def guarded_write(
    store: EventLog, session_id: str, path: str | os.PathLike[str], new_bytes: bytes, expected_sha256: str | None
) -> WriteResult:
    """Write ``new_bytes`` to ``path`` only if its current bytes hash to ``expected_sha256``.

    ``expected_sha256=None`` means the file must not exist yet. On mismatch an
    ExternalChange is appended and :class:`StaleFileError` raised (file
    untouched). Identical bytes: nothing is written or appended. Otherwise the
    Mutation is appended, then the bytes are written atomically (temp file + rename).
    """
    root, rel = _resolve(store, session_id, path)
    sid = store.session(session_id).id
    *folders, name = rel.split("/")
    try:
        dir_fd: int | None = _open_dir(root, folders)
    except FileNotFoundError:
        dir_fd = None
    try:
        current: bytes | None = None
        mode = 0o666 & ~_umask()  # a new file gets the mode any program's new file gets
        if dir_fd is not None:
            try:
                current, mode = _read_at(dir_fd, name)
            except FileNotFoundError:
                pass
        actual = _sha(current) if current is not None else None
        if actual != expected_sha256:
            store.append(sid, [ExternalChange(path=rel, expected_sha256=expected_sha256, actual_sha256=actual)])
            raise StaleFileError(rel, expected_sha256, actual)
        after = _sha(new_bytes)
        if current == new_bytes:
            return WriteResult(rel, False, actual, after, None)
        (seq,) = store.append(
            sid, [Mutation(paths=(rel,), tool="guarded_write", sha256_before=actual, sha256_after=after)]
        )
        if dir_fd is None:
            dir_fd = _open_dir(root, folders, create=True)
        _replace_at(dir_fd, name, new_bytes, stat.S_IMODE(mode))
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    return WriteResult(rel, True, actual, after, seq)


def _replace_at(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """Write ``data`` to ``name`` in folder ``dir_fd`` atomically: a new temporary file in the same folder
    (``O_EXCL | O_NOFOLLOW``), then a rename within that folder (a symlink at ``name`` is replaced, not
    followed)."""
    tmp = f".{name}.{secrets.token_hex(4)}.latch"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
