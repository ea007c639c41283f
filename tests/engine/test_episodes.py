"""Episode segmentation, markers, incremental building, selection and rendering (spec: "Episodes")."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.engine import episodes as E
from latch.engine.episodes import Episode, EpisodeIndex, extract_terms
from latch.events import (
    AssistantMessage,
    CompactionMarker,
    SystemNote,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    ValidationEvidence,
)
from latch.store import StoredEvent


def stored(events, session="s1", start=1):
    return [
        StoredEvent(seq=start + i, session_id=session, kind=e.KIND, event=e, source_ref=None, ts=None)
        for i, e in enumerate(events)
    ]


def call(cid, name, **args):
    return ToolCall(id=cid, name=name, arguments=json.dumps(args))


def built(events):
    idx = EpisodeIndex()
    idx.extend(stored(events))
    return idx


def digest(eps):
    return [
        (
            e.number,
            e.part,
            e.first_seq,
            e.last_seq,
            e.events,
            e.topic,
            e.files,
            e.tools,
            e.markers,
            e.term_ids,
            e.closed,
        )
        for e in eps
    ]


SESSION = [
    SystemNote("You are a coding agent.", subtype="system_prompt"),  # 1
    UserMessage("<environment_context>cwd /repo</environment_context>", is_meta=True),  # 2
    UserMessage("Fix the parser crash in src/parser.py"),  # 3
    AssistantMessage("Reading it.", tool_calls=(call("c1", "Read", file_path="/repo/src/parser.py"),)),  # 4
    Usage(input_tokens=10, output_tokens=5),  # 5
    ToolResult("c1", "def parse(): ..."),  # 6
    AssistantMessage("The crash comes from an empty token list."),  # 7
    UserMessage("now add tests"),  # 8
    UserMessage("(reminder injected by the harness)", is_meta=True),  # 9
    AssistantMessage("", tool_calls=(call("c2", "Bash", command="pytest -q tests"),)),  # 10
    ToolResult("c2", "1 failed", is_error=True, exit_code=1),  # 11
    AssistantMessage("", tool_calls=(call("c3", "Edit", file_path="tests/test_parser.py", old="a", new="b"),)),  # 12
    ToolResult("c3", "ok"),  # 13
    AssistantMessage("", tool_calls=(call("c4", "Bash", command="pytest -q tests"),)),  # 14
    ToolResult("c4", "3 passed", exit_code=0),  # 15
]


def test_segments_on_user_intents_and_meta_messages_do_not_split():
    eps = built(SESSION).episodes
    assert [(e.number, e.first_seq, e.last_seq, e.events) for e in eps] == [(1, 1, 2, 2), (2, 3, 7, 5), (3, 8, 15, 8)]
    assert [e.topic for e in eps] == ["(session start)", "Fix the parser crash in src/parser.py", "now add tests"]
    assert [e.closed for e in eps] == [True, True, False]
    assert eps[1].files == ("/repo/src/parser.py", "src/parser.py")  # call arguments first, then text
    assert eps[1].tools == ("Read",)
    assert eps[1].marker_names == ("evidence",)
    assert eps[2].tools == ("Bash", "Edit")
    assert eps[2].files == ("tests/test_parser.py",)
    assert eps[2].marker_names == ("validation_passed", "validation_failed", "mutation", "failure")


def test_topic_is_the_opening_prompt_bounded():
    prompt = "Please   refactor\nthe " + "storage layer and " * 20
    (ep,) = built([UserMessage(prompt)]).episodes
    assert len(ep.topic) <= E.TOPIC_CHARS
    assert ep.topic.startswith("Please refactor the storage layer and storage")
    assert ep.topic.endswith("and…")
    assert built([UserMessage("  ")]).episodes[0].topic == "(empty prompt)"


def test_volume_cap_splits_on_event_count_at_unit_starts_only():
    n = E.MAX_EPISODE_EVENTS
    events = [UserMessage("long job")] + [AssistantMessage(f"step {i}") for i in range(1, n)]
    events += [ToolResult("x", "late result")]  # seq n+1: a result never starts a segment
    events += [AssistantMessage(f"more {i}") for i in range(200)]  # seq n+2 .. n+201
    eps = built(events).episodes
    assert [(e.part, e.first_seq, e.last_seq, e.events) for e in eps] == [
        (1, 1, n + 1, n + 1),
        (2, n + 2, 2 * n + 1, n),
        (3, 2 * n + 2, n + 201, 200 - n),
    ]
    assert {e.topic for e in eps} == {"long job"}


def test_volume_cap_splits_on_characters():
    big = "x " * 20_000  # 40,000 characters
    eps = built(
        [UserMessage("write docs"), AssistantMessage(big), AssistantMessage(big), AssistantMessage("done")]
    ).episodes
    # 10 + 40,000 chars < 64,000 accepts the second message; then 80,010 >= 64,000 splits before the third
    assert [(e.part, e.first_seq, e.last_seq) for e in eps] == [(1, 1, 3), (2, 4, 4)]


@pytest.mark.parametrize(
    "events, expected",
    [
        # exit code decides validation even without is_error; cargo check is test-like
        (
            [
                AssistantMessage("", tool_calls=(call("a", "exec", cmd="cargo check --workspace"),)),
                ToolResult("a", "error[E0425]", exit_code=101),
            ],
            ("validation_failed",),
        ),
        (
            [
                AssistantMessage("", tool_calls=(call("a", "shell", command=["bash", "-lc", "go test ./..."]),)),
                ToolResult("a", "ok"),
            ],
            ("validation_passed",),
        ),
        # an aborted validation is a failure, not a validation result
        (
            [
                AssistantMessage("", tool_calls=(call("a", "Bash", command="pytest"),)),
                ToolResult("a", "[no result: turn aborted]", is_error=True, missing=True),
            ],
            ("failure",),
        ),
        # Codex patches travel inside a generic exec call
        (
            [
                AssistantMessage("", tool_calls=(ToolCall("a", "exec", json.dumps({"input": "*** Begin Patch\n+x"})),)),
                ToolResult("a", "Success"),
            ],
            ("mutation",),
        ),
        # a failed edit is a failure, not a mutation
        (
            [
                AssistantMessage("", tool_calls=(call("a", "Write", file_path="a.py", content="x"),)),
                ToolResult("a", "permission denied", is_error=True),
            ],
            ("failure",),
        ),
        (
            [
                AssistantMessage("", tool_calls=(call("a", "str_replace_editor", command="view", path="/r/a.py"),)),
                ToolResult("a", "1 x"),
            ],
            ("evidence",),
        ),
        (
            [
                AssistantMessage("", tool_calls=(call("a", "str_replace_editor", command="create", path="/r/a.py"),)),
                ToolResult("a", "File created"),
            ],
            ("mutation",),
        ),
        ([CompactionMarker(trigger="auto", summary="earlier work")], ("reground",)),
        ([SystemNote("overloaded", subtype="api_error")], ("failure",)),
        ([AssistantMessage("", tool_calls=(call("a", "TodoWrite", todos=[]),)), ToolResult("a", "ok")], ()),
    ],
)
def test_markers(events, expected):
    (ep,) = built([UserMessage("task")] + events).episodes
    assert ep.marker_names == expected


class _Prompt(UserMessage):
    pass


class _Answer(AssistantMessage):
    pass


class _Result(ToolResult):
    pass


class _Note(SystemNote):
    pass


def test_each_event_is_read_as_the_first_event_class_it_is():
    """A subclass of an event class reads as that class (the reader is chosen per type, once); a kind with
    none of them reads its searchable text, and its name gives the markers."""
    plain = [
        UserMessage("fix src/app.py"),
        AssistantMessage("running it", tool_calls=(call("a", "Bash", command="pytest -q"),)),
        ToolResult("a", "2 failed in tests/test_app.py", is_error=True, exit_code=1),
        SystemNote("compacted", subtype="compact_boundary"),
    ]
    subclassed = [
        _Prompt("fix src/app.py"),
        _Answer("running it", tool_calls=(call("a", "Bash", command="pytest -q"),)),
        _Result("a", "2 failed in tests/test_app.py", is_error=True, exit_code=1),
        _Note("compacted", subtype="compact_boundary"),
    ]
    assert digest(built(subclassed).episodes) == digest(built(plain).episodes)
    (ep,) = built(plain).episodes
    assert ep.files == ("src/app.py", "tests/test_app.py")
    assert ep.tools == ("Bash",)
    assert ep.marker_names == ("validation_failed", "reground", "failure")
    other = built([UserMessage("task"), ValidationEvidence(command="make check", status="passed", summary="ok.py")])
    (ep,) = other.episodes
    assert ep.marker_names == ("evidence",)
    assert ep.files == ("ok.py",)
    assert other.term_id("validation") is not None


def test_result_in_a_later_segment_still_resolves_its_call():
    events = [
        UserMessage("go"),
        AssistantMessage("", tool_calls=(call("a", "Edit", file_path="a.py"),)),
        UserMessage("interrupting"),
        ToolResult("a", "ok"),
    ]
    eps = built(events).episodes
    assert [e.marker_names for e in eps] == [(), ("mutation",)]


def test_terms_cjk_bigrams_and_stop_words():
    assert extract_terms("Fix the parser 修复解析器 and 日") == ["修复", "复解", "解析", "析器", "日", "fix", "parser"]
    assert extract_terms("ab x1 9abc " + "y" * 40) == []  # under 3 characters, a leading digit, over 32
    assert extract_terms("Исправь парсер") == ["исправь", "парсер"]


@pytest.mark.parametrize(
    "text, paths",
    [
        ("see src/a.py, then C:/x/y.rs and http://h/p.py", ["src/a.py"]),  # after ":" no path starts
        ("edit ~/cfg/app.toml and ../up/z.md; a+b/c.py", ["~/cfg/app.toml", "../up/z.md", "a+b/c.py"]),
        ("x\\y.py and:q.py fine.py", ["fine.py"]),
        ("and/or input/output /etc/hosts", ["/etc/hosts"]),  # a relative path needs an extension
        ("self.handler.parse(x) README.MD v1.2.3 foo.pyx", ["README.MD"]),
        ("café/naïve.py 修复/a.py", ["café/naïve.py", "修复/a.py"]),
    ],
)
def test_file_entities_found_in_text(text, paths, monkeypatch):
    assert E._paths(text) == paths
    monkeypatch.setattr(E, "_scanner", lambda text: E._UNICODE)  # the ASCII patterns are a shortcut, not a change
    assert E._paths(text) == paths


_HINT_PIECES = [
    "a",
    "Z",
    "_",
    "1",
    ".",
    "/",
    "-",
    "~",
    "@",
    "+",
    " ",
    "\n",
    "é",
    "修",
    "ſ",
    "\u212a",
    ".py",
    ".PY",
    ".pyi",
    ".Json",
    ".jsonl",
    ".c",
    ".cc",
    ".sh",
    ".ts",
    ".tsx",
    ".v",
    ".dockerfile",
    "x.py/",
    "/etc",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_HINT_PIECES), max_size=40).map("".join))
def test_hint_search_finds_what_the_plain_alternation_finds(text):
    for flags, sc in ((0, E._UNICODE), (re.ASCII, E._ASCII))[: 2 if text.isascii() else 1]:  # as _scanner picks
        plain = re.compile(r"(?:/|\.(?:" + E._EXTS + r")(?![\w/]))[\w.@+~/-]*", flags | re.IGNORECASE)
        assert [m.span() for m in E._hints(sc, text)] == [m.span() for m in plain.finditer(text)]


def _plain_paths(text: str) -> list[str]:
    """The file entities of ``text`` by the path pattern tried at every position (what the hints narrow down)."""
    text = text[: E.SCAN_CHARS]
    found = []
    for m in E._scanner(text).path.finditer(text):
        p = E.normalize_path(m.group(1))
        if not p or len(p) > 240 or "//" in p:
            continue
        name = p.rsplit("/", 1)[-1]
        if "/" in p and not E._EXT_RE.search(name) and not p.startswith(("/", "~/", "../")):
            continue
        if any(ch.isalpha() for ch in name):
            found.append(p)
    return found


@settings(max_examples=600, deadline=None)
@given(
    st.lists(
        st.sampled_from([*_HINT_PIECES, "b" * 70, "c/" * 40, "9", "²", "1.py", "²/x.py", " d/e.md", "/"]), max_size=60
    ).map("".join)
)
def test_paths_equal_the_path_pattern_tried_everywhere(text):
    assert E._paths(text) == _plain_paths(text)


def test_paths_find_runs_longer_than_the_backward_window_and_after_many_hints():
    long_dir = "/".join(["segment" + str(i) for i in range(12)])  # a run far longer than the window
    text = " ".join([f"f{i}.py" for i in range(40)] + [f"{long_dir}/x.py", f"{long_dir}/y.py"])
    assert E._paths(text)[-2:] == [f"{long_dir}/x.py", f"{long_dir}/y.py"]
    assert E._paths(text) == _plain_paths(text)
    assert E._paths(f"{long_dir}/z.py and a.py") == [f"{long_dir}/z.py", "a.py"]  # its run fills the window
    assert E._paths("/etc/9 /etc/x9 /srv/1.2") == ["/etc/x9"]  # a name needs a letter


_COMMAND_PIECES = [
    *E._TEST_WORDS,
    *E._READ_WORDS,
    *sorted(set(re.findall(r"[a-z0-9]+", E._TEST_CMD + E._READ_CMD))),  # the plain patterns' own words
    *"py test go cargo npm run gradlew make sed -n -i x X 9 _ é ² . / - ; & | ( \" ' \n \t \x1c \x1f \u3000 \u2028".split(
        " "
    ),
    " ",
    "  ",
]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(_COMMAND_PIECES), max_size=12).map("".join))
def test_command_searches_find_what_the_plain_patterns_find(text):
    for flags, sc in ((0, E._UNICODE), (re.ASCII, E._ASCII)):  # either may read a call's command text
        read = E._READ_CMD.replace(r"\s", E._ASCII_SPACE) if flags else E._READ_CMD
        assert sc.test_cmd(text) == bool(re.search(E._TEST_CMD, text, flags)), flags
        assert sc.read_cmd(text) == bool(re.search(read, text, flags)), flags


def test_command_searches_agree_on_every_phrase_of_the_plain_patterns_words():
    """Every one-, two- and three-word phrase of the words in the plain patterns, in a few contexts: the literal
    lists miss no command and add none."""
    source = (E._TEST_CMD + E._READ_CMD).replace("\\.", ".")
    words = sorted(set(re.findall(r"[a-z0-9]+(?:\.[a-z]+)?|-n", source)))
    phrases = [*words, *(f"{a} {b}" for a in words for b in words)]
    phrases += [f"{a} {m} {b}" for a in words for m in ("run", "build") for b in words]
    for flags, sc in ((0, E._UNICODE), (re.ASCII, E._ASCII)):
        read = re.compile(E._READ_CMD.replace(r"\s", E._ASCII_SPACE) if flags else E._READ_CMD, flags)
        test = re.compile(E._TEST_CMD, flags)
        for phrase in phrases:
            for text in (phrase, f"x {phrase} x", f"({phrase}\n", f"a{phrase} "):
                assert sc.test_cmd(text) == bool(test.search(text)), text
                assert sc.read_cmd(text) == bool(read.search(text)), text


def test_call_classes_agree_on_ascii_control_whitespace():
    assert E._classify_call("Bash", "\x1ccat notes.txt") == E._READ  # U+001C is whitespace to Unicode patterns
    assert E._classify_call("Bash", "concat notes.txt") == E._OTHER
    assert E._classify_call("Bash", "python -m pytest -q") == E._VALIDATE
    assert E._classify_call("Bash", "git apply fix.patch") == E._MUTATE
    assert E._classify_call("Bash", "git applyx") == E._OTHER


def test_incremental_equals_rebuild_at_every_prefix_and_batch_split():
    events = stored(SESSION)
    inc = EpisodeIndex()
    for i, ev in enumerate(events, 1):
        inc.extend([ev])
        full = EpisodeIndex()
        full.rebuild(events[:i])
        assert digest(inc.episodes) == digest(full.episodes), i
        assert inc.watermark == full.watermark == i
    batched = EpisodeIndex()
    batched.extend(events[:5])
    batched.extend(events[3:9])  # overlap: seq <= watermark is skipped
    batched.extend(events[9:])
    assert digest(batched.episodes) == digest(inc.episodes)
    assert batched._term_counts.ids() == inc._term_counts.ids() and batched._files == inc._files


def test_other_session_needs_rebuild():
    idx = EpisodeIndex()
    idx.extend(stored([UserMessage("a")], session="s1"))
    with pytest.raises(ValueError, match="session change needs rebuild"):
        idx.extend(stored([UserMessage("b")], session="s2", start=5))
    idx.rebuild(stored([UserMessage("b")], session="s2", start=5))
    assert [(e.first_seq, e.topic) for e in idx.episodes] == [(5, "b")]


SELECT_SESSION = [
    UserMessage("Fix the parser crash"),  # 1
    AssistantMessage("", tool_calls=(call("r", "Read", file_path="src/parser.py"),)),  # 2
    ToolResult("r", "code", is_error=True),  # 3 -> failure
    UserMessage("Update the README wording"),  # 4
    AssistantMessage("", tool_calls=(call("w", "Edit", file_path="README.md"),)),  # 5
    ToolResult("w", "ok"),  # 6 -> mutation
    UserMessage("run the benchmarks"),  # 7
    AssistantMessage("", tool_calls=(call("b", "Bash", command="pytest benchmarks"),)),  # 8
    ToolResult("b", "boom", is_error=True, exit_code=2),  # 9 -> failed, failure
]


def test_select_scores_with_the_fixed_point_kernel():
    idx = built(SELECT_SESSION)
    # A (1-3): 2 terms (parser, crash) x1000 + file 2500 + failure 700 + 1000*3//9 = 5533
    # B (4-6): mutation 400 + 1000*6//9 = 1066
    # C (7-9, open): validation_failed 800 + failure 700 + 1000*9//9 = 2500
    picked = idx.select("why did the parser crash?", ["/repo/src/parser.py"], now_seq=9)
    assert [(e.first_seq, e.closed) for e in picked] == [(1, True), (7, False), (4, True)]
    assert [e.first_seq for e in idx.select("", [], now_seq=9, k=2)] == [7, 4]  # 2500, 1066 > 700 + 333
    assert [e.first_seq for e in idx.select("parser", [], now_seq=9, before_seq=7)] == [1, 4]
    # B (4-6) runs past seq 5: it is a candidate, cut at 5 (its archived part)
    cut = idx.select("readme", [], now_seq=9, before_seq=6)
    assert [(e.first_seq, e.last_seq) for e in cut] == [(4, 5), (1, 3)]
    assert [e.first_seq for e in idx.select("readme", [], now_seq=9, before_seq=4)] == [1]  # B starts at 4
    assert [(e.first_seq, e.last_seq) for e in idx.select("parser", [], now_seq=9, before_seq=3)] == [(1, 2)]
    assert idx.select("parser", [], now_seq=9, before_seq=1) == []
    assert idx.select("parser", [], now_seq=9, k=0) == []


def test_select_tie_break_prefers_later_episodes():
    idx = built([UserMessage("alpha"), UserMessage("beta"), UserMessage("gamma")])
    # recency only: 1000*1//1000 = 1000*2//1000 = 1000*3//1000 = 0 at now_seq 1000 -> later last_seq first
    assert [e.topic for e in idx.select("", [], now_seq=1000)] == ["gamma", "beta", "alpha"]


def test_select_open_segment_does_not_disturb_the_committed_arrays():
    idx = built(SELECT_SESSION)
    idx.select("parser", [], now_seq=9)
    idx.extend(stored([UserMessage("next")], start=10))  # closes C into the arrays
    picked = idx.select("benchmarks", [], now_seq=10, before_seq=10)
    assert picked[0].first_seq == 7 and picked[0].closed
    assert len(idx.episodes) == 4


def test_closing_keeps_what_the_open_segment_showed():
    """Every field but ``closed`` stays when the next intent closes a segment, also when read from a select."""
    idx = EpisodeIndex()
    for i, ev in enumerate(stored([*SESSION, UserMessage("thanks")]), 1):
        shown = idx.episodes
        idx.extend([ev])
        now = idx.episodes
        for before, after in zip(shown, now[: len(shown)], strict=True):
            if after.closed:  # closed now or before: as it was shown
                assert replace(before, closed=True) == after, i
    assert sum(e.closed for e in idx.episodes) == 3
    assert idx.episodes[2].tools == ("Bash", "Edit")
    seg = idx.episodes[1]  # "Fix the parser crash" (3-7), closed
    assert (seg.first_seq, seg.last_seq, seg.closed, seg.files) == (
        3,
        7,
        True,
        ("/repo/src/parser.py", "src/parser.py"),
    )
    words = [t for t, tid in idx._term_counts.ids().items() if tid in seg.term_ids]
    assert {"fix", "parser", "crash", "reading", "token"} <= set(words)
    picked = idx.select("parser crash", [], now_seq=16, before_seq=8)
    assert picked[0] == seg


def ep(number, first, last, topic, files=(), tools=(), markers=0, part=1):
    return Episode(
        number=number,
        part=part,
        first_seq=first,
        last_seq=last,
        events=last - first + 1,
        topic=topic,
        files=tuple(files),
        tools=tuple(tools),
        markers=markers,
        term_ids=(),
        closed=True,
    )


def test_render_lines_budget_and_order():
    a = ep(1, 1, 30, "Fix the parser crash", ["src/parser.py"], ["Read", "Bash"], E.FAILURE | E.VALIDATION_FAILED)
    b = ep(2, 31, 40, "Update README", ["README.md", "a.py", "b.py", "c.py", "d.py"], ["Edit"], E.MUTATION, part=2)
    c = ep(3, 41, 50, "run the benchmarks")
    chars = len  # a 1-char-per-token estimator makes the budget arithmetic checkable
    text = EpisodeIndex.render([c, a, b], chars, 10_000)
    assert text.splitlines() == [
        "archival episodes (raw events by seq range; recall finds exact text):",
        "episode #1 seq 1–30: Fix the parser crash · files src/parser.py · tools Read, Bash · validation_failed, failure",
        "episode #2 seq 31–40: Update README (part 2) · files README.md, a.py, b.py, c.py +1 · tools Edit · mutation",
        "episode #3 seq 41–50: run the benchmarks",
    ]
    # header (70) + newline + line c (40) + newline fits 112; a (107) no longer fits; b does not either
    assert EpisodeIndex.render([c, a, b], chars, 112).splitlines()[1:] == ["episode #3 seq 41–50: run the benchmarks"]
    assert len(EpisodeIndex.render([c, a, b], chars, 112)) <= 112
    assert EpisodeIndex.render([c, a, b], chars, 60) == ""
    assert EpisodeIndex.render([], chars, 1000) == ""


def test_a_test_command_named_outside_a_command_argument_is_no_validation():
    """A todo, a sub-agent's brief or a file's text that mentions ``pytest`` is not a command the agent ran
    (found importing Copilot CLI's ``sql`` todos: a todo "run pytest" counted as a passed validation); the
    command-like keys (``command``/``cmd``/``input``/``script``/``code``/``argv``), argv lists and bare
    action lines still are."""
    sql = '{"query": "INSERT INTO todos (title) VALUES (\'run pytest -q\')", "description": "add todo"}'
    assert E._classify_call("sql", sql) == E._OTHER
    assert E._classify_call("Task", '{"prompt": "Run cargo test and fix what fails"}') == E._OTHER
    assert (
        E._classify_call("TodoWrite", '{"todos": [{"content": "apply_patch the fix, then cat the log"}]}') == E._OTHER
    )
    assert E._classify_call("Bash", '{"command": "python -m pytest -q", "description": "tests"}') == E._VALIDATE
    assert E._classify_call("shell", '{"command": ["bash", "-lc", "cargo test"]}') == E._VALIDATE
    assert E._classify_call("exec", '{"input": "await exec_command({cmd: \\"npm test\\"})"}') == E._VALIDATE
    assert E._classify_call("bash", '{"command": "sed -i s/a/b/ x.py"}') == E._MUTATE
    assert E._classify_call("run", "pytest -q tests/") == E._VALIDATE  # not JSON: the action line itself
