"""``latch store copy SRC DST``: copy a whole event store into a new one, between backends (an SQLite file,
``postgresql://…``), keeping every event and its ``seq`` (:func:`latch.store.copy.copy_store`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..store import EventStore, StoreError, is_postgres_url, redact
from ..store.copy import copy_store
from ..textsafe import safe

__all__ = ["register"]


def _label(db: str) -> str:
    return redact(db) if is_postgres_url(db) else db


def register(cli: click.Group) -> None:
    @cli.group("store")
    def store_group() -> None:
        """The event store: copy it between backends (an SQLite file, a PostgreSQL server)."""

    @store_group.command("copy")
    @click.argument("src")
    @click.argument("dst")
    def copy_cmd(src: str, dst: str) -> None:
        """Copy the store SRC into DST, a new SQLite file or an empty postgresql://USER@HOST/DB database: every
        session, event (with its seq), artifact and kernel record; DST builds its own index and projections."""
        if not is_postgres_url(src) and not Path(src).is_file():
            raise click.UsageError(f"SRC {src}: no such store file")
        if not is_postgres_url(dst) and Path(dst).exists():
            raise click.UsageError(f"DST {dst} exists: copy into a new file")
        if not is_postgres_url(dst) and not Path(dst).parent.is_dir():
            raise click.UsageError(f"DST {dst}: folder {Path(dst).parent} does not exist")
        created = not is_postgres_url(dst)
        try:
            with EventStore(src, read_only=True) as source, EventStore(dst) as target:
                report = copy_store(source, target)
        except StoreError as exc:
            if created:  # a new file this command made: removed again, with its journal files
                for suffix in ("", "-wal", "-shm"):
                    Path(dst + suffix).unlink(missing_ok=True)
            raise click.ClickException(safe(str(exc))) from None
        click.echo(
            f"copied {report.sessions} sessions, {report.events} events (seq 1..{report.max_seq}), "
            f"{report.artifacts} artifacts, {report.kernel_records} kernel records from "
            f"{safe(_label(src))} to {safe(_label(dst))}"
        )
