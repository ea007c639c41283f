"""The OpenAI Responses API provider and wire format: the real openai SDK against a loopback server speaking the
Responses streaming events (tests/fake_providers.py), the body renderer and its validator, and the
``responses`` format of ``latch view`` on a corpus session."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_support import require_corpus
from fake_providers import Reply, ToolUse, openai_error, rate_limited, responses_overflow, serve_responses

from latch import plugins
from latch.engine.port import ComponentTokens, ContextBudget, ContextView, ViewMessage, ViewToolCall
from latch.events import MediaRef, Usage
from latch.providers import (
    OpenAIResponsesProvider,
    Provider,
    ProviderError,
    ProviderOverflow,
    to_responses,
    validate_responses,
)
from latch.providers._wire import DERIVED_TOOL_DESCRIPTION
from latch.providers.openai.responses import insert_reasoning
from latch.providers.openai.responses_sdk import assemble_response
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
ENCRYPTED = "gAAAAABo-opaque-reasoning-blob=="


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    for var in ("OPENAI_BASE_URL", "OPENAI_LOG"):
        monkeypatch.delenv(var, raising=False)


def a_view(*extra: ViewMessage, system: str = "You are Latch.", tools=TOOLS) -> ContextView:
    msgs = (ViewMessage("user", "Fix the failing test in calc.py."), *extra)
    return ContextView(
        session_id="s1",
        system=system,
        tools=tuple(tools),
        messages=msgs,
        tokens=ComponentTokens(),
        budget=ContextBudget(),
    )


def call_turn(
    cid: str,
    name: str = "read_file",
    args: str = '{"path": "calc.py"}',
    text: str = "",
    result: str = "def add(a, b): return a - b",
) -> tuple[ViewMessage, ViewMessage]:
    return (
        ViewMessage("assistant", text, tool_calls=(ViewToolCall(cid, name, args),)),
        ViewMessage("tool", result, tool_call_id=cid),
    )


# ------------------------------------------------------------------------------------------ wire format
def test_a_view_renders_as_a_stateless_responses_body():
    png = MediaRef(sha256="ab" * 32, media_type="image/png", byte_size=4, width=2, height=3)
    view = a_view(
        ViewMessage(
            "assistant",
            "Looking.",
            tool_calls=(ViewToolCall("c1", "read_file", '{"path": "a"}'), ViewToolCall("c2", "shell", '{"cmd": "ls"}')),
        ),
        ViewMessage("tool", "", tool_call_id="c2", is_error=True),  # out of call order
        ViewMessage("tool", "chart", tool_call_id="c1", media=(png,)),
        ViewMessage("tool", "late", tool_call_id="c9"),  # its call is not in the view
        ViewMessage("assistant", "Done."),
    )
    body = to_responses(view, lambda sha: b"\x89PNG", model="gpt-5")
    assert body["model"] == "gpt-5" and body["instructions"] == "You are Latch."
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert "previous_response_id" not in body
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "Fix the failing test in calc.py."},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": "a"}'},
        {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": '{"cmd": "ls"}'},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "chart"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw==", "detail": "auto"},
            ],
        },
        {"type": "function_call_output", "call_id": "c2", "output": "[error] (no output)"},
        {
            "type": "message",
            "role": "user",
            "content": "[tool result for call c9 whose call is not in this view]\nlate",
        },
        {"type": "message", "role": "assistant", "content": "Done."},
    ]
    assert body["tools"][0] == {
        "type": "function",
        "name": "read_file",
        "description": "Read a file.",
        "parameters": TOOLS[0]["input_schema"],
        "strict": False,
    }
    assert validate_responses(body) == []


def test_a_view_without_schemas_declares_derived_tools_and_without_a_model_is_reported():
    view = a_view(*call_turn("c1", "Bash", '{"command": "ls"}'), tools=())
    body = to_responses(view)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "Bash",
            "description": DERIVED_TOOL_DESCRIPTION,
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert validate_responses(body) == ["model: missing (a Responses request names its model)"]


@pytest.mark.parametrize(
    "items, expected",
    [
        (
            [{"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}],
            "input: function_call 'c1' (shell) has no function_call_output",
        ),
        (
            [{"type": "function_call_output", "call_id": "c1", "output": "x"}],
            "input[0] (function_call_output): output for 'c1' without an earlier function_call (orphan)",
        ),
        (
            [
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": {}},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
            ],
            "input[0] (function_call): arguments must be a JSON string",
        ),
        (
            [
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
                {"type": "function_call_output", "call_id": "c1", "output": "y"},
            ],
            "input[2] (function_call_output): second output for call 'c1'",
        ),
        (
            [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
            ],
            "input[0] (reasoning): no encrypted_content, and store is false (the provider kept nothing this item could "
            "refer to)",
        ),
        (
            [
                {"type": "message", "role": "user", "content": "hi"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
            ],
            "input[1] (reasoning): not followed by the output item it led to",
        ),
        ([{"type": "message", "role": "user", "content": " "}], "input[0] (user): empty content"),
        (
            [{"type": "message", "role": "user", "content": [{"type": "output_text", "text": "x"}]}],
            "input[0] (user): part 0: output_text parts belong to assistant messages",
        ),
        ([{"type": "message", "role": "tool", "content": "x"}], "input[0]: unknown role 'tool'"),
        ([{"type": "web_search_call"}], "input[0]: unknown item type 'web_search_call'"),
    ],
)
def test_the_validator_catches(items, expected):
    body = {
        "model": "gpt-5",
        "input": items,
        "store": False,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": False}],
    }
    assert validate_responses(body) == [expected]


def test_the_validator_wants_tools_for_calls_a_model_and_no_previous_response_id():
    body = {
        "input": [
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
        "previous_response_id": "resp_1",
    }
    assert validate_responses(body) == [
        "model: missing (a Responses request names its model)",
        "previous_response_id: set, but Latch sends the whole context (store is false)",
        "tools: the messages call tools but the body declares none (providers reject tool blocks without tools)",
    ]
    dup = {
        "model": "m",
        "input": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "name": "a", "parameters": {}},
            {"type": "function", "name": "a"},
            {"type": "function", "function": {"name": "b"}},
        ],
    }
    assert validate_responses(dup) == [
        "tools[1]: duplicate tool name 'a'",
        "tools[2]: must be {'type': 'function', 'name': ...}",
    ]
    assert validate_responses({"model": "m", "input": []}) == ["input: must be a non-empty list of items"]


def test_reasoning_goes_back_before_the_turn_it_led_to():
    reasoning = [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e1"}]
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "message", "role": "assistant", "content": "Reading."},
        {"type": "function_call", "call_id": "c1", "name": "r", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "r", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
        {"type": "function_call_output", "call_id": "c2", "output": "b"},
        {"type": "function_call", "call_id": "c3", "name": "r", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c3", "output": "c"},
    ]
    out = insert_reasoning(items, {"c1": reasoning, "c2": reasoning, "c9": reasoning})
    assert [i.get("call_id") or i.get("id") or i["role"] for i in out] == [
        "user",
        "rs_1",
        "assistant",
        "c1",
        "c2",
        "c1",
        "c2",
        "c3",
        "c3",
    ]  # once, before the turn's text
    assert len(items) == 8  # the input is not modified


# ------------------------------------------------------------------------------------------ the provider
def test_streams_text_and_normalizes_usage_with_cached_tokens():
    body = to_responses(a_view(), model="gpt-5")
    reply = Reply(
        "The subtraction should be an addition.",
        chunk=9,
        usage={
            "input_tokens": 2400,
            "input_tokens_details": {"cached_tokens": 2048},
            "output_tokens": 300,
            "output_tokens_details": {"reasoning_tokens": 256},
        },
    )
    deltas: list[str] = []
    with serve_responses([reply]) as server:
        provider = OpenAIResponsesProvider.from_options("gpt-5", base_url=server.base_url)
        response = provider.complete(body, on_text=deltas.append)
    assert deltas == ["The subtr", "action sh", "ould be a", "n additio", "n."]
    assert server.requests[0].path == "/v1/responses"
    assert server.requests[0].body == {**body, "stream": True}
    assert server.requests[0].headers["authorization"] == "Bearer sk-test-openai"
    assert response["object"] == "response" and response["status"] == "completed"
    message, usage = parse_response(provider.wire, response)
    assert message.text == "The subtraction should be an addition." and message.model == "gpt-5"
    assert message.tool_calls == () and not message.reasoning_reported
    assert usage == Usage(
        input_tokens=352,
        output_tokens=300,
        cache_read_tokens=2048,
        cache_write_tokens=None,
        model="gpt-5",
        request_id="resp_fake",
    )
    assert usage.prompt_tokens == 2400


def test_function_calls_stream_their_arguments():
    with serve_responses(
        [
            Reply(
                "Checking.",
                chunk=3,
                tool_calls=[
                    ToolUse("call_a", "read_file", '{"path": "calc.py"}'),
                    ToolUse("call_b", "shell", '{"cmd": "pytest -q tests/test_calc.py"}'),
                ],
            )
        ]
    ) as server:
        provider = OpenAIResponsesProvider("gpt-5", base_url=server.base_url)
        response = provider.complete(to_responses(a_view(), model="gpt-5"))
    assert [i["type"] for i in response["output"]] == ["message", "function_call", "function_call"]
    message, usage = parse_response("openai-responses", response)
    assert message.text == "Checking."
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("call_a", "read_file", '{"path": "calc.py"}'),
        ("call_b", "shell", '{"cmd": "pytest -q tests/test_calc.py"}'),
    ]
    assert usage is not None and (usage.input_tokens, usage.cache_read_tokens) == (0, 0)


def test_reasoning_items_go_back_encrypted_before_their_calls_and_leave_with_them():
    first = Reply(
        reasoning="The test fails on add; read calc.py first.",
        encrypted_reasoning=ENCRYPTED,
        tool_calls=[ToolUse("call_1", "read_file", '{"path": "calc.py"}')],
    )
    script = [first, Reply("Fixed: add returns a + b."), Reply("Nothing else to do.")]
    with serve_responses(script) as server:
        provider = OpenAIResponsesProvider("gpt-5", base_url=server.base_url)
        r1 = provider.complete(to_responses(a_view(), model="gpt-5"))
        message, _ = parse_response("openai-responses", r1)
        assert message.reasoning_reported and [c.id for c in message.tool_calls] == ["call_1"]
        second = to_responses(a_view(*call_turn("call_1")), model="gpt-5")
        provider.complete(second)
        # the call left the view (evicted): its reasoning is not sent, and no longer held
        third = to_responses(
            a_view(ViewMessage("assistant", "Fixed: add returns a + b."), ViewMessage("user", "anything else?")),
            model="gpt-5",
        )
        provider.complete(third)
    sent = server.bodies
    assert "previous_response_id" not in sent[1] and sent[1]["store"] is False
    assert sent[1]["include"] == ["reasoning.encrypted_content"]
    assert sent[1]["input"] == [
        {"type": "message", "role": "user", "content": "Fix the failing test in calc.py."},
        {
            "type": "reasoning",
            "id": "rs_fake1",
            "encrypted_content": ENCRYPTED,
            "summary": [{"type": "summary_text", "text": "The test fails on add; read calc.py first."}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": '{"path": "calc.py"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "def add(a, b): return a - b"},
    ]
    assert validate_responses(sent[1]) == []
    assert second["input"][1]["type"] == "function_call"  # the caller's body is left as it was
    assert [i["type"] for i in sent[2]["input"]] == ["message", "message", "message"]
    assert provider._reasoning == {}


def test_a_reasoning_item_without_encrypted_content_is_not_kept():
    # a server that ignored include: a reasoning item with no encrypted_content cannot be sent back statelessly
    with serve_responses(
        [Reply(reasoning="thinking", tool_calls=[ToolUse("c1", "shell", "{}")]), Reply("ok")]
    ) as server:
        provider = OpenAIResponsesProvider("gpt-5", base_url=server.base_url)
        provider.complete({"model": "gpt-5", "input": [{"role": "user", "content": "go"}]})
        provider.complete(to_responses(a_view(*call_turn("c1", "shell", "{}")), model="gpt-5"))
    assert [i["type"] for i in server.bodies[1]["input"]] == ["message", "function_call", "function_call_output"]


def test_context_length_exceeded_is_provider_overflow_at_once_or_in_the_stream():
    with serve_responses([responses_overflow()]) as server:
        provider = OpenAIResponsesProvider("gpt-5", base_url=server.base_url, max_retries=2)
        with pytest.raises(ProviderOverflow) as info:
            provider.complete(to_responses(a_view(), model="gpt-5"))
    assert str(info.value) == (
        "openai-responses: HTTP 400: Your input exceeds the context window of this model. "
        "Please adjust your input and try again."
    )
    assert (info.value.status, info.value.prompt_tokens, info.value.limit_tokens) == (400, None, None)
    assert len(server.requests) == 1  # never retried
    failed = Reply(
        stream_error={
            "code": "context_length_exceeded",
            "message": "This model's maximum context length "
            "is 272000 tokens. However, your messages resulted in 280113 tokens.",
        }
    )
    with serve_responses([failed]) as server:
        provider = OpenAIResponsesProvider("gpt-5", base_url=server.base_url)
        with pytest.raises(ProviderOverflow) as info:
            provider.complete(to_responses(a_view(), model="gpt-5"))
    assert str(info.value).startswith("openai-responses: error in the response stream: This model's maximum")
    assert (info.value.prompt_tokens, info.value.limit_tokens, info.value.status) == (280113, 272000, None)


def test_other_failures_are_one_line_errors():
    with serve_responses(
        [Reply(stream_error={"code": "server_error", "message": "The model failed.\nRetry."})]
    ) as server:
        provider = OpenAIResponsesProvider("gpt-5", base_url=server.base_url)
        with pytest.raises(ProviderError) as info:
            provider.complete(to_responses(a_view(), model="gpt-5"))
    assert str(info.value) == "openai-responses: error in the response stream: The model failed. Retry."
    assert not isinstance(info.value, ProviderOverflow)
    bad = openai_error(400, "Invalid type for 'input[1].output': expected a string.", param="input[1].output")
    with serve_responses([rate_limited("openai", retry_after="0"), bad]) as server:
        provider = OpenAIResponsesProvider("gpt-5", base_url=server.base_url, max_retries=1)
        with pytest.raises(
            ProviderError,
            match=r"^openai-responses: HTTP 400: Invalid type for 'input\[1\]\.output': "
            r"expected a string\.$",
        ) as info:
            provider.complete(to_responses(a_view(), model="gpt-5"))
    assert info.value.status == 400 and len(server.requests) == 2  # the 429 was retried, the 400 was not


def test_the_assembler_refuses_a_truncated_stream():
    created = {"type": "response.created", "response": {"id": "resp_1", "output": []}}
    with pytest.raises(ProviderError, match=r"^openai-responses: the stream ended before response\.completed$"):
        assemble_response([created, {"type": "response.output_text.delta", "output_index": 0, "delta": "hi"}])
    with pytest.raises(ProviderError, match=r"the stream ended before response\.created$"):
        assemble_response([])


def test_the_provider_is_a_registered_builtin_plugin(monkeypatch):
    plugins.reset_plugin_manager()
    assert plugins.get_provider("openai-responses") is OpenAIResponsesProvider
    assert plugins.registered("providers")["openai-responses"].plugin.builtin
    p = OpenAIResponsesProvider.from_options("gpt-5", base_url="http://127.0.0.1:1/v1")
    assert isinstance(p, Provider) and (p.name, p.wire, p.model) == ("openai-responses", "openai-responses", "gpt-5")
    assert "sk-test" not in repr(p)
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(
        ProviderError,
        match=r"^openai-responses: no API key: the environment variable OPENAI_API_KEY "
        r"is not set",
    ):
        OpenAIResponsesProvider.from_options("gpt-5")


# ------------------------------------------------------------------------------------------ end to end
def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200", **extra})
    return env


def latch(tmp_path: Path, *args: str, cwd: Path, env: dict[str, str]):
    return subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_latch_run_on_the_responses_api_round_trips_reasoning_and_records_usage(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    usage = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4096},
        "output_tokens": 80,
        "output_tokens_details": {"reasoning_tokens": 64},
    }
    script = [
        Reply(
            reasoning="Write the file, then check it.",
            encrypted_reasoning=ENCRYPTED,
            usage=usage,
            tool_calls=[ToolUse("call_w", "write_file", json.dumps({"path": "hello.txt", "content": "hi\n"}))],
        ),
        Reply("Wrote hello.txt.", usage=usage),
    ]
    with serve_responses(script) as server:
        r = latch(
            tmp_path,
            "run",
            "write hello.txt",
            "--provider",
            "openai-responses",
            "--model",
            "gpt-5",
            "--base-url",
            server.base_url,
            "--yes",
            "--tool-choice",
            "write_file",
            "--window",
            "200000",
            "--reserve",
            "4096",
            cwd=ws,
            env=_env(tmp_path, OPENAI_API_KEY="sk-test-run"),
        )
        bodies = server.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert (ws / "hello.txt").read_text() == "hi\n" and "Wrote hello.txt." in r.stdout
    assert len(bodies) == 2 and all(
        validate_responses({k: v for k, v in b.items() if k != "stream"}) == [] for b in bodies
    )
    assert bodies[0]["tool_choice"] == {"type": "function", "name": "write_file"}
    assert bodies[0]["max_output_tokens"] == 4096 and bodies[0]["model"] == "gpt-5"
    kinds = [i.get("type") for i in bodies[1]["input"]]
    at = kinds.index("reasoning")
    assert bodies[1]["input"][at]["encrypted_content"] == ENCRYPTED
    assert kinds[at + 1] == "function_call" and bodies[1]["input"][at + 1]["call_id"] == "call_w"
    assert kinds[at + 2] == "function_call_output"
    with sqlite3.connect(tmp_path / "latch.db") as db:
        rows = [json.loads(p) for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'usage' ORDER BY seq")]
    assert [(u["input_tokens"], u["cache_read_tokens"], u["output_tokens"]) for u in rows] == [(904, 4096, 80)] * 2


@pytest.mark.parametrize("name", ["codex/edgerunner_codex-session.jsonl", "claude-code/bastion_claude-session.jsonl"])
def test_latch_view_renders_a_corpus_session_as_a_valid_responses_body(tmp_path, name):
    path = require_corpus() / name
    r = latch(tmp_path, "view", str(path), "--request", "3", "--format", "responses", cwd=tmp_path, env=_env(tmp_path))
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert validate_responses(body) == []
    assert body["store"] is False and "previous_response_id" not in body
    assert any(i.get("type") == "function_call" for i in body["input"]) and body["tools"]
