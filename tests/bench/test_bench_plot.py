"""``latch bench --plot OUT.png``: per engine boxes of tokens and dollars per request, n per box,
the budgets' hard limits as lines, the legend off the data."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402
import numpy as np  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from corpus_support import REPO  # noqa: E402

from latch.bench.plots import engine_plot  # noqa: E402
from latch.bench.report import markdown_table  # noqa: E402
from latch.bench.runner import Budget  # noqa: E402
from latch.bench.summary import frontier_points, summarize  # noqa: E402
from latch.cli import _load_commands, cli  # noqa: E402

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

BUDGETS = [Budget("32k:4k:8k", 32_000, 4_000, 8_000), Budget("256k:32k:64k", 256_000, 32_000, 64_000)]


def _job(engine: str, budget: str, tokens: list[int], cost: list[float | None]) -> dict:
    return {"engine": engine, "session": "s", "budget": budget, "tokens": tokens, "cost": cost}


def test_latch_bench_plot_writes_a_readable_png(tmp_path):
    _load_commands()
    png = tmp_path / "compare.png"
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            "--engines",
            "continuity",
            "--examples",
            str(REPO / "examples"),
            "--scenario-events",
            "0",
            "--budgets",
            "32k:4k:8k,256k:32k:64k",
            "--out",
            str(tmp_path / "out"),
            "--jobs",
            "2",
            "--plot",
            str(png),
        ],
    )
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(png)
    height, width = pixels.shape[:2]
    assert width >= 800 and height >= 800  # 8 x 7.6 inches at 110 dpi at least
    rgb = pixels[..., :3]
    ink = (rgb.min(axis=2) < 0.9).mean()  # share of pixels that are not (near) white
    assert 0.02 < ink < 0.6
    assert len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 20  # boxes, lines and text


def test_the_plot_may_go_into_the_out_folder_before_it_exists(tmp_path):
    """``latch bench --out R --plot R/frontier.png`` with R not there yet said "folder R does not exist" although
    bench creates R: a file directly in the command's output folder is accepted whatever the option order; a
    deeper folder that nothing creates is still refused, before any work."""
    _load_commands()
    base = [
        "bench",
        "--engines",
        "continuity",
        "--examples",
        str(REPO / "examples"),
        "--scenario-events",
        "0",
        "--budgets",
        "32k:4k:8k",
        "--jobs",
        "1",
    ]
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, [*base, "--plot", str(out / "frontier.png"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / "report.json").is_file()
    deeper = tmp_path / "other" / "plots" / "frontier.png"
    res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "other"), "--plot", str(deeper)])
    assert res.exit_code == 2 and "folder" in res.output and "does not exist" in res.output
    assert not (tmp_path / "other").exists()  # refused before any work


def test_the_legend_is_off_the_data_with_budget_lines_and_n_per_box():
    results = [
        _job("sliding-window", "32k:4k:8k", [1_000, 2_000, 3_000], [0.01, 0.02, None]),
        _job("sliding-window", "256k:32k:64k", [5_000, 9_000], [0.03, 0.05]),
        _job("continuity", "32k:4k:8k", [800, 900, 950, 990], [0.005, 0.006, 0.007, 0.008]),
        _job("continuity", "256k:32k:64k", [4_000], [0.02]),
        {"engine": "broken", "session": "s", "budget": "32k:4k:8k", "error": "ValueError: bad"},
    ]
    fig = engine_plot(results, BUDGETS)
    fig.canvas.draw()
    tokens_ax, cost_ax = fig.axes
    (legend,) = fig.legends
    box = legend.get_window_extent()
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent()), "the legend covers a panel"
    assert [t.get_text() for t in legend.get_texts()] == [
        "budget 32k:4k:8k",
        "budget 256k:32k:64k",
        "hard limit 28,000 tokens",
        "hard limit 224,000 tokens",
    ]
    dashed = [line.get_ydata()[0] for line in tokens_ax.get_lines() if line.get_linestyle() == "--"]
    assert dashed == [28_000, 224_000]
    # engines in name order, budgets in the given order: continuity 32k, 256k; sliding-window 32k, 256k
    assert [t.get_text() for t in tokens_ax.texts] == ["n=4", "n=1", "n=3", "n=2"]
    assert [t.get_text() for t in cost_ax.texts] == ["n=4", "n=1", "n=2", "n=2"]  # the unpriced request is left out
    assert [t.get_text() for t in tokens_ax.get_xticklabels()] == ["continuity", "sliding-window"]
    assert tokens_ax.get_yscale() == "log"


def _priced(engine: str, budget: str, usd: float | None, needed: int, present: int) -> dict:
    return {
        **_job(engine, budget, [1_000], [usd]),
        "cost_usd": usd,
        "coverage_needed": needed,
        "coverage_present": present,
    }


def test_the_frontier_panel_plots_dollars_against_coverage_one_marker_per_engine_and_budget():
    results = [
        _priced("continuity", "32k:4k:8k", 0.40, 10, 9),
        _priced("continuity", "32k:4k:8k", 0.20, 10, 7),
        _priced("sliding-window", "32k:4k:8k", 0.90, 20, 10),
        _priced("observation-masking", "32k:4k:8k", 0.30, 20, 12),
        _priced("continuity", "256k:32k:64k", 1.50, 20, 20),
        _priced("sliding-window", "256k:32k:64k", None, 20, 20),  # unpriced: no point
        {"engine": "broken", "session": "s", "budget": "32k:4k:8k", "error": "ValueError: bad"},
    ]
    points = {(p["engine"], p["budget"]): p for p in frontier_points(results)}
    assert set(points) == {
        ("continuity", "32k:4k:8k"),
        ("sliding-window", "32k:4k:8k"),
        ("observation-masking", "32k:4k:8k"),
        ("continuity", "256k:32k:64k"),
    }
    assert (
        round(points["continuity", "32k:4k:8k"]["usd"], 9) == 0.6
        and points["continuity", "32k:4k:8k"]["coverage"] == 0.8
    )
    assert points["continuity", "32k:4k:8k"]["sessions"] == 2
    # sliding-window costs more than masking for less coverage: off the 32k frontier
    assert [k for k, p in points.items() if p["pareto"]] == [
        ("continuity", "32k:4k:8k"),
        ("continuity", "256k:32k:64k"),
        ("observation-masking", "32k:4k:8k"),
    ]

    fig = engine_plot(results, BUDGETS, frontier=True)
    fig.canvas.draw()
    tokens_ax, cost_ax, frontier_ax = fig.axes
    offsets = sorted(tuple(np.round(c.get_offsets()[0], 3)) for c in frontier_ax.collections)
    assert offsets == [(0.5, 0.9), (0.6, 0.3), (0.8, 0.6), (1.0, 1.5)]
    shapes = {c.get_offsets()[0][0]: c.get_paths()[0].vertices.shape for c in frontier_ax.collections}
    assert shapes[1.0] != shapes[0.8]  # the 256k budget's marker has another shape than the 32k one's
    assert frontier_ax.get_yscale() == "log"
    legend = frontier_ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "continuity",
        "observation-masking",
        "sliding-window",
        "budget 32k:4k:8k",
        "budget 256k:32k:64k",
    ]
    box = legend.get_window_extent()
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent()), "the frontier legend covers a panel"
    (frontier_line,) = [line for line in frontier_ax.get_lines() if line.get_linestyle() == ":"]
    assert list(frontier_line.get_xdata()) == [0.6, 0.8]  # the 32k frontier: masking, then continuity
    assert "1 engine/budget pair(s) unpriced" in frontier_ax.get_title()
    assert len(engine_plot(results, BUDGETS).axes) == 2  # without the frontier: the two box panels


def test_the_table_is_sorted_by_the_frontier_and_a_refusing_engine_is_never_on_it():
    """Per budget, the frontier's rows cheapest first, then the dominated, then an engine that
    refused more requests than the others (raw history past the budget: cheap and fully covered over the
    requests it answered only, so it must not push the others off), then the unpriced."""

    def job(engine, budget, usd, needed, present, refused=0):
        return {
            **_priced(engine, budget, usd, needed, present),
            "refused": refused,
            "requests": 1,
            "cacheability": [1.0],
            "seconds": [0.001],
            "survival": {},
            "protocol_invalid": [],
            "budget_violations": [],
            "cost_cache_read_tokens": 0,
            "cost_input_tokens": 1_000,
        }

    results = [
        job("sliding-window", "32k:4k:8k", 0.90, 20, 10),
        job("continuity", "32k:4k:8k", 0.40, 10, 9),
        job("raw-history", "32k:4k:8k", 0.05, 5, 5, refused=7),
        job("observation-masking", "32k:4k:8k", 0.30, 20, 12),
        job("continuity", "256k:32k:64k", 1.50, 20, 20),
        job("sliding-window", "256k:32k:64k", None, 20, 20),
    ]
    points = {(p["engine"], p["budget"]): p for p in frontier_points(results)}
    assert points["raw-history", "32k:4k:8k"]["pareto"] is False and points["raw-history", "32k:4k:8k"]["refused"] == 7
    assert points["observation-masking", "32k:4k:8k"]["pareto"] and points["continuity", "32k:4k:8k"]["pareto"]
    rows = summarize(iter(results))  # any iterable: it is read twice (rows, then the frontier)
    assert [(r["budget"], r["engine"], r["frontier"]) for r in rows] == [
        ("32k:4k:8k", "observation-masking", "yes"),
        ("32k:4k:8k", "continuity", "yes"),
        ("32k:4k:8k", "sliding-window", "no"),
        ("32k:4k:8k", "raw-history", "refuses"),
        ("256k:32k:64k", "continuity", "yes"),
        ("256k:32k:64k", "sliding-window", None),
    ]
    # where every engine refuses the same unanswerable requests (a tool result above the hard limit), those
    # disqualify none: only refusing more than the fewest does
    same = [{**r, "refused": r["refused"] + 4} for r in results]
    assert [(r["engine"], r["frontier"]) for r in summarize(same)][:4] == [
        ("observation-masking", "yes"),
        ("continuity", "yes"),
        ("sliding-window", "no"),
        ("raw-history", "refuses"),
    ]
    fig = engine_plot(results, BUDGETS, frontier=True)
    frontier_ax = fig.axes[2]
    hollow = [c for c in frontier_ax.collections if len(c.get_facecolor()) == 0 or c.get_facecolor()[0][3] == 0]
    assert [tuple(np.round(c.get_offsets()[0], 3)) for c in hollow] == [(1.0, 0.05)]  # raw-history only
    assert "hollow: refused more requests" in frontier_ax.get_title()
    table = markdown_table(rows).splitlines()
    assert "| cost/coverage frontier |" in table[0]
    assert table[2].startswith("| observation-masking | 32k:4k:8k | yes |") and "| refuses |" in table[5]


def test_the_engine_plot_is_its_boxes_over_its_frontier_the_same_pixels_drawn_here_or_in_workers(tmp_path):
    from latch.bench.plots import Plotter, write_plot

    results = [
        _priced("continuity", "32k:4k:8k", 0.40, 10, 9),
        _priced("sliding-window", "32k:4k:8k", 0.90, 20, 10),
        _priced("continuity", "256k:32k:64k", 1.50, 20, 20),
        _priced("sliding-window", "256k:32k:64k", 0.70, 20, 12),
    ]
    here = mpimg.imread(write_plot(tmp_path / "here.png", results, BUDGETS))
    with Plotter(2) as plotter:
        there = mpimg.imread(plotter.write_plot(tmp_path / "there.png", results, BUDGETS).result())
    assert here.shape == (round(7.6 * 110) + round(3.4 * 110), 8 * 110, 4)  # the boxes' 7.6 inches, the frontier's 3.4
    assert np.array_equal(here, there)
    boxes = engine_plot(results, BUDGETS)
    boxes.set_dpi(110)
    boxes.canvas.draw()
    assert np.array_equal((here[: round(7.6 * 110)] * 255).round(), np.asarray(boxes.canvas.buffer_rgba()))
