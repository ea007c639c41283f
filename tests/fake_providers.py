"""Loopback fake model servers speaking the real OpenAI Chat Completions, OpenAI Responses and Anthropic
Messages wire formats (streaming SSE), for driving the real SDKs in tests.

Usage::

    from fake_providers import Reply, ToolUse, serve_openai, openai_error

    with serve_openai([Reply("hello", usage={"prompt_tokens": 10, "completion_tokens": 2}),
                       lambda body: Reply(f"{len(body['messages'])} messages")]) as server:
        provider = OpenAICompatibleProvider("m", base_url=server.base_url)
        provider.complete({"messages": [...]})
        server.requests[0].body, server.requests[0].headers["authorization"], server.remaining

A script is a list with one entry per HTTP request, in order: a :class:`Reply` (streamed answer), a
:class:`Fail` (an error status with the provider's real error JSON: see :func:`openai_error`,
:func:`anthropic_error`, :func:`openai_overflow`, :func:`llamacpp_overflow`,
:func:`anthropic_overflow`, :func:`rate_limited`), or a callable ``(request_body) -> Reply | Fail``.
Every request (retries included) is recorded in :attr:`FakeServer.requests` before it is answered;
a request past the end of the script gets HTTP 400 naming how many entries the script had (400:
the SDKs do not retry it). The server is Starlette on uvicorn in a thread on 127.0.0.1, port 0.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

__all__ = [
    "Reply",
    "ToolUse",
    "Fail",
    "Recorded",
    "FakeServer",
    "serve_openai",
    "serve_anthropic",
    "serve_responses",
    "openai_error",
    "anthropic_error",
    "openai_overflow",
    "llamacpp_overflow",
    "anthropic_overflow",
    "responses_overflow",
    "rate_limited",
    "server_error",
]


@dataclass(frozen=True)
class ToolUse:
    """One tool call of a reply: ``arguments`` is the JSON text, streamed in ``chunk``-character fragments."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True)
class Reply:
    """A streamed answer: ``text`` in ``chunk``-character deltas, then the ``tool_calls``.

    ``usage`` is in the wire's own shape: OpenAI ``{"prompt_tokens", "completion_tokens",
    "prompt_tokens_details": {"cached_tokens"}}`` (sent in the final usage chunk when the request
    asked ``stream_options.include_usage``); Anthropic ``{"input_tokens", "output_tokens",
    "cache_creation_input_tokens", "cache_read_input_tokens"}`` (input and cache counts in
    ``message_start``, ``output_tokens`` in ``message_delta``). ``delay`` (seconds) passes before
    the response starts (timeouts). ``stop`` overrides the finish / stop reason. ``stream_error``
    (the provider's error object, e.g. ``{"type": "overloaded_error", "message": "Overloaded"}``)
    ends the stream after the content with an error event (HTTP status stays 200).

    Responses API: ``usage`` is ``{"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
    "output_tokens_details": {"reasoning_tokens"}}``; ``reasoning`` becomes a reasoning item (its summary text) at
    the start of the output, whose ``encrypted_content`` is ``encrypted_reasoning`` when the request's ``include``
    asks for ``reasoning.encrypted_content`` (else ``None``, as the API does); ``stream_error`` ends the stream
    with ``response.failed`` carrying it as ``response.error`` (``{"code", "message"}``).

    A stream that does not end: ``stall`` (seconds) passes, with nothing sent, after the first two events (a stream
    gone idle); ``trickle`` (seconds) sends the second event again every ``trickle`` seconds, forever, after the
    first two (a stream that never goes idle and never ends).
    """

    text: str = ""
    tool_calls: Sequence[ToolUse] = ()
    usage: Mapping[str, Any] | None = None
    chunk: int = 4
    model: str | None = None
    delay: float = 0.0
    stop: str | None = None
    reasoning: str = ""
    stream_error: Mapping[str, Any] | None = None
    encrypted_reasoning: str = ""
    stall: float = 0.0
    trickle: float = 0.0


@dataclass(frozen=True)
class Fail:
    """An error response: ``status``, the JSON ``body`` and extra ``headers``."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    """One request the server received: ``path``, ``headers`` (lower-case names) and the JSON ``body``."""

    path: str
    headers: Mapping[str, str]
    body: Any


@dataclass
class FakeServer:
    """A running fake server: ``base_url`` to give the SDK, ``requests`` received (in order)."""

    base_url: str
    requests: list[Recorded]
    script: list[Any]

    @property
    def remaining(self) -> int:
        """Script entries not yet used."""
        return max(0, len(self.script) - len(self.requests))

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]


# ------------------------------------------------------------------------ error bodies (real shapes)
def openai_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Fail:
    """OpenAI's error: ``{"error": {"message", "type", "param", "code"}}``."""
    return Fail(
        status, {"error": {"message": message, "type": type, "param": param, "code": code}}, dict(headers or {})
    )


def anthropic_error(status: int, type: str, message: str, *, headers: Mapping[str, str] | None = None) -> Fail:
    """Anthropic's error: ``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    return Fail(
        status,
        {"type": "error", "error": {"type": type, "message": message}, "request_id": "req_fake"},
        dict(headers or {}),
    )


def openai_overflow(limit: int, prompt: int) -> Fail:
    """OpenAI's context-length-exceeded 400 (code ``context_length_exceeded``)."""
    return openai_error(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
        param="messages",
    )


def llamacpp_overflow(n_prompt: int, n_ctx: int) -> Fail:
    """llama.cpp server's 400 for a prompt over ``n_ctx`` (type ``exceed_context_size_error``)."""
    return Fail(
        400,
        {
            "error": {
                "code": 400,
                "message": f"request ({n_prompt} tokens) exceeds the available context "
                f"size ({n_ctx} tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": n_prompt,
                "n_ctx": n_ctx,
            }
        },
    )


def anthropic_overflow(prompt: int, limit: int) -> Fail:
    """Anthropic's 400 ``prompt is too long: P tokens > N maximum``."""
    return anthropic_error(400, "invalid_request_error", f"prompt is too long: {prompt} tokens > {limit} maximum")


def responses_overflow() -> Fail:
    """The Responses API's context-length-exceeded 400 (code ``context_length_exceeded``, no numbers)."""
    return openai_error(
        400,
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        code="context_length_exceeded",
        param="input",
    )


def rate_limited(wire: str = "openai", retry_after: str | None = "1") -> Fail:
    """A 429 in the wire's error shape, with ``Retry-After`` (seconds) unless ``None``."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    if wire == "anthropic":
        return anthropic_error(
            429, "rate_limit_error", "Number of request tokens has exceeded your rate limit.", headers=headers
        )
    return openai_error(
        429, "Rate limit reached for requests", type="requests", code="rate_limit_exceeded", headers=headers
    )


def server_error(wire: str = "openai", status: int = 500) -> Fail:
    """A 5xx in the wire's error shape (Anthropic: ``api_error``, or ``overloaded_error`` for 529)."""
    if wire == "anthropic":
        kind = "overloaded_error" if status == 529 else "api_error"
        return anthropic_error(status, kind, "Overloaded" if status == 529 else "Internal server error")
    return openai_error(
        status, "The server had an error while processing your request. Sorry about that!", type="server_error"
    )


# ------------------------------------------------------------------------ streams
def _pieces(text: str, n: int) -> list[str]:
    n = max(1, n)
    return [text[i : i + n] for i in range(0, len(text), n)]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data) if not isinstance(data, str) else data}\n\n".encode()


def openai_events(reply: Reply, body: Mapping[str, Any]) -> list[bytes]:
    """The ``chat.completion.chunk`` SSE stream of ``reply`` (ending ``data: [DONE]``)."""
    model = reply.model or body.get("model") or "fake-model"
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"reasoning_content": p}) for p in _pieces(reply.reasoning, reply.chunk)] if reply.reasoning else []
    out += [chunk({"content": p}) for p in _pieces(reply.text, reply.chunk)]
    for i, call in enumerate(reply.tool_calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in _pieces(call.arguments, reply.chunk)
        ]
    if reply.stream_error is not None:
        return out + [_sse({"error": dict(reply.stream_error)})]
    out.append(chunk({}, reply.stop or ("tool_calls" if reply.tool_calls else "stop")))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = dict(reply.usage or {"prompt_tokens": 0, "completion_tokens": 0})
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        out.append(_sse({**base, "choices": [], "usage": usage}))
    out.append(_sse("[DONE]"))
    return out


def anthropic_events(reply: Reply, body: Mapping[str, Any]) -> list[bytes]:
    """The Messages SSE stream of ``reply``: message_start, ping, content blocks (text_delta,
    input_json_delta), message_delta with usage, message_stop."""
    model = reply.model or body.get("model") or "claude-fake"
    usage = dict(reply.usage or {"input_tokens": 0, "output_tokens": 0})
    start_usage = {
        "input_tokens": usage.get("input_tokens", 0),
        "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
        "output_tokens": 1,
    }
    out = [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
            "message_start",
        ),
        _sse({"type": "ping"}, "ping"),
    ]
    index = 0
    if reply.text:
        out.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                "content_block_start",
            )
        )
        out += [
            _sse(
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}},
                "content_block_delta",
            )
            for p in _pieces(reply.text, reply.chunk)
        ]
        out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    for call in reply.tool_calls:
        out.append(
            _sse(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
                },
                "content_block_start",
            )
        )
        out += [
            _sse(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p},
                },
                "content_block_delta",
            )
            for p in _pieces(call.arguments, reply.chunk)
        ]
        out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    if reply.stream_error is not None:
        return out + [_sse({"type": "error", "error": dict(reply.stream_error)}, "error")]
    out.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": reply.stop or ("tool_use" if reply.tool_calls else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": usage.get("output_tokens", 0)},
            },
            "message_delta",
        )
    )
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def responses_events(reply: Reply, body: Mapping[str, Any]) -> list[bytes]:
    """The Responses API SSE stream of ``reply``: ``response.created``, ``response.in_progress``, per output item
    (a reasoning item, the message, each function call) ``response.output_item.added``, its deltas and
    ``.done`` events and ``response.output_item.done``, then ``response.completed`` with the output and usage
    (or ``response.failed`` for ``stream_error``). Every event carries ``type`` and ``sequence_number`` in its data
    and its type as the SSE event name, as the API sends them."""
    model = reply.model or body.get("model") or "fake-model"
    seq = iter(range(1_000_000))
    out: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        out.append(_sse({"type": kind, **data, "sequence_number": next(seq)}, kind))

    def response(status: str, output: list[Any], usage: Any = None, error: Any = None) -> dict[str, Any]:
        return {
            "id": "resp_fake",
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": list(body.get("tools") or []),
            "store": body.get("store", True),
            "error": error,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "usage": usage,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
        }

    emit("response.created", response=response("in_progress", []))
    emit("response.in_progress", response=response("in_progress", []))
    done: list[dict[str, Any]] = []
    if reply.reasoning:
        rid, i = "rs_fake1", len(done)
        wanted = "reasoning.encrypted_content" in (body.get("include") or [])
        emit(
            "response.output_item.added",
            output_index=i,
            item={"id": rid, "type": "reasoning", "summary": [], "encrypted_content": None},
        )
        emit(
            "response.reasoning_summary_part.added",
            item_id=rid,
            output_index=i,
            summary_index=0,
            part={"type": "summary_text", "text": ""},
        )
        for p in _pieces(reply.reasoning, reply.chunk):
            emit("response.reasoning_summary_text.delta", item_id=rid, output_index=i, summary_index=0, delta=p)
        emit("response.reasoning_summary_text.done", item_id=rid, output_index=i, summary_index=0, text=reply.reasoning)
        item = {
            "id": rid,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": reply.reasoning}],
            "encrypted_content": reply.encrypted_reasoning if wanted else None,
        }
        emit("response.output_item.done", output_index=i, item=item)
        done.append(item)
    if reply.text:
        mid, i = "msg_fake1", len(done)
        emit(
            "response.output_item.added",
            output_index=i,
            item={"id": mid, "type": "message", "status": "in_progress", "role": "assistant", "content": []},
        )
        emit(
            "response.content_part.added",
            item_id=mid,
            output_index=i,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
        )
        for p in _pieces(reply.text, reply.chunk):
            emit("response.output_text.delta", item_id=mid, output_index=i, content_index=0, delta=p, logprobs=[])
        emit("response.output_text.done", item_id=mid, output_index=i, content_index=0, text=reply.text, logprobs=[])
        part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        emit("response.content_part.done", item_id=mid, output_index=i, content_index=0, part=part)
        item = {"id": mid, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
        emit("response.output_item.done", output_index=i, item=item)
        done.append(item)
    for n, call in enumerate(reply.tool_calls):
        fid, i = f"fc_fake{n + 1}", len(done)
        emit(
            "response.output_item.added",
            output_index=i,
            item={
                "id": fid,
                "type": "function_call",
                "status": "in_progress",
                "call_id": call.id,
                "name": call.name,
                "arguments": "",
            },
        )
        for p in _pieces(call.arguments, reply.chunk):
            emit("response.function_call_arguments.delta", item_id=fid, output_index=i, delta=p)
        emit("response.function_call_arguments.done", item_id=fid, output_index=i, arguments=call.arguments)
        item = {
            "id": fid,
            "type": "function_call",
            "status": "completed",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        emit("response.output_item.done", output_index=i, item=item)
        done.append(item)
    if reply.stream_error is not None:
        emit("response.failed", response=response("failed", done, error=dict(reply.stream_error)))
        return out
    u = dict(reply.usage or {"input_tokens": 0, "output_tokens": 0})
    usage = {
        "input_tokens": u.get("input_tokens", 0),
        "input_tokens_details": {"cached_tokens": 0, **(u.get("input_tokens_details") or {})},
        "output_tokens": u.get("output_tokens", 0),
        "output_tokens_details": {"reasoning_tokens": 0, **(u.get("output_tokens_details") or {})},
    }
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    emit("response.completed", response=response("completed", done, usage))
    return out


def openai_completion(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` of ``reply`` (for a request with ``stream`` false)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    usage = dict(reply.usage or {"prompt_tokens": 0, "completion_tokens": 0})
    usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": reply.model or body.get("model") or "fake-model",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.stop or ("tool_calls" if reply.tool_calls else "stop"),
            }
        ],
        "usage": usage,
    }


# ------------------------------------------------------------------------ server
def _app(
    script: list[Any],
    requests: list[Recorded],
    path: str,
    events: Callable[[Reply, Mapping[str, Any]], list[bytes]],
    whole: Callable[[Reply, Mapping[str, Any]], dict[str, Any]] | None = None,
) -> Starlette:
    lock = threading.Lock()

    async def endpoint(request: Request) -> Any:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        with lock:
            i = len(requests)
            requests.append(Recorded(request.url.path, {k.lower(): v for k, v in request.headers.items()}, body))
        if i >= len(script):
            return JSONResponse(
                {
                    "error": {
                        "message": f"fake server: request {i + 1} has no scripted response "
                        f"(the script has {len(script)})",
                        "type": "fake_script",
                    }
                },
                status_code=400,
            )
        entry = script[i]
        if callable(entry) and not isinstance(entry, (Reply, Fail)):
            entry = entry(body)
        if isinstance(entry, Fail):
            return JSONResponse(dict(entry.body), status_code=entry.status, headers=dict(entry.headers))
        if not isinstance(entry, Reply):
            raise TypeError(f"script entry {i} is {entry!r}, not a Reply or Fail")
        if entry.delay:
            await asyncio.sleep(entry.delay)
        request_body = body if isinstance(body, Mapping) else {}
        if whole is not None and not request_body.get("stream"):
            return JSONResponse(whole(entry, request_body), headers={"x-request-id": f"req_{i + 1}"})
        chunks = events(entry, request_body)

        async def stream() -> Any:
            for n, c in enumerate(chunks):
                if n == 2 and entry.stall:
                    await asyncio.sleep(entry.stall)
                while n == 2 and entry.trickle:
                    await asyncio.sleep(entry.trickle)
                    yield chunks[1]
                yield c

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"x-request-id": f"req_{i + 1}", "request-id": f"req_{i + 1}"},
        )

    return Starlette(routes=[Route(path, endpoint, methods=["POST"])])


@contextmanager
def _serve(app: Starlette, prefix: str, script: list[Any], requests: list[Recorded]) -> Iterator[FakeServer]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"fake-{port}")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("fake provider server did not start")
        time.sleep(0.01)
    try:
        yield FakeServer(f"http://127.0.0.1:{port}{prefix}", requests, script)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def serve_openai(script: Sequence[Any]) -> Iterator[FakeServer]:
    """A fake OpenAI Chat Completions server: ``POST /v1/chat/completions``; ``base_url`` ends in ``/v1``
    (give it to ``openai.OpenAI(base_url=...)`` or the providers). A request without ``"stream": true``
    gets the non-streaming ``chat.completion`` JSON."""
    script, requests = list(script), []
    with _serve(
        _app(script, requests, "/v1/chat/completions", openai_events, openai_completion), "/v1", script, requests
    ) as s:
        yield s


@contextmanager
def serve_responses(script: Sequence[Any]) -> Iterator[FakeServer]:
    """A fake OpenAI Responses API server: ``POST /v1/responses`` (streaming only); ``base_url`` ends in ``/v1``."""
    script, requests = list(script), []
    with _serve(_app(script, requests, "/v1/responses", responses_events), "/v1", script, requests) as s:
        yield s


@contextmanager
def serve_anthropic(script: Sequence[Any]) -> Iterator[FakeServer]:
    """A fake Anthropic Messages server: ``POST /v1/messages``; ``base_url`` is the root (the SDK adds ``/v1``)."""
    script, requests = list(script), []
    with _serve(_app(script, requests, "/v1/messages", anthropic_events), "", script, requests) as s:
        yield s
