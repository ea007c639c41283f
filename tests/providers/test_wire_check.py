"""WireCheck: a run of views checked as far as each is new gives, view after view, the violations of rendering and
validating each view whole; the validators' resumed scans give their whole scans' violations."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latch.engine.port import ComponentTokens, ContextBudget, ContextView, ViewMessage, ViewToolCall
from latch.events import MediaRef
from latch.providers import (
    WireCheck,
    to_anthropic_messages,
    to_openai_chat,
    to_responses,
    validate_anthropic_messages,
    validate_openai_chat,
    validate_responses,
)
from latch.providers._wire import ScanResume
from latch.providers.anthropic.messages import MessagesScan
from latch.providers.openai.chat import ChatScan
from latch.providers.openai.responses import ResponsesScan

TOOLS = ({"name": "Bash", "description": "run", "input_schema": {"type": "object"}},)
PNG = MediaRef(sha256="ab" * 32, media_type="image/png", byte_size=10, width=2, height=3)


def view(messages, system="You are Latch.", tools=TOOLS):
    return ContextView(
        session_id="s1",
        system=system,
        tools=tuple(tools),
        messages=tuple(messages),
        tokens=ComponentTokens(),
        budget=ContextBudget(),
    )


def U(text="do it", **kw):
    return ViewMessage("user", text, **kw)


def A(text="", *calls, **kw):
    return ViewMessage("assistant", text, tool_calls=tuple(calls), **kw)


def T(cid, text="ok", **kw):
    return ViewMessage("tool", text, tool_call_id=cid, **kw)


def C(cid, name="Bash", args='{"command": "ls"}'):
    return ViewToolCall(cid, name, args)


def whole(v, model="m", max_tokens=100):
    """What WireCheck must give: each body rendered and validated whole."""
    return (
        validate_openai_chat(to_openai_chat(v))
        + validate_anthropic_messages(to_anthropic_messages(v, max_tokens=max_tokens))
        + validate_responses(to_responses(v, model=model))
    )


def run(views, **kw):
    """Each view through one WireCheck, in order, each result asserted equal to the whole check's."""
    check = WireCheck(model="m", max_tokens=100, **kw)
    out = []
    for v in views:
        got = check.problems(v)
        assert got == whole(v), v
        out.append(got)
    return out


def epoch():
    """A valid run of messages: a request, two turns with their results, a reply, a note."""
    return [
        U("fix the rounding"),
        A("looking", C("c1"), C("c2", args='{"command": "cat a.py"}')),
        T("c1", "a.py b.py"),
        T("c2", "def f(): ..."),
        A("", C("c3")),
        T("c3", "", is_error=True),
        A("done"),
        U("[state] the plan", kind="kernel_context"),
    ]


def test_an_epoch_grown_request_by_request_is_valid_at_every_step():
    msgs = epoch()
    assert run([view(msgs[: n + 1]) for n in range(len(msgs))]) == [
        whole(view(msgs[: n + 1])) for n in range(len(msgs))
    ]
    assert whole(view(msgs)) == []


@pytest.mark.parametrize(
    "defect",
    [
        pytest.param(lambda m: m[:2] + m[3:], id="a result dropped"),
        pytest.param(lambda m: m[:2] + [T("c9", "a.py")] + m[3:], id="a result answering no call"),
        pytest.param(lambda m: m[:1] + [A("x", C("c1"), C("c1"))] + m[2:], id="a call id twice in one turn"),
        pytest.param(lambda m: m[:4] + [A("", C("c1"))] + m[5:], id="a call id used twice"),
        pytest.param(lambda m: m[:4] + [A("", C("c3", name=""))] + m[5:], id="a call without a name"),
        pytest.param(lambda m: m[:1] + [A("x", C("c 1"))] + m[2:], id="a call id the Messages API rejects"),
    ],
)
def test_a_defect_in_the_middle_of_a_kept_prefix_is_caught(defect):
    msgs = epoch() + [U("next"), A("", C("c4")), T("c4", "more"), A("fine")]
    good = [view(msgs[: n + 1]) for n in range(len(msgs))]
    bad = view(defect(msgs))
    assert whole(bad)  # each defect is one the whole check reports
    # every prefix checked first (the message objects are the same), then the defect in their middle
    out = run([*good, bad, good[-1]])
    assert out[-2] == whole(bad) and out[-1] == []


def test_a_message_seen_before_at_another_position_is_checked_there():
    msgs = epoch()
    turn = msgs[1]  # calls c1 and c2, answered right after it: valid in its place
    moved = [*msgs, turn]  # the same object again at the end: its calls unanswered, its ids used twice
    out = run([view(msgs), view(moved)])
    assert out[0] == []
    assert any("is not answered" in p for p in out[1])
    assert any("duplicate tool_use id 'c1'" in p for p in out[1])
    assert any("duplicate call_id 'c1'" in p for p in out[1])
    first = [turn, *msgs[2:]]  # first in a view: the Messages body starts with the continuation note
    assert run([view(msgs), view(first)])[1] == whole(view(first))


def test_the_same_text_under_another_role_is_checked_as_that_role():
    text = "the output"
    answered = [U("go"), A("", C("c5")), T("c5", text)]
    as_user = [U("go"), A("", C("c5")), U(text)]  # the same text as a user message: the call is left unanswered
    out = run([view(answered), view(as_user), view(answered)])
    assert out[0] == [] == out[2]
    assert any("'c5'" in p for p in out[1])


def test_a_result_that_comes_after_a_kept_turn_joins_it():
    ask, turn = U("go"), A("", C("c1"), C("c2"))
    out = run(
        [
            view([ask, turn]),  # both calls open
            view([ask, turn, U("wait")]),  # still open, a user message after them
            view([ask, turn, T("c1")]),  # the message after the turn is now its result: one call open
            view([ask, turn, T("c1"), T("c2")]),
            view([ask, turn, T("c2")]),
        ]
    )
    assert out[3] == [] and all(out[k] for k in (0, 1, 2, 4))
    assert not any("orphan" in p or "without" in p for p in out[2])


def test_a_call_id_repeated_after_the_kept_prefix_is_caught():
    msgs = epoch()
    again = [*msgs, A("", C("c1")), T("c1", "again")]  # c1 was answered in the prefix; Messages wants unique ids
    out = run([view(msgs), view(again)])
    assert any("duplicate tool_use id 'c1'" in p for p in out[1])


def test_an_epoch_restart_and_a_changed_system_prompt_are_checked_whole():
    msgs = epoch()
    out = run(
        [
            view(msgs),
            view(msgs[4:]),  # a new epoch: the history's start dropped, an assistant turn first
            view(msgs[4:], system=""),
            view(msgs[4:], system="other"),
            view(msgs, tools=()),  # no schemas: derived from the calls
        ]
    )
    assert out[1] == whole(view(msgs[4:]))


def test_a_tool_schema_changed_in_place_is_checked_again():
    schema = {"name": "Bash", "input_schema": {"type": "object"}}
    tools = (schema,)
    msgs = epoch()
    check = WireCheck(model="m", max_tokens=100)
    assert check.problems(view(msgs, tools=tools)) == []
    schema["input_schema"] = "not a schema"  # the same tuple and dict, changed
    assert check.problems(view(msgs, tools=tools)) == whole(view(msgs, tools=tools)) != []
    schema["input_schema"] = {"type": "object"}
    assert check.problems(view(msgs, tools=tools)) == []


def test_unknown_roles_and_nameless_tools_raise_as_the_renderers_do():
    check = WireCheck(model="m", max_tokens=100)
    msgs = epoch()
    assert check.problems(view(msgs)) == []
    with pytest.raises(ValueError, match="view message 8: unknown role"):
        check.problems(view([*msgs, ViewMessage("system", "x")]))
    assert check.problems(view(msgs)) == []  # (the check goes on after the error)
    with pytest.raises(ValueError, match="name"):
        WireCheck().problems(view([U()], tools=({"description": "no name"},)))


def test_items_dropped_past_the_limit_are_rendered_again(monkeypatch):
    from latch.providers import wire_check

    monkeypatch.setattr(wire_check, "MAX_KEPT_ITEMS", 2)
    msgs = epoch()
    run([view(msgs[: n + 1]) for n in range(len(msgs))])


# --------------------------------------------------------------------------------------- resumed scans of bodies
def test_a_resumed_responses_scan_checks_a_reasoning_item_against_what_follows_it_now():
    head = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "reasoning", "summary": [], "encrypted_content": "x"},
    ]
    body = {"model": "m", "input": head, "store": False}
    resume: ScanResume[ResponsesScan] = ScanResume(ResponsesScan)
    first = validate_responses(body, resume=resume)
    assert first == validate_responses(body) and "not followed" in first[0]
    grown = {**body, "input": [*head, {"type": "message", "role": "assistant", "content": "ok"}]}
    assert validate_responses(grown, resume=resume) == validate_responses(grown) == []
    wrong = {**body, "input": [*head, {"type": "message", "role": "user", "content": "again"}]}
    assert validate_responses(wrong, resume=resume) == validate_responses(wrong) != []
    bare = [head[0], {"type": "reasoning", "summary": []}, grown["input"][-1]]  # no encrypted content
    for store in (True, False, True):  # store false needs it: the scan starts over when store changes
        body = {"model": "m", "input": bare, "store": store}
        assert validate_responses(body, resume=resume) == validate_responses(body)
    assert "no encrypted_content" in validate_responses({"model": "m", "input": bare, "store": False})[0]


def test_resumed_chat_and_messages_scans_keep_open_calls_and_seen_ids():
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    user = {"role": "user", "content": "go"}
    chat: ScanResume[ChatScan] = ScanResume(ChatScan)
    for messages in (
        [user, call],
        [user, call, {"role": "tool", "tool_call_id": "a", "content": "x"}],
        [user, call, user],
    ):
        body = {"messages": messages, "tools": [{"type": "function", "function": {"name": "f"}}]}
        assert validate_openai_chat(body, resume=chat) == validate_openai_chat(body)
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]}
    anthropic: ScanResume[MessagesScan] = ScanResume(MessagesScan)
    bodies = [[user, use], [user, use, result], [user, use, result, use, result], [user, use, user]]
    for messages in bodies:
        body = {"messages": messages, "tools": [{"name": "f", "input_schema": {}}]}
        assert validate_anthropic_messages(body, resume=anthropic) == validate_anthropic_messages(body)
    assert any("duplicate tool_use id" in p for p in validate_anthropic_messages({"messages": bodies[2]}))


# --------------------------------------------------------------------------------------- property
_IDS = ["c1", "c2", "c3", "c 4"]


@st.composite
def messages(draw):
    kind = draw(st.sampled_from(["user", "assistant", "turn", "tool", "note"]))
    text = draw(st.sampled_from(["", "  ", "text", "more text"]))
    if kind == "user":
        return U(text, media=(PNG,) if draw(st.booleans()) else ())
    if kind == "assistant":
        return A(text)
    if kind == "turn":
        ids = draw(st.lists(st.sampled_from(_IDS), min_size=1, max_size=3))
        return A(text, *[C(i, args=draw(st.sampled_from(['{"a": 1}', "[1]", "not json", ""]))) for i in ids])
    if kind == "tool":
        return T(
            draw(st.sampled_from(_IDS)), text, is_error=draw(st.booleans()), media=(PNG,) if draw(st.booleans()) else ()
        )
    return U(text or "note", kind="kernel_context")


@st.composite
def runs(draw):
    """Views in a run: each the previous one grown, cut, with a message dropped, replaced or moved (the other
    messages the same objects), or a new start."""
    pool = draw(st.lists(messages(), min_size=1, max_size=12))
    current = draw(st.lists(st.sampled_from(pool), max_size=8))
    views = [list(current)]
    for _ in range(draw(st.integers(1, 8))):
        step = draw(st.sampled_from(["grow", "grow", "cut", "drop", "replace", "move", "restart"]))
        if step == "grow":
            current = current + draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        elif step == "cut" and current:
            current = current[: draw(st.integers(0, len(current) - 1))]
        elif step in ("drop", "replace", "move") and current:
            at = draw(st.integers(0, len(current) - 1))
            taken = current[at]
            current = current[:at] + current[at + 1 :]
            if step == "replace":
                current.insert(at, draw(st.sampled_from(pool)))
            elif step == "move":
                current.insert(draw(st.integers(0, len(current))), taken)
        elif step == "restart":
            current = draw(st.lists(st.sampled_from(pool), max_size=8))
        views.append(list(current))
    tools = draw(st.sampled_from([TOOLS, ()]))
    systems = st.sampled_from(["You are Latch.", "", "  ", "other"])
    return [view(m, tools=draw(st.sampled_from([tools, tools, ()])), system=draw(systems)) for m in views]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_view_of_a_run_gets_the_whole_checks_violations(views):
    run(views)
