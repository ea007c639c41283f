"""Built-in plugin: the model providers on the official SDKs, registered like any third-party provider.

* ``openai``: :class:`latch.providers.OpenAIProvider` (Chat Completions, ``OPENAI_API_KEY``);
* ``openai-compatible``: :class:`latch.providers.OpenAICompatibleProvider` (any Chat Completions
  server at a ``base_url``: llama.cpp, Ollama, vLLM, LM Studio);
* ``anthropic``: :class:`latch.providers.AnthropicProvider` (Messages with cache breakpoints,
  ``ANTHROPIC_API_KEY``);
* ``openai-responses``: :class:`latch.providers.OpenAIResponsesProvider` (the Responses API, stateless,
  reasoning items sent back encrypted, ``OPENAI_API_KEY``).

The SDKs are imported when a provider is built, not when this plugin registers.
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..providers import AnthropicProvider, OpenAICompatibleProvider, OpenAIProvider, OpenAIResponsesProvider


@hookimpl
def latch_register_providers() -> list[type]:
    """Register the built-in ``openai``, ``openai-compatible``, ``anthropic`` and ``openai-responses`` providers
    through the same hook as plugins."""
    return [OpenAIProvider, OpenAICompatibleProvider, AnthropicProvider, OpenAIResponsesProvider]
