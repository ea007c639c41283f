"""A line read from the terminal that a signal always interrupts: what the ``latch>`` prompt and the approval
prompt read with, instead of the built-in :func:`input`.

On a terminal, :func:`input` blocks in the C library's ``read`` and notices a signal only when that call fails
with ``EINTR``. A signal handled just before the call starts (after the prompt was written: Ctrl-C typed as the
prompt appears, a process descheduled between the two under load) or on a thread other than the main one never
interrupts it, so the ``KeyboardInterrupt`` the handler raised waits for a line that never comes and the run hangs.
:func:`read_line` waits in ``select`` on the terminal and on a pipe given to :func:`signal.set_wakeup_fd`: a
signal handled anywhere in the process wakes it, and its Python handler runs (Ctrl-C's ``KeyboardInterrupt``,
:class:`latch.agent.session.Terminated`) before any byte is read.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading

__all__ = ["read_line"]

_BACKSTOP = 1.0
"""Longest wait in seconds between two looks for a signal whose wake-up byte was not written (none is expected)."""


def read_line(prompt: str = "") -> str:
    """What :func:`input` returns (the line without its ``\\n``; ``EOFError`` at end of input), read so that a
    signal handled at any moment raises from its Python handler (see the module docstring). ``prompt`` goes to
    standard error after standard output is flushed, as :func:`input` writes it on a terminal. Off a terminal
    (a pipe, a captured stream) or off the main thread this is :func:`input`. Invalid UTF-8 (the stream's
    encoding) reads as U+FFFD."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return input(prompt)
    if not os.isatty(fd) or threading.current_thread() is not threading.main_thread():
        return input(prompt)
    wake_r, wake_w = os.pipe()
    try:
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        try:
            sys.stdout.flush()
            if prompt:
                sys.stderr.write(prompt)
            sys.stderr.flush()
            line = _read(fd, wake_r)
        finally:
            signal.set_wakeup_fd(previous)
    finally:
        os.close(wake_r)
        os.close(wake_w)
    return line.decode(sys.stdin.encoding or "utf-8", "replace")


def _read(fd: int, wake: int) -> bytes:
    """Bytes up to a newline (left out) or the end of input, one at a time so that nothing past the line is taken
    from the terminal."""
    got = bytearray()
    while True:
        ready, _, _ = select.select([fd, wake], [], [], _BACKSTOP)  # a signal: its handler raises on return
        if wake in ready:
            try:
                os.read(wake, 512)  # the handler ran (or runs now); a handler that does not raise: read on
            except BlockingIOError:
                pass
        if fd not in ready:
            continue
        byte = os.read(fd, 1)
        if not byte:
            if not got:
                raise EOFError
            return bytes(got)
        if byte == b"\n":
            return bytes(got)
        got += byte
