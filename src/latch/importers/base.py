"""Importer contract: parse a foreign transcript into Latch events, all or nothing.

An importer is a class with ``PLUGIN_NAME`` (its format name), ``DESCRIPTION``,
``sniff(path, head) -> int`` (a confidence 0-100 from the path and the first
64 KiB of bytes) and ``parse(path, data) -> ParsedSession``. Parsing never
touches the store: :func:`latch.importers.import_file` appends the whole parsed
session in one transaction, so a malformed file leaves the store unchanged.

Malformed input raises :class:`TranscriptError` naming the file, the line or
record, and the reason.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..store import PendingEvent

__all__ = ["TranscriptError", "ParsedSession", "Importer", "decode_text", "load_json", "iter_jsonl", "content_key"]


class TranscriptError(Exception):
    """A transcript cannot be imported. ``str()`` is ``"FILE:LOCATION: REASON"``."""

    def __init__(self, path: str | Path, location: str | None, reason: str):
        self.path = str(path)
        self.location = location
        self.reason = reason
        where = f"{self.path}:{location}" if location else self.path
        super().__init__(f"{where}: {reason}")


@dataclass
class ParsedSession:
    """A parsed transcript, ready to append.

    ``external_key`` is the import identity (format + the transcript's own
    session id, or a content hash) that makes re-imports idempotent; every
    event's ``source_ref`` is unique within the session. ``stats`` holds the
    importer's counts (messages, tool calls, tool errors, usage totals).
    """

    external_key: str
    format: str
    source: str
    events: list[PendingEvent]
    workspace: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    artifacts: list[tuple[bytes, str, int | None, int | None]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


class Importer:
    """Base class for importers (subclasses set ``PLUGIN_NAME`` and implement both methods)."""

    PLUGIN_NAME: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""

    def sniff(self, path: Path, head: bytes) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def parse(self, path: Path, data: bytes) -> ParsedSession:  # pragma: no cover - interface
        raise NotImplementedError


def content_key(data: bytes) -> str:
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
            raise TranscriptError(path, f"byte {exc.start}", f"invalid UTF-16 after a UTF-16 BOM: {exc.reason}") from None
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


def load_json(path: str | Path, text: str) -> Any:
    """Parse one JSON document; errors name the line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(path, f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise TranscriptError(path, None, "JSON nested too deeply") from None


def iter_jsonl(path: str | Path, text: str):
    """Yield ``(line_number, object)`` for each non-blank JSONL line; errors name the line."""
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as exc:
            raise TranscriptError(path, f"line {n}", f"invalid JSON (column {exc.colno}: {exc.msg})") from None
        except RecursionError:
            raise TranscriptError(path, f"line {n}", "JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise TranscriptError(path, f"line {n}", f"expected a JSON object, got {type(obj).__name__}")
        yield n, obj
