"""Importer contract: parse a foreign transcript into Latch events, all or nothing.

An importer is a class with ``PLUGIN_NAME`` (its format name), ``DESCRIPTION``,
``sniff(path, head) -> int`` (a confidence 0-100 from the path and the first
64 KiB of bytes) and ``parse(path, data) -> ParsedSession``. A *container*
format (one file holding several sessions: Goose's ``sessions.db``, OpenCode's
SQLite store) also implements ``parse_all(path, data) -> list[ParsedSession]``,
one per session; the default is ``[self.parse(path, data)]``. Parsing never
touches the store: :func:`latch.host.ingest.import_file` appends the whole parsed
session in one transaction, so a malformed file leaves the store unchanged.

Malformed input raises :class:`TranscriptError` naming the file, the line or
record, and the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar

from ..events import JSONNestingError, PendingEvent, _integer_too_long, json_loads
from ..records import dataclass

__all__ = [
    "TranscriptError",
    "ParsedSession",
    "Importer",
    "decode_text",
    "load_json",
    "iter_jsonl",
    "content_key",
    "JSONNestingError",
    "json_loads",
    "json_decode",
]


class TranscriptError(Exception):
    """A transcript cannot be imported. ``str()`` is ``"FILE:LOCATION: REASON"``."""

    def __init__(self, path: str | Path, location: str | None, reason: str):
        self.path = str(path)
        self.location = location
        self.reason = reason
        where = f"{self.path}:{location}" if location else self.path
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[Callable[..., TranscriptError], tuple[str | None, ...], dict[str, Any]]:
        # picklable across process pools (bench workers)
        return type(self), (self.path, self.location, self.reason), self.__dict__


@dataclass
class ParsedSession:
    """A parsed transcript, ready to append.

    ``external_key`` is the import identity (format + the transcript's own
    session id, or a content hash) that makes re-imports idempotent; every
    event's ``source_ref`` is unique within the session. ``stats`` holds the
    importer's counts (messages, tool calls, tool errors, usage totals) over
    all ``events``.

    ``settled`` is how many leading events the transcript has settled: a file
    that agents append to (Claude Code, Codex, Aider) may still change its
    *open tail* ``events[settled:]`` when it grows (a response whose next block
    or usage is not written yet, results after a call still running, an Aider
    turn whose edit results may follow). ``None`` means every event is settled.
    Appending only :attr:`settled_events` makes imports of a growing file
    append-only: importing a prefix and then the grown file stores exactly
    what one import of the grown file stores.
    """

    external_key: str
    format: str
    source: str
    events: list[PendingEvent]
    workspace: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    artifacts: list[tuple[bytes, str, int | None, int | None]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    settled: int | None = None
    parent_key: str | None = None
    """The ``external_key`` of the session that spawned this one (a Claude Code sub-agent file's parent
    session), or ``None``; the host links the two in the store (``SessionInfo.parent_id``)."""

    @property
    def settled_events(self) -> list[PendingEvent]:
        """The events no later growth of the file can change (``events[:settled]``)."""
        return self.events if self.settled is None else self.events[: self.settled]


class Importer:
    """Base class for importers (subclasses set ``PLUGIN_NAME`` and implement both methods)."""

    PLUGIN_NAME: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    #: Set by ``parse_file(live=True)``: the file is still being written. A JSONL importer then reads a
    #: half-written last line as open tail (``iter_jsonl(live=True)``) and a file with no conversation
    #: yet as no events, rather than as errors.
    live: bool = False

    def sniff(self, path: Path, head: bytes) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def resembles(self, path: Path, head: bytes) -> bool:
        """Whether ``head`` (the file's first 64 KiB) nearly has this format's shape: the format's own
        distinctive traits are there though ``sniff`` refuses it (a field ``sniff`` looks for is missing) or
        another format claims it. :func:`latch.importers.parse_file` then reads an auto-detected file that no
        importer claims, or that the claiming importer cannot read, as this format, so its error names this
        format and what is missing. Never raises; the default is ``False``."""
        return False

    def parse(self, path: Path, data: bytes) -> ParsedSession:  # pragma: no cover - interface
        raise NotImplementedError

    def parse_all(self, path: Path, data: bytes) -> list[ParsedSession]:
        """Every session in ``data``, in the file's order: ``[self.parse(path, data)]`` for a one-session
        format. A container importer overrides it (one ``ParsedSession`` per session, each with its own
        ``external_key``) and its ``parse`` returns one of them (documented by the importer).
        Raises :class:`TranscriptError` like :meth:`parse`: all or nothing, for the whole file."""
        return [self.parse(path, data)]


def content_key(data: bytes) -> str:
    """Hex SHA-256 of ``data`` (bytes): the import identity of a transcript with no session id of its own."""
    return hashlib.sha256(data).hexdigest()


def decode_text(path: str | Path, data: bytes) -> str:
    """Decode transcript bytes: UTF-8 (BOM stripped) or UTF-16 with a BOM.

    Raises :class:`TranscriptError` for empty files, binary junk (NUL bytes in
    UTF-8 text) and invalid UTF-8 (naming the byte offset and line).
    """
    if not data.strip():
        raise TranscriptError(path, None, "file is empty")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise TranscriptError(
                path, f"byte {exc.start}", f"invalid UTF-16 after a UTF-16 BOM: {exc.reason}"
            ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TranscriptError(path, f"line {line}", f"not UTF-8 text (byte offset {exc.start}: {exc.reason})") from None
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise TranscriptError(path, f"line {line}", "binary data (NUL byte) in a text transcript")
    return text


_DECODER = json.JSONDecoder()


def json_decode(text: str, start: int = 0) -> tuple[Any, int]:
    """``(value, end index)`` of the JSON value at ``text[start:]`` (``JSONDecoder.raw_decode``), with
    :func:`json_loads`' errors."""
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise _integer_too_long(text, start) from None
    except RecursionError:
        raise JSONNestingError("JSON nested too deeply") from None


def load_json(path: str | Path, text: str) -> Any:
    """Parse one JSON document; errors name the line and column (``FILE:line N column C: invalid JSON: MSG``)."""
    try:
        return json_loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(path, f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except JSONNestingError as exc:
        raise TranscriptError(path, None, str(exc)) from None


def iter_jsonl(path: str | Path, text: str, *, live: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank JSONL line.

    Errors name the line like :func:`load_json`: ``FILE:line N column C: invalid JSON: MSG``,
    ``FILE:line N: JSON nested too deeply``, ``FILE:line N: expected a JSON object, got list``.
    ``live=True`` (the file is still being written, :attr:`Importer.live`): a last line without its
    newline that is not valid JSON yet is half-written, the open tail, and is skipped instead.
    """
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        try:
            obj = json_loads(s)
        except json.JSONDecodeError as exc:
            if live and n == len(lines):
                return  # half-written: the rest of the line is not in the file yet
            column = exc.colno + len(line) - len(line.lstrip())
            raise TranscriptError(path, f"line {n} column {column}", f"invalid JSON: {exc.msg}") from None
        except JSONNestingError as exc:
            raise TranscriptError(path, f"line {n}", str(exc)) from None
        if not isinstance(obj, dict):
            raise TranscriptError(path, f"line {n}", f"expected a JSON object, got {type(obj).__name__}")
        yield n, obj


class SessionForgotten(TranscriptError):
    """The transcript's session is tombstoned (``latch forget``); ``session_id`` names it."""

    def __init__(self, path: str | Path, session_id: str):
        self.session_id = session_id
        super().__init__(
            path, None, f"session {session_id} is forgotten (tombstoned by `latch forget`); nothing imported"
        )

    def __reduce__(self) -> tuple[Callable[..., TranscriptError], tuple[str | None, ...], dict[str, Any]]:
        return type(self), (self.path, self.session_id), self.__dict__
