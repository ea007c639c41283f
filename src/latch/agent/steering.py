"""Steering inbox: user messages typed while the agent works, delivered at a safe model boundary.

Spec (invariant tier, "steering protocol correctness"): a steering message is
never delivered between a tool call and its result. :meth:`SteeringInbox.submit`
appends a durable ``steering_queued`` event (not provider-visible); delivery at
a safe boundary (every earlier tool call has a terminal result) appends the
``UserMessage`` and a ``steering_delivered`` marker in ONE transaction, so a
restart neither loses nor duplicates a message (the marker is the dedupe key),
and delivery is FIFO.
"""

from __future__ import annotations

import uuid
from typing import cast

from ..events import AssistantMessage, SteeringDelivered, SteeringQueued, ToolResult, UserMessage
from ..store import EventLog, PendingEvent

__all__ = ["SteeringQueued", "SteeringDelivered", "SteeringInbox", "pending_tool_calls", "awaiting_user"]

# SteeringQueued and SteeringDelivered are declared in latch.events (its explicit table of kinds), so any
# process decodes a stored steering event without importing the agent.


def pending_tool_calls(store: EventLog, session_id: str) -> list[str]:
    """Ids of tool calls in the session that have no terminal result yet, in call order."""
    open_calls: dict[str, None] = {}
    for ev in store.events(session_id, kinds=("assistant_message", "tool_result")):
        e = ev.event
        if isinstance(e, AssistantMessage):
            for c in e.tool_calls:
                open_calls[c.id] = None
        elif isinstance(e, ToolResult):
            open_calls.pop(e.call_id, None)
    return list(open_calls)


class SteeringInbox:
    """Durable FIFO of steering messages for one session."""

    def __init__(self, store: EventLog, session_id: str):
        self.store = store
        self.session_id = session_id

    def submit(self, text: str) -> str:
        """Queue ``text``; returns its message id. ``ValueError`` for empty text."""
        if not text.strip():
            raise ValueError("steering message is empty")
        mid = uuid.uuid4().hex
        self.store.append(self.session_id, [SteeringQueued(mid, text)])
        return mid

    def pending(self) -> list[SteeringQueued]:
        delivered = {
            cast(SteeringDelivered, e.event).message_id
            for e in self.store.events(self.session_id, kinds=("steering_delivered",))
        }
        return [
            cast(SteeringQueued, e.event)
            for e in self.store.events(self.session_id, kinds=("steering_queued",))
            if cast(SteeringQueued, e.event).message_id not in delivered
        ]

    def at_safe_boundary(self) -> bool:
        return not pending_tool_calls(self.store, self.session_id)

    def deliver(self) -> list[int]:
        """Deliver every pending message if the session is at a safe boundary.

        Returns the seqs of the delivered ``UserMessage`` events (``[]`` when
        nothing is pending or a tool call is still waiting for its result).
        """
        return [seq for seq, _ in self.deliver_messages()]

    def deliver_messages(self) -> list[tuple[int, str]]:
        """:meth:`deliver`, returning ``(seq, text)`` of each delivered ``UserMessage`` in order."""
        if not self.at_safe_boundary():
            return []
        batch: list[PendingEvent] = []
        texts: list[str] = []
        for q in self.pending():
            batch.append(PendingEvent(UserMessage(q.text), f"steering:{q.message_id}"))
            batch.append(PendingEvent(SteeringDelivered(q.message_id), f"steering-delivered:{q.message_id}"))
            texts.append(q.text)
        if not batch:
            return []
        seqs = self.store.append(self.session_id, batch)
        return list(zip(seqs[0::2], texts, strict=False))


def awaiting_user(store: EventLog, session_id: str) -> bool:
    """Whether the session's conversation waits for the user: its last user, assistant or tool-result event is an
    assistant answer without tool calls and no steering message is pending (a resume then has nothing to send)."""
    last = None
    for ev in store.events(session_id, kinds=("user_message", "assistant_message", "tool_result")):
        last = ev.event
    if not isinstance(last, AssistantMessage) or last.tool_calls:
        return False
    return not SteeringInbox(store, session_id).pending()
