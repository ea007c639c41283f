"""Read-only commands never create a store: ``latch sessions`` in a new folder or a mistyped
``--db`` used to leave an empty 77 KB database behind (found again by a new-user trial). They read an empty
store instead; ``latch doctor`` says none exists yet; the first ``latch import`` creates it."""

from __future__ import annotations

import json

from click.testing import CliRunner
from corpus_support import REPO

from latch.cli import _load_commands, cli

EXAMPLE = str(REPO / "examples" / "invoice-rounding.claude.jsonl")


def test_read_only_commands_leave_no_file(tmp_path):
    _load_commands()
    db = tmp_path / "typo.db"
    runner = CliRunner()
    for args, code in (
        (["sessions"], 0),
        (["sessions", "--json"], 0),
        (["search", "rounding"], 0),
        (["show", "abc"], 1),
        (["state", "abc"], 1),
        (["evidence", "abc"], 1),
        (["context", "abc"], 1),
    ):
        r = runner.invoke(cli, ["--db", str(db), *args])
        assert r.exit_code == code, (args, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, repr(r.exception))
        assert not db.exists(), args
    assert json.loads(runner.invoke(cli, ["--db", str(db), "sessions", "--json"]).output) == []
    doctor = json.loads(runner.invoke(cli, ["--db", str(db), "doctor", "--json"]).output)
    assert doctor["store_exists"] is False and doctor["store_error"] is None and not db.exists()
    assert "none yet" in runner.invoke(cli, ["--db", str(db), "doctor"]).output
    assert runner.invoke(cli, ["--db", str(db), "import", EXAMPLE]).exit_code == 0
    assert db.is_file()
    assert len(json.loads(runner.invoke(cli, ["--db", str(db), "sessions", "--json"]).output)) == 1
    assert json.loads(runner.invoke(cli, ["--db", str(db), "doctor", "--json"]).output)["store_exists"] is True
