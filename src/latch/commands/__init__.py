"""CLI subcommands, one module each; every module exposes ``register(cli)``.

``latch`` imports a module only when one of its commands runs: each command is also listed, with its
short help, in :data:`latch.cli.BUILTIN_COMMANDS` (``tests/test_engine_cli.py`` checks the two agree).

Options naming an output file or folder validate it with :func:`output_file` / :func:`output_folder`
(click callbacks), so a report that cannot be written fails at once, before any import or replay.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

__all__ = ["MAX_COUNT", "MAX_SEED", "Count", "output_file", "output_folder"]

MAX_COUNT = 1_000_000_000
"""Upper bound of every count option (``--limit``, ``--events``, ``--jobs``, ``--until``, ``--request``...):
well inside SQLite's 64-bit INTEGER, so a huge value is a usage error (exit 2), never an OverflowError."""
MAX_SEED = 2**63 - 1
"""Upper bound of ``--seed`` (a 64-bit seed)."""


class Count(click.IntRange):
    """``click.IntRange(min, max)`` (``max`` default :data:`MAX_COUNT`) whose errors name the bound at fault:
    ``-1 is not in the range x>=1`` below ``min`` (as an open range says it), ``N is above the maximum of
    1,000,000,000`` above ``max``; both are usage errors (exit 2)."""

    def __init__(self, min: int | None = None, max: int = MAX_COUNT):
        super().__init__(min=min, max=max)

    def convert(self, value, param, ctx):  # noqa: D102 (click's signature)
        number = click.INT.convert(value, param, ctx)
        if self.max is not None and number > self.max:
            self.fail(f"{number} is above the maximum of {self.max:,}", param, ctx)
        return click.IntRange(min=self.min).convert(number, param, ctx)


def output_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: ``value`` (``None`` and ``'-'`` pass) can be written as a file.

    Its folder must exist and accept the file (checked by opening it for appending; a file the
    check created is removed again). Raises ``click.BadParameter`` naming the reason.
    """
    if value is None or value == "-":
        return value
    path = Path(value)
    if path.is_dir():
        raise click.BadParameter(f"{value} is a folder, not a file", ctx, param)
    if not path.parent.is_dir():
        raise click.BadParameter(f"cannot write {value}: folder {path.parent} does not exist", ctx, param)
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise click.BadParameter(f"cannot write {value}: {exc.strerror or exc}", ctx, param) from None
    if not existed:
        os.unlink(path)
    return value


def output_folder(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: ``value`` is a folder, or can be created as one, that accepts files.

    The nearest existing folder on the path must accept a file (checked with a temporary file);
    nothing is created. Raises ``click.BadParameter`` naming the reason.
    """
    if value is None:
        return value
    path = Path(value).absolute()
    existing = next(q for q in (path, *path.parents) if q.exists())
    if not existing.is_dir():
        raise click.BadParameter(f"cannot write into {value}: {existing} is not a folder", ctx, param)
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        raise click.BadParameter(f"cannot write into {value}: {exc.strerror or exc}", ctx, param) from None
    return value
