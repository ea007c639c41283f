"""Built-in plugin: the model providers on the official SDKs, registered like any third-party provider.

* ``openai``: :class:`latch.providers.OpenAIProvider` (Chat Completions, ``OPENAI_API_KEY``);
* ``openai-compatible``: :class:`latch.providers.OpenAICompatibleProvider` (any Chat Completions
  server at a ``base_url``: llama.cpp, Ollama, vLLM, LM Studio);
* ``anthropic``: :class:`latch.providers.AnthropicProvider` (Messages with cache breakpoints,
  ``ANTHROPIC_API_KEY``);
* ``openai-responses``: :class:`latch.providers.OpenAIResponsesProvider` (the Responses API, stateless,
  reasoning items sent back encrypted, ``OPENAI_API_KEY``).

They are registered by name (:class:`~latch.hookspecs.LazyClass`): :mod:`latch.providers` is imported when a
provider class is first needed, and the SDKs when a provider is built, so a command that calls no model imports
neither.
"""

from __future__ import annotations

from ..hookspecs import LazyClass, hookimpl

PROVIDERS = {
    "openai": "OpenAIProvider",
    "openai-compatible": "OpenAICompatibleProvider",
    "anthropic": "AnthropicProvider",
    "openai-responses": "OpenAIResponsesProvider",
}
"""``{PLUGIN_NAME: class name in latch.providers}`` of the built-in providers, in registration order."""


@hookimpl
def latch_register_providers() -> list[LazyClass]:
    """Register the built-in ``openai``, ``openai-compatible``, ``anthropic`` and ``openai-responses`` providers
    through the same hook as plugins."""
    return [LazyClass(name, f"latch.providers:{cls}") for name, cls in PROVIDERS.items()]
