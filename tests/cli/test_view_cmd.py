"""``latch view``, the replay's per-request ``changes`` and its cache column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import invoke
from rich.console import Console

from latch.cli import _load_commands
from latch.cli.replay import _print, run_replay
from latch.cli.view import UNKNOWN_MODEL
from latch.host.changes import seq_ranges
from latch.providers import (
    AnthropicProvider,
    to_anthropic_messages,
    to_openai_chat,
    validate_anthropic_messages,
    validate_openai_chat,
)
from latch.store import EventStore

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
SMALL = ("--window", "16000", "--reserve", "2000", "--recent", "3000", "--no-harness")  # rotates (the README's budget)


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def run_latch(*args, columns=None):
        return invoke(tmp_path, *args, db=db, columns=columns, catch_exceptions=False)

    run_latch.db = db
    return run_latch


def test_view_prints_the_replayed_request_in_both_wire_formats(run, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-sent")  # the provider is built, never called
    openai = json.loads(run("view", str(EXAMPLE), "--request", "13", *SMALL, "--format", "openai").output)
    anthropic = json.loads(run("view", str(EXAMPLE), "--request", "13", *SMALL, "--format", "anthropic").output)
    assert validate_openai_chat(openai) == [] and validate_anthropic_messages(anthropic) == []
    with EventStore(run.db) as store:
        sid = store.sessions()[0].id
        doc, views = run_replay(store, sid, window=16_000, reserve=2_000, recent=3_000, keep_views=True, harness=False)
        loader = lambda h: store.get_artifact(h)[1]  # noqa: E731
        # the transcript recorded no tool schemas: every request declares the session's whole tool vocabulary
        known = list(
            dict.fromkeys(c.name for s in store.events(sid, kinds=["assistant_message"]) for c in s.event.tool_calls)
        )
        assert [t["function"]["name"] for t in openai["tools"]] == known and len(known) > 3
        assert openai == to_openai_chat(views[12], loader, model="claude-sonnet-4-5", known_tools=known)
        # exactly what Latch's Anthropic provider sends for that view: its cache_control breakpoints included
        provider = AnthropicProvider("claude-sonnet-4-5")
        body = to_anthropic_messages(views[12], loader, model="claude-sonnet-4-5", max_tokens=2_000, known_tools=known)
        assert anthropic == provider.request(body)
        assert anthropic != body  # the breakpoints are what the plain body lacks
    assert openai["model"] == "claude-sonnet-4-5" and anthropic["max_tokens"] == 2_000
    marked = [b for m in anthropic["messages"] for b in m["content"] if "cache_control" in b]
    assert len(marked) == 2 and all(b["cache_control"] == {"type": "ephemeral"} for b in marked)
    assert "cache_control" in anthropic["messages"][-1]["content"][-1]


def test_derived_tools_are_the_same_in_every_request_of_a_session(run):
    """A transcript without tool schemas: the declared tools do not grow as new tools get called (a changed tools
    block would break the provider's cached prefix)."""
    bodies = [
        json.loads(run("view", str(EXAMPLE), "--request", str(n), *SMALL, "--format", "anthropic").output)
        for n in (2, 13, 28)
    ]
    assert bodies[0]["tools"] == bodies[1]["tools"] == bodies[2]["tools"] and len(bodies[0]["tools"]) > 3


def test_view_by_session_id_and_the_text_rendering(run):
    sid = json.loads(run("replay", str(EXAMPLE), "--json", "-").output)["session"]
    res = run("view", sid[:6], "--request", "2")
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith(f"request 2 of 28 · seq 4 · session {sid} · model claude-sonnet-4-5\n")
    assert "window 200,000 (Latch's model table (entry claude)) · reserve 32,000" in out
    assert "── system · 0 tokens ──\n(empty: no system prompt in this request)" in out
    assert "── [0] user · session_context · " in out and "workspace: /home/user/invoicing" in out
    # the snapshot holds the goal derived from the first user turn (176 tokens when it was empty,
    # 304 with the goal before the estimator's per-script refit, 298 after it)
    assert "── [1] user · kernel_context · 298 tokens ──" in out
    assert "Goal: The invoice totals are off by a cent or two" in out
    assert "── [2] user · conversation · seq 1 · 134 tokens ──\nThe invoice totals are off" in out


@pytest.mark.parametrize("number", ["0", "29", "-3"])
def test_a_request_out_of_range_is_one_line_exit_2(run, number):
    res = run("view", str(EXAMPLE), "--request", number)
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"Error: --request {number} is out of range: session c481a68c21d2 has 28 model request(s), 1..28"
    ]


def test_diff_shows_the_rotation_of_a_rotating_replay(run):
    doc = json.loads(run("replay", str(EXAMPLE), *SMALL, "--json", "-").output)
    rows = doc["requests"]
    rotated = [r["request"] for r in rows if r["changes"]["cache"] == "rotated"]
    epochs = [r["request"] for a, r in zip(rows, rows[1:], strict=False) if r["epoch"] != a["epoch"]]
    assert rotated == epochs == [8, 13, 15, 21]  # 4 rotations, each where the epoch changes
    assert {r["changes"]["cache"] for r in rows} == {"first", "kept", "rotated"}
    n = rotated[0]
    ch = json.loads(run("view", str(EXAMPLE), "--request", str(n), *SMALL, "--diff", "--format", "openai").output)
    changes = ch["changes"]
    assert changes == rows[n - 1]["changes"]  # the same comparison as the replay's JSON
    assert (changes["previous"], changes["cache"], changes["rotation_reason"]) == (n - 1, "rotated", "recent_tokens")
    assert changes["prefix_break"] == {"line": 3, "at": "message", "message": 1, "kind": "kernel_context"}
    assert changes["units_evicted"] == [1, 2, 4, 7, 10] and changes["units_appended"] == [18]
    assert changes["recall_added"] == [1]  # the new snapshot recalls the opening turn (the user's task)
    assert [k["type"] for k in changes["kernel_added"]] == ["snapshot"]
    assert changes["common_prefix_messages"] == 1  # only the session context survives a rotation
    text = run("view", str(EXAMPLE), "--request", str(n), *SMALL, "--diff").output
    assert text.startswith(
        f"request {n} vs request {n - 1}: cache rotated (new epoch 2, reason: recent_tokens); "
        f"the cached prefix broke at message 1 (kernel_context) of request {n - 1}\n"
    )
    assert "units appended 1 (first seqs 18) · evicted 5 (first seqs 1..2, 4, 7, 10)" in text
    kept = run("view", str(EXAMPLE), "--request", str(n + 1), *SMALL, "--diff").output
    assert "cache kept (an append-only extension" in kept and "evicted 0" in kept


def test_the_first_request_diff_has_everything_appended(run):
    ch = json.loads(run("view", str(EXAMPLE), "--request", "1", "--diff", "--format", "anthropic").output)["changes"]
    assert (ch["previous"], ch["cache"], ch["units_appended"], ch["units_evicted"]) == (None, "first", [1], [])


def test_replay_table_marks_rotations_in_a_cache_column(run):
    doc = json.loads(run("replay", str(EXAMPLE), *SMALL, "--json", "-").output)
    con = Console(width=160, force_terminal=True, color_system=None)
    with con.capture() as cap:
        _print(con, doc, str(EXAMPLE))
    lines = cap.get().splitlines()
    assert lines[4].split()[-1] == "cache"
    # 13 cells before the cache column: the example is priced, so the table has the cost column too
    assert lines[4].split()[-3:-1] == ["cost", "provider"]
    marked = {
        int(line.split()[0]): line.split(maxsplit=13)[13].strip() for line in lines[6:34] if len(line.split()) > 13
    }
    assert marked == dict.fromkeys([8, 13, 15, 21], "rotated (recent_tokens)")
    narrow = Console(width=80, force_terminal=True, color_system=None)
    with narrow.capture() as cap:
        _print(narrow, doc, str(EXAMPLE))
    out = cap.get()
    assert "cache column left out (too narrow); per request: 8 rotated (recent_tokens), 13 rotated" in " ".join(
        out.split()
    )


def test_view_text_escapes_transcript_text(run, tmp_path):
    nasty = "zebra\x1b[2J\x1b]0;pwned\x07ring\x00\u202eevil"
    chat = tmp_path / "nasty.json"
    chat.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "system", "content": f"system {nasty}"},
                    {"role": "user", "content": f"hello {nasty}"},
                    {"role": "assistant", "content": f"answer {nasty}"},
                ]
            }
        ),
        encoding="utf-8",
    )
    res = run("view", str(chat), "--request", "1")
    assert res.exit_code == 0, res.output
    assert not any(ch in res.output for ch in ("\x1b", "\x07", "\x00", "\u202e"))
    assert "hello zebra\\x1b[2J\\x1b]0;pwned\\x07ring\\x00\\u202eevil" in res.output
    body = run("view", str(chat), "--request", "1", "--format", "openai").stdout
    assert "\x1b" not in body and json.loads(body)["messages"][-1]["content"] == f"hello {nasty}"


def test_seq_ranges():
    assert seq_ranges([]) == "none"
    assert seq_ranges([9, 3, 4, 5, 4]) == "3..5, 9"
    assert seq_ranges(list(range(0, 40, 2)), limit=3) == "0, 2, 4, … (+17 more)"


def _result(number, messages, *, system="", epoch=1, common=0, rotated=False, prefix_break=False, reason=None):
    from latch.engine.units import request_lines
    from latch.host.loop import ModelRequest, RequestResult
    from latch.port import ComponentTokens, ContextBudget, ContextView

    view = ContextView(
        session_id="s",
        system=system,
        tools=(),
        messages=tuple(messages),
        tokens=ComponentTokens(recent_tokens=10 * len(messages)),
        budget=ContextBudget(),
        epoch=epoch,
        metrics={"rotation_reason": reason},
    )
    lines = request_lines(view)
    return RequestResult(
        None,
        ModelRequest(number, number, number - 1),
        view,
        None,
        0.0,
        0,
        0,
        10 * len(messages),
        [1] * len(lines),
        lines=lines,
        common_prefix_lines=common,
        rotated=rotated,
        prefix_break=prefix_break,
    )


def test_request_changes_names_a_broken_prefix_and_a_changed_system_field():
    from latch.host.changes import request_changes
    from latch.port import ViewMessage

    a, b, c = (ViewMessage("user", t, seq=i) for i, t in enumerate(("one", "two", "three"), 1))
    b2 = ViewMessage("user", "two, rewritten", seq=2)
    prev = _result(1, [a, b])
    broken = request_changes(prev, _result(2, [a, b2, c], common=3, prefix_break=True), {})
    assert (broken["cache"], broken["prefix_break"]) == (
        "broken",
        {"line": 3, "at": "message", "message": 1, "kind": "conversation"},
    )
    assert (broken["units_appended"], broken["units_evicted"], broken["common_prefix_messages"]) == ([3], [], 1)
    system = request_changes(
        prev, _result(2, [a, b], system="new rules", epoch=2, rotated=True, reason="instructions_changed"), {}
    )
    assert (system["cache"], system["rotation_reason"], system["prefix_break"]["at"]) == (
        "rotated",
        "instructions_changed",
        "system",
    )
    kept = request_changes(prev, _result(2, [a, b, c], common=4), {})
    assert (kept["cache"], kept["prefix_break"], kept["units_appended"], kept["tokens_delta"]) == (
        "kept",
        None,
        [3],
        10,
    )


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses"])
def test_a_transcript_without_a_model_still_gets_a_body_that_names_one(run, tmp_path, fmt):
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]})
    )
    res = run("view", str(path), "--request", "1", "--format", fmt)
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["model"] == UNKNOWN_MODEL
    assert res.stderr.strip() == (
        'note: the transcript names no model; the body says "model": "unknown" (pass --model NAME)'
    )
    named = run("view", str(path), "--request", "1", "--format", fmt, "--model", "gpt-4.1")
    assert json.loads(named.stdout)["model"] == "gpt-4.1" and named.stderr == ""
