"""A bench job's exact token counts kept in a count-cache file (``run_job``/``run_bench`` ``count_cache``): the same
row with the file as without it, and a job whose texts are all in the file counts none itself."""

from __future__ import annotations

import json

import pytest
from corpus_support import REPO

from latch import count_cache
from latch.bench.runner import Budget, SessionSource, run_bench, run_job

EXAMPLE = SessionSource(name="invoice", path=str(REPO / "examples" / "invoice-rounding.claude.jsonl"))
BUDGET = Budget("32k:4k:8k", 32_000, 4_000, 8_000)


def _timeless(row):
    return {k: v for k, v in row.items() if k not in ("seconds", "peak_mb")}


def _kept(path):
    return json.loads(path.read_text(encoding="utf-8"))["counts"]


def test_a_job_with_its_counts_kept_gives_the_same_row_and_counts_nothing_again(tmp_path, monkeypatch):
    o200k = pytest.importorskip("latch_tiktoken.o200k")
    path = tmp_path / "token-counts.json"
    plain = run_job("continuity", EXAMPLE, BUDGET, "o200k")
    assert plain["estimator"] == "o200k" and plain["requests"] > 0
    first = run_job("continuity", EXAMPLE, BUDGET, "o200k", count_cache=path)
    kept = _kept(path)
    assert len(kept) > 10 and all(k.startswith(f"{o200k.O200kEstimator.TOKENIZER}\x00") for k in kept)
    assert count_cache.count_cache_file() is None  # the process's own setting again

    def counted(self, text):
        raise AssertionError(f"counted again: {text[:40]!r}")

    monkeypatch.setattr(o200k.O200kEstimator, "estimate", counted)
    again = run_job("continuity", EXAMPLE, BUDGET, "o200k", count_cache=path)
    assert _timeless(plain) == _timeless(first) == _timeless(again)
    assert _kept(path) == kept  # nothing new to add
    with pytest.raises(AssertionError, match="counted again"):
        run_job("continuity", EXAMPLE, BUDGET, "o200k")  # without the file every text is counted


def test_a_job_restores_the_count_cache_file_in_use(tmp_path):
    before, job = tmp_path / "before.json", tmp_path / "job.json"
    count_cache.use_count_cache(before)
    run_job("sliding-window", EXAMPLE, BUDGET, count_cache=job)
    assert count_cache.count_cache_file() == before


def test_run_bench_passes_the_count_cache_to_each_job_process(tmp_path):
    pytest.importorskip("latch_tiktoken.o200k")
    path = tmp_path / "token-counts.json"
    rows = run_bench(["continuity", "sliding-window"], [EXAMPLE], [BUDGET], jobs=1, estimator="o200k", count_cache=path)
    assert [r.get("error") for r in rows] == [None, None]
    assert len(_kept(path)) > 10  # written by the task processes
    alone = run_job("continuity", EXAMPLE, BUDGET, "o200k")
    assert _timeless(rows[0]) == _timeless(alone)


def test_latch_bench_keeps_its_jobs_counts_in_its_data_folder(tmp_path, monkeypatch):
    pytest.importorskip("latch_tiktoken.o200k")
    from click.testing import CliRunner

    from latch.cli import _load_commands, cli

    _load_commands()
    monkeypatch.setenv("LATCH_HOME", str(tmp_path / "home"))
    examples = tmp_path / "examples"
    examples.mkdir()
    examples.joinpath("invoice.jsonl").write_bytes(open(EXAMPLE.path, "rb").read())
    args = ["bench", "--engines", "continuity", "--examples", str(examples), "--scenario-events", "0"]
    args += ["--budgets", "32k:4k:8k", "--estimator", "o200k", "--jobs", "1", "--out", str(tmp_path / "out")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    kept = _kept(tmp_path / "home" / "cache" / "token-counts.json")
    assert len(kept) > 10 and all(k.startswith("quicktok:o200k_base\x00") for k in kept)
