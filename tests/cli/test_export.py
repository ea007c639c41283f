"""``latch export SESSION --format md|html|jsonl``: a transcript where each tool call shows its command or path and
its result in one line, a self-contained inert HTML page, and the stored events as JSON lines."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.cli import _load_commands, cli
from latch.events import AssistantMessage, ToolCall, ToolResult, Usage, UserMessage
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

_load_commands()


def _hostile(db) -> str:
    with EventStore(db) as store:
        sid = store.create_session(format="test", source="/tmp/t.jsonl")
        store.append(
            sid,
            [
                UserMessage(text="fix <script>alert(1)</script> \x1b[31mnow\u202e"),
                AssistantMessage(
                    text="looking",
                    tool_calls=(
                        ToolCall("c1", "shell", json.dumps({"command": "grep -n `x` src/a.py"})),
                        ToolCall("c2", "read", json.dumps({"path": "src/b.py"})),
                        ToolCall("c3", "shell", json.dumps({"command": "make"})),
                    ),
                ),
                Usage(input_tokens=100, output_tokens=5),
                ToolResult(call_id="c1", content="1: x = 1\n2: y = <b>2</b>\n\n3: z\n"),
                ToolResult(call_id="c2", content="boom", is_error=True),
                ToolResult(call_id="zz", content="a result whose call is gone", orphan=True),
                AssistantMessage(text="done"),
            ],
        )
    return sid


def test_markdown_shows_each_call_with_its_command_and_one_line_result(tmp_path):
    db = tmp_path / "s.db"
    sid = _hostile(db)
    res = CliRunner().invoke(cli, ["--db", str(db), "export", sid[:6]])
    assert res.exit_code == 0, res.output
    assert res.output == (
        "# fix <script>alert(1)</script> \\x1b[31mnow\\u202e\n\n"
        f"- session: `{sid}`\n- harness: test\n- model: unknown\n- started: (undated)\n- requests: 2\n"
        "- cost: unpriced\n- status: interrupted\n- source: `/tmp/t.jsonl`\n\n"
        "## user · #1\n\nfix <script>alert(1)</script> \\x1b[31mnow\\u202e\n\n"
        "## assistant · #2\n\nlooking\n\n"
        "- ``shell(grep -n `x` src/a.py)`` → 1: x = 1 (+2 lines)\n"
        "- `read(src/b.py)` → ERROR: boom\n"
        "- `shell(make)` → (no result)\n\n"
        "## tool result (zz) · #6\n\na result whose call is gone\n\n"
        "## assistant · #7\n\ndone\n"
    )


def test_html_is_self_contained_and_inert(tmp_path):
    db = tmp_path / "s.db"
    sid = _hostile(db)
    out = tmp_path / "t.html"
    res = CliRunner().invoke(cli, ["--db", str(db), "export", sid, "--format", "html", "--out", str(out)])
    assert res.exit_code == 0 and res.output == f"wrote {out} (html, 7 events)\n"
    page = out.read_text()
    assert "<script" not in page and "\x1b" not in page and "\u202e" not in page and "<b>" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page and "src=" not in page
    assert (
        '<li data-call="c1"><code>shell(grep -n `x` src/a.py)</code> → <span class="result">1: x = 1 (+2 lines)'
        "</span><details><summary>whole result</summary><pre>1: x = 1\n2: y = &lt;b&gt;2&lt;/b&gt;\n\n3: z\n</pre>"
        "</details></li>"
    ) in page
    assert '<code>read(src/b.py)</code> → <span class="result error">ERROR: boom</span>' in page
    assert "<h1>fix &lt;script&gt;alert(1)&lt;/script&gt; \\x1b[31mnow\\u202e</h1>" in page


def test_jsonl_is_the_stored_events(tmp_path):
    db = tmp_path / "s.db"
    sid = _hostile(db)
    res = CliRunner().invoke(cli, ["--db", str(db), "export", sid, "--format", "jsonl"])
    lines = res.output.splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [
        "user_message",
        "assistant_message",
        "usage",
        "tool_result",
        "tool_result",
        "tool_result",
        "assistant_message",
    ]
    first = json.loads(lines[0])
    assert first == {
        "seq": 1,
        "session": sid,
        "kind": "user_message",
        "ts": None,
        "event": {"text": "fix <script>alert(1)</script> \x1b[31mnow\u202e", "media": [], "is_meta": False},
    }
    assert "\x1b" not in res.output and "\u202e" not in res.output  # written as \u escapes
    whole = CliRunner().invoke(cli, ["--db", str(db), "show", sid, "--event", "4", "--json"]).output
    assert json.loads(whole)["event"] == json.loads(lines[3])["event"]


def test_a_corpus_session_exports_with_its_commands(tmp_path):
    require_corpus()
    db = str(tmp_path / "s.db")
    port = CORPUS / "claude-code/claude-reliability_python-to-rust-port.jsonl"
    assert CliRunner().invoke(cli, ["--db", db, "import", str(port)]).exit_code == 0
    md = CliRunner().invoke(cli, ["--db", db, "export", "1e07"]).output.splitlines()
    assert md[0] == "# Port this Python project to Rust. Create a standalone Rust library (no Python b…"
    assert md[2:10] == [
        "- session: `1e07657261df`",
        "- harness: claude-code",
        "- model: claude-opus-4-5-20251101",
        "- started: 2026-01-21T06:20:46+00:00",
        "- requests: 39",
        "- cost: $0.7150",
        "- status: done",
        f"- source: `{port}`",
    ]
    assert "- `Bash(cargo init --lib --name python_utils)` → Creating library package (+1 line)" in md
    assert "- `Read(/tmp/tmpqwh7888i/Cargo.toml)` → 1→[package] (+9 lines)" in md
    jsonl = CliRunner().invoke(cli, ["--db", db, "export", "1e07", "--format", "jsonl"]).output
    assert len(jsonl.splitlines()) == 120


def test_errors_are_one_line(tmp_path):
    db = tmp_path / "s.db"
    _hostile(db)
    res = CliRunner().invoke(cli, ["--db", str(db), "export", "nope"])
    assert res.exit_code == 1 and res.output.startswith("Error: ") and len(res.output.splitlines()) == 1
    res = CliRunner().invoke(cli, ["--db", str(db), "export", "nope", "--format", "pdf"])
    assert res.exit_code == 2 and "'pdf' is not one of 'md', 'html', 'jsonl'" in res.output
