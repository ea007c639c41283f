"""``latch search``: quoted phrases, the matching passage with the match marked, --sort relevance|recent, filters
by role, tool, session and date, and tool-call ids; on a real Claude Code session imported into a temp store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.cli import _load_commands, cli
from latch.cli.search import passage
from latch.store import EventStore
from latch.store.fts import build_match_query, build_phrase_query

_load_commands()

PORT = "claude-code/claude-reliability_python-to-rust-port.jsonl"
S = "1e076572"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    require_corpus()
    path = tmp_path_factory.mktemp("search") / "s.db"
    assert CliRunner().invoke(cli, ["--db", str(path), "import", str(CORPUS / PORT)]).exit_code == 0
    return path


def _search(db, *args):
    res = CliRunner().invoke(cli, ["--db", str(db), "search", *args])
    return res.exit_code, res.output


def test_a_quoted_phrase_matches_as_a_phrase_and_the_passage_marks_it(db):
    assert _search(db, '"Rust library"', "--role", "user") == (
        0,
        (
            "1 hit, newest first\n"
            f"{S}  #1  user: …on project to Rust. Create a standalone **Rust library** (no Python bindings needed). "
            "Delete all the Python source files whe…\n"
        ),
    )
    assert _search(db, "Rust library", "--role", "user") == (
        0,
        (
            "1 hit, newest first\n"
            f"{S}  #1  user: Port this Python project to **Rust**. Create a standalone **Rust** **library** (no Python "
            "bindings needed). Delete all the Python so…\n"
        ),
    )
    assert _search(db, '"library Rust"') == (0, "no matches\n")  # the words, not in that order
    with EventStore(db) as store:  # the engine's recall keeps its words-anywhere contract
        assert len(store.search('"library Rust"', limit=100)) == len(store.search("library Rust", limit=100)) > 0


def test_relevance_order_and_the_tool_filter(db):
    assert _search(db, '"rust library"', "--sort", "relevance", "--limit", "2", "--tool", "Bash") == (
        0,
        (
            "2 hits, most relevant first (the first 2: --limit shows more)\n"
            f'{S}  #9  assistant [calls: Bash(toolu_01FJm2pfkgbd2B9BeDDL9NVB)]: Bash {{"command": "cargo init --lib '
            '--name python_utils", "description": "Initialize **Rust library** project"}\n'
            f"{S}  #113  assistant [calls: Bash(toolu_01FSVQh4GBprTeipwRV9t7bi)]: …Python implementation with a "
            "standalone **Rust library**:\\n- string_utils: reverse_string function\\n- math_utils: factorial …\n"
        ),
    )
    recent = json.loads(_search(db, '"rust library"', "--tool", "Bash", "--json")[1])
    assert [h["seq"] for h in recent] == [113, 9]
    assert recent[1]["passage"][recent[1]["matches"][0][0] : recent[1]["matches"][0][1]] == "Rust library"


def test_a_tool_call_id_finds_the_call_and_its_result(db):
    code, out = _search(db, "toolu_01FJm2pfkgbd2B9BeDDL9NVB")
    assert code == 0 and out.splitlines()[:3] == [
        "2 hits, newest first",
        f"{S}  #11  tool_result(toolu_01FJm2pfkgbd2B9BeDDL9NVB): Creating library package note: see more "
        "`Cargo.toml` keys and their definitions at https://doc.rust-lang.org/cargo/refer…",
        f'{S}  #9  assistant [calls: Bash(toolu_01FJm2pfkgbd2B9BeDDL9NVB)]: Bash {{"command": "cargo init --lib '
        '--name python_utils", "description": "Initialize Rust library project"}',
    ]


def test_date_and_session_filters_and_bad_input_is_one_line(db):
    assert _search(db, '"rust library"', "--since", "2026-01-22") == (0, "no matches\n")
    assert _search(db, '"rust library"', "--until", "2026-01-21", "--role", "user")[1].startswith("1 hit")
    assert _search(db, "x", "--since", "2026-02-01", "--until", "2026-01-01") == (
        2,
        "Error: --since 2026-02-01 is after --until 2026-01-01\n",
    )
    assert _search(db, "x", "--since", "yesterday")[1].count("\n") == 1
    assert _search(db, "x", "--session", "nope") == (1, "Error: no session 'nope'\n")
    assert _search(db, "x", "--sort", "best") == (
        2,
        "Error: Invalid value for '--sort': 'best' is not one of 'recent', 'relevance'.\n",
    )


def test_the_passage_is_cut_around_the_match_and_escaped():
    text = "a " * 200 + "the \x1b[31m needle here " + "b " * 200
    shown, spans = passage(text, "needle")
    assert shown.startswith("…") and shown.endswith("…") and len(shown) == 122
    assert [shown[a:b] for a, b in spans] == ["needle"]
    assert build_phrase_query('"Rust library" port') == '"Rust" + "library" AND "port"'
    assert build_match_query('"Rust library" port') == '"Rust" AND "library" AND "port"'
