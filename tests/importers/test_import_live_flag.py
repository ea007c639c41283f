"""`latch import` stores a finished transcript whole; `--live` keeps the open tail for later."""

from __future__ import annotations

from click.testing import CliRunner
from corpus_support import require_corpus

from latch.cli import _load_commands, cli
from latch.store import EventStore


def _events_after(tmp_path, *flags):
    corpus = require_corpus()
    # claude-reliability ends with a final answer whose stop_reason is null (an open tail): 120 events
    # when the file is taken as finished, 118 when it may still grow (see test_import_growth).
    path = corpus / "claude-code" / "claude-reliability_python-to-rust-port.jsonl"
    db = tmp_path / f"db{len(flags)}.db"
    _load_commands()
    r = CliRunner().invoke(cli, ["--db", str(db), "import", *flags, str(path)])
    assert r.exit_code == 0, r.output
    with EventStore(db) as s:
        (info,) = s.sessions()
        return info.events


def test_default_import_stores_the_whole_finished_transcript(tmp_path):
    assert _events_after(tmp_path) == 120


def test_live_import_keeps_the_open_tail_out(tmp_path):
    assert _events_after(tmp_path, "--live") == 118
