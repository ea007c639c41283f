"""Checks shared by the importer tests: idempotent re-import and malformed copies.

Every malformed copy must raise ``TranscriptError`` naming the file (and the line
where there is one) and leave the store exactly as it was.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path

import pytest

from latch.importers import TranscriptError, detect, import_file

# bytes that are not UTF-8 text: a PNG signature and a JPEG marker
JUNK = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\xff\xe0"


def tiny_png(width: int = 3, height: int = 2, level: int = 9) -> bytes:
    """A real ``width``x``height`` RGB PNG (IHDR, IDAT, IEND with CRCs); ``level=0`` keeps it big."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, level)) + chunk(b"IEND", b""))


def snapshot(store) -> tuple[int, list[str]]:
    return store.count_events(), [s.id for s in store.sessions()]


def assert_idempotent(store, path: Path, fmt: str | None = None) -> str:
    """Import ``path`` twice: one session, no new seqs, event count unchanged. Returns the session id."""
    sid, parsed, seqs = import_file(store, path, fmt)
    assert len(seqs) == len(parsed.settled_events) > 0  # the open tail waits for the file to grow
    count = store.count_events()
    sid2, _, seqs2 = import_file(store, path, fmt)
    assert sid2 == sid
    assert seqs2 == []
    assert store.count_events() == count
    assert [s.id for s in store.sessions()].count(sid) == 1
    return sid


def assert_rejected(store, path: Path, data: bytes, *, where: str | None, reason: str, fmt: str | None = None) -> None:
    """Writing ``data`` to ``path`` and importing it raises ``TranscriptError`` and changes nothing."""
    path.write_bytes(data)
    before = snapshot(store)
    with pytest.raises(TranscriptError) as info:
        import_file(store, path, fmt)
    message = str(info.value)
    assert str(path) in message
    if where is not None:  # "line 7" matches "line 7:" and "line 7 column 3:", never "line 70"
        assert re.search(re.escape(f"{path}:{where}") + r"[: ]", message), message
    assert reason in message, message
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


def check_jsonl_corruptions(store, tmp_path: Path, original: Path, *, middle: int, wrong_type, wrong_type_reason: str,
                            fmt: str) -> None:
    """The malformed-copy battery for a JSONL transcript.

    ``middle`` is a line number inside the file; ``wrong_type(obj)`` breaks a
    field type on that line, and ``wrong_type_reason`` is the expected message.
    The original is imported first so "unchanged" is checked against a non-empty store.
    """
    data = original.read_bytes()
    import_file(store, original)
    name = original.stem
    line = jsonl_lines(data)[middle - 1]
    cut = b"\n".join(jsonl_lines(data)[:middle - 1] + [line[: len(line) // 2]])
    assert_rejected(store, tmp_path / f"{name}.cut.jsonl", cut, where=f"line {middle}", reason="invalid JSON")
    assert_rejected(store, tmp_path / f"{name}.badjson.jsonl", replace_line(data, middle, line[:-3]),
                    where=f"line {middle}", reason="invalid JSON")
    assert_rejected(store, tmp_path / f"{name}.type.jsonl", mutate_line(data, middle, wrong_type),
                    where=f"line {middle}", reason=wrong_type_reason)
    junk = replace_line(data, middle, line[:40] + JUNK + line[40:])
    assert_rejected(store, tmp_path / f"{name}.junk.jsonl", junk, where=f"line {middle}", reason="not UTF-8 text")
    nul = replace_line(data, middle, line[:40] + b"\x00\x00\x00" + line[40:])
    assert_rejected(store, tmp_path / f"{name}.nul.jsonl", nul, where=f"line {middle}", reason="NUL byte")
    assert_rejected(store, tmp_path / f"{name}.empty.jsonl", b"", where=None, reason="file is empty", fmt=fmt)
    assert_rejected(store, tmp_path / f"{name}.empty2.jsonl", b"\n \n", where=None, reason="file is empty")


def check_utf16_variant(tmp_path: Path, original: Path, expected_format: str):
    """A UTF-16LE copy with BOM and CRLF (as PowerShell writes it) is detected and parses identically."""
    from latch.importers import parse_file

    text = original.read_bytes().decode("utf-8")
    variant = tmp_path / (original.stem + ".utf16" + original.suffix)
    variant.write_bytes(text.replace("\n", "\r\n").encode("utf-16"))
    data = variant.read_bytes()
    assert data[:2] == b"\xff\xfe"
    assert detect(variant, data).PLUGIN_NAME == expected_format
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
    from latch.events import AssistantMessage, ToolResult, Usage

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
