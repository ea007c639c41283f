"""Bubblewrap for the sandbox tests, and ending a tool's shell that a killed agent may have left behind.

* :func:`require_bwrap` skips with the reason when bubblewrap is missing or cannot make namespaces here, and fails
  instead when ``CI`` is set (``.ci/run`` installs the Debian package ``bubblewrap``).
* :func:`end_shell_group` ends the process group of the ``/bin/sh -c`` whose ``echo $$ > MARKER`` wrote
  ``marker``, like a reboot would, after a test SIGKILLed the agent. Inside the sandbox ``$$`` is a pid of the
  sandbox's own PID namespace (and the sandbox already died with the agent): a pid is only signalled when it is
  that very shell on this host, never a stranger that happens to hold the number.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from latch.agent.sandbox import bwrap_problem

__all__ = ["require_bwrap", "end_shell_group"]


def require_bwrap() -> None:
    problem = bwrap_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {problem} (.ci/run installs bubblewrap)")
    pytest.skip(f"needs bubblewrap: {problem}")


def end_shell_group(marker: Path) -> None:
    try:
        pid = int(marker.read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if argv[:2] != [b"/bin/sh", b"-c"] or str(marker).encode() not in b" ".join(argv):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
