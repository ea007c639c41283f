"""Importing a transcript that grows (agents append to their logs) is append-only and exact.

For each corpus file an agent appends to (Claude Code, Codex, Aider), the file is cut at line
boundaries, the prefix imported, then the whole file into the same store: one session whose events
(kind, canonical payload, source_ref, seq) and canonical state equal those of one import of the
whole file into a fresh store. An Aider file holds one session per aider run: there every session of
the file (``import_all``) is compared, run for run. Also: the tester's two reports, a database written by the earlier
importers (an end-of-file placeholder followed by the real result), ``final=True``, and edits to an
imported prefix being refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from latch.engine.units import UnitBuilder
from latch.events import EOF_PLACEHOLDER_TEXT, AssistantMessage, ToolResult, UserMessage, canonical_json
from latch.host.ingest import import_all, import_file
from latch.importers import TranscriptError, parse_file
from latch.kernel import canonical_state
from latch.kernel.derive import DerivationContext, SessionDeriver
from latch.store import EventStore, PendingEvent

pytestmark = pytest.mark.corpus

BASTION = "claude-code/bastion_claude-session.jsonl"
RELIABILITY = "claude-code/claude-reliability_python-to-rust-port.jsonl"
EDGERUNNER = "codex/edgerunner_codex-session.jsonl"
MOZGOSLAV = "aider/mozgoslav.aider.chat.history.md"
MONOCHROMATIC = "aider/monochromatic.aider.chat.history.md"

# (file, lines kept in the prefix, what the cut falls on). 25/50/75% of the lines, plus cuts where a
# careless importer goes wrong: between a call and its result, between a result and its usage, inside a
# response, inside a user prompt, between a reply and its edit results.
CUTS = [
    (BASTION, 12, "25%: after a result, before the next response's progress lines"),
    (BASTION, 24, "50%: a progress line after a tool_use; the result (line 25) not written"),
    (BASTION, 35, "75%: a progress line after the result of line 34"),
    (BASTION, 7, "inside a response: thinking and text written, its tool_use (line 8) not yet"),
    (RELIABILITY, 24, "25%: a result"),
    (RELIABILITY, 48, "50%: a tool_use, its result (line 49) not written"),
    (RELIABILITY, 72, "75%: a result"),
    (RELIABILITY, 66, "between two parallel tool_use lines of one response (66, 67)"),
    (RELIABILITY, 68, "the first parallel result written (68), the second (69) not"),
    (EDGERUNNER, 216, "25%"),
    (EDGERUNNER, 433, "50%"),
    (EDGERUNNER, 650, "75%"),
    (EDGERUNNER, 300, "the tester's cut: a custom_tool_call, its output (line 301) not written"),
    (EDGERUNNER, 301, "the output written, its token_count (line 302) not: the usage goes before the result"),
    (EDGERUNNER, 13, "an assistant message written, the call of the same response (line 14) not"),
    (MOZGOSLAV, 1094, "25%"),
    (MOZGOSLAV, 2188, "50%"),
    (MOZGOSLAV, 3282, "75%"),
    (MOZGOSLAV, 3351, "the tester's cut: the first 2 sessions (the third header is line 3352)"),
    (MOZGOSLAV, 3740, "inside the 285-line prompt that starts on line 3732"),
    (MONOCHROMATIC, 933, "25%"),
    (MONOCHROMATIC, 1866, "50%"),
    (MONOCHROMATIC, 2799, "75%"),
    (MONOCHROMATIC, 445, "a reply with a SEARCH/REPLACE block written, its 'Applied edit' (line 446) not"),
]


def _ids(case):
    return f"{case[0].split('/')[1].split('.')[0].split('_')[0]}@{case[1]}"


def _write_prefix(src: Path, dest: Path, lines: int) -> None:
    dest.write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:lines]))


def _log(store, sid):
    return [(e.seq, e.kind, canonical_json(e.event.to_payload()), e.source_ref, e.ts) for e in store.events(sid)]


def _one_shot(tmp_path: Path, path: Path):
    store = EventStore(tmp_path / "one-shot.db")
    sid, _, _ = import_file(store, path)
    return store, sid


def _one_shot_all(tmp_path: Path, path: Path):
    """A fresh store holding one import of every session of ``path`` (an Aider file: one per run)."""
    store = EventStore(tmp_path / "one-shot-all.db")
    return store, [sid for sid, _, _ in import_all(store, path)]


@pytest.mark.parametrize("case", CUTS, ids=[_ids(c) for c in CUTS])
def test_prefix_then_whole_file_equals_one_import(corpus_dir, tmp_path, case):
    name, keep, _why = case
    src = corpus_dir / name
    live = tmp_path / src.name  # the agent's log, first as the prefix, then grown
    _write_prefix(src, live, keep)
    grown = EventStore(tmp_path / "grown.db")
    first = {sid: seqs for sid, _, seqs in import_all(grown, live)}
    assert any(first.values())  # every cut above holds settled events
    live.write_bytes(src.read_bytes())
    second = {sid: seqs for sid, _, seqs in import_all(grown, live)}
    one, one_sids = _one_shot_all(tmp_path, live)
    assert list(second) == one_sids and list(first) == one_sids[: len(first)]  # the prefix's runs come first
    assert (
        len(grown.sessions())
        == len(one_sids)
        == (1 if "aider" not in name else src.read_text("utf-8").count("\n# aider chat started at "))
    )
    for sid in one_sids:
        assert _log(grown, sid) == _log(one, sid)
        assert first.get(sid, []) + second[sid] == [e.seq for e in one.events(sid)]
        assert canonical_state(grown, sid).to_json() == canonical_state(one, sid).to_json()
    assert all(seqs == [] for _, _, seqs in import_all(grown, live))  # and again: nothing new


@pytest.mark.parametrize("name", [BASTION, RELIABILITY, EDGERUNNER, MOZGOSLAV, MONOCHROMATIC])
def test_growing_in_steps(corpus_dir, tmp_path, name):
    """The file grows by a tenth at a time, imported after each step: still one import's events."""
    src = corpus_dir / name
    live = tmp_path / src.name
    n = len(src.read_bytes().splitlines())
    grown = EventStore(tmp_path / "grown.db")
    for step in range(1, 10):
        _write_prefix(src, live, n * step // 10)
        try:
            import_all(grown, live)
        except TranscriptError as exc:  # only a Claude Code prefix with no conversation line yet
            assert "no conversation lines" in str(exc) and grown.count_events() == 0
    live.write_bytes(src.read_bytes())
    sids = [sid for sid, _, _ in import_all(grown, live)]
    one, one_sids = _one_shot_all(tmp_path, live)
    assert sids == one_sids and [s.id for s in grown.sessions()] == one_sids
    assert [_log(grown, sid) for sid in sids] == [_log(one, sid) for sid in one_sids]


def test_the_open_tail_of_each_corpus_file(corpus_dir):
    """What one import leaves for the file to settle: the response, turn or call still in progress."""
    # (all events, settled events, refs of the open tail), checked against the raw files:
    expected = {
        # ends with system/turn_duration (line 47): everything settled
        BASTION: (12, 12, []),
        # line 97 is the last line, an assistant text block (stop_reason null): its response may go on
        RELIABILITY: (120, 118, ["line:97", "line:97#usage"]),
        # lines 866-867: reasoning + custom_tool_call, no output, token_count or turn end after them
        EDGERUNNER: (532, 531, ["line:866"]),
        # parse_file: the last aider run (header on line 3352, 46 of the file's 86 events, one of them the
        # added_files reflection after line 3577); its last turn, after the prompt on line 4252: the reply
        # (thinking opens on 4254), its usage (4368), its two edit results in call order (4374, 4373), then
        # aider's other output lines as one note (4369-)
        MOZGOSLAV: (46, 41, ["line:4254", "line:4368", "line:4374", "line:4373", "line:4369"]),
        # the last run (19th header, 47 of the file's 248 events); its last turn: the corrected SEARCH/REPLACE
        # reply (3679), its usage (3704), its "Applied edit" (3705), then the commit and the "unable to read" /
        # ^C output lines as one note (3706-3732)
        MONOCHROMATIC: (47, 43, ["line:3679", "line:3704", "line:3705", "line:3706"]),
    }
    for name, (total, settled, tail) in expected.items():
        parsed = parse_file(corpus_dir / name)
        assert (len(parsed.events), len(parsed.settled_events)) == (total, settled), name
        assert [pe.source_ref for pe in parsed.events[settled:]] == tail, name
        assert parsed.stats["missing_results"] == 0  # no placeholder for a call still running


def test_final_import_stores_the_open_tail(corpus_dir, store):
    sid, parsed, seqs = import_file(store, corpus_dir / RELIABILITY, final=True)
    assert len(seqs) == len(parsed.events) == 120
    last = list(store.events(sid))[-2].event
    assert isinstance(last, AssistantMessage) and last.text.startswith("The Python project has been fully ported")


def test_codex_pending_call_is_no_unit_until_its_result(corpus_dir, tmp_path):
    """The tester's Codex report: 300 lines then the whole file gave 174 + 360 = 534 events with a
    placeholder that the real result then contradicted; now the call waits and no view shows it."""
    src = corpus_dir / EDGERUNNER
    live = tmp_path / src.name
    _write_prefix(src, live, 300)
    store = EventStore(tmp_path / "grown.db")
    sid, parsed, first = import_file(store, live)
    # lines 299-300 (reasoning + call_PVUI…) are the open tail: its output and token_count follow
    assert parsed.events[-1].source_ref == "line:299" and len(first) == 172 == len(parsed.events) - 1
    final = EventStore(tmp_path / "final.db")
    import_file(final, live, final=True)  # a caller that stores the tail: the call is pending
    builder = UnitBuilder()
    units = builder.feed_all(final.events())
    assert builder.pending_seq == final.max_seq()  # the last response is no unit: never in a view
    pending = "call_PVUIL9wGKZzi71ziZvlSSb2p"
    assert all(
        m.tool_call_id != pending and pending not in {c.id for c in m.tool_calls} for u in units for m in u.messages
    )
    live.write_bytes(src.read_bytes())
    _, _, second = import_file(store, live)
    assert len(first) + len(second) == 531 == store.count_events()


def test_database_of_the_earlier_importers(corpus_dir, tmp_path):
    """An earlier importer stored ``[no result: the transcript ends before the tool result]`` for the
    call pending at line 300. The grown file's import appends the real result after it; units and the
    kernel take the real result and ignore the placeholder, as if it had never been stored."""
    src = corpus_dir / EDGERUNNER
    live = tmp_path / src.name
    _write_prefix(src, live, 300)
    prefix = parse_file(live)
    call = prefix.events[-1].event.tool_calls[0]
    old = EventStore(tmp_path / "old.db")
    legacy = PendingEvent(
        ToolResult(call_id=call.id, content=EOF_PLACEHOLDER_TEXT, is_error=True, name=call.name, missing=True),
        f"missing:{call.id}",
        None,
    )
    sid, _ = old.import_session(
        external_key=prefix.external_key,
        source=str(live),
        format="codex",
        workspace=prefix.workspace,
        events=[*prefix.events, legacy],
    )
    live.write_bytes(src.read_bytes())
    import_file(old, live)
    one, one_sid = _one_shot(tmp_path, live)
    stored = [e for e in old.events(sid) if not (isinstance(e.event, ToolResult) and e.event.eof_placeholder)]
    assert [(e.source_ref, e.event) for e in stored] == [(e.source_ref, e.event) for e in one.events(one_sid)]

    def conversation(store, session):
        units = UnitBuilder().feed_all(store.events(session))
        return [(m.role, m.content, m.tool_call_id, m.is_error) for u in units for m in u.messages]

    def facts(store, session):
        deriver = SessionDeriver(DerivationContext(session, "codex", prefix.workspace))
        return [repr(f) for e in store.events(session) for f in deriver.feed(e.event)]

    assert conversation(old, sid) == conversation(one, one_sid)
    assert facts(old, sid) == facts(one, one_sid)
    assert EOF_PLACEHOLDER_TEXT not in str(conversation(old, sid))


def test_aider_identity_survives_growth(corpus_dir, tmp_path):
    """The tester's Aider report: 2 runs then the whole file gave two sessions (39 + 84 events). Now each run is
    one session: the 2 runs keep theirs as the file grows, the third run is a new one."""
    src = corpus_dir / MOZGOSLAV
    live = tmp_path / src.name
    _write_prefix(src, live, 3351)
    store = EventStore(tmp_path / "grown.db")
    prefix = import_all(store, live)
    live.write_bytes(src.read_bytes())
    whole = import_all(store, live)
    # run keys: the file's head key (line 2, "# aider chat started at 2026-04-22 22:40:12"; line 1 is blank),
    # the run's ordinal and its header line
    assert [p.external_key for _, p, _ in prefix] == [p.external_key for _, p, _ in whole[:2]]
    assert [sid for sid, _, _ in prefix] == [sid for sid, _, _ in whole[:2]] and len(store.sessions()) == 3
    # the 2 runs parse to 5 + 35 = 40 events (the tester's count, and aider's added_files reflection after line
    # 388); the second run's last turn, the reply interrupted on line 3062 and its "^C KeyboardInterrupt" note
    # (3348), waits for the third header (3352) to close it: 38 stored, then those 2 and the third run's 41
    # settled events: 38 + 43 = 81
    assert [len(p.events) for _, p, _ in prefix] == [5, 35]
    assert [len(seqs) for _, _, seqs in prefix] == [5, 33] and [len(seqs) for _, _, seqs in whole] == [0, 2, 41]
    assert store.count_events() == 81


def test_an_edited_prefix_is_refused(corpus_dir, tmp_path):
    src = corpus_dir / MOZGOSLAV
    live = tmp_path / src.name
    live.write_bytes(src.read_bytes())
    store = EventStore(tmp_path / "s.db")
    import_all(store, live)
    before = store.count_events()
    text = src.read_text(encoding="utf-8").replace("#### Про что проект мозгослав", "#### Про что проект", 1)
    live.write_text(text, encoding="utf-8")  # line 81, a user prompt of the second run, imported before
    with pytest.raises(TranscriptError, match=r":line 81: reads differently from when it was imported"):
        import_all(store, live)
    assert store.count_events() == before


def test_a_rewound_claude_code_branch_stays_and_the_new_one_follows(corpus_dir, tmp_path):
    """Rewinding (a new prompt hanging off an earlier line) abandons a branch. The store is append-only:
    what was imported stays, the new branch is appended after it."""
    src = corpus_dir / RELIABILITY
    live = tmp_path / src.name
    _write_prefix(src, live, 12)
    store = EventStore(tmp_path / "s.db")
    sid, _, first = import_file(store, live)
    lines = src.read_bytes().splitlines(keepends=True)[:12]
    head = json.loads(lines[1])  # line 2, the first prompt
    rewind = {
        **head,
        "uuid": "rewound-1",
        "parentUuid": head["uuid"],
        "message": {"role": "user", "content": "Start over in Go"},
    }
    live.write_bytes(b"".join(lines) + (json.dumps(rewind) + "\n").encode())
    _, _, second = import_file(store, live)
    refs = [e.source_ref for e in store.events(sid)]
    assert len(second) == 1 and refs[-1] == "line:13" and len(refs) == len(first) + 1
    assert isinstance(store.get(second[0]).event, UserMessage)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"


@pytest.mark.parametrize("keep", range(1, 61))
def test_example_cut_at_every_line(tmp_path, keep):
    """The tester's report: every line of the example repeats its response's final ``stop_reason`` (as
    Claude Code 2.1.109+ writes them), so a cut between two lines of one response (after lines 3, 11, 15,
    18, 27, 30) once stored the response's first half as complete. The last response is open until a
    later line follows it; a prefix of only the permission-mode line (keep=1) has nothing to store yet."""
    live = tmp_path / "live.jsonl"
    _write_prefix(EXAMPLE, live, keep)
    grown = EventStore(tmp_path / "grown.db")
    _, _, first = import_file(grown, live, final=False)
    assert bool(first) == (keep > 1)
    live.write_bytes(EXAMPLE.read_bytes())
    sid, _, second = import_file(grown, live, final=False)
    one, one_sid = _one_shot(tmp_path, live)
    assert _log(grown, sid) == _log(one, one_sid)
    assert first + second == [e.seq for e in one.events(one_sid)]


def test_example_last_response_is_the_open_tail():
    parsed = parse_file(EXAMPLE)
    # line 60, the final answer msg_01Ex0028 (stop_reason end_turn), is the last line: nothing proves it complete
    assert [pe.source_ref for pe in parsed.events[parsed.settled :]] == ["line:60", "line:60#usage"]
