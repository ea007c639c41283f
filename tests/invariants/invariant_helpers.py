"""Shared builders of the invariant tier: deterministic sessions, engines through the port, raw rows.

Sessions are grown one model request at a time from :class:`latch.bench.scenario.ScenarioModel`
(the corpus-measured mix), so two stores fed the same seed hold byte-identical events.
"""

from __future__ import annotations

import hashlib

from store_backends import raw_connection

from latch.bench.scenario import ScenarioModel
from latch.engine import ContextBudget, ContextRequest, EngineProfile, SessionContext
from latch.host.session import StoreKernelWriter, StoreSessionReader
from latch.plugins import get_engine_factory
from latch.providers import canonical_request_bytes

MODEL = "claude-sonnet-4-5"
WORKSPACE = "/work/shop"
STREAM = "continuity:test"
# Small enough that a few dozen scenario requests rotate several cache epochs.
SMALL = ContextBudget(context_window_tokens=60_000, reserve_tokens=8_000, recent_tokens=8_000)
SYSTEM = "You are a coding agent. Keep the canonical state current with the kernel tools."
TOOLS = (
    {
        "name": "Bash",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
)
CONTEXT = SessionContext(workspace=WORKSPACE, repository_instructions="Run pytest before committing.")


def new_session(store, key: str = "invariants") -> str:
    return store.create_session(external_key=key, workspace=WORKSPACE, format="claude-code", source="test")


def profile(store, sid: str, stream: str = STREAM, **kw) -> EngineProfile:
    return EngineProfile(
        session_id=sid,
        model=MODEL,
        reader=StoreSessionReader(store, sid),
        writer=StoreKernelWriter(store, sid, stream),
        **kw,
    )


def continuity(store, sid: str, stream: str = STREAM):
    """The default engine, built the way every host builds it: through the registered factory."""
    return get_engine_factory("continuity")(profile(store, sid, stream))


def request(sid: str, budget: ContextBudget = SMALL, **kw) -> ContextRequest:
    return ContextRequest(
        session_id=sid, system_prompt=SYSTEM, session_context=CONTEXT, tools=TOOLS, budget=budget, **kw
    )


def grow(
    store,
    sid: str,
    engine,
    requests: int,
    *,
    seed: int = 11,
    model: ScenarioModel | None = None,
    budget: ContextBudget = SMALL,
    between=None,
) -> list:
    """Append ``requests`` scenario requests, materializing before each; return the views.

    ``between(i)`` runs after request ``i`` is appended (e.g. a kernel tool call).
    """
    model = model or ScenarioModel(seed, workspace=WORKSPACE)
    views = []
    for i in range(requests):
        views.append(engine.materialize(request(sid, budget)))
        store.append(sid, model.request())
        if between is not None:
            between(i)
    return views


def rows_digest(path) -> tuple[int, str]:
    """``(rows, sha256)`` of the raw ``events`` table, read with a plain connection (``path``: an SQLite file or a
    store, on either backend)."""
    db = raw_connection(path)
    try:
        h = hashlib.sha256()
        n = 0
        for row in db.execute("SELECT seq, session_id, kind, payload, source_ref, ts FROM events ORDER BY seq"):
            h.update(repr(row).encode("utf-8", "surrogatepass"))
            n += 1
        return n, h.hexdigest()
    finally:
        db.close()


def kernel_streams(path) -> set[tuple[str, str]]:
    """Every ``(stream, kind)`` present in the ``kernel_records`` table (``path``: an SQLite file or a store)."""
    db = raw_connection(path)
    try:
        return {(s, k) for s, k in db.execute("SELECT DISTINCT stream, kind FROM kernel_records")}
    finally:
        db.close()


def wire(view) -> bytes:
    return canonical_request_bytes(view)
