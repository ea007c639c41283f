"""Long jobs say what they did: ``latch bench`` ends with a narrow table and one verdict line per budget (the wide
table is in ``--out``) and reports progress on stderr in a pipe; ``latch stress`` defaults to a size that finishes in
under a minute."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from corpus_support import REPO

from latch.bench.report import budget_verdicts
from latch.cli import _load_commands, cli
from latch.cli.progress import progress

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

EXAMPLES = REPO / "examples"


def test_bench_prints_a_narrow_table_and_a_verdict_per_budget_with_progress_in_a_pipe(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home")}
    env.pop("COLUMNS", None)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "latch",
            "bench",
            "--engines",
            "continuity,sliding-window",
            "--examples",
            str(EXAMPLES),
            "--scenario-events",
            "300",
            "--budgets",
            "32k:4k:8k,8k:1k:2k",
            "--out",
            str(out),
            "--jobs",
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "| engine | budget | frontier | requests | tokens/request | coverage | refused | cost $ |"
    assert lines[1] == "|---|---|---|---:|---:|---:|---:|---:|"
    assert all(
        re.fullmatch(
            r"\| (continuity|sliding-window) \| (32k:4k:8k|8k:1k:2k) \| (yes|no|refuses|–) \| [\d,]+ "
            r"\| [\d,]+ \| [\d.]+% \| \d+ \| \$[\d.,]+ \|",
            line,
        )
        for line in lines[2:6]
    ), lines[2:6]
    assert lines[6] == f"every column: {out / 'report.md'}"
    for line, budget in zip(lines[7:9], ("32k:4k:8k", "8k:1k:2k"), strict=False):
        assert re.fullmatch(
            rf"verdict {budget}: continuity covers [\d.]+% of the needed context [≥<] sliding-window's "
            r"[\d.]+% \(the best baseline\) at \d+% of its dollars; (on|not on) the cost/coverage "
            r"frontier\.( Like for like, on the [\d,]+ requests every engine answered: [\d.]+% vs "
            r"[\d.]+%(, at \d+% of its dollars)?\.)?",
            line,
        ), line
    assert max(len(line) for line in lines[:6]) < 100  # the wide table (24 columns) is in report.md only
    assert "| cacheability median |" not in r.stdout and "cacheability median" in (out / "report.md").read_text()
    progress_lines = r.stderr.splitlines()
    assert re.fullmatch(r"bench: 1/8 jobs · \d+ s", progress_lines[0]), r.stderr
    assert re.fullmatch(r"bench: 8/8 jobs · \d+ s", progress_lines[-1]), r.stderr


def test_a_budget_without_a_comparison_says_so():
    rows = [{"engine": "continuity", "budget": "8k:1k:2k", "coverage": 0.5, "frontier": "yes", "cost_usd_total": 1.0}]
    assert budget_verdicts(rows) == [
        "8k:1k:2k: no comparison: no other engine has a needed-context coverage to compare continuity with"
    ]
    assert budget_verdicts(rows, engine="summary") == ["8k:1k:2k: no comparison: summary was not run"]


def test_progress_in_a_pipe_is_a_line_now_and_then(capsys):
    with progress("stress", "events", 3, interval=3600) as update:
        for done in (1, 2, 3, 3):
            update(done, 3)
    err = capsys.readouterr().err.splitlines()
    assert [re.sub(r"\d+ s$", "N s", line) for line in err] == ["stress: 1/3 events · N s", "stress: 3/3 events · N s"]


def test_stress_defaults_to_a_run_of_under_a_minute():
    _load_commands()
    res = CliRunner().invoke(cli, ["stress", "--help"], terminal_width=200)
    assert res.exit_code == 0
    assert "[default: 20000; 1<=x<=1000000000]" in res.output
