"""``latch bench``'s plots: tokens and cacheability per budget beside ``report.md``, and the one PNG comparing
the engines (``--plot``) with its cost-vs-coverage frontier panel. matplotlib is the bench extra.

:class:`Plotter` draws them in worker processes, each figure in its own (the files are those of
:func:`budget_plots` and :func:`write_plot`; the engine plot's boxes and its frontier panel in one each, then
stacked): the figures draw at once and while the caller writes the report, the
workers import pyplot while the bench's jobs run, and a tokens figure's panels (:mod:`latch.bench.panels`) draw as
their sessions' jobs finish. A tokens figure drawn in one process is the slow one (about 8 s for 80 sessions on a
busy 2-core box); drawn panel by panel beside the jobs, what is left after them is pasting the panels together.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..textsafe import atomic_path
from .executor import die_with, mp_context
from .panels import (
    COLUMNS,
    DPI,
    assemble,
    draw_panel,
    panel_lines,
    panel_order,
    pyplot,
    rendered,
    row_pixels,
    save_png,
    tile_pixels,
    title_strip,
    write_tokens_figure,
)
from .runner import Budget
from .summary import frontier_points

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.artist import Artist

__all__ = [
    "ENGINE_TILES",
    "FRONTIER_INCHES",
    "FRONTIER_MARKERS",
    "Plotter",
    "engine_pixels_width",
    "engine_tile",
    "stack_tiles",
    "engine_plot",
    "write_plot",
    "budget_plots",
    "budget_plot_files",
    "draw_budget_figure",
    "pyplot",
]

FRONTIER_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""The frontier panel's marker shape of the i-th budget (cycled)."""


def budget_plot_files(
    folder: Path, results: Sequence[Mapping[str, Any]]
) -> dict[str, tuple[str, str, Path, list[Mapping[str, Any]]]]:
    """The figures :func:`budget_plots` draws: ``{"tokens BUDGET": ("tokens", BUDGET, folder/tokens_SLUG.png, that
    budget's successful results), "cacheability BUDGET": ("cacheability", ...), ...}`` in budget order."""
    by_budget: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        if "error" not in r:
            by_budget.setdefault(r["budget"], []).append(r)
    files: dict[str, tuple[str, str, Path, list[Mapping[str, Any]]]] = {}
    for budget, rs in by_budget.items():
        slug = re.sub(r"[^A-Za-z0-9]+", "-", budget).strip("-")
        for kind in ("tokens", "cacheability"):
            files[f"{kind} {budget}"] = (kind, budget, folder / f"{kind}_{slug}.png", rs)
    return files


def draw_budget_figure(
    kind: str, budget: str, path: Path, rs: Sequence[Mapping[str, Any]], engines: Sequence[str]
) -> Path:
    """One figure of :func:`budget_plots` (``kind`` ``"tokens"`` or ``"cacheability"``) saved at ``path``."""
    if kind == "tokens":
        return write_tokens_figure(path, budget, rs)
    plt = pyplot()
    return _save(plt, _cacheability_figure(plt, budget, rs, engines), path)


def budget_plots(folder: Path, results: Sequence[Mapping[str, Any]], engines: Sequence[str]) -> dict[str, Path]:
    """Per budget of the successful ``results``, two PNGs into ``folder``: tokens per request along each session
    (one line per engine; ``tokens_SLUG.png``) and cacheability per request (one box per engine;
    ``cacheability_SLUG.png``); return ``{"tokens BUDGET": path, "cacheability BUDGET": path, ...}`` in budget
    order. In this process; :meth:`Plotter.budget_plots` draws the same files in worker processes."""
    return {
        key: draw_budget_figure(kind, budget, path, rs, engines)
        for key, (kind, budget, path, rs) in budget_plot_files(folder, results).items()
    }


def _import_pyplot(command: int) -> None:
    """A :class:`Plotter` worker's initializer: ended once the process ``command`` that made the pool has ended
    (:func:`~latch.bench.executor.die_with`), pyplot loaded, a small figure drawn (:func:`_warm_figure`) and the
    worker's panel figure built (:func:`~latch.bench.panels.draw_panel`) before its first figure."""
    die_with(command)
    try:
        _warm_figure(pyplot())
        draw_panel("warm-up", [("warm-up", [1.0, 10.0])], legend=True)
    except Exception:  # noqa: BLE001, S110 - only a warm-up: the figure's own drawing says what is wrong
        pass


def _warm_figure(plt: Any) -> None:
    """Draw and encode a small figure with what the figures left after the jobs use (a logarithmic axis and its
    mathtext tick labels, boxes, a legend outside the axes, a title, constrained layout, a PNG), so a plot worker
    builds its fonts, mathtext parser and caches while the jobs run, not in the figures drawn after them."""
    import io

    fig = plt.figure(figsize=(3.0, 2.0), layout="constrained")
    ax = fig.subplots()
    ax.boxplot([[1.0, 10.0, 100.0, 1_000.0]], whis=(5, 95), showfliers=False, patch_artist=True)
    ax.set_yscale("log")
    ax.text(1, 1.01, "n=4", transform=ax.get_xaxis_transform(), fontsize=6, rotation=90)
    ax.set_title("warm-up", fontsize=8)
    ax.plot([1, 2], [10.0, 100.0], linestyle="--", label="line")
    fig.legend(loc="outside right upper", fontsize=7, title="title", title_fontsize=7)
    fig.suptitle("warm-up", fontsize=9)
    fig.savefig(io.BytesIO(), dpi=110, format="png", pil_kwargs={"compress_level": 3})
    plt.close(fig)


def _started() -> None:
    """A task that only makes the pool start a worker."""


class Plotter:
    """Draws ``latch bench``'s figures in ``workers`` processes, so they draw at once, while the caller writes the
    report, and (the tokens figures' panels) while the jobs still run. The workers are forked from the bench's task
    server (:func:`latch.bench.executor.mp_context`) and start at once, importing pyplot (about half a second) while
    the caller runs its jobs. With ``spawn`` (the jobs run elsewhere, on Dask) the workers are fresh interpreters
    instead, so this process starts no task server of its own.

    A tokens figure is one panel per session (:mod:`latch.bench.panels`): each panel is a task of its own, drawn as
    soon as its session's rows are known (:meth:`watch`, fed each job's row as it finishes) or else when the figure
    is asked for, and the figure is assembled from its panels in a worker. What the figure puts first is drawn
    beside the jobs too: the title strip, and the legend's panel of the session leading the panel order so far
    (redrawn when another takes the lead; used when it still leads once the jobs are done). The methods return
    futures of the paths; :meth:`close` (or leaving a ``with`` block) waits for the figures and ends the workers. A
    figure's exception comes back through its future."""

    def __init__(self, workers: int = 2, *, spawn: bool = False) -> None:
        context = mp.get_context("spawn") if spawn else mp_context()
        self._pool = cf.ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_import_pyplot, initargs=(os.getpid(),)
        )
        for _ in range(workers):
            self._pool.submit(_started)
        self._assembling = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="latch-plot-assemble")
        self._lock = threading.Lock()
        self._panels: dict[tuple[str, str], tuple[Any, cf.Future[bytes]]] = {}
        self._seen: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        self._leads: dict[str, tuple[tuple[int, str], Any, cf.Future[bytes]]] = {}
        self._titles: dict[str, cf.Future[Any]] = {}
        self._sessions: dict[str, set[str]] = {}

    @property
    def panels_asked(self) -> set[tuple[str, str]]:
        """The ``(budget, session)`` of every tokens panel asked of the workers so far (drawn, drawing or queued)."""
        with self._lock:
            return set(self._panels)

    @property
    def first_panels_early(self) -> dict[str, str]:
        """Per budget, the session whose panel with the legend was drawn beside the jobs (:meth:`watch`): the one
        leading the panel order when its rows came in, the figure's first panel if it still leads at the end."""
        with self._lock:
            return {budget: lead[0][1] for budget, lead in self._leads.items()}

    def _panel(self, budget: str, session: str, lines: Any) -> cf.Future[bytes]:
        """The panel of ``session`` at ``budget`` with ``lines``: the one already drawn or drawing for the same
        lines, else a new task."""
        with self._lock:
            known = self._panels.get((budget, session))
            if known is not None and known[0] == lines:
                return known[1]
            future = self._pool.submit(draw_panel, session, lines)
            self._panels[(budget, session)] = (lines, future)
            return future

    def watch(self, engines: Sequence[str]) -> Callable[[Mapping[str, Any]], None]:
        """A callback for each job's row as it finishes (``run_bench(on_row=...)``): once the rows of every one of
        ``engines`` for a (session, budget) are in, that session's tokens panel starts drawing in a worker. It never
        raises: a panel it could not ask for (the workers gone, a row it cannot read) is drawn when its figure is
        asked for, and the jobs go on."""
        expected = len(engines)

        def row_done(row: Mapping[str, Any]) -> None:
            try:
                key = (row["budget"], row["session"])
                with self._lock:
                    rows = self._seen.setdefault(key, [])
                    rows.append(row)
                    if len(rows) != expected:
                        return
                ok = [r for r in rows if "error" not in r]
                if ok:
                    lines = panel_lines(ok, key[1])
                    self._panel(key[0], key[1], lines)
                    self._ahead(key[0], key[1], (-max(r["requests"] for r in ok), key[1]), lines)
            except Exception:  # noqa: BLE001, S110 - an early panel only saves time; its figure draws it anyway
                pass

        return row_done

    def _ahead(self, budget: str, session: str, rank: tuple[int, str], lines: Any) -> None:
        """``session``'s panel at ``budget`` is done, ``rank`` its key in :func:`~latch.bench.panels.panel_order`:
        once :data:`~latch.bench.panels.COLUMNS` sessions are done the title strip starts drawing (the panels' row
        is then that wide), and when ``session`` leads the order so far its panel with the legend does."""
        with self._lock:
            sessions = self._sessions.setdefault(budget, set())
            sessions.add(session)
            if len(sessions) == COLUMNS and budget not in self._titles:
                self._titles[budget] = self._pool.submit(title_strip, budget, row_pixels(COLUMNS))
            lead = self._leads.get(budget)
            if lead is None or rank < lead[0]:
                self._leads[budget] = (rank, lines, self._pool.submit(draw_panel, session, lines, legend=True))

    def _tokens_figure(self, path: Path, budget: str, rs: Sequence[Mapping[str, Any]]) -> cf.Future[Path]:
        names = panel_order(rs)
        lines = panel_lines(rs, names[0])
        with self._lock:
            lead = self._leads.get(budget)
            title = self._titles.get(budget) if min(COLUMNS, len(names)) == COLUMNS else None
        if lead is not None and lead[0][1] == names[0] and lead[1] == lines:
            first = lead[2]  # drawn beside the jobs: it still leads, with the same lines
        else:
            first = self._pool.submit(draw_panel, names[0], lines, legend=True)
        panels = {name: self._panel(budget, name, panel_lines(rs, name)) for name in names[1:]}

        def assembled() -> Path:
            tiles = {names[0]: first.result(), **{name: f.result() for name, f in panels.items()}}
            header = None
            if title is not None:
                try:
                    header = title.result()
                except Exception:  # noqa: BLE001 - only an early copy: assemble draws the strip itself
                    header = None
            return self._pool.submit(assemble, path, budget, names, tiles, header=header).result()

        return self._assembling.submit(assembled)

    def budget_plots(
        self, folder: Path, results: Sequence[Mapping[str, Any]], engines: Sequence[str]
    ) -> dict[str, cf.Future[Path]]:
        """:func:`budget_plots` in the workers: ``{"tokens BUDGET": future of the path, ...}`` in budget order."""
        return {
            key: self._tokens_figure(path, budget, rs)
            if kind == "tokens"
            else self._pool.submit(draw_budget_figure, kind, budget, path, rs, list(engines))
            for key, (kind, budget, path, rs) in budget_plot_files(folder, results).items()
        }

    def write_plot(
        self, path: str | os.PathLike[str], results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]
    ) -> cf.Future[Path]:
        """:func:`write_plot` in the workers: each of its parts in one (:func:`engine_tile`), then stacked."""
        results, budgets = list(results), list(budgets)
        tiles = [self._pool.submit(engine_tile, part, results, budgets) for part in ENGINE_TILES]
        width = engine_pixels_width(results, budgets)

        def stacked() -> Path:
            return self._pool.submit(stack_tiles, path, [t.result() for t in tiles], width).result()

        return self._assembling.submit(stacked)

    def close(self) -> None:
        """Wait for the figures asked for, then end the workers."""
        self._assembling.shutdown(wait=True)
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Plotter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (110 dpi, zlib level 3, atomically), close it; return ``path``."""
    with atomic_path(path) as tmp:
        # zlib level 3, not 6: half the encoding time of a tall figure (about 0.8 s saved on 78 panels) for a file
        # about 8% larger
        fig.savefig(tmp, dpi=110, format="png", pil_kwargs={"compress_level": 3})
    plt.close(fig)
    return path


def _cacheability_figure(plt: Any, budget: str, rs: Sequence[Mapping[str, Any]], engines: Sequence[str]) -> Any:
    """Estimated cacheability per request of ``rs``, one box per engine."""
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(engines), 3.6))
    data = [[c for r in rs if r["engine"] == e for c in r["cacheability"] if c is not None] for e in engines]
    ax.boxplot([d or [float("nan")] for d in data], showfliers=False)
    ax.set_xticks(range(1, len(engines) + 1), list(engines), fontsize=8)
    ax.set_ylabel("estimated cacheability", fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"cacheability per request · budget {budget}", fontsize=9)
    fig.tight_layout()
    return fig


def engine_plot(results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget], *, frontier: bool = False) -> Any:
    """A matplotlib ``Figure`` comparing the engines (``latch bench --plot``): two panels, one above the other,
    tokens sent per request and dollars per request (cache-aware, :func:`latch.accounting.pricing.view_cost`), one box per (engine, budget) over
    every request of every session (whiskers 5-95 %, no fliers), colored by budget, ``n=`` requests above each
    box; dashed lines at each budget's hard limit (``window - reserve`` tokens) on the tokens panel; both axes
    logarithmic; the legend (budgets and their lines) outside the panels, on the right.

    With ``frontier`` a third panel below them: total dollars against needed-context coverage
    (:func:`frontier_points`), one marker per engine (its color) and budget (its shape,
    :data:`FRONTIER_MARKERS`), each budget's Pareto-optimal points joined by a dotted line; its legend (engines,
    then budgets) outside the panel, on the right."""
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ok = [r for r in results if "error" not in r]
    engines = sorted({r["engine"] for r in ok})
    names = [b.name for b in budgets]
    colors = {b: plt.get_cmap("tab10")(i % 10) for i, b in enumerate(names)}
    fig = plt.figure(figsize=(_engine_width(results, budgets), 11.0 if frontier else 7.6), layout="constrained")
    axes = fig.subplots(3 if frontier else 2, 1)
    axes[1].sharex(axes[0])
    width = 0.8 / max(1, len(names))
    panels = ((axes[0], "tokens", "tokens sent per request"), (axes[1], "cost", "dollars per request (cache-aware)"))
    for ax, key, label in panels:
        for i, engine in enumerate(engines):
            for j, budget in enumerate(names):
                values = [
                    v
                    for r in ok
                    if r["engine"] == engine and r["budget"] == budget
                    for v in (r.get(key) or [])
                    if v is not None and v > 0
                ]
                x = i + (j - (len(names) - 1) / 2) * width
                if values:
                    box = ax.boxplot(
                        [values],
                        positions=[x],
                        widths=width * 0.85,
                        whis=(5, 95),
                        showfliers=False,
                        patch_artist=True,
                        manage_ticks=False,
                    )
                    for patch in box["boxes"]:
                        patch.set_facecolor(colors[budget])
                        patch.set_alpha(0.75)
                    for median in box["medians"]:
                        median.set_color("black")
                ax.text(
                    x,
                    1.01,
                    f"n={len(values)}",
                    transform=ax.get_xaxis_transform(),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    rotation=90 if len(names) > 1 else 0,
                )
        ax.set_xticks(range(len(engines)), engines, fontsize=8)
        ax.tick_params(axis="x", labelbottom=True)
        ax.set_xlim(-0.6, len(engines) - 0.4)
        ax.set_yscale("log")
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    for b in budgets:
        axes[0].axhline(b.context_window_tokens - b.reserve_tokens, color=colors[b.name], linestyle="--", linewidth=1)
    handles: list[Artist] = [Patch(facecolor=colors[n], alpha=0.75, label=f"budget {n}") for n in names]
    handles += [
        Line2D(
            [],
            [],
            color=colors[b.name],
            linestyle="--",
            label=f"hard limit {b.context_window_tokens - b.reserve_tokens:,} tokens",
        )
        for b in budgets
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize=7, title="window:reserve:recent", title_fontsize=7)
    fig.suptitle("per engine: tokens and cost per request (boxes: quartiles, whiskers 5-95 %)", fontsize=9)
    if frontier:
        _frontier_panel(axes[2], results, names, engines)
    return fig


def _frontier_panel(
    ax: Any, results: Sequence[Mapping[str, Any]], names: Sequence[str], engines: Sequence[str]
) -> None:
    """Draw :func:`frontier_points` on ``ax`` (see :func:`engine_plot`)."""
    import matplotlib.pyplot as plt  # optional dependency (the bench extra)
    from matplotlib.lines import Line2D

    points = frontier_points(results)
    ink = {e: plt.get_cmap("Dark2")(i % 8) for i, e in enumerate(engines)}  # not the budgets' tab10 colors
    shape = {b: FRONTIER_MARKERS[j % len(FRONTIER_MARKERS)] for j, b in enumerate(names)}
    for p in points:
        color = ink.get(p["engine"], "gray")
        if p["refuses_more"]:  # hollow: over fewer requests than the others, not comparable on this panel
            ax.scatter(
                [p["coverage"]],
                [p["usd"]],
                facecolors="none",
                edgecolors=[color],
                marker=shape.get(p["budget"], "o"),
                s=40,
                linewidths=1.5,
                zorder=3,
            )
        else:
            ax.scatter(
                [p["coverage"]],
                [p["usd"]],
                color=color,
                marker=shape.get(p["budget"], "o"),
                s=40,
                edgecolors="black",
                linewidths=0.5,
                zorder=3,
            )
    for b in names:
        best = sorted((p["coverage"], p["usd"]) for p in points if p["budget"] == b and p["pareto"])
        if len(best) > 1:
            ax.plot([c for c, _ in best], [u for _, u in best], linestyle=":", color="gray", linewidth=1, zorder=2)
    ax.set_xlim(-0.02, 1.02)
    if points and all(p["usd"] > 0 for p in points):
        ax.set_yscale("log")
    ax.set_xlabel("needed-context coverage (present / needed identifiers)", fontsize=8)
    ax.set_ylabel("total dollars (cache-aware)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    missing = len({(r["engine"], r["budget"]) for r in results if "error" not in r}) - len(points)
    refusing = sum(1 for p in points if p["refuses_more"])
    ax.set_title(
        "cost vs needed-context coverage (dotted: each budget's frontier"
        + ("; hollow: refused more requests than the others, so over fewer requests" if refusing else "")
        + ")"
        + (f"; {missing} engine/budget pair(s) unpriced or with nothing needed, not shown" if missing else ""),
        fontsize=8,
    )
    handles = [
        Line2D([], [], linestyle="", marker="o", color=ink[e], markeredgecolor="black", label=e)
        for e in engines
        if any(p["engine"] == e for p in points)
    ]
    handles += [
        Line2D([], [], linestyle="", marker=shape[b], color="white", markeredgecolor="black", label=f"budget {b}")
        for b in names
        if any(p["budget"] == b for p in points)
    ]
    if handles:
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
            fontsize=7,
            title="engine / budget",
            title_fontsize=7,
        )


ENGINE_TILES = ("boxes", "frontier")
"""The parts of the PNG :func:`write_plot` writes, top to bottom, each drawn alone (:func:`engine_tile`)."""
FRONTIER_INCHES = 3.4
"""The frontier tile's height, inches (the boxes' tile is :func:`engine_plot`'s figure without the frontier)."""


def _engine_width(results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]) -> float:
    engines = {r["engine"] for r in results if "error" not in r}
    return max(8.0, 3.0 + 0.9 * len(engines) * len(budgets))


def engine_tile(part: str, results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]) -> bytes:
    """One part (:data:`ENGINE_TILES`) of :func:`write_plot`'s PNG rendered at :data:`~latch.bench.panels.DPI`:
    ``"boxes"`` is :func:`engine_plot` without its frontier panel, ``"frontier"`` that panel (:func:`frontier_points`)
    alone, :data:`FRONTIER_INCHES` high; both as wide as :func:`engine_plot`. Returns the tile
    (:func:`~latch.bench.panels.rendered`)."""
    if part == "boxes":
        fig = engine_plot(results, budgets)
    else:
        fig = pyplot().figure(figsize=(_engine_width(results, budgets), FRONTIER_INCHES), layout="constrained")
        ok = [r for r in results if "error" not in r]
        _frontier_panel(fig.subplots(), results, [b.name for b in budgets], sorted({r["engine"] for r in ok}))
    fig.set_dpi(DPI)
    return rendered(fig)


def stack_tiles(path: str | os.PathLike[str], tiles: Sequence[bytes], width: int) -> Path:
    """Write the tiles of :func:`engine_tile` (each ``width`` pixels wide), one under the other, as a PNG at
    ``path`` (:data:`~latch.bench.panels.DPI`, zlib level 3, atomically); return the path."""
    import numpy as np

    return save_png(Path(path), np.concatenate([tile_pixels(tile, width) for tile in tiles]))


def engine_pixels_width(results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]) -> int:
    """The width in pixels of :func:`engine_tile`'s tiles."""
    return round(_engine_width(results, budgets) * DPI)


def write_plot(path: str | os.PathLike[str], results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]) -> Path:
    """The PNG comparing the engines at ``path``: :func:`engine_plot`'s panels, the frontier's below the boxes, each
    part drawn here (:func:`engine_tile`, :func:`stack_tiles`; :meth:`Plotter.write_plot` draws the parts at once in
    its workers); return the path."""
    tiles = [engine_tile(part, results, budgets) for part in ENGINE_TILES]
    return stack_tiles(path, tiles, engine_pixels_width(results, budgets))
