"""Anthropic's Messages wire format and the provider that sends it on the official ``anthropic`` SDK.

* :func:`to_anthropic_messages` / :func:`validate_anthropic_messages`: a :class:`~latch.port.ContextView` as a
  Messages request body and its rule checker, and :func:`add_cache_breakpoints` (:mod:`.messages`);
* :class:`AnthropicProvider` (:mod:`.sdk`, with :func:`anthropic_request`: the body it sends): the network
  provider (the SDK is imported when a provider is built).
"""

from __future__ import annotations

from .messages import add_cache_breakpoints, to_anthropic_messages, validate_anthropic_messages
from .sdk import AnthropicProvider, anthropic_request

__all__ = [
    "to_anthropic_messages",
    "validate_anthropic_messages",
    "add_cache_breakpoints",
    "AnthropicProvider",
    "anthropic_request",
]
