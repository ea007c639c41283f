"""Claude Code listing attachments (deferred tools, MCP instructions, skills, agents): text the transcript keeps
only in ``attachment`` records. It is imported as search-only notes: ``latch search`` finds it, the engine's
recall never brings it back, and every replayed view is byte for byte what it was without it.

The corpus's Claude Code files come from versions that wrote no listing attachments, so the tests splice four
into a copy of a real corpus session (bastion, Claude Code 2.1.x), between its prompt and the first response,
chained through ``parentUuid`` as Claude Code writes them. Their shapes are those of FORMATS.md section 1 and
of Claude Code 2.1.2xx transcripts quoted in public repositories (``addedNames``/``addedLines``/
``needsAuthMcpServers``, ``addedBlocks``, ``content``/``names``/``isInitial``, ``addedTypes``/``addedLines``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus_support import require_corpus

from latch import plugins
from latch.cli import _load_commands, cli
from latch.engine.episodes import EpisodeIndex
from latch.engine.recall import RecallCache, query_terms, recall
from latch.engine.units import TokenCounter, request_lines
from latch.events import ATTACHMENT_NOTE, SystemNote
from latch.host.ingest import import_all
from latch.host.replay import run_replay
from latch.host.session import StoreSessionReader
from latch.importers import parse_file
from latch.store import EventStore

pytestmark = pytest.mark.corpus

BASTION = "claude-code/bastion_claude-session.jsonl"
PROMPT_LINE = 5  # the session's one typed prompt; line 6 is the first response's first block

ATTACHMENTS = [
    {
        "type": "deferred_tools_delta",
        "addedNames": ["CronCreate", "WebFetch", "mcp__context7__resolve-library-id"],
        "addedLines": ["CronCreate", "WebFetch", "mcp__context7__resolve-library-id"],
        "removedNames": [],
        "wireHiddenNames": [],
        "readdedNames": [],
        "pendingMcpServers": [],
        "needsAuthMcpServers": ["claude.ai Notion"],
        "failedMcpServers": [],
    },
    {
        "type": "agent_listing_delta",
        "addedTypes": ["Explore", "general-purpose"],
        "addedLines": [
            "- Explore: Fast agent specialized for exploring codebases",
            "- general-purpose: General-purpose agent for researching complex questions",
        ],
        "removedTypes": [],
        "isInitial": True,
        "showConcurrencyNote": False,
    },
    {
        "type": "mcp_instructions_delta",
        "addedNames": ["context7"],
        "addedBlocks": ["## context7\nCall resolve-library-id before get-library-docs."],
        "removedNames": [],
    },
    {
        "type": "skill_listing",
        "content": "- dataviz: Use this skill whenever you are about to create ANY chart",
        "skillCount": 1,
        "isInitial": True,
        "names": ["dataviz"],
    },
]
NOTES = [
    SystemNote(
        "CronCreate\nWebFetch\nmcp__context7__resolve-library-id\nMCP servers needing auth: claude.ai Notion",
        "attachment:deferred_tools_delta",
    ),
    SystemNote(
        "- Explore: Fast agent specialized for exploring codebases\n"
        "- general-purpose: General-purpose agent for researching complex questions",
        "attachment:agent_listing_delta",
    ),
    SystemNote("## context7\nCall resolve-library-id before get-library-docs.", "attachment:mcp_instructions_delta"),
    SystemNote("- dataviz: Use this skill whenever you are about to create ANY chart", "attachment:skill_listing"),
]


def with_attachments(src: Path, dest: Path) -> Path:
    """``src`` with :data:`ATTACHMENTS` after its prompt line, the first response re-parented to the last one."""
    lines = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    prompt = lines[PROMPT_LINE - 1]
    assert prompt["type"] == "user" and lines[PROMPT_LINE]["parentUuid"] == prompt["uuid"]
    envelope = {
        k: prompt[k]
        for k in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "timestamp")
        if k in prompt
    }
    added, parent = [], prompt["uuid"]
    for i, att in enumerate(ATTACHMENTS):
        uuid = f"00000000-0000-4000-8000-{i:012d}"
        added.append({"parentUuid": parent, **envelope, "type": "attachment", "attachment": att, "uuid": uuid})
        parent = uuid
    lines[PROMPT_LINE]["parentUuid"] = parent
    out = lines[:PROMPT_LINE] + added + lines[PROMPT_LINE:]
    dest.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in out), encoding="utf-8")
    return dest


@pytest.fixture
def spliced(tmp_path):
    original = require_corpus() / BASTION
    return original, with_attachments(original, tmp_path / "bastion-with-attachments.jsonl")


def test_listing_attachments_are_search_only_notes_in_place(spliced):
    original, path = spliced
    before, after = parse_file(original), parse_file(path)
    notes = [
        (pe.source_ref, pe.event)
        for pe in after.events
        if isinstance(pe.event, SystemNote) and pe.event.subtype.startswith(ATTACHMENT_NOTE)
    ]
    assert notes == [(f"line:{PROMPT_LINE + 1 + i}", n) for i, n in enumerate(NOTES)]
    # right after the prompt, and nothing else changed: the same events, the same stats
    kinds = [type(pe.event).__name__ for pe in after.events]
    assert kinds[:6] == ["UserMessage", "SystemNote", "SystemNote", "SystemNote", "SystemNote", "AssistantMessage"]
    rest = [
        pe.event
        for pe in after.events
        if not (isinstance(pe.event, SystemNote) and pe.event.subtype.startswith(ATTACHMENT_NOTE))
    ]
    assert rest == [pe.event for pe in before.events] and after.stats == before.stats


def _earlier(line: bytes) -> bytes:
    """``line`` with each ``at-seq`` after the prompt moved back by the spliced notes."""

    def back(m: re.Match[bytes]) -> bytes:
        seq = int(m.group(1))
        return b'at-seq=\\"%d\\"' % (seq - len(NOTES) if seq > 1 else seq)

    return re.sub(rb'at-seq=\\"(\d+)\\"', back, line)


def _views(db: Path, path: Path) -> tuple[EventStore, str, list[list[bytes]]]:
    store = EventStore(db)
    ((sid, _, _),) = import_all(store, path, final=True)
    doc, views = run_replay(store, sid, keep_views=True)
    assert doc["summary"]["violations"] == [] and len(views) == doc["summary"]["requests"] == 6
    return store, sid, [request_lines(v) for v in views]


def test_attachment_text_is_found_by_search_and_changes_no_view(spliced, tmp_path):
    original, path = spliced
    plain, _, plain_views = _views(tmp_path / "plain.db", original)
    plain.close()
    store, sid, views = _views(tmp_path / "spliced.db", path)
    try:
        # every request the engine builds is byte for byte the one built without the attachments, but for the log
        # position its kernel snapshot names (``at-seq``: the event before the request, 4 notes later)
        assert views != plain_views and [[_earlier(line) for line in v] for v in views] == plain_views
        assert not any(b"get-library-docs" in line or b"dataviz" in line for v in views for line in v)
        # the engine's recall, asked for exactly those words over the whole session, brings back nothing
        reader = StoreSessionReader(store, sid)
        counter = TokenCounter(plugins.select_estimator(None))
        terms = query_terms(["get-library-docs resolve-library-id dataviz Explore"])
        assert recall(reader, RecallCache(counter), terms, before_seq=store.max_seq(sid) + 1, limit_tokens=50_000) == []
        assert [s.event for s in store.search("get-library-docs", session_id=sid)] == [NOTES[2]]
    finally:
        store.close()
    _load_commands()
    res = CliRunner().invoke(
        cli,
        ["--db", str(tmp_path / "spliced.db"), "search", "--json", "--role", "system", "claude.ai Notion"],
        env={"LATCH_HOME": str(tmp_path / "home")},
    )
    assert res.exit_code == 0, res.output
    (hit,) = json.loads(res.output)
    assert (hit["kind"], hit["session"], hit["text"]) == ("system_note", sid, NOTES[0].text)
    skills = CliRunner().invoke(
        cli,
        ["--db", str(tmp_path / "spliced.db"), "search", "dataviz"],
        env={"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"},
    )
    assert skills.exit_code == 0 and skills.output.startswith("1 hit, newest first"), skills.output
    assert "system_note: - **dataviz**: Use this skill" in skills.output


def test_the_episode_index_takes_no_term_from_a_note(spliced, tmp_path):
    """Episode selection scores the terms of each episode: a listing's words (a skill's, an MCP server's) would
    make the session's first episode match a request that mentions them, and its index line enter a view."""
    _, path = spliced
    store = EventStore(tmp_path / "s.db")
    try:
        ((sid, _, _),) = import_all(store, path, final=True)
        index = EpisodeIndex()
        assert index.rebuild(store.events(sid)) == len(list(store.events(sid)))
        assert [t for t in ("dataviz", "context7", "notion", "whenever") if index.term_id(t) is not None] == []
        assert index.term_id("bastion") is not None  # the prompt's words are indexed as before
    finally:
        store.close()
