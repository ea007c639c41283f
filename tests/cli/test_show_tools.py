"""``latch show``: each tool call with its command or path, ``--event SEQ`` prints one event whole (escaped)."""

from __future__ import annotations

from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.cli import _load_commands, cli
from latch.events import AssistantMessage, ToolCall
from latch.store import EventStore

_load_commands()


def test_calls_show_their_command_or_path_and_one_event_prints_whole(tmp_path):
    require_corpus()
    db = str(tmp_path / "s.db")
    port = CORPUS / "claude-code/claude-reliability_python-to-rust-port.jsonl"
    assert CliRunner().invoke(cli, ["--db", db, "import", str(port)]).exit_code == 0
    out = CliRunner().invoke(cli, ["--db", db, "show", "1e07", "--limit", "12"]).output.splitlines()
    assert out[2] == "      2  assistant:  [calls: Task(Explore Python project structure)]"
    assert out[9] == "      9  assistant:  [calls: Bash(cargo init --lib --name python_utils)]"
    assert out[12] == "     12  assistant:  [calls: Read(/tmp/tmpqwh7888i/Cargo.toml)]"
    whole = CliRunner().invoke(cli, ["--db", db, "show", "1e07", "--event", "9"])
    assert whole.output == (
        "#9 assistant_message 2026-01-21T06:21:28.226Z\n→ Bash [toolu_01FJm2pfkgbd2B9BeDDL9NVB]\n"
        '{\n  "command": "cargo init --lib --name python_utils",\n'
        '  "description": "Initialize Rust library project"\n}\n'
    )
    bad = CliRunner().invoke(cli, ["--db", db, "show", "1e07", "--event", "9999"])
    assert (bad.exit_code, bad.output) == (1, "Error: session 1e07657261df has no event 9999 (its events are 1..120)\n")


def test_a_whole_event_is_escaped(tmp_path):
    db = tmp_path / "s.db"
    with EventStore(db) as store:
        sid = store.create_session(format="test")
        store.append(
            sid, [AssistantMessage("red \x1b[31m\nline two", (ToolCall("c1", "shell", '{"command": "rm \\u001b"}'),))]
        )
    out = CliRunner().invoke(cli, ["--db", str(db), "show", sid, "--event", "1"]).output
    assert "\x1b" not in out and "red \\x1b[31m\nline two\n" in out and '"command": "rm \\u001b"' in out
    assert "[calls: shell(rm \\x1b)]" in CliRunner().invoke(cli, ["--db", str(db), "show", sid]).output
