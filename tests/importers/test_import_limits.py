"""The second tester's importer reports: half-written last lines under ``--live``, huge integers, CJK in
escaped tool-call arguments, error locations, duplicated Claude Code lines and a numeric ``sessionId``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from latch.events import AssistantMessage
from latch.host.ingest import import_file
from latch.importers import TranscriptError, parse_file
from latch.store import EventStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"
LINES = EXAMPLE.read_bytes().splitlines(keepends=True)  # 60 lines; line 21 is a tool_result (user) line


def _codex(tmp_path: Path) -> Path:
    rows = [
        {"timestamp": "t0", "type": "session_meta", "payload": {"id": "s-1", "cwd": "/w"}},
        {
            "timestamp": "t1",
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        },
        {"timestamp": "t2", "type": "event_msg", "payload": {"type": "task_started"}},
    ]
    p = tmp_path / "rollout.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_half_written_last_claude_line_is_open_tail_only_when_live(tmp_path):
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"".join(LINES[:20]) + LINES[20][:200])  # line 21 cut mid-string, no newline
    store = EventStore(tmp_path / "s.db")
    _, _, seqs = import_file(store, live, final=False)
    whole20 = tmp_path / "p20.jsonl"
    whole20.write_bytes(b"".join(LINES[:20]))
    assert len(seqs) == len(parse_file(whole20).settled_events) == 23
    with pytest.raises(TranscriptError, match=r"live\.jsonl:line 21 column \d+: invalid JSON: Unterminated string"):
        import_file(store, live, final=True)
    live.write_bytes(EXAMPLE.read_bytes())
    one = EventStore(tmp_path / "one.db")
    import_file(one, live, final=False)
    import_file(store, live, final=False)
    assert store.count_events() == one.count_events() == 79


def test_half_written_last_codex_line(tmp_path):
    p = _codex(tmp_path)
    p.write_bytes(p.read_bytes() + b'{"timestamp": "t3", "type": "response_item", "payload": {"type": "mess')
    store = EventStore(tmp_path / "s.db")
    _, parsed, seqs = import_file(store, p, final=False)
    assert parsed.external_key == "codex:s-1" and len(seqs) == 1  # the user prompt
    with pytest.raises(TranscriptError, match=r"rollout\.jsonl:line 4 column \d+: invalid JSON"):
        import_file(store, p, final=True)


def test_a_bad_line_before_the_last_is_still_an_error_when_live(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"".join(LINES[:5]) + b"{not json\n" + b"".join(LINES[5:8]))
    with pytest.raises(TranscriptError, match=r"bad\.jsonl:line 6 column 2: invalid JSON"):
        import_file(EventStore(tmp_path / "s.db"), p, final=False)


def test_metadata_only_file_under_live_stores_nothing(tmp_path):
    p = tmp_path / "meta.jsonl"
    p.write_bytes(LINES[0])  # the permission-mode line
    store = EventStore(tmp_path / "s.db")
    assert import_file(store, p, final=False)[2] == []
    assert store.sessions() == []  # no empty session under a key the grown file will not have
    with pytest.raises(TranscriptError, match="no conversation lines"):
        import_file(store, p, final=True)


@pytest.mark.parametrize(
    "suffix,text,where",
    [
        (".json", '{"messages": [{"role": "user", "content": "x", "n": ' + "7" * 5000 + "}]}", "line 1 column 53"),
        (
            ".jsonl",
            json.dumps({"type": "permission-mode", "sessionId": "s"}) + '\n{"type": "user", "n": ' + "7" * 5000 + "}\n",
            "line 2 column 23",
        ),
    ],
    ids=["json", "jsonl"],
)
def test_a_5000_digit_integer_is_invalid_json(tmp_path, suffix, text, where):
    p = tmp_path / f"big{suffix}"
    p.write_text(text, encoding="utf-8")
    for fmt in (None, "openai-chat" if suffix == ".json" else "claude-code"):
        with pytest.raises(TranscriptError) as info:
            parse_file(p, fmt)
        if fmt:  # the named importer parses it; detection alone may not claim the file
            assert str(info.value) == f"{p}:{where}: invalid JSON: integer too long"


def test_cjk_in_escaped_tool_arguments_is_searchable(tmp_path, store):
    doc = {
        "messages": [
            {"role": "user", "content": "find the connection code"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "shell", "arguments": '{"cmd": "grep \\u8fde\\u63a5 src/*.py"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "db.py: # no match"},
        ]
    }
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    sid, _, _ = import_file(store, p, format="openai-chat")
    (hit,) = store.search("连接", session_id=sid)
    assert isinstance(hit.event, AssistantMessage) and hit.event.tool_calls[0].arguments.count("\\u8fde") == 1


def test_reimport_errors_name_lines_like_the_parsers(tmp_path):
    live = tmp_path / "live.jsonl"
    live.write_bytes(EXAMPLE.read_bytes())
    store = EventStore(tmp_path / "s.db")
    import_file(store, live)
    live.write_bytes(EXAMPLE.read_bytes().replace(b"off by a cent or two", b"off by a cent", 1))  # line 2
    with pytest.raises(TranscriptError, match=r"live\.jsonl:line 2: reads differently"):
        import_file(store, live)


def test_a_duplicated_claude_line_is_read_once(tmp_path):
    p = tmp_path / "dup.jsonl"
    p.write_bytes(b"".join(LINES[:10]) + LINES[5] + b"".join(LINES[10:]))  # line 6 (a tool_result) twice
    dup, one = parse_file(p), parse_file(EXAMPLE)
    assert len(dup.events) == len(one.events) == 81 and dup.stats == one.stats
    assert dup.stats["orphan_results"] == 0


def test_a_numeric_session_id_is_rejected(tmp_path):
    p = tmp_path / "num.jsonl"
    second = json.loads(LINES[1])
    p.write_bytes(LINES[0] + (json.dumps({**second, "sessionId": 42}) + "\n").encode() + b"".join(LINES[2:]))
    with pytest.raises(TranscriptError, match=r"num\.jsonl:line 2: field 'sessionId' must be a string, got number"):
        parse_file(p)


def test_fifo_device_and_folder_are_refused_at_once(tmp_path):
    """A FIFO made ``latch import`` block forever and ``/dev/zero`` ran out of memory: anything but a regular
    file is one TranscriptError before a byte is read (found by a new-user trial)."""
    import os

    from latch.importers import parse_file
    from latch.importers.base import TranscriptError

    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    for path, reason in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"), (tmp_path, "is a folder")):
        with pytest.raises(TranscriptError, match=reason):
            parse_file(path)


def test_size_cap_names_the_limit(tmp_path, monkeypatch):
    from latch import importers
    from latch.importers.base import TranscriptError

    big = tmp_path / "big.json"
    big.write_text('{"messages": []}' + " " * 100)
    monkeypatch.setattr(importers, "MAX_TRANSCRIPT_BYTES", 64)
    with pytest.raises(TranscriptError, match="116 bytes, over the 64-byte limit"):
        importers.parse_file(big)
