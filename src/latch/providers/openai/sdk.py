"""OpenAI Chat Completions providers on the official ``openai`` SDK (``openai>=3,<4``).

* :class:`OpenAIProvider` (``PLUGIN_NAME = "openai"``): api.openai.com (or ``base_url``), key
  from ``OPENAI_API_KEY`` (or ``api_key_env``);
* :class:`OpenAICompatibleProvider` (``"openai-compatible"``): any server speaking Chat
  Completions (llama.cpp server, Ollama, vLLM, LM Studio) at a required ``base_url`` such as
  ``http://127.0.0.1:8080/v1``; a key only when ``api_key_env`` names one.

Both speak the ``"openai-chat"`` wire: the request body is :func:`latch.providers.to_openai_chat`'s,
sent as ``client.chat.completions.create(stream=True, stream_options={"include_usage": True},
**body)``; the streamed chunks are assembled by :func:`assemble_chat_completion` into the
non-streaming ``chat.completion`` body. Retries (429, 408, 409, 5xx, timeouts, connection errors:
exponential backoff from 0.5 s to 8 s with up to 25 % jitter, ``Retry-After`` /
``retry-after-ms`` honoured up to 120 s) are the SDK's own (``max_retries``); they cover getting the
response, not a stream that breaks after it started.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from .. import _sdk
from ..base import ProviderError, response_text

__all__ = ["OpenAIProvider", "OpenAICompatibleProvider", "assemble_chat_completion"]

NO_KEY = "sk-no-key-required"  # what the SDK sends when a compatible server needs no key (it insists on one)


def assemble_chat_completion(
    chunks: Iterable[Mapping[str, Any]], on_text: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` body of a stream of ``chat.completion.chunk`` dicts.

    Shape: ``{"id", "object": "chat.completion", "created", "model", "choices": [{"index": 0,
    "message": {"role": "assistant", "content": str | None, "tool_calls": [{"id", "type":
    "function", "function": {"name", "arguments"}}] (when any), "reasoning_content": str (when
    streamed)}, "finish_reason"}], "usage": {...} (the final usage chunk, when sent)}``. Only
    choice 0 is kept. Text deltas go to ``on_text(delta)`` as they arrive; tool calls are gathered
    by ``index`` (id and name from the first chunk naming them, argument fragments concatenated).
    """
    head: dict[str, Any] = {}
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: Any = None
    seen = 0
    for chunk in chunks:
        seen += 1
        for k in ("id", "created", "model", "system_fingerprint"):
            if chunk.get(k) is not None and k not in head:
                head[k] = chunk[k]
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                text.append(piece)
                if on_text is not None:
                    on_text(piece)
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                reasoning.append(thought)
            for pos, tc in enumerate(delta.get("tool_calls") or ()):
                index = tc.get("index", pos) if isinstance(tc.get("index", pos), int) else pos
                call = calls.setdefault(
                    index, {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
                )
                if tc.get("id") and not call["id"]:
                    call["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name") and not call["function"]["name"]:
                    call["function"]["name"] = fn["name"]
                if isinstance(fn.get("arguments"), str):
                    call["function"]["arguments"] += fn["arguments"]
    if not seen:  # e.g. a server that ignores ``stream: true`` and answers one JSON body: never an empty turn
        raise ProviderError("the server sent no stream events (does it ignore stream: true? then pass --no-stream)")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    body: dict[str, Any] = {
        "id": head.get("id"),
        "object": "chat.completion",
        "created": head.get("created"),
        "model": head.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if head.get("system_fingerprint") is not None:
        body["system_fingerprint"] = head["system_fingerprint"]
    if usage is not None:
        body["usage"] = usage
    return body


class OpenAIProvider(_sdk.SDKProvider):
    """Chat Completions through ``openai.OpenAI`` (see the module docstring).

    ``model`` is the model id (used when the body has no ``"model"``); ``base_url`` defaults to the
    SDK's (``OPENAI_BASE_URL`` or api.openai.com/v1); the key is read from the environment variable
    ``api_key_env`` (default ``OPENAI_API_KEY``) once, here: missing is :class:`ProviderError`
    naming the variable. ``timeout`` is seconds per request (connect, and each read of the stream);
    ``max_retries`` the SDK's retry budget. ``stream=False`` (constructor only) sends non-streaming
    requests instead (for servers that report usage only then, e.g. llama-cpp-python's), returning
    the server's ``chat.completion`` as is and passing its whole text to ``on_text`` once. The key
    appears in no repr, error or log line.
    """

    PLUGIN_NAME: ClassVar[str] = "openai"
    DESCRIPTION: ClassVar[str] = "OpenAI Chat Completions, streaming, on the openai SDK (key: OPENAI_API_KEY)."
    KEY_ENV: ClassVar[str | None] = "OPENAI_API_KEY"
    KEY_REQUIRED: ClassVar[bool] = True
    STREAM_OPTIONS: ClassVar[Mapping[str, Any]] = {"include_usage": True}
    wire: str = "openai-chat"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 4,
        stream: bool = True,
    ):
        self.name = self.PLUGIN_NAME
        self.stream = stream
        _sdk.check_options(self.name, model, timeout, max_retries)
        self.model, self.base_url, self.timeout, self.max_retries = model, base_url, float(timeout), max_retries
        self.api_key_env = api_key_env or self.KEY_ENV
        self._key = (
            _sdk.api_key_from_env(self.name, self.api_key_env, required=self.KEY_REQUIRED or api_key_env is not None)
            if self.api_key_env
            else _sdk.Secret(None)
        )
        self.limits = _sdk.ResponseLimits()  # deadline and idle timeout of every response
        import openai

        self._sdk = openai
        self._client = openai.OpenAI(
            api_key=self._key.value or NO_KEY,
            base_url=base_url,
            timeout=self.timeout,
            max_retries=max_retries,
            http_client=openai.DefaultHttpxClient(transport=self.limits.transport()),
        )

    def complete(
        self, request_body: Mapping[str, Any], *, on_text: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send ``request_body`` (a chat-completions body) streaming; return the assembled
        ``chat.completion`` body (:func:`assemble_chat_completion`), calling ``on_text(delta)`` per text delta.

        :class:`ProviderError` (one line: provider, HTTP status, the server's message) when the
        request fails after the retries; :class:`ProviderOverflow` for context length exceeded.
        """
        create = self._client.chat.completions.create
        fixed: dict[str, Any] = {"stream": self.stream}
        if self.STREAM_OPTIONS and self.stream:
            fixed["stream_options"] = dict(self.STREAM_OPTIONS)
        if "model" not in request_body:
            fixed["model"] = self.model
        kwargs = _sdk.create_kwargs(create, request_body, **fixed)
        self.limits.begin()
        try:
            if not self.stream:
                response: dict[str, Any] = create(**kwargs).to_dict()
                text = response_text(self.wire, response)
                if text and on_text is not None:
                    on_text(text)
                return response
            with create(**kwargs) as stream:
                return assemble_chat_completion((chunk.to_dict() for chunk in stream), on_text)
        except _sdk.ResponseLimitExceeded as exc:
            error = ProviderError(f"{self.name}: {exc}", provider=self.name)
        except self._sdk.APIError as exc:
            error = _sdk.sdk_error(self.name, exc, self._key, max_retries=self.max_retries)
        except json.JSONDecodeError as exc:
            what = "stream" if self.stream else "response"
            error = ProviderError(f"{self.name}: malformed {what} from the server: {exc}", provider=self.name)
        except ProviderError as exc:
            error = ProviderError(f"{self.name}: {exc}", provider=self.name)
        finally:
            self.limits.end()
        raise error  # outside the handler: no __context__ holding the SDK's request (and its headers)


class OpenAICompatibleProvider(OpenAIProvider):
    """Chat Completions against any compatible server at ``base_url`` (required: :class:`ProviderError`
    without it), e.g. ``http://127.0.0.1:8080/v1`` for a llama.cpp server. No key unless
    ``api_key_env`` names a variable (then it must be set); ``OPENAI_API_KEY`` is never sent to
    such a server."""

    PLUGIN_NAME: ClassVar[str] = "openai-compatible"
    DESCRIPTION: ClassVar[str] = (
        "Any OpenAI-compatible Chat Completions server (llama.cpp, Ollama, vLLM, LM Studio) "
        "at --base-url; key only from --api-key-env."
    )
    KEY_ENV: ClassVar[str | None] = None
    KEY_REQUIRED: ClassVar[bool] = False

    def complete(
        self, request_body: Mapping[str, Any], *, on_text: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """As :meth:`OpenAIProvider.complete`, except that an assistant message with ``content: null`` (a
        tool-call-only turn, valid for OpenAI) is sent with ``content: ""``: llama-cpp-python's server rejects
        null content with HTTP 500, and every compatible server accepts the empty string."""
        messages = request_body.get("messages")
        if isinstance(messages, list) and any(
            isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("content") is None for m in messages
        ):
            fixed = [
                dict(m, content="")
                if isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("content") is None
                else m
                for m in messages
            ]
            request_body = {**request_body, "messages": fixed}
        return super().complete(request_body, on_text=on_text)

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 4,
        stream: bool = True,
    ):
        if not isinstance(base_url, str) or not base_url.strip():
            raise ProviderError(
                f"{self.PLUGIN_NAME}: a base_url is required (e.g. http://127.0.0.1:8080/v1)", provider=self.PLUGIN_NAME
            )
        super().__init__(
            model, base_url=base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries, stream=stream
        )
