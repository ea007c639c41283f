"""Checks shared by the importer tests: event shape, idempotent re-import, clean rejection of malformed copies.

Every malformed copy must raise ``TranscriptError`` naming the file (and the line or record where
there is one) and leave the store exactly as it was (:func:`snapshot`).
"""

from __future__ import annotations

import copy
import json
import struct
import zlib
from pathlib import Path

import pytest

from latch.events import AssistantMessage, ToolResult, Usage
from latch.host.ingest import import_file
from latch.importers import ParsedSession, TranscriptError, detect, parse_file

# bytes that are not UTF-8 text, to insert into a line: a PNG signature and a JPEG marker
JUNK = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\xff\xe0"

# (data, where, reason) of malformed whole files, for assert_rejected
EMPTY_FILE = (b"", None, "file is empty")
# every byte value four times: the first byte that is not UTF-8 (0x80, offset 128) is on line 2
BINARY_FILE = (bytes(range(256)) * 4, "line 2", "not UTF-8 text")


def tiny_png(width: int = 3, height: int = 2, level: int = 9) -> bytes:
    """A real ``width``x``height`` RGB PNG (IHDR, IDAT, IEND with CRCs); ``level=0`` keeps it big."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, level))
        + chunk(b"IEND", b"")
    )


def detected(path: Path) -> str:
    """The format that content detection picks for ``path`` (the importer's ``PLUGIN_NAME``)."""
    return detect(path, path.read_bytes()).PLUGIN_NAME


def ref_kinds(events) -> list[tuple[str, str]]:
    """``[(source_ref, event class name)]`` of parsed events, in order."""
    return [(pe.source_ref, type(pe.event).__name__) for pe in events]


def write_json(path: Path, doc) -> Path:
    """``doc`` written to ``path`` as UTF-8 JSON, one item a line (``indent=1``)."""
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """``rows`` written to ``path`` as UTF-8 JSON Lines, each line ending in a newline."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def mutated_json(doc, change) -> bytes:
    """A copy of ``doc`` passed through ``change(copy)``, as JSON bytes (``indent=2``); ``doc`` is untouched."""
    doc = copy.deepcopy(doc)
    change(doc)
    return json.dumps(doc, indent=2).encode()


def snapshot(store) -> tuple[int, list[tuple[str, int]]]:
    """(event count, [(session id, events)] oldest first): what a failed import must leave unchanged."""
    return store.count_events(), [(s.id, s.events) for s in store.sessions()]


def assert_reimport_adds_nothing(store, path: Path, fmt: str | None = None) -> tuple[str, ParsedSession]:
    """Import ``path`` twice; returns ``(session id, parsed)``.

    The first import adds one session holding the settled events (at least one); the second
    returns the same session id and no new seqs, and leaves the store unchanged.
    """
    sessions_before = snapshot(store)[1]
    sid, parsed, seqs = import_file(store, path, fmt)
    assert len(seqs) == len(parsed.settled_events) > 0  # the open tail waits for the file to grow
    after = snapshot(store)
    assert after[1] == [*sessions_before, (sid, len(seqs))]
    sid2, _, seqs2 = import_file(store, path, fmt)
    assert (sid2, seqs2) == (sid, [])
    assert snapshot(store) == after
    return sid, parsed


def assert_rejected(
    store, path: Path, data: bytes | None = None, *, where: str | None, reason: str, fmt: str | None = None
) -> None:
    """Importing ``path`` (first written with ``data`` when given) as a finished file (``final=True``: a
    half-written last line is an error, not the open tail of a live file) raises ``TranscriptError`` and
    changes nothing.

    The error names ``path``, then ``where``: the line or record (``"line 7"``, ``"messages[2]"``,
    ``"record 7 (event id 7)"``; ``"line 7"`` also accepts ``"line 7 column 3"``, as JSON errors
    name the column), or ``None`` when the error names no place (an empty file). Its reason
    contains ``reason``.
    """
    if data is not None:
        path.write_bytes(data)
    before = snapshot(store)
    with pytest.raises(TranscriptError) as info:
        import_file(store, path, fmt, final=True)
    err = info.value
    assert err.path == str(path) and str(err).startswith(f"{path}:"), str(err)
    if where is None:
        assert err.location is None, str(err)
    else:
        assert err.location == where or str(err.location).startswith(f"{where} column "), str(err)
    assert reason in err.reason, str(err)
    assert snapshot(store) == before


def jsonl_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def replace_line(data: bytes, n: int, new: bytes) -> bytes:
    """``data`` with line ``n`` (1-based) replaced."""
    lines = jsonl_lines(data)
    lines[n - 1] = new
    return b"\n".join(lines)


def mutate_line(data: bytes, n: int, change) -> bytes:
    """``data`` with the JSON object on line ``n`` passed through ``change(obj)``."""
    obj = json.loads(jsonl_lines(data)[n - 1])
    change(obj)
    return replace_line(data, n, json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def check_jsonl_corruptions(
    store, tmp_path: Path, original: Path, *, middle: int, wrong_type, wrong_type_reason: str, fmt: str
) -> None:
    """The malformed-copy battery for a JSONL transcript.

    ``middle`` is a line number inside the file; ``wrong_type(obj)`` breaks a
    field type on that line, and ``wrong_type_reason`` is the expected message.
    The original is imported first so "unchanged" is checked against a non-empty store.
    """
    data = original.read_bytes()
    import_file(store, original)
    name = original.stem
    line = jsonl_lines(data)[middle - 1]
    cut = b"\n".join(jsonl_lines(data)[: middle - 1] + [line[: len(line) // 2]])
    assert_rejected(store, tmp_path / f"{name}.cut.jsonl", cut, where=f"line {middle}", reason="invalid JSON")
    assert_rejected(
        store,
        tmp_path / f"{name}.badjson.jsonl",
        replace_line(data, middle, line[:-3]),
        where=f"line {middle}",
        reason="invalid JSON",
    )
    assert_rejected(
        store,
        tmp_path / f"{name}.type.jsonl",
        mutate_line(data, middle, wrong_type),
        where=f"line {middle}",
        reason=wrong_type_reason,
    )
    junk = replace_line(data, middle, line[:40] + JUNK + line[40:])
    assert_rejected(store, tmp_path / f"{name}.junk.jsonl", junk, where=f"line {middle}", reason="not UTF-8 text")
    nul = replace_line(data, middle, line[:40] + b"\x00\x00\x00" + line[40:])
    assert_rejected(store, tmp_path / f"{name}.nul.jsonl", nul, where=f"line {middle}", reason="NUL byte")
    assert_rejected(store, tmp_path / f"{name}.empty.jsonl", b"", where=None, reason="file is empty", fmt=fmt)
    assert_rejected(store, tmp_path / f"{name}.empty2.jsonl", b"\n \n", where=None, reason="file is empty")


def json_document_corruptions(data: bytes) -> dict[str, tuple[bytes, str | None, str]]:
    """Malformed copies of the JSON document ``data``: case -> (data, where, reason) for :func:`assert_rejected`.

    ``cut``: the first half of the bytes; ``garbage``: a non-JSON line inserted mid-file;
    ``empty`` and ``binary``: :data:`EMPTY_FILE` and :data:`BINARY_FILE`.
    """
    lines = data.split(b"\n")
    mid = len(lines) // 2
    half = data[: len(data) // 2]
    last_line = half.count(b"\n") + 1
    return {
        "cut": (half, f"line {last_line}", "invalid JSON"),
        "garbage": (
            b"\n".join(lines[:mid] + [b"@@ not json @@"] + lines[mid:]),
            f"line {mid + 1} column 1",
            "invalid JSON",
        ),
        "empty": EMPTY_FILE,
        "binary": BINARY_FILE,
    }


def check_utf16_variant(tmp_path: Path, original: Path, expected_format: str) -> ParsedSession:
    """A UTF-16LE copy with BOM and CRLF (as PowerShell writes it) is detected and parses identically."""
    text = original.read_bytes().decode("utf-8")
    variant = tmp_path / (original.stem + ".utf16" + original.suffix)
    variant.write_bytes(text.replace("\n", "\r\n").encode("utf-16"))
    assert variant.read_bytes()[:2] == b"\xff\xfe"
    assert detected(variant) == expected_format
    a, b = parse_file(original), parse_file(variant)
    assert b.stats == a.stats
    assert b.external_key == a.external_key
    assert [(e.source_ref, e.event) for e in b.events] == [(e.source_ref, e.event) for e in a.events]
    return b


def assert_shape(events) -> None:
    """The importer conventions, checked on any parsed event list.

    Each AssistantMessage is followed by at most one Usage, then one ToolResult
    per call (real or ``missing``) in call order, except for calls still pending
    at the end of the transcript (no result anywhere: its file may still grow);
    any other result is an orphan whose call id no assistant message made;
    source refs are unique.
    """
    refs = [pe.source_ref for pe in events]
    assert len(refs) == len(set(refs)), "source_ref must be unique"
    all_calls = {c.id for pe in events if isinstance(pe.event, AssistantMessage) for c in pe.event.tool_calls}
    answered = {pe.event.call_id for pe in events if isinstance(pe.event, ToolResult)}
    i = 0
    while i < len(events):
        ev = events[i].event
        i += 1
        if isinstance(ev, AssistantMessage):
            if i < len(events) and isinstance(events[i].event, Usage):
                i += 1
            for call in ev.tool_calls:
                json.loads(call.arguments)  # arguments is a JSON string
                if call.id not in answered:  # pending: only the transcript's last requests may wait
                    assert not any(isinstance(pe.event, AssistantMessage) for pe in events[i:]), call
                    continue
                res = events[i].event
                assert isinstance(res, ToolResult) and res.call_id == call.id and not res.orphan, (call, res)
                i += 1
        elif isinstance(ev, ToolResult):
            assert ev.orphan and not ev.missing and ev.call_id not in all_calls, ev
        else:
            assert not isinstance(ev, Usage), "a Usage must follow its AssistantMessage"


def assert_all_rejected(store, path: Path, where: str | None, reason: str, fmt: str | None) -> None:
    """Importing every session of ``path`` (``import_all``, a container such as a Goose or OpenCode database)
    raises one ``TranscriptError`` line naming ``path``, exactly ``where`` and a reason containing ``reason``,
    and changes nothing in ``store``."""
    from latch.host.ingest import import_all

    before = snapshot(store)
    with pytest.raises(TranscriptError) as info:
        import_all(store, path, fmt, final=True)
    err = info.value
    assert err.path == str(path) and err.location == where and reason in err.reason, str(err)
    assert "\n" not in str(err)
    assert snapshot(store) == before


def sqlite_mutated(path: Path, sql: str, args: tuple = ()) -> Path:
    """``path`` (a copy of a SQLite transcript) after running ``sql`` with ``args`` on it."""
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute(sql, args)
    return path
