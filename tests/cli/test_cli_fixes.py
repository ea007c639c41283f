"""CLI robustness fixes: picklable errors, bench failures, --db checks, config warnings, import/show/search."""

from __future__ import annotations

import json
import pickle

import pytest
from click.testing import CliRunner
from corpus_support import REPO

from latch.cli import _load_commands, cli
from latch.engine.port import ContextOverflow
from latch.importers import SessionForgotten
from latch.importers.base import TranscriptError
from latch.kernel.files import StaleFileError
from latch.kernel.state import StateOverflow

_load_commands()
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
_LINES = EXAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
BAD = "".join(_LINES[:3]) + '{"type": \n' + "".join(_LINES[3:6])  # invalid JSON on line 4


def _run(args, env=None):
    return CliRunner().invoke(cli, args, env={"COLUMNS": "300", **(env or {})})


@pytest.mark.parametrize(
    "exc",
    [
        TranscriptError("/x/a.jsonl", "line 3", "invalid JSON"),
        SessionForgotten("/x/a.jsonl", "abc123"),
        ContextOverflow("too big", {"state": 5}),
        StateOverflow("goal too big", {"goal": 7}),
        StaleFileError("/x/f.py", "a" * 64, None),
    ],
)
def test_custom_errors_survive_pickling(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc) and vars(back) == vars(exc)


def test_bench_reports_only_the_bad_files_jobs_and_exits_1(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "bad.jsonl").write_text(BAD, encoding="utf-8")
    (corpus / "good.jsonl").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "no-examples").mkdir()
    res = _run(
        [
            "bench",
            "--corpus",
            str(corpus),
            "--examples",
            str(tmp_path / "no-examples"),
            "--scenario-events",
            "0",
            "--engines",
            "continuity",
            "--budgets",
            "32k:4k:8k",
            "--out",
            str(tmp_path / "out"),
            "--jobs",
            "2",
        ]
    )
    assert res.exit_code == 1, res.output + res.stderr
    jobs = json.loads((tmp_path / "out" / "report.json").read_text())["jobs"]
    errors = {j["session"]: j.get("error") for j in jobs}
    assert len(jobs) == 2
    assert errors["good.jsonl"] is None
    assert errors["bad.jsonl"].startswith("TranscriptError: ") and "bad.jsonl:line 4" in errors["bad.jsonl"]
    assert "1 of 2 jobs failed" in res.stderr


def test_db_option_errors(tmp_path):
    res = _run(["--db", "", "sessions"])
    assert res.exit_code == 2 and "empty --db" in res.stderr
    missing = tmp_path / "nope" / "x.db"
    res = _run(["--db", str(missing), "sessions"])
    assert res.exit_code == 1 and f"folder {missing.parent} does not exist (--db; create it first)" in res.stderr
    assert not missing.parent.exists()
    res = _run(["sessions"], env={"LATCH_DB": str(tmp_path)})
    assert res.exit_code == 2 and f"LATCH_DB={tmp_path} is a directory; give a database file path" in res.stderr
    res = _run(["--db", str(missing), "doctor", "--json"])
    assert res.exit_code == 1 and "does not exist" in json.loads(res.stdout)["store_error"]
    res = _run(["--db", str(tmp_path / "ok.db"), "doctor", "--json"], env={"LATCH_HOME": str(tmp_path)})
    assert res.exit_code == 0 and json.loads(res.stdout)["store_error"] is None


def test_config_errors_and_unknown_keys_name_file_and_key(tmp_path):
    db = ["--db", str(tmp_path / "x.db")]
    cfg = tmp_path / "config.toml"
    cfg.write_text("[engine]\nname = 5\n", encoding="utf-8")
    res = _run([*db, "replay", str(EXAMPLE), "--config", str(cfg)])
    assert res.exit_code == 2 and f"{cfg}: [engine] name must be a non-empty string, got 5" in res.stderr
    cfg.write_text(
        "[context]\nrecnt_tokens = 5\n[models.m]\ncontext_windw_tokens = 9\n[budget]\nx = 1\n"
        '[engine]\nname = "bogus"\n',
        encoding="utf-8",
    )
    res = _run([*db, "replay", str(EXAMPLE), "--config", str(cfg)])
    assert res.exit_code == 2
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {cfg}: unknown key [context] recnt_tokens (did you mean recent_tokens?); ignored",
        f"warning: {cfg}: unknown key models.m.context_windw_tokens (did you mean context_window_tokens?); ignored",
        f"warning: {cfg}: unknown table [budget]; ignored",
    ]
    assert "unknown engine 'bogus'" in res.stderr and f"chosen by [engine] name in {cfg}" in res.stderr


def test_import_show_search_context(tmp_path):
    db = ["--db", str(tmp_path / "x.db")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(BAD, encoding="utf-8")
    res = _run([*db, "import", str(bad), str(EXAMPLE), str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 1
    assert "81 new events" in res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"Error: {bad}:line 4") and lines[2] == "2 of 3 files not imported"
    sid = json.loads(_run([*db, "sessions", "--json"]).stdout)[0]["id"]
    res = _run([*db, "context", "zz"])
    assert res.exit_code == 1 and res.stderr.strip() == "Error: no session 'zz'"
    res = _run([*db, "search", "invoice", "--session", ""])
    assert res.exit_code == 1 and res.stderr.strip() == "Error: empty session id"
    assert _run([*db, "forget", sid]).exit_code == 0
    res = _run([*db, "show", sid, "--limit", "1"])
    assert "events=81 forgotten (tombstoned by `latch forget`)" in res.stdout
