"""Progress of a long command on stderr: a rich bar on a terminal, one line now and then in a pipe.

:func:`progress` is a context manager yielding ``update(done, total)``. On a terminal it drives a transient rich
progress bar (gone when the command ends). When stderr is not a terminal (a pipe, a log file, CI) it writes one
line ``LABEL: DONE/TOTAL UNIT · S s`` when the first unit is done, then at most every :data:`PIPE_INTERVAL`
seconds, and when the last is done, so a long job is never silent for long and a log stays short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..textsafe import console

__all__ = ["progress", "PIPE_INTERVAL"]

PIPE_INTERVAL = 15.0
"""Seconds between two progress lines in a pipe (the first and the last unit always get one)."""


@contextmanager
def progress(
    label: str, unit: str, total: int, *, interval: float = PIPE_INTERVAL
) -> Iterator[Callable[[int, int], None]]:
    """Yield ``update(done, total)`` for a job of ``total`` ``unit`` (see the module docstring)."""
    err = console(stderr=True)
    if err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task(unit, total=total)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    start = time.monotonic()
    last: list[float | None] = [None]
    shown = [0]

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        if done <= shown[0] or (last[0] is not None and done < total and now - last[0] < interval):
            return
        last[0], shown[0] = now, done
        sys.stderr.write(f"{label}: {done:,}/{total:,} {unit} · {now - start:,.0f} s\n")
        sys.stderr.flush()

    yield update
