"""Process checks shared by the tests that start and signal real processes."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """True while process ``pid`` runs: it exists and is neither a zombie nor dead (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().decode().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
