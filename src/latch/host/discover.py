"""Discovery: which files ``latch import DIR`` and ``latch import --discover`` import.

Pure functions over the file system, no store: :func:`walk` lists a folder's regular files,
:func:`default_locations` / :func:`discover` find each harness's logs in its default place,
:func:`claimed_format` says which importer (if any) claims a file, and :func:`with_companions` puts
a Claude Code session's sub-agent files right after it (and nowhere else).

Default places, read from each harness's source (``~`` is ``$HOME``; an unset or empty ``XDG_*`` is
its XDG default, ``~/.local/share`` for data and ``~/.config`` for config):

=============  ========================================================  =====================================
harness        files                                                     where the source sets it
=============  ========================================================  =====================================
claude-code    ``$CLAUDE_CONFIG_DIR`` (default ``~/.claude``)            Claude Code's config dir; sessions are
               ``/projects/<project>/<sessionId>.jsonl`` and             ``projects/<cwd with / as ->/``, the
               ``<sessionId>/subagents/agent-*.jsonl``                   sub-agents beside them
codex          ``$CODEX_HOME`` (default ``~/.codex``)                    codex-rs ``SESSIONS_SUBDIR`` and
               ``/sessions/YYYY/MM/DD/rollout-*.jsonl`` and              ``ARCHIVED_SESSIONS_SUBDIR``
               ``/archived_sessions/rollout-*.jsonl``
gemini-cli     ``~/.gemini/tmp/<project hash>/chats/session-*.json``     gemini-cli ``GEMINI_DIR = '.gemini'``,
               and ``*.jsonl``                                           ``Storage.getProjectTempDir`` + ``chats``
goose          ``$XDG_DATA_HOME/goose/sessions/sessions.db``             goose ``choose_app_strategy`` (etcetera:
               (also ``$XDG_CONFIG_HOME/goose/sessions/sessions.db``,    XDG on Linux and macOS)
               where Goose's storage docs put it)                        ``in_data_dir("sessions")``
opencode       ``$XDG_DATA_HOME/opencode/opencode.db``                   opencode ``Global.Path.data``
                                                                         (``xdg-basedir``, every platform)
copilot-cli    ``$COPILOT_HOME`` (default ``~/.copilot``)                Copilot CLI config dir reference;
               ``/session-state/<sessionId>/events.jsonl``, and          releases before 1.0 honoured
               ``$XDG_CONFIG_HOME/.copilot/…`` when that is set          ``XDG_CONFIG_HOME``
cline          ``<VS Code user data>/User/globalStorage/``               cline ``core/storage/disk.ts``
               ``saoudrizwan.claude-dev/tasks/<taskId>/``                (``getGlobalStorageDir("tasks", id)``,
               ``api_conversation_history.json`` (its                    ``GlobalFileNames``); VS Code's user
               ``ui_messages.json`` is read with it)                     data: ``$XDG_CONFIG_HOME/<app>`` on
                                                                         Linux, ``~/Library/Application
                                                                         Support/<app>`` on macOS,
                                                                         ``%APPDATA%/<app>`` on Windows; app
                                                                         ``Code``, ``Code - Insiders``,
                                                                         ``VSCodium``, ``Cursor``
roo-code       the same, ``rooveterinaryinc.roo-cline/tasks/…``          Roo-Code ``task-persistence``
=============  ========================================================  =====================================
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

from ..importers import detect
from ..importers.base import Importer, TranscriptError
from ..records import dataclass
from .ingest import available_importers, companion_files

__all__ = ["Found", "Location", "walk", "default_locations", "discover", "claimed_format", "with_companions"]

_HEAD_BYTES = 65536  # what importers.detect hands the sniffers
VSCODE_APPS = ("Code", "Code - Insiders", "VSCodium", "Cursor")
"""VS Code builds whose user-data folder holds Cline's and Roo Code's global storage."""


@dataclass(frozen=True)
class Found:
    """A discovered log: ``path`` and the ``harness`` whose default place it was found in."""

    path: Path
    harness: str


@dataclass(frozen=True)
class Location:
    """A harness's default place: files under ``root`` matching the glob ``pattern`` (``**`` recurses)."""

    harness: str
    root: Path
    pattern: str


def walk(folder: str | Path) -> list[Path]:
    """Every regular file under ``folder`` (recursively), sorted by path string; folders whose name starts
    with ``.`` are not entered (``folder`` itself may be hidden), folder symlinks are not followed, FIFOs,
    devices and sockets are left out. An unreadable sub-folder is skipped; a missing ``folder`` gives ``[]``."""
    out: list[Path] = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            p = Path(here) / name
            try:
                if p.is_file():
                    out.append(p)
            except OSError:
                continue
    return sorted(out, key=str)


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def _xdg(env: Mapping[str, str], name: str, default: str) -> Path:
    value = env.get(name, "")
    return Path(value) if os.path.isabs(value) else _home(env) / default  # the spec ignores a relative value


def default_locations(env: Mapping[str, str] | None = None) -> list[Location]:
    """Each harness's default places (table in the module docstring) under ``env`` (default ``os.environ``):
    ``HOME``, ``XDG_DATA_HOME``, ``XDG_CONFIG_HOME``, ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``COPILOT_HOME``,
    ``APPDATA`` (Windows).
    Places may not exist; :func:`discover` skips those."""
    env = os.environ if env is None else env
    home = _home(env)
    data, config = _xdg(env, "XDG_DATA_HOME", ".local/share"), _xdg(env, "XDG_CONFIG_HOME", ".config")
    claude = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    codex = Path(env.get("CODEX_HOME") or home / ".codex")
    copilot = Path(env.get("COPILOT_HOME") or home / ".copilot")
    locs = [
        Location("claude-code", claude / "projects", "**/*.jsonl"),
        Location("codex", codex / "sessions", "**/rollout-*.jsonl"),
        Location("codex", codex / "archived_sessions", "**/rollout-*.jsonl"),
        Location("gemini-cli", home / ".gemini" / "tmp", "*/chats/*.json"),
        Location("gemini-cli", home / ".gemini" / "tmp", "*/chats/*.jsonl"),
        Location("goose", data / "goose" / "sessions", "sessions.db"),
        Location("goose", config / "goose" / "sessions", "sessions.db"),
        Location("opencode", data / "opencode", "opencode.db"),
        Location("copilot-cli", copilot / "session-state", "*/events.jsonl"),
    ]
    if env.get("XDG_CONFIG_HOME") and os.path.isabs(env["XDG_CONFIG_HOME"]):
        locs.append(Location("copilot-cli", config / ".copilot" / "session-state", "*/events.jsonl"))
    user_data = [config, home / "Library" / "Application Support"]
    if env.get("APPDATA") and os.path.isabs(env["APPDATA"]):
        user_data.append(Path(env["APPDATA"]))
    for base in user_data:
        for app in VSCODE_APPS:
            storage = base / app / "User" / "globalStorage"
            for harness, extension in (("cline", "saoudrizwan.claude-dev"), ("roo-code", "rooveterinaryinc.roo-cline")):
                locs.append(Location(harness, storage / extension / "tasks", "*/api_conversation_history.json"))
    return locs


def discover(
    env: Mapping[str, str] | None = None, *, since: datetime | None = None, project: str | None = None
) -> list[Found]:
    """The logs in the default places (:func:`default_locations`), sorted by path string, each once.

    ``since`` keeps files modified at or after it (file mtime, local time when naive); ``project`` keeps
    paths containing that substring. Claude Code sub-agent files (``<sessionId>/subagents/agent-*.jsonl``)
    whose parent ``<sessionId>.jsonl`` is found are left out: :func:`with_companions` brings them after it.
    """
    cutoff = since.timestamp() if since is not None else None
    seen: dict[Path, Found] = {}
    for loc in default_locations(env):
        if not loc.root.is_dir():
            continue
        for p in loc.root.glob(loc.pattern):
            if any(part.startswith(".") for part in p.relative_to(loc.root).parts[:-1]):
                continue
            try:
                if not p.is_file() or (cutoff is not None and p.stat().st_mtime < cutoff):
                    continue
            except OSError:
                continue
            if project is not None and project not in str(p):
                continue
            seen.setdefault(p, Found(p, loc.harness))
    parents = {c for f in seen.values() for c in companion_files(f.path)}
    return sorted((f for f in seen.values() if f.path not in parents), key=lambda f: str(f.path))


def claimed_format(
    path: str | Path, importers: list[type[Importer]] | None = None, *, resemble: bool = False
) -> str | None:
    """The ``PLUGIN_NAME`` of the importer whose ``sniff`` scores ``path`` highest (the registered importers
    when ``importers`` is ``None``), or ``None`` when none claims it (including an empty file). With
    ``resemble`` a file no importer claims gets the format it nearly has (:func:`latch.importers.detect`: what
    importing it names). Reads at most the first 64 KiB. Raises :class:`TranscriptError` when the file cannot
    be read."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError as exc:
        raise TranscriptError(p, None, f"cannot read: {exc.strerror or exc}") from None
    if not head.strip():
        return None
    try:
        return detect(p, head, available_importers(importers), resemble=resemble).PLUGIN_NAME
    except TranscriptError:
        return None


def with_companions(paths: Iterable[str | Path]) -> list[Path]:
    """``paths`` in order with each Claude Code session's sub-agent files (:func:`companion_files`) right after
    it, every path once: a sub-agent file also listed on its own goes after its parent, not before."""
    items = [Path(p) for p in paths]
    companions = {c for p in items for c in companion_files(p)}
    out: dict[Path, None] = {}
    for p in items:
        if p in companions:
            continue
        out.setdefault(p)
        for c in companion_files(p):
            out.setdefault(c)
    return list(out)
