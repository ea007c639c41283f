"""Conversation units: segmentation, rendering, token costs, canonical lines, the protocol validator."""

from __future__ import annotations

from array import array
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import hotpaths
from latch.engine.port import ViewMessage, ViewToolCall
from latch.engine.units import (
    MESSAGE_COSTS_KEPT,
    MESSAGE_OVERHEAD_TOKENS,
    NAMES_KEPT,
    TOOL_CALL_OVERHEAD_TOKENS,
    MessageCosts,
    TokenCounter,
    UnitBuilder,
    message_costs,
    message_line,
    suffix_fit,
    view_violations,
)
from latch.events import (
    EOF_PLACEHOLDER_TEXT,
    AssistantMessage,
    MediaRef,
    SystemNote,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)


class CharEstimator:
    """One token per character; images cost width*height/1000 (1000 when unknown)."""

    def estimate(self, text: str) -> int:
        return len(text)

    def image_tokens(self, width, height) -> int:
        return 1000 if width is None or height is None else width * height // 1000


def stored(seq, event):
    return SimpleNamespace(seq=seq, event=event, kind=event.KIND)


def call(cid, name="Read", args='{"path": "a.py"}'):
    return ToolCall(id=cid, name=name, arguments=args)


def segment(events):
    b = UnitBuilder()
    units = []
    for i, e in enumerate(events, 1):
        units.extend(b.feed(stored(i, e)))
    return units, b


def test_segmentation_keeps_tool_turns_whole_and_notes_out():
    units, b = segment(
        [
            UserMessage("fix it"),  # 1
            AssistantMessage("", (call("c1"), call("c2"))),  # 2
            Usage(input_tokens=5),  # 3 not visible
            ToolResult("c2", "two"),  # 4
            UserMessage("<env>", is_meta=True),  # 5 absorbed by the open turn
            ToolResult("c1", "one", is_error=True),  # 6 closes the turn
            SystemNote("api down", subtype="api_error"),  # 7 not visible
            AssistantMessage("done"),  # 8
            ToolResult("c9", "late", orphan=True),  # 9 own unit
            AssistantMessage("", (call("c3"),)),  # 10
            AssistantMessage("next"),  # 11 closes c3 with a placeholder
            AssistantMessage(""),  # 12 nothing visible
        ]
    )
    assert [u.seqs for u in units] == [(1,), (2, 4, 5, 6), (8,), (9,), (10,), (11,)]
    assert [u.close_seq for u in units] == [1, 6, 8, 9, 11, 11]
    turn = units[1].messages
    assert [(m.role, m.tool_call_id) for m in turn] == [
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
    ]
    assert turn[1].is_error and turn[1].content == "one" and turn[3].content == "<env>"
    assert units[3].messages[0].role == "user"
    assert units[3].messages[0].content.startswith("[result of tool call c9, whose call is not in this conversation]")
    placeholder = units[4].messages[1]
    assert (placeholder.role, placeholder.tool_call_id, placeholder.is_error, placeholder.seq) == (
        "tool",
        "c3",
        True,
        None,
    )
    assert units[0].user_turn and not units[1].user_turn
    assert b.pending_seq is None


def test_an_event_subclass_segments_as_its_event_class():
    class Prompt(UserMessage):
        pass

    class Reply(AssistantMessage):
        pass

    class Output(ToolResult):
        pass

    units, _ = segment([Prompt("hi"), Reply("", (call("c1"),)), Output("c1", "done"), Reply("ok")])
    assert [u.seqs for u in units] == [(1,), (2, 3), (4,)]
    assert [[m.role for m in u.messages] for u in units] == [["user"], ["assistant", "tool"], ["assistant"]]
    assert units[0].user_turn and units[1].messages[1].content == "done"


def test_open_turn_is_pending_until_all_results():
    units, b = segment([UserMessage("go"), AssistantMessage("", (call("c1"), call("c2"))), ToolResult("c1", "x")])
    assert [u.seqs for u in units] == [(1,)]
    assert b.pending_seq == 2


def test_costs_count_text_calls_ids_and_images():
    c = TokenCounter(CharEstimator())
    img = MediaRef("ab" * 32, "image/png", 10, width=2000, height=1000)
    units, _ = segment(
        [
            UserMessage("hello", media=(img,)),
            AssistantMessage("ok", (ToolCall("id1", "Read", "{}"),)),
            ToolResult("id1", "data"),
        ]
    )
    u0, u1 = units
    assert u0.cost(c) == MESSAGE_OVERHEAD_TOKENS + 5 + 2000
    assert u0.images == (1, 2000)
    call_t = MESSAGE_OVERHEAD_TOKENS + 2 + TOOL_CALL_OVERHEAD_TOKENS + 3 + 4 + 2
    result_t = MESSAGE_OVERHEAD_TOKENS + 4 + TOOL_CALL_OVERHEAD_TOKENS + 3
    assert u1.cost(c) == call_t + result_t
    assert u1.msg_tokens == (call_t, result_t)


class CountingEstimator(CharEstimator):
    """:class:`CharEstimator` that records every text it estimates."""

    def __init__(self):
        self.texts = []

    def estimate(self, text: str) -> int:
        self.texts.append(text)
        return len(text)


def fresh(text: str) -> str:
    """An equal str that is another object."""
    return "".join(list(text))


def tool_turn(seq_text="Running it.", args='{"command": "pytest -q"}', result="1 failed\n" * 40):
    return [
        UserMessage(fresh("fix the rounding")),
        AssistantMessage(fresh(seq_text), (ToolCall(fresh("toolu_1"), fresh("Bash"), fresh(args)),)),
        ToolResult(fresh("toolu_1"), fresh(result), is_error=True),
        AssistantMessage(fresh("Fixed.")),
    ]


def test_counters_of_one_estimator_price_the_same_texts_once_and_equal_copies_again():
    est = CountingEstimator()
    loop_side, engine_side = TokenCounter(est), TokenCounter(est)  # a request loop and its engine
    events = [stored(i, e) for i, e in enumerate(tool_turn(), 1)]
    loop_units = UnitBuilder().feed_all(events)
    costs = [u.cost(loop_side) for u in loop_units]
    priced = len(est.texts)
    # user; call message: text, id, name, arguments; result: its text (its id is the call's, priced once); answer
    assert priced == 1 + (1 + 3) + 1 + 1
    engine_units = UnitBuilder().feed_all(events)  # the same events: other messages holding the same texts
    assert [u.cost(engine_side) for u in engine_units] == costs
    assert [u.msg_tokens for u in engine_units] == [u.msg_tokens for u in loop_units]
    assert len(est.texts) == priced  # nothing estimated again
    # the same events decoded again (equal texts, other objects) are priced again, to the same tokens
    again = [stored(i, e) for i, e in enumerate(tool_turn(), 1)]
    assert [u.cost(engine_side) for u in UnitBuilder().feed_all(again)] == costs
    assert len(est.texts) == 2 * priced
    # another estimator object shares nothing
    other = CountingEstimator()
    assert [u.cost(TokenCounter(other)) for u in UnitBuilder().feed_all(events)] == costs
    assert len(other.texts) == priced


def test_a_kept_price_answers_only_for_the_same_texts_calls_and_media():
    est = CountingEstimator()
    c = TokenCounter(est)
    text, cid, args = fresh("Reading it."), fresh("toolu_9"), fresh('{"path": "a.py"}')
    m = ViewMessage(role="assistant", content=text, seq=4, tool_calls=(ViewToolCall(cid, fresh("Read"), args),))
    want = MESSAGE_OVERHEAD_TOKENS + len(text) + TOOL_CALL_OVERHEAD_TOKENS + len(cid) + 4 + len(args)
    assert c.message(m) == want
    longer = fresh('{"path": "src/billing/rounding.py"}')
    other_args = ViewMessage(
        role="assistant", content=text, seq=4, tool_calls=(ViewToolCall(cid, fresh("Read"), longer),)
    )
    assert c.message(other_args) == want - len(args) + len(longer)  # same seq and text object, other arguments
    no_calls = ViewMessage(role="assistant", content=text, seq=4)
    assert c.message(no_calls) == MESSAGE_OVERHEAD_TOKENS + len(text)
    img = MediaRef("cd" * 32, "image/png", 10, width=1000, height=1000)
    with_image = ViewMessage(role="user", content=text, seq=4, media=(img,))
    assert c.message(with_image) == MESSAGE_OVERHEAD_TOKENS + len(text) + 1000
    result = ViewMessage(role="tool", content=text, seq=4, tool_call_id=cid)
    assert c.message(result) == MESSAGE_OVERHEAD_TOKENS + len(text) + TOOL_CALL_OVERHEAD_TOKENS + len(cid)
    n = len(est.texts)
    assert c.message(result) == MESSAGE_OVERHEAD_TOKENS + len(text) + TOOL_CALL_OVERHEAD_TOKENS + len(cid)
    assert len(est.texts) == n  # the last one kept


def test_one_estimator_object_has_one_message_costs_while_its_counters_live():
    a, b = CharEstimator(), CharEstimator()
    shared = message_costs(a)
    assert message_costs(a) is shared and shared.estimator is a
    assert message_costs(b) is not shared and message_costs(b).estimator is b
    counter = TokenCounter(a)
    m = ViewMessage(role="user", content=fresh("hello"), seq=1)
    assert counter.message(m) == MESSAGE_OVERHEAD_TOKENS + 5
    assert shared.get(m) == MESSAGE_OVERHEAD_TOKENS + 5  # what the counter priced is in the shared prices


def test_message_costs_keep_two_generations_at_most():
    costs = MessageCosts()
    texts = [fresh(f"message {i}") for i in range(2 * MESSAGE_COSTS_KEPT + 5)]
    for i, t in enumerate(texts):
        costs.put(ViewMessage(role="user", content=t, seq=i), i)
    assert MESSAGE_COSTS_KEPT < len(costs) <= 2 * MESSAGE_COSTS_KEPT
    assert costs.get(ViewMessage(role="user", content=texts[-1], seq=len(texts) - 1)) == len(texts) - 1
    assert costs.get(ViewMessage(role="user", content=texts[0], seq=0)) is None  # dropped with its generation
    assert costs.get(ViewMessage(role="user", content=fresh(texts[-1]), seq=len(texts) - 1)) is None


_TEXTS = st.sampled_from(["", "hi", "toolu_1", "Read", '{"path": "a.py"}', "1 failed\n" * 3, "ünïcode 字"])


@st.composite
def _messages(draw):
    """Messages as the segmentation makes them: some share text objects (the same event segmented twice)."""
    pool = [fresh(t) for t in draw(st.lists(_TEXTS, min_size=1, max_size=6))]
    text = st.sampled_from(pool)
    out = []
    for seq in range(1, draw(st.integers(1, 12)) + 1):
        role = draw(st.sampled_from(["user", "assistant", "tool"]))
        calls = (
            tuple(ViewToolCall(draw(text), draw(text), draw(text)) for _ in range(draw(st.integers(0, 2))))
            if role == "assistant"
            else ()
        )
        media = (MediaRef("ab" * 32, "image/png", 9, width=2000, height=1000),) if draw(st.booleans()) else ()
        out.append(
            ViewMessage(
                role=role,
                content=draw(text),
                seq=draw(st.sampled_from([seq, 1, None])),
                tool_calls=calls,
                tool_call_id=draw(text) if role == "tool" else None,
                media=media,
            )
        )
    return out


@settings(max_examples=150, deadline=None)
@given(_messages(), st.integers(0, 3))
def test_a_counter_prices_a_run_of_messages_as_it_prices_each(messages, primed):
    """prices() (the shared prices looked up in one loop, call ids and tool names priced once) gives each message
    the tokens message() gives it, whether the texts were priced before by another counter or not."""
    est = CharEstimator()
    for m in messages[:primed]:  # another counter of the same estimator priced some of them already
        TokenCounter(est).message(m)
    got = TokenCounter(est).prices(messages)
    want = [TokenCounter(CharEstimator()).message(m) for m in messages]  # fresh: no shared prices, no names
    assert got == want
    expected = []
    for m in messages:
        t = MESSAGE_OVERHEAD_TOKENS + len(m.content)
        t += sum(TOOL_CALL_OVERHEAD_TOKENS + len(c.id) + len(c.name) + len(c.arguments) for c in m.tool_calls)
        t += TOOL_CALL_OVERHEAD_TOKENS + len(m.tool_call_id) if m.tool_call_id is not None else 0
        expected.append(t + 2000 * len(m.media))
    assert got == expected


def test_a_run_of_messages_goes_through_the_template_or_the_durable_counts_when_there_are_some():
    class Framed(CharEstimator):  # a ChatFraming estimator prices whole messages itself
        message_overhead_tokens = 3

        def message_tokens(self, m):
            return 100 + len(m.content)

        def system_tokens(self, text):
            return 0

        def tools_tokens(self, tools):
            return 0

    class Exact(CharEstimator):
        EXACT, TOKENIZER = True, "chars:v1"

    class Counts:  # a durable count cache (TokenCountCache)
        def __init__(self):
            self.kept = {}

        def get(self, tokenizer, seq, digest):
            return self.kept.get((tokenizer, seq, digest))

        def put(self, tokenizer, seq, digest, tokens):
            self.kept[(tokenizer, seq, digest)] = tokens

    messages = [
        ViewMessage(role="user", content=fresh("abc"), seq=1),
        ViewMessage(role="assistant", content="de", seq=2),
    ]
    assert TokenCounter(Framed()).prices(messages) == [103, 102]
    counts = Counts()
    assert TokenCounter(Exact(), counts).prices(messages) == [MESSAGE_OVERHEAD_TOKENS + 3, MESSAGE_OVERHEAD_TOKENS + 2]
    assert sorted(counts.kept.values()) == [MESSAGE_OVERHEAD_TOKENS + 2, MESSAGE_OVERHEAD_TOKENS + 3]  # recorded


def test_call_ids_and_tool_names_are_priced_once_by_a_counter_and_kept_bounded():
    est = CountingEstimator()
    c = TokenCounter(est)
    calls = [ViewToolCall(fresh(f"toolu_{i}"), fresh("Bash"), fresh("{}")) for i in range(NAMES_KEPT + 10)]
    for i, k in enumerate(calls):
        assert c.message(ViewMessage(role="assistant", content="", seq=2 * i, tool_calls=(k,))) == (
            MESSAGE_OVERHEAD_TOKENS + TOOL_CALL_OVERHEAD_TOKENS + len(k.id) + 4 + 2
        )
        result = ViewMessage(role="tool", content="ok", seq=2 * i + 1, tool_call_id=fresh(k.id))
        assert c.message(result) == MESSAGE_OVERHEAD_TOKENS + 2 + TOOL_CALL_OVERHEAD_TOKENS + len(k.id)
    assert est.texts.count("toolu_5") == 1  # in its call; its result's equal id is not estimated again
    assert est.texts.count("Bash") == 2  # once, and once more after the names were emptied when full


def test_counter_needs_the_estimator_interface_and_prices_documents():
    class CountOnly:  # the retired spelling: count(text), image_tokens(media)
        def count(self, text):
            return 2 * len(text)

        def image_tokens(self, media):
            return 7

    with pytest.raises(TypeError, match=r"needs estimate\(text\) and image_tokens\(width, height\)"):
        TokenCounter(CountOnly())
    c = TokenCounter(CharEstimator())
    assert c.media(MediaRef("0" * 64, "image/jpeg", 5)) == 1000  # unknown dimensions: the estimator's fallback
    assert c.media(MediaRef("0" * 64, "application/pdf", 1001)) == 501  # documents: a token per 2 bytes


def test_message_line_is_provider_fields_only():
    m = ViewMessage(role="tool", content="x", tool_call_id="c1", is_error=True, seq=9, kind="conversation")
    assert message_line(m) == b'{"content":"x","is_error":true,"role":"tool","tool_call_id":"c1"}'


def _msgs(*spec):
    out = []
    for s in spec:
        if s[0] == "a":
            out.append(
                ViewMessage(role="assistant", content="", tool_calls=tuple(ViewToolCall(i, "f", "{}") for i in s[1:]))
            )
        elif s[0] == "t":
            out.append(ViewMessage(role="tool", content="", tool_call_id=s[1]))
        else:
            out.append(ViewMessage(role="user", content=""))
    return out


def test_validator_pairing_rules():
    assert view_violations(_msgs(("u",), ("a", "1", "2"), ("t", "1"), ("t", "2"), ("u",))) == []
    assert view_violations(_msgs(("u",), ("t", "9")))[0].endswith("without its call (orphan)")
    assert "not answered" in view_violations(_msgs(("a", "1", "2"), ("t", "1"), ("u",)))[0]
    assert "call order" in view_violations(_msgs(("a", "1", "2"), ("t", "2"), ("t", "1")))[0]


def test_validator_finds_split_units():
    units, _ = segment([UserMessage("q"), AssistantMessage("", (call("c1"),)), ToolResult("c1", "r")])
    by_seq = {s: u for u in units for s in u.seqs}
    whole = [*units[0].messages, *units[1].messages]
    assert view_violations(whole, by_seq) == []
    half = [units[1].messages[0], ViewMessage(role="tool", content="r", tool_call_id="c1")]  # result seq missing
    assert any("split" in v for v in view_violations(half, by_seq))


def test_a_pending_turn_is_no_unit_and_a_legacy_end_of_file_placeholder_is_no_result():
    legacy = ToolResult("c1", EOF_PLACEHOLDER_TEXT, is_error=True, name="Read", missing=True)
    assert legacy.eof_placeholder
    units, b = segment(
        [
            UserMessage("fix it"),  # 1
            AssistantMessage("", (call("c1"),)),  # 2 its result is not stored yet
        ]
    )
    assert [u.seqs for u in units] == [(1,)] and b.pending_seq == 2  # never in a view while pending
    units, b = segment(
        [
            UserMessage("fix it"),  # 1
            AssistantMessage("", (call("c1"),)),  # 2
            legacy,  # 3 an earlier importer's guess
            Usage(input_tokens=5),  # 4 appended by the grown file
            ToolResult("c1", "the real result"),  # 5
            ToolResult("c1", "[no result: the turn was aborted]", is_error=True, missing=True),  # 6 a real one
        ]
    )
    assert [u.seqs for u in units] == [(1,), (2, 5), (6,)] and b.pending_seq is None
    assert [(m.role, m.content) for m in units[1].messages][1] == ("tool", "the real result")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=30), st.integers(-5, 400))
def test_suffix_fit_from_scratch_agrees_with_prefix_sums(costs, budget):
    asked: list[int] = []

    def cost(i: int) -> int:
        asked.append(i)
        return costs[i]

    start = suffix_fit(range(len(costs)), cost, budget)
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    if costs:
        assert min(start, len(costs) - 1) == hotpaths.suffix_start(prefix, budget)
        assert (start == len(costs)) == (costs[-1] > budget)  # not even the newest fits
    else:
        assert start == 0
    assert sum(costs[start:]) <= budget or start == len(costs)
    assert len(asked) == min(len(costs), len(costs) - start + 1)  # the kept items and the one that did not fit


def _spans_stream(turns: int) -> list[SimpleNamespace]:
    """Tool turns (one or two calls, a user message absorbed, one closed by the next response before its
    result), plain messages and orphan results, as stored events with seqs from 1."""
    events: list = []
    for i in range(turns):
        calls = tuple(ToolCall(f"c{i}.{j}", "bash", "{}") for j in range(1 + i % 2))
        events.append(AssistantMessage(f"turn {i}", calls))
        if i % 5 == 3:
            events.append(UserMessage(f"meanwhile {i}"))
        if i % 7 != 6:
            events.extend(ToolResult(c.id, f"out {c.id}") for c in calls)
        events.append(Usage(input_tokens=10, output_tokens=1))
        if i % 3 == 0:
            events.append(UserMessage(f"next {i}"))
            events.append(ToolResult(f"gone{i}", "late", orphan=True))
    events.append(AssistantMessage("done"))
    return [SimpleNamespace(seq=s, event=e) for s, e in enumerate(events, start=1)]


def test_unit_spans_read_like_a_map_of_every_unit_of_several_events_and_hold_no_object_per_unit():
    import gc

    from latch.engine.units import SPANS_KEPT, UnitSpan, UnitSpans

    units = UnitBuilder().feed_all(_spans_stream(300))
    spans = UnitSpans()
    every: dict[int, UnitSpan] = {}
    for u in units:
        assert spans.add(u) == (len(u.seqs) > 1)
        if len(u.seqs) > 1:
            span = UnitSpan(u)
            every.update(dict.fromkeys(u.seqs, span))
    assert spans.unit_count == len({id(v) for v in every.values()}) > 250
    assert list(spans) == sorted(every) and len(spans) == len(every)
    for seq, want in every.items():
        got = spans[seq]
        assert (got.first_seq, got.close_seq, got.seqs) == (want.first_seq, want.close_seq, want.seqs)
        assert seq in spans and spans.get(seq) is not None
    singles = [u.seqs[0] for u in units if len(u.seqs) == 1]
    assert singles and all(s not in spans and spans.get(s) is None for s in singles)
    assert 0 not in spans and "1" not in spans and spans.get(10**9) is None
    # a view missing one seq of a unit: the same violations through either map
    by_seq = {m.seq: m for u in units for m in u.messages if m.seq is not None}
    split = next(u for u in units if len(u.seqs) > 2)
    view = [by_seq[s] for s in split.seqs[:-1]]
    assert view_violations(view, spans) == view_violations(view, every) != []
    # what a full garbage collection traverses: the map, its three arrays and the seqs read lately
    # (bounded), whatever the history's length
    held = [x for x in gc.get_referents(spans) if x is not UnitSpans]
    assert sorted(type(x).__name__ for x in held) == ["array"] * 3 + ["dict"]
    arrays = [x for x in held if isinstance(x, array)]
    assert not any(gc.is_tracked(y) for x in arrays for y in gc.get_referents(x) if not isinstance(y, type))
    assert len(spans._read) <= SPANS_KEPT
    with pytest.raises(ValueError, match="do not ascend"):
        spans.add(units[0] if len(units[0].seqs) > 1 else next(u for u in units if len(u.seqs) > 1))


def test_unit_spans_read_between_adds_equal_a_map_updated_as_units_complete():
    """A seq read before the unit holding it is complete (past every kept seq) is found once it is added; a seq
    read again gives the same answer as the first time, whatever was added between."""
    from latch.engine.units import SPANS_KEPT, UnitSpan, UnitSpans

    units = UnitBuilder().feed_all(_spans_stream(800))
    top = max(s for u in units for s in u.seqs)
    spans = UnitSpans()
    every: dict[int, UnitSpan] = {}
    reads = 0
    for n, u in enumerate(units):
        for seq in (*u.seqs, u.seqs[-1] + 1, top + 1, max(1, u.seqs[0] - 7), *range(1, u.seqs[0], 29)):
            want = every.get(seq)
            got = spans.get(seq)
            reads += 1
            assert (got is None) == (want is None), (n, seq)
            if want is not None:
                assert (got.first_seq, got.close_seq, got.seqs) == (want.first_seq, want.close_seq, want.seqs)
        if spans.add(u):
            every.update(dict.fromkeys(u.seqs, UnitSpan(u)))
    assert reads > SPANS_KEPT  # the seqs read lately were forgotten at least once
    for seq in range(1, top + 2):
        assert (spans.get(seq) is None) == (seq not in every), seq
