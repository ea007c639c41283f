"""``latch bench``'s tokens figure, drawn panel by panel: tokens sent per request along each session, one panel
per session (longest first), one line per engine, in a grid of :data:`COLUMNS` columns under a title.

Every panel is a tile of the same size (:data:`TILE_INCHES` at :data:`DPI`, margins set in inches), so a panel
draws alone, in any process (each process on one figure of its own, :func:`draw_panel`) and as soon as its
session's jobs are done, and the figure is the tiles pasted in order under a title strip (:func:`assemble`): the
same pixels whether the panels were drawn one after another here (:func:`write_tokens_figure`) or in
:class:`~latch.bench.plots.Plotter`'s workers while the other jobs ran.
The legend (the engines) is on the first panel, drawn once the order is known. A panel is returned as its
RGBA pixels, zlib-compressed (mostly white: a few tens of KB).
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..textsafe import atomic_path

__all__ = [
    "COLUMNS",
    "DPI",
    "HEADER_INCHES",
    "TILE_INCHES",
    "Lines",
    "assemble",
    "draw_panel",
    "panel_figure",
    "panel_lines",
    "panel_order",
    "pyplot",
    "rendered",
    "row_pixels",
    "save_png",
    "tile_pixels",
    "title_strip",
    "write_tokens_figure",
]

COLUMNS = 3
"""Panels per row (fewer when there are fewer sessions)."""
TILE_INCHES = (5.2, 3.2)
"""A panel's tile, width and height in inches (its axes inside, margins :data:`_MARGINS`)."""
HEADER_INCHES = 0.6
"""The title strip above the panels, inches."""
DPI = 110
"""Pixels per inch: a tile is 572 × 352 pixels, the title strip 66 pixels high."""
_MARGINS = (0.62, 0.5, 0.12, 0.3)
"""Left, bottom, right, top margins of a panel's axes in its tile, inches (tick labels, axis labels, title)."""

Lines = list[tuple[str, list[float | None]]]
"""A panel's lines: ``(engine, tokens per request)`` sorted by engine (``None``: a refused request)."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend; ``ImportError`` without the bench extra (the
    command checks it is installed)."""
    import matplotlib  # optional dependency (the bench extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panel_order(rs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The sessions of the successful rows ``rs`` in panel order: most requests (over the engines) first, then by
    name."""
    most: dict[str, int] = {}
    for r in rs:
        most[r["session"]] = max(most.get(r["session"], 0), r["requests"])
    return sorted(most, key=lambda n: (-most[n], n))


def panel_lines(rs: Sequence[Mapping[str, Any]], session: str) -> Lines:
    """``session``'s lines (:data:`Lines`) from the successful rows ``rs``."""
    return [(r["engine"], list(r["tokens"])) for r in sorted(rs, key=lambda x: x["engine"]) if r["session"] == session]


def _pixels(width: float, height: float) -> tuple[int, int]:
    return round(width * DPI), round(height * DPI)


def row_pixels(columns: int) -> int:
    """The width in pixels of a row of ``columns`` panels (and of the title strip above them)."""
    return _pixels(*TILE_INCHES)[0] * columns


def _tile_figure() -> Any:
    """A new figure of one tile with its (empty) axes."""
    width, height = TILE_INCHES
    left, bottom, right, top = _MARGINS
    fig = pyplot().figure(figsize=(width, height), dpi=DPI)
    fig.add_axes((left / width, bottom / height, 1 - (left + right) / width, 1 - (bottom + top) / height))
    return fig


def panel_figure(session: str, lines: Lines, *, legend: bool = False) -> Any:
    """One session's panel as a matplotlib ``Figure`` of one tile (:data:`TILE_INCHES`, :data:`DPI`): one line per
    engine of ``lines`` (tokens against the request's number from 1; a refused request is a gap), titled
    ``session``, the engines' legend with ``legend``. The caller closes it."""
    fig = _tile_figure()
    _fill(fig.axes[0], session, lines, legend)
    return fig


def _fill(ax: Any, session: str, lines: Lines, legend: bool) -> None:
    """Draw ``session``'s ``lines`` on the tile's empty axes ``ax`` (:func:`panel_figure`)."""
    for engine, tokens in lines:
        ax.plot(
            range(1, len(tokens) + 1),
            [t if t is not None else float("nan") for t in tokens],
            label=engine,
            linewidth=1,
        )
    ax.set_title(session, fontsize=8, y=1.0)  # placed, not searched for: nothing above the axes
    ax.set_xlabel("request", fontsize=7)
    ax.set_ylabel("tokens sent", fontsize=7)
    ax.tick_params(labelsize=6)
    if legend:
        ax.legend(fontsize=7)


def rendered(fig: Any) -> bytes:
    """``fig`` drawn, then closed: its height in pixels (4 bytes, big-endian) and its RGBA pixels (height × width × 4,
    row-major), zlib-compressed (a tile that any process can draw and :func:`tile_pixels` reads back)."""
    try:
        return _drawn(fig)
    finally:
        pyplot().close(fig)


def _drawn(fig: Any) -> bytes:
    fig.canvas.draw()
    pixels = fig.canvas.buffer_rgba()
    return zlib.compress(int(pixels.shape[0]).to_bytes(4, "big") + bytes(pixels), 1)


def tile_pixels(tile: bytes, width: int) -> Any:
    """A :func:`rendered` tile ``width`` pixels wide as a numpy ``uint8`` array, height × width × 4."""
    import numpy as np

    raw = zlib.decompress(tile)
    return np.frombuffer(raw, dtype=np.uint8, offset=4).reshape(int.from_bytes(raw[:4], "big"), width, 4)


def save_png(path: Path, canvas: Any) -> Path:
    """The RGBA array ``canvas`` as a PNG at ``path`` (:data:`DPI`, zlib level 3, as every other figure of the bench:
    matplotlib's own PNG writer is this one, Pillow), written atomically. Returns ``path``."""
    import matplotlib  # optional dependency (the bench extra), with Pillow and numpy
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Image.fromarray(canvas, "RGBA").save(tmp, format="png", compress_level=3, dpi=(DPI, DPI), pnginfo=info)
    return path


_tile: Any = None
"""This process's panel figure (:func:`draw_panel`), kept from panel to panel."""
_tile_lock = threading.Lock()


def draw_panel(session: str, lines: Lines, *, legend: bool = False) -> bytes:
    """:func:`panel_figure` :func:`rendered`: the same bytes, drawn on one figure kept by this process from panel to
    panel (its lines, legend and colour cycle removed and its limits reset to a new axes' before each), so a panel
    builds no figure, axes and ticks of its own (a third of its drawing time)."""
    global _tile
    with _tile_lock:
        if _tile is None:
            _tile = _tile_figure()
        ax = _tile.axes[0]
        for line in list(ax.lines):
            line.remove()
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        ax.set_prop_cycle(None)
        ax.relim()  # no lines left: no data limits
        ax.set_xlim(0, 1, auto=True)  # a new axes' limits, autoscaled again from the lines to come
        ax.set_ylim(0, 1, auto=True)
        try:
            _fill(ax, session, lines, legend)
            return _drawn(_tile)
        except BaseException:
            pyplot().close(_tile)  # a panel that failed half-way is not the next one's start
            _tile = None
            raise


def title_strip(budget: str, width_px: int) -> Any:
    """The title strip of ``budget``'s tokens figure :func:`assemble` puts above ``width_px`` pixels of panels: its
    RGBA pixels, a numpy ``uint8`` array :data:`HEADER_INCHES` × :data:`DPI` high, ``width_px`` wide, × 4."""
    import numpy as np

    plt = pyplot()
    fig = plt.figure(figsize=(width_px / DPI, HEADER_INCHES), dpi=DPI)
    try:
        fig.text(
            0.5,
            1 - 0.2 / HEADER_INCHES,
            f"tokens per request along each session · budget {budget}",
            fontsize=10,
            ha="center",
            va="top",
        )
        fig.canvas.draw()
        return np.asarray(fig.canvas.buffer_rgba()).copy()
    finally:
        plt.close(fig)


def assemble(path: Path, budget: str, names: Sequence[str], tiles: Mapping[str, bytes], *, header: Any = None) -> Path:
    """The tokens figure of ``budget`` at ``path`` (PNG, :data:`DPI`, zlib level 3, written atomically): the title
    strip, then the tile of each of ``names`` (in that order, :data:`COLUMNS` a row, blank cells after the last);
    ``tiles`` maps each name to :func:`draw_panel`'s bytes. ``header``: the title strip already drawn
    (:func:`title_strip` of ``budget`` as wide as the panels' row), else drawn here. Returns ``path``."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    tile_w, tile_h = _pixels(*TILE_INCHES)
    cols = min(COLUMNS, len(names))
    rows = -(-len(names) // cols)
    if header is None or header.shape[1] != row_pixels(cols):
        header = title_strip(budget, row_pixels(cols))
    canvas = np.empty((header.shape[0] + rows * tile_h, cols * tile_w, 4), dtype=np.uint8)  # each pixel set below
    canvas[: header.shape[0]] = header
    blank = rows * cols - len(names)  # the last row's cells after its last tile: white
    canvas[header.shape[0] + (rows - 1) * tile_h :, (cols - blank) * tile_w :] = 255

    def paste(k: int) -> None:  # each tile decompressed into its own cell, the tiles at once (zlib beside the GIL)
        y = header.shape[0] + (k // cols) * tile_h
        x = (k % cols) * tile_w
        canvas[y : y + tile_h, x : x + tile_w] = tile_pixels(tiles[names[k]], tile_w)

    with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 1))) as pool:
        list(pool.map(paste, range(len(names))))
    return save_png(path, canvas)


def write_tokens_figure(path: Path, budget: str, rs: Sequence[Mapping[str, Any]]) -> Path:
    """The tokens figure of the successful rows ``rs`` at ``budget``, every panel drawn here, one after another
    (:func:`draw_panel`, :func:`assemble`). Returns ``path``."""
    names = panel_order(rs)
    tiles = {name: draw_panel(name, panel_lines(rs, name), legend=k == 0) for k, name in enumerate(names)}
    return assemble(path, budget, names, tiles)
