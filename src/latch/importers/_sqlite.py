"""Reading a harness's SQLite database from bytes (Goose ``sessions.db``, OpenCode ``opencode.db``).

Parsing never opens or locks the user's file: :func:`open_bytes` loads the bytes the host read into
a private in-memory database (``sqlite3.Connection.deserialize``, Python 3.11+). A database in WAL
mode keeps its most recent transactions in a ``-wal`` sidecar until a checkpoint copies them into the
main file, so the main file's bytes alone may lack the newest sessions or messages. When a non-empty
``FILE-wal`` exists beside ``path``, :func:`open_bytes` reads ``path`` itself instead, read-only
(``mode=ro``: SQLite applies the WAL, writes nothing to the database; it may create the ``-shm``
index beside it); when that fails (a read-only folder, a file that is not the same database) it
falls back to the bytes, whose committed, checkpointed content is still a consistent database.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from ._common import JSONArray, JSONObject, json_type
from .base import Importer, JSONNestingError, ParsedSession, TranscriptError, json_loads

__all__ = [
    "SQLITE_MAGIC",
    "Row",
    "is_sqlite",
    "schema_mentions",
    "open_bytes",
    "table_columns",
    "row_text",
    "json_column",
    "present_columns",
    "SqliteSessionsImporter",
]

SQLITE_MAGIC = b"SQLite format 3\x00"

Row = tuple[Any, ...]
"""A row ``sqlite3`` returns: its columns' values (text, integer, real, blob or ``None``) in the query's order."""


def is_sqlite(head: bytes) -> bool:
    """``head`` (a file's first bytes) starts with the SQLite 3 header string."""
    return head.startswith(SQLITE_MAGIC)


def schema_mentions(head: bytes, table: str, *columns: str) -> bool:
    """Whether the ``CREATE TABLE`` text of ``table`` (quoted or not) with every one of ``columns``
    appears in ``head``. The schema table lives on page 1 and its first overflow pages, which the
    64 KiB head of :func:`latch.importers.detect` holds for these harnesses' schemas."""
    m = re.search(rb"CREATE TABLE [`\"']?" + re.escape(table.encode()) + rb"[`\"']?\s*\(", head)
    if not m:
        return False
    body = head[m.end() : m.end() + 4096]
    end = body.find(b"CREATE ")
    body = body if end < 0 else body[:end]
    return all(re.search(rb"[`\"'\s(,]" + re.escape(c.encode()) + rb"[`\"'\s]", body) for c in columns)


def _wal_sidecar(path: Path) -> bool:
    try:
        wal = Path(f"{path}-wal")
        return wal.is_file() and wal.stat().st_size > 0
    except OSError:
        return False


def open_bytes(path: Path, data: bytes, *, required: tuple[str, ...], what: str) -> sqlite3.Connection:
    """A read-only connection to the database held in ``data`` (see the module docstring for WAL).

    Raises :class:`TranscriptError` ``FILE: not a SQLite database`` (no SQLite header),
    ``FILE: unreadable SQLite database: REASON`` (truncated or damaged), or ``FILE:table T: missing
    table (not WHAT)`` when one of the ``required`` tables is absent.
    """
    if not is_sqlite(data):
        raise TranscriptError(path, None, f"not a SQLite database (no 'SQLite format 3' header): not {what}")
    db: sqlite3.Connection | None = None
    if _wal_sidecar(path):
        try:
            db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            db = None
    if db is None:
        buf = bytearray(data)
        if len(buf) >= 20 and buf[18:20] == b"\x02\x02":
            buf[18:20] = b"\x01\x01"  # WAL mode: an in-memory copy has no -wal to read, read it as a rollback db
        db = sqlite3.connect(":memory:")
        try:
            db.deserialize(bytes(buf))
        except (sqlite3.Error, OverflowError) as exc:
            raise TranscriptError(path, None, f"unreadable SQLite database: {exc}") from None
    try:
        db.execute("PRAGMA query_only = ON")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        db.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.Error as exc:
        raise TranscriptError(path, None, f"unreadable SQLite database: {exc}") from None
    for t in required:
        if t not in tables:
            raise TranscriptError(path, f"table {t}", f"missing table (not {what})")
    return db


def table_columns(db: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table``."""
    return {r[1] for r in db.execute(f'PRAGMA table_info("{table}")')}


@overload
def row_text(where: str, path: Path, value: Any, column: str, *, required: Literal[True] = True) -> str: ...
@overload
def row_text(where: str, path: Path, value: Any, column: str, *, required: bool) -> str | None: ...
def row_text(where: str, path: Path, value: Any, column: str, *, required: bool = True) -> str | None:
    """``value`` of ``column`` as text: ``None`` allowed unless ``required``; any other SQLite type
    (integer, real, blob) is a :class:`TranscriptError` naming ``where`` and the column."""
    if value is None:
        if required:
            raise TranscriptError(path, where, f"column {column!r} is NULL (expected text)")
        return None
    if not isinstance(value, str):
        kind = {int: "integer", float: "real", bytes: "blob"}.get(type(value), type(value).__name__)
        raise TranscriptError(path, where, f"column {column!r} must be text, got {kind}")
    return value


@overload
def json_column(
    path: Path, where: str, value: Any, column: str, kind: type[dict[Any, Any]] = dict, *, required: bool = True
) -> JSONObject: ...
@overload
def json_column(
    path: Path, where: str, value: Any, column: str, kind: type[list[Any]], *, required: bool = True
) -> JSONArray: ...
def json_column(
    path: Path,
    where: str,
    value: Any,
    column: str,
    kind: type[dict[Any, Any]] | type[list[Any]] = dict,
    *,
    required: bool = True,
) -> JSONObject | JSONArray:
    """``value`` of ``column`` (text holding a JSON ``kind``, ``dict`` or ``list``) parsed; an empty
    ``kind()`` for NULL or blank text unless ``required``. Raises :class:`TranscriptError` naming ``where``
    and the column for a non-text value, invalid or too deeply nested JSON, or JSON of another type."""
    text = row_text(where, path, value, column, required=required)
    if text is None or (not required and not text.strip()):
        return kind()
    try:
        doc = json_loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(path, where, f"column {column!r}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    except JSONNestingError as exc:
        raise TranscriptError(path, where, f"column {column!r}: {exc}") from None
    if not isinstance(doc, kind):
        raise TranscriptError(
            path,
            where,
            f"column {column!r} must hold a JSON {'array' if kind is list else 'object'}, got {json_type(doc)}",
        )
    return doc


def present_columns(db: sqlite3.Connection, table: str, candidates: Sequence[str]) -> list[str]:
    """The ``candidates`` that ``table`` has, in ``candidates`` order (columns a harness added later)."""
    have = table_columns(db, table)
    return [c for c in candidates if c in have]


class SqliteSessionsImporter(Importer):
    """An importer of a harness's SQLite database holding many sessions (Goose, OpenCode).

    Subclasses set :attr:`WHAT` (``"a Goose sessions.db"``, for errors), :attr:`TABLES` (table -> the
    columns it must have), :attr:`MESSAGE_TABLE` (named when no session has a message) and implement
    :meth:`parse_rows`; :meth:`parse_all` opens the bytes (:func:`open_bytes`), checks the tables and
    columns, and maps any ``sqlite3.Error`` the rows raise to one ``FILE: unreadable SQLite database:
    REASON`` line.
    """

    WHAT: str = "a SQLite database"
    TABLES: Mapping[str, Sequence[str]] = {}
    MESSAGE_TABLE: str = "messages"

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """The session of the file with the most events (the earliest of equals); see :meth:`parse_all`.
        Raises :class:`TranscriptError` when the file holds no session with messages."""
        sessions = self.parse_all(path, data)
        if not sessions:
            raise TranscriptError(path, f"table {self.MESSAGE_TABLE}", "no session has any message")
        return max(sessions, key=lambda s: len(s.events))  # max keeps the first of equals

    def parse_all(self, path: Path, data: bytes) -> list[ParsedSession]:
        """One :class:`ParsedSession` per session with messages (:meth:`parse_rows`). Raises
        :class:`TranscriptError` ``FILE:table T: missing column C (not WHAT)``, those of
        :func:`open_bytes`, ``FILE: unreadable SQLite database: REASON``, and those of :meth:`parse_rows`."""
        db = open_bytes(path, data, required=tuple(self.TABLES), what=self.WHAT)
        try:
            for table, needed in self.TABLES.items():
                have = table_columns(db, table)
                missing = [c for c in needed if c not in have]
                if missing:
                    raise TranscriptError(path, f"table {table}", f"missing column {missing[0]!r} (not {self.WHAT})")
            return self.parse_rows(path, db)
        except sqlite3.Error as exc:
            raise TranscriptError(path, None, f"unreadable SQLite database: {exc}") from None
        finally:
            db.close()

    def parse_rows(self, path: Path, db: sqlite3.Connection) -> list[ParsedSession]:  # pragma: no cover - interface
        """The sessions of ``db``, whose tables and required columns are checked."""
        raise NotImplementedError
