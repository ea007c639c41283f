"""The sandbox of the agent's shell and background processes: Linux namespaces through bubblewrap (``bwrap``,
Debian package ``bubblewrap``), as Codex CLI and Claude Code sandbox theirs.

Modes (:data:`MODES`; ``latch run --sandbox MODE``):

* ``workspace-write``: the whole filesystem is mounted read-only, except the workspace (writable) and a private,
  empty ``/tmp`` (a tmpfs that disappears with the command; ``TMPDIR`` is ``/tmp``); the paths of
  :attr:`Sandbox.protected` (the Latch store when it lies in the workspace) stay read-only. Folders under
  ``/tmp`` that the agent's programs come from (:attr:`Sandbox.programs`: the ``PATH`` entries and the Python
  environment Latch runs in) stay visible, read-only, over the private ``/tmp``: a virtualenv made with
  ``mktemp -d`` keeps working inside.
* ``read-only``: the same, with the workspace read-only too (only the private ``/tmp`` is writable).
* ``off``: no sandbox; the permission policy (approval and hard-deny) is the only line.

In both sandboxed modes the command also gets its own network namespace (only a loopback device of its own:
nothing outside is reachable, not even a server on the host's 127.0.0.1) unless :attr:`Sandbox.network`, its
own PID namespace (it sees and signals only its own processes; ``/proc`` is its own, so no ``/proc/PID/root``
leads back to the host's writable tree) and IPC namespace, no capabilities (``--cap-drop ALL``: root inside
cannot remount anything writable) and ``no_new_privs`` (set by bubblewrap: setuid programs gain nothing).
It dies with the agent (``--die-with-parent``): a killed run leaves no tool process behind. The environment is
the one the caller passes (:func:`latch.agent.environment.tool_environment`: no secrets).

What it does not do: reads are not confined (a command may read any file the user can; the secrets of the
environment are gone, files on disk are not), and a stdio MCP server is not sandboxed.

:func:`choose` turns the requested mode into a :class:`Sandbox`: with no request (``None``) it is
``workspace-write`` where bubblewrap works and ``off`` with a one-line warning where it does not; an explicit
sandboxed mode that cannot run raises :class:`SandboxError` with one line naming why.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..records import dataclass

__all__ = [
    "MODES",
    "DEFAULT_MODE",
    "Sandbox",
    "SandboxError",
    "bwrap_problem",
    "choose",
    "program_folders",
    "NO_SANDBOX",
]

MODES = ("workspace-write", "read-only", "off")
DEFAULT_MODE = "workspace-write"
"""The mode where bubblewrap works and nothing was asked."""
_PROBE_SECONDS = 10.0


class SandboxError(Exception):
    """A sandboxed mode was asked for and cannot run here (one line: why, and what to do)."""


@dataclass(frozen=True)
class Sandbox:
    """How tool processes run: ``mode`` (:data:`MODES`), the ``workspace`` (absolute, resolved), ``network``
    (keep the host's network), ``protected`` (absolute paths inside the workspace kept read-only) and the
    ``bwrap`` executable (``None`` for ``off``); ``programs``: absolute folders under ``/tmp`` kept visible,
    read-only, over the private ``/tmp`` (:func:`program_folders`)."""

    mode: str
    workspace: Path | None = None
    network: bool = False
    protected: tuple[Path, ...] = ()
    bwrap: str | None = None
    programs: tuple[Path, ...] = ()

    @property
    def active(self) -> bool:
        return self.mode != "off"

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as run in this sandbox: unchanged for ``off``, else wrapped in ``bwrap`` (see the module
        docstring), with the workspace as the working directory."""
        if not self.active:
            return list(argv)
        assert self.bwrap is not None and self.workspace is not None
        ws = str(self.workspace)
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for p in self.programs:
            if p.is_dir() and p != self.workspace and self.workspace not in p.parents:
                args += ["--ro-bind", str(p), str(p)]
        args += ["--bind" if self.mode == "workspace-write" else "--ro-bind", ws, ws]
        for p in self.protected:
            if p.exists() and self.workspace in p.parents:
                args += ["--ro-bind", str(p), str(p)]
        args += ["--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL", "--die-with-parent"]
        if not self.network:
            args.append("--unshare-net")
        return [*args, "--chdir", ws, "--", *argv]

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for a process of this sandbox: ``TMPDIR`` is the private ``/tmp`` when sandboxed."""
        return {**env, "TMPDIR": "/tmp"} if self.active else dict(env)

    def describe(self) -> str:
        """One line: the mode and what it allows (for the run's header)."""
        if not self.active:
            return "sandbox off"
        net = "network" if self.network else "no network"
        writes = "workspace and /tmp writable" if self.mode == "workspace-write" else "only /tmp writable"
        return f"sandbox {self.mode} ({writes}, {net})"


NO_SANDBOX = Sandbox("off")


@functools.lru_cache(maxsize=8)
def bwrap_problem(bwrap: str | None = None) -> str | None:
    """Why bubblewrap cannot sandbox here (not installed, or it cannot make the namespaces), else ``None``.

    Runs ``bwrap`` once with every option :meth:`Sandbox.command` uses (``true`` inside); cached per path."""
    exe = bwrap or shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    probe = Sandbox("workspace-write", Path("/").resolve(), bwrap=exe).command(["true"])
    probe[probe.index("--bind")] = "--ro-bind"
    try:
        out = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({exe}) cannot run: {exc}"
    if out.returncode != 0:
        why = " ".join(out.stderr.decode("utf-8", "replace").split())[:200] or f"exit code {out.returncode}"
        return f"bubblewrap ({exe}) cannot create a sandbox here: {why}"
    return None


def program_folders(path: str | None = None, prefixes: Iterable[str] = ()) -> tuple[Path, ...]:
    """The folders under ``/tmp`` that programs come from: each entry of ``path`` (``os.pathsep``-separated;
    default ``$PATH``) and each of ``prefixes`` (default: this Python's ``sys.prefix`` and ``sys.base_prefix``)
    that names a folder under ``/tmp``, outermost first, without folders inside another."""
    tmp = Path("/tmp")
    entries = (os.environ.get("PATH", "") if path is None else path).split(os.pathsep)
    found: list[Path] = []
    for entry in [*entries, *(prefixes or (sys.prefix, sys.base_prefix))]:
        if not entry or not os.path.isabs(entry):
            continue
        folder = Path(os.path.normpath(entry))  # as the program names it: a symlink's target is bound there
        if tmp in folder.parents and folder.is_dir():
            found.append(folder)
    kept: list[Path] = []
    for folder in sorted(set(found), key=lambda f: len(f.parts)):
        if not any(k == folder or k in folder.parents for k in kept):
            kept.append(folder)
    return tuple(kept)


def choose(
    requested: str | None,
    workspace: str | os.PathLike[str],
    *,
    network: bool = False,
    protected: Iterable[str | os.PathLike[str]] = (),
    bwrap: str | None = None,
) -> tuple[Sandbox, str | None]:
    """``(sandbox, warning)`` for mode ``requested`` (:data:`MODES`, or ``None``: :data:`DEFAULT_MODE` where
    bubblewrap works, else ``off`` and a one-line ``warning``) in ``workspace``.

    Raises :class:`SandboxError` for an unknown mode, or for a sandboxed mode asked for explicitly where
    bubblewrap is missing or cannot make namespaces."""
    if requested is not None and requested not in MODES:
        raise SandboxError(f"--sandbox: unknown mode {requested!r} (known: {', '.join(MODES)})")
    if requested == "off":
        return NO_SANDBOX, None
    problem = bwrap_problem(bwrap)
    if problem is not None:
        if requested is not None:
            raise SandboxError(f"--sandbox {requested}: {problem}; or pass --sandbox off")
        return NO_SANDBOX, (
            f"no sandbox: {problem}; tool commands run with the permission policy only (pass --sandbox off to say so)"
        )
    ws = Path(workspace).resolve()
    kept = tuple(Path(os.path.abspath(p)) for p in protected)
    return Sandbox(
        requested or DEFAULT_MODE, ws, network, kept, bwrap or shutil.which("bwrap"), program_folders()
    ), None
