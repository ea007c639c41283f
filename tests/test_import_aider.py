"""Aider chat-history importer on the real corpus (one file Cyrillic), re-import and malformed input.

Counts were checked by hand with grep/awk over the raw markdown (commands in the comments).
"""

from __future__ import annotations

import json

import pytest

from latch.events import AssistantMessage, SystemNote, ToolResult, Usage, UserMessage
from latch.importers import parse_file

from _importer_checks import BINARY_FILE, EMPTY_FILE, assert_rejected, assert_reimport_adds_nothing, detected, ref_kinds

MONO = "monochromatic.aider.chat.history.md"
MOZG = "mozgoslav.aider.chat.history.md"


@pytest.fixture
def aider_dir(corpus_dir):
    return corpus_dir / "aider"


def _events(path):
    return [pe.event for pe in parse_file(path).events]


def _notes(events, subtype):
    return [e for e in events if isinstance(e, SystemNote) and e.subtype == subtype]


@pytest.mark.parametrize("name", [MONO, MOZG])
def test_detect_picks_aider(aider_dir, name):
    assert detected(aider_dir / name) == "aider"


def test_monochromatic_counts(aider_dir):
    parsed = parse_file(aider_dir / MONO)
    assert parsed.stats == {
        # groups of consecutive user lines: awk '/^####/ && /  $/ {if(!p) n++; p=1; next} {p=0} END{print n}'
        "user_messages": 26,
        # runs of non-user/non-output/non-header lines holding text (awk, multi-line `>` reports skipped) → 40;
        # each of the 39 `> Tokens:` lines follows one of them
        "assistant_messages": 40,
        # SEARCH blocks outside failure reports, in replies followed by `> Applied edit` or a failure report:
        # 37 (5 more got no outcome: ask mode / "Skipping edits" → they stay text)
        "tool_calls": 37, "tool_results": 37,
        # grep -c '^> # [0-9]* SEARCH/REPLACE blocks\? failed to match' → 7 reports, each "# 1 ... block failed"
        "tool_errors": 7,
        "orphan_results": 0, "missing_results": 0,
        # grep '^> Tokens:' → 39 lines; "k" values ×1000 summed: 613,500 sent, 24,145 received; no cache fields
        "usage": {"input_tokens": 613500, "output_tokens": 24145, "cache_read_tokens": None,
                  "cache_write_tokens": None, "requests": 39},
    }
    assert parsed.meta == {"sessions": 19, "usage_rounded": True}
    assert parsed.workspace == (r"C:\Users\user\Text\Projects\Aquaticat\monochromatic2025MAY24-pnpmTest"
                                r"\packages\module\es")


def test_mozgoslav_counts(aider_dir):
    parsed = parse_file(aider_dir / MOZG)
    assert parsed.stats == {
        "user_messages": 21,       # same awk as above
        "assistant_messages": 16,  # same awk; 16 `<thinking-content-…>` openings, one per reply
        "tool_calls": 3, "tool_results": 3,  # grep -c '^> Applied edit to' → 3 (whole edit format, no SEARCH)
        "tool_errors": 0, "orphan_results": 0, "missing_results": 0,
        # 14 `> Tokens:` lines (no cost part in this file): 83,800 sent, 25,550 received
        "usage": {"input_tokens": 83800, "output_tokens": 25550, "cache_read_tokens": None,
                  "cache_write_tokens": None, "requests": 14},
    }
    assert parsed.meta == {"sessions": 3, "usage_rounded": True}
    assert parsed.workspace is None  # this file never prints "Cur working dir:"


def test_sessions_notes_and_usage_placement(aider_dir):
    events = parse_file(aider_dir / MONO).events
    starts = [pe for pe in events if isinstance(pe.event, SystemNote) and pe.event.subtype == "session_start"]
    assert len(starts) == 19  # grep -c '^# aider chat started at'
    assert (starts[0].source_ref, starts[0].ts, starts[0].event.text) == (
        "line:2", "2025-06-02 11:47:49", "aider chat started at 2025-06-02 11:47:49")
    # grep -c '^> litellm\.[A-Za-z]*Error' → 11
    assert len(_notes([pe.event for pe in events], "api_error")) == 11
    for i, pe in enumerate(events):  # every Usage directly follows its reply, model unknown (rounded figures)
        if isinstance(pe.event, Usage):
            assert isinstance(events[i - 1].event, AssistantMessage) and pe.event.model is None
    first = next(pe for pe in events if isinstance(pe.event, Usage))
    assert (first.source_ref, first.event.input_tokens, first.event.output_tokens) == ("line:337", 9700, 85)


def test_search_replace_edits(aider_dir):
    events = parse_file(aider_dir / MONO).events
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
    assert result == ToolResult(call_id="edit-L407", content=r"Applied edit to packages\module\es\src\CONVENTIONS.md",
                                name="edit")
    # lines 2624-2806: two blocks on CONVENTIONS.md, the second failed to match, the first was applied
    failed_turn = [pe.event for pe in events
                   if isinstance(pe.event, ToolResult) and pe.source_ref.startswith("line:2806")]
    assert [(r.call_id, r.is_error) for r in failed_turn] == [("edit-L2635", False), ("edit-L2772", True)]
    assert failed_turn[0].content == "Applied edit to CONVENTIONS.md"
    assert failed_turn[1].content.startswith(
        "# 1 SEARCH/REPLACE block failed to match!\n\n## SearchReplaceNoExactMatch")
    assert failed_turn[1].content.endswith("Just reply with fixed versions of the block above that failed to match.")
    # the report is the tool result; aider's other output lines follow as a note; the fix is the next request
    refs = [pe.source_ref for pe in events]
    at = refs.index("line:2625")
    assert refs[at:at + 7] == ["line:2625", "line:2799", "line:2806", "line:2806#1", "line:2800", "line:2843",
                               "line:2878"]
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
    sid, parsed = assert_reimport_adds_nothing(store, aider_dir / name)
    assert parsed.external_key.startswith("aider:sha256:")


@pytest.mark.parametrize("case", ["empty", "binary", "invalid_utf8", "cut_in_utf8", "no_structure"])
def test_malformed_is_rejected_and_store_unchanged(aider_dir, store, tmp_path, case):
    assert_reimport_adds_nothing(store, aider_dir / MONO)  # a non-empty store
    data = (aider_dir / MOZG).read_bytes()
    mid = data.index("мозгослав".encode())  # line 81, a Cyrillic user prompt
    variants = {
        "empty": EMPTY_FILE,
        "binary": BINARY_FILE,
        "invalid_utf8": (data[:mid] + b"\xff" + data[mid:], "line 81", "not UTF-8 text"),
        "cut_in_utf8": (data[:mid + 1], "line 81", "not UTF-8 text"),  # cut inside a 2-byte character
        "no_structure": ("# Notes\n\nJust a markdown file.\n> a quote  \n".encode(), "line 1",
                         "not an aider chat history"),
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
        ("line:2", "SystemNote"), ("line:4", "SystemNote"),
        ("line:7", "UserMessage"), ("line:8", "SystemNote"),          # /run: user input + aider output note
        ("line:10", "UserMessage"),
        ("line:14", "AssistantMessage"), ("line:26", "Usage"), ("line:27", "ToolResult"),
        ("line:28", "SystemNote"),
        ("line:29#request", "AssistantMessage"), ("line:29", "Usage"),  # a request with no reply text
        ("line:30", "SystemNote"),
    ]
    ev = {pe.source_ref: pe.event for pe in events}
    assert ev["line:7"].text == "/run pytest -q"
    assert ev["line:10"].text == "rename foo to bar in util.py\n\nkeep the docstring"
    reply = ev["line:14"]
    assert reply.text == ("> quoted requirement (markdown quote, not aider output)\n"
                          "#### Plan (a markdown heading, not user input)")
    assert reply.tool_calls[0].id == "edit-L19" and ev["line:27"].call_id == "edit-L19"
    assert json.loads(reply.tool_calls[0].arguments) == {"path": "util.py", "search": "def foo():",
                                                         "replace": "def bar():"}
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
