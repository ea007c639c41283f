"""What a new user can throw at the ``latch`` command: every mistake is one line, never a traceback.

Each test reproduces a failure found by trying Latch from scratch (lone surrogates, store files
that are not databases or are locked, unwritable report paths, absurd budgets, forgotten
sessions, empty or missing files) and pins the one-line answer.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from cli_support import invoke

from latch.cli import _load_commands
from latch.store import EventStore, StoreError

# An OpenAI-chat transcript whose texts carry a lone surrogate (legal JSON: "\ud800").
SURROGATE_CHAT = (
    '{"messages": ['
    '{"role": "user", "content": "deploy \\ud800 the zebra service"},'
    '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",'
    ' "function": {"name": "bash", "arguments": "{\\"command\\": \\"echo zebra \\\\ud800\\"}"}}]},'
    '{"role": "tool", "tool_call_id": "c1", "content": "zebra \\udfff done"},'
    '{"role": "assistant", "content": "zebra deployed \\ud83d"}'
    "]}"
)


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def run_latch(*args, db_path=db, env=None):
        return invoke(tmp_path, *args, db=db_path, columns=200, env=env, catch_exceptions=False)

    return run_latch


def _one_line_error(res, *needles: str, code: int = 1) -> str:
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------- 1. lone surrogates
def test_lone_surrogates_print_as_replacement_characters(run, tmp_path):
    f = tmp_path / "surrogate.json"
    f.write_text(SURROGATE_CHAT, encoding="ascii")
    res = run("import", str(f))
    assert res.exit_code == 0, res.output
    sid = json.loads(run("sessions", "--json").output)[0]["id"]

    show = run("show", sid)
    assert show.exit_code == 0, show.output
    assert "user: deploy \ufffd the zebra service" in show.output
    assert "tool_result(c1): zebra \ufffd done" in show.output
    assert "assistant: zebra deployed \ufffd" in show.output

    search = run("search", "zebra")
    assert search.exit_code == 0, search.output
    assert search.output.count("\ufffd") == 4  # user, call arguments, result, answer

    hits = json.loads(run("search", "--json", "zebra").output)
    assert [h["kind"] for h in hits] == ["assistant_message", "tool_result", "assistant_message", "user_message"]
    # arguments are indexed decoded (so escaped CJK is searchable): the lone surrogate prints as U+FFFD
    assert hits[2]["text"] == 'bash {"command": "echo zebra \ufffd"}'
    assert hits[0]["text"] == "zebra deployed \ufffd" and hits[3]["text"] == "deploy \ufffd the zebra service"

    for args in (
        ("state", sid),
        ("state", "--json", sid),
        ("context", sid),
        ("context", "--json", sid),
        ("evidence", sid),
        ("evidence", "--json", sid),
        ("sessions",),
        ("sessions", "--json"),
    ):
        res = run(*args)
        assert res.exit_code == 0, (args, res.output)

    rep = run("replay", str(f), "--json", "-")
    assert rep.exit_code == 0, rep.output
    assert json.loads(rep.output)["session"] == sid
    out = tmp_path / "replay.json"
    assert run("replay", str(f), "--json", str(out)).exit_code == 0
    assert json.loads(out.read_text(encoding="utf-8"))["session"] == sid


def test_error_messages_with_surrogate_paths_stay_one_line(run, tmp_path):
    missing = str(tmp_path / "gone\udcff.jsonl")  # a file name with an undecodable byte
    _one_line_error(run("import", missing), "gone\ufffd.jsonl", "cannot read: No such file or directory")


# ----------------------------------------------------------------------------- 2. deeply nested JSON
DEEP = 2000


def _store_snapshot(db: Path) -> tuple[list[str], int]:
    with EventStore(db) as s:
        return [x.id for x in s.sessions()], s.count_events()


@pytest.mark.parametrize(
    "name, data",
    [
        ("deep.json", '{"messages":' + "[" * DEEP + "]" * DEEP + "}"),
        ("deep.traj", '{"history":[{"role":"user","content":' + "[" * DEEP + "]" * DEEP + "}]}"),
        ("deep.jsonl", "[" * DEEP + "]" * DEEP + "\n"),
        ("deep_object.json", '{"messages":[' + '{"a":' * DEEP + "1" + "}" * DEEP + "]}"),
    ],
)
def test_deeply_nested_json_is_one_line_and_leaves_the_store_unchanged(run, tmp_path, name, data):
    good = tmp_path / "good.json"
    good.write_text(SURROGATE_CHAT, encoding="ascii")
    assert run("import", str(good)).exit_code == 0
    before = _store_snapshot(tmp_path / "latch.db")
    f = tmp_path / name
    f.write_text(data, encoding="utf-8")
    _one_line_error(run("import", str(f)), f"{f}: JSON nested too deeply")
    _one_line_error(run("replay", str(f)), f"{f}: JSON nested too deeply")
    assert _store_snapshot(tmp_path / "latch.db") == before


def test_deep_jsonl_line_after_good_lines_names_the_line(run, tmp_path):
    lines = [
        json.dumps({"type": "user", "uuid": f"u{i}", "sessionId": "s", "message": {"role": "user", "content": "hi"}})
        for i in range(3)
    ]
    f = tmp_path / "deep_line.jsonl"
    f.write_text("\n".join([*lines, "[" * DEEP + "]" * DEEP]) + "\n", encoding="utf-8")
    _one_line_error(run("import", str(f)), f"{f}:line 4: JSON nested too deeply")


def test_any_sniffer_hitting_the_recursion_limit_means_not_mine(tmp_path):
    from latch.importers import TranscriptError, builtin_importers, parse_file
    from latch.importers.base import Importer

    class NaiveSniffer(Importer):  # a plugin's sniffer that parses with the json module directly
        PLUGIN_NAME = "naive"

        def sniff(self, path, head):
            json.loads(head)
            return 100

    f = tmp_path / "deep.json"
    f.write_text('{"messages":' + "[" * DEEP + "]" * DEEP + "}", encoding="utf-8")
    with pytest.raises(TranscriptError, match="JSON nested too deeply"):
        parse_file(f, importers=[NaiveSniffer, *builtin_importers()])
    ok = tmp_path / "ok.json"
    ok.write_text(SURROGATE_CHAT, encoding="ascii")
    assert parse_file(ok, importers=[*builtin_importers()]).format == "openai-chat"


# ----------------------------------------------------------------------------- 3. store open failures
def test_store_paths_that_cannot_hold_a_database(run, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database\n" * 200)
    _one_line_error(run("sessions", db_path=junk), f"cannot open the Latch store at {junk}: file is not a database")
    _one_line_error(
        run("sessions", db_path=Path("/dev/null")), "cannot open the Latch store at /dev/null: not a regular file"
    )
    _one_line_error(
        run("sessions", db_path=junk / "x.db"), f"cannot open the Latch store at {junk}/x.db: {junk} is not a folder"
    )
    (tmp_path / "adir").mkdir()
    res = run("sessions", db_path=tmp_path / "adir")  # a folder: click's usage error
    assert res.exit_code == 2 and "is a directory" in res.output
    home = junk / "home"  # LATCH_HOME below a regular file: the default database cannot exist
    _one_line_error(
        run("sessions", db_path=None, env={"LATCH_HOME": str(home)}),
        f"cannot open the Latch store at {home}/workspaces/",
        f"{junk} is not a folder",
    )
    assert junk.read_bytes() == b"this is not a database\n" * 200


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_store_on_a_pseudo_file_system(run):
    _one_line_error(
        run("sessions", db_path=Path("/proc/latch.db")),
        "cannot open the Latch store at /proc/latch.db: unable to open database file",
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_store_in_an_unwritable_folder(run, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _one_line_error(run("sessions", db_path=ro / "latch.db"), f"cannot open the Latch store at {ro}/latch.db")
        _one_line_error(
            run("sessions", db_path=None, env={"LATCH_HOME": str(ro / "home")}),
            "cannot open the Latch store at",
            "Permission denied",
        )
    finally:
        ro.chmod(0o700)


@pytest.fixture
def locked(tmp_path):
    """A store with one session, and another connection holding its write lock (BEGIN IMMEDIATE)."""
    db = tmp_path / "locked.db"
    with EventStore(db) as s:
        sid = s.create_session(external_key="x")
        s.append(sid, [_user("before the lock")])
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    store = EventStore(db, busy_timeout_ms=50)  # readers still open a WAL database
    yield store, sid, db
    store.close()
    holder.execute("ROLLBACK")
    holder.close()


def _user(text):
    from latch.events import UserMessage

    return UserMessage(text)


def test_every_write_path_of_a_locked_store_is_a_busy_store_error(locked):
    from latch.store import PendingEvent

    store, sid, db = locked
    busy = f"the store at {db} is busy (locked by another process); try again"
    writes = {
        "append": lambda: store.append(sid, [_user("x")]),
        "import_session": lambda: store.import_session(
            external_key="y", source=None, format=None, workspace=None, events=[PendingEvent(_user("y"), "line:1")]
        ),
        "put_artifact": lambda: store.put_artifact(b"\x89PNG", "image/png"),
        "create_session": lambda: store.create_session(external_key="z"),
        "append_kernel_records": lambda: store.append_kernel_records(sid, "s", [("k", 1, {})]),
    }
    for name, write in writes.items():
        with pytest.raises(StoreError) as info:
            write()
        assert str(info.value) == busy, name
    assert store.count_events() == 1 and [s.id for s in store.sessions()] == [sid]  # reads still work (WAL)
    assert [e.event.text for e in store.events(sid)] == ["before the lock"]


def test_an_exclusively_locked_store_is_busy_on_open_and_in_the_cli(run, tmp_path, monkeypatch):
    db = tmp_path / "latch.db"
    EventStore(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # readers are locked out too
    try:
        with pytest.raises(StoreError, match=r"is busy \(locked by another process\); try again"):
            EventStore(db, busy_timeout_ms=50)
        monkeypatch.setitem(EventStore.__init__.__kwdefaults__, "busy_timeout_ms", 50)
        _one_line_error(run("sessions"), f"the store at {db} is busy (locked by another process); try again")
        f = tmp_path / "chat.json"
        f.write_text(SURROGATE_CHAT, encoding="ascii")
        _one_line_error(run("import", str(f)), "is busy")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# ----------------------------------------------------------------------------- 4. report paths first
def test_unwritable_report_paths_fail_before_anything_is_imported(run, tmp_path):
    f = tmp_path / "chat.json"
    f.write_text(SURROGATE_CHAT, encoding="ascii")
    res = run("replay", str(f), "--json", str(tmp_path / "nope" / "out.json"))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert (
        f"Invalid value for '--json': cannot write {tmp_path}/nope/out.json: folder {tmp_path}/nope does not "
        "exist" in res.output
    )
    res = run("replay", str(f), "--json", str(tmp_path))
    assert res.exit_code == 2 and "is a directory" in res.output
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    res = run("stress", "--events", "10", "--json", str(tmp_path / "nope" / "r.json"))
    assert res.exit_code == 2 and "does not exist" in res.output
    res = run("bench", "--out", str(blocker / "out"), "--scenario-events", "10")
    assert res.exit_code == 2 and f"cannot write into {blocker}/out: {blocker} is not a folder" in res.output
    assert json.loads(run("sessions", "--json").output) == []  # nothing imported
    assert not (tmp_path / "nope").exists() and blocker.read_text(encoding="utf-8") == "x"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_report_path_on_a_pseudo_file_system(run, tmp_path):
    f = tmp_path / "chat.json"
    f.write_text(SURROGATE_CHAT, encoding="ascii")
    res = run("replay", str(f), "--json", "/proc/latch-report.json")
    assert res.exit_code == 2 and "cannot write /proc/latch-report.json" in res.output
    assert json.loads(run("sessions", "--json").output) == []


# ----------------------------------------------------------------------------- 5. budgets
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"


def test_recent_above_the_hard_budget_is_lowered_and_the_bound_uses_it(run):
    res = run("replay", str(EXAMPLE), "--window", "8000", "--reserve", "1000", "--recent", "999999", "--no-harness")
    assert res.exit_code == 0, res.output
    assert "window 8,000 · reserve 1,000 · recent 999,999 → 7,000 (limited by window − reserve) tokens" in res.output
    doc = json.loads(
        run(
            "replay",
            str(EXAMPLE),
            "--window",
            "8000",
            "--reserve",
            "1000",
            "--recent",
            "999999",
            "--no-harness",
            "--json",
            "-",
        ).output
    )
    b, s = doc["budget"], doc["summary"]
    assert (b["recent_tokens"], b["requested_recent_tokens"]) == (7_000, 999_999)
    assert s["violations"] == []
    # the requested value would have made these rotations a (false) violation
    assert s["rotations"] > s["conversation_tokens"] / (0.25 * 999_999) + 1
    effective = min(r["recent_limit_tokens"] for r in doc["requests"])
    assert s["rotation_bound_recent_tokens"] == effective <= 7_000
    assert s["rotation_bound"] == round(s["conversation_tokens"] / (0.25 * effective) + 1, 2)


def test_absurd_budgets_and_limits_are_usage_errors(run, tmp_path):
    for args in (("--window", "100000001"), ("--reserve", "100000001"), ("--recent", "100000001")):
        res = run("replay", str(EXAMPLE), *args)
        assert res.exit_code == 2 and "is not in the range" in res.output and "100000000" in res.output, res.output
    assert json.loads(run("sessions", "--json").output) == []
    sid = json.loads(run("replay", str(EXAMPLE), "--json", "-").output)["session"]
    for limit in ("-1", "0"):
        res = run("show", sid, "--limit", limit)
        assert res.exit_code == 2 and "is not in the range x>=1" in res.output
    cfg = tmp_path / "huge.toml"
    cfg.write_text('[models."m"]\ncontext_window_tokens = 1000000000\n', encoding="utf-8")
    res = run("replay", str(EXAMPLE), "--config", str(cfg))
    assert res.exit_code == 2
    assert f"{cfg}: models.m.context_window_tokens must be at most 100,000,000 tokens, got 1,000,000,000" in res.output


def test_a_model_without_a_config_entry_says_the_default_window_is_used(run, tmp_path):
    res = run("replay", str(EXAMPLE), "--model", "gpt-9")
    assert res.exit_code == 0, res.output
    assert "window 256,000 · reserve 32,000 · recent 64,000 tokens" in res.output
    assert "window: Latch's default (model gpt-9 has no [models] entry in the config)" in res.output
    cfg = tmp_path / "models.toml"
    cfg.write_text('[models."gpt-9"]\ncontext_window_tokens = 128000\n', encoding="utf-8")
    res = run("replay", str(EXAMPLE), "--model", "gpt-9", "--config", str(cfg))
    assert "window 128,000" in res.output and "Latch's default" not in res.output
    sid = json.loads(run("sessions", "--json").output)[0]["id"]
    assert (
        "window: Latch's default (model gpt-9 has no [models] entry" in run("context", sid, "--model", "gpt-9").output
    )
    rep = json.loads(run("context", sid, "--model", "gpt-9", "--config", str(cfg), "--json").output)
    assert (rep["window_source"], rep["context_window_tokens"]) == ("config", 128_000)


# ----------------------------------------------------------------------------- 8. forgotten sessions
def _chat(path: Path, word: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"find the {word} needle"},
                    {"role": "assistant", "content": f"the {word} needle is here"},
                ]
            }
        ),
        encoding="utf-8",
    )
    return path


def test_forgotten_sessions_leave_search_and_refuse_reimport(run, tmp_path):
    a, b = _chat(tmp_path / "a.json", "red"), _chat(tmp_path / "b.json", "blue")
    run("import", str(a), str(b))
    sid_a, sid_b = (s["id"] for s in json.loads(run("sessions", "--json").output))
    assert len(json.loads(run("search", "--json", "needle").output)) == 4
    assert run("forget", sid_a).exit_code == 0

    hits = json.loads(run("search", "--json", "needle").output)
    assert [h["session"] for h in hits] == [sid_b, sid_b]
    assert "red" not in run("search", "needle").output
    assert len(json.loads(run("search", "--json", "--include-forgotten", "needle").output)) == 4
    assert [h["session"] for h in json.loads(run("search", "--json", "--session", sid_a, "red").output)] == [sid_a] * 2

    with EventStore(tmp_path / "latch.db") as s:
        events = s.count_events()
    res = run("import", str(a), str(b))
    assert res.exit_code == 0, res.output
    assert f"{a}: session {sid_a} is forgotten (tombstoned by `latch forget`); nothing imported" in res.output
    assert f"{b}: session {sid_b} (openai-chat), 0 new events" in res.output
    _one_line_error(
        run("replay", str(a)),
        f"{a}: session {sid_a} is forgotten (tombstoned by `latch forget`); forgotten sessions are not replayed",
    )
    with EventStore(tmp_path / "latch.db") as s:
        assert s.count_events() == events


def test_forget_needs_a_session_and_counts_visible_sessions(run, tmp_path):
    _one_line_error(run("forget", ""), "empty session id")
    _one_line_error(run("forget", "  "), "empty session id")
    _one_line_error(run("show", ""), "empty session id")
    with EventStore(tmp_path / "latch.db") as s:  # three sessions whose ids share their first digit
        keys = [k for k in (f"k{i}" for i in range(200)) if s.session_id_for(k)[0] == "a"][:3]
        ids = [s.create_session(external_key=k) for k in keys]
    assert all(i.startswith("a") for i in ids) and len(set(ids)) == 3
    _one_line_error(run("forget", "a"), "session prefix 'a' is ambiguous (3 sessions)")
    assert run("forget", ids[0]).exit_code == 0
    _one_line_error(run("forget", "a"), "session prefix 'a' is ambiguous (2 sessions)")  # the forgotten one left out
    assert run("forget", ids[1]).exit_code == 0
    res = run("forget", "a")  # one visible session left: the prefix names it
    assert res.exit_code == 0 and res.output.startswith(f"session {ids[2]} tombstoned")
    _one_line_error(run("forget", "a"), "session prefix 'a' names 3 sessions, all already forgotten")
    assert run("forget", ids[0]).output == f"session {ids[0]} was already tombstoned; nothing appended\n"


# ----------------------------------------------------------------------------- 9. one error per mistake
def test_a_missing_file_is_the_same_line_from_import_and_replay(run, tmp_path):
    missing = tmp_path / "missing.jsonl"
    want = f"Error: {missing}: cannot read: No such file or directory"
    assert _one_line_error(run("import", str(missing))) == want
    assert _one_line_error(run("replay", str(missing))) == want


@pytest.mark.parametrize("data", [b"", b"  \n\n\t", b"\xef\xbb\xbf\n", b"\xff\xfe \x00\n\x00"])
@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".traj", ".md"])
def test_an_empty_file_says_so_without_format(run, tmp_path, data, suffix):
    f = tmp_path / f"empty{suffix}"
    f.write_bytes(data)
    for command in ("import", "replay"):
        _one_line_error(run(command, str(f)), f"{f}: file is empty")


def test_jsonl_and_json_errors_share_one_format(run, tmp_path):
    line = json.dumps({"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "hi"}})
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text(f'{line}\n{line}\n  {{"type": "user", oops}}\n', encoding="utf-8")
    _one_line_error(
        run("import", str(jsonl)),
        f"{jsonl}:line 3 column 20: invalid JSON: Expecting property name enclosed in double quotes",
    )
    doc = tmp_path / "bad.json"
    doc.write_text('{"messages": [\n  {"role": "user", oops}\n]}\n', encoding="utf-8")
    _one_line_error(
        run("import", str(doc), "--format", "openai-chat"),
        f"{doc}:line 2 column 20: invalid JSON: Expecting property name enclosed in double quotes",
    )


def test_a_named_format_that_does_not_fit_says_which_format_the_file_looks_like(run, tmp_path):
    # Found by a new user: `latch replay trajectory.json --format codex` said only "invalid JSON" of a valid
    # JSON file. The error keeps the importer's own location and reason and adds what detection finds.
    line = json.dumps({"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "hi"}})
    claude = tmp_path / "claude.jsonl"
    claude.write_text(f"{line}\n", encoding="utf-8")
    chat = tmp_path / "chat.json"
    chat.write_text(
        '{"messages": [\n  {"role": "user", "content": "hi"},\n  {"role": "assistant", "content": "ok"}\n]}\n',
        encoding="utf-8",
    )
    db = tmp_path / "latch.db"
    for command in ("import", "replay"):
        _one_line_error(
            run(command, str(claude), "--format", "codex"),
            f"{claude}:line 1: ",
            "; the file looks like claude-code, not codex: pass --format claude-code or leave --format out",
        )
        _one_line_error(
            run(command, str(chat), "--format", "codex"),
            f"{chat}:line 1 column 15: invalid JSON: Expecting value;",
            "the file looks like openai-chat, not codex",
        )
    assert not db.exists()  # nothing was imported, so no store was created
    # The right format named, or none: no hint, the file imports.
    assert run("import", str(chat), "--format", "openai-chat").exit_code == 0
    assert run("import", str(claude)).exit_code == 0


def test_a_named_format_hint_never_leads_to_another_failing_format(run, tmp_path):
    """A file that sniffs as openai-chat but does not parse as it either: ``--format swe-agent`` keeps its own
    error and suggests nothing (``--format openai-chat`` would fail too)."""
    doc = tmp_path / "chat.json"
    doc.write_text('{"messages": [\n  {"role": "tool", "content": "x"}\n]}\n', encoding="utf-8")
    out = run("import", str(doc), "--format", "swe-agent")
    _one_line_error(out, f"{doc}:top level: missing field 'history'")
    assert "--format openai-chat" not in out.output
    _one_line_error(
        run("import", str(doc), "--format", "openai-chat"), f"{doc}:messages[0]: missing field 'tool_call_id'"
    )
