"""The native estimator's helper threads: a text of 512 Ki characters or more is cut into parts that the
calling thread and helper threads claim in turn (``native/src/estimate.cpp``). Helpers stay between calls,
end once idle, and a forked child starts its own; every count equals the single walk's."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

_WORDS = ["alpha", "Beta", "HTTPServer", "x1", "4096", "--", "==", "a.b", "\n\n  ", "\t", "é", "(", ")"]


def _large(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(150_000, 250_000)))


def test_concurrent_callers_get_their_own_counts():
    # Callers on several threads offer their parts to the same helpers at once; each count must equal
    # the one its text gets alone.
    texts = [_large(seed) for seed in range(6)]
    assert min(map(len, texts)) > 512 * 1024
    batch = [t[i : i + 300] for t in texts[:2] for i in range(0, len(t), 300)]
    want = [native.estimate_tokens(t) for t in texts]
    want_batch = native.estimate_tokens_batch(batch).tolist()
    errors: list[str] = []

    def run(k: int) -> None:
        for r in range(8):
            i = (k + r) % len(texts)
            if native.estimate_tokens(texts[i]) != want[i]:
                errors.append(f"caller {k}: text {i}")
            if r % 4 == 0 and native.estimate_tokens_batch(batch).tolist() != want_batch:
                errors.append(f"caller {k}: batch")

    callers = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert errors == []


_FORK_CHECK = """
import os, random, time
from latch import _native as native
rng = random.Random(1)
words = ["alpha", "Beta", "x1", "--", "\\n", "(", "é"]
text = " ".join(rng.choice(words) for _ in range(200_000))
threads = lambda: len(os.listdir("/proc/self/task"))
assert threads() == 1, threads()
want = native.estimate_tokens(text)
assert threads() >= 2, "no helper stays after a call"
pid = os.fork()
if pid == 0:  # the child has none of its parent's helpers: it starts its own
    ok = native.estimate_tokens(text) == want and threads() >= 2
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the forked child's count or helpers"
time.sleep(1.0)
assert threads() == 1, f"{threads()} threads: idle helpers did not end"
assert native.estimate_tokens(text) == want
"""


@pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or not hasattr(os, "fork") or not Path("/proc/self/task").is_dir(),
    reason="needs 2 CPUs, fork and /proc",
)
def test_helpers_stay_between_calls_end_when_idle_and_restart_in_a_forked_child():
    res = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", _FORK_CHECK],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]


_EXIT_CHECK = """
import random, threading
from latch import _native as native
rng = random.Random(2)
text = " ".join(rng.choice(["alpha", "Beta", "x1", "--", "\\n"]) for _ in range(200_000))
want = native.estimate_tokens(text)
def calls():
    for _ in range(10):
        assert native.estimate_tokens(text) == want
callers = [threading.Thread(target=calls) for _ in range(2)]
for c in callers:
    c.start()
calls()
for c in callers:
    c.join()
"""


def test_process_exits_right_after_large_estimates():
    # The helpers are still waiting for work when the interpreter exits: the library stops them.
    for _ in range(3):
        res = subprocess.run([sys.executable, "-c", _EXIT_CHECK], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr[-2000:]
