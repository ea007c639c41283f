"""EventStore: canonical bytes, append-only log, batches, FTS query battery, artifacts, migrations."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import unicodedata

import pytest
from store_backends import raw_connection, refused

from latch.events import (
    AssistantMessage,
    CompactionMarker,
    MediaRef,
    SubagentMarker,
    SystemNote,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    canonical_bytes,
    decode_event,
)
from latch.store import EventStore, PendingEvent, StoreError, fts
from latch.store.fts import build_match_query, prepare_text, query_tokens
from latch.store.migrations import MIGRATIONS


def test_canonical_bytes_are_pinned():
    ev = AssistantMessage(
        text="héllo", tool_calls=(ToolCall("c1", "Bash", '{"command":"ls"}'),), reasoning_reported=True
    )
    assert ev.encode() == (
        b'{"kind":"assistant_message","model":null,"reasoning_reported":true,'
        b'"text":"h\xc3\xa9llo","tool_calls":[{"arguments":"{\\"command\\":\\"ls\\"}","id":"c1","name":"Bash"}]}'
    )
    assert canonical_bytes({"b": 1, "a": [1.5, None, "日本"]}) == '{"a":[1.5,null,"日本"],"b":1}'.encode()


def test_canonical_bytes_escape_lone_surrogates_and_stay_utf8():
    data = canonical_bytes({"t": "a\udc80b"})
    assert data == b'{"t":"a\\udc80b"}'
    data.decode("utf-8")  # valid UTF-8


def test_canonical_rejects_nan():
    with pytest.raises(ValueError):
        canonical_bytes({"x": float("nan")})


@pytest.mark.parametrize(
    "event",
    [
        UserMessage("hi", media=(MediaRef("ab" * 32, "image/png", 10, 4, 3),), is_meta=True),
        AssistantMessage("x", (ToolCall("1", "Read", "{}"),), True, "claude-x"),
        ToolResult("1", "out", is_error=True, name="Read", orphan=True, exit_code=2),
        ToolResult("2", "", missing=True, is_error=True),
        SystemNote("retry", "api_error"),
        Usage(input_tokens=3, output_tokens=None, cache_read_tokens=10, cache_write_tokens=0),
        CompactionMarker("auto", 1000, 100, "summary"),
        SubagentMarker("c9", "a1", "Explore", "map"),
    ],
)
def test_every_kind_round_trips(event):
    assert decode_event(event.KIND, event.encode()) == event


def test_usage_unknown_stays_none():
    u = Usage(input_tokens=None, cache_read_tokens=5)
    assert u.prompt_tokens is None
    assert Usage(input_tokens=3, cache_read_tokens=5).prompt_tokens == 8
    assert decode_event("usage", u.encode()).output_tokens is None


def test_append_assigns_monotonic_seq_across_sessions(store):
    a = store.create_session(external_key="a")
    b = store.create_session(external_key="b")
    s1 = store.append(a, [UserMessage("one"), UserMessage("two")])
    s2 = store.append(b, [UserMessage("three")])
    s3 = store.append(a, [UserMessage("four")])
    assert s1 == [1, 2] and s2 == [3] and s3 == [4]
    assert [e.event.text for e in store.events(a)] == ["one", "two", "four"]
    assert store.max_seq(a) == 4 and store.max_seq(b) == 3


def test_database_refuses_update_and_delete(store):
    sid = store.create_session(external_key="a")
    store.append(sid, [UserMessage("keep me")])
    raw = raw_connection(store)
    with pytest.raises(refused(store), match="append-only"):
        raw.execute("UPDATE events SET payload = '{}'")
    with pytest.raises(refused(store), match="append-only"):
        raw.execute("DELETE FROM events")
    raw.close()
    assert [e.event.text for e in store.events(sid)] == ["keep me"]
    assert not any(hasattr(store, name) for name in ("delete", "update", "delete_event", "update_event"))


def test_failed_batch_leaves_store_unchanged(store):
    sid = store.create_session(external_key="a")
    store.append(sid, [UserMessage("before")])

    class Broken(UserMessage):
        def to_payload(self):
            return {"text": float("nan")}

    with pytest.raises(StoreError):
        store.append(sid, [UserMessage("first of batch"), Broken("x")])
    assert [e.event.text for e in store.events(sid)] == ["before"]
    assert store.search("batch") == []
    with pytest.raises(StoreError, match="no session"):
        store.append("nope", [UserMessage("x")])


def test_readers_never_see_half_a_batch(tmp_path):
    writer = EventStore(tmp_path / "w.db")
    sid = writer.create_session(external_key="s")
    reader = EventStore(tmp_path / "w.db")
    sizes = []
    stop = threading.Event()

    def read():
        while not stop.is_set():
            sizes.append(reader.count_events(sid))

    t = threading.Thread(target=read)
    t.start()
    for i in range(40):
        writer.append(sid, [UserMessage(f"m{i}-{j}") for j in range(25)])
    stop.set()
    t.join()
    assert sizes and all(n % 25 == 0 for n in sizes)
    assert reader.count_events(sid) == 1000


def test_reimport_by_source_ref_adds_nothing(store):
    evs = [PendingEvent(UserMessage("a"), "line:1"), PendingEvent(UserMessage("b"), "line:2")]
    sid, seqs = store.import_session(external_key="fmt:x", source="f", format="fmt", workspace=None, events=evs)
    sid2, seqs2 = store.import_session(external_key="fmt:x", source="f", format="fmt", workspace=None, events=evs)
    assert sid == sid2 and len(seqs) == 2 and seqs2 == []
    grown = evs + [PendingEvent(UserMessage("c"), "line:3")]
    _, seqs3 = store.import_session(external_key="fmt:x", source="f", format="fmt", workspace=None, events=grown)
    assert len(seqs3) == 1 and store.count_events(sid) == 3
    assert len(store.sessions()) == 1


QUERY_BATTERY = [
    "fix-the-bug",
    '"quoted',
    'say "hi"',
    "key:value",
    "#123",
    "src/main.py",
    "don't",
    "50%",
    "ann@example.com",
    "AND",
    "OR",
    "NOT",
    "NEAR(",
    "NEAR(a b)",
    "(",
    ")",
    "[",
    "]",
    "{",
    "*",
    "a*",
    "**",
    "^start",
    "col:umn",
    "-",
    "--",
    "+",
    "'",
    "\\",
    "''",
    '""',
    "数据",
    "日本語",
    "\udc80",
    "",
    "   ",
    "x" * 2000,
    "😀",
    "a AND (b OR",
    "\x00",
    "SELECT * FROM events;",
    "%_%",
    "🔥",
    "📊",
    "fix 🔥 now",
    "fix🔥now",
    "👩\u200d💻",
    "❤\ufe0f",
    "\ufe0f",
    "👍🏽",
    "🇫🇷",
    "™",
    "\u166d",
    "e\u0301",
    "→",
    "✓ done",
    "🔥" * 500,
]


@pytest.mark.parametrize("query", QUERY_BATTERY)
def test_any_user_string_is_a_valid_query(store, query):
    sid = store.create_session(external_key="q")
    store.append(sid, [UserMessage("unrelated text")])
    hits = store.search(query)  # must not raise
    assert isinstance(hits, list)


def test_query_battery_finds_what_it_should(store):
    sid = store.create_session(external_key="q")
    texts = {
        1: "the fix-the-bug branch",
        2: "see issue #123 in src/main.py",
        3: "I don't know; coverage is 50% now",
        4: "mail ann@example.com please",
        5: "keywords AND OR NEAR( are literal here",
        6: "大数据库的查询很慢",
        7: "key:value pairs",
        8: 'he said "hi" loudly',
    }
    store.append(sid, [UserMessage(t) for t in texts.values()])

    def seqs(q):
        return sorted(h.seq for h in store.search(q))

    assert seqs("fix-the-bug") == [1]
    assert seqs("#123") == [2]
    assert seqs("src/main.py") == [2]
    assert seqs("don't") == [3]
    assert seqs("50%") == [3]
    assert seqs("ann@example.com") == [4]
    assert seqs("AND") == [5]
    assert seqs("NEAR(") == [5]
    assert seqs("数据") == [6]
    assert seqs("查询") == [6]
    assert seqs("数库") == []  # not adjacent in the text
    assert seqs("key:value") == [7]
    assert seqs('"hi"') == [8]
    assert seqs("[") == [] and seqs("*") == []


def test_emoji_and_symbols_are_searchable(store):
    sid = store.create_session(external_key="emoji")
    texts = {
        1: "deploy is on 🔥 again",
        2: "fix🔥now, then report 📊 numbers",
        3: "pairing with a 👩\u200d💻 today",
        4: "Latch™ ships ✓ and ❤\ufe0f it",
        5: "thumbs 👍🏽 from the team",
        6: "nothing special here",
    }
    store.append(sid, [UserMessage(t) for t in texts.values()])

    def seqs(q):
        return sorted(h.seq for h in store.search(q))

    assert seqs("🔥") == [1, 2]
    assert seqs("📊") == [2]
    assert seqs("fix 🔥 now") == [2]  # three chunks, all present
    assert seqs("fix🔥now") == [2]  # one chunk: the phrase "fix" "🔥" "now"
    assert seqs("🔥 again") == [1]
    assert seqs("👩\u200d💻") == [3] and seqs("💻") == [3]
    assert seqs("latch") == [4] and seqs("™") == [4]  # a symbol never glues to the word before it
    assert seqs("✓") == [4] and seqs("❤\ufe0f") == [4] and seqs("❤") == [4]
    assert seqs("👍🏽") == [5] and seqs("👍") == [5]
    assert seqs("🎉") == [] and seqs("→") == []  # absent; an arrow (Sm) is no token at all


def test_query_tokens_agree_with_prepare_text():
    assert query_tokens("fix🔥now") == ["fix", "🔥", "now"]
    assert query_tokens("👩\u200d💻") == ["👩", "💻"]  # the zero-width joiner separates
    assert query_tokens("❤\ufe0f!") == ["❤"]  # a variation selector after a symbol is no token
    assert query_tokens("cafe\u0301") == ["cafe\u0301"]  # an accent belongs to its letter
    assert query_tokens("数据🔥") == ["数", "据", "🔥"]
    assert prepare_text("fix🔥now") == "fix 🔥 now"
    assert build_match_query("fix 🔥 now") == '"fix" AND "🔥" AND "now"'


def test_symbol_table_is_every_other_symbol_and_sqlite_agrees():
    ranges = fts._SYMBOL_RANGES
    inside = {cp for a, b in ranges for cp in range(a, b + 1)}
    assert all(a <= b < c for (a, b), (c, _) in zip(ranges, ranges[1:], strict=False))  # sorted, disjoint
    cats = {unicodedata.category(chr(cp)) for cp in inside}
    assert cats <= {"So", "Cn", "Sk"}, cats  # never a letter or a number: words stay whole
    if unicodedata.unidata_version == "14.0.0":  # the table's version (Python 3.11)
        so = {cp for cp in range(0x110000) if unicodedata.category(chr(cp)) == "So"} - {0x166D}
        assert so <= inside
    # SQLite's unicode61 with TOKENIZE makes each assigned table character a token of its own
    db = sqlite3.connect(":memory:")
    db.execute(f'CREATE VIRTUAL TABLE t USING fts5(text, tokenize="{fts.TOKENIZE}")')
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    chars = [chr(cp) for cp in sorted(inside) if unicodedata.category(chr(cp)) != "Cn"]
    db.execute("INSERT INTO t(text) VALUES (?)", ("x".join(chars),))  # glued to letters: must still split
    db.execute("INSERT INTO t(text) VALUES (?)", (prepare_text("x".join(chars)),))
    per_doc = dict(db.execute("SELECT doc, count(*) FROM v GROUP BY doc").fetchall())
    assert per_doc[2] == 2 * len(chars) - 1 and per_doc[1] < len(chars)  # prepared: symbol, x, symbol, ..., symbol


def test_search_newest_first_and_scoped(store):
    a = store.create_session(external_key="a")
    b = store.create_session(external_key="b")
    store.append(a, [UserMessage("needle one")])
    store.append(b, [UserMessage("needle two")])
    store.append(a, [UserMessage("needle three")])
    assert [h.seq for h in store.search("needle")] == [3, 2, 1]
    assert [h.seq for h in store.search("needle", session_id=a)] == [3, 1]
    assert [h.seq for h in store.search("needle", limit=1)] == [3]
    assert [h.seq for h in store.search("needle", before_seq=3)] == [2, 1]


def test_build_match_query_quotes_everything():
    assert build_match_query("src/main.py") == '"src" + "main" + "py"'
    assert build_match_query('a"b') == '"a" + "b"'
    assert build_match_query("NEAR(") == '"NEAR"'
    assert build_match_query("数据 x", mode="or") == '"数" + "据" OR "x"'
    assert build_match_query("*** [ ]") is None


def test_reasoning_text_is_not_indexed(store):
    sid = store.create_session(external_key="r")
    store.append(sid, [AssistantMessage(text="visible", reasoning_reported=True)])
    assert store.search("visible")
    ev = next(store.events(sid)).event
    assert ev.reasoning_reported is True and not hasattr(ev, "reasoning")


def test_artifacts_are_content_addressed(store):
    ref = store.put_artifact(b"\x89PNG fake", "image/png", width=4, height=3)
    again = store.put_artifact(b"\x89PNG fake", "image/png", width=4, height=3)
    assert ref == again
    assert ref.sha256 == hashlib.sha256(b"\x89PNG fake").hexdigest()
    got_ref, data = store.get_artifact(ref.sha256)
    assert data == b"\x89PNG fake" and got_ref.width == 4 and got_ref.byte_size == 9
    with pytest.raises(KeyError):
        store.get_artifact("0" * 64)


def test_migrations_are_named_ordered_and_run_once(tmp_path):
    s = EventStore(tmp_path / "m.db")
    names = [n for n, _ in MIGRATIONS]
    assert s.applied_migrations() == names
    assert names == sorted(names)
    s.close()
    s2 = EventStore(tmp_path / "m.db")
    assert s2.applied_migrations() == names
    assert s2.has_fts5()


def test_session_prefix_lookup(store):
    sid = store.create_session(external_key="abc")
    assert store.session(sid[:6]).id == sid
    with pytest.raises(KeyError):
        store.session("zzzz")


def test_kernel_records_append_only(store):
    sid = store.create_session(external_key="k")
    ids = store.append_kernel_records(sid, "continuity:1", [("snapshot", 0, {"r": 1}), ("delta", 3, {"r": 2})])
    assert ids == [1, 2]
    assert store.kernel_records(sid, "continuity:1") == [(1, "snapshot", 0, {"r": 1}), (2, "delta", 3, {"r": 2})]
    assert store.kernel_records(sid, "other") == []
