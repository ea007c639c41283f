"""Full-text search finds dotted terms as one term: ``node.js``, ``v1.2.3``, ``os.path`` match that
term only (inside a longer dotted run too), never ``node js``; a store indexed by the previous release (glued terms,
no dotted tokens: migration m006 applied, m007 not) upgrades when it opens."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.events import ToolResult, UserMessage
from latch.store import EventStore
from latch.store.fts import MAX_DOTTED_PARTS, _prepare_glued, build_match_query, dotted_terms, prepare_text
from latch.store.migrations import MIGRATIONS

TEXTS = [
    "node.js server",
    "node and js",
    "js node",
    "released v1.2.3 today",
    "v1 2 3 items",
    "v1.2.30 is out",
    "import os.path.join(a, b)",
    "the os path",
    "see src/main.py",
    "C++ and .NET",
]


def _store(tmp_path, texts=TEXTS):
    store = EventStore(tmp_path / "s.db")
    sid = store.create_session(external_key="k")
    store.append(sid, [UserMessage(text=t) for t in texts])
    return store


@pytest.mark.parametrize(
    "query, expected",
    [
        ("node.js", ["node.js server"]),
        ("Node.JS,", ["node.js server"]),  # case folded, trailing punctuation set aside
        ("v1.2.3", ["released v1.2.3 today"]),
        ("os.path", ["import os.path.join(a, b)"]),
        ("path.join", ["import os.path.join(a, b)"]),
        ("main.py", ["see src/main.py"]),
        ("src/main.py", ["see src/main.py"]),  # a phrase, as before
        ("node", ["js node", "node and js", "node.js server"]),  # the parts are still words
        ("C++", ["C++ and .NET"]),
        (".NET", ["C++ and .NET"]),
    ],
)
def test_dotted_terms_are_searched_as_one_term(tmp_path, query, expected):
    store = _store(tmp_path)
    assert [h.event.text for h in store.search(query)] == expected  # newest first
    store.close()


def test_dotted_tokens_and_query():
    assert dotted_terms("os.path.join and v1.2") == [
        "os\ue02epath",
        "os\ue02epath\ue02ejoin",
        "path\ue02ejoin",
        "v1\ue02e2",
    ]
    assert dotted_terms("end of a sentence. Next one") == []
    assert build_match_query("node.js") == '"node\ue02ejs"'
    assert build_match_query("src/main.py") == '"src" + "main" + "py"'
    assert len(dotted_terms(".".join("abcdefghijklmnop"))) == 28  # 8 parts at most: 7+6+...+1 sub-runs


def test_a_store_indexed_by_the_previous_release_upgrades(tmp_path):
    store = _store(tmp_path)
    store.append(store.sessions()[0].id, [ToolResult("c1", "npm i react@18.2.0 --save")])
    store.close()
    con = sqlite3.connect(tmp_path / "s.db")  # what a store written by the previous release holds
    con.execute("INSERT INTO events_fts(events_fts) VALUES ('delete-all')")
    for seq, payload in con.execute("SELECT seq, payload FROM events").fetchall():
        text = json.loads(payload).get("text") or json.loads(payload).get("content")
        con.execute("INSERT INTO events_fts(rowid, text) VALUES (?, ?)", (seq, _prepare_glued(text)))
    con.execute("DELETE FROM _latch_migrations WHERE name = 'm007_fts_dotted_terms'")
    con.commit()
    con.close()
    store = EventStore(tmp_path / "s.db")
    # re-applied at open (m008_group_projection, a newer migration, was already there)
    assert store.applied_migrations()[-1] == "m007_fts_dotted_terms" in [m[0] for m in MIGRATIONS]
    assert [h.event.text for h in store.search("node.js")] == ["node.js server"]
    assert [h.event.content for h in store.search("18.2.0")] == ["npm i react@18.2.0 --save"]
    assert [h.event.text for h in store.search("C++")] == ["C++ and .NET"]
    store.close()


def _dotted_by_definition(text: str) -> list[str]:
    """dotted_terms spelled out: of each whitespace-separated chunk, every sub-run of two or more of the first
    MAX_DOTTED_PARTS parts of each dotted run, each once, in order."""
    extra: dict[str, None] = {}
    for chunk in text.split():
        for m in re.finditer(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)+(?![A-Za-z0-9])", chunk):
            parts = m.group(0).split(".")[:MAX_DOTTED_PARTS]
            for i in range(len(parts) - 1):
                for j in range(i + 2, len(parts) + 1):
                    extra.setdefault("\ue02e".join(parts[i:j]))
    return list(extra)


def _prepared_by_definition(text: str) -> str:
    """prepare_text spelled out: the glued-term preparation of the whole text, then a line of its dotted terms."""
    extra = _dotted_by_definition(text)
    return _prepare_glued(text) + ("\n" + " ".join(extra) if extra else "")


_PIECES = st.sampled_from(
    ["C++", "c#", ".NET", ".env", "node.js", "v1.2.3.4.5.6.7.8.9", "os.path.join", "a..b", "x.", ". ", "main.py"]
    + ["数据", "🔥", "fix🔥now", "é", "\udcff", " ", "\n", "\u3000", "\x1c", "++", "#", "a", "1", ".", "_", "ａ.ｂ"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES | st.text(max_size=4), max_size=12).map("".join))
def test_prepared_text_is_its_definition(text):
    assert prepare_text(text) == _prepared_by_definition(text)
    assert dotted_terms(text) == _dotted_by_definition(text)
