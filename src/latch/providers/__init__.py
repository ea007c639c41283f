"""Providers: the protocol, wire formats and the canonical request serialization.

* :class:`Provider` / :class:`ScriptedProvider`, :class:`ProviderError` /
  :class:`ProviderOverflow` (:mod:`.base`);
* :class:`OpenAIProvider` / :class:`OpenAICompatibleProvider` (:mod:`.openai_sdk`) and
  :class:`AnthropicProvider` (:mod:`.anthropic_sdk`, with :func:`anthropic_request`: the body it sends): the
  network providers on the official SDKs
  (imported when a provider is built), registered by :mod:`latch.default_plugins.providers`;
* :func:`to_openai_chat` / :func:`validate_openai_chat`: a
  :class:`~latch.port.ContextView` as a chat-completions request body and
  its rule checker (:mod:`.openai_chat`);
* :func:`to_anthropic_messages` / :func:`validate_anthropic_messages`: the same
  for the Messages API, and :func:`add_cache_breakpoints` (:mod:`.anthropic_messages`);
* :class:`OpenAIResponsesProvider` (:mod:`.responses_sdk`) and :func:`to_responses` /
  :func:`validate_responses`: the same for the Responses API (:mod:`.openai_responses`);
* :func:`canonical_request_bytes` / :func:`common_prefix_tokens`: the
  provider-neutral bytes cacheability is measured on (:mod:`.canonical`).
"""

from __future__ import annotations

from .anthropic_messages import add_cache_breakpoints, to_anthropic_messages, validate_anthropic_messages
from .anthropic_sdk import AnthropicProvider, anthropic_request
from .base import Provider, ProviderError, ProviderOverflow, ScriptedProvider
from .canonical import canonical_request_bytes, common_prefix_bytes, common_prefix_tokens
from .openai_chat import to_openai_chat, validate_openai_chat
from .openai_responses import to_responses, validate_responses
from .openai_sdk import OpenAICompatibleProvider, OpenAIProvider
from .responses_sdk import OpenAIResponsesProvider

__all__ = [
    "Provider",
    "ProviderError",
    "ProviderOverflow",
    "ScriptedProvider",
    "OpenAIProvider",
    "OpenAICompatibleProvider",
    "AnthropicProvider",
    "OpenAIResponsesProvider",
    "add_cache_breakpoints",
    "anthropic_request",
    "to_openai_chat",
    "validate_openai_chat",
    "to_anthropic_messages",
    "validate_anthropic_messages",
    "to_responses",
    "validate_responses",
    "canonical_request_bytes",
    "common_prefix_bytes",
    "common_prefix_tokens",
]
