"""``latch report`` over every session (no argument), by day, month, project, model or harness, between dates, as
JSON; cache reads and cache writes in their own columns. Real sessions of the corpus in a temp store."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.cli import _load_commands, cli

_load_commands()

FILES = (
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "claude-code/claude-reliability_python-to-rust-port.jsonl",
    "codex/edgerunner_codex-session.jsonl",
)


@pytest.fixture
def db(tmp_path, monkeypatch):
    require_corpus()
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    path = tmp_path / "s.db"
    assert CliRunner().invoke(cli, ["--db", str(path), "import", *(str(CORPUS / f) for f in FILES)]).exit_code == 0
    yield path
    monkeypatch.undo()
    time.tzset()


def _report(db, *args):
    res = CliRunner().invoke(cli, ["--db", str(db), "report", *args], env={"COLUMNS": "120"})
    return res.exit_code, res.output


def test_every_session_by_month_with_cache_reads_and_writes_apart(db):
    code, out = _report(db, "--monthly")
    assert code == 0
    assert out.splitlines()[:7] == [
        "every session: 5 sessions · 370 requests",
        "month    requests  priced      input  cache read  cache write   output     cost  cache-read share",
        "─" * 97,
        "2026-01        39      39         38   1,114,040       22,988      563  $0.7150             98.0%",
        "2026-02       157     157      2,578  16,207,141      276,819   40,359   $10.67             98.3%",
        "2026-07       174     173  1,646,437  34,132,736            0   98,116   $32.08             95.4%",
        "total         370     369  1,649,053  51,453,917      299,807  139,038   $43.46             96.4%",
    ]


def test_by_harness_between_days_and_daily(db):
    code, out = _report(db, "--by", "harness", "--since", "2026-02-01")
    assert code == 0 and out.splitlines()[3:6] == [
        "claude-code       157     157      2,578  16,207,141      276,819   40,359  $10.67             98.3%",
        "codex             174     173  1,646,437  34,132,736            0   98,116  $32.08             95.4%",
        "total             331     330  1,649,015  50,339,877      276,819  138,475  $42.74             96.3%",
    ]
    doc = json.loads(_report(db, "--daily", "--since", "2026-02-11", "--until", "2026-02-11", "--json")[1])
    assert doc["group_by"] == "daily" and list(doc["groups"]) == ["2026-02-11"]
    assert doc["groups"]["2026-02-11"]["requests"] == doc["total"]["requests"] == 157
    assert (doc["total"]["cache_read_tokens"], doc["total"]["cache_write_tokens"]) == (16_207_141, 276_819)
    projects = json.loads(_report(db, "--by", "project", "--json")[1])["groups"]
    assert {k: r["requests"] for k, r in projects.items()} == {
        "/Users/user/Desktop/new": 174,
        "/home/USER/projects/spotter-worktrees/spotter-fum": 156,
        "/home/USER/projects/spotter-worktrees/spotter-fum/assets": 1,
        "/tmp/tmpqwh7888i": 39,
    }  # 370 in all


def test_bad_report_options_are_one_line(db):
    assert _report(db, "--by", "day") == (
        2,
        "Error: Invalid value for '--by': 'day' is not one of 'project', 'model', 'harness'.\n",
    )
    assert _report(db, "--daily", "--by", "model") == (
        2,
        "Error: --daily and --by model both choose the rows; give one\n",
    )
    assert _report(db, "--since", "2026-03-01", "--until", "2026-02-01") == (
        2,
        "Error: --since 2026-03-01 is after --until 2026-02-01\n",
    )
    assert _report(db, "--until", "02/01/2026")[1].count("\n") == 1
