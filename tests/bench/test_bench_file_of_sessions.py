"""A job for one session of a file of several (an Aider history) imports that session alone, parsed once by the
caller, and its row is the row of a job that imports the whole file; the report of the same results is the same
bytes."""

from __future__ import annotations

import shutil

import pytest
from corpus_support import require_corpus

from latch.bench import runner
from latch.bench.report import write_report
from latch.bench.runner import SessionSource, discover_sessions, parse_budgets, run_job, session_part

AIDER = "aider/monochromatic.aider.chat.history.md"
BUDGET = parse_budgets("32k:4k:8k")[0]


def _stable(row: dict) -> dict:
    """A job's row without what differs from run to run (timings, memory)."""
    return {k: v for k, v in row.items() if k not in ("seconds", "peak_mb")}


@pytest.fixture
def history(tmp_path):
    """A copy of the corpus's Aider history of several sessions, alone in a folder."""
    src = require_corpus() / AIDER
    folder = tmp_path / "corpus"
    (folder / "aider").mkdir(parents=True)
    shutil.copy(src, folder / AIDER)
    return folder


def test_a_session_of_a_file_of_several_is_imported_alone_with_the_row_of_a_whole_file_import(history):
    sessions = discover_sessions(history, None, scenario_events=0)
    assert len(sessions) > 2 and all(s.session is not None for s in sessions)
    for source in (sessions[0], sessions[len(sessions) // 2], sessions[-1]):
        part = session_part(source)
        assert part is not None and part.parsed.external_key == source.session
        whole = run_job("continuity", source, BUDGET)  # imports every session of the file, as before
        alone = run_job("continuity", source, BUDGET, part=part)
        assert "error" not in alone and _stable(alone) == _stable(whole)
        assert [n["seq"] for n in alone["needles"]] == [n["seq"] for n in whole["needles"]]


def test_a_job_given_its_parsed_session_never_reads_the_file(history):
    source = discover_sessions(history, None, scenario_events=0)[1]
    part = session_part(source)
    expected = run_job("continuity", source, BUDGET, part=part)
    (history / AIDER).unlink()  # the job has nothing left to parse
    assert _stable(run_job("continuity", source, BUDGET, part=part)) == _stable(expected)
    gone = SessionSource(name=source.name, path=source.path, session=source.session)
    assert session_part(gone) is None  # the job then reports the missing file itself


def test_a_file_is_parsed_once_per_process_until_it_changes(history, monkeypatch):
    calls = []
    parse = runner.parse_all_file
    monkeypatch.setattr(runner, "parse_all_file", lambda *a, **k: calls.append(a[0]) or parse(*a, **k))
    runner._PARSED.clear()
    sessions = discover_sessions(history, None, scenario_events=0)
    parts = [session_part(s) for s in sessions]
    assert len(calls) == 1 and all(p is not None for p in parts)
    path = history / AIDER
    path.write_bytes(path.read_bytes() + b"\n")  # another size: parsed again
    session_part(sessions[0])
    assert len(calls) == 2


def _timeless(rows: list[dict]) -> list[dict]:
    """Rows with their timings and memory set to fixed values: what the same inputs give every time."""
    return [{**r, "seconds": [0.0] * len(r["seconds"]), "peak_mb": 1.0} for r in rows]


def test_the_report_is_the_same_bytes_as_from_jobs_that_import_the_whole_file(history, tmp_path):
    pytest.importorskip("matplotlib", reason="the bench extra draws the plots")
    engines = ["continuity", "sliding-window"]
    sessions = discover_sessions(history, None, scenario_events=0)[:3]
    forked = runner.run_bench(engines, sessions, [BUDGET], jobs=2)
    whole = [run_job(e, s, BUDGET) for e in engines for s in sessions]  # in this process, every session imported
    written = []
    for k, results in enumerate((forked, whole)):
        paths = write_report(
            tmp_path / f"out{k}", _timeless(results), engines=engines, sessions=sessions, budgets=[BUDGET], seconds=1.0
        )
        written.append({key: paths[key].read_bytes() for key in ("json", "markdown")})
    assert written[0] == written[1]
