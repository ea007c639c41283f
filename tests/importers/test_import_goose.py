"""Goose ``sessions.db`` importer: a container of sessions (``latch.importers.goose``).

Corpus counts per session were checked by hand with a Python ``sqlite3`` script that does not import
latch (``mode=ro&immutable=1``): per ``sessions.id``, user rows with a ``text`` item, assistant rows,
rows whose ``metadata_json`` has ``usage``, ``toolRequest`` items, ``toolResponse`` items and those with
``toolResult.status == "error"`` or ``value.isError``; the usage sums equal ``usage_ledger``'s
(``SELECT count(*), sum(input_tokens), sum(output_tokens) FROM usage_ledger GROUP BY session_id``).
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

from _importer_checks import assert_all_rejected, snapshot, sqlite_mutated, tiny_png
from click.testing import CliRunner
from corpus_support import CORPUS, corpus_files, corpus_format, corpus_name, require_corpus

from latch.cli import _load_commands, cli
from latch.events import AssistantMessage, SystemNote, ToolResult, Usage, UserMessage
from latch.host.ingest import import_all, import_file
from latch.importers import detect, parse_all_file
from latch.importers.goose import GooseImporter
from latch.store import EventStore

DB = CORPUS / "goose" / "lantern_sessions.db"

# session id -> (user, assistant, usage, calls, results, errors, input tokens, output tokens, events)
CORPUS_COUNTS = {
    "20260805_1": (1, 2, 2, 1, 1, 1, 4100, 533, 6),
    "20260805_2": (1, 2, 2, 2, 2, 2, 4100, 892, 7),
    "20260805_3": (1, 4, 3, 4, 4, 2, 6150, 1444, 12),
    "20260805_4": (1, 2, 2, 1, 1, 1, 4100, 771, 6),
}


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _copy(tmp_path: Path, name: str = "sessions.db") -> Path:
    """A writable copy of the corpus database (the corpus file is never opened for writing)."""
    out = tmp_path / name
    src = _ro(DB)
    dst = sqlite3.connect(out)
    src.backup(dst)
    src.close()
    dst.close()
    return out


def _schema() -> list[str]:
    """The corpus database's table definitions (the synthetic shapes are built on them; skipped without it)."""
    require_corpus()
    with _ro(DB) as db:
        return [
            r[0]
            for r in db.execute(
                "SELECT sql FROM sqlite_master WHERE name IN ('sessions', 'messages') AND type = 'table'"
            )
        ]


def _build(path: Path, sessions: list[dict], messages: list[tuple], *, wal: bool = False) -> sqlite3.Connection:
    """A Goose database with the corpus's schema; ``messages`` are ``(session_id, role, content, metadata)``."""
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
    for sql in _schema():
        db.execute(sql)
    for s in sessions:
        db.execute(
            "INSERT INTO sessions(id, working_dir, created_at, model_config_json, provider_name) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                s["id"],
                s.get("cwd", "/w"),
                s.get("created", "2026-01-01 00:00:00"),
                json.dumps({"model_name": s.get("model", "m1")}),
                "anthropic",
            ),
        )
    for n, (sid, role, content, meta) in enumerate(messages):
        db.execute(
            "INSERT INTO messages(message_id, session_id, role, content_json, created_timestamp, metadata_json) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (f"m{n}", sid, role, json.dumps(content), 1_700_000_000 + n, json.dumps(meta)),
        )
    db.commit()
    return db


def _counts(parsed) -> tuple:
    st = parsed.stats
    return (
        st["user_messages"],
        st["assistant_messages"],
        st["usage"]["requests"],
        st["tool_calls"],
        st["tool_results"],
        st["tool_errors"],
        st["usage"]["input_tokens"],
        st["usage"]["output_tokens"],
        len(parsed.events),
    )


def test_corpus_sessions_counts(corpus_dir):
    sessions = parse_all_file(DB, "goose")
    assert [s.external_key for s in sessions] == [f"goose:{k}" for k in CORPUS_COUNTS]
    assert {s.external_key.split(":")[1]: _counts(s) for s in sessions} == CORPUS_COUNTS
    assert {(s.workspace, s.format, s.meta["model"], s.meta["provider_name"]) for s in sessions} == {
        ("/work", "goose", "qwen3:0.6b", "ollama")
    }
    assert all(s.settled is None for s in sessions)
    # every assistant message reports reasoning except the last answer of _1 and _4 (text only)
    s1 = sessions[0]
    assert [type(e.event).__name__ for e in s1.events] == [
        "UserMessage",
        "AssistantMessage",
        "Usage",
        "ToolResult",
        "AssistantMessage",
        "Usage",
    ]
    assert [e.event.reasoning_reported for e in s1.events if isinstance(e.event, AssistantMessage)] == [True, True]
    call = s1.events[1].event.tool_calls[0]
    assert (call.id, call.name, call.arguments) == (
        "773d756b-3bf0-4a1b-b52b-444a458395c0",
        "average_item_price",
        '{"param1":"value1","param2":"value2"}',
    )
    result = s1.events[3].event
    assert result.is_error and result.call_id == call.id and result.content.startswith("-32002: Tool 'average_item")
    # created_timestamp 1785964761 (Unix seconds) = the row's UTC timestamp column, 2026-08-05 21:19:21
    assert (s1.events[0].source_ref, s1.events[0].ts) == ("message:1", "2026-08-05T21:19:21Z")
    # the second request of _3 stored as its own row (15) with no usage of its own
    s3 = sessions[2]
    refs = [(e.source_ref, type(e.event).__name__) for e in s3.events]
    assert ("message:15", "AssistantMessage") in refs and ("message:15#usage", "Usage") not in refs
    # a success result with isError: the read_image failure of _2
    assert sessions[1].events[-1].event.content.startswith("Error: failed to read image file")
    assert sessions[1].events[-1].event.is_error


def test_parse_returns_the_largest_session(corpus_dir):
    parsed = GooseImporter().parse(DB, DB.read_bytes())
    assert parsed.external_key == "goose:20260805_3" and len(parsed.events) == 12


def test_import_all_is_one_idempotent_transaction(corpus_dir, tmp_path):
    with EventStore(tmp_path / "s.db") as store:
        got = import_all(store, DB)
        assert [(p.external_key, len(seqs)) for _, p, seqs in got] == [
            (f"goose:{k}", v[-1]) for k, v in CORPUS_COUNTS.items()
        ]
        after = snapshot(store)
        assert after[0] == 31 and len(after[1]) == 4
        again = import_all(store, DB)
        assert [sid for sid, _, _ in again] == [sid for sid, _, _ in got] and all(s == [] for _, _, s in again)
        assert snapshot(store) == after
        # import_file takes only parse()'s session, the one already stored: nothing new
        sid, parsed, seqs = import_file(store, DB)
        assert (parsed.external_key, seqs) == ("goose:20260805_3", [])


def test_import_file_takes_one_session(corpus_dir, tmp_path):
    with EventStore(tmp_path / "s.db") as store:
        sid, parsed, seqs = import_file(store, DB)
        assert parsed.external_key == "goose:20260805_3" and len(seqs) == 12
        assert [s.events for s in store.sessions()] == [12]


def test_cli_import_prints_one_line_per_session(corpus_dir, tmp_path):
    _load_commands()
    res = CliRunner().invoke(cli, ["--db", str(tmp_path / "c.db"), "import", str(DB)])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 4
    assert [ln.rsplit(", ", 1)[1] for ln in lines] == ["6 new events", "7 new events", "12 new events", "6 new events"]
    assert all("(goose)" in ln and ln.startswith(str(DB)) for ln in lines)


def test_sniff_claims_only_goose_databases(corpus_dir):
    imp = GooseImporter()
    for p in corpus_files():
        score = imp.sniff(p, p.read_bytes()[:65536])
        assert (score > 0) == (corpus_format(p) == "goose"), corpus_name(p)
    assert detect(DB, DB.read_bytes()).PLUGIN_NAME == "goose"


# ----------------------------------------------------------------------------- malformed databases
def _rejected(store, path: Path, where: str | None, reason: str, fmt: str | None = "goose") -> None:
    assert_all_rejected(store, path, where, reason, fmt)


def _mutated(tmp_path: Path, name: str, sql: str, args: tuple = ()) -> Path:
    return sqlite_mutated(_copy(tmp_path, name), sql, args)


def test_malformed_databases_are_rejected_and_change_nothing(corpus_dir, tmp_path):
    with EventStore(tmp_path / "s.db") as store:
        import_all(store, DB)
        data = DB.read_bytes()
        text = tmp_path / "notes.db"
        text.write_text("SQLite is nice\n", encoding="utf-8")
        _rejected(store, text, None, "not a SQLite database")
        cut = tmp_path / "cut.db"
        cut.write_bytes(data[: len(data) // 2])
        _rejected(store, cut, None, "unreadable SQLite database")
        other = tmp_path / "other.db"
        with sqlite3.connect(other) as db:
            db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            db.execute("INSERT INTO notes(body) VALUES ('x')")
        _rejected(store, other, "table sessions", "missing table (not a Goose sessions.db)")
        _rejected(store, other, None, "unrecognized transcript format", fmt=None)
        # a row with a wrong SQLite type, invalid JSON, a content item of the wrong shape
        # a TEXT column stores 42 as '42' (affinity), a blob stays a blob
        _rejected(
            store,
            _mutated(tmp_path, "blob.db", "UPDATE messages SET content_json = X'5b5d' WHERE id = 7"),
            "table messages row id 7",
            "column 'content_json' must be text, got blob",
        )
        _rejected(
            store,
            _mutated(tmp_path, "int.db", "UPDATE messages SET content_json = 42 WHERE id = 7"),
            "table messages row id 7",
            "column 'content_json' must hold a JSON array, got number",
        )
        _rejected(
            store,
            _mutated(tmp_path, "json.db", "UPDATE messages SET content_json = '[{' WHERE id = 9"),
            "table messages row id 9",
            "column 'content_json': invalid JSON",
        )
        bad = json.dumps(
            [
                {
                    "type": "toolRequest",
                    "id": "x",
                    "toolCall": {"status": "success", "value": {"name": 5, "arguments": {}}},
                }
            ]
        )
        _rejected(
            store,
            _mutated(tmp_path, "shape.db", "UPDATE messages SET content_json = ? WHERE id = 13", (bad,)),
            "table messages row id 13",
            "field 'content_json[0].toolCall.value.name' must be a string, got number",
        )
        _rejected(
            store,
            _mutated(tmp_path, "role.db", "UPDATE messages SET role = 'tool' WHERE id = 2"),
            "table messages row id 2",
            "column 'role' must be 'user' or 'assistant', got 'tool'",
        )
        _rejected(
            store,
            _mutated(tmp_path, "stray.db", "UPDATE messages SET session_id = 'nope' WHERE id = 22"),
            "table messages row id 22",
            "session_id 'nope' names no row of table sessions",
        )
        assert len(store.sessions()) == 4


def test_the_user_file_is_never_written(corpus_dir, tmp_path):
    path = shutil.copy(DB, tmp_path / "sessions.db")
    before = Path(path).read_bytes()
    Path(path).chmod(0o444)
    with EventStore(tmp_path / "s.db") as store:
        import_all(store, path)
    assert Path(path).read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.db", "sessions.db"]


# ----------------------------------------------------------------------------- synthetic shapes
def test_synthetic_shapes(tmp_path):
    png = tiny_png(4, 3)
    b64 = base64.b64encode(png).decode()
    ok = lambda text, **kw: {"status": "success", "value": {"content": [{"type": "text", "text": text}], **kw}}  # noqa: E731
    msgs = [
        (
            "s1",
            "user",
            [{"type": "text", "text": "look"}, {"type": "image", "data": b64, "mimeType": "image/png"}],
            {"userVisible": True, "agentVisible": True},
        ),
        (
            "s1",
            "assistant",
            [
                {"type": "redactedThinking", "data": "zz"},
                {"type": "text", "text": "calling"},
                {
                    "type": "toolRequest",
                    "id": "c1",
                    "toolCall": {"status": "success", "value": {"name": "shell", "arguments": {"command": "ls"}}},
                },
                {"type": "frontendToolRequest", "id": "c2", "toolCall": {"status": "error", "error": "bad json"}},
            ],
            {
                "usage": {
                    "inputTokens": 1000,
                    "outputTokens": 20,
                    "cacheReadInputTokens": 700,
                    "cacheWriteInputTokens": 100,
                }
            },
        ),
        (
            "s1",
            "user",
            [
                {
                    "type": "toolResponse",
                    "id": "c1",
                    "toolResult": {
                        "status": "success",
                        "value": {
                            "content": [
                                {"type": "text", "text": "a.txt"},
                                {"type": "image", "data": b64, "mimeType": "image/png"},
                            ]
                        },
                    },
                },
                {"type": "toolResponse", "id": "c2", "toolResult": {"status": "error", "error": "could not parse"}},
            ],
            {},
        ),
        (
            "s1",
            "assistant",
            [
                {"type": "systemNotification", "notificationType": "inlineMessage", "msg": "compacting"},
                {
                    "type": "toolRequest",
                    "id": "c3",
                    "toolCall": {"status": "success", "value": {"name": "shell", "arguments": {}}},
                },
            ],
            {},
        ),
        ("s1", "user", [{"type": "text", "text": "summary only the model saw"}], {"userVisible": False}),
        ("s2", "user", [{"type": "text", "text": "other"}], {}),
        (
            "s2",
            "assistant",
            [
                {
                    "type": "toolRequest",
                    "id": "d1",
                    "toolCall": {"status": "success", "value": {"name": "shell", "arguments": {"command": "pwd"}}},
                }
            ],
            {},
        ),
        ("s2", "user", [{"type": "toolResponse", "id": "d1", "toolResult": ok("/w", isError=True)}], {}),
    ]
    path = tmp_path / "sessions.db"
    _build(
        path,
        [
            {"id": "s1", "cwd": "/repo", "model": "claude-x"},
            {"id": "s2", "created": "2026-02-01 00:00:00"},
            {"id": "empty", "created": "2026-03-01 00:00:00"},
        ],
        msgs,
    ).close()
    s1, s2 = parse_all_file(path)  # the session without messages is left out
    assert (s1.external_key, s1.workspace, s2.external_key) == ("goose:s1", "/repo", "goose:s2")
    ev = [e.event for e in s1.events]
    assert [type(e).__name__ for e in ev] == [
        "UserMessage",
        "AssistantMessage",
        "Usage",
        "ToolResult",
        "ToolResult",
        "SystemNote",
        "AssistantMessage",
        "ToolResult",
        "UserMessage",
    ]
    user, asst, usage, r1, r2, note, asst2, missing, meta = ev
    assert (
        isinstance(user, UserMessage)
        and user.media[0].media_type == "image/png"
        and (user.media[0].width, user.media[0].height) == (4, 3)
    )
    assert asst.text == "calling" and asst.reasoning_reported and asst.model == "claude-x"
    assert [(c.id, c.name) for c in asst.tool_calls] == [("c1", "shell"), ("c2", "invalid_tool_call")]
    assert asst.tool_calls[1].arguments == '{"error":"bad json"}'
    assert isinstance(usage, Usage) and (
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        usage.request_id,
    ) == (200, 700, 100, 20, "m1")
    assert isinstance(r1, ToolResult) and (r1.content, r1.is_error, len(r1.media)) == ("a.txt", False, 1)
    assert (r2.call_id, r2.content, r2.is_error) == ("c2", "could not parse", True)
    assert isinstance(note, SystemNote) and (note.subtype, note.text) == ("goose_inlineMessage", "compacting")
    assert [c.id for c in asst2.tool_calls] == ["c3"]
    assert missing.missing and missing.call_id == "c3"  # the next user text came first
    assert meta.is_meta and meta.text == "summary only the model saw"
    assert len(s1.artifacts) == 1  # the same image twice is one artifact
    assert s2.events[-1].event.is_error and s2.events[-1].event.content == "/w"


def test_wal_sidecar_with_uncheckpointed_sessions(tmp_path):
    """A WAL-mode database whose newest session is only in the ``-wal`` file: importing the path reads
    it through SQLite (read-only); the main file's bytes alone lack it."""
    path = tmp_path / "sessions.db"
    writer = _build(path, [{"id": "old"}], [("old", "user", [{"type": "text", "text": "hi"}], {})], wal=True)
    try:
        writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        writer.execute("INSERT INTO sessions(id, working_dir, created_at) VALUES ('new', '/w', '2027-01-01')")
        writer.execute(
            "INSERT INTO messages(session_id, role, content_json, created_timestamp) "
            'VALUES (\'new\', \'user\', \'[{"type":"text","text":"fresh"}]\', 1)'
        )
        writer.commit()
        assert Path(f"{path}-wal").stat().st_size > 0
        assert [s.external_key for s in parse_all_file(path)] == ["goose:old", "goose:new"]
        alone = tmp_path / "copy.db"
        alone.write_bytes(path.read_bytes())  # the main file without its -wal
        assert [s.external_key for s in parse_all_file(alone)] == ["goose:old"]
    finally:
        writer.close()
