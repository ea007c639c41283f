"""OpenCode SQLite storage importer: a container of sessions (``latch.importers.opencode``).

Corpus counts per session were checked by hand with a Python ``sqlite3`` script that does not import
latch (``mode=ro&immutable=1``): per ``session.id``, messages in ``(time_created, id)`` order and their
parts in ``id`` order; user messages with a ``text`` part, assistant messages, ``step-finish`` parts
(one per model request) with the sums of their ``tokens.input`` / ``tokens.output`` (equal to the
session row's ``tokens_input`` / ``tokens_output``), ``tool`` parts, those whose ``state.status`` is
``completed`` or ``error`` (results) and ``error`` (errors). Events per session: user + assistant +
usage + results + one ``opencode_patch`` note per ``patch`` part (3, 3, 7).
"""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest
from _importer_checks import assert_all_rejected, snapshot, sqlite_mutated, tiny_png
from click.testing import CliRunner
from corpus_support import CORPUS, NO_IMPORTER_YET, corpus_files, corpus_format, corpus_name, require_corpus

from latch.cli import _load_commands, cli
from latch.events import AssistantMessage, CompactionMarker, SystemNote, ToolResult, Usage, UserMessage
from latch.host.ingest import import_all, import_file
from latch.importers import TranscriptError, detect, parse_all_file
from latch.importers.opencode import OpenCodeImporter
from latch.store import EventStore

DB = CORPUS / "opencode" / "lantern_opencode.db"
S1, S2, S3 = "ses_03156b771ffeANj3CiDnYkqmmr", "ses_031559a74ffe4reBgr5U6MnTO4", "ses_031541bf9ffeMiy2LOFii47rch"

# session id -> (user, assistant, usage, calls, results, errors, input tokens, output tokens, events)
CORPUS_COUNTS = {
    S1: (1, 1, 1, 0, 0, 0, 2050, 163, 3),
    S2: (1, 1, 1, 0, 0, 0, 2050, 867, 3),
    S3: (1, 2, 2, 1, 1, 0, 4100, 955, 7),
}


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _copy(tmp_path: Path, name: str = "opencode.db") -> Path:
    out = tmp_path / name
    src = _ro(DB)
    dst = sqlite3.connect(out)
    src.backup(dst)
    src.close()
    dst.close()
    return out


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
    sessions = parse_all_file(DB, "opencode")
    assert [s.external_key for s in sessions] == [f"opencode:{k}" for k in CORPUS_COUNTS]
    assert {s.external_key.split(":", 1)[1]: _counts(s) for s in sessions} == CORPUS_COUNTS
    assert {(s.workspace, s.format, s.meta["model"], s.meta["version"]) for s in sessions} == {
        ("/work", "opencode", "qwen3:0.6b", "1.18.13")
    }
    assert all(s.parent_key is None and "parent_session_id" not in s.meta for s in sessions)
    s3 = sessions[2]
    kinds = [type(e.event).__name__ for e in s3.events]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "Usage",
        "ToolResult",
        "SystemNote",
        "AssistantMessage",
        "Usage",
    ]
    user, asst, usage, result, patch, answer, _ = (e.event for e in s3.events)
    assert user.text.startswith('"In src/orders.py make average_item_price return 0') and not user.is_meta
    call = asst.tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)["filePath"]) == ("call_caq8bm6j", "write", "src/orders.py")
    assert asst.reasoning_reported and asst.text == "" and asst.model == "qwen3:0.6b"
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.request_id,
    ) == (2050, 854, 0, 0, "msg_fceabe718001hmxkaiVHsLVLca")
    assert (result.call_id, result.content, result.is_error) == ("call_caq8bm6j", "Wrote file successfully.", False)
    assert (patch.subtype, patch.text) == ("opencode_patch", "files changed: /work/src/orders.py")
    assert answer.text.startswith("The file has been successfully written")
    # time_created 1785878799508 ms; the result's ts is its state.time.end (1785878930722 ms)
    assert (s3.events[0].source_ref, s3.events[0].ts) == (
        "message:msg_fceabe4940010ROAhr7W7R1ZRd",
        "2026-08-04T21:26:39.508Z",
    )
    assert s3.events[3].ts == "2026-08-04T21:28:50.722Z"
    # S2's only answer is reasoning, no text part: still one request with its usage
    a2 = sessions[1].events[1].event
    assert isinstance(a2, AssistantMessage) and a2.text == "" and a2.reasoning_reported


def test_parse_returns_the_largest_session(corpus_dir):
    parsed = OpenCodeImporter().parse(DB, DB.read_bytes())
    assert parsed.external_key == f"opencode:{S3}" and len(parsed.events) == 7


def test_import_all_is_one_idempotent_transaction(corpus_dir, tmp_path):
    with EventStore(tmp_path / "s.db") as store:
        got = import_all(store, DB)
        assert [(p.external_key, len(seqs)) for _, p, seqs in got] == [
            (f"opencode:{k}", v[-1]) for k, v in CORPUS_COUNTS.items()
        ]
        after = snapshot(store)
        assert after[0] == 13 and len(after[1]) == 3
        again = import_all(store, DB)
        assert [sid for sid, _, _ in again] == [sid for sid, _, _ in got] and all(s == [] for _, _, s in again)
        assert snapshot(store) == after
        sid, parsed, seqs = import_file(store, DB)
        assert (parsed.external_key, seqs) == (f"opencode:{S3}", [])


def test_cli_import_prints_one_line_per_session(corpus_dir, tmp_path):
    _load_commands()
    res = CliRunner().invoke(cli, ["--db", str(tmp_path / "c.db"), "import", str(DB)])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert [ln.rsplit(", ", 1)[1] for ln in lines] == ["3 new events", "3 new events", "7 new events"]
    assert all("(opencode)" in ln for ln in lines)


def test_sniff_claims_only_opencode_databases(corpus_dir):
    imp = OpenCodeImporter()
    for p in corpus_files():
        score = imp.sniff(p, p.read_bytes()[:65536])
        assert (score > 0) == (corpus_format(p) == "opencode"), corpus_name(p)
        if corpus_format(p) not in NO_IMPORTER_YET:
            assert detect(p, p.read_bytes()).PLUGIN_NAME == corpus_format(p), corpus_name(p)
    # the corpus file's table definitions lie past its first 64 KiB: the head alone does not show them
    assert b"CREATE TABLE `part`" not in DB.read_bytes()[:65536]


# ----------------------------------------------------------------------------- malformed databases
def _rejected(store, path: Path, where: str | None, reason: str, fmt: str | None = "opencode") -> None:
    assert_all_rejected(store, path, where, reason, fmt)


def _mutated(tmp_path: Path, name: str, sql: str, args: tuple = ()) -> Path:
    return sqlite_mutated(_copy(tmp_path, name), sql, args)


TOOL_PART = "prt_fceade4fe001i8331hPTf7U9h2"
USER_MSG = "msg_fceabe4940010ROAhr7W7R1ZRd"


def test_malformed_databases_are_rejected_and_change_nothing(corpus_dir, tmp_path):
    with EventStore(tmp_path / "s.db") as store:
        import_all(store, DB)
        data = DB.read_bytes()
        empty = tmp_path / "empty.db"
        empty.write_bytes(b"")
        with pytest.raises(TranscriptError, match="file is empty"):
            import_all(store, empty, "opencode")
        text = tmp_path / "notes.db"
        text.write_text("SQLite is nice\n", encoding="utf-8")
        _rejected(store, text, None, "not a SQLite database")
        binary = tmp_path / "bin.db"
        binary.write_bytes(bytes(range(256)) * 4)
        _rejected(store, binary, None, "not a SQLite database")
        cut = tmp_path / "cut.db"
        cut.write_bytes(data[: len(data) // 2])
        _rejected(store, cut, None, "unreadable SQLite database")
        other = tmp_path / "other.db"
        with sqlite3.connect(other) as db:
            db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        _rejected(store, other, "table session", "missing table (not an OpenCode database)")
        _rejected(store, other, None, "unrecognized transcript format", fmt=None)
        pwhere = f"table part row id {TOOL_PART!r}"
        _rejected(
            store,
            _mutated(tmp_path, "blob.db", "UPDATE part SET data = X'7b7d' WHERE id = ?", (TOOL_PART,)),
            pwhere,
            "column 'data' must be text, got blob",
        )
        _rejected(
            store,
            _mutated(tmp_path, "arr.db", "UPDATE part SET data = '[1]' WHERE id = ?", (TOOL_PART,)),
            pwhere,
            "column 'data' must hold a JSON object, got array",
        )
        _rejected(
            store,
            _mutated(tmp_path, "json.db", "UPDATE part SET data = '{' WHERE id = ?", (TOOL_PART,)),
            pwhere,
            "column 'data': invalid JSON",
        )
        bad = json.dumps({"type": "tool", "tool": 5, "callID": "c", "state": {"status": "completed", "input": {}}})
        _rejected(
            store,
            _mutated(tmp_path, "shape.db", "UPDATE part SET data = ? WHERE id = ?", (bad, TOOL_PART)),
            pwhere,
            "field 'data.tool' must be a string, got number",
        )
        bad = json.dumps({"type": "tool", "tool": "x", "callID": "c", "state": {"status": "done", "input": {}}})
        _rejected(
            store,
            _mutated(tmp_path, "status.db", "UPDATE part SET data = ? WHERE id = ?", (bad, TOOL_PART)),
            pwhere,
            "field 'data.state.status' must be 'pending', 'running', 'completed' or 'error', got 'done'",
        )
        bad = json.dumps(
            {
                "type": "step-finish",
                "reason": "stop",
                "cost": 0,
                "tokens": {"input": -1, "output": 1, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            }
        )
        _rejected(
            store,
            _mutated(
                tmp_path, "tok.db", "UPDATE part SET data = ? WHERE id = ?", (bad, "prt_fceade5c20017eW9QIhH4pregQ")
            ),
            "table part row id 'prt_fceade5c20017eW9QIhH4pregQ'",
            "field 'data.tokens.input' must be a non-negative integer, got number",
        )
        _rejected(
            store,
            _mutated(
                tmp_path,
                "role.db",
                "UPDATE message SET data = json_set(data, '$.role', 'tool') WHERE id = ?",
                (USER_MSG,),
            ),
            f"table message row id {USER_MSG!r}",
            "field 'data.role' must be 'user' or 'assistant', got 'tool'",
        )
        _rejected(
            store,
            _mutated(tmp_path, "stray.db", "UPDATE message SET session_id = 'nope' WHERE id = ?", (USER_MSG,)),
            f"table message row id {USER_MSG!r}",
            "session_id 'nope' names no row of table session",
        )
        _rejected(
            store,
            _mutated(tmp_path, "orphan.db", "UPDATE part SET message_id = 'nope' WHERE id = ?", (TOOL_PART,)),
            pwhere,
            "message_id 'nope' names no row of table message",
        )
        assert len(store.sessions()) == 3


# ----------------------------------------------------------------------------- synthetic shapes
def _schema() -> list[str]:
    """The corpus database's table definitions (the synthetic shapes are built on them; skipped without it)."""
    require_corpus()
    with _ro(DB) as db:
        return [
            r[0]
            for r in db.execute(
                "SELECT sql FROM sqlite_master WHERE name IN ('session', 'message', 'part') AND type = 'table'"
            )
        ]


def _build(path: Path, sessions: list[dict], messages: list[tuple]) -> None:
    """A database with the corpus's schema; ``messages`` are ``(session_id, message data, [part data])``."""
    db = sqlite3.connect(path)
    for sql in _schema():
        db.execute(sql)
    for n, s in enumerate(sessions):
        db.execute(
            "INSERT INTO session(id, project_id, parent_id, slug, directory, title, version, time_created, "
            "time_updated, model) VALUES (?, 'p', ?, 'slug', ?, 't', '1.0', ?, 0, ?)",
            (s["id"], s.get("parent"), s.get("dir", "/w"), 1_000 + n, json.dumps({"id": "m1"})),
        )
    for n, (sid, info, parts) in enumerate(messages):
        mid = f"msg_{n:03d}"
        db.execute(
            "INSERT INTO message(id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, 0, ?)",
            (mid, sid, 1_700_000_000_000 + n, json.dumps(info)),
        )
        for k, part in enumerate(parts):
            db.execute(
                "INSERT INTO part(id, message_id, session_id, time_created, time_updated, data) "
                "VALUES (?, ?, ?, 0, 0, ?)",
                (f"prt_{n:03d}_{k:02d}", mid, sid, json.dumps(part)),
            )
    db.commit()
    db.close()


def _tokens(i, o, read=0, write=0):
    return {"input": i, "output": o, "reasoning": 0, "cache": {"read": read, "write": write}}


def test_synthetic_shapes(tmp_path):
    png = tiny_png(4, 3)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    user = {"role": "user"}
    asst = {"role": "assistant", "modelID": "claude-x", "tokens": _tokens(9, 9)}
    tool = lambda cid, state: {"type": "tool", "tool": "bash", "callID": cid, "state": state}  # noqa: E731
    msgs = [
        (
            "s1",
            user,
            [
                {"type": "text", "text": "look"},
                {"type": "file", "mime": "image/png", "url": url},
                {"type": "text", "text": "ignored", "ignored": True},
                {"type": "file", "mime": "text/plain", "url": "file:///w/a.txt"},
            ],
        ),
        (
            "s1",
            asst,
            [  # two steps in one message: two requests
                {"type": "step-start"},
                {"type": "reasoning", "text": "hm", "time": {"start": 1}},
                {"type": "text", "text": "calling"},
                tool(
                    "c1",
                    {
                        "status": "completed",
                        "input": {"command": "ls"},
                        "output": "a.txt",
                        "title": "ls",
                        "metadata": {},
                        "time": {"start": 1, "end": 2},
                        "attachments": [{"type": "file", "mime": "image/png", "url": url}],
                    },
                ),
                tool(
                    "c2",
                    {
                        "status": "error",
                        "input": {"command": "false"},
                        "error": "exit 1",
                        "time": {"start": 1, "end": 2},
                    },
                ),
                {"type": "step-finish", "reason": "tool-calls", "cost": 0.5, "tokens": _tokens(100, 20, 700, 50)},
                {"type": "patch", "hash": "h", "files": ["/w/a.txt", "/w/b.txt"]},
                {"type": "step-start"},
                tool("c3", {"status": "running", "input": {"command": "sleep 9"}, "time": {"start": 3}}),
                {
                    "type": "retry",
                    "attempt": 1,
                    "error": {"name": "APIError", "data": {"message": "overloaded"}},
                    "time": {"created": 3},
                },
                {"type": "step-finish", "reason": "tool-calls", "cost": 0, "tokens": _tokens(5, 6)},
            ],
        ),
        ("s1", user, [{"type": "compaction", "auto": True}]),
        (
            "s1",
            {
                **asst,
                "summary": True,
                "time": {"created": 5, "completed": 6},
                "error": {"name": "MessageAbortedError", "data": {"message": "aborted"}},
            },
            [{"type": "text", "text": "summary so far"}],
        ),  # no step parts: the message's own tokens
        ("s1", user, [{"type": "text", "text": "synthetic", "synthetic": True}]),
        ("s2", user, [{"type": "text", "text": "child"}]),
        ("s2", asst, [{"type": "step-start"}, tool("d1", {"status": "pending", "input": {}, "raw": ""})]),
    ]
    path = tmp_path / "opencode.db"
    _build(path, [{"id": "s1", "dir": "/repo"}, {"id": "s2", "parent": "s1"}, {"id": "empty"}], msgs)
    assert detect(path, path.read_bytes()).PLUGIN_NAME == "opencode"
    s1, s2 = parse_all_file(path)  # the session without messages is left out
    assert (s1.external_key, s1.workspace, s2.external_key) == ("opencode:s1", "/repo", "opencode:s2")
    assert (s2.parent_key, s2.meta["parent_session_id"], s1.parent_key) == ("opencode:s1", "s1", None)
    ev = [e.event for e in s1.events]
    assert [type(e).__name__ for e in ev] == [
        "UserMessage",
        "AssistantMessage",
        "Usage",
        "ToolResult",
        "ToolResult",
        "SystemNote",
        "AssistantMessage",
        "Usage",
        "ToolResult",
        "SystemNote",
        "CompactionMarker",
        "AssistantMessage",
        "Usage",
        "SystemNote",
        "UserMessage",
    ]
    u, a1, us1, r1, r2, patch, a2, us2, missing, retry, compaction, summary, us3, err, meta = ev
    assert isinstance(u, UserMessage) and u.text == "look" and u.media[0].media_type == "image/png"
    assert (a1.text, a1.reasoning_reported, a1.model, [c.id for c in a1.tool_calls]) == (
        "calling",
        True,
        "claude-x",
        ["c1", "c2"],
    )
    assert isinstance(us1, Usage) and (
        us1.input_tokens,
        us1.output_tokens,
        us1.cache_read_tokens,
        us1.cache_write_tokens,
        us1.request_id,
    ) == (100, 20, 700, 50, "msg_001")
    assert isinstance(r1, ToolResult) and (r1.content, r1.is_error, len(r1.media)) == ("a.txt", False, 1)
    assert (r2.call_id, r2.content, r2.is_error) == ("c2", "exit 1", True)
    assert isinstance(patch, SystemNote) and patch.text == "files changed: /w/a.txt, /w/b.txt"
    assert [c.id for c in a2.tool_calls] == ["c3"] and (us2.input_tokens, us2.request_id) == (5, "msg_001#1")
    assert missing.missing and missing.call_id == "c3"  # running when the next user message came
    assert (retry.subtype, retry.text) == ("api_error", "retry 1: overloaded")
    assert isinstance(compaction, CompactionMarker) and compaction.trigger == "auto"
    assert summary.text == "summary so far" and (us3.input_tokens, us3.output_tokens) == (9, 9)
    assert (err.subtype, err.text) == ("api_error", "MessageAbortedError: aborted")
    assert meta.is_meta and meta.text == "synthetic"
    assert len(s1.artifacts) == 1  # the same image twice is one artifact
    # a pending call at the end of a session has no result yet
    assert [type(e.event).__name__ for e in s2.events] == ["UserMessage", "AssistantMessage"]
    assert s2.stats["missing_results"] == 0


def test_sub_agent_session_links_to_its_parent_in_the_store(tmp_path):
    path = tmp_path / "opencode.db"
    _build(
        path,
        [{"id": "kid", "parent": "top"}, {"id": "top"}],
        [
            ("kid", {"role": "user"}, [{"type": "text", "text": "sub"}]),
            ("top", {"role": "user"}, [{"type": "text", "text": "main"}]),
        ],
    )
    with EventStore(tmp_path / "s.db") as store:
        import_all(store, path)
        by_key = {s.external_key: s for s in store.sessions()}
        assert by_key["opencode:kid"].parent_id == by_key["opencode:top"].id
