"""Imported by the task server (``forkserver`` preload, :func:`latch.bench.executor.mp_context`): runs
:func:`latch.bench.warm.warm_up` once, so every task process forked from the server starts warm."""

from .warm import warm_up

warm_up()
