"""Transcript importers, auto-detected (see :mod:`latch.importers.base` for the contract).

Parse-only: nothing here touches the store, the kernel or the plugin manager. :func:`parse_file`
reads a file, picks the importer (``format=`` or the highest ``sniff`` score) and parses it
completely. Appending to the store is the host's job: :func:`latch.host.ingest.import_file`
appends the session in one transaction; this package never imports the store, the kernel or the host.
Errors raise :class:`TranscriptError` and leave the store unchanged.

Agents append to their transcripts, and importing a grown file again appends
only its new events to the same session: the store then holds exactly what one
import of the grown file holds. Three things make that hold. The identity
(``external_key``) of a growing format never changes as the file grows (the
transcript's session id, or a hash of its first line). ``source_ref`` s are
line-based. Only the events the transcript has settled are stored
(``ParsedSession.settled``): a response still being written, a call still
running and an Aider turn still printing wait for the next import. A re-import
whose settled events disagree with the ones stored earlier (the file was edited,
or it is another transcript with the same identity) is a ``TranscriptError``.
"""

from __future__ import annotations

import importlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

from ..lazyre import lazy_compile
from .base import Importer, JSONNestingError, ParsedSession, SessionForgotten, TranscriptError

__all__ = [
    "Importer",
    "ParsedSession",
    "TranscriptError",
    "SessionForgotten",
    "builtin_importers",
    "detect",
    "parse_file",
    "parse_all_file",
]


DEFAULT_MAX_TRANSCRIPT_BYTES = 2 << 30
_T = TypeVar("_T")


def transcript_limit_problem() -> str | None:
    """Why ``LATCH_MAX_TRANSCRIPT_BYTES`` cannot be used (one line naming the variable and its value), or ``None``
    when it is unset, empty or a positive whole number of bytes. Importing never fails on it: the CLI says this line."""
    raw = os.environ.get("LATCH_MAX_TRANSCRIPT_BYTES")
    if raw is None or not raw.strip() or (raw.strip().isdigit() and int(raw.strip()) > 0):
        return None
    return (
        f"LATCH_MAX_TRANSCRIPT_BYTES={raw!r}: not a positive whole number of bytes (unset it for the default "
        f"of {DEFAULT_MAX_TRANSCRIPT_BYTES:,})"
    )


def _max_transcript_bytes() -> int:
    raw = os.environ.get("LATCH_MAX_TRANSCRIPT_BYTES", "").strip()
    return int(raw) if transcript_limit_problem() is None and raw else DEFAULT_MAX_TRANSCRIPT_BYTES


MAX_TRANSCRIPT_BYTES = _max_transcript_bytes()
"""Largest transcript file read (bytes): 2 GiB, ``LATCH_MAX_TRANSCRIPT_BYTES`` overrides it. The corpus's largest
file is 2.9 MB; the cap keeps a runaway file from exhausting memory before the parser can say anything."""


def builtin_importers() -> list[type[Importer]]:
    """The importer classes shipped with Latch (registered as plugins by default_plugins)."""
    found: list[type[Importer]] = []
    for mod in (
        "claude_code",
        "codex",
        "openai_chat",
        "anthropic",
        "swe_agent",
        "mini_swe_agent",
        "openhands",
        "aider",
        "gemini_cli",
        "copilot_cli",
        "goose",
        "opencode",
        "cline",
        "antigravity",
        "merged_messages",
    ):
        try:
            m = importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{mod}":
                continue
            raise
        found.extend(getattr(m, "IMPORTERS", ()))
    return found


def _available(importers: list[type[Importer]] | None) -> list[type[Importer]]:
    """``importers``, or the built-in ones when ``None`` (the host passes the registered importers in:
    :func:`latch.host.ingest.parse_file`)."""
    return builtin_importers() if importers is None else importers


def detect(
    path: Path, data: bytes, importers: list[type[Importer]] | None = None, *, resemble: bool = True
) -> Importer:
    """The importer with the highest ``sniff`` score, or when none claims the file (and ``resemble``) the first
    whose :meth:`~Importer.resembles` says the file nearly has its shape (so its error names what is missing).

    Raises :class:`TranscriptError`: ``JSON nested too deeply`` when no importer claims the file and
    a sniffer could not parse it for its nesting (a sniffer hitting that is "not mine"), else
    ``unrecognized transcript format``.
    """
    return _detect(path, data, importers, resemble)[0]


def _detect(
    path: Path, data: bytes, importers: list[type[Importer]] | None, resemble: bool = True
) -> tuple[Importer, bool]:
    """``(importer, resembled)``: :func:`detect`'s importer and whether it was chosen by resemblance (no
    importer's ``sniff`` claimed the file)."""
    best: tuple[int, Importer] | None = None
    too_deep = False
    head = data[:SNIFF_BYTES]
    for cls in _available(importers):
        imp = cls()
        try:
            score = imp.sniff(path, head)
        except (JSONNestingError, RecursionError):
            too_deep = True
            continue
        if score > 0 and (best is None or score > best[0]):
            best = (score, imp)
    if best is not None:
        return best[1], False
    near = _resembling(path, head, importers) if resemble else []
    if near:
        return near[0], True
    if too_deep:
        raise TranscriptError(path, None, "JSON nested too deeply")
    names = ", ".join(sorted(c.PLUGIN_NAME for c in _available(importers)))
    raise TranscriptError(path, None, f"unrecognized transcript format (known: {names}); pass --format")


def _resembling(path: Path, head: bytes, importers: list[type[Importer]] | None) -> list[Importer]:
    """The importers whose :meth:`~Importer.resembles` accepts ``head``, in registration order."""
    found = []
    for cls in _available(importers):
        imp = cls()
        try:
            if imp.resembles(path, head):
                found.append(imp)
        except (JSONNestingError, RecursionError):
            continue
    return found


def parse_file(
    path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None, *, live: bool = False
) -> ParsedSession:
    """Parse ``path`` without touching any store; ``live=True`` when the file is still being written
    (:attr:`Importer.live`: a half-written last JSONL line is open tail, no conversation yet is no events).
    For a container of several sessions (a Goose or OpenCode database, an Aider history: one per
    aider run) this is the importer's ``parse``:
    one of them (see :func:`parse_all_file` for every one).

    Raises :class:`TranscriptError` (``FILE: cannot read: REASON``, ``FILE: file is empty`` for a file
    of only whitespace, whatever the format, an unknown or undetectable format, or the importer's
    own error). An auto-detected file the claiming importer cannot read, but whose shape another format
    resembles (:meth:`Importer.resembles`), is read as that format: its result, or its error with
    ``(read as FORMAT: the file nearly has that format's shape)``. A ``--format X`` an error suggests
    always reads the file: a suggestion that would fail too is left out.
    """
    return _read(path, format, importers, live, lambda imp, p, data: imp.parse(p, data))


def parse_all_file(
    path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None, *, live: bool = False
) -> list[ParsedSession]:
    """Every session of ``path`` (:meth:`Importer.parse_all`): one for most formats, one per session of a
    container. Raises :class:`TranscriptError` like :func:`parse_file`."""
    return _read(path, format, importers, live, lambda imp, p, data: imp.parse_all(p, data))


def _read(
    path: str | Path,
    format: str | None,
    importers: list[type[Importer]] | None,
    live: bool,
    read: Callable[[Importer, Path, bytes], _T],
) -> _T:
    """``read(importer, path, bytes)`` with the importer ``format`` names or detection picks (see
    :func:`parse_file` for the errors)."""
    p, data, imp, resembled = _prepare(path, format, importers, live)
    try:
        return read(imp, p, data)
    except TranscriptError as exc:
        if type(exc) is not TranscriptError:
            raise
        if format:
            error = _named_format_hint(exc, p, data, format, importers)
        else:
            error = exc
            for other in _resembling(p, data[:SNIFF_BYTES], importers):
                if other.PLUGIN_NAME == imp.PLUGIN_NAME:
                    continue
                other.live = live
                try:
                    return read(other, p, data)
                except TranscriptError as again:
                    if type(again) is not TranscriptError:
                        raise
                    error, resembled, imp = again, True, other
                    break
                except RecursionError:
                    continue
            if resembled:
                error = TranscriptError(
                    error.path,
                    error.location,
                    f"{error.reason} (read as {imp.PLUGIN_NAME}: the file nearly has that format's shape)",
                )
        raise _live_hints(error, p, data, importers, imp.PLUGIN_NAME) from None


_HINT = lazy_compile(r" \(import with --format ([\w.-]+)\)")
"""An importer's suggestion of another format in its error's reason (``content[0] is an Anthropic 'text' block,
not an OpenAI part (import with --format anthropic-messages)``); :func:`_live_hints` checks each."""


def _live_hints(
    exc: TranscriptError, path: Path, data: bytes, importers: list[type[Importer]] | None, failed: str
) -> TranscriptError:
    """``exc`` without the ``(import with --format X)`` suggestions that would fail too (the file does not read as
    ``X``), so following a suggestion never leads to another format's error."""
    classes = {c.PLUGIN_NAME: c for c in _available(importers)}

    def reads(name: str) -> bool:
        if name == failed or name not in classes:
            return False
        try:
            classes[name]().parse_all(path, data)
        except (TranscriptError, RecursionError):
            return False
        return True

    reason = _HINT.sub(lambda m: m.group(0) if reads(m.group(1)) else "", exc.reason)
    return exc if reason == exc.reason else TranscriptError(exc.path, exc.location, reason)


def _named_format_hint(
    exc: TranscriptError, path: Path, data: bytes, format: str | None, importers: list[type[Importer]] | None
) -> TranscriptError:
    """``exc``, or when ``format`` was named and the file sniffs as another format that reads it, the same error
    with that said (``FILE:line 1 column 2: invalid JSON: Expecting value; the file looks like openhands, not
    codex: pass --format openhands or leave --format out``). A format that would fail too is never suggested (the
    hint would lead to another error): the importer's own error stands. Forgotten sessions and other subclasses
    pass as they are."""
    if not format or type(exc) is not TranscriptError:
        return exc
    try:
        other = detect(path, data, importers)
        found = other.PLUGIN_NAME
        if found != format:
            other.parse_all(path, data)
    except (TranscriptError, RecursionError):
        return exc
    if found == format:
        return exc
    return TranscriptError(
        exc.path,
        exc.location,
        f"{exc.reason}; the file looks like {found}, not {format}: pass --format {found} or leave --format out",
    )


SNIFF_BYTES = 65536
"""The prefix of a file :func:`detect` gives the importers' ``sniff`` (bytes): a format is recognized, or refused
as unrecognized, from this much, before the whole file is read."""


def _prepare(
    path: str | Path, format: str | None, importers: list[type[Importer]] | None, live: bool
) -> tuple[Path, bytes, Importer, bool]:
    """``(path, bytes, importer, resembled)`` (see :func:`_detect`) for :func:`parse_file` / :func:`parse_all_file`. The emptiness check and
    format detection read a bounded prefix (:data:`SNIFF_BYTES`; a file of blanks is scanned in chunks): the
    whole file is read only once an importer will parse it, so an unrecognized 2 GiB file is refused in
    bounded memory."""
    p = Path(path)
    try:
        st = os.stat(p)
        if stat.S_ISDIR(st.st_mode):
            raise TranscriptError(p, None, "is a folder, not a transcript file")
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block forever, /dev/zero never ends
            raise TranscriptError(p, None, "not a regular file (FIFOs, devices and sockets are not read)")
        if st.st_size > MAX_TRANSCRIPT_BYTES:
            raise TranscriptError(
                p,
                None,
                f"file is {st.st_size:,} bytes, over the {MAX_TRANSCRIPT_BYTES:,}-byte "
                "limit (LATCH_MAX_TRANSCRIPT_BYTES raises it)",
            )
        with open(p, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
            if not _decoded_text(head).strip() and not _rest_has_text(fh, head):
                raise TranscriptError(p, None, "file is empty")
    except OSError as exc:
        raise TranscriptError(p, None, f"cannot read: {exc.strerror or exc}") from None
    if format:
        classes = {c.PLUGIN_NAME: c for c in _available(importers)}
        if format not in classes:
            raise TranscriptError(p, None, f"unknown format {format!r} (known: {', '.join(sorted(classes))})")
        imp, resembled = classes[format](), False
    else:
        imp, resembled = _detect(p, head, importers)
    try:
        data = p.read_bytes() if len(head) == SNIFF_BYTES else head
    except OSError as exc:
        raise TranscriptError(p, None, f"cannot read: {exc.strerror or exc}") from None
    imp.live = live
    return p, data, imp, resembled


def _rest_has_text(fh: BinaryIO, head: bytes) -> bool:
    """Whether the rest of the open file ``fh`` (after ``head``, which decoded to blanks) holds anything but
    blanks, read in :data:`SNIFF_BYTES` chunks (memory stays bounded). UTF-16 (by its BOM) is decoded as such."""
    utf16 = head.startswith((b"\xff\xfe", b"\xfe\xff"))
    carry = b""
    while True:
        chunk = fh.read(SNIFF_BYTES)
        if not chunk:
            return False
        chunk, carry = carry + chunk, b""
        if utf16 and len(chunk) % 2:
            chunk, carry = chunk[:-1], chunk[-1:]
        text = (
            chunk.decode("utf-16-le" if head.startswith(b"\xff\xfe") else "utf-16-be", "replace")
            if utf16
            else chunk.decode("utf-8", "ignore")
        )
        if text.strip():
            return True


def _decoded_text(data: bytes) -> str:
    """Best-effort text of ``data`` (BOMs and UTF-16 understood) for the emptiness check."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    return data.decode("utf-8", "replace")
