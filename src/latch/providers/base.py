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

__all__ = ["Provider", "ProviderError", "ProviderOverflow", "ScriptedProvider"]

Response = Mapping[str, Any]


class ProviderError(Exception):
    """A provider could not answer a request (the message says which and why)."""


class ProviderOverflow(ProviderError):
    """The provider refused the request as longer than the model's context: ``prompt_tokens`` (what it
    counted) and ``limit_tokens`` (the model's window) when its message says them, else ``None``."""

    def __init__(self, message: str, prompt_tokens: int | None = None, limit_tokens: int | None = None):
        super().__init__(message)
        self.prompt_tokens, self.limit_tokens = prompt_tokens, limit_tokens


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
                 name: str = "scripted", wire: str = "openai-chat", model: str | None = None):
        self.name, self.wire, self.model = name, wire, model
        self._responses = list(responses)
        self.requests: list[Mapping[str, Any]] = []

    @property
    def remaining(self) -> int:
        """Canned responses not yet served."""
        return len(self._responses) - len(self.requests)

    def complete(self, request_body: Mapping[str, Any], *,
                 on_text: Callable[[str], None] | None = None) -> Response:
        i = len(self.requests)
        if i >= len(self._responses):
            raise ProviderError(f"{self.name}: request {i + 1} has no scripted response "
                                f"(the script has {len(self._responses)})")
        self.requests.append(request_body)
        answer = self._responses[i]
        body = answer(request_body) if callable(answer) else answer
        if on_text is not None:
            text = _text_of(body)
            if text:
                on_text(text)
        return body


def _text_of(body: Response) -> str:
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        msg = choices[0].get("message")
        return str(msg.get("content") or "") if isinstance(msg, Mapping) else ""
    blocks = body.get("content")
    if isinstance(blocks, list):
        return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")
    return ""
