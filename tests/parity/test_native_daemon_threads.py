"""A daemon thread inside a native call when the interpreter shuts down: CPython ends such a thread with
``pthread_exit`` once it asks for the GIL back. Every native function that releases the GIL must let the
thread end there, instead of aborting the whole process ("terminate called without an active
exception", exit status 134) after the program has finished. Each program calls its function once before
starting the threads: pybind11 itself releases the GIL, with a destructor that cannot let the thread end,
while two threads race to make the first numpy array of the process."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

_SETUP = {
    "estimate_tokens": ("text = 'alpha Beta x1 -- ' * 200_000", "native.estimate_tokens(text)"),
    "estimate_tokens_batch": ("texts = ['alpha Beta x1 -- ' * 20] * 20_000", "native.estimate_tokens_batch(texts)"),
    "suffix_start": (
        "import numpy as np; sums = np.arange(0, 4_000_000, 4, dtype=np.int64)",
        "native.suffix_start(sums, 1000)",
    ),
    "score_episodes": (
        "import numpy as np; n = 20_000; ind = np.arange(n + 1, dtype=np.int64); ids = np.arange(n, dtype=np.int64)"
        "; marks = np.zeros(n, dtype=np.int64); last = np.arange(n, dtype=np.int64)"
        "; q = np.arange(0, n, 7, dtype=np.int64)",
        "native.score_episodes(ind, ids, ind, ids, marks, last, q, q, n, 8)",
    ),
}

_PROGRAM = """
import threading, time
from latch import _native as native
{setup}
{call}
def calls():
    while True:
        {call}
for _ in range(2):
    threading.Thread(target=calls, daemon=True).start()
time.sleep(0.05)
"""


@pytest.mark.parametrize("function", sorted(_SETUP))
def test_process_exits_cleanly_with_daemon_threads_inside_native_calls(function: str):
    setup, call = _SETUP[function]
    program = _PROGRAM.format(setup=setup, call=call)
    for _ in range(4):
        res = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, f"{function}: exit status {res.returncode}: {res.stderr[-500:]}"
        assert "terminate called" not in res.stderr
