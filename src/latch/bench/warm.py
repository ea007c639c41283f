"""What a bench or stress task process needs loaded before its job, loaded once in the task server.

:func:`latch.bench.executor.mp_context` forks the pool's workers from a ``forkserver`` that imports this module
(``set_forkserver_preload``), and each worker forks its tasks' processes (:func:`latch.bench.executor.forked`), so
what :func:`warm_up` loads is paid once per command, not once per job: numpy,
the genai-prices table (:func:`latch.accounting.pricing.warm_up`), the plugin manager with every registered
plugin's modules (:func:`latch.plugins.registered`), and one small ``continuity`` job on a short Claude Code
transcript written here (:data:`WARM_TURNS` turns: its importer, the engine, the estimator and the price of its
model; not the generated scenario, whose text pools alone take a second to build), so the engine's lazily built
state is ready, then every regular expression and data class ``__init__`` the loaded modules left to their first
use (:func:`compile_deferred`) (the server's resident memory: about 75 MB). Without it a fresh
task process spent about 0.5 s importing genai-prices, 0.2 s numpy and 0.25 s the plugins' modules before a job
whose own work takes a few hundredths of a second. Exact estimators' vocabularies are not loaded (o200k's alone
is about 78 MB, which every task process, a stress shard too, would count in its resident memory): a job that
needs one loads it, unless every text it counts is in the command's count cache (:mod:`latch.count_cache`).

The plugin manager is built from the server's environment (``LATCH_DISABLE_PLUGINS``, ...), which is the
environment every task process forked from it has anyway (a forkserver's children inherit the server's, not
the parent's later one). A failure here only makes the tasks colder: :func:`warm_up` never raises, and a broken
plugin leaves no manager behind, so each task reports it as it would have without the server.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from pathlib import Path

from .. import lazyre, plugins, records
from ..accounting import pricing
from .runner import Budget, SessionSource, run_job
from .stress import MODEL, WORKSPACE

__all__ = ["WARM_MODULES", "WARM_TURNS", "compile_deferred", "warm_transcript", "warm_up"]

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

WARM_TURNS = 8
"""Turns (a request, a tool call and its result, an answer: four events each) of the transcript the server runs one
``continuity`` job on, so the engine's first view in a task process finds its lazily built tables and compiled
patterns ready."""


def warm_transcript(turns: int = WARM_TURNS) -> str:
    """A Claude Code transcript (JSON lines) of ``turns`` turns in :data:`latch.bench.stress.WORKSPACE`: each a
    user request naming a file and an error, a ``Read`` of that file, its content, and an answer, with usage."""
    session = "00000000-0000-4000-8000-00000000cafe"
    lines: list[str] = []
    parent: str | None = None

    def record(kind: str, message: dict[str, object], k: int) -> None:
        nonlocal parent
        uuid = f"00000000-0000-4000-8000-{len(lines) + 1:012d}"
        stamp = f"2026-01-01T10:{k:02d}:{len(lines) % 60:02d}.000Z"
        rec: dict[str, object] = {"parentUuid": parent, "isSidechain": False, "userType": "external"}
        rec.update(cwd=WORKSPACE, sessionId=session, version="2.1.40", type=kind, uuid=uuid, timestamp=stamp)
        if kind == "assistant":
            rec["requestId"] = f"req_warm{len(lines)}"
            message = {"id": f"msg_warm{len(lines)}", "type": "message", "role": "assistant", "model": MODEL, **message}
            message["usage"] = {"input_tokens": 900 + 40 * k, "output_tokens": 60, "cache_read_input_tokens": 800}
        rec["message"] = message
        lines.append(json.dumps(rec))
        parent = uuid

    for k in range(turns):
        path = f"{WORKSPACE}/src/shop/module_{k}.py"
        ask = f"Tests fail in {path}: ValueError: amount_{k} missing. Find out why and fix it."
        record("user", {"role": "user", "content": ask}, k)
        call = {"type": "tool_use", "id": f"toolu_warm{k}", "name": "Read", "input": {"file_path": path}}
        record("assistant", {"content": [call], "stop_reason": "tool_use"}, k)
        code = "\n".join(f"def step_{k}_{j}(amount_{j}):\n    return round(amount_{j} * 1.2, 2)" for j in range(12))
        result = {"type": "tool_result", "tool_use_id": f"toolu_warm{k}", "content": code}
        record("user", {"role": "user", "content": [result]}, k)
        answer = f"Fixed: module_{k} now keeps integer cents, and the tests pass."
        record("assistant", {"content": [{"type": "text", "text": answer}], "stop_reason": "end_turn"}, k)
    return "\n".join(lines) + "\n"


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
        with tempfile.TemporaryDirectory(prefix="latch-warm-") as folder:
            path = Path(folder) / "warm-up.jsonl"
            path.write_text(warm_transcript(), encoding="utf-8")
            row = run_job(
                "continuity", SessionSource(name="warm-up", path=str(path)), Budget("8k:1k:2k", 8_000, 1_000, 2_000)
            )
        if row["requests"] == 0:
            failed.append("job: the warm-up transcript has no model request")
    except Exception as exc:  # noqa: BLE001 - the jobs then take their first views cold
        failed.append(f"job: {type(exc).__name__}: {exc}")
    try:
        compile_deferred()
    except Exception as exc:  # noqa: BLE001 - the jobs then compile what they use themselves
        failed.append(f"compile: {type(exc).__name__}: {exc}")
    return failed


def compile_deferred() -> int:
    """Compile now what Latch's loaded modules left to their first use and a job uses: each module-level regular
    expression (:func:`latch.lazyre.lazy_compile`) and each data class's ``__init__`` (:func:`latch.records.dataclass`;
    its ``__repr__``, ``__eq__`` and ``__hash__``, which jobs do not call, stay lazy), of every ``latch`` module
    loaded (a job's importer, events and shell rules use a few dozen of them, each compiled again in every task
    process otherwise; all of them take about 15 ms here). Returns how many were compiled."""
    done = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("latch") and module is not None:
            namespace = vars(module)
            done += lazyre.compile_pending(namespace) + records.compile_pending_inits(namespace, name)
    return done
