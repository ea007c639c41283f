"""The provider protocol and a scripted provider (replays canned responses).

A provider turns one wire-format request body (see
:func:`latch.providers.to_openai_chat` and
:func:`latch.providers.to_anthropic_messages`) into the provider's response
body. Network providers live in plugins; :class:`ScriptedProvider` serves tests
and replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Provider", "ProviderError", "ScriptedProvider"]

Response = Mapping[str, Any]


class ProviderError(Exception):
    """A provider could not answer a request (the message says which and why)."""


@runtime_checkable
class Provider(Protocol):
    """One model endpoint: ``name`` and ``complete(request_body) -> response body``."""

    name: str

    def complete(self, request_body: Mapping[str, Any]) -> Response: ...


class ScriptedProvider:
    """Answers each request with the next canned response, in order.

    ``responses`` are response bodies, or callables ``(request_body) -> response
    body`` for answers that depend on the request. Every request is kept in
    :attr:`requests`. A request past the end raises :class:`ProviderError`
    naming how many responses the script had.
    """

    def __init__(self, responses: Iterable[Response | Callable[[Mapping[str, Any]], Response]],
                 name: str = "scripted"):
        self.name = name
        self._responses = list(responses)
        self.requests: list[Mapping[str, Any]] = []

    @property
    def remaining(self) -> int:
        """Canned responses not yet served."""
        return len(self._responses) - len(self.requests)

    def complete(self, request_body: Mapping[str, Any]) -> Response:
        i = len(self.requests)
        if i >= len(self._responses):
            raise ProviderError(f"{self.name}: request {i + 1} has no scripted response "
                                f"(the script has {len(self._responses)})")
        self.requests.append(request_body)
        answer = self._responses[i]
        return answer(request_body) if callable(answer) else answer
