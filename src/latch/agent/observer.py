"""What a front end sees of an agent turn: the :class:`Observer` it is told through, each request's :class:`Step`,
how a run ended (:class:`RunOutcome`) and the one-line :class:`AgentError` a turn raises when it cannot be sent
(spec: "Sessions & continuity")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..events import AssistantMessage, EstimateCorrection, ToolCall, ToolResult, Usage
from ..host.loop import RequestResult
from ..port import ContextView
from ..records import dataclass
from .permissions import Decision
from .tools import ToolOutcome

__all__ = ["AgentError", "Observer", "Step", "RunOutcome"]


class AgentError(Exception):
    """The turn cannot be sent: the view is over budget or invalid, or the provider refused it (one line)."""


class Observer:
    """What a front end sees of a turn (all methods optional no-ops; never called with raw provider bytes)."""

    def on_request(self, number: int, result: RequestResult) -> None:
        """The view of request ``number`` was materialized and checked; it is about to be sent."""

    def on_text(self, delta: str) -> None:
        """A streamed piece of the assistant's text."""

    def on_response(self, number: int, message: AssistantMessage, usage: Usage | None, view: ContextView) -> None:
        """The assistant message of request ``number`` was committed."""

    def on_tool_call(self, call: ToolCall, decision: Decision, allowed: bool) -> None:
        """A call was decided (``allowed``: it is about to run)."""

    def on_tool_result(self, call: ToolCall, outcome: ToolOutcome) -> None:
        """A call finished and its result was committed."""

    def on_correction(self, correction: EstimateCorrection) -> None:
        """The provider counted more than the estimate; later views are budgeted smaller."""

    def on_steering(self, texts: list[str]) -> None:
        """Steering messages (queued by any front end) were delivered as user turns, in order."""

    def child(self, session_id: str) -> Observer:
        """The observer of child agent ``session_id`` (default: this one)."""
        return self


@dataclass(frozen=True)
class Step:
    """One request: its number, the checked ``result`` (view and recount), the wire ``body`` sent, the
    committed ``message`` and ``usage``, and the tool ``results`` appended, in call order."""

    number: int
    result: RequestResult
    body: Mapping[str, Any]
    message: AssistantMessage
    usage: Usage | None
    results: tuple[ToolResult, ...] = ()

    @property
    def view(self) -> ContextView:
        assert self.result.view is not None
        return self.result.view


@dataclass
class RunOutcome:
    """How :meth:`latch.agent.loop.AgentLoop.run` ended: ``stopped`` is ``"done"`` (an answer without tool calls),
    ``"max_turns"``, or ``"stopped"`` (a ``stop`` command applied at a safe boundary); ``steps`` are the turns
    taken."""

    stopped: str
    steps: list[Step] = field(default_factory=list)
