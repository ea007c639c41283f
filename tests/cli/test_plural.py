"""Counts in CLI messages take the singular for 1 (latch.textsafe.plural): real commands' output."""

from __future__ import annotations

import shutil
from pathlib import Path

from cli_support import invoke

from latch.cli import _load_commands
from latch.cli.run_console import result_summary as _summary
from latch.textsafe import plural

_load_commands()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"


def _run(tmp_path, *args):
    return invoke(tmp_path, *args, db=tmp_path / "p.db", columns=200)


def test_plural():
    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert plural(1, "child", "children") == "1 child" and plural(3, "child", "children") == "3 children"
    assert plural(1234, "event", fmt=",") == "1,234 events" and plural(1, "event", fmt=",") == "1 event"


def test_import_and_sessions_say_one_file_and_one_session(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copyfile(EXAMPLE, folder / "a.jsonl")
    (folder / "notes.txt").write_text("just some notes\n")
    res = _run(tmp_path, "import", str(folder))
    assert res.exit_code == 0, res.output
    assert "1 file skipped (no importer recognizes them):" in res.output
    assert "1 files" not in res.output
    res = _run(tmp_path, "sessions")
    assert res.output.splitlines()[0].strip() == "1 session, newest first"
    shutil.copyfile(EXAMPLE, folder / "b.jsonl")
    (folder / "b.jsonl").write_text(
        EXAMPLE.read_text(encoding="utf-8").replace('"sessionId":"', '"sessionId":"b-'), encoding="utf-8"
    )
    _run(tmp_path, "import", str(folder / "b.jsonl"))
    assert _run(tmp_path, "sessions").output.splitlines()[0].strip() == "2 sessions, newest first"


def test_state_line_counts(tmp_path):
    _run(tmp_path, "import", str(EXAMPLE))
    sid = _run(tmp_path, "sessions", "--json").output.split('"id": "')[1].split('"')[0]
    out = _run(tmp_path, "state", sid).output
    assert "validations 6 runs, 3 requirements (2 current) · failures 4 lineages (1 active)" in out


def test_run_tool_summary_says_one_line():
    assert _summary("ok\nsecond", False) == "ok: ok (+1 line)"
    assert _summary("a\nb\nc", True) == "error: a (+2 lines)"
