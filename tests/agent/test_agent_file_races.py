"""The file tools stay in the workspace when a process races them (latch.kernel.files: directory file descriptors
and ``O_NOFOLLOW``): a thread swaps a folder of the workspace for a symlink to a folder outside, over and over,
while the model writes, reads and edits files in it. Real files, a real store, real threads."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
import time

import pytest
from test_agent_tools import Agent

from latch.kernel.files import _open_dir, current_bytes, guarded_write

ATTEMPTS = 200


@pytest.fixture
def agent(tmp_path):
    a = Agent(tmp_path)
    yield a
    a.processes.close()
    a.store.close()


_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def exchange(a, b) -> None:
    """Swap the entries ``a`` and ``b`` atomically (``renameat2(RENAME_EXCHANGE)``): the path is never missing."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Swapper:
    """Swaps ``ws/sub`` between the real folder and a symlink to ``outside`` until stopped."""

    def __init__(self, ws, outside):
        self.ws, self.outside, self.swaps = ws, outside, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        os.symlink(outside, ws / "sub.swap")

    def _run(self) -> None:
        while not self.stop.is_set():
            exchange(self.ws / "sub", self.ws / "sub.swap")
            self.swaps += 1
            time.sleep(0.0002)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        if self.swaps % 2:
            exchange(self.ws / "sub", self.ws / "sub.swap")


def test_a_symlink_swapped_in_never_leads_a_write_read_or_edit_outside(agent, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE SECRET\n")
    (outside / "notes.txt").write_text("outside notes\n")
    (agent.ws / "sub").mkdir()
    (agent.ws / "sub" / "secret.txt").write_text("inside\n")
    (agent.ws / "sub" / "notes.txt").write_text("inside notes\n")
    assert not agent.call("read_file", {"path": "sub/notes.txt"}).is_error
    leaked = answered = 0
    with Swapper(agent.ws, outside) as swapper:
        for i in range(ATTEMPTS):
            outcomes = [
                agent.call("write_file", {"path": f"sub/w{i}.txt", "content": "x\n"}),
                agent.call("read_file", {"path": "sub/secret.txt"}),
                agent.call("edit_file", {"path": "sub/notes.txt", "old_string": "notes", "new_string": "notes"}),
            ]  # never a change: only the reads race
            leaked += "OUTSIDE SECRET" in outcomes[1].content
            answered += len(outcomes)
    assert swapper.swaps > ATTEMPTS  # the race really ran
    assert answered == 3 * ATTEMPTS
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt", "secret.txt"]  # not one write outside
    assert (outside / "notes.txt").read_text() == "outside notes\n"
    assert leaked == 0
    written = {p.name for p in (agent.ws / "sub").iterdir()}
    assert len({f"w{i}.txt" for i in range(ATTEMPTS)} & written) > 0  # and writes inside still happen


def test_a_symlink_in_the_path_is_refused_once_resolved(tmp_path):
    root = (tmp_path / "ws").resolve()
    (root / "real").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "link")
    with pytest.raises(OSError) as exc:
        _open_dir(root, ["link"])
    assert exc.value.errno == errno.ELOOP and "symlink appeared" in str(exc.value)
    os.close(_open_dir(root, ["real"]))


def test_symlinks_inside_the_workspace_still_work_and_ones_pointing_out_are_refused(agent, tmp_path):
    (agent.ws / "real").mkdir()
    (agent.ws / "real" / "a.txt").write_text("alpha\n")
    os.symlink("real", agent.ws / "alias")
    os.symlink("real/a.txt", agent.ws / "a-link.txt")
    assert agent.call("read_file", {"path": "alias/a.txt"}).content == "alpha\n"
    assert agent.call("read_file", {"path": "a-link.txt"}).content == "alpha\n"
    out = agent.call("edit_file", {"path": "alias/a.txt", "old_string": "alpha", "new_string": "beta"})
    assert not out.is_error, out.content
    assert (agent.ws / "real" / "a.txt").read_text() == "beta\n" and os.path.islink(agent.ws / "alias")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", agent.ws / "away")
    out = agent.call("write_file", {"path": "away/x.txt", "content": "x"})
    assert out.is_error and "outside the workspace" in out.content
    assert list((tmp_path / "outside").iterdir()) == []
    with pytest.raises(PermissionError, match="outside the workspace"):  # the kernel refuses on its own too
        guarded_write(agent.store, agent.sid, tmp_path / "outside" / "y.txt", b"y", None)


def test_a_fifo_is_refused_at_once_never_waited_on(agent):
    os.mkfifo(agent.ws / "pipe")
    start = time.monotonic()
    out = agent.call("read_file", {"path": "pipe"})
    assert out.is_error and "not a regular file" in out.content
    with pytest.raises(OSError, match="not a regular file"):
        current_bytes(agent.store, agent.sid, "pipe")
    assert time.monotonic() - start < 5
