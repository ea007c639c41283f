"""The one way tests run ``latch`` in process: :func:`invoke` (click's ``CliRunner``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from latch.cli import _load_commands, cli


def invoke(
    tmp_path: Path,
    *args: Any,
    db: Path | str | None = None,
    columns: int | None = 300,
    env: dict[str, str | None] | None = None,
    input: str | bytes | None = None,
    catch_exceptions: bool = True,
) -> Result:
    """``latch ARGS`` with ``LATCH_HOME`` in ``tmp_path/home`` (``env`` adds to or overrides it), ``COLUMNS`` set
    to ``columns`` (``None``: unset, as in a pipe), ``--db DB`` first when ``db`` is given, ``input`` on stdin."""
    _load_commands()
    environ = {
        "LATCH_HOME": str(tmp_path / "home"),
        "COLUMNS": None if columns is None else str(columns),
        **(env or {}),
    }
    pre = ["--db", str(db)] if db is not None else []
    return CliRunner().invoke(
        cli, [*pre, *(str(a) for a in args)], input=input, env=environ, catch_exceptions=catch_exceptions
    )
