"""The provider protocol and a scripted provider (replays canned responses).

A provider turns one wire-format request body (see
:func:`latch.providers.to_openai_chat`, :func:`latch.providers.to_anthropic_messages` and
:func:`latch.providers.to_responses`) into the provider's response
body. The network providers (on the official SDKs) are :mod:`.openai.sdk`,
:mod:`.anthropic.sdk` and :mod:`.openai.responses_sdk`, registered as plugins by :mod:`latch.default_plugins.providers`;
:class:`ScriptedProvider` serves tests and replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Provider", "ProviderError", "ProviderOverflow", "ScriptedProvider", "response_text"]

Response = Mapping[str, Any]


class ProviderError(Exception):
    """A provider could not answer a request; the message is one line naming the provider, the HTTP
    status when there was one, and the provider's own message (never an API key).

    ``provider`` is the provider's name and ``status`` the HTTP status code (``None`` for a connection
    failure, a timeout or a malformed stream).
    """

    def __init__(self, message: str, *, provider: str | None = None, status: int | None = None):
        super().__init__(message)
        self.provider = provider
        self.status = status


class ProviderOverflow(ProviderError):
    """The request did not fit the model's context window (context length exceeded).

    ``prompt_tokens`` is the request's size and ``limit_tokens`` the window, both in the provider's
    own tokens as its error message reported them (``None`` when it did not say).
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        prompt_tokens: int | None = None,
        limit_tokens: int | None = None,
    ):
        super().__init__(message, provider=provider, status=status)
        self.prompt_tokens = prompt_tokens
        self.limit_tokens = limit_tokens


@runtime_checkable
class Provider(Protocol):
    """One model endpoint (the agent runtime contract).

    ``name`` (the registered ``PLUGIN_NAME``), ``wire`` (``"openai-chat"``, ``"anthropic-messages"`` or
    ``"openai-responses"``: the request and response shapes), ``model`` (the model id), and
    ``complete(request_body, *, on_text=None) -> response body``: the request body is a view
    rendered by :func:`latch.providers.to_openai_chat` / :func:`latch.providers.to_anthropic_messages` /
    :func:`latch.providers.to_responses`; the answer is the wire's NON-streaming response body (a
    ``chat.completion``, a Messages ``message`` or a Responses ``response`` object, plain dicts) that :func:`latch.agent.loop.parse_response` reads;
    ``on_text(delta)`` is called with each streamed text delta. Errors: :class:`ProviderError`,
    :class:`ProviderOverflow` for context length exceeded.
    """

    name: str
    wire: str
    model: str

    def complete(
        self, request_body: Mapping[str, Any], *, on_text: Callable[[str], None] | None = None
    ) -> Response: ...


def response_text(wire: str, response: Mapping[str, Any]) -> str:
    """The assistant text of a ``wire`` response body (``""`` when it has none or is not that shape)."""
    try:
        if wire == "anthropic-messages":
            return "".join(
                str(b.get("text", ""))
                for b in response.get("content") or ()
                if isinstance(b, Mapping) and b.get("type") == "text"
            )
        if wire == "openai-responses":
            return "".join(
                str(p.get("text", ""))
                for item in response.get("output") or ()
                if isinstance(item, Mapping) and item.get("type") == "message"
                for p in item.get("content") or ()
                if isinstance(p, Mapping) and p.get("type") == "output_text"
            )
        content = response["choices"][0]["message"].get("content")
        return content if isinstance(content, str) else ""
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""


class ScriptedProvider:
    """Answers each request with the next canned response, in order.

    ``responses`` are response bodies, or callables ``(request_body) -> response
    body`` for answers that depend on the request; a response that is an exception instance is
    raised instead (e.g. a :class:`ProviderOverflow`). Every request is kept in
    :attr:`requests`. A request past the end raises :class:`ProviderError`
    naming how many responses the script had. ``wire`` is the format the responses are in;
    ``on_text`` gets the whole text of each response as one delta (when it has text).
    """

    PLUGIN_NAME = "scripted"

    def __init__(
        self,
        responses: Iterable[Response | BaseException | Callable[[Mapping[str, Any]], Response]],
        name: str = "scripted",
        *,
        wire: str = "openai-chat",
        model: str = "scripted",
    ):
        self.name = name
        self.wire = wire
        self.model = model
        self._responses = list(responses)
        self.requests: list[Mapping[str, Any]] = []

    @property
    def remaining(self) -> int:
        """Canned responses not yet served."""
        return len(self._responses) - len(self.requests)

    def complete(self, request_body: Mapping[str, Any], *, on_text: Callable[[str], None] | None = None) -> Response:
        i = len(self.requests)
        if i >= len(self._responses):
            raise ProviderError(
                f"{self.name}: request {i + 1} has no scripted response (the script has {len(self._responses)})",
                provider=self.name,
            )
        self.requests.append(request_body)
        answer = self._responses[i]
        if isinstance(answer, BaseException):
            raise answer
        response = answer(request_body) if callable(answer) else answer
        text = response_text(self.wire, response) if on_text is not None else ""
        if text and on_text is not None:
            on_text(text)
        return response
