"""The ``latch`` command (click + rich).

Subcommands live in :mod:`latch.cli` (one module each, registered through
``register(cli)``) and in plugins (hook ``latch_register_commands``). User
mistakes exit with status 2 and a one-line message, never a traceback; a bad
transcript (``TranscriptError``), a plugin failure (``PluginError``) or a store
that cannot be opened or is locked (``StoreError``) exits with status 1 and one
line. Output goes through :mod:`latch.textsafe`: lone surrogates print as U+FFFD, and every
transcript- or file-derived string (error messages included) passes its one escape
(:func:`~latch.textsafe.safe`: control characters and bidi overrides shown as ``\\x1b``, ``\\u202e``);
warnings are ``warning: ...`` lines on stderr (:func:`~latch.textsafe.warn`).

Commands load lazily (:class:`LatchGroup`): ``latch X`` imports only X's module (:data:`BUILTIN_COMMANDS`),
and ``latch --help`` lists the built-ins from that table without importing any command module
(``tests/cli/test_engine_cli.py`` pins both). :mod:`latch.hotpaths` never fails
to import (its backend is chosen at first use). When the hot-path backend cannot
load (e.g. an invalid ``LATCH_IMPL``), every command but ``latch doctor`` stops
with one line naming the reason (status 1); ``latch doctor`` reports it and
exits 1. The configuration is read once per invocation
(:meth:`AppContext.config`), which also hands it to the plugins' historic
``latch_configure`` hook.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__, count_cache, installed
from ..accounting import pricing
from ..config import ConfigError, config_path, load_config, unknown_keys, use_model_table_cache
from ..extras import missing_extra
from ..importers import transcript_limit_problem
from ..importers.base import TranscriptError
from ..store import (
    EventStore,
    StoreError,
    data_dir,
    default_db_path,
    is_postgres_url,
    local_anchor,
    non_folder_parent,
    read_only_reason,
    redact,
    replay_scratch_path,
)
from ..textsafe import safe, warn

# The built-in commands: name -> (module under latch.cli, the short help `latch --help` shows). A module is
# imported only when one of its commands is invoked or asked for its own --help; tests/cli/test_engine_cli.py checks
# that every module's register(cli) registers exactly these names with this help.
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("bench", "Run every engine over every session under every budget; write a table, JSON and plots."),
    "context": ("context", "The /context report of SESSION's next view: token breakdown, retention, headroom, status."),
    "doctor": (
        "doctor",
        "Versions, SQLite and FTS5, the hot-path backend, the native library, the data folder and "
        "whether bubblewrap can sandbox the shell of ``latch run``.",
    ),
    "evidence": ("state", "Show SESSION's validation evidence (current and stale) and the certification verdict."),
    "export": (
        "export",
        "Export SESSION (id or unique prefix) as Markdown, a self-contained HTML page or its stored "
        "events as JSON lines.",
    ),
    "forget": ("state", "Tombstone SESSION: history and resume omit it; its events, children and artifacts stay."),
    "group": ("group", "Show the agent group rooted in ROOT (tasks, owners, members, messages)."),
    "import": (
        "sessions",
        "Import transcript FILES into the store (idempotent; a forgotten session takes no new events).",
    ),
    "plugins": ("plugins_cmd", "List plugins, their hooks and what they registered (engines, estimators, ...)."),
    "prune-replays": (
        "replay",
        "Drop the kernel records of past replays (the scratch database beside the store) and "
        "say how many bytes that freed.",
    ),
    "replay": (
        "replay",
        "Replay FILE (or a stored SESSION): materialize the view before every model request and check the invariants.",
    ),
    "report": (
        "report",
        "What sessions cost: requests, tokens by kind, dollars and cache-read share, per model (like ccusage).",
    ),
    "run": (
        "run",
        "Run an agent on TASK in the current workspace (or continue one with --resume, or work for an "
        "agent group with --group NAME --worker).",
    ),
    "search": (
        "search",
        "Full-text search over every event: quoted phrases, the match shown and marked, newest first or by relevance.",
    ),
    "sessions": (
        "listing",
        "List sessions, newest first: title, start, harness, model, requests, cost and status; "
        "sub-agent sessions under their parent (tombstoned ones are omitted).",
    ),
    "skills": ("skills_mcp", "List the Agent Skills a new `latch run` session here would offer."),
    "mcp": ("skills_mcp", "MCP servers of the configuration ([mcp.servers.NAME])."),
    "show": (
        "sessions",
        "Show the events of SESSION (id or unique prefix): each tool call with its command or "
        "path, each result's first line; --event SEQ prints one event whole.",
    ),
    "state": (
        "state",
        "Show the canonical state (L1) of SESSION: derived files, mutations, generation, evidence, failures.",
    ),
    "store": ("store_cmd", "The event store: copy it between backends (an SQLite file, a PostgreSQL server)."),
    "stress": ("stress", "Plant early facts, push EVENTS realistic events, verify every stress guarantee."),
    "view": (
        "view",
        "The exact request Latch would send at model request N of SESSION_OR_FILE (system, tools, messages).",
    ),
}
COMMAND_MODULES = tuple(dict.fromkeys(module for module, _ in BUILTIN_COMMANDS.values()))


def backend_error() -> str | None:
    """Why the hot-path backend (:mod:`latch.hotpaths`) cannot load, or ``None`` when it loads."""
    from .. import hotpaths  # lazy: it imports numpy; `import latch.cli` and the built-in listing stay without it

    return hotpaths.backend_error()


class AppContext:
    """Shared CLI state: the ``--db`` path, the lazily opened store and configuration.

    ``db_source`` names where an explicit ``db`` came from (``"--db"`` or ``"LATCH_DB"``) for errors.
    """

    def __init__(self, db: str | None, db_source: str = "--db"):
        self.db = db
        self.db_source = db_source
        self._store: EventStore | None = None
        self._config: dict[str, Any] | None = None
        self.config_file: str | None = None
        self._new_store: list[Path] = []  # files and folders this invocation's new store created
        self._new_files: list[Path] = []  # other files and folders it created (a stdin copy)

    def created(self, path: Path) -> list[Path]:
        """Record ``path`` (a file or folder about to be created) and its missing folders as this invocation's
        own: a command that fails removes them again (:meth:`discard_created`). Returns what was recorded."""
        new = [q for q in (path, *path.parents) if not q.exists()]
        self._new_files.extend(new)
        return new

    def discard_created(self, failed: bool) -> None:
        """After a command: a store this invocation created and left empty (the command failed, or imported
        nothing) is removed with its folders, and so is every file of :meth:`created` when the command failed,
        so bad input leaves no new file behind."""
        doomed: list[Path] = list(self._new_files) if failed else []
        if self._store is not None and self._new_store:
            try:
                empty = self._store.count_events() == 0 and not self._store.sessions()
            except Exception:  # a store that cannot even be counted is not ours to judge
                empty = False
            if empty and self._store.empty_and_unshared():
                self._store.close()
                self._store = None
                doomed.extend(self._new_store)
        for path in sorted(set(doomed), key=lambda q: len(q.parts), reverse=True):  # files before their folders
            try:
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()  # only when empty: never anything the command did not create
                else:
                    path.unlink(missing_ok=True)
            except OSError:
                pass

    def config(self, path: str | None = None) -> dict[str, Any]:
        """Latch's configuration (:func:`latch.config.load_config` of ``path``), read once per invocation.

        The first read also calls :func:`latch.plugins.configure` (hook ``latch_configure``) with
        it. A bad file is a ``click.UsageError`` naming the file, key and problem; each unknown table
        or key is one warning line on stderr (:func:`latch.config.unknown_keys`). ``config_file`` is
        then the file read (``None`` when the default file is absent).
        """
        if self._config is None:
            from .. import plugins  # lazy: the plugin host imports numpy and the estimators; only commands need it

            try:
                config = load_config(path)
            except ConfigError as exc:
                raise click.UsageError(str(exc)) from None
            self.config_file = str(config_path(path)) if config or path is not None else None
            plugins.configure(config)
            for line in unknown_keys(config, self.config_file or "config", owned=plugins.get_plugin_manager().infos):
                warn(line)
            self._config = config
        return self._config

    def db_problem(self) -> str | None:
        """Why the explicit database path cannot be used (its parent folder is missing or a file), or ``None``.

        Folders are never created for an explicit path; the default path under the data folder is.
        """
        if not self.db or self.db == ":memory:" or is_postgres_url(self.db):
            return None
        path = Path(self.db)
        if not path.parent.is_dir():
            blocker = non_folder_parent(path)
            if blocker is not None:
                return f"{path}: {blocker} is not a folder ({self.db_source})"
            return f"{path}: folder {path.parent} does not exist ({self.db_source}; create it first)"
        return None

    def db_path(self) -> Path:
        """The database this invocation uses: ``--db``/``LATCH_DB``, else the workspace's default; for a
        ``postgresql://`` database, its local anchor on this host (:func:`~latch.store.local_anchor`)."""
        if is_postgres_url(self.db):
            return local_anchor(str(self.db))
        return Path(self.db) if self.db else default_db_path()

    def db_label(self) -> str:
        """The database as shown to a person: the path, ``:memory:``, or the redacted server URL."""
        if is_postgres_url(self.db):
            return redact(str(self.db))
        return ":memory:" if self.db == ":memory:" else str(self.db_path())

    def store_exists(self) -> bool:
        """Whether something exists at the database path (``:memory:`` always does); an empty file (0 bytes)
        holds no store yet, so a read-only command does not write one into it."""
        if self.db == ":memory:" or is_postgres_url(self.db):  # a server database: the store reports a problem
            return True
        path = self.db_path()
        try:
            return path.exists() and (not path.is_file() or path.stat().st_size > 0)
        except OSError:
            return True  # let the store report the problem

    def store(self, *, create: bool = True) -> EventStore:
        """The :class:`~latch.store.EventStore`, opened once; :class:`~latch.store.StoreError` when it cannot be.

        ``create=False`` is for read-only commands (``sessions``, ``show``, ``search``, ``state``, ``evidence``,
        ``context``, ``doctor``): when no database exists yet they read an empty in-memory store instead of
        creating a file (a mistyped ``--db`` or a new folder leaves nothing behind), and an existing store they
        cannot write (:func:`~latch.store.read_only_reason`) is opened read-only (``EventStore(read_only=True)``)."""
        if self._store is None:
            problem = self.db_problem()
            if problem:
                raise StoreError(f"cannot open the Latch store at {problem}")
            if not create and not self.store_exists():
                _check_creatable(self.db_path())  # a path that could never hold one is still an error
                self._store = EventStore(":memory:")
            elif is_postgres_url(self.db):
                self._store = EventStore(self.db)
            elif not create and self.db != ":memory:" and read_only_reason(self.db_path()) is not None:
                self._store = EventStore(self.db_path(), read_only=True)  # a reading command reads it as it is
            else:
                path = self.db_path()
                fresh = self.db != ":memory:" and not self.store_exists()
                new = [q for q in path.parents if not q.exists()] if fresh else []
                self._store = EventStore(self.db) if self.db else EventStore()
                if fresh:
                    self._new_store = [
                        *new,
                        path,
                        *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal")),
                    ]
                    scratch = self._store.replay_scratch_path
                    if scratch is not None:
                        self._new_store += [scratch, *(scratch.with_name(scratch.name + s) for s in ("-wal", "-shm"))]
        return self._store


def _check_creatable(path: Path) -> None:
    """Raise :class:`~latch.store.StoreError` when no database could be created at ``path`` (its folder is
    missing or refuses files); probes by creating and removing the file, so nothing is left behind."""
    if not path.parent.is_dir():
        blocker = non_folder_parent(path)
        if blocker is not None:
            raise StoreError(f"cannot open the Latch store at {path}: {blocker} is not a folder")
        missing = next(q for q in reversed(path.parents) if not q.exists())
        if not os.access(missing.parent, os.W_OK):  # the first import could not create the folders either
            raise StoreError(f"cannot open the Latch store at {path}: Permission denied ({missing})")
        return  # the default path's folders are created by the first import
    if path.is_file():  # an existing (empty) file: only whether it could be written, never removed
        if not os.access(path, os.W_OK):
            raise StoreError(f"cannot open the Latch store at {path}: Permission denied")
        return
    try:  # the same open SQLite would do (it creates the file at the first write), so errors read alike
        probe = sqlite3.connect(str(path))
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.rollback()
        finally:
            probe.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the Latch store at {path}: {exc}") from None
    path.unlink(missing_ok=True)


pass_app = click.make_pass_decorator(AppContext)


class OneLineUsageError(click.UsageError):
    """A usage error shown as one line on stderr, ``Error: MESSAGE`` (exit status 2), like every other error of
    the CLI; click's own shows the command's usage and a help hint before it."""

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file, err=file is None)


OUTPUTS_KEY = "latch.outputs"
"""``ctx.meta`` key of the output files a command's options name: ``[(param, path)]``, recorded by
:func:`latch.cli.outputs.output_file` and checked against the inputs by :class:`LatchCommand`."""


def _same_file(a: str, b: str) -> bool:
    """Whether the paths ``a`` and ``b`` name the same file: ``os.path.samefile`` when both exist, else the
    same resolved path (an output that does not exist yet can still be named twice)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError):
        return False


class LatchCommand(click.Command):
    """Every built-in command's class (:attr:`LatchGroup.command_class`): once its parameters are parsed, before
    the command runs, an output file (``ctx.meta[OUTPUTS_KEY]``) that is the same file as an input (any other
    parameter's value naming an existing file), as the store (``--db``/``LATCH_DB`` or the default, with its
    ``-wal``/``-shm`` and replay scratch) or as another output is a usage error (exit 2) naming the option and
    the file. Nothing has been read or written then."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        outputs = ctx.meta.get(OUTPUTS_KEY, [])
        if outputs:
            self._refuse_inputs_as_outputs(ctx, outputs)
        return rest

    @staticmethod
    def _refuse_inputs_as_outputs(ctx: click.Context, outputs: list[tuple[click.Parameter, str]]) -> None:
        inputs: list[tuple[str, str]] = []  # (what, path)
        out_names = {p.name for p, _ in outputs}
        for param in ctx.command.params:
            if param.name in out_names:
                continue
            value = ctx.params.get(param.name or "")
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if isinstance(v, (str, os.PathLike)) and str(v) not in ("", "-") and os.path.isfile(v):
                    inputs.append((param.get_error_hint(ctx), str(v)))
        app = ctx.find_object(AppContext)
        if app is not None and app.db != ":memory:":
            try:
                db = app.db_path()
            except Exception:  # no default path (no data folder): no store to protect
                db = None
            if db is not None:
                inputs += [("the Latch store", str(db.with_name(db.name + s))) for s in ("", "-wal", "-shm")]
                scratch = replay_scratch_path(db)
                if scratch is not None:
                    inputs += [
                        ("the replay scratch database", str(scratch.with_name(scratch.name + s)))
                        for s in ("", "-wal", "-shm")
                    ]
        seen: list[tuple[click.Parameter, str]] = []
        for param, path in outputs:
            for what, other in [*inputs, *((p.get_error_hint(ctx), v) for p, v in seen)]:
                if _same_file(path, other):
                    same = f"the same file as {what}" + (f" ({other})" if other != path else "")
                    raise click.BadParameter(f"refusing to write {path}: it is {same}; name another file", ctx, param)
            seen.append((param, path))


class LatchGroup(click.Group):
    """Turns the user-facing errors (bad transcript, plugin, store) into one line on stderr, status 1 (a config
    error: status 2).

    Commands load lazily: a built-in command's module (:data:`BUILTIN_COMMANDS`) is imported by
    :meth:`get_command` when that command is resolved (invoked, or asked for its ``--help``); plugin commands
    (hook ``latch_register_commands``) are registered when the full list is needed (:meth:`list_commands`, e.g.
    ``latch --help``) or a name is not a built-in. ``latch --help`` formats the built-ins from the table, so it
    imports no command module.
    """

    _plugins_loaded = False
    command_class = LatchCommand

    def load_builtin(self, name: str) -> None:
        """Import the module of the built-in command ``name`` and register its commands (once)."""
        module = importlib.import_module(f"latch.cli.{BUILTIN_COMMANDS[name][0]}")
        module.register(self)

    def load_plugin_commands(self) -> None:
        """Register the plugins' commands (once); none when the hot-path backend cannot load (then every command
        but ``latch doctor`` stops anyway)."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        if backend_error() is None:
            from ..plugins import register_plugin_commands  # lazy: the plugin host loads when a command needs it

            register_plugin_commands(self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load_plugin_commands()
        return sorted({*BUILTIN_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if cmd_name in BUILTIN_COMMANDS:
                self.load_builtin(cmd_name)
            else:
                self.load_plugin_commands()
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``latch --help``: built-ins not loaded yet are shown from the table."""
        rows = []
        names = self.list_commands(ctx)
        commands = {
            name: self.commands.get(name) or click.Command(name, help=BUILTIN_COMMANDS[name][1]) for name in names
        }
        shown = {name: cmd for name, cmd in commands.items() if not cmd.hidden}
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name in shown)
        for name, cmd in shown.items():
            rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """``--db PATH`` is accepted after the subcommand too (``latch sessions --db X``): it is moved in
        front of it, unless that subcommand has a ``--db`` of its own (``latch stress``). Given twice: a
        usage error. ``latch`` alone prints the help and exits 0 (asking for help is not a mistake)."""
        if not args and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, self._hoist_db(ctx, list(args)))

    def _hoist_db(self, ctx: click.Context, args: list[str]) -> list[str]:
        i, given = 0, False
        while i < len(args) and args[i].startswith("-") and args[i] != "--":
            given = given or args[i] == "--db" or args[i].startswith("--db=")
            i += 2 if args[i] == "--db" else 1
        if i >= len(args) or args[i] == "--":
            return args
        cmd = self.get_command(ctx, args[i])
        if cmd is None or any("--db" in p.opts for p in getattr(cmd, "params", ())):
            return args
        rest = args[i + 1 :]
        end = rest.index("--") if "--" in rest else len(rest)
        for j in range(end):
            if rest[j] == "--db" or rest[j].startswith("--db="):
                if given:
                    raise click.UsageError("--db is given twice (before and after the command); give it once")
                if rest[j] == "--db":
                    if j + 1 >= len(rest):
                        raise click.UsageError("--db needs a database file path")
                    value, k = rest[j + 1], 2
                else:
                    value, k = rest[j][len("--db=") :], 1
                return ["--db", value, *args[: i + 1], *rest[:j], *rest[j + k :]]
        return args

    def invoke(self, ctx: click.Context) -> Any:
        failed = True
        try:
            rv = self._invoke(ctx)
            failed = False
            return rv
        except SystemExit as exc:
            failed = exc.code not in (0, None)
            raise
        except click.exceptions.Exit as exc:
            failed = exc.exit_code != 0
            raise
        finally:
            if isinstance(ctx.obj, AppContext):
                ctx.obj.discard_created(failed)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (TranscriptError, StoreError) as exc:
            raise click.ClickException(safe(str(exc))) from None
        except ConfigError as exc:  # a [models] entry that only conflicts with the model table at use
            raise click.UsageError(safe(str(exc))) from None
        except sqlite3.DatabaseError as exc:  # a damaged page read outside the store's own error mapping
            if type(exc) is not sqlite3.DatabaseError:
                raise
            where = ctx.obj.db if isinstance(ctx.obj, AppContext) and ctx.obj.db else "the Latch store"
            raise click.ClickException(safe(f"{where} is damaged ({exc}); run `latch doctor`")) from None
        except ImportError as exc:  # a hot path's first use under a bad LATCH_IMPL is a hotpaths.BackendError
            hotpaths = sys.modules.get("latch.hotpaths")
            if hotpaths is None or not isinstance(exc, hotpaths.BackendError):
                raise
            raise click.ClickException(f"the hot-path backend cannot load: {exc} (see `latch doctor`)") from None
        except click.UsageError as exc:  # one line, not click's usage + hint + error
            raise OneLineUsageError(safe(exc.format_message(), multiline=True), exc.ctx) from None
        except click.ClickException as exc:
            # click declares ``message`` Final; rewritten in place, the exception keeps its class and exit code
            exc.message = safe(exc.message, multiline=True)  # type: ignore[misc]
            raise
        except Exception as exc:  # last: every clause above sees its own type first
            plugins = sys.modules.get("latch.plugins")  # a PluginError needs the plugin host, imported on first use
            if plugins is None or not isinstance(exc, plugins.PluginError):
                raise
            raise click.ClickException(safe(str(exc))) from None


@click.group(cls=LatchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="latch")
@click.option(
    "--db",
    metavar="PATH",
    envvar="LATCH_DB",
    help="SQLite database (default: one per workspace under the Latch data folder; LATCH_HOME overrides), "
    "or a postgresql://USER@HOST/DB server database (the postgres extra).",
)
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """Latch: a context window that never forgets and never overflows."""
    if ctx.invoked_subcommand != "doctor":
        reason = backend_error()
        if reason is not None:
            raise click.ClickException(f"the hot-path backend cannot load: {reason} (see `latch doctor`)")
    limit_problem = transcript_limit_problem()
    if limit_problem is not None:
        raise click.ClickException(safe(limit_problem))
    from_env = ctx.get_parameter_source("db") is click.core.ParameterSource.ENVIRONMENT
    if db is not None and not db.strip():
        raise click.UsageError("empty LATCH_DB" if from_env else "empty --db: give a database file path")
    if db is not None and Path(db).is_dir():
        where = f"LATCH_DB={db}" if from_env else f"--db {db}"
        raise click.UsageError(f"{where} is a directory; give a database file path")
    ctx.obj = AppContext(db, "LATCH_DB" if from_env else "--db")
    # what is installed (the plugins' entry points, genai-prices' version), kept while the installation is unchanged
    installed.use_installed_cache(data_dir() / "cache" / "installed.json")
    # prices found once are kept (per genai-prices version) for the next command: see latch.accounting.pricing
    pricing.use_price_cache(data_dir() / "cache" / "genai-prices.json")
    # exact token counts of texts, likewise (a replay of a known session never loads the tokenizer's vocabulary)
    count_cache.use_count_cache(data_dir() / "cache" / "token-counts.json")
    # Latch's model table (latch/data/models.toml) as parsed, kept while the file is unchanged (no TOML parser)
    use_model_table_cache(data_dir() / "cache" / "models.json")


def _load_commands() -> None:
    """Register every built-in and plugin command now (tests; ``latch`` itself loads them lazily)."""
    group = cli
    assert isinstance(group, LatchGroup)
    for name in BUILTIN_COMMANDS:
        if name not in group.commands:
            group.load_builtin(name)
    group._plugins_loaded = False  # plugins may have changed since (tests reset the plugin manager)
    group.load_plugin_commands()


def main(argv: list[str] | None = None) -> None:
    # a character the terminal's encoding lacks (or a plugin command's lone surrogate) prints as '?',
    # never a UnicodeEncodeError; latch's own commands already print through latch.textsafe
    """Entry point of the ``latch`` command: load built-in and plugin commands, then run click."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    try:
        rv = cli.main(args=argv, prog_name="latch", standalone_mode=False)
    except ModuleNotFoundError as exc:  # an optional part that is not installed: name its extra
        words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
        line = missing_extra(exc, f"latch {words[0]}" if words else None)
        if line is None:
            raise
        click.echo(f"Error: {line}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:  # Ctrl-C (or EOF at a prompt): the shell convention, 128 + SIGINT
        click.echo("Aborted!", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if isinstance(exc, click.UsageError) and not isinstance(exc, OneLineUsageError):
            exc = OneLineUsageError(
                safe(exc.format_message(), multiline=True), exc.ctx
            )  # a bad option before the command
        exc.show()
        sys.exit(exc.exit_code)
    except SystemExit as exc:
        # click turns a closed pipe it meets itself into exit 1 after muting the streams (latch's own
        # output goes through latch.textsafe, whose console exits 0 there); a reader that stopped reading
        # is not an error
        if exc.code == 1 and type(sys.stdout).__name__ == "_PacifyFlushWrapper":
            sys.exit(0)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
