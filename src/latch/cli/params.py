"""CLI subcommands, one module each; every module exposes ``register(cli)``.

``latch`` imports a module only when one of its commands runs: each command is also listed, with its
short help, in :data:`latch.cli.BUILTIN_COMMANDS` (``tests/cli/test_engine_cli.py`` checks the two agree).

Options naming an output file or folder validate it with :func:`latch.cli.outputs.output_file` /
:func:`~latch.cli.outputs.output_folder` (click callbacks), so a report that cannot be written, or would
overwrite an input or a transcript, fails at once, before any import or replay.
"""

from __future__ import annotations

from typing import Any

import click

__all__ = ["MAX_COUNT", "MAX_SEED", "Count"]

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

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = click.INT.convert(value, param, ctx)
        if self.max is not None and number > self.max:
            self.fail(f"{number} is above the maximum of {self.max:,}", param, ctx)
        return click.IntRange(min=self.min).convert(number, param, ctx)
