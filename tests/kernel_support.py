"""Helpers for the kernel tests: build sessions from hand-written tool turns (``from kernel_support import ...``)."""

from __future__ import annotations

import itertools
import json

from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.kernel import canonical_state

_ids = itertools.count(1)


def session(store, workspace: str | None = "/ws", *, parent: str | None = None, fmt: str | None = None) -> str:
    return store.create_session(workspace=workspace, parent_id=parent, format=fmt)


def turn(
    store,
    sid: str,
    name: str,
    args,
    result: str = "",
    *,
    is_error: bool = False,
    exit_code: int | None = None,
    missing: bool = False,
) -> int:
    """One assistant tool call and its result; ``args`` is a dict (JSON-encoded) or a raw string. Returns the result seq."""
    call_id = f"call_{next(_ids)}"
    arguments = args if isinstance(args, str) else json.dumps(args)
    seqs = store.append(
        sid,
        [
            AssistantMessage(tool_calls=(ToolCall(call_id, name, arguments),)),
            ToolResult(call_id=call_id, content=result, is_error=is_error, exit_code=exit_code, missing=missing),
        ],
    )
    return seqs[-1]


def chatter(store, sid: str, n: int) -> None:
    """``n`` events of ordinary conversation (user/assistant pairs), in batches."""
    batch = []
    for i in range(n):
        batch.append(
            UserMessage(text=f"message {i} about nothing in particular")
            if i % 2 == 0
            else AssistantMessage(text=f"reply {i}")
        )
        if len(batch) == 500:
            store.append(sid, batch)
            batch = []
    if batch:
        store.append(sid, batch)


def state(store, sid: str, until_seq: int | None = None):
    return canonical_state(store, sid, until_seq)


def by(items, key: str) -> dict:
    return {x[key]: x for x in items}
