"""`latch context` and `latch view` on real corpus sessions, the defects a new-user trial found:

* `latch context` wrote a kernel record to the store on every call (its JSON then said cacheability 1.0 against
  its own earlier report while the text said 0%); it must leave the store exactly as it was;
* it left out the transcript's harness (Codex: "instructions ≈ 39" where `latch replay` counts 21,961);
* it printed the corrected budget as the window ("window 395,380" for gpt-5's 400,000);
* `latch view`'s header left out the inferred harness (its components did not add up to its total), its
  anthropic body lacked the provider's cache breakpoints, and its "first retained seq" was store-wide where
  `latch replay` shows the position in the session.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from corpus_support import store_digest

from latch.cli import _load_commands, cli
from latch.cli.replay import run_replay
from latch.config import model_window
from latch.providers import AnthropicProvider, to_anthropic_messages, validate_anthropic_messages
from latch.store import EventStore

pytestmark = pytest.mark.corpus

CODEX = "codex/edgerunner_codex-session.jsonl"
CLAUDE = "claude-code/claude-reliability_python-to-rust-port.jsonl"
OTHER = "claude-code/bastion_claude-session.jsonl"  # imported first, so the sessions' store-wide seqs are not 1..n


@pytest.fixture
def run(tmp_path, corpus_dir):
    _load_commands()
    db = tmp_path / "latch.db"

    def invoke(*args):
        res = CliRunner().invoke(
            cli,
            ["--db", str(db), *args],
            env={"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "400"},
            catch_exceptions=False,
        )
        assert res.exit_code == 0, (args, res.output)
        return res.output

    invoke.db = db
    invoke.corpus = corpus_dir
    return invoke


def _import(run, *names: str) -> list[str]:
    with EventStore(run.db) as store:
        before = {s.id for s in store.sessions()}
    run("import", *(str(run.corpus / n) for n in names))
    with EventStore(run.db) as store:
        return [s.id for s in store.sessions() if s.id not in before]


def test_context_of_the_codex_session_is_read_only_counts_the_harness_and_shows_the_real_window(run):
    _import(run, OTHER)
    (sid,) = _import(run, CODEX)
    before = store_digest(run.db)
    before_counts = store_digest(run.db, exclude=("token_counts",))
    reports = [json.loads(run("context", sid, "--json")) for _ in range(2)]
    text = run("context", sid)
    exact = json.loads(run("context", sid, "--estimator", "tiktoken", "--json"))  # counts it would cache
    assert exact["exact_tokenizer"] and exact["approximate"] is False
    assert store_digest(run.db) == before  # no kernel record, no token count: the store is as it was
    assert reports[0] == reports[1]  # a report no longer changes the next one
    rep = reports[0]
    assert rep["exact_tokenizer"] == "quicktok:o200k_base"  # an o200k model is counted exactly before any usage
    assert rep["stream"] == "continuity:main" and rep["cacheability"] is None  # nothing earlier on the stream
    assert "estimated cacheability n/a (no earlier view on the stream)" in text  # the text says what the JSON does

    doc = json.loads(run("replay", sid, "--json", "-"))
    # the replay's kernel records are in its scratch, not the store; an exact estimator's counts are the store's
    # durable cache (counted once, at first use), the one table a replay adds to
    assert store_digest(run.db, exclude=("token_counts",)) == before_counts
    last = doc["requests"][-1]
    # the recorded harness (Codex's system prompt and permission instructions) is in the report, as in replay, and
    # the tool schemas the rollout does not record are inferred from its usage
    assert rep["harness"]["source"] == "recorded+inferred" == doc["harness"]["source"]
    assert rep["components"]["instructions_tokens"] == last["instructions_tokens"] > 15_000
    assert f"instructions           │  {last['instructions_tokens']:,} │ the transcript's system prompt" in text
    assert rep["components"]["harness_tokens"] == doc["harness"]["inferred_tokens"] > 5_000
    with EventStore(run.db) as store:
        seqs = [e.seq for e in store.events(sid)]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and seqs[0] > 1  # after the other session's events
    assert rep["first_retained_event"] == rep["first_retained_seq"] - seqs[0] + 1 < rep["first_retained_seq"]
    assert f"first retained event {rep['first_retained_event']:,} (seq {rep['first_retained_seq']:,})" in text

    # the overhead is inferred from the same usage, so the replay records no correction (it would be circular):
    # the report keeps the model's window and hard limit
    assert doc["summary"]["correction"] is None and doc["summary"]["usable_share"]["min"] >= 0.9
    rep = json.loads(run("context", sid, "--json"))
    window = model_window({}, rep["model"]).context_window_tokens
    hard = window - rep["reserve_tokens"]
    assert rep["context_window_tokens"] == window == 400_000 and rep["hard_limit_tokens"] == hard
    assert rep["headroom_tokens"] == hard - rep["total_tokens"]


def _header(out: str) -> tuple[int, list[tuple[str, int]]]:
    """(printed total, [(component, tokens), ...]) of `latch view --format text`'s header."""
    m = re.search(r"· ([\d,]+) of [\d,]+ tokens \((.*?)\)\n", out)
    assert m, out[:600]
    parts = [re.fullmatch(r"(.+) ([\d,]+)", p.strip()) for p in m.group(2).split(", ")]
    return int(m.group(1).replace(",", "")), [(p.group(1), int(p.group(2).replace(",", ""))) for p in parts if p]


def test_view_and_context_of_a_claude_code_session_count_the_inferred_harness(run, monkeypatch):
    _import(run, OTHER)
    (sid,) = _import(run, CLAUDE)
    before = store_digest(run.db)
    doc = json.loads(run("replay", sid, "--json", "-"))
    inferred = doc["harness"]["inferred_tokens"]
    assert doc["harness"]["source"] == "inferred" and inferred > 10_000
    n = 10
    row = doc["requests"][n - 1]
    out = run("view", sid, "--request", str(n))
    total, parts = _header(out)
    assert total == row["total_tokens"] and sum(t for _, t in parts) == total  # the components add up
    assert ("harness (inferred)", inferred) in parts
    assert f"harness (inferred) · {inferred:,} tokens" in out
    # the first retained event is its position in the session, as replay's "first seq" shows it
    assert row["first_retained_seq"] != row["first_retained_event"]
    assert f"first retained event {row['first_retained_event']:,} (seq {row['first_retained_seq']:,})" in out

    # --format anthropic: exactly the body Latch's Anthropic provider sends for this view
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-sent")
    body = json.loads(run("view", sid, "--request", str(n), "--format", "anthropic"))
    assert validate_anthropic_messages(body) == []
    with EventStore(run.db) as store:
        _, views = run_replay(store, sid, keep_views=True)
        loader = lambda h: store.get_artifact(h)[1]  # noqa: E731
        # no tool schemas in the transcript: the session's tool vocabulary, derived, as `latch view` declares it
        known = list(
            dict.fromkeys(c.name for s in store.events(sid, kinds=["assistant_message"]) for c in s.event.tool_calls)
        )
        plain = to_anthropic_messages(
            views[n - 1], loader, model=doc["model"], max_tokens=doc["budget"]["reserve_tokens"], known_tools=known
        )
    assert body == AnthropicProvider(doc["model"]).request(plain) != plain
    assert sum("cache_control" in b for m in body["messages"] for b in m["content"]) == 2

    rep = json.loads(run("context", sid, "--json"))
    text = run("context", sid)
    assert rep["components"]["harness_tokens"] == inferred and rep["harness_inferred"] is True
    assert rep["total_tokens"] == sum(v for k, v in rep["components"].items() if k != "episode_tokens")
    assert re.search(rf"harness \(inferred\) +│ +≈ {inferred:,} │", text)
    assert store_digest(run.db) == before
