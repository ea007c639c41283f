"""Providers: the protocol, wire formats and the canonical request serialization.

* :class:`Provider` / :class:`ScriptedProvider`, :class:`ProviderError` /
  :class:`ProviderOverflow` (:mod:`.base`);
* :mod:`.openai`: :class:`OpenAIProvider` / :class:`OpenAICompatibleProvider` (chat completions) and
  :class:`OpenAIResponsesProvider` on the official SDK, :func:`to_openai_chat` / :func:`validate_openai_chat`
  (a :class:`~latch.port.ContextView` as a chat-completions request body and its rule checker) and
  :func:`to_responses` / :func:`validate_responses` (the same for the Responses API);
* :mod:`.anthropic`: :class:`AnthropicProvider` on the official SDK (with :func:`anthropic_request`: the body
  it sends), :func:`to_anthropic_messages` / :func:`validate_anthropic_messages` and
  :func:`add_cache_breakpoints` for the Messages API;
* :class:`WireCheck`: the three bodies' violations for each view of a run, checked as far as they are new
  (:mod:`.wire_check`);
* :mod:`.render`: a view as any wire format's request body (with ``tool_choice``); :mod:`.parse`: any wire's
  response body as an assistant message and its usage;
* :func:`canonical_request_bytes` / :func:`common_prefix_tokens`: the
  provider-neutral bytes cacheability is measured on (:mod:`.canonical`).

The network providers import their SDK when one is built; they are registered by
:mod:`latch.default_plugins.providers`.
"""

from __future__ import annotations

from .anthropic import (
    AnthropicProvider,
    add_cache_breakpoints,
    anthropic_request,
    to_anthropic_messages,
    validate_anthropic_messages,
)
from .base import Provider, ProviderError, ProviderOverflow, ScriptedProvider
from .canonical import canonical_request_bytes, common_prefix_bytes, common_prefix_tokens
from .openai import (
    OpenAICompatibleProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    to_openai_chat,
    to_responses,
    validate_openai_chat,
    validate_responses,
)
from .wire_check import WireCheck

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
    "WireCheck",
    "canonical_request_bytes",
    "common_prefix_bytes",
    "common_prefix_tokens",
]
