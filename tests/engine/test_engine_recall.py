"""Recall ranking: identifiers are searched before common words (spec: "Summaries are indexes, not truth")."""

from __future__ import annotations

import pytest
from store_backends import BACKENDS, open_store

from latch.engine.recall import RECALL_ROWS, RecallCache, query_terms, recall
from latch.engine.units import TokenCounter
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.host.session import StoreSessionReader

DIAGNOSTIC = (
    "E   AssertionError: invoice INV-2024-0917 total 1043.365 rounded to 1043.37, expected 1043.36 "
    "(ROUND_HALF_EVEN) [ledger shard 7f3a9c1e]"
)


class CharEstimator:
    def estimate(self, text: str) -> int:
        return len(text)

    def image_tokens(self, width, height) -> int:
        return 1000


def recaller(store, sid):
    reader, cache = StoreSessionReader(store, sid), RecallCache(TokenCounter(CharEstimator()))

    def run(query: str, limit_tokens: int = 20_000):
        return recall(reader, cache, query_terms([query]), before_seq=store.max_seq(sid) + 1, limit_tokens=limit_tokens)

    return run


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path):
    """These recall tests run on SQLite and on PostgreSQL (tests/store_backends.py)."""
    s = open_store(request, tmp_path, request.param)
    yield s
    s.close()


@pytest.fixture
def session(store):
    sid = store.create_session(external_key="test:recall")
    call = ToolCall("t1", "Bash", '{"command": "python -m pytest -q tests/test_billing_rounding.py"}')
    early = store.append(
        sid,
        [
            UserMessage("The invoice totals are off by a cent against the ledger."),
            AssistantMessage("Running the rounding tests first.", (call,)),
            ToolResult("t1", f"F.\n{DIAGNOSTIC}\n1 failed, 1 passed in 0.08s", is_error=True, exit_code=1),
        ],
    )
    later = []
    for i in range(3_000):  # the common words of the diagnostic, over and over; near-miss identifiers
        if i % 3 == 0:
            later.append(UserMessage(f"the invoice total is still rounded wrong, expected the ledger shard {i}"))
        elif i % 3 == 1:
            later.append(
                AssistantMessage(
                    f"AssertionError again: invoice INV-2024-{i:04d} total rounded to "
                    f"1043.37, expected the ledger value"
                )
            )
        else:
            later.append(AssistantMessage("rounded total expected by the ledger; the invoice shard is fine"))
    store.append(sid, later)
    return store, sid, early


def test_full_diagnostic_line_finds_the_early_event_under_thousands_of_common_word_hits(session):
    store, sid, (ask, call, result) = session
    run = recaller(store, sid)
    got = run(DIAGNOSTIC)
    assert result in [r.seq for r in got]
    item = next(r for r in got if r.seq == result)
    assert DIAGNOSTIC in item.text and item.text.startswith(f"[seq {result} · tool result t1 error] F.\n")
    assert call in [r.seq for r in got]  # the result brings its call
    seqs = [r.seq for r in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # chronological, no repeats
    assert sum(r.tokens for r in got) <= 20_000
    assert [r.seq for r in run(DIAGNOSTIC)] == seqs  # deterministic
    # the identifiers alone find it as well; the common words alone do not reach back 3,000 events
    assert result in [r.seq for r in run("INV-2024-0917 7f3a9c1e")]
    assert result not in [r.seq for r in run("invoice total rounded expected ledger shard")]


def test_identifier_hits_come_newest_first_within_the_token_bound(session):
    store, sid, (_, _, result) = session
    repeat = store.append(sid, [UserMessage(f"still failing: {DIAGNOSTIC}")])[0]
    run = recaller(store, sid)
    one_row = len(f"[seq {repeat} · user] still failing: {DIAGNOSTIC}\n")
    assert [r.seq for r in run(DIAGNOSTIC, limit_tokens=one_row)] == [repeat]  # the later one wins
    got = [r.seq for r in run(DIAGNOSTIC)]
    assert result in got and repeat in got and len(got) <= 2 * RECALL_ROWS


def test_a_query_of_words_only_finds_the_row_holding_all_of_them_first(store):
    sid = store.create_session(external_key="test:words")
    line = "Port this Python project to Rust. Create a standalone Rust library (no Python bindings)"
    first = store.append(sid, [UserMessage(line)])[0]
    store.append(
        sid,
        [
            AssistantMessage(f"the python {w} and the rust {w} of the project, step {i}")
            for i, w in enumerate(("library", "bindings", "port", "crate") * 100)
        ],
    )
    got = recaller(store, sid)(line)
    assert got[0].seq == first and got[0].text == f"[seq {first} · user] {line}"
    assert len(got) <= RECALL_ROWS  # then the newest rows holding two or more of the words


def test_query_terms_put_identifiers_first():
    terms = query_terms(["AssertionError in read-only mode: INV-2024-0917 at src/billing/tax.py, ledger shard"])
    # CamelCase, dashed, coded and path tokens; then words of 4+ letters ("only" is a stop word)
    assert terms == [
        "AssertionError",
        "read-only",
        "INV-2024-0917",
        "src/billing/tax.py",
        "read",
        "mode",
        "billing",
        "ledger",
        "shard",
    ]
