"""Wire formats (OpenAI chat completions, Anthropic Messages), their validators, canonical bytes, providers."""

from __future__ import annotations

import base64

import pytest

from latch.engine.port import ComponentTokens, ContextBudget, ContextView, ViewMessage, ViewToolCall
from latch.events import MediaRef
from latch.providers import (
    Provider,
    ProviderError,
    ScriptedProvider,
    canonical_request_bytes,
    common_prefix_bytes,
    common_prefix_tokens,
    to_anthropic_messages,
    to_openai_chat,
    validate_anthropic_messages,
    validate_openai_chat,
)
from latch.providers._wire import DERIVED_TOOL_DESCRIPTION, _plain, tool_schema, wire_tools
from latch.providers.anthropic.messages import CONTINUATION_NOTE, wire_tool_id


def view(*messages, system="You are Latch.", tools=()):
    return ContextView(
        session_id="s1",
        system=system,
        tools=tuple(tools),
        messages=tuple(messages),
        tokens=ComponentTokens(),
        budget=ContextBudget(),
    )


def U(text, **kw):
    return ViewMessage("user", text, **kw)


def A(text="", *calls, **kw):
    return ViewMessage("assistant", text, tool_calls=tuple(calls), **kw)


def T(cid, text, **kw):
    return ViewMessage("tool", text, tool_call_id=cid, **kw)


def C(cid, name="Bash", args='{"command": "ls"}'):
    return ViewToolCall(cid, name, args)


PNG = b"\x89PNG\r\n\x1a\nfake"
PNG_REF = MediaRef(sha256="ab" * 32, media_type="image/png", byte_size=len(PNG), width=2, height=3)
PNG_B64 = base64.b64encode(PNG).decode()


def loader(sha):
    assert sha == PNG_REF.sha256
    return PNG


PARALLEL = view(
    U("workspace /repo", kind="session_context"),
    U("<kernel_context r=1>goal: fix</kernel_context>", kind="kernel_context"),
    U("run both", seq=10),
    A("Running.", C("c1"), C("c2", "Read", '{"path": "a.py"}'), seq=11),
    T("c2", "print(1)", seq=13),  # parallel results arrive out of call order
    T("c1", "boom", is_error=True, seq=12),
    A("Done.", seq=14),
)


def test_openai_parallel_calls_results_in_call_order():
    body = to_openai_chat(PARALLEL, model="gpt-x")
    assert body == {
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "You are Latch."},
            {"role": "user", "content": "workspace /repo"},
            {"role": "user", "content": "<kernel_context r=1>goal: fix</kernel_context>"},
            {"role": "user", "content": "run both"},
            {
                "role": "assistant",
                "content": "Running.",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "Read", "arguments": '{"path": "a.py"}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "[error] boom"},
            {"role": "tool", "tool_call_id": "c2", "content": "print(1)"},
            {"role": "assistant", "content": "Done."},
        ],
        "tools": [  # the view has no schemas: minimal ones derived from its calls, so a provider accepts the calls
            {
                "type": "function",
                "function": {"name": n, "description": DERIVED_TOOL_DESCRIPTION, "parameters": {"type": "object"}},
            }
            for n in ("Bash", "Read")
        ],
    }
    assert validate_openai_chat(body) == []
    del body["tools"]
    assert validate_openai_chat(body) == [
        "tools: the messages call tools but the body declares none (providers reject tool blocks without tools)"
    ]
    # the session's tool vocabulary first: a list that stays the same from request to request
    known = to_openai_chat(PARALLEL, known_tools=["Grep", "Read"])["tools"]
    assert [t["function"]["name"] for t in known] == ["Grep", "Read", "Bash"]
    # a view with its own schemas declares exactly those (an agent's call to a tool it was not offered derives none)
    own = to_openai_chat(
        view(
            U("go"),
            A("", C("c1", "Nope")),
            T("c1", "no such tool"),
            tools=({"name": "Bash", "input_schema": {"type": "object"}},),
        )
    )
    assert [t["function"]["name"] for t in own["tools"]] == ["Bash"]


def test_anthropic_parallel_calls_merged_roles_and_is_error():
    body = to_anthropic_messages(PARALLEL, model="claude-x", max_tokens=1024)
    assert body == {
        "model": "claude-x",
        "max_tokens": 1024,
        "system": "You are Latch.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "workspace /repo"},
                    {"type": "text", "text": "<kernel_context r=1>goal: fix</kernel_context>"},
                    {"type": "text", "text": "run both"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Running."},
                    {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "c2", "name": "Read", "input": {"path": "a.py"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c1",
                        "content": [{"type": "text", "text": "boom"}],
                        "is_error": True,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "c2",
                        "content": [{"type": "text", "text": "print(1)"}],
                        "is_error": False,
                    },
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ],
        "tools": [
            {"name": n, "description": DERIVED_TOOL_DESCRIPTION, "input_schema": {"type": "object"}}
            for n in ("Bash", "Read")
        ],
    }
    assert validate_anthropic_messages(body) == []
    del body["tools"]
    assert validate_anthropic_messages(body) == [
        "tools: the messages call tools but the body declares none (providers reject tool blocks without tools)"
    ]


def test_orphan_and_duplicate_results_become_user_notes():
    v = view(U("go"), A("", C("c1")), T("c1", "ok"), T("c1", "again"), U("next"), T("ghost", "late", is_error=True))
    oa = to_openai_chat(v)
    assert oa["messages"][1:] == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "[tool result for call c1 whose call is not in this view]\nagain"},
        {"role": "user", "content": "next"},
        {"role": "user", "content": "[tool result for call ghost whose call is not in this view (error)]\nlate"},
    ]
    assert validate_openai_chat(oa) == []
    an = to_anthropic_messages(v)
    assert [m["role"] for m in an["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in an["messages"][2]["content"]] == ["tool_result", "text", "text", "text"]
    assert an["messages"][2]["content"][3]["text"].startswith("[tool result for call ghost")
    assert validate_anthropic_messages(an) == []


def test_images_with_and_without_loader():
    v = view(U("look", media=(PNG_REF,)), A("", C("s1", "screenshot", "{}")), T("s1", "", media=(PNG_REF,)))
    oa = to_openai_chat(v, loader)
    assert oa["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        ],
    }
    # tool messages carry text only: the image follows in one user message after all results
    assert oa["messages"][3:] == [
        {"role": "tool", "tool_call_id": "s1", "content": "(image output)"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[media returned by tool call s1]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
            ],
        },
    ]
    assert validate_openai_chat(oa) == []
    an = to_anthropic_messages(v, loader)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
    assert an["messages"][0]["content"] == [{"type": "text", "text": "look"}, image]
    assert an["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "s1", "content": [image], "is_error": False}
    ]
    assert validate_anthropic_messages(an) == []
    placeholder = f"[image image/png 2x3, {len(PNG)} bytes, sha256 {'ab' * 8}: not loaded]"
    assert to_openai_chat(v)["messages"][1]["content"][1] == {"type": "text", "text": placeholder}
    assert to_anthropic_messages(v)["messages"][0]["content"][1] == {"type": "text", "text": placeholder}


def test_anthropic_first_message_user_and_empty_messages_dropped():
    v = view(A("Picking up where we were."), U("   "), A("", C("c1")), T("c1", ""), system="")
    an = to_anthropic_messages(v)
    assert "system" not in an
    assert an["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": CONTINUATION_NOTE}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Picking up where we were."},
                {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": [{"type": "text", "text": "(no output)"}],
                    "is_error": False,
                }
            ],
        },
    ]
    assert validate_anthropic_messages(an) == []
    oa = to_openai_chat(v)
    assert [m["role"] for m in oa["messages"]] == ["assistant", "assistant", "tool"]
    assert oa["messages"][2]["content"] == "(no output)"
    assert validate_openai_chat(oa) == []


def test_tool_ids_and_arguments_made_valid_for_anthropic():
    assert wire_tool_id("toolu_01AbC-d") == "toolu_01AbC-d"
    rewritten = wire_tool_id("call_5iDd#2")
    assert rewritten.startswith("call_5iDd_2_") and len(rewritten) == len("call_5iDd_2_") + 8
    assert rewritten != wire_tool_id("call_5iDd_2")
    v = view(U("x"), A("", C("call_5iDd#2", "patch", "*** Begin Patch")), T("call_5iDd#2", "done"))
    an = to_anthropic_messages(v)
    assert an["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": rewritten,
        "name": "patch",
        "input": {"arguments": "*** Begin Patch"},
    }
    assert an["messages"][2]["content"][0]["tool_use_id"] == rewritten
    assert validate_anthropic_messages(an) == []


def test_tool_schemas_from_every_shape():
    params = {"type": "object", "properties": {"command": {"type": "string"}}}
    tools = [
        {"type": "function", "function": {"name": "bash", "description": "Run", "parameters": params}},
        {"name": "read", "description": "Read a file", "input_schema": params},
        {"name": "noop"},
    ]
    oa = to_openai_chat(view(U("x"), tools=tools))
    assert oa["tools"] == [
        {"type": "function", "function": {"name": "bash", "description": "Run", "parameters": params}},
        {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": params}},
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
    ]
    an = to_anthropic_messages(view(U("x"), tools=tools))
    assert an["tools"] == [
        {"name": "bash", "description": "Run", "input_schema": params},
        {"name": "read", "description": "Read a file", "input_schema": params},
        {"name": "noop", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert validate_openai_chat(oa) == [] and validate_anthropic_messages(an) == []
    with pytest.raises(ValueError, match="tool 1: a tool schema needs a non-empty string 'name'"):
        to_openai_chat(view(U("x"), tools=[tools[0], {"description": "nameless"}]))
    with pytest.raises(ValueError, match="view message 0: unknown role 'system'"):
        to_anthropic_messages(view(ViewMessage("system", "x")))


def test_each_body_gets_its_own_copy_of_the_tool_schemas():
    params = {"type": "object", "properties": {"path": {"type": "string", "enum": ["a", "b"]}}, "required": ["path"]}
    tools = ({"name": "read", "description": "Read", "input_schema": params},)
    for _ in range(2):  # the list's first body, then one from its kept schemas, each changed by its caller
        body = to_anthropic_messages(view(U("x"), tools=tools))
        body["tools"][0]["input_schema"]["properties"]["path"]["enum"].append("c")
        body["tools"][0]["input_schema"]["required"].clear()
    for body in (to_anthropic_messages(view(U("x"), tools=tools)), to_openai_chat(view(U("y"), tools=tools))):
        got = body["tools"][0].get("input_schema") or body["tools"][0]["function"]["parameters"]
        assert got == params and got is not params
    assert params["properties"]["path"]["enum"] == ["a", "b"] and params["required"] == ["path"]
    params["properties"]["path"]["enum"].append("d")  # the caller's schema changed in place: the next body shows it
    assert to_anthropic_messages(view(U("z"), tools=tools))["tools"][0]["input_schema"]["properties"]["path"][
        "enum"
    ] == ["a", "b", "d"]


class _Str(str):
    pass


@pytest.mark.parametrize(
    "params",
    [
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 1.5, "default": None}}},
        {"type": "object", "properties": {"f": {"enum": [True, False, 1, 0, -0.0, "1"]}}, "x": ("a", ("b",))},
        {1: {"2": [3, (4, {5: 6})]}},  # non-string keys and tuples: made str and lists
        {"type": "object", "items": {"a", "b"}},  # a set leaf (not JSON): as it is
        {"type": "object", "description": _Str("kept as its own type")},
        {"type": "object", "default": b"bytes", "other": bytearray(b"bytes")},
    ],
)
def test_wire_tools_match_a_plain_copy_of_each_schema(params):
    tools = ({"name": "t", "description": "d", "parameters": params}, {"type": "function", "function": {"name": "u"}})
    for _ in range(3):  # the first call and the kept ones
        got = wire_tools(view(U("x"), tools=tools))
        assert (
            got
            == [tool_schema(s, i) for i, s in enumerate(tools)]
            == [
                ("t", "d", _plain(params)),
                ("u", "", {"type": "object", "properties": {}}),
            ]
        )
        assert [type(v) for v in got[0][2].values()] == [type(v) for v in _plain(params).values()]


def test_unanswered_call_is_rendered_faithfully_and_caught():
    v = view(U("x"), A("", C("c1"), C("c2")), T("c1", "ok"), U("y"))
    assert validate_openai_chat(to_openai_chat(v)) == [
        "messages[2]: tool call 'c2' (Bash) is not answered by the tool messages that follow it "
        "(next non-tool message: 4)"
    ]
    assert validate_anthropic_messages(to_anthropic_messages(v)) == [
        "messages[2]: tool_use 'c2' (Bash) has no tool_result in this message"
    ]


# ------------------------------------------------------------------------ validators, one violation each
def _declaring_calls(body: dict) -> dict:
    """``body`` with ``tools`` declaring every tool its messages call (what the case under test is not about)."""
    names = [
        c["function"]["name"]
        for m in body["messages"]
        if isinstance(m, dict)
        for c in (m.get("tool_calls") or [])
        if isinstance(c, dict) and isinstance(c.get("function"), dict)
    ]
    names += [
        b["name"]
        for m in body["messages"]
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use" and "name" in b
    ]
    if names:
        body["tools"] = (
            [{"type": "function", "function": {"name": n}} for n in dict.fromkeys(names)]
            if "tool_calls" in str(body)
            else [{"name": n, "input_schema": {}} for n in dict.fromkeys(names)]
        )
    return body


def oa_call(cid, name="f"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


@pytest.mark.parametrize(
    "messages, expected",
    [
        ([], "messages: must be a non-empty list"),
        ([{"role": "user", "content": ""}], "messages[0] (user): empty content"),
        ([{"role": "user", "content": [{"type": "text", "text": " "}]}], "messages[0] (user): part 0: empty text"),
        (
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": None}],
            "messages[1] (assistant): neither content nor tool_calls",
        ),
        (
            [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [oa_call("a")]}],
            "messages[1]: tool call 'a' (f) is not answered by the tool messages that follow it (next non-tool message: 2)",
        ),
        (
            [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "a", "content": "r"}],
            "messages[1] (tool): result for 'a' without its call in the preceding assistant message (orphan)",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [oa_call("a"), oa_call("b")]},
                {"role": "tool", "tool_call_id": "b", "content": "r"},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
            "messages[1] (tool): result for 'b' before the result for 'a' (parallel results must follow call order)",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [oa_call("a")]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
            "messages[2] (tool): second result for call 'a'",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]}],
            "messages[0].tool_calls[0]: type must be 'function' with a function object",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [oa_call("a"), oa_call("a")]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
            "messages[0].tool_calls[1]: duplicate call id 'a'",
        ),
        ([{"role": "critic", "content": "x"}], "messages[0]: unknown role 'critic'"),
    ],
)
def test_openai_validator_catches(messages, expected):
    assert validate_openai_chat(_declaring_calls({"messages": messages})) == [expected]


def test_openai_validator_catches_text_between_call_and_result_and_bad_tools():
    body = {
        "messages": [
            {"role": "assistant", "tool_calls": [oa_call("a")]},
            {"role": "user", "content": "hm"},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "f"}},
            {"type": "function", "function": {"name": "f"}},
            {"name": "g"},
        ],
    }
    assert validate_openai_chat(body) == [
        "messages[0]: tool call 'a' (f) is not answered by the tool messages that follow it (next non-tool message: 1)",
        "messages[2] (tool): result for 'a' without its call in the preceding assistant message (orphan)",
        "tools[1]: duplicate tool name 'f'",
        "tools[2]: must be {'type': 'function', 'function': {'name': ...}}",
    ]


def txt(t="x"):
    return {"type": "text", "text": t}


def use(cid, name="f"):
    return {"type": "tool_use", "id": cid, "name": name, "input": {}}


def res(cid, is_error=False):
    return {"type": "tool_result", "tool_use_id": cid, "content": "r", "is_error": is_error}


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def asst(*blocks):
    return {"role": "assistant", "content": list(blocks)}


@pytest.mark.parametrize(
    "messages, expected",
    [
        ([], ["messages: must be a non-empty list"]),
        ([asst(txt())], ["messages[0]: the first message must be a user message"]),
        ([user(txt()), user(txt())], ["messages[1]: two user messages in a row (roles must alternate)"]),
        ([user(txt(""))], ["messages[0].content[0]: text blocks must be non-empty"]),
        ([user()], ["messages[0]: content must be a non-empty string or list of blocks"]),
        (
            [user(txt()), asst(use("a")), user(txt())],
            ["messages[2]: tool_use 'a' (f) has no tool_result in this message"],
        ),
        (
            [user(txt()), asst(use("a")), asst(txt())],
            [
                "messages[2]: two assistant messages in a row (roles must alternate)",
                "messages[2]: tool_use ['a'] not answered before this assistant message",
            ],
        ),
        (
            [user(txt()), asst(use("a"))],
            ["messages[1]: tool_use ['a'] never answered (the request ends after the assistant message)"],
        ),
        (
            [user(res("a"))],
            [
                "messages[0].content[0]: tool_result for 'a' without its tool_use in the preceding assistant "
                "message (orphan)"
            ],
        ),
        (
            [user(txt()), asst(use("a"), use("b")), user(res("b"), res("a"))],
            ["messages[2]: tool_result blocks ['b', 'a'] do not follow tool_use order ['a', 'b']"],
        ),
        (
            [user(txt()), asst(use("a")), user(txt(), res("a"))],
            ["messages[2]: tool_result blocks must come before other content"],
        ),
        (
            [user(txt()), asst(use("a")), user(res("a"), res("a"))],
            ["messages[2].content[1]: second tool_result for 'a'"],
        ),
        ([user(use("a"))], ["messages[0].content[0]: tool_use outside an assistant message"]),
        (
            [user(txt()), asst(use("a#1")), user(res("a#1"))],
            ["messages[1].content[0]: tool_use id must match [A-Za-z0-9_-]+"],
        ),
        (
            [user(txt()), asst(use("a")), user(res("a")), asst(use("a")), user(res("a"))],
            ["messages[3].content[0]: duplicate tool_use id 'a'"],
        ),
        (
            [user({"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA=="}})],
            [
                "messages[0].content[0]: base64 image needs media_type in image/png, image/jpeg, image/gif, image/webp and data"
            ],
        ),
    ],
)
def test_anthropic_validator_catches(messages, expected):
    assert validate_anthropic_messages(_declaring_calls({"messages": messages})) == expected


def test_anthropic_validator_tools_and_system():
    body = {
        "system": 3,
        "messages": [user(txt())],
        "tools": [{"name": "f", "input_schema": {}}, {"name": "f", "input_schema": {}}, {"name": "g"}],
    }
    assert validate_anthropic_messages(body) == [
        "system: must be a string or a list of text blocks",
        "tools[1]: duplicate tool name 'f'",
        "tools[2]: input_schema must be a JSON schema object",
    ]


# ------------------------------------------------------------------------ canonical bytes
def test_canonical_request_bytes_are_append_only_and_prefix_is_measured():
    first = view(U("hi"), A("hello"))
    second = view(U("hi"), A("hello"), U("again"))
    b1, b2 = canonical_request_bytes(first), canonical_request_bytes(second)
    assert b1 == (
        b'{"system":"You are Latch."}\n{"tools":[]}\n{"content":"hi","role":"user"}\n'
        b'{"content":"hello","role":"assistant"}\n'
    )
    assert b2.startswith(b1)
    assert common_prefix_bytes(b1, b2) == len(b1)
    assert common_prefix_tokens(b1, b2, len) == len(b1.decode())
    assert common_prefix_tokens(b"", b2, len) == 0
    # "é" (c3 a9) vs "ê" (c3 aa) share a lead byte: the prefix backs off to the character boundary
    assert common_prefix_bytes("abé".encode(), "abê".encode()) == 2
    assert common_prefix_tokens("abé".encode(), "abê".encode(), len) == 2


# ------------------------------------------------------------------------ providers
def test_scripted_provider_replays_in_order():
    p = ScriptedProvider([{"id": "r1"}, lambda body: {"echo": len(body["messages"])}], name="script")
    assert isinstance(p, Provider)
    assert p.complete({"messages": []}) == {"id": "r1"}
    assert p.complete({"messages": [1, 2]}) == {"echo": 2}
    assert p.requests == [{"messages": []}, {"messages": [1, 2]}] and p.remaining == 0
    with pytest.raises(ProviderError, match="script: request 3 has no scripted response \\(the script has 2\\)"):
        p.complete({})


def test_the_validators_require_a_model_when_asked():
    view_body = {"messages": [{"role": "user", "content": "hi"}]}
    assert validate_openai_chat(view_body) == []
    assert validate_openai_chat(view_body, require_model=True) == ["model: missing (every request names its model)"]
    assert validate_openai_chat({**view_body, "model": "gpt-4.1"}, require_model=True) == []
    assert validate_anthropic_messages(view_body, require_model=True) == [
        "model: missing (every request names its model)"
    ]
    assert validate_anthropic_messages({**view_body, "model": ""}, require_model=True) != []
    assert validate_anthropic_messages({**view_body, "model": "claude-sonnet-4"}, require_model=True) == []
