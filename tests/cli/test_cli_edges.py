"""CLI edges and the search of glued terms, each with its failing input."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cli_support import invoke
from corpus_support import REPO

from latch.cli import _load_commands
from latch.events import ToolResult, UserMessage
from latch.store import EventStore
from latch.store.fts import MAX_PHRASE_TOKENS, MAX_QUERY_CHARS, _prepare_v1, build_match_query

_load_commands()
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
FIRST_USER_LINE = EXAMPLE.read_text(encoding="utf-8").splitlines()[1]  # a user turn, no model request


def _run(tmp_path, *args, input=None):
    return invoke(tmp_path, *args, input=input)


# ------------------------------------------------------------------ replay options before any import
def test_window_alone_names_the_window_and_imports_nothing(tmp_path):
    db = tmp_path / "s.db"
    res = _run(tmp_path, "--db", str(db), "replay", str(EXAMPLE), "--window", "10")
    assert res.exit_code == 2
    assert (
        "--window must exceed the default reserve of 32,000 for model claude-sonnet-4-5; pass --reserve" in res.output
    )
    assert "--reserve (32000)" not in res.output and not db.exists()  # checked before the import


def test_reserve_alone_names_the_reserve(tmp_path):
    db = tmp_path / "s.db"
    res = _run(tmp_path, "--db", str(db), "replay", str(EXAMPLE), "--reserve", "300000")
    assert res.exit_code == 2 and not db.exists()
    assert "--reserve (300,000) must be below the window of 200,000 tokens for model claude-sonnet-4-5" in res.output


def test_window_and_reserve_given_the_options_are_checked_without_parsing_the_transcript(tmp_path, monkeypatch):
    import latch.cli.replay as replay_cli

    calls = []
    parse = replay_cli.parse_file
    monkeypatch.setattr(replay_cli, "parse_file", lambda *a, **k: calls.append(a) or parse(*a, **k))
    db = tmp_path / "s.db"
    res = _run(tmp_path, "--db", str(db), "replay", str(EXAMPLE), "--window", "16000", "--reserve", "2000")
    assert res.exit_code == 0, res.output
    assert calls == [] and "window 16,000 · reserve 2,000" in res.output
    res = _run(tmp_path, "--db", str(tmp_path / "t.db"), "replay", str(EXAMPLE), "--window", "900", "--reserve", "900")
    assert res.exit_code == 2 and "--reserve (900) must be below --window (900)" in res.output
    assert calls == [] and not (tmp_path / "t.db").exists()  # refused before the import
    # with a [models] entry, the transcript's model is read first (its entry is checked before the import)
    config = tmp_path / "config.toml"
    config.write_text("[models.claude-sonnet-4-5]\nreserve_tokens = 3000\n", encoding="utf-8")
    args = ("replay", str(EXAMPLE), "--window", "16000", "--reserve", "2000", "--config", str(config))
    res = _run(tmp_path, "--db", str(db), *args)
    assert res.exit_code == 0, res.output
    assert [str(a[0]) for a in calls] == [str(EXAMPLE)]


def test_a_transcript_without_model_request_says_so_and_exits_1(tmp_path):
    path = tmp_path / "no-request.jsonl"
    path.write_text(FIRST_USER_LINE + "\n", encoding="utf-8")
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), "replay", str(path))
    assert res.exit_code == 1
    assert "has no model request (no assistant message): nothing to replay" in res.output
    assert "✓" not in res.output


# ------------------------------------------------------------------ --db after the subcommand
def test_db_is_accepted_after_the_subcommand(tmp_path):
    db = tmp_path / "s.db"
    assert _run(tmp_path, "import", str(EXAMPLE), "--db", str(db)).exit_code == 0
    res = _run(tmp_path, "sessions", "--db", str(db), "--json")
    assert res.exit_code == 0, res.output
    assert [s["events"] for s in json.loads(res.output)] == [81]
    assert _run(tmp_path, "sessions", f"--db={db}").exit_code == 0
    twice = _run(tmp_path, "--db", str(db), "sessions", "--db", str(db))
    assert twice.exit_code == 2 and "--db is given twice" in twice.output


# ------------------------------------------------------------------ first seq per session
def test_sessions_json_shows_each_sessions_first_seq(tmp_path):
    db = tmp_path / "s.db"
    other = tmp_path / "other.jsonl"
    other.write_text(
        FIRST_USER_LINE.replace("5b1f0c2e-7d4a-4c1e-9a53-2f6e8d1b0a77", "6b1f0c2e-7d4a-4c1e-9a53-2f6e8d1b0a77") + "\n",
        encoding="utf-8",
    )
    assert _run(tmp_path, "--db", str(db), "import", str(EXAMPLE), str(other)).exit_code == 0
    doc = json.loads(_run(tmp_path, "--db", str(db), "sessions", "--json").output)
    assert [(s["events"], s["first_seq"], s["last_seq"]) for s in doc] == [(81, 1, 81), (1, 82, 82)]


# ------------------------------------------------------------------ import - (stdin)
def test_import_dash_reads_stdin_once_and_is_idempotent(tmp_path):
    db = tmp_path / "s.db"
    data = EXAMPLE.read_text(encoding="utf-8")
    first = _run(tmp_path, "--db", str(db), "import", "-", input=data)
    assert first.exit_code == 0, first.output
    assert "(claude-code), 81 new events" in first.output
    again = _run(tmp_path, "--db", str(db), "import", "-", input=data)
    assert again.exit_code == 0 and "0 new events" in again.output
    (copy,) = (tmp_path / "stdin").iterdir()
    assert copy.read_text(encoding="utf-8") == data


def test_import_dash_is_size_capped(tmp_path, monkeypatch):
    import latch.importers

    monkeypatch.setattr(latch.importers, "MAX_TRANSCRIPT_BYTES", 100)
    db = tmp_path / "s.db"
    res = _run(tmp_path, "--db", str(db), "import", "-", input="x" * 101)
    assert res.exit_code == 1 and "stdin holds more than 100 bytes" in res.output
    assert not db.exists() and not (tmp_path / "stdin").exists()
    empty = _run(tmp_path, "--db", str(db), "import", "-", input="")
    assert empty.exit_code == 1 and "stdin is empty" in empty.output


# ------------------------------------------------------------------ search
def _store_with(tmp_path, texts):
    store = EventStore(tmp_path / "s.db")
    sid = store.create_session(external_key="k")
    store.append(sid, [UserMessage(text=t) for t in texts])
    return store


TEXTS = [
    "we write it in C++ now",
    "a c program",
    "C# and .NET on Windows",
    "the net income",
    "node.js server",
    "js node",
    "src/main.py changed",
    "the i++; loop",
    "node and js",
]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("C++", ["we write it in C++ now"]),
        ("c", ["C# and .NET on Windows", "a c program", "we write it in C++ now"]),  # the bare letter: every c
        ("C#", ["C# and .NET on Windows"]),
        (".NET", ["C# and .NET on Windows"]),
        ("net", ["the net income", "C# and .NET on Windows"]),
        ("node.js", ["node.js server"]),
        ("main.py", ["src/main.py changed"]),
        ("src/main.py", ["src/main.py changed"]),
        ("i++", ["the i++; loop"]),
    ],
)
def test_glued_terms_are_searched_as_themselves(tmp_path, query, expected):
    store = _store_with(tmp_path, TEXTS)
    assert [h.event.text for h in store.search(query)] == expected  # newest first
    store.close()


def test_a_store_indexed_before_glued_terms_is_reindexed(tmp_path):
    store = _store_with(tmp_path, TEXTS)
    store.append(store.sessions()[0].id, [ToolResult("c1", "g++ -O2 x.cpp")])
    store.close()
    con = sqlite3.connect(tmp_path / "s.db")  # what a store written by the previous release holds
    con.execute("INSERT INTO events_fts(events_fts) VALUES ('delete-all')")
    for seq, payload in con.execute("SELECT seq, payload FROM events").fetchall():
        text = json.loads(payload).get("text") or json.loads(payload).get("content")
        con.execute("INSERT INTO events_fts(rowid, text) VALUES (?, ?)", (seq, _prepare_v1(text)))
    con.execute("DELETE FROM _latch_migrations WHERE name = 'm006_fts_glued_terms'")
    con.commit()
    con.close()
    store = EventStore(tmp_path / "s.db")
    assert [h.event.text for h in store.search("C++")] == ["we write it in C++ now"]
    assert [h.event.content for h in store.search("g++")] == ["g++ -O2 x.cpp"]
    assert len(store.search("c")) == 3
    store.close()


def test_search_a_query_starting_with_a_dash(tmp_path):
    db = tmp_path / "s.db"
    _store_with(tmp_path, ["run it with -foo please", "other"]).close()
    for args in (["search", "-foo"], ["search", "--", "-foo"]):
        res = _run(tmp_path, "--db", str(db), *args)
        assert res.exit_code == 0, res.output
        assert "run it with -**foo** please" in res.output and "other" not in res.output


def test_a_query_over_the_cap_is_refused_and_phrases_are_bounded(tmp_path):
    db = tmp_path / "s.db"
    _store_with(tmp_path, ["a. a. a."]).close()
    res = _run(tmp_path, "--db", str(db), "search", "a." * 50_000)  # 100 KB, one phrase: 9.6 s and 828 MB before
    assert res.exit_code == 2
    assert f"the query is 100,000 characters; at most {MAX_QUERY_CHARS:,} are searched" in res.output
    match = build_match_query("a." * 50_000)
    assert match.count(" + ") == MAX_PHRASE_TOKENS - 1
    assert build_match_query(" ".join(f"w{i}" for i in range(1000))).count(" AND ") == 63
