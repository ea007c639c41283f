"""The output files of the commands (``-o/--json-out``, ``--json FILE``, ``--html``, ``bench --plot``, ``bench --out``):
validated before any work, never written over an input or a transcript, written atomically.

Not a command module (no ``register``): the helpers the commands with file outputs share.

* :func:`output_file` (a click callback) refuses, as a usage error (exit 2) naming the option and the file, a
  path that cannot be written, and an existing file that Latch's importers recognize as a transcript
  (:func:`latch.importers.detect` over the registered importers, on the file's first 64 KiB) or that is an
  SQLite database (a Latch store, a Goose or OpenCode database). It records the path in the context
  (:data:`OUTPUTS_KEY`) for :class:`latch.cli.LatchCommand`, which, once every parameter is parsed, refuses an
  output that is the same file as an input (any other parameter naming a file, the store or its scratch
  database) or as another output. An earlier Latch report (JSON, HTML, PNG) is neither, so it is overwritten.
* :func:`output_folder` checks a folder option; :func:`folder_outputs` applies the transcript check to the
  fixed file names a command writes into it (``bench --out``: ``report.json``, ``report.md``).
* Writes go through :func:`latch.textsafe.write_text` / :func:`latch.textsafe.atomic_path` (temp file in the same
  folder, then ``os.replace``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from ..host.ingest import available_importers
from ..importers import TranscriptError, detect
from ..textsafe import safe
from .main import OUTPUTS_KEY

__all__ = ["output_file", "output_folder", "folder_outputs", "overwrite_problem", "OUTPUTS_KEY", "FOLDERS_KEY"]

FOLDERS_KEY = "latch.output_folders"
"""``ctx.meta`` key: the absolute output folders :func:`output_folder` accepted for this command."""

SQLITE_HEADER = b"SQLite format 3\x00"
SNIFF_BYTES = 65_536


def overwrite_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the existing file ``path`` must not be overwritten by a report, or ``None`` (missing, empty, not a
    regular file, or not recognized): ``"it is a claude-code transcript"``, ``"it is an SQLite database (...)"``.
    Reads at most the first 64 KiB (the importers' sniff window); never parses the whole file."""
    p = Path(path)
    try:
        if not p.is_file():
            return None
        with open(p, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return None
    if not head.strip():
        return None
    if head.startswith(SQLITE_HEADER):
        return "it is an SQLite database (a Latch store or a transcript database)"
    try:
        importer = detect(p, head, available_importers())
    except (TranscriptError, RecursionError):
        return None
    return f"it is a {importer.PLUGIN_NAME} transcript"


def output_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: ``value`` (``None`` and ``'-'`` pass) can be written as a report file.

    Its folder must exist and accept the file (checked by opening it for appending; a file the check created is
    removed again), and an existing file must not be a transcript or a database (:func:`overwrite_problem`).
    Records ``(param, value)`` under ``ctx.meta[OUTPUTS_KEY]`` for the same-file check against the inputs.
    Raises ``click.BadParameter`` naming the file and the reason.
    """
    if value is None or value == "-":
        return value
    path = Path(value)
    if path.is_dir():
        raise click.BadParameter(f"{safe(value)} is a folder, not a file", ctx, param)
    if not path.parent.is_dir():
        if path.parent.absolute() in ctx.meta.get(FOLDERS_KEY, ()):
            ctx.meta.setdefault(OUTPUTS_KEY, []).append((param, value))
            return value  # the command's own output folder, created before it writes (its access checked)
        raise click.BadParameter(f"cannot write {safe(value)}: folder {safe(path.parent)} does not exist", ctx, param)
    problem = overwrite_problem(path)
    if problem:
        raise click.BadParameter(
            f"refusing to overwrite {safe(value)}: {problem} (reports never replace an input "
            "or a transcript; name another file)",
            ctx,
            param,
        )
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise click.BadParameter(f"cannot write {safe(value)}: {exc.strerror or exc}", ctx, param) from None
    if not existed:
        os.unlink(path)
    ctx.meta.setdefault(OUTPUTS_KEY, []).append((param, value))
    return value


def output_folder(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: ``value`` is a folder, or can be created as one, that accepts files.

    The nearest existing folder on the path must accept a file (checked with a temporary file);
    nothing is created. The folder is recorded under ``ctx.meta[FOLDERS_KEY]``: an :func:`output_file` directly
    in it may name it before it exists (declare the folder option ``is_eager`` so it is checked first).
    Raises ``click.BadParameter`` naming the reason.
    """
    if value is None:
        return value
    path = Path(value).absolute()
    existing = next(q for q in (path, *path.parents) if q.exists())
    if not existing.is_dir():
        raise click.BadParameter(f"cannot write into {safe(value)}: {safe(existing)} is not a folder", ctx, param)
    try:
        import tempfile  # lazy: only an output option asks

        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        raise click.BadParameter(f"cannot write into {safe(value)}: {exc.strerror or exc}", ctx, param) from None
    ctx.meta.setdefault(FOLDERS_KEY, []).append(path)
    return value


def folder_outputs(names: tuple[str, ...]) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """A click callback like :func:`output_folder` that also refuses the folder when one of the files ``names``
    the command writes into it exists and is a transcript or a database (:func:`overwrite_problem`)."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        value = output_folder(ctx, param, value)
        if value is not None:
            for name in names:
                problem = overwrite_problem(Path(value) / name)
                if problem:
                    raise click.BadParameter(
                        f"refusing to overwrite {safe(Path(value) / name)}: {problem} (name another folder)", ctx, param
                    )
        return value

    return callback
