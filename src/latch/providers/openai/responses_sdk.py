"""The OpenAI Responses API provider on the official ``openai`` SDK (``openai>=3,<4``).

:class:`OpenAIResponsesProvider` (``PLUGIN_NAME = "openai-responses"``, wire ``"openai-responses"``): the request
body is :func:`latch.providers.to_responses`'s (``store: false``, ``include: ["reasoning.encrypted_content"]``,
the whole context as ``input``, never ``previous_response_id``), sent as ``client.responses.create(stream=True,
**body)``; the server-sent events are assembled by :func:`assemble_response` into the non-streaming ``response``
object. Retries are the SDK's (``max_retries``: 408, 409, 429, 5xx, timeouts, connection errors); an error
inside the stream (an ``error`` event, ``response.failed``) is not retried.

Reasoning items: the provider keeps the reasoning items (with their ``encrypted_content``) of each response that
called functions, keyed by the call ids, and puts them back in the next requests' ``input`` before those calls
(:func:`latch.providers.openai.responses.insert_reasoning`), as the API requires of a client that manages the
context itself. They are held in memory for the calls still in the request, not in the event log: a resumed
session sends its earlier calls without them, which the API accepts (the calls carry no item ``id``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from .. import _sdk
from ..base import ProviderError, ProviderOverflow
from .responses import insert_reasoning

__all__ = ["OpenAIResponsesProvider", "assemble_response"]

_FINAL = ("response.completed", "response.incomplete")
_STARTED = ("response.created", "response.in_progress", "response.queued")


def _stream_error(provider: str, error: Mapping[str, Any]) -> ProviderError:
    """The error an ``error`` event or a ``response.failed`` event's ``response.error`` stands for."""
    message = error.get("message") if isinstance(error.get("message"), str) else None
    message = " ".join((message or f"the response failed ({error.get('code') or 'no code'})").split())
    text = f"{provider}: error in the response stream: {message}"
    if _sdk.is_overflow(message, error):
        prompt, limit = _sdk.overflow_numbers(message, error)
        return ProviderOverflow(text, provider=provider, prompt_tokens=prompt, limit_tokens=limit)
    return ProviderError(text, provider=provider)


def assemble_response(
    events: Iterable[Mapping[str, Any]],
    on_text: Callable[[str], None] | None = None,
    *,
    provider: str = "openai-responses",
) -> dict[str, Any]:
    """The non-streaming ``response`` object of a stream of Responses event dicts.

    Events: ``response.created`` (the response, ``status: "in_progress"``, empty ``output``), per output item
    ``response.output_item.added`` / its deltas (``response.output_text.delta``,
    ``response.function_call_arguments.delta``, reasoning summary deltas) / ``response.output_item.done`` (the
    finished item: authoritative), then ``response.completed`` or ``response.incomplete`` (the whole response with
    its ``output`` and ``usage``: ``{"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
    "output_tokens_details": {"reasoning_tokens"}, "total_tokens"}``). Shape: the final event's response, its
    ``output`` being the items of the stream in ``output_index`` order when the final event listed none. Text
    deltas go to ``on_text(delta)`` as they arrive.

    :class:`ProviderOverflow` for an ``error`` / ``response.failed`` event whose code or message says the context
    length was exceeded (``context_length_exceeded``); :class:`ProviderError` for any other such event, or a stream
    that ends before its final event.
    """
    items: dict[int, dict[str, Any]] = {}
    final: dict[str, Any] | None = None
    started = False
    for event in events:
        kind = event.get("type")
        index = event.get("output_index")
        if kind in _STARTED:
            started = True
        elif kind == "error":
            raise _stream_error(provider, event)
        elif kind == "response.failed":
            failed = event.get("response")
            error = failed.get("error") if isinstance(failed, Mapping) else None
            raise _stream_error(provider, error if isinstance(error, Mapping) else {})
        elif kind in _FINAL:
            final = dict(event.get("response") or {})
        elif not isinstance(index, int):
            continue
        elif kind in ("response.output_item.added", "response.output_item.done"):
            if isinstance(event.get("item"), Mapping):
                items[index] = dict(event["item"])
        elif kind == "response.output_text.delta":
            delta = event.get("delta")
            if isinstance(delta, str) and delta:
                item = items.setdefault(index, {"type": "message", "role": "assistant", "content": []})
                parts = item.setdefault("content", [])
                at = event.get("content_index", 0)
                while len(parts) <= at:
                    parts.append({"type": "output_text", "text": "", "annotations": []})
                parts[at] = {**parts[at], "text": str(parts[at].get("text", "")) + delta}
                if on_text is not None:
                    on_text(delta)
        elif kind == "response.function_call_arguments.delta":
            delta = event.get("delta")
            if isinstance(delta, str) and index in items:
                items[index]["arguments"] = str(items[index].get("arguments") or "") + delta
    if final is None:
        what = "response.created" if not started else "response.completed"
        raise ProviderError(f"{provider}: the stream ended before {what}", provider=provider)
    if not final.get("output"):
        final["output"] = [items[i] for i in sorted(items)]
    return final


def _reasoning_by_call(output: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """Call id -> the reasoning items (as input items) that came before that call in one response's output."""
    out: dict[str, list[dict[str, Any]]] = {}
    reasoning: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "reasoning" and isinstance(item.get("encrypted_content"), str):
            kept = {k: item[k] for k in ("type", "id", "summary", "encrypted_content") if k in item}
            kept.setdefault("summary", [])
            reasoning.append(kept)
        elif item.get("type") == "function_call" and isinstance(item.get("call_id"), str) and reasoning:
            out[item["call_id"]] = reasoning
    return out


class OpenAIResponsesProvider(_sdk.SDKProvider):
    """The Responses API through ``openai.OpenAI`` (see the module docstring).

    ``model`` is the model id (used when the body has no ``"model"``); ``base_url`` defaults to the SDK's
    (``OPENAI_BASE_URL`` or api.openai.com/v1); the key is read from ``api_key_env`` (default ``OPENAI_API_KEY``)
    once, here: missing is :class:`ProviderError` naming the variable. ``timeout`` is seconds per request;
    ``max_retries`` the SDK's retry budget. The key appears in no repr, error or log line.
    """

    PLUGIN_NAME: ClassVar[str] = "openai-responses"
    DESCRIPTION: ClassVar[str] = (
        "OpenAI Responses API, streaming, stateless (store false, reasoning items sent "
        "back encrypted), on the openai SDK (key: OPENAI_API_KEY)."
    )
    KEY_ENV: ClassVar[str] = "OPENAI_API_KEY"
    wire: str = "openai-responses"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 4,
    ):
        self.name = self.PLUGIN_NAME
        _sdk.check_options(self.name, model, timeout, max_retries)
        self.model, self.base_url, self.timeout, self.max_retries = model, base_url, float(timeout), max_retries
        self.api_key_env = api_key_env or self.KEY_ENV
        self._key = _sdk.api_key_from_env(self.name, self.api_key_env, required=True)
        self._reasoning: dict[str, list[dict[str, Any]]] = {}
        self.limits = _sdk.ResponseLimits()  # deadline and idle timeout of every response
        import openai

        self._sdk = openai
        self._client = openai.OpenAI(
            api_key=self._key.value,
            base_url=base_url,
            timeout=self.timeout,
            max_retries=max_retries,
            http_client=openai.DefaultHttpxClient(transport=self.limits.transport()),
        )

    def request(self, request_body: Mapping[str, Any]) -> dict[str, Any]:
        """The body as sent (before ``stream``): ``model`` filled in when absent, and the reasoning items this
        provider holds put back before the calls they led to (:func:`~.responses.insert_reasoning`).
        ``request_body`` is not modified."""
        body = dict(request_body)
        body.setdefault("model", self.model)
        items = body.get("input")
        if isinstance(items, list) and self._reasoning:
            body["input"] = insert_reasoning(items, self._reasoning)
        return body

    def _remember(self, body: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        """Keep the reasoning items of ``response``'s calls, and only those of calls still in the request sent."""
        items = body.get("input")
        live = {i.get("call_id") for i in items if isinstance(i, Mapping)} if isinstance(items, list) else set()
        self._reasoning = {cid: r for cid, r in self._reasoning.items() if cid in live}
        output = response.get("output")
        if isinstance(output, list):
            self._reasoning.update(_reasoning_by_call(output))

    def complete(
        self, request_body: Mapping[str, Any], *, on_text: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Send ``request_body`` (a Responses body; see :meth:`request`) streaming; return the assembled
        ``response`` object (:func:`assemble_response`), calling ``on_text(delta)`` per text delta.

        :class:`ProviderError` (one line: provider, HTTP status, the server's message) when the request fails
        after the retries; :class:`ProviderOverflow` for context length exceeded (HTTP 400 or in the stream).
        """
        create = self._client.responses.create
        body = self.request(request_body)
        kwargs = _sdk.create_kwargs(create, body, stream=True)
        self.limits.begin()
        try:
            with create(**kwargs) as stream:
                response = assemble_response((event.to_dict() for event in stream), on_text, provider=self.name)
        except _sdk.ResponseLimitExceeded as exc:
            error = ProviderError(f"{self.name}: {exc}", provider=self.name)
        except self._sdk.APIError as exc:
            error = _sdk.sdk_error(self.name, exc, self._key, max_retries=self.max_retries)
        except json.JSONDecodeError as exc:
            error = ProviderError(f"{self.name}: malformed stream from the server: {exc}", provider=self.name)
        else:
            self._remember(body, response)
            return response
        finally:
            self.limits.end()
        raise error  # outside the handler: no __context__ holding the SDK's request (and its headers)
