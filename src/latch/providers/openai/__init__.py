"""OpenAI's two wire formats and the providers that send them on the official ``openai`` SDK.

* :func:`to_openai_chat` / :func:`validate_openai_chat`: a :class:`~latch.port.ContextView` as a
  chat-completions request body and its rule checker (:mod:`.chat`);
* :func:`to_responses` / :func:`validate_responses`: the same for the Responses API (:mod:`.responses`);
* :class:`OpenAIProvider` / :class:`OpenAICompatibleProvider` (:mod:`.sdk`, chat completions) and
  :class:`OpenAIResponsesProvider` (:mod:`.responses_sdk`): the network providers (the SDK is imported when
  a provider is built).
"""

from __future__ import annotations

from .chat import to_openai_chat, validate_openai_chat
from .responses import to_responses, validate_responses
from .responses_sdk import OpenAIResponsesProvider
from .sdk import OpenAICompatibleProvider, OpenAIProvider

__all__ = [
    "to_openai_chat",
    "validate_openai_chat",
    "to_responses",
    "validate_responses",
    "OpenAIProvider",
    "OpenAICompatibleProvider",
    "OpenAIResponsesProvider",
]
