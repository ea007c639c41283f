"""People search (``search_hits``, ``call_events``; ``latch search``) on PostgreSQL returns what SQLite returns: the
same hits in the same order for ``--sort relevance`` (the same bm25 floats) and ``recent``, with every filter
(``--tool``, ``--since``, ``--until``, roles, session, forgotten sessions), on a built log and on a real session."""

from __future__ import annotations

import itertools

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.store import EventStore, PendingEvent
from latch.store.pg_ranking import TOKENS

pytestmark = pytest.mark.slow

WORDS = "invoice rounding cent total parse error build cargo rust library python port test fix the a".split()
STAMPS = [
    "2026-01-01",
    "2026-01-02T10:00:00Z",
    "2026-01-02T23:30:00-05:00",
    "2026-01-03 08:15:00.123",
    "2026-01-04T00:00:00+02:00",
    None,
    "yesterday",  # SQLite cannot read it: left out by --since/--until on both backends
    "2461045.5",  # a Julian day number: julianday() reads it
]
TOOLS = ["Bash", "Read", "Edit"]


def _fill(store: EventStore) -> None:
    a = store.create_session(external_key="s:a")
    b = store.create_session(external_key="s:b")
    words = itertools.cycle(WORDS)
    for i in range(60):
        sid = a if i % 3 else b
        n = 3 + (i * 7) % 23  # rows of different lengths: bm25's length normalisation matters
        text = " ".join(next(words) for _ in range(n))
        if i % 5 == 0:
            text += " rust library rust library"  # a phrase several times in one row
        if i % 11 == 0:
            text += ' "off by a cent" C++ node.js ﬁnance café'
        ts = STAMPS[i % len(STAMPS)]
        tool = TOOLS[i % len(TOOLS)]
        call = ToolCall(f"call{i}", tool, '{"command": "cargo build"}')
        store.append(
            sid,
            [
                PendingEvent(UserMessage(text), ts=ts),
                PendingEvent(AssistantMessage(f"running {tool} for {text[:30]}", (call,)), ts=ts),
                PendingEvent(ToolResult(f"call{i}", f"{tool} output: {text[::-1][:40]} {text}"), ts=ts),
            ],
        )


QUERIES = [
    "rust",
    "rust library",
    '"rust library"',
    '"library rust"',
    "the",
    "the a",
    "invoice cent",
    '"off by a cent"',
    "C++",
    "node.js",
    "finance",
    "cafe",
    "cargo build",
    "Bash output",
    '"rust library" cargo',
    "fix fix",
    "zzz",
]
FILTERS = [
    {},
    {"tool": "Bash"},
    {"tool": "Read", "kinds": ["tool_result"]},
    {"tool": "Nope"},
    {"since": "2026-01-02T00:00:00"},
    {"until": "2026-01-03"},
    {"since": "2026-01-02", "until": "2026-01-04T12:00:00Z"},
    {"kinds": ["user_message"], "since": "2000-01-01"},
    {"session": 0},
    {"exclude": 1},
    {"limit": 3},
]


def _kw(store: EventStore, f: dict) -> dict:
    kw = dict(f)
    ids = [s.id for s in store.sessions()]
    if "session" in kw:
        kw["session_id"] = ids[kw.pop("session")]
    if "exclude" in kw:
        kw["exclude_sessions"] = [ids[kw.pop("exclude")]]
    return kw


def _battery(lite: EventStore, pg: EventStore, queries: list[str], filters: list[dict]) -> int:
    found = 0
    for q in queries:
        for f in filters:
            for order in ("relevance", "recent"):
                kw = {"limit": 20, **_kw(lite, f)}
                want = [(e.seq, rank) for e, rank in lite.search_hits(q, order=order, **kw)]
                got = [(e.seq, rank) for e, rank in pg.search_hits(q, order=order, **kw)]
                assert got == want, (q, f, order)
                found += bool(want)
    return found


def test_relevance_and_filters_give_the_same_hits_and_ranks(tmp_path, pg_url):
    lite, pg = EventStore(tmp_path / "latch.db"), EventStore(pg_url)
    try:
        _fill(lite)
        _fill(pg)
        assert _battery(lite, pg, QUERIES, FILTERS) > 150
        for call_id in ("call3", "call10", "nope"):
            for f in FILTERS[:8]:
                kw = {k: v for k, v in _kw(lite, f).items() if k != "limit"}
                assert [e.seq for e in pg.call_events(call_id, **kw)] == [
                    e.seq for e in lite.call_events(call_id, **kw)
                ], (call_id, f)
        assert lite.call_events("call3", tool="Bash") and not lite.call_events("call3", tool="Read")
    finally:
        lite.close()
        pg.close()


def test_the_token_total_is_counted_when_missing_and_moves_with_appends(pg_url):
    import psycopg

    with EventStore(pg_url) as pg:
        _fill(pg)
        counted = pg._token_total()
        assert counted > 1000
    with psycopg.connect(pg_url, autocommit=True) as raw:  # a store written before the counter
        raw.execute("DELETE FROM latch_sequence WHERE name = %s", (TOKENS,))
    with EventStore(pg_url) as pg:
        assert pg._token_total() == counted
        sid = pg.sessions()[0].id
        pg.append(sid, [UserMessage("one two three"), UserMessage("")])
        assert pg._token_total() == counted + 3
        seq = pg.max_seq() + 1
    with psycopg.connect(pg_url, autocommit=True) as raw:  # a newer Latch's event, indexed; the counter lost again
        raw.execute(
            "INSERT INTO latch_sequence(name, seq) VALUES ('events', %s) ON CONFLICT (name) DO UPDATE SET seq = %s",
            (seq, seq),
        )
        raw.execute(
            "INSERT INTO events(seq, session_id, kind, payload) VALUES (%s, %s, 'later_kind', '{}')", (seq, sid)
        )
        raw.execute("INSERT INTO events_fts(seq, tokens) VALUES (%s, ARRAY['later'])", (seq,))
        raw.execute("DELETE FROM latch_sequence WHERE name = %s", (TOKENS,))
    with EventStore(pg_url) as pg:  # this Latch cannot count it: no counter, and its appends do not start one
        pg.append(sid, [UserMessage("four five")])
        with psycopg.connect(pg_url) as raw:
            assert raw.execute("SELECT count(*) FROM latch_sequence WHERE name = %s", (TOKENS,)).fetchone() == (0,)
        assert pg._token_total() == counted + 5  # counted at the query, the newer event as no tokens
        assert [e.event.text for e, _ in pg.search_hits("four", order="relevance")] == ["four five"]


def test_latch_search_on_a_real_session_is_the_same_on_both_backends(tmp_path, pg_url):
    require_corpus()
    from latch.cli import _load_commands, cli

    _load_commands()
    port = CORPUS / "claude-code/claude-reliability_python-to-rust-port.jsonl"
    runner = CliRunner()
    lite = str(tmp_path / "s.db")
    for db in (lite, pg_url):
        assert runner.invoke(cli, ["--db", db, "import", str(port)]).exit_code == 0
    searches = [
        ['"rust library"', "--sort", "relevance", "--limit", "2", "--tool", "Bash"],
        ['"rust library"', "--tool", "Bash", "--json"],
        ["cargo test", "--sort", "relevance", "--limit", "15"],
        ["python", "--sort", "relevance", "--role", "user"],
        ['"rust library"', "--since", "2026-01-22"],
        ['"rust library"', "--until", "2026-01-21", "--role", "user"],
        ["error", "--sort", "relevance", "--until", "2026-01-21", "--tool", "Edit"],
        ["toolu_01FJm2pfkgbd2B9BeDDL9NVB"],
    ]
    for args in searches:
        want = runner.invoke(cli, ["--db", lite, "search", *args])
        got = runner.invoke(cli, ["--db", pg_url, "search", *args])
        assert (got.exit_code, got.output) == (want.exit_code, want.output), args
    with EventStore(lite) as a, EventStore(pg_url) as b:
        words = sorted({w for e in a.events() for w in e.event.searchable_text().split()[:3] if w.isalpha()})[:40]
        assert _battery(a, b, words, [{}, {"tool": "Bash"}, {"since": "2026-01-21", "limit": 5}]) > 30
