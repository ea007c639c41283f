"""``latch bench`` submits its jobs the costliest first by an estimate made before running (longest-processing-time
first: :func:`~latch.bench.runner.submission_order`, :func:`~latch.bench.runner.job_cost`), and the order of
submission changes nothing else: the rows come back in the plan's order and the report is the same bytes."""

from __future__ import annotations

import json
import shutil

import pytest
from corpus_support import require_corpus

from latch.bench import runner
from latch.bench.report import JobsJson, write_report
from latch.bench.runner import SessionSource, discover_sessions, job_cost, parse_budgets, run_bench, submission_order
from latch.textsafe import dumps

FILES = [
    "openhands/basic_gui_mode.json",
    "claude-code/claude-reliability_python-to-rust-port.jsonl",
    "gemini-cli/entire_session.json",
    "swe-agent/ctf_i_got_id_demo.traj",
]
ENGINES = ["sliding-window", "continuity"]
BUDGETS = parse_budgets("32k:4k:8k,256k:32k:64k")


@pytest.fixture
def corpus(tmp_path):
    """A few corpus transcripts of different sizes, in a folder of their own."""
    folder = tmp_path / "corpus"
    for rel in FILES:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(require_corpus() / rel, folder / rel)
    return folder


def _plan(sessions):
    return [(e, s, b) for e in ENGINES for s in sessions for b in BUDGETS]  # run_bench's plan, in its order


def _timeless(rows: list[dict]) -> list[dict]:
    """Rows with their timings and memory set to fixed values: what the same inputs give every time."""
    return [{**r, "seconds": [0.0] * len(r["seconds"]), "peak_mb": 1.0} for r in rows]


def test_the_jobs_are_submitted_costliest_first_by_the_estimate(corpus):
    sessions = discover_sessions(corpus, None, scenario_events=40)
    plan = _plan(sessions)
    order = submission_order(plan)
    costs = [job_cost(*plan[i]) for i in order]
    assert sorted(order) == list(range(len(plan))) and costs == sorted(costs, reverse=True)
    assert order != list(range(len(plan)))  # the plan's own order is not by cost: the sort did something

    started = []
    rows = run_bench(ENGINES, sessions, BUDGETS, jobs=1, on_row=lambda r: started.append(r))
    assert not any("error" in r for r in rows)
    # one worker runs the jobs one at a time: the rows arrive in the order they were submitted
    assert [(r["engine"], r["session"], r["budget"]) for r in started] == [
        (plan[i][0], plan[i][1].name, plan[i][2].name) for i in order
    ]
    assert [(r["engine"], r["session"], r["budget"]) for r in rows] == [(e, s.name, b.name) for e, s, b in plan]


def test_the_estimate_weighs_the_engine_the_budget_and_the_session_size():
    small, large = BUDGETS
    long = SessionSource(name="long", seed=0, events=3_000)
    short = SessionSource(name="short", seed=0, events=2)
    # continuity also derives state, segments episodes and searches: about twice a trimming engine's job
    assert job_cost("continuity", long, small) == 2 * job_cost("sliding-window", long, small)
    assert job_cost("an-engine-not-listed", long, small) == job_cost("sliding-window", long, small)
    # a long session sends more per request through a bigger window; a short one fits either
    assert job_cost("sliding-window", long, large) > job_cost("sliding-window", long, small)
    assert job_cost("sliding-window", short, large) == job_cost("sliding-window", short, small)
    assert job_cost("sliding-window", long, small) > job_cost("continuity", short, large)


def test_the_rows_and_the_report_are_the_same_whatever_the_submission_order(corpus, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the bench extra draws the plots")
    sessions = discover_sessions(corpus, None, scenario_events=0)
    costliest_first = run_bench(ENGINES, sessions, BUDGETS, jobs=2)
    monkeypatch.setattr(runner, "submission_order", lambda plan: list(reversed(range(len(plan)))))
    cheapest_first = run_bench(ENGINES, sessions, BUDGETS, jobs=2)
    assert _timeless(costliest_first) == _timeless(cheapest_first)
    written = []
    for k, results in enumerate((costliest_first, cheapest_first)):
        paths = write_report(
            tmp_path / f"out{k}", _timeless(results), engines=ENGINES, sessions=sessions, budgets=BUDGETS, seconds=1.0
        )
        written.append({key: paths[key].read_bytes() for key in ("json", "markdown")})
    assert written[0] == written[1]


def test_report_json_written_as_the_rows_came_in_is_the_one_written_after_the_jobs(corpus, tmp_path):
    pytest.importorskip("matplotlib", reason="the bench extra draws the plots")
    sessions = discover_sessions(corpus, None, scenario_events=0)
    rows = _timeless(run_bench(ENGINES, sessions, BUDGETS[:1], jobs=2))
    rows[1]["note"] = "two\nlines, \u202eright to left\x7f, a lone \ud800"  # escaped whole or in pieces alike
    written = []
    for k, order in enumerate((None, rows[::-1], rows[1::2] + rows)):  # none given; in another order; some twice
        jobs = None
        if order is not None:
            jobs = JobsJson()
            for row in order:
                jobs(row)
        paths = write_report(
            tmp_path / f"out{k}", rows, engines=ENGINES, sessions=sessions, budgets=BUDGETS[:1], seconds=1.0, jobs=jobs
        )
        written.append(paths["json"].read_bytes())
    assert written[1] == written[0] == written[2]
    assert written[0].decode() == dumps(json.loads(written[0]), indent=1) + "\n"  # as the whole document is written
    assert json.loads(written[0])["jobs"][1]["note"] == "two\nlines, \u202eright to left\x7f, a lone \ufffd"
