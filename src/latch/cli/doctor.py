"""``latch doctor``: what this installation actually runs on."""

from __future__ import annotations

import platform
import sqlite3
import sys
from typing import Any

import click

from .. import __version__, hotpaths
from ..agent.sandbox import bwrap_problem
from ..estimators.cabi import default_library_path
from ..store import StoreError, data_dir, default_db_path, is_postgres_url, redact, replay_scratch_path
from ..store.migrations import MIGRATIONS
from ..store.postgres import PostgresEventStore
from ..store.replays import scratch_bytes
from ..textsafe import console, dumps, markup
from .main import AppContext, pass_app


def _fts5_available() -> bool:
    con = sqlite3.connect(":memory:")
    try:
        con.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()
    return True


def diagnose(db: str | None = None) -> dict[str, Any]:
    """The facts ``latch doctor`` prints, as a JSON-ready dict.

    ``backend`` is the hot-path backend actually loaded (``native`` or
    ``python``), or ``None`` with ``backend_error`` set when ``LATCH_IMPL``
    cannot be honoured (the C-ABI library is then not looked up). Paths are
    strings (``None`` when absent).
    """
    info: dict[str, Any] = {
        "latch": __version__,
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "sqlite": sqlite3.sqlite_version,
        "fts5": _fts5_available(),
        "backend": None,
        "backend_error": None,
        "impl": None,
        "native_module": None,
        "native_library": None,
        "abi_version": None,
        "data_dir": str(data_dir()),
        "db": (redact(db) if is_postgres_url(db) else str(db)) if db else str(default_db_path()),
        "store_backend": "postgresql" if is_postgres_url(db) else "sqlite",
    }

    info["backend_error"] = hotpaths.backend_error()
    if info["backend_error"] is None:
        info["backend"], info["impl"] = hotpaths.BACKEND, hotpaths.IMPL
        lib = default_library_path()
        info["native_library"] = str(lib) if lib else None
    try:
        from .. import _native  # the optional C++ extension
    except ImportError:
        pass
    else:
        info["native_module"] = _native.__file__
        info["abi_version"] = _native.ABI_VERSION
        info["estimator_kernel"] = _native.ESTIMATOR_KERNEL  # "avx512", "avx2" or "scalar": how ASCII text is estimated
    return info


def register(cli: click.Group) -> None:
    @cli.command("doctor")
    @click.option("--json", "as_json", is_flag=True, help="Print the facts as one JSON object.")
    @pass_app
    def doctor_cmd(app: AppContext, as_json: bool) -> None:
        """Versions, SQLite and FTS5, the hot-path backend, the native library, the data folder and whether
        bubblewrap can sandbox the shell of ``latch run``.

        Exits with status 1 when the requested hot-path backend (LATCH_IMPL) cannot load,
        SQLite lacks FTS5 or the store (``--db``/``LATCH_DB``, else the default) cannot be opened.
        """
        info = diagnose(app.db)
        info["store_exists"] = app.store_exists()
        info["server_version"] = info["migrations_applied"] = None
        info["migrations_pending"] = []
        scratch = replay_scratch_path(info["db"]) if app.db != ":memory:" else None
        try:
            store = app.store(create=False)
            problems = store.quick_check()
            if isinstance(store, PostgresEventStore):
                info["server_version"] = store.server_version()
                scratch = store.replay_scratch_path
            applied = store.applied_migrations()
            info["migrations_applied"] = len(applied)
            info["migrations_pending"] = [n for n, _ in MIGRATIONS if n not in set(applied)]
        except StoreError as exc:
            info["store_error"], info["store_problems"] = str(exc), []
        else:
            info["store_error"] = None
            info["store_problems"] = problems  # PRAGMA quick_check + the FTS5 index check; [] when intact

        info["replay_scratch"] = str(scratch) if scratch is not None and scratch.is_file() else None
        info["replay_scratch_bytes"] = scratch_bytes(scratch)  # kernel records of past replays (`latch prune-replays`)
        info["sandbox_problem"] = bwrap_problem()  # None: latch run sandboxes the shell (bubblewrap works)
        ok = info["backend"] is not None and info["fts5"] and info["store_error"] is None and not info["store_problems"]
        if as_json:
            click.echo(dumps(info, indent=2))
        else:
            backend = (
                f"{info['backend']} (LATCH_IMPL={info['impl']})"
                if info["backend"]
                else f"[red]unavailable: {markup(info['backend_error'])}[/red]"
            )
            rows = [
                ("latch", info["latch"]),
                ("python", f"{info['python']} ({markup(info['python_executable'])})"),
                ("sqlite", info["sqlite"]),
                ("fts5", "yes" if info["fts5"] else "[red]no[/red]"),
                ("hot-path backend", backend),
                ("native module", markup(info["native_module"] or "not built (pure-Python install)")),
                (
                    "C-ABI library",
                    (
                        f"{markup(info['native_library'])} (ABI v{info['abi_version']})"
                        if info["native_library"]
                        else "not installed"
                    ),
                ),
                ("data folder", markup(info["data_dir"])),
                ("database", markup(info["db"])),
                (
                    "store backend",
                    "PostgreSQL " + markup(info["server_version"] or "(server unreachable)")
                    if info["store_backend"] == "postgresql"
                    else "SQLite (embedded)",
                ),
                (
                    "migrations",
                    "-"
                    if info["migrations_applied"] is None
                    else f"{info['migrations_applied']} applied"
                    + (
                        f", {len(info['migrations_pending'])} pending (first {info['migrations_pending'][0]})"
                        if info["migrations_pending"]
                        else ", none pending"
                    ),
                ),
                (
                    "store",
                    f"[red]{markup(info['store_error'])}[/red]"
                    if info["store_error"]
                    else f"[red]damaged: {markup(' '.join(info['store_problems'][0].split()))}"
                    f" ({len(info['store_problems'])} problem(s) found by PRAGMA quick_check); restore it from a"
                    f" backup or move it aside and re-import[/red]"
                    if info["store_problems"]
                    else "opens, intact (PRAGMA quick_check)"
                    if info["store_exists"]
                    else "none yet (the first `latch import` creates it)",
                ),
                (
                    "shell sandbox",
                    "bubblewrap works (latch run --sandbox workspace-write by default)"
                    if info["sandbox_problem"] is None
                    else f"[yellow]none: {markup(info['sandbox_problem'])}; latch run falls back to the permission "
                    "policy[/yellow]",
                ),
                (
                    "replay scratch",
                    f"{markup(info['replay_scratch'])} ({info['replay_scratch_bytes']:,} bytes; "
                    "`latch prune-replays` empties it)"
                    if info["replay_scratch"]
                    else "none (no replay has run)",
                ),
            ]
            width = max(len(k) for k, _ in rows)
            con = console(highlight=False, soft_wrap=True)
            for k, v in rows:  # KEY, spaces to the longest key's width, VALUE: no trailing spaces, no edge
                con.print(f"[bold]{k}[/bold]{' ' * (width - len(k) + 2)}{v}")
        if not ok:
            sys.exit(1)
