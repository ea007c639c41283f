"""The tokens figure panel by panel: each session's panel holds its engines' tokens per request, panels come in a
fixed order, a session's panel starts drawing once every engine's row of it is in, and the figure drawn in worker
processes as the rows come in is the same image as the one drawn here in one go."""

from __future__ import annotations

import math
import random

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402
import numpy as np  # noqa: E402

from latch.bench import panels  # noqa: E402
from latch.bench.plots import Plotter, budget_plot_files  # noqa: E402

pytestmark = pytest.mark.slow  # worker processes

ENGINES = ["continuity", "sliding-window"]


def _row(engine: str, session: str, budget: str, tokens: list[int | None]) -> dict:
    return {
        "engine": engine,
        "session": session,
        "budget": budget,
        "requests": len(tokens),
        "tokens": tokens,
        "cacheability": [0.5 for _ in tokens],
    }


def _results(sessions: int = 5) -> list[dict]:
    rng = random.Random(7)
    rows = []
    for budget in ("32k:4k:8k", "256k:32k:64k"):
        for s in range(sessions):
            n = (9, 4, 12, 4, 7)[s % 5]  # s1 and s3 of equal length: the order falls back to the name
            for engine in ENGINES:
                tokens: list[int | None] = [rng.randrange(1_000, 30_000) for _ in range(n)]
                tokens[n // 2] = None  # a refused request
                rows.append(_row(engine, f"s{s}.jsonl", budget, tokens))
    return rows


def test_each_panel_plots_its_engines_tokens_per_request_with_gaps_for_refusals():
    rows = [r for r in _results() if r["budget"] == "32k:4k:8k"]
    fig = panels.panel_figure("s3.jsonl", panels.panel_lines(rows, "s3.jsonl"), legend=True)
    try:
        (ax,) = fig.axes
        assert ax.get_title() == "s3.jsonl"
        plotted = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}
        assert list(plotted) == ENGINES
        for r in (r for r in rows if r["session"] == "s3.jsonl"):
            xs, ys = plotted[r["engine"]]
            assert xs == list(range(1, r["requests"] + 1))
            assert [None if math.isnan(y) else y for y in ys] == r["tokens"]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ENGINES
    finally:
        panels.pyplot().close(fig)


def test_panels_go_longest_session_first_then_by_name():
    rows = [_row("a", name, "b", [1] * n) for name, n in (("z", 3), ("y", 9), ("x", 3), ("w", 5), ("v", 3))]
    rows.append(_row("b", "x", "b", [1] * 12))  # the longest over the engines counts
    assert panels.panel_order(rows) == ["x", "y", "w", "v", "z"]


def test_a_sessions_panel_is_asked_for_once_every_engines_row_of_it_is_in():
    rows = _results(3)
    with Plotter(1) as plotter:
        done = plotter.watch(ENGINES)
        first, second = (r for r in rows if r["session"] == "s0.jsonl" and r["budget"] == "32k:4k:8k")
        done(first)
        assert plotter.panels_asked == set()
        done(second)
        assert plotter.panels_asked == {("32k:4k:8k", "s0.jsonl")}
        failed = {"engine": "continuity", "session": "s1.jsonl", "budget": "32k:4k:8k", "error": "ValueError: x"}
        done(failed)  # a failed job's row counts as in; its panel has the other engine's line
        done(next(r for r in rows if r["engine"] == "sliding-window" and r["session"] == "s1.jsonl"))
        assert plotter.panels_asked == {("32k:4k:8k", "s0.jsonl"), ("32k:4k:8k", "s1.jsonl")}


def test_a_panel_that_cannot_be_asked_for_never_stops_the_jobs():
    plotter = Plotter(1)
    plotter.close()  # its workers gone: nothing can be submitted
    done = plotter.watch(["continuity"])
    done(_row("continuity", "s0.jsonl", "32k:4k:8k", [1, 2]))  # no exception into the jobs' loop
    done({"engine": "continuity"})  # nor for a row it cannot read
    assert plotter.panels_asked == set()


def test_the_figure_drawn_in_workers_as_rows_come_in_is_the_one_drawn_here(tmp_path):
    rows = _results()
    here = tmp_path / "here"
    here.mkdir()
    files = budget_plot_files(here, rows)
    for kind, budget, path, rs in files.values():
        if kind == "tokens":
            panels.write_tokens_figure(path, budget, rs)
    workers = tmp_path / "workers"
    workers.mkdir()
    with Plotter(2) as plotter:
        done = plotter.watch(ENGINES)
        for row in random.Random(3).sample(rows, len(rows)):  # in the order jobs finish, not the plan's
            done(row)
        asked = plotter.panels_asked
        figures = plotter.budget_plots(workers, rows, ENGINES)
        paths = {key: f.result() for key, f in figures.items()}
    assert asked == {(r["budget"], r["session"]) for r in rows}
    for key, (kind, _, path, rs) in files.items():
        if kind != "tokens":
            continue
        mine, theirs = mpimg.imread(path), mpimg.imread(paths[key])
        names = panels.panel_order(rs)
        tile_w, tile_h = (round(v * panels.DPI) for v in panels.TILE_INCHES)
        assert mine.shape == (round(panels.HEADER_INCHES * panels.DPI) + 2 * tile_h, 3 * tile_w, 4)
        assert len(names) == 5
        assert np.array_equal(mine, theirs)


def test_a_panel_drawn_on_the_kept_figure_is_the_same_bytes_as_on_a_new_one():
    rng = random.Random(11)
    cases = []
    for k in range(24):
        n = (0, 1, 3, 40, 0, 300)[k % 6]  # an empty session after a full one: no limits kept from it
        top = (1e3, 3e4, 2e5)[k % 3]
        lines = [(e, [None if rng.random() < 0.05 else rng.random() * top for _ in range(n)]) for e in ENGINES]
        cases.append((f"s{k}" + "-long-name" * (k % 4), lines, k % 5 == 0))
    for session, lines, legend in cases:
        kept = panels.draw_panel(session, lines, legend=legend)
        assert kept == panels.rendered(panels.panel_figure(session, lines, legend=legend)), session


def test_a_saved_png_reads_back_as_the_same_pixels_at_the_bench_dpi(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(5)
    canvas = np.full((549, 61, 4), 255, dtype=np.uint8)
    canvas[::7] = rng.integers(0, 256, size=canvas[::7].shape, dtype=np.uint8)  # noise rows between white ones
    path = panels.save_png(tmp_path / "sub" / "figure.png", canvas)
    with Image.open(path) as image:
        assert image.mode == "RGBA" and image.size == (61, canvas.shape[0])
        assert np.array_equal(np.asarray(image), canvas)
        assert tuple(round(d) for d in image.info["dpi"]) == (panels.DPI, panels.DPI)
        assert image.info["Software"].startswith("Matplotlib version")
    assert np.array_equal((mpimg.imread(path) * 255).round().astype(np.uint8), canvas)


def test_the_title_and_the_leading_panel_drawn_beside_the_jobs_make_the_same_file(tmp_path):
    rows = _results()
    here, workers = tmp_path / "here", tmp_path / "workers"
    here.mkdir()
    workers.mkdir()
    files = budget_plot_files(here, rows)
    for kind, budget, path, rs in files.values():
        if kind == "tokens":
            panels.write_tokens_figure(path, budget, rs)
    # the longest session's rows come in last, so the lead changes along the way
    order = sorted(random.Random(5).sample(rows, len(rows)), key=lambda r: r["session"] == "s2.jsonl")
    with Plotter(2) as plotter:
        done = plotter.watch(ENGINES)
        leads = []
        for row in order:
            done(row)
            leads.append(plotter.first_panels_early.get("32k:4k:8k"))
        early = plotter.first_panels_early
        figures = plotter.budget_plots(workers, rows, ENGINES)
        paths = {key: f.result() for key, f in figures.items()}
    assert "s0.jsonl" in leads and leads[-1] == "s2.jsonl"  # s0 (9 requests) led before s2 (12) came in
    for key, (kind, budget, path, rs) in files.items():
        if kind == "tokens":
            assert early[budget] == panels.panel_order(rs)[0] == "s2.jsonl"
            assert path.read_bytes() == paths[key].read_bytes()


def test_a_title_strip_drawn_before_makes_the_same_file_and_one_too_narrow_is_drawn_again(tmp_path):
    rows = [r for r in _results() if r["budget"] == "32k:4k:8k"]
    names = panels.panel_order(rows)
    tiles = {
        name: panels.draw_panel(name, panels.panel_lines(rows, name), legend=k == 0) for k, name in enumerate(names)
    }
    width = round(panels.TILE_INCHES[0] * panels.DPI) * panels.COLUMNS
    plain = panels.assemble(tmp_path / "plain.png", "32k:4k:8k", names, tiles)
    early = panels.assemble(
        tmp_path / "early.png", "32k:4k:8k", names, tiles, header=panels.title_strip("32k:4k:8k", width)
    )
    narrow = panels.assemble(
        tmp_path / "narrow.png", "32k:4k:8k", names, tiles, header=panels.title_strip("32k:4k:8k", width // 3)
    )
    assert plain.read_bytes() == early.read_bytes() == narrow.read_bytes()
    pixels = mpimg.imread(plain)
    tile_w, tile_h = (round(v * panels.DPI) for v in panels.TILE_INCHES)
    header = round(panels.HEADER_INCHES * panels.DPI)
    assert len(names) == 5 and pixels.shape == (header + 2 * tile_h, 3 * tile_w, 4)
    assert (pixels[header + tile_h :, 2 * tile_w :] == 1.0).all()  # the cell after the last panel: white
    assert (pixels[header + tile_h :, tile_w : 2 * tile_w] < 1.0).any()  # the last panel's cell: drawn
