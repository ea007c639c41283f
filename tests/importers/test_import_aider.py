"""Aider chat-history importer on the real corpus (one file Cyrillic), re-import and malformed input.

Counts were checked by hand with grep/awk over the raw markdown (commands in the comments). One aider
run (``# aider chat started at`` header) is one session: the whole-file counts are the runs' sums.
"""

from __future__ import annotations

import json

import pytest
from _importer_checks import BINARY_FILE, EMPTY_FILE, assert_rejected, detected, ref_kinds, snapshot

from latch.events import AssistantMessage, SystemNote, ToolResult, Usage, UserMessage
from latch.host.ingest import import_all
from latch.importers import parse_all_file, parse_file
from latch.importers._common import compute_stats

MONO = "monochromatic.aider.chat.history.md"
MOZG = "mozgoslav.aider.chat.history.md"


@pytest.fixture
def aider_dir(corpus_dir):
    return corpus_dir / "aider"


HEADER = "# aider chat started at "


def _headers(path):
    """The file's run headers (1-based line, text): ``grep -n '^# aider chat started at'``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return [(i, ln) for i, ln in enumerate(lines, 1) if ln.startswith(HEADER)]


def _all_events(path):
    """Every run's events, in file order (the runs are consecutive in the file)."""
    return [pe for parsed in parse_all_file(path) for pe in parsed.events]


def _events(path):
    return [pe.event for pe in _all_events(path)]


def _notes(events, subtype):
    return [e for e in events if isinstance(e, SystemNote) and e.subtype == subtype]


@pytest.mark.parametrize("name", [MONO, MOZG])
def test_detect_picks_aider(aider_dir, name):
    assert detected(aider_dir / name) == "aider"


def test_monochromatic_counts(aider_dir):
    sessions = parse_all_file(aider_dir / MONO)
    assert compute_stats(_all_events(aider_dir / MONO)) == {
        # groups of consecutive user lines: awk '/^####/ && /  $/ {if(!p) n++; p=1; next} {p=0} END{print n}'
        # plus 1 reflection: "Add file to the chat? ... y" after a reply's Tokens line (line 1202)
        "user_messages": 27,
        # runs of non-user/non-output/non-header lines holding text (awk, multi-line `>` reports skipped) → 40;
        # each of the 39 `> Tokens:` lines follows one of them
        "assistant_messages": 40,
        # SEARCH blocks outside failure reports, in replies followed by `> Applied edit` or a failure report:
        # 37 (5 more got no outcome: ask mode / "Skipping edits" → they stay text)
        "tool_calls": 37,
        "tool_results": 37,
        # grep -c '^> # [0-9]* SEARCH/REPLACE blocks\? failed to match' → 7 reports, each "# 1 ... block failed"
        "tool_errors": 7,
        "orphan_results": 0,
        "missing_results": 0,
        # grep '^> Tokens:' → 39 lines; "k" values ×1000 summed: 613,500 sent, 24,145 received; no cache fields
        "usage": {
            "input_tokens": 613500,
            "output_tokens": 24145,
            "cache_read_tokens": None,
            "cache_write_tokens": None,
            "requests": 39,
        },
    }
    assert [s.meta for s in sessions] == [
        {"run": n, "started": text.removeprefix(HEADER), "title": text[2:], "usage_rounded": True}
        for n, (_, text) in enumerate(_headers(aider_dir / MONO), 1)
    ]
    es = r"C:\Users\user\Text\Projects\Aquaticat\monochromatic2025MAY24-pnpmTest\packages\module\es"
    # each run's own "Cur working dir:" (grep -n): runs 1-3 (headers on lines 2, 8, 41) print none; run 4
    # (header on line 48) prints it on line 57, run 5 (line 82) on line 92
    assert [s.workspace for s in sessions[:5]] == [None, None, None, es, es]
    assert {s.workspace for s in sessions} == {None, es}


def test_mozgoslav_counts(aider_dir):
    sessions = parse_all_file(aider_dir / MOZG)
    assert compute_stats(_all_events(aider_dir / MOZG)) == {
        "user_messages": 23,  # same awk as above, plus 2 reflections (lines 388 and 3577)
        "assistant_messages": 16,  # same awk; 16 `<thinking-content-…>` openings, one per reply
        "tool_calls": 3,
        "tool_results": 3,  # grep -c '^> Applied edit to' → 3 (whole edit format, no SEARCH)
        "tool_errors": 0,
        "orphan_results": 0,
        "missing_results": 0,
        # 14 `> Tokens:` lines (no cost part in this file): 83,800 sent, 25,550 received
        "usage": {
            "input_tokens": 83800,
            "output_tokens": 25550,
            "cache_read_tokens": None,
            "cache_write_tokens": None,
            "requests": 14,
        },
    }
    assert [s.meta["run"] for s in sessions] == [1, 2, 3]
    assert [s.workspace for s in sessions] == [None] * 3  # this file never prints "Cur working dir:"


@pytest.mark.parametrize("name", [MONO, MOZG])
def test_one_session_per_run(aider_dir, name):
    """Each aider run is its own session (a new run does not send the earlier runs' chat to the model), in
    file order, opening with its header; the keys share the file's head key and differ by run."""
    path = aider_dir / name
    headers = _headers(path)
    sessions = parse_all_file(path)
    assert len(sessions) == len(headers) == {MONO: 19, MOZG: 3}[name]
    assert [
        (s.events[0].source_ref, type(s.events[0].event), s.events[0].event.subtype, s.events[0].ts) for s in sessions
    ] == [(f"line:{n}", SystemNote, "session_start", text.removeprefix(HEADER)) for n, text in headers]
    # no session holds another run's lines: each one's refs lie between its header and the next
    bounds = [n for n, _ in headers] + [10**9]
    for s, lo, hi in zip(sessions, bounds, bounds[1:], strict=False):
        lines = [
            int(pe.source_ref.split(":")[-1].split("#")[0])
            for pe in s.events
            if not pe.source_ref.startswith("missing:")
        ]
        assert lo <= min(lines) and max(lines) < hi
    keys = [s.external_key for s in sessions]
    assert len(set(keys)) == len(keys)
    head = keys[0].split(":run-")[0]
    assert all(k.startswith(f"{head}:run-{n}:") for n, k in enumerate(keys, 1))
    assert [s.settled is None for s in sessions] == [True] * (len(sessions) - 1) + [sessions[-1].settled is None]
    assert parse_file(path).external_key == keys[-1]  # parse: the last run, the one aider may still write


def test_sessions_notes_and_usage_placement(aider_dir):
    events = _all_events(aider_dir / MONO)
    starts = [pe for pe in events if isinstance(pe.event, SystemNote) and pe.event.subtype == "session_start"]
    assert len(starts) == 19  # grep -c '^# aider chat started at'
    assert (starts[0].source_ref, starts[0].ts, starts[0].event.text) == (
        "line:2",
        "2025-06-02 11:47:49",
        "aider chat started at 2025-06-02 11:47:49",
    )
    # grep -c '^> litellm\.[A-Za-z]*Error' → 11
    assert len(_notes([pe.event for pe in events], "api_error")) == 11
    for i, pe in enumerate(events):  # every Usage directly follows its reply, model unknown (rounded figures)
        if isinstance(pe.event, Usage):
            assert isinstance(events[i - 1].event, AssistantMessage) and pe.event.model is None
    first = next(pe for pe in events if isinstance(pe.event, Usage))
    assert (first.source_ref, first.event.input_tokens, first.event.output_tokens) == ("line:337", 9700, 85)


def test_search_replace_edits(aider_dir):
    events = _all_events(aider_dir / MONO)
    by_ref = {pe.source_ref: pe.event for pe in events}
    reply = by_ref["line:390"]  # 8 suggestions then one SEARCH/REPLACE block on CONVENTIONS.md (lines 405-441)
    (call,) = reply.tool_calls
    args = json.loads(call.arguments)
    assert call.id == "edit-L407" and call.name == "edit"
    assert args["path"] == "packages/module/es/src/CONVENTIONS.md"
    assert args["search"].startswith("When writing code in TypeScript, try to:")
    assert args["replace"].endswith("minimize stylistic debates.")
    assert "<<<<<<< SEARCH" not in reply.text
    assert reply.text.endswith("Here are the *SEARCH/REPLACE* blocks to apply these suggestions:")
    result = by_ref["line:446"]
    assert result == ToolResult(
        call_id="edit-L407", content=r"Applied edit to packages\module\es\src\CONVENTIONS.md", name="edit"
    )
    # lines 2624-2806: two blocks on CONVENTIONS.md, the second failed to match, the first was applied
    failed_turn = [
        pe.event for pe in events if isinstance(pe.event, ToolResult) and pe.source_ref.startswith("line:2806")
    ]
    assert [(r.call_id, r.is_error) for r in failed_turn] == [("edit-L2635", False), ("edit-L2772", True)]
    assert failed_turn[0].content == "Applied edit to CONVENTIONS.md"
    assert failed_turn[1].content.startswith(
        "# 1 SEARCH/REPLACE block failed to match!\n\n## SearchReplaceNoExactMatch"
    )
    assert failed_turn[1].content.endswith("Just reply with fixed versions of the block above that failed to match.")
    # the report is the tool result; aider's other output lines follow as a note; the fix is the next request
    refs = [pe.source_ref for pe in events]
    at = refs.index("line:2625")
    assert refs[at : at + 7] == [
        "line:2625",
        "line:2799",
        "line:2806",
        "line:2806#1",
        "line:2800",
        "line:2843",
        "line:2878",
    ]
    assert by_ref["line:2800"].text.startswith("CONVENTIONS.md\nAllow edits to file that has not been added")
    unanswered = by_ref["line:1081"]  # ask-mode reply with a SEARCH block and no outcome: stays text, no call
    assert unanswered.tool_calls == () and "<<<<<<< SEARCH" in unanswered.text


def test_cyrillic_whole_edits_and_thinking(aider_dir):
    events = _events(aider_dir / MOZG)
    users = [e for e in events if isinstance(e, UserMessage)]
    assert users[2].text == "Про что проект мозгослав и на каком этапе сейчас RAG?"
    long_prompt = next(u for u in users if u.text.startswith(" А почитай про хоткей"))
    assert len(long_prompt.text.split("\n")) == 285  # awk: 285 consecutive #### lines from line 3732
    replies = [e for e in events if isinstance(e, AssistantMessage)]
    assert sum(r.reasoning_reported for r in replies) == 16  # grep -c '^<thinking-content' (2 never closed)
    assert not any("thinking-content" in r.text for r in replies)
    assert {r.model for r in replies} == {"lm_studio/qwen3.6-35b-a3b-uncensored-hauhaucs-aggressive"}
    calls = [c for r in replies for c in r.tool_calls]
    paths = [json.loads(c.arguments)["path"] for c in calls]
    # the "Applied edit to" lines, file names as aider read them from the whole-format reply
    assert paths == ["Topology", "./analyzer-report-dictation-hotkey.md", "-> Swift binary отправляет CGEvent/AX в ОС"]
    topology = json.loads(calls[0].arguments)["content"]
    assert topology.startswith("[UI/Hook]") and topology.endswith("-> Swift binary отправляет CGEvent/AX в ОС")
    assert len(_notes(events, "api_error")) == 1  # grep -c '^> litellm\.[A-Za-z]*Error'
    assert len(_notes(events, "session_start")) == 3


@pytest.mark.parametrize("name", [MONO, MOZG])
def test_reimport_adds_nothing(aider_dir, store, name):
    got = import_all(store, aider_dir / name)
    sessions = parse_all_file(aider_dir / name)
    assert [(p.external_key, len(seqs)) for _, p, seqs in got] == [
        (s.external_key, len(s.settled_events)) for s in sessions
    ]
    assert all(p.external_key.startswith("aider:sha256:") for _, p, _ in got)
    after = snapshot(store)
    assert len(after[1]) == len(_headers(aider_dir / name))
    again = import_all(store, aider_dir / name)
    assert [sid for sid, _, _ in again] == [sid for sid, _, _ in got] and all(seqs == [] for _, _, seqs in again)
    assert snapshot(store) == after


@pytest.mark.parametrize("case", ["empty", "binary", "invalid_utf8", "cut_in_utf8", "no_structure"])
def test_malformed_is_rejected_and_store_unchanged(aider_dir, store, tmp_path, case):
    import_all(store, aider_dir / MONO)  # a non-empty store
    data = (aider_dir / MOZG).read_bytes()
    mid = data.index("мозгослав".encode())  # line 81, a Cyrillic user prompt
    variants = {
        "empty": EMPTY_FILE,
        "binary": BINARY_FILE,
        "invalid_utf8": (data[:mid] + b"\xff" + data[mid:], "line 81", "not UTF-8 text"),
        "cut_in_utf8": (data[: mid + 1], "line 81", "not UTF-8 text"),  # cut inside a 2-byte character
        "no_structure": (
            b"# Notes\n\nJust a markdown file.\n> a quote  \n",
            "line 1",
            "not an aider chat history",
        ),
    }
    blob, where, reason = variants[case]
    assert_rejected(store, tmp_path / MOZG, blob, where=where, reason=reason, fmt="aider")


SYNTHETIC = """
# aider chat started at 2026-01-05 14:02:11

> Aider v0.86.2  
> Model: anthropic/claude-x with diff edit format  

#### /run pytest -q  
> Add 0.2k tokens of command output to the chat? (Y)es/(N)o [Yes]: y  

#### rename foo to bar in util.py  
####   
#### keep the docstring  

> quoted requirement (markdown quote, not aider output)
#### Plan (a markdown heading, not user input)

util.py
```python
<<<<<<< SEARCH
def foo():
=======
def bar():
>>>>>>> REPLACE
```

> Tokens: 9.7k sent, 1.2k cache write, 5.0k cache hit, 90 received. Cost: $0.00 message, $0.00 session.  
> Applied edit to util.py  
> Commit 1a2b3c4 refactor: rename foo to bar  
> Tokens: 950 sent, 12 received.  
> litellm.APIConnectionError: connection reset  
"""


def test_synthetic_history_edge_cases(tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(SYNTHETIC, "utf-8")
    events = parse_file(path).events
    assert ref_kinds(events) == [
        ("line:2", "SystemNote"),
        ("line:4", "SystemNote"),
        ("line:7", "UserMessage"),
        ("line:8", "SystemNote"),  # /run: user input + aider output note
        ("line:10", "UserMessage"),
        ("line:14", "AssistantMessage"),
        ("line:26", "Usage"),
        ("line:27", "ToolResult"),
        ("line:28", "SystemNote"),
        ("line:29#request", "AssistantMessage"),
        ("line:29", "Usage"),  # a request with no reply text
        ("line:30", "SystemNote"),
    ]
    ev = {pe.source_ref: pe.event for pe in events}
    assert ev["line:7"].text == "/run pytest -q"
    assert ev["line:10"].text == "rename foo to bar in util.py\n\nkeep the docstring"
    reply = ev["line:14"]
    assert reply.text == (
        "> quoted requirement (markdown quote, not aider output)\n#### Plan (a markdown heading, not user input)"
    )
    assert reply.tool_calls[0].id == "edit-L19" and ev["line:27"].call_id == "edit-L19"
    assert json.loads(reply.tool_calls[0].arguments) == {
        "path": "util.py",
        "search": "def foo():",
        "replace": "def bar():",
    }
    assert reply.model == "anthropic/claude-x"
    # "sent" is the whole prompt, cache reads and writes included: uncached input = 9700 - 5000 - 1200
    assert ev["line:26"] == Usage(input_tokens=3500, output_tokens=90, cache_read_tokens=5000, cache_write_tokens=1200)
    assert ev["line:29"] == Usage(input_tokens=950, output_tokens=12)
    assert ev["line:30"] == SystemNote(text="litellm.APIConnectionError: connection reset", subtype="api_error")
    assert ev["line:28"].text == "Commit 1a2b3c4 refactor: rename foo to bar"


def test_a_markdown_file_quoting_an_aider_header_in_a_code_block_is_no_aider_history(tmp_path):
    """Found by a new-user trial: `latch import` of the corpus folder imported FORMATS.md (a format guide that
    quotes ``# aider chat started at`` inside a fenced block) as an aider session."""
    from latch.importers.aider import AiderImporter

    doc = tmp_path / "FORMATS.md"
    doc.write_text("# Formats\n\nAider writes:\n\n```\n# aider chat started at 2025-01-01 10:00:00\n\n#### hi\n```\n")
    assert AiderImporter().sniff(doc, doc.read_bytes()) == 0
    real = tmp_path / "notes.md"
    real.write_text("# aider chat started at 2025-01-01 10:00:00\n\n#### fix the bug\n\nDone.\n")
    assert AiderImporter().sniff(real, real.read_bytes()) >= 80


def _cut(src, dest, lines):
    """``dest`` = the first ``lines`` lines of ``src`` (the file as aider had written it then)."""
    dest.write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:lines]))


def _logs(store):
    """Every stored session's events as ``(seq, source_ref, payload)``, by session id."""
    return {s.id: [(e.seq, e.source_ref, e.event.to_payload()) for e in store.events(s.id)] for s in store.sessions()}


def test_a_file_grown_by_one_more_run_adds_one_session(aider_dir, store, tmp_path):
    """Aider starts again: the new run is a new session; the earlier runs keep theirs, and the run that was
    last only gets its open tail (closed by the new header)."""
    src = aider_dir / MONO
    headers = _headers(src)
    live = tmp_path / src.name
    _cut(src, live, headers[-1][0] - 1)  # up to the line before the last header (line 2608)
    before = import_all(store, live)
    assert len(before) == len(headers) - 1
    old = _logs(store)
    tail = before[-1][1].events[before[-1][1].settled :]  # the then-last run's last turn, not stored yet
    assert len(tail) == len(before[-1][1].events) - len(before[-1][2]) > 0
    live.write_bytes(src.read_bytes())
    after = import_all(store, live)
    assert len(after) == len(headers) and len(store.sessions()) == len(before) + 1
    assert [sid for sid, _, _ in after[:-1]] == [sid for sid, _, _ in before]
    assert [len(seqs) for _, _, seqs in after[:-2]] == [0] * (len(headers) - 2)
    new = _logs(store)
    for sid, _, _ in before[:-1]:
        assert new[sid] == old[sid]
    grown_sid = before[-1][0]
    assert new[grown_sid][: len(old[grown_sid])] == old[grown_sid]
    assert [ref for _, ref, _ in new[grown_sid][len(old[grown_sid]) :]] == [pe.source_ref for pe in tail]
    sid, parsed, seqs = after[-1]
    assert sid not in old and len(seqs) == len(parsed.settled_events) > 0
    assert new[sid][0][1] == f"line:{headers[-1][0]}" and parsed.meta["run"] == len(headers)


def test_a_file_whose_last_run_grew_appends_to_that_session_only(aider_dir, store, tmp_path):
    src = aider_dir / MONO
    headers = _headers(src)
    live = tmp_path / src.name
    _cut(src, live, (headers[-1][0] + len(src.read_bytes().splitlines())) // 2)  # halfway through the last run
    before = import_all(store, live)
    assert len(before) == len(headers)
    old = _logs(store)
    live.write_bytes(src.read_bytes())
    after = import_all(store, live)
    assert [sid for sid, _, _ in after] == [sid for sid, _, _ in before] and len(store.sessions()) == len(headers)
    assert [bool(seqs) for _, _, seqs in after] == [False] * (len(headers) - 1) + [True]
    new = _logs(store)
    last = before[-1][0]
    assert all(new[sid] == old[sid] for sid in old if sid != last)
    assert new[last][: len(old[last])] == old[last] and len(new[last]) > len(old[last])
    # what one import of the whole file stores for that run
    assert [ref for _, ref, _ in new[last]] == [pe.source_ref for pe in parse_file(src).settled_events]


def test_a_store_holding_the_whole_file_as_one_session_keeps_it(aider_dir, store):
    """An earlier release stored the file as ONE session (key: the head key alone). Importing it now adds one
    session per run and leaves that one as it was, even for a first run whose first records are that session's
    (mozgoslav's run 1 has 5 events: its first 4 are the old session's head, yet it is no copy of it)."""
    path = aider_dir / MOZG
    sessions = parse_all_file(path)
    whole = [pe for s in sessions for pe in s.events]
    legacy, _ = store.import_session(
        external_key=sessions[0].external_key.split(":run-")[0],
        source=str(path),
        format="aider",
        workspace=None,
        events=whole,
    )
    got = import_all(store, path, final=True)
    assert legacy not in {sid for sid, _, _ in got}
    assert [len(seqs) for _, _, seqs in got] == [len(s.events) for s in sessions] == [5, 35, 46]
    assert {s.id: s.events for s in store.sessions()}[legacy] == len(whole) == 86


def test_a_reply_naming_files_the_user_adds_is_answered_by_the_added_files_reflection(aider_dir):
    # aider/prompts.py added_files, sent as the next request's user turn; the file records only the confirmation
    events = [pe for s in parse_all_file(aider_dir / MOZG) for pe in s.events]
    got = [(pe.source_ref, pe.event.text) for pe in events if (pe.source_ref or "").endswith("#reflection")]
    assert got == [
        (
            "line:388#reflection",
            "I added these files to the chat: frontend/src/store/slices/jobs/index.ts\n"
            "Let me know if there are others we should add.",
        ),
        (
            "line:3577#reflection",
            "I added these files to the chat: frontend/src/store/slices/settings/index.ts\n"
            "Let me know if there are others we should add.",
        ),
    ]
    at = [pe.source_ref for pe in events].index("line:388#reflection")
    assert isinstance(events[at + 1].event, AssistantMessage) and events[at].event.is_meta
    # a watch-mode request ("Processing your request...") asks about its own prompt's files: no reflection
    mono = [pe for s in parse_all_file(aider_dir / MONO) for pe in s.events]
    assert [pe.source_ref for pe in mono if (pe.source_ref or "").endswith("#reflection")] == ["line:1202#reflection"]
