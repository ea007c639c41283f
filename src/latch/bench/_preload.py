"""Imported by the task server (``forkserver`` preload, :func:`latch.bench.executor.mp_context`): runs
:func:`latch.bench.warm.warm_up` once, so every task process forked from the server starts warm; then moves what it
loaded out of the garbage collector's reach (``gc.freeze``), so a task's collections neither scan nor copy the
server's objects."""

import gc

from .warm import warm_up

warm_up()
# no full collection first: it would scan the server's ~75,000 objects (about 35 ms before the first task can fork)
# to free the warm-up's few hundred unreachable ones, which frozen only stay in the server's memory
gc.freeze()  # what the server loaded is never scanned again: a task's collections touch (and copy) only its own
