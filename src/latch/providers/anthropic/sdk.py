"""The Anthropic Messages provider on the official ``anthropic`` SDK (``anthropic>=2,<3``).

:class:`AnthropicProvider` (``PLUGIN_NAME = "anthropic"``, wire ``"anthropic-messages"``): the
request body is :func:`latch.providers.to_anthropic_messages`'s, with cache breakpoints added by
:func:`latch.providers.add_cache_breakpoints` (end of the stable prefix, end of the growing
conversation), sent as ``client.messages.create(stream=True, **body)``; the server-sent events are
assembled by :func:`assemble_message` into the non-streaming Messages ``message`` body. Retries
are the SDK's (``max_retries``: 408, 409, 429, 5xx and 529 overloaded, timeouts and connection
errors, exponential backoff 0.5 s to 8 s with jitter, ``Retry-After`` honoured); an ``error``
event inside the stream is not retried.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from .. import _sdk
from ..base import ProviderError
from .messages import add_cache_breakpoints

__all__ = ["AnthropicProvider", "assemble_message", "anthropic_request", "DEFAULT_MAX_TOKENS"]

DEFAULT_MAX_TOKENS = 8192
"""``max_tokens`` sent when the body has none (the Messages API requires it)."""


def assemble_message(
    events: Iterable[Mapping[str, Any]], on_text: Callable[[str], None] | None = None, *, provider: str = "anthropic"
) -> dict[str, Any]:
    """The non-streaming Messages ``message`` body of a stream of event dicts.

    Events: ``message_start`` (the message with empty content and the input usage), then per block
    ``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``,
    ``thinking_delta``, ``signature_delta``, ``citations_delta``) / ``content_block_stop``, then
    ``message_delta`` (``stop_reason``, ``stop_sequence``; its ``usage`` fields overwrite the
    message's: ``output_tokens`` and, when sent, the input and cache counts) and ``message_stop``.
    Shape: ``{"id", "type": "message", "role": "assistant", "model", "content": [{"type": "text",
    "text"} | {"type": "tool_use", "id", "name", "input": {...}} | {"type": "thinking", ...}],
    "stop_reason", "stop_sequence", "usage": {"input_tokens", "output_tokens",
    "cache_creation_input_tokens", "cache_read_input_tokens", ...}}``. Text deltas go to
    ``on_text(delta)`` as they arrive. :class:`ProviderError` for a tool input that is not JSON or
    a stream without ``message_start`` / ``message_stop``.
    """
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    stopped = False
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            message = dict(event.get("message") or {})
            message["content"] = []
            message["usage"] = dict(message.get("usage") or {})
        elif message is None:
            raise ProviderError(f"{provider}: malformed stream: {kind!r} event before message_start", provider=provider)
        elif kind == "content_block_start":
            index = event.get("index", len(blocks))
            block = dict(event.get("content_block") or {})
            blocks[index] = block
            if block.get("type") in ("tool_use", "server_tool_use"):
                partial[index] = []
        elif kind == "content_block_delta":
            index = event.get("index", 0)
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                piece = str(delta.get("text", ""))
                block["text"] = block.get("text", "") + piece
                if piece and on_text is not None:
                    on_text(piece)
            elif dtype == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            index = event.get("index", 0)
            raw = "".join(partial.pop(index, ()))
            if index in blocks and raw.strip():
                try:
                    blocks[index]["input"] = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise ProviderError(
                        f"{provider}: content block {index} ({blocks[index].get('name')}): tool input "
                        f"is not JSON: {exc}",
                        provider=provider,
                    ) from None
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            for k in ("stop_reason", "stop_sequence"):
                if k in delta:
                    message[k] = delta[k]
            for k, v in (event.get("usage") or {}).items():
                if v is not None:
                    message["usage"][k] = v
        elif kind == "message_stop":
            stopped = True
    if message is None or not stopped:
        raise ProviderError(
            f"{provider}: the stream ended before {'message_start' if message is None else 'message_stop'}",
            provider=provider,
        )
    for index, raw_parts in partial.items():  # a tool block whose stop never came
        raw = "".join(raw_parts)
        if raw.strip():
            try:
                blocks[index]["input"] = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ProviderError(
                    f"{provider}: content block {index}: tool input is not JSON: {exc}", provider=provider
                ) from None
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def anthropic_request(request_body: Mapping[str, Any], model: str, *, cache_breakpoints: bool = True) -> dict[str, Any]:
    """The Messages body :class:`AnthropicProvider` sends for ``request_body`` (before ``stream``): a copy with
    ``cache_control`` breakpoints (:func:`latch.providers.add_cache_breakpoints`) unless ``cache_breakpoints`` is
    false, ``model`` (this one) and ``max_tokens`` (:data:`DEFAULT_MAX_TOKENS`) filled in when absent.
    ``request_body`` is not modified."""
    body = add_cache_breakpoints(request_body) if cache_breakpoints else dict(request_body)
    body.setdefault("model", model)
    body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    return body


class AnthropicProvider(_sdk.SDKProvider):
    """Messages API through ``anthropic.Anthropic`` (see the module docstring).

    ``model`` is the model id (used when the body has no ``"model"``); ``base_url`` defaults to the
    SDK's (``ANTHROPIC_BASE_URL`` or api.anthropic.com); the key is read from ``api_key_env``
    (default ``ANTHROPIC_API_KEY``) once, here: missing is :class:`ProviderError` naming the
    variable. ``timeout`` is seconds per request; ``max_retries`` the SDK's retry budget;
    ``cache_breakpoints`` (default on) adds ``cache_control`` breakpoints
    (:func:`latch.providers.add_cache_breakpoints`). The key appears in no repr, error or log line.
    """

    PLUGIN_NAME: ClassVar[str] = "anthropic"
    DESCRIPTION: ClassVar[str] = (
        "Anthropic Messages, streaming, with cache breakpoints, on the anthropic SDK (key: ANTHROPIC_API_KEY)."
    )
    KEY_ENV: ClassVar[str] = "ANTHROPIC_API_KEY"
    wire: str = "anthropic-messages"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 4,
        cache_breakpoints: bool = True,
    ):
        self.name = self.PLUGIN_NAME
        _sdk.check_options(self.name, model, timeout, max_retries)
        self.model, self.base_url, self.timeout, self.max_retries = model, base_url, float(timeout), max_retries
        self.cache_breakpoints = cache_breakpoints
        self.api_key_env = api_key_env or self.KEY_ENV
        self._key = _sdk.api_key_from_env(self.name, self.api_key_env, required=True)
        self.limits = _sdk.ResponseLimits()  # deadline and idle timeout of every response
        import anthropic

        self._sdk = anthropic
        self._client = anthropic.Anthropic(
            api_key=self._key.value,
            base_url=base_url,
            timeout=self.timeout,
            max_retries=max_retries,
            http_client=anthropic.DefaultHttpxClient(transport=self.limits.transport()),
        )

    def request(self, request_body: Mapping[str, Any]) -> dict[str, Any]:
        """The body as sent (before ``stream``): with cache breakpoints when enabled, ``model`` and
        ``max_tokens`` (:data:`DEFAULT_MAX_TOKENS`) filled in when absent."""
        return anthropic_request(request_body, self.model, cache_breakpoints=self.cache_breakpoints)

    def complete(
        self, request_body: Mapping[str, Any], *, on_text: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send ``request_body`` (a Messages body; see :meth:`request`) streaming; return the assembled
        ``message`` body (:func:`assemble_message`), calling ``on_text(delta)`` per text delta.

        :class:`ProviderError` (one line: provider, HTTP status, the server's message) when the
        request fails after the retries; :class:`ProviderOverflow` for "prompt is too long".
        """
        create = self._client.messages.create
        kwargs = _sdk.create_kwargs(create, self.request(request_body), stream=True)
        self.limits.begin()
        try:
            with create(**kwargs) as stream:
                return assemble_message((event.to_dict() for event in stream), on_text, provider=self.name)
        except _sdk.ResponseLimitExceeded as exc:
            error = ProviderError(f"{self.name}: {exc}", provider=self.name)
        except self._sdk.APIError as exc:
            error = _sdk.sdk_error(self.name, exc, self._key, max_retries=self.max_retries)
        except json.JSONDecodeError as exc:
            error = ProviderError(f"{self.name}: malformed stream from the server: {exc}", provider=self.name)
        finally:
            self.limits.end()
        raise error  # outside the handler: no __context__ holding the SDK's request (and its headers)
