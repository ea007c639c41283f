"""The SDK-backed providers: the real openai / anthropic SDKs against loopback fake
servers (tests/fake_providers.py) speaking the real streaming wire formats."""

from __future__ import annotations

import json
import logging
import socket
import time
import traceback

import pytest
from click.testing import CliRunner
from fake_providers import (
    Reply,
    ToolUse,
    anthropic_error,
    anthropic_overflow,
    llamacpp_overflow,
    openai_error,
    openai_overflow,
    rate_limited,
    serve_anthropic,
    serve_openai,
    server_error,
)

from latch import plugins
from latch.engine.port import ComponentTokens, ContextBudget, ContextView, ViewMessage, ViewToolCall
from latch.events import Usage
from latch.providers import (
    AnthropicProvider,
    OpenAICompatibleProvider,
    OpenAIProvider,
    Provider,
    ProviderError,
    ProviderOverflow,
    ScriptedProvider,
    add_cache_breakpoints,
    to_anthropic_messages,
    to_openai_chat,
    validate_anthropic_messages,
    validate_openai_chat,
)
from latch.providers._sdk import overflow_numbers
from latch.providers.anthropic.sdk import assemble_message
from latch.providers.openai.sdk import assemble_chat_completion
from latch.providers.parse import parse_response

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

TOOLS = (
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "shell",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
)
OPENAI_STREAM = {"stream": True, "stream_options": {"include_usage": True}}


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "OPENAI_LOG", "ANTHROPIC_LOG"):
        monkeypatch.delenv(var, raising=False)


def a_view(*, turns: int = 1) -> ContextView:
    """system + tools + a user task, then ``turns - 1`` tool-call turns (assistant call + result)."""
    msgs = [ViewMessage("user", "Fix the failing test in calc.py.")]
    for i in range(1, turns):
        msgs.append(
            ViewMessage(
                "assistant",
                f"Step {i}.",
                tool_calls=(ViewToolCall(f"call_{i}", "read_file", json.dumps({"path": f"f{i}.py"})),),
            )
        )
        msgs.append(ViewMessage("tool", f"contents of f{i}.py", tool_call_id=f"call_{i}"))
    return ContextView(
        session_id="s1",
        system="You are Latch.",
        tools=TOOLS,
        messages=tuple(msgs),
        tokens=ComponentTokens(),
        budget=ContextBudget(),
    )


# ------------------------------------------------------------------------------------------ OpenAI
def test_openai_streams_text_and_tool_calls_and_parses_usage():
    body = to_openai_chat(a_view(turns=2), model="gpt-test")
    assert validate_openai_chat(body) == []
    reply = Reply(
        "Reading both files now.",
        chunk=3,
        tool_calls=[
            ToolUse("call_a", "read_file", '{"path": "calc.py"}'),
            ToolUse("call_b", "shell", '{"cmd": "pytest -q tests/test_calc.py"}'),
        ],
        usage={"prompt_tokens": 1200, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 1024}},
    )
    deltas: list[str] = []
    with serve_openai([reply]) as server:
        provider = OpenAIProvider.from_options("gpt-test", base_url=server.base_url)
        response = provider.complete(body, on_text=deltas.append)
    assert deltas == ["Rea", "din", "g b", "oth", " fi", "les", " no", "w."]
    assert len(server.requests) == 1
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body == {**body, **OPENAI_STREAM}
    assert response["object"] == "chat.completion" and response["choices"][0]["finish_reason"] == "tool_calls"
    message, usage = parse_response(provider.wire, response)
    assert message.text == "Reading both files now." and message.model == "gpt-test"
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("call_a", "read_file", '{"path": "calc.py"}'),
        ("call_b", "shell", '{"cmd": "pytest -q tests/test_calc.py"}'),
    ]
    assert usage == Usage(
        input_tokens=176,
        output_tokens=40,
        cache_read_tokens=1024,
        cache_write_tokens=None,
        model="gpt-test",
        request_id="chatcmpl-fake",
    )


def test_openai_reasoning_deltas_and_body_keys_the_sdk_does_not_name_reach_the_server():
    body = {**to_openai_chat(a_view(), model="local"), "temperature": 0.0, "cache_prompt": True, "n_probs": 0}
    with serve_openai([Reply("done", reasoning="thinking it over")]) as server:
        provider = OpenAICompatibleProvider.from_options("local", base_url=server.base_url)
        response = provider.complete(body)
    assert server.requests[0].body == {**body, **OPENAI_STREAM}  # cache_prompt / n_probs went through extra_body
    assert response["choices"][0]["message"]["reasoning_content"] == "thinking it over"
    message, usage = parse_response("openai-chat", response)
    assert message.reasoning_reported and message.text == "done"
    assert usage is not None and usage.input_tokens == 0 and usage.cache_read_tokens is None


def test_openai_compatible_without_streaming_returns_the_servers_completion():
    body = to_openai_chat(a_view(), model="local")
    deltas: list[str] = []
    reply = Reply(
        "all done",
        tool_calls=[ToolUse("call_9", "shell", '{"cmd": "ls"}')],
        usage={"prompt_tokens": 321, "completion_tokens": 9},
    )
    with serve_openai([reply]) as server:
        provider = OpenAICompatibleProvider("local", base_url=server.base_url, stream=False)
        response = provider.complete(body, on_text=deltas.append)
    assert server.requests[0].body == {**body, "stream": False}
    assert deltas == ["all done"]
    message, usage = parse_response("openai-chat", response)
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [("call_9", "shell", '{"cmd": "ls"}')]
    assert (usage.input_tokens, usage.output_tokens) == (321, 9)


def test_openai_429_then_success_honours_retry_after():
    with serve_openai([rate_limited("openai", retry_after="1"), Reply("ok")]) as server:
        provider = OpenAIProvider.from_options("gpt-test", base_url=server.base_url, max_retries=2)
        start = time.monotonic()
        response = provider.complete(to_openai_chat(a_view(), model="gpt-test"))
        elapsed = time.monotonic() - start
    assert parse_response("openai-chat", response)[0].text == "ok"
    assert len(server.requests) == 2 and server.requests[1].headers["x-stainless-retry-count"] == "1"
    assert server.requests[0].body == server.requests[1].body
    assert 0.95 <= elapsed < 5  # Retry-After: 1 (the SDK's own first backoff is at most 0.5 s)


def test_openai_500_every_time_is_a_clear_error_after_the_retries():
    with serve_openai([server_error("openai")] * 3) as server:
        provider = OpenAIProvider.from_options("gpt-test", base_url=server.base_url, max_retries=2)
        start = time.monotonic()
        with pytest.raises(ProviderError) as info:
            provider.complete(to_openai_chat(a_view(), model="gpt-test"))
        elapsed = time.monotonic() - start
    assert len(server.requests) == 3 and server.remaining == 0
    assert str(info.value) == (
        "openai: HTTP 500: The server had an error while processing your request. Sorry "
        "about that! (gave up after 2 retries)"
    )
    assert info.value.status == 500 and info.value.provider == "openai"
    assert not isinstance(info.value, ProviderOverflow)
    assert elapsed >= 0.375 + 0.75  # exponential backoff: 0.5 s then 1 s, less at most 25 % jitter


def test_openai_timeout_is_retried():
    with serve_openai([Reply("late", delay=3.0), Reply("on time")]) as server:
        provider = OpenAIProvider.from_options("gpt-test", base_url=server.base_url, timeout=0.4, max_retries=1)
        response = provider.complete(to_openai_chat(a_view(), model="gpt-test"))
    assert parse_response("openai-chat", response)[0].text == "on time" and len(server.requests) == 2


def test_openai_client_errors_are_not_retried():
    with serve_openai([openai_error(400, "Invalid 'messages[0].role': unknown role.", param="messages")]) as server:
        provider = OpenAIProvider.from_options("gpt-test", base_url=server.base_url, max_retries=3)
        with pytest.raises(ProviderError, match=r"^openai: HTTP 400: Invalid 'messages\[0\]\.role': unknown role\.$"):
            provider.complete(to_openai_chat(a_view(), model="gpt-test"))
    assert len(server.requests) == 1


def test_connection_refused_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = OpenAICompatibleProvider.from_options("m", base_url=f"http://u:pw@127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(
        ProviderError,
        match=rf"^openai-compatible: connection failed \(http://127\.0\.0\.1:{port}"
        r"/v1/chat/completions\): Connection error\. .*"
        r"\(gave up after 0 retries\)$",
    ) as info:
        provider.complete({"messages": [{"role": "user", "content": "hi"}]})
    assert "\n" not in str(info.value) and info.value.status is None
    assert "pw" not in str(info.value)  # the URL without its credentials


@pytest.mark.parametrize(
    "fail, provider_cls, prompt, limit",
    [
        (openai_overflow(128000, 130532), OpenAIProvider, 130532, 128000),
        (llamacpp_overflow(4476, 4096), OpenAICompatibleProvider, 4476, 4096),
        (
            openai_error(
                400,
                "This model's maximum context length is 2048 tokens. However, you requested 2300 tokens "
                "(2200 in the messages, 100 in the completion). Please reduce the length of the messages or "
                "completion.",
                code="context_length_exceeded",
                param="messages",
            ),
            OpenAICompatibleProvider,
            2200,
            2048,
        ),  # llama-cpp-python's server
    ],
    ids=["openai", "llama.cpp", "llama-cpp-python"],
)
def test_openai_context_overflow_becomes_provider_overflow(fail, provider_cls, prompt, limit):
    with serve_openai([fail]) as server:
        provider = provider_cls.from_options("m", base_url=server.base_url)
        with pytest.raises(ProviderOverflow) as info:
            provider.complete(to_openai_chat(a_view(), model="m"))
    assert (info.value.prompt_tokens, info.value.limit_tokens, info.value.status) == (prompt, limit, 400)
    assert str(info.value).startswith(f"{provider_cls.PLUGIN_NAME}: HTTP 400: ")
    assert len(server.requests) == 1  # never retried


# ------------------------------------------------------------------------------------------ Anthropic
def test_anthropic_streams_text_and_tool_use_and_parses_cache_usage():
    body = to_anthropic_messages(a_view(turns=3), model="claude-test", max_tokens=2048)
    reply = Reply(
        "Let me look.",
        chunk=5,
        tool_calls=[
            ToolUse("toolu_01", "read_file", '{"path": "calc.py"}'),
            ToolUse("toolu_02", "shell", '{"cmd": "pytest -q"}'),
        ],
        usage={
            "input_tokens": 12,
            "output_tokens": 55,
            "cache_read_input_tokens": 3000,
            "cache_creation_input_tokens": 250,
        },
    )
    deltas: list[str] = []
    with serve_anthropic([reply]) as server:
        provider = AnthropicProvider.from_options("claude-test", base_url=server.base_url)
        response = provider.complete(body, on_text=deltas.append)
    assert deltas == ["Let m", "e loo", "k."]
    sent = server.requests[0].body
    assert server.requests[0].path == "/v1/messages"
    assert sent == {**add_cache_breakpoints(body), "stream": True}
    assert validate_anthropic_messages(sent) == []
    assert response["type"] == "message" and response["stop_reason"] == "tool_use"
    message, usage = parse_response(provider.wire, response)
    assert message.text == "Let me look." and message.model == "claude-test"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("toolu_01", "read_file", {"path": "calc.py"}),
        ("toolu_02", "shell", {"cmd": "pytest -q"}),
    ]
    assert usage == Usage(
        input_tokens=12,
        output_tokens=55,
        cache_read_tokens=3000,
        cache_write_tokens=250,
        model="claude-test",
        request_id="msg_fake",
    )


def test_anthropic_fills_model_and_max_tokens_and_can_leave_the_body_alone():
    body = {"messages": [{"role": "user", "content": "hi"}]}
    with serve_anthropic([Reply("hello")] * 2) as server:
        AnthropicProvider("claude-test", base_url=server.base_url).complete(body)
        AnthropicProvider("claude-test", base_url=server.base_url, cache_breakpoints=False).complete(body)
    first, second = server.bodies
    assert first["model"] == "claude-test" and first["max_tokens"] == 8192
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    ]
    assert second == {**body, "model": "claude-test", "max_tokens": 8192, "stream": True}
    assert body == {"messages": [{"role": "user", "content": "hi"}]}  # the caller's body is not modified


def test_anthropic_429_then_success_and_529_until_a_clear_error():
    with serve_anthropic([rate_limited("anthropic", retry_after="1"), Reply("ok")]) as server:
        provider = AnthropicProvider.from_options("claude-test", base_url=server.base_url, max_retries=2)
        start = time.monotonic()
        assert parse_response("anthropic-messages", provider.complete(to_anthropic_messages(a_view())))[0].text == "ok"
        assert time.monotonic() - start >= 0.95
    assert len(server.requests) == 2
    with serve_anthropic([server_error("anthropic", 529)] * 2) as server:
        provider = AnthropicProvider.from_options("claude-test", base_url=server.base_url, max_retries=1)
        with pytest.raises(ProviderError) as info:
            provider.complete(to_anthropic_messages(a_view()))
    assert str(info.value) == "anthropic: HTTP 529: Overloaded (gave up after 1 retries)"
    assert len(server.requests) == 2 and info.value.status == 529


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_an_error_inside_the_stream_is_a_clear_error_and_not_retried(wire):
    if wire == "openai":
        serve, cls, body = serve_openai, OpenAIProvider, to_openai_chat(a_view(), model="m")
        error = {"message": "The server had an error processing your request.", "type": "server_error"}
    else:
        serve, cls, body = serve_anthropic, AnthropicProvider, to_anthropic_messages(a_view(), model="m")
        error = {"type": "overloaded_error", "message": "Overloaded"}
    deltas: list[str] = []
    with serve([Reply("partial answer", stream_error=error)]) as server:
        provider = cls.from_options("m", base_url=server.base_url, max_retries=3)
        with pytest.raises(ProviderError) as info:
            provider.complete(body, on_text=deltas.append)
    assert str(info.value) == f"{wire}: error in the response stream: {error['message']}"
    assert info.value.status is None and len(server.requests) == 1
    assert "".join(deltas) == "partial answer"  # streamed before the error


@pytest.mark.parametrize(
    "fail, prompt, limit",
    [
        (anthropic_overflow(208310, 200000), 208310, 200000),
        (
            anthropic_error(
                400,
                "invalid_request_error",
                "input length and `max_tokens` exceed context limit: "
                "197626 + 21333 > 200000, decrease input length or `max_tokens` "
                "and try again",
            ),
            197626,
            200000,
        ),
    ],
    ids=["prompt-too-long", "with-max-tokens"],
)
def test_anthropic_context_overflow_becomes_provider_overflow(fail, prompt, limit):
    with serve_anthropic([fail]) as server:
        provider = AnthropicProvider.from_options("claude-test", base_url=server.base_url)
        with pytest.raises(ProviderOverflow) as info:
            provider.complete(to_anthropic_messages(a_view()))
    assert (info.value.prompt_tokens, info.value.limit_tokens) == (prompt, limit)
    assert str(info.value).startswith("anthropic: HTTP 400: ") and len(server.requests) == 1


# ------------------------------------------------------------------------------------------ API keys
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_api_key_reaches_the_server_and_nothing_else(wire, monkeypatch, caplog):
    key = "sk-DISTINCTIVE-fake-key-7f3a9c"
    var = "LATCH_TEST_KEY"
    monkeypatch.setenv(var, key)
    caplog.set_level(logging.DEBUG)
    if wire == "openai":
        serve, cls, body = serve_openai, OpenAIProvider, to_openai_chat(a_view(), model="m")
        denied = openai_error(
            401,
            f"Incorrect API key provided: {key}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        )
    else:
        serve, cls, body = serve_anthropic, AnthropicProvider, to_anthropic_messages(a_view(), model="m")
        denied = anthropic_error(401, "authentication_error", f"invalid x-api-key {key}")
    with serve([Reply("hi"), denied, server_error(wire)]) as server:
        provider = cls.from_options("m", base_url=server.base_url, api_key_env=var, max_retries=0)
        provider.complete(body)
        errors = []
        for _ in range(2):
            with pytest.raises(ProviderError) as info:
                provider.complete(body)
            errors.append(info.value)
    headers = server.requests[0].headers
    assert headers.get("authorization") == f"Bearer {key}" or headers.get("x-api-key") == key
    assert errors[0].status == 401 and "[redacted]" in str(errors[0])
    texts = [repr(provider), str(vars(provider)), caplog.text]
    for exc in errors:
        texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
        assert exc.__context__ is None and exc.__cause__ is None  # the SDK's exception (request headers) is not kept
    leaks = [t for t in texts if key in t]
    assert leaks == []


def test_missing_keys_and_base_url_are_clear_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ProviderError, match=r"^openai: no API key: the environment variable OPENAI_API_KEY is not set"):
        OpenAIProvider.from_options("gpt-test")
    with pytest.raises(ProviderError, match=r"^anthropic: no API key: .* ANTHROPIC_API_KEY is not set"):
        AnthropicProvider.from_options("claude-test")
    with pytest.raises(ProviderError, match=r"^anthropic: no API key: .* MY_KEY is not set"):
        AnthropicProvider.from_options("claude-test", api_key_env="MY_KEY")
    with pytest.raises(ProviderError, match=r"^openai-compatible: a base_url is required"):
        OpenAICompatibleProvider.from_options("m")
    with pytest.raises(ProviderError, match=r"^openai-compatible: no API key: .* LOCAL_KEY is not set"):
        OpenAICompatibleProvider.from_options("m", base_url="http://127.0.0.1:1/v1", api_key_env="LOCAL_KEY")
    with pytest.raises(ProviderError, match=r"^openai: max_retries must be a non-negative integer, got -1"):
        OpenAIProvider.from_options("gpt-test", max_retries=-1)


def test_openai_compatible_never_sends_the_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key-do-not-send")
    with serve_openai([Reply("hi")]) as server:
        provider = OpenAICompatibleProvider.from_options("local", base_url=server.base_url)
        provider.complete({"messages": [{"role": "user", "content": "hi"}]})
    assert "sk-real-openai-key-do-not-send" not in json.dumps(dict(server.requests[0].headers))
    assert server.requests[0].body["model"] == "local"


# ------------------------------------------------------------------------------------------ cache breakpoints
def _breakpoints(body):
    found = [("tools", i) for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    system = body.get("system")
    found += [("system", i) for i, b in enumerate(system if isinstance(system, list) else []) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        content = m["content"] if isinstance(m["content"], list) else []
        found += [("messages", i, j) for j, b in enumerate(content) if "cache_control" in b]
    return found


def test_cache_breakpoints_mark_the_stable_prefix_and_the_growing_end():
    body = to_anthropic_messages(a_view(turns=4), model="claude-test", max_tokens=1024)
    marked = add_cache_breakpoints(body)
    n = len(marked["messages"])
    last_user_before_assistant = n - 3  # ... user (results of turn 2), assistant (turn 3 call), user (its result)
    assert _breakpoints(marked) == [
        ("tools", 1),
        ("system", 0),
        ("messages", last_user_before_assistant, 0),
        ("messages", n - 1, 0),
    ]
    assert len(_breakpoints(marked)) <= 4
    assert marked["system"] == [{"type": "text", "text": "You are Latch.", "cache_control": {"type": "ephemeral"}}]
    assert validate_anthropic_messages(marked) == []
    assert "cache_control" not in json.dumps(body)  # the input is not modified
    assert add_cache_breakpoints(marked) == marked  # idempotent


def test_the_next_request_of_an_epoch_reads_the_previous_end_breakpoint():
    """Request n+1 extends request n: request n's last breakpoint (its growing end) sits on the same block
    in request n+1, so the cache entry written by n is read by n+1 however many blocks n+1 added."""
    first = add_cache_breakpoints(to_anthropic_messages(a_view(turns=2)))
    second = add_cache_breakpoints(to_anthropic_messages(a_view(turns=3)))
    end_of_first = _breakpoints(first)[-1]
    assert end_of_first in _breakpoints(second)
    unmarked = json.loads(json.dumps(first["messages"]).replace(', "cache_control": {"type": "ephemeral"}', ""))
    assert to_anthropic_messages(a_view(turns=3))["messages"][: len(unmarked)] == unmarked  # the same prefix
    # (cache_control marks where entries are written and read; it is not part of the cached prefix)


def test_cache_breakpoints_without_tools_or_system_and_skipping_thinking():
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "hello"}, {"type": "thinking", "thinking": "…", "signature": "s"}],
            },
        ]
    }
    marked = add_cache_breakpoints(body)
    assert _breakpoints(marked) == [("messages", 0, 0), ("messages", 1, 0)]  # the thinking block is skipped
    assert marked["messages"][0]["content"] == [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]
    stale = {
        "system": [
            {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "y"},
                ],
            }
        ],
    }
    assert _breakpoints(add_cache_breakpoints(stale)) == [("system", 1), ("messages", 0, 1)]


# ------------------------------------------------------------------------------------------ assemblers
def test_openai_assembler_gathers_tool_calls_by_index():
    chunks = [
        {
            "id": "c1",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 1, "id": "b", "function": {"name": "shell", "arguments": '{"cmd"'}},
                            {"index": 0, "id": "a", "function": {"name": "read_file", "arguments": "{}"}},
                        ]
                    },
                }
            ],
        },
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": ': "ls"}'}}]}}]},
        {"choices": [{"index": 1, "delta": {"content": "other choice"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    out = assemble_chat_completion(chunks)
    assert out["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}},
        ],
    }
    assert "usage" not in out and parse_response("openai-chat", out)[1] is None


def test_anthropic_assembler_refuses_a_truncated_stream_or_bad_tool_json():
    start = {"type": "message_start", "message": {"id": "m", "model": "c", "content": [], "usage": {"input_tokens": 1}}}
    with pytest.raises(ProviderError, match="the stream ended before message_stop"):
        assemble_message([start])
    bad = [
        start,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "shell", "input": {}},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a"'}},
        {"type": "content_block_stop", "index": 0},
    ]
    with pytest.raises(ProviderError, match=r"content block 0 \(shell\): tool input is not JSON"):
        assemble_message(bad)


def test_overflow_numbers_of_each_wording():
    assert overflow_numbers(
        "This model's maximum context length is 8192 tokens, however you requested 8245 tokens "
        "(7245 in your prompt; 1000 for the completion)."
    ) == (7245, 8192)
    assert overflow_numbers(
        "the request exceeds the available context size, try increasing it", {"n_prompt_tokens": 3000, "n_ctx": 2048}
    ) == (3000, 2048)
    assert overflow_numbers("prompt is too long: 1,234 tokens > 1,000 maximum") == (1234, 1000)
    assert overflow_numbers("Your input exceeds the context window of this model.") == (None, None)


# ------------------------------------------------------------------------------------------ plugins and scripted
def test_providers_are_registered_builtin_plugins():
    plugins.reset_plugin_manager()
    assert plugins.provider_names() == ["anthropic", "openai", "openai-compatible", "openai-responses"]
    assert plugins.get_provider("openai") is OpenAIProvider
    assert plugins.get_provider("openai-compatible") is OpenAICompatibleProvider
    assert plugins.get_provider("anthropic") is AnthropicProvider
    reg = plugins.registered("providers")["anthropic"]
    assert reg.plugin.name == "latch.default_plugins.providers" and reg.plugin.builtin
    with pytest.raises(
        plugins.PluginError,
        match=r"^unknown provider 'antropic' \(did you mean 'anthropic'\?\); "
        r"registered providers: anthropic, openai, openai-compatible, "
        r"openai-responses",
    ):
        plugins.get_provider("antropic")
    for cls in (OpenAIProvider, OpenAICompatibleProvider, AnthropicProvider):
        p = cls.from_options("m", base_url="http://127.0.0.1:1/v1")
        assert isinstance(p, Provider) and p.name == cls.PLUGIN_NAME
        assert p.wire == ("anthropic-messages" if cls is AnthropicProvider else "openai-chat")


def test_latch_plugins_lists_the_providers(monkeypatch):
    from latch.cli import _load_commands, cli

    _load_commands()
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    plugins.reset_plugin_manager()
    try:
        result = CliRunner().invoke(cli, ["plugins", "--json"])
    finally:
        plugins.reset_plugin_manager()
    assert result.exit_code == 0, result.output
    row = next(r for r in json.loads(result.output) if r["name"] == "latch.default_plugins.providers")
    assert row["registered"] == {"providers": ["openai", "openai-compatible", "anthropic", "openai-responses"]}
    assert row["hooks"] == ["latch_register_providers"]


def test_scripted_provider_has_a_wire_and_streams_its_text():
    p = ScriptedProvider(
        [
            {"content": [{"type": "text", "text": "hi"}], "usage": {}},
            ProviderOverflow("scripted: too long", prompt_tokens=9, limit_tokens=8),
        ],
        wire="anthropic-messages",
    )
    deltas: list[str] = []
    assert p.wire == "anthropic-messages" and isinstance(p, Provider)
    p.complete({"messages": []}, on_text=deltas.append)
    assert deltas == ["hi"]
    with pytest.raises(ProviderOverflow) as info:
        p.complete({"messages": []})
    assert info.value.prompt_tokens == 9


def test_a_server_that_ignores_stream_true_is_a_clear_error_not_an_empty_turn():
    """Found by a new-user trial: a server answering one JSON body to a streaming request made an empty
    assistant turn (nothing ran, exit 0). Now it is a one-line error naming --no-stream."""
    import http.server
    import threading

    body = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        }
    ).encode()

    class Plain(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        p = OpenAICompatibleProvider("m", base_url=url)
        with pytest.raises(ProviderError, match=r"^openai-compatible: the server sent no stream events.*--no-stream"):
            p.complete({"messages": [{"role": "user", "content": "x"}]})
        whole = OpenAICompatibleProvider("m", base_url=url, stream=False)
        assert (
            whole.complete({"messages": [{"role": "user", "content": "x"}]})["choices"][0]["message"]["content"] == "hi"
        )
    finally:
        srv.shutdown()
