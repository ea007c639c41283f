"""``latch bench``'s plots: tokens and cacheability per budget beside ``report.md``, and the one PNG comparing
the engines (``--plot``) with its cost-vs-coverage frontier panel. matplotlib is the bench extra.

:class:`Plotter` draws them in worker processes, each figure in its own (the files are those of
:func:`budget_plots` and :func:`write_plot`): the figures draw at once and while the caller writes the report, and
the workers import pyplot while the bench's jobs run. A tokens figure of many sessions is the slow one (about 8 s
for 80 sessions on a busy 2-core box, most of it matplotlib's layout and rendering).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..textsafe import atomic_path
from .executor import mp_context
from .runner import Budget
from .summary import frontier_points

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.artist import Artist

__all__ = [
    "FRONTIER_MARKERS",
    "Plotter",
    "engine_plot",
    "write_plot",
    "budget_plots",
    "budget_plot_files",
    "draw_budget_figure",
    "pyplot",
]

FRONTIER_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""The frontier panel's marker shape of the i-th budget (cycled)."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend; ``ImportError`` without the bench extra (the
    command checks it is installed)."""
    import matplotlib  # optional dependency (the bench extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    plt = pyplot()
    fig = _tokens_figure(plt, budget, rs) if kind == "tokens" else _cacheability_figure(plt, budget, rs, engines)
    return _save(plt, fig, path)


def budget_plots(folder: Path, results: Sequence[Mapping[str, Any]], engines: Sequence[str]) -> dict[str, Path]:
    """Per budget of the successful ``results``, two PNGs into ``folder``: tokens per request along each session
    (one line per engine; ``tokens_SLUG.png``) and cacheability per request (one box per engine;
    ``cacheability_SLUG.png``); return ``{"tokens BUDGET": path, "cacheability BUDGET": path, ...}`` in budget
    order. In this process; :meth:`Plotter.budget_plots` draws the same files in worker processes."""
    return {
        key: draw_budget_figure(kind, budget, path, rs, engines)
        for key, (kind, budget, path, rs) in budget_plot_files(folder, results).items()
    }


def _import_pyplot() -> None:
    """A :class:`Plotter` worker's initializer: pyplot loaded before its first figure."""
    try:
        pyplot()
    except ImportError:  # the figure's own import says what is wrong
        pass


def _started() -> None:
    """A task that only makes the pool start a worker."""


class Plotter:
    """Draws ``latch bench``'s figures in ``workers`` processes, each figure in its own task, so they draw at once and
    while the caller writes the report. The workers are forked from the bench's task server
    (:func:`latch.bench.executor.mp_context`) and start at once, importing pyplot (about half a second) while the
    caller runs its jobs. With ``spawn`` (the jobs run elsewhere, on Dask) the workers are fresh interpreters
    instead, so this process starts no task server of its own. The methods return futures of the paths; :meth:`close` (or leaving a ``with`` block)
    waits for the figures and ends the workers. A figure's exception comes back through its future."""

    def __init__(self, workers: int = 2, *, spawn: bool = False) -> None:
        context = mp.get_context("spawn") if spawn else mp_context()
        self._pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_import_pyplot)
        for _ in range(workers):
            self._pool.submit(_started)

    def budget_plots(
        self, folder: Path, results: Sequence[Mapping[str, Any]], engines: Sequence[str]
    ) -> dict[str, cf.Future[Path]]:
        """:func:`budget_plots` in the workers: ``{"tokens BUDGET": future of the path, ...}`` in budget order."""
        return {
            key: self._pool.submit(draw_budget_figure, kind, budget, path, rs, list(engines))
            for key, (kind, budget, path, rs) in budget_plot_files(folder, results).items()
        }

    def write_plot(
        self, path: str | os.PathLike[str], results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]
    ) -> cf.Future[Path]:
        """:func:`write_plot` in a worker."""
        return self._pool.submit(write_plot, path, list(results), list(budgets))

    def close(self) -> None:
        """Wait for the figures asked for, then end the workers."""
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


def _tokens_figure(plt: Any, budget: str, rs: Sequence[Mapping[str, Any]]) -> Any:
    """Tokens sent per request along each session of ``rs`` (one panel per session, longest first; one line per
    engine)."""
    names = sorted({r["session"] for r in rs}, key=lambda n: -max(x["requests"] for x in rs if x["session"] == n))
    cols = min(3, len(names))
    nrows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.2 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        for r in sorted((x for x in rs if x["session"] == name), key=lambda x: x["engine"]):
            ax.plot(
                range(1, len(r["tokens"]) + 1),
                [t if t is not None else float("nan") for t in r["tokens"]],
                label=r["engine"],
                linewidth=1,
            )
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("request", fontsize=7)
        ax.set_ylabel("tokens sent", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    # margins in inches, the same for every panel (their labels are alike): what tight_layout would find, without
    # measuring every label of every panel (seconds for a corpus of many sessions); the title above the first row
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=0.75 / width, right=1 - 0.2 / width, bottom=0.5 / height, top=1 - 0.75 / height, wspace=0.2, hspace=0.42
    )
    fig.suptitle(f"tokens per request along each session · budget {budget}", fontsize=10, y=1 - 0.2 / height)
    return fig


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
    fig = plt.figure(
        figsize=(max(8.0, 3.0 + 0.9 * len(engines) * len(names)), 11.0 if frontier else 7.6), layout="constrained"
    )
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


def write_plot(path: str | os.PathLike[str], results: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]) -> Path:
    """Save :func:`engine_plot` as a PNG at ``path`` (110 dpi); return the path."""
    import matplotlib.pyplot as plt  # optional dependency (the bench extra)

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return _save(plt, engine_plot(results, budgets, frontier=True), out)
