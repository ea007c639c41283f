"""What a bench or stress task process needs loaded before its job, loaded once in the task server.

:func:`latch.bench.executor.mp_context` forks every task process from a ``forkserver`` that imports this module
(``set_forkserver_preload``), so what :func:`warm_up` loads is paid once per command, not once per job: numpy,
the genai-prices table (:func:`latch.accounting.pricing.warm_up`), the plugin manager with every registered
plugin's modules (:func:`latch.plugins.registered`), and one small ``continuity`` job (:data:`WARM_JOB_EVENTS`),
so the engine's lazily built state is ready (the server's resident memory: about 75 MB). Without it a fresh
task process spent about 0.5 s importing genai-prices, 0.2 s numpy and 0.25 s the plugins' modules before a job
whose own work takes a few hundredths of a second. Exact estimators' vocabularies are not loaded (o200k's alone
is about 78 MB, which every task process, a stress shard too, would count in its resident memory): a job that
needs one loads it.

The plugin manager is built from the server's environment (``LATCH_DISABLE_PLUGINS``, ...), which is the
environment every task process forked from it has anyway (a forkserver's children inherit the server's, not
the parent's later one). A failure here only makes the tasks colder: :func:`warm_up` never raises, and a broken
plugin leaves no manager behind, so each task reports it as it would have without the server.
"""

from __future__ import annotations

import importlib

from .. import plugins
from ..accounting import pricing
from .runner import Budget, SessionSource, run_job

__all__ = ["WARM_MODULES", "WARM_JOB_EVENTS", "warm_up"]

WARM_MODULES = (
    "numpy",
    "latch.bench.runner",
    "latch.bench.shards",
    "latch.bench.stress",
    "latch.engine",
    "latch.engine.episodes",
    "latch.engine.recall",
    "latch.host.replay",
    "latch.importers",
)
"""Modules every bench job or stress shard imports (numpy: the episode index and batched estimates)."""

WARM_JOB_EVENTS = 30
"""Events of the generated session the server runs one ``continuity`` job on (about 0.3 s), so the engine's
first view in a task process finds its lazily built tables and compiled patterns ready."""


def warm_up() -> list[str]:
    """Import :data:`WARM_MODULES`, load the price table and build the plugin manager with every registry; what
    could not be loaded (``"name: Type: message"`` each), empty when everything loaded."""
    failed: list[str] = []
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - an optional module (numpy for a heuristic-only run)
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    try:
        pricing.warm_up()
    except Exception as exc:  # noqa: BLE001 - the jobs then load the table themselves
        failed.append(f"prices: {type(exc).__name__}: {exc}")
    try:
        for kind in plugins.KINDS:
            plugins.registered(kind)
    except Exception as exc:  # noqa: BLE001 - a broken plugin: each job reports it as it would without this
        failed.append(f"plugins: {type(exc).__name__}: {exc}")
        plugins.reset_plugin_manager()
        return failed
    try:
        run_job(
            "continuity",
            SessionSource(name="warm-up", seed=0, events=WARM_JOB_EVENTS),
            Budget("32k:4k:8k", 32_000, 4_000, 8_000),
        )
    except Exception as exc:  # noqa: BLE001 - the jobs then take their first views cold
        failed.append(f"job: {type(exc).__name__}: {exc}")
    return failed
