"""A file one importer nearly reads fails with that importer's error, named; a suggested ``--format`` reads the
file; ``latch import --dry-run FILE`` prints the format the import would read."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from _importer_checks import detected
from click.testing import CliRunner
from corpus_support import CORPUS, REPO, require_corpus
from test_import_opencode_export import S3, export_of

from latch.cli import cli
from latch.importers import TranscriptError, parse_all_file, parse_file

CLINE_TASK = (
    REPO / "tests" / "fixtures" / "cline" / "globalStorage" / "saoudrizwan.claude-dev" / "tasks" / "1777000000000"
)


def _history() -> list[dict]:
    return json.loads((CLINE_TASK / "api_conversation_history.json").read_text("utf-8"))


def _ui() -> list[dict]:
    return json.loads((CLINE_TASK / "ui_messages.json").read_text("utf-8"))


def _write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1), "utf-8")
    return path


def _reason(path: Path, format: str | None = None) -> tuple[str | None, str]:
    with pytest.raises(TranscriptError) as info:
        parse_all_file(path, format)
    return info.value.location, info.value.reason


def test_cline_history_without_a_role_names_cline(tmp_path):
    doc = _history()
    del doc[0]["role"]
    for name in ("api_conversation_history.json", "history.json"):
        assert _reason(_write(tmp_path / name, doc)) == (
            "messages[0]",
            "missing field 'role' (a string) (read as cline: the file nearly has that format's shape)",
        )


def test_cline_history_another_format_claims_names_cline(tmp_path):
    # Cline's messages carry Anthropic blocks: without its 'content' the Anthropic importer claims the file
    doc = _history()
    del doc[1]["content"]
    path = _write(tmp_path / "history.json", doc)
    assert detected(path) == "anthropic-messages"
    assert _reason(path) == (
        "messages[1]",
        "missing field 'content' (a string or an array) (read as cline: the file nearly has that format's shape)",
    )


def test_ui_messages_with_a_bad_row_is_read_as_ui_rows(tmp_path):
    rows = _ui()
    rows[1]["type"] = "tell"
    path = _write(tmp_path / "ui_messages.json", rows)
    expected = ("ui_messages[1]", "field 'type' must be 'say' or 'ask', got a 4-character string")
    assert _reason(path, "cline") == expected
    assert _reason(path) == (expected[0], expected[1] + " (read as cline: the file nearly has that format's shape)")
    del rows[1]["ts"]
    rows[1]["type"] = "say"
    assert _reason(_write(tmp_path / "u" / "rows.json", rows)) == (
        "ui_messages[1]",
        "field 'ts' must be a number (epoch milliseconds), got null (read as cline: the file "
        "nearly has that format's shape)",
    )


def test_opencode_export_without_its_marks_reads_as_opencode(tmp_path):
    doc = export_of(S3)
    doc["info"]["id"] = "s1"  # no ses_ id, and no message has parts: the sniffer's two marks are gone
    for m in doc["messages"]:
        m.pop("parts")
    session = parse_file(_write(tmp_path / "a.json", doc))
    assert (session.format, session.external_key) == ("opencode", "opencode:s1")
    broken = copy.deepcopy(doc)
    del broken["messages"][1]["info"]["time"]
    assert _reason(_write(tmp_path / "b.json", broken)) == (
        "messages[1].info",
        "missing field 'data.time' (an object) (read as opencode: the file nearly has that format's shape)",
    )


def test_a_suggested_format_that_fails_too_is_not_suggested(tmp_path):
    # OpenAI traits (a system message, a tool message) and an Anthropic thinking block: neither importer reads it
    doc = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "yo"}],
            },
        ]
    }
    path = _write(tmp_path / "mixed.json", doc)
    expected = ("messages[2]", "content[0] is an Anthropic 'thinking' block, not an OpenAI part")
    assert _reason(path) == expected
    assert _reason(path, "anthropic-messages")[1].startswith("unknown role 'system'")
    # without the system message the Anthropic importer reads it: the suggestion stays
    doc["messages"].pop(0)
    path = _write(tmp_path / "anthropic.json", doc)
    assert _reason(path, "openai-chat") == (
        expected[0].replace("2", "1"),
        expected[1] + " (import with --format anthropic-messages); the file looks "
        "like anthropic-messages, not openai-chat: pass --format "
        "anthropic-messages or leave --format out",
    )
    assert parse_file(path, "anthropic-messages").format == "anthropic-messages"


def test_dry_run_of_a_file_prints_its_format(tmp_path):
    corpus = require_corpus()
    shutil.copyfile(CORPUS / "codex" / "edgerunner_codex-session.jsonl", tmp_path / "session.jsonl")
    doc = _history()
    del doc[0]["role"]
    near = _write(tmp_path / "history.json", doc)
    junk = tmp_path / "notes.json"
    junk.write_text('{"a": 1}', "utf-8")
    db = tmp_path / "x.db"
    res = CliRunner().invoke(
        cli,
        [
            "--db",
            str(db),
            "import",
            "--dry-run",
            str(tmp_path / "session.jsonl"),
            str(near),
            str(junk),
            str(corpus / "opencode" / "lantern_opencode.db"),
        ],
    )
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines() if "\t" in line]
    assert [(Path(p).name, fmt) for p, fmt in rows] == [
        ("session.jsonl", "codex"),
        ("history.json", "cline"),
        ("notes.json", "unrecognized"),
        ("lantern_opencode.db", "opencode"),
    ]
    assert not db.exists()


def test_openhands_event_without_its_action_reads_as_openhands(tmp_path):
    # four of an event's keys, 'source' among them, but neither 'action' nor 'observation': the sniffer refuses it
    doc = [{"id": 1, "source": "user", "timestamp": "2024-01-01T00:00:00", "message": "hi"}]
    assert _reason(_write(tmp_path / "events.json", doc)) == (
        "record 0 (event id 1)",
        "an event must have exactly one of 'action' or 'observation' (a string) (read as openhands: the file "
        "nearly has that format's shape)",
    )
