"""Terminal output: tables never ellipsize, piped output is never hard-wrapped, and
transcript- or file-derived text cannot drive the terminal (ESC/OSC sequences, BEL, NUL, bidi overrides).

Every test runs the real CLI (click's ``CliRunner``, which is not a terminal) with ``--db``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cli_support import invoke
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.text import Text

from latch.cli import _load_commands
from latch.textsafe import Table, safe

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
README_ARGS = ("--window", "16000", "--reserve", "2000", "--recent", "3000", "--no-harness")

ESC_CLEAR = "\x1b[2J"
OSC_TITLE = "\x1b]0;pwned\x07"
RLO = "\u202e"
NASTY = f"zebra{ESC_CLEAR}{OSC_TITLE}ring\x07{RLO}evil"  # + NUL in texts (file names cannot hold one)
RAW = ("\x1b", "\x07", "\x00", RLO)


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def run_latch(*args, columns: int | None = None):
        # COLUMNS None: removed, as when a user pipes into `cat` (the shell does not export it)
        return invoke(tmp_path, *args, db=db, columns=columns, catch_exceptions=False)

    return run_latch


def _replay_rows(output: str) -> list[list[str]]:
    lines = output.splitlines()
    h = next(i for i, line in enumerate(lines) if line.split()[:2] == ["req", "events"])
    rows = []
    for line in lines[h + 2 :]:
        if not line.strip() or not line.split()[0].isdigit():
            break
        rows.append(line.split())
    return rows


def _expected_rows(doc: dict) -> list[list[str]]:
    keys = [
        "request",
        "events",
        "instructions_tokens",
        "state_tokens",
        "recent_tokens",
        "recall_tokens",
        "total_tokens",
        "history_tokens",
        "first_retained_seq",
        "common_prefix_tokens",
        "epoch",
        "provider_prompt_tokens",
    ]
    return [[f"{r[k]:,}" for k in keys] for r in doc["requests"]]


# ----------------------------------------------------------------------------- tables
def test_readme_first_command_at_80_columns_keeps_every_number_whole(run):
    doc = json.loads(run("replay", str(EXAMPLE), *README_ARGS, "--json", "-").output)
    res = run("replay", str(EXAMPLE), *README_ARGS, columns=80)
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80
    assert _replay_rows(res.output) == _expected_rows(doc)  # every cell of the JSON's numbers, whole


def test_replay_table_on_an_80_column_terminal(run):
    from latch.cli.replay import _print

    doc = json.loads(run("replay", str(EXAMPLE), *README_ARGS, "--json", "-").output)
    con = Console(width=80, force_terminal=True, color_system=None)
    with con.capture() as cap:
        _print(con, doc, str(EXAMPLE))
    out = cap.get()
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    assert _replay_rows(out) == _expected_rows(doc)


def _table(style: dict, columns: list[tuple[str, str]], rows: list[list]) -> Table:
    t = Table(**style)
    for header, justify in columns:
        t.add_column(header, justify=justify)
    for r in rows:
        t.add_row(*r)
    return t


class _AsciiIO(io.StringIO):
    encoding = "ascii"  # rich substitutes an ASCII box for a non-UTF-8 stream


REPLAY_STYLE = {"box": box.SIMPLE_HEAD, "pad_edge": False, "show_edge": False, "padding": (0, 1, 0, 0)}
TABLES = {
    "replay": (
        REPLAY_STYLE,
        [("req", "right"), ("view", "right"), ("cost", "right"), ("cache", "left")],
        [
            ["1", "22,380", "$0.07307", Text("")],
            ["2", "[red]overflow[/red]", "–", Text("rotated (reason)")],
            ["174", "", "–", Text("broken (at message 3)")],
        ],
    ),
    "edges": (
        {},
        [("name", "left"), ("[bold]n[/bold]", "right")],
        [["表格 wide", "1"], [" lead", "ab  "], ["trail  ", "  x"], ["", ""], [Text("styled", style="red"), "9"]],
    ),
    "no box": ({"box": None}, [("a", "left"), ("b", "right")], [["x", "1"], ["yy", "22"]]),
    "headless": (
        {"show_header": False, "box": box.ROUNDED},
        [("a", "left"), ("b", "right")],
        [["x", "1"], ["yy", "22"], ["z", "3"]],
    ),
    "one row": ({"box": box.SQUARE, "pad_edge": False}, [("a", "right")], [["1"]]),
    "header only": ({}, [("alpha", "left"), ("beta", "right")], []),
}


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("stream", ["utf-8", "ascii"])
def test_plain_table_lines_are_what_rich_prints(name, stream, monkeypatch):
    """Table computes a plain (unstyled) table's lines itself, without rich's per-cell layout: the same text."""
    style, columns, rows = TABLES[name]

    def printed(fast: bool) -> str:
        file = _AsciiIO() if stream == "ascii" else io.StringIO()
        con = Console(file=file, width=200, color_system=None, highlight=False)
        t = _table(style, columns, rows)
        assert (t._plain_lines(con, con.options) is not None) is True
        with monkeypatch.context() as m:
            if not fast:
                m.setattr(Table, "_plain_lines", lambda self, console, options: None)
            con.print(t)
        return file.getvalue()

    fast, slow = printed(True), printed(False)
    assert fast == slow
    if stream == "ascii":
        assert not any(ch in fast for ch in "─━│┃╭┌")  # the ASCII box, as rich substitutes it


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("width", [200, 40, 12, 1])
@pytest.mark.parametrize("padding", [None, (0, 0, 0, 0), (0, 2, 0, 3)])
def test_plain_table_measures_what_rich_measures(name, width, padding, monkeypatch):
    """Table measures a plain table from its plain cells, without rich's per-cell measurement: the same numbers
    (what `latch replay` asks to choose its columns), wide or narrow, whatever the padding."""
    style, columns, rows = TABLES[name]
    style = style if padding is None else {**style, "padding": padding}
    con = Console(file=io.StringIO(), width=200, color_system=None, highlight=False)
    options = con.options.update_width(width)
    fast = Measurement.get(con, options, _table(style, columns, rows))
    with monkeypatch.context() as m:
        m.setattr(Table, "_plain_cells", lambda self, console, markup=None: None)
        slow = Measurement.get(con, options, _table(style, columns, rows))
    assert fast == slow


def test_plain_table_path_only_where_nothing_else_shows():
    style, columns, rows = TABLES["replay"]
    t = _table(style, columns, rows)
    colour = Console(file=io.StringIO(), width=200, force_terminal=True, color_system="truecolor")
    assert t._plain_lines(colour, colour.options) is None  # styles print: rich renders
    narrow = Console(file=io.StringIO(), width=30, color_system=None)
    assert t._plain_lines(narrow, narrow.options) is None  # does not fit: rich wraps (between words)
    plain = Console(file=io.StringIO(), width=200, color_system=None)
    assert _table({**style, "title": "t"}, columns, rows)._plain_lines(plain, plain.options) is None
    assert _table(style, columns, [["1\n2", "x", "y", "z"]])._plain_lines(plain, plain.options) is None
    lines = t._plain_lines(plain, plain.options)
    assert (
        lines is not None
        and lines[0] == "req      view      cost  cache                "
        and lines[3] == "  2  overflow         –  rotated (reason)     "
    )


def test_narrow_table_wraps_between_words_then_folds_never_ellipsizes():
    t = Table("name", "count")
    t.add_row("observation-masking heuristic-openai", "1,234,567")
    con = Console(width=40, color_system=None)
    with con.capture() as cap:
        con.print(t)
    out = cap.get()
    assert "…" not in out and "1,234,567" in out  # the number stays whole, the name wraps between words
    assert "observation-masking" in out and "heuristic-openai" in out
    con = Console(width=12, color_system=None)
    with con.capture() as cap:
        con.print(t)
    assert "…" not in cap.get()  # too narrow for the words: folded, never cut


def test_plugins_piped_print_full_names(run):
    rows = json.loads(run("plugins", "--json").output)
    res = run("plugins")
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    for row in rows:
        assert row["name"] in res.output and row["source"] in res.output
        for names in row["registered"].values():
            assert ", ".join(names) in res.output  # e.g. observation-masking, heuristic-openai on one line


def test_sessions_json_keeps_full_paths(run, tmp_path):
    deep = tmp_path / ("a-folder-with-a-rather-long-name-" * 3) / "and-another-one-below-it"
    deep.mkdir(parents=True)
    f = deep / "invoice-rounding session with spaces.claude.jsonl"
    f.write_bytes(EXAMPLE.read_bytes())
    assert run("import", str(f)).exit_code == 0
    assert len(str(f)) > 120
    assert json.loads(run("sessions", "--json").output)[0]["source"] == str(f)  # not cut (the list has no path)


# ----------------------------------------------------------------------------- escapes
def _claude_code_lines() -> list[dict]:
    def line(**kw):
        return {
            "isSidechain": False,
            "sessionId": "s-esc",
            "cwd": "/home/user/app",
            "version": "2.1.112",
            "userType": "external",
            "timestamp": "2026-01-02T10:00:00.000Z",
            **kw,
        }

    def assistant(uuid, parent, msg_id, text):
        return line(
            type="assistant",
            uuid=uuid,
            parentUuid=parent,
            requestId=f"req_{msg_id}",
            message={
                "id": msg_id,
                "model": f"claude{ESC_CLEAR}{OSC_TITLE}\x07{RLO}x",
                "role": "assistant",
                "type": "message",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 5},
            },
        )

    def user(uuid, parent, text):
        return line(type="user", uuid=uuid, parentUuid=parent, message={"role": "user", "content": text})

    return [
        user("u1", None, f"user {NASTY} nul\x00here [bold]literal[/bold] :smile:"),
        assistant("a1", "u1", "msg_A", f"assistant {NASTY} nul\x00here"),
        user("u2", "a1", "thanks zebra"),
        assistant("a2", "u2", "msg_B", "done zebra"),
    ]


def _assert_escaped(output: str, *visible: str) -> None:
    for raw in RAW:
        assert raw not in output, (raw, output)
    for v in visible:
        assert v in output, (v, output)


@pytest.fixture
def nasty_file(tmp_path) -> Path:
    f = tmp_path / f"evil{ESC_CLEAR}{OSC_TITLE}bell\x07{RLO}lmth.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in _claude_code_lines()), encoding="utf-8")
    return f


ESCAPED_NAME = "evil\\x1b[2J\\x1b]0;pwned\\x07bell\\x07\\u202elmth.jsonl"
ESCAPED_TEXT = "zebra\\x1b[2J\\x1b]0;pwned\\x07ring\\x07\\u202eevil"


def test_import_show_search_replay_escape_controls(run, nasty_file):
    res = run("import", str(nasty_file))
    assert res.exit_code == 0, res.output
    _assert_escaped(res.output, ESCAPED_NAME, "(claude-code)")
    sid = json.loads(run("sessions", "--json").output)[0]["id"]

    show = run("show", sid)
    assert show.exit_code == 0, show.output
    _assert_escaped(
        show.output,
        ESCAPED_NAME,
        f"user: user {ESCAPED_TEXT} nul\\x00here",
        f"assistant: assistant {ESCAPED_TEXT} nul\\x00here",
    )
    assert "[bold]literal[/bold] :smile:" in show.output  # neither markup nor an emoji code

    search = run("search", "zebra")
    assert search.exit_code == 0, search.output
    _assert_escaped(search.output, ESCAPED_TEXT.replace("zebra", "**zebra**", 1), "nul\\x00here")

    sessions = run("sessions")  # the title: the first prompt
    _assert_escaped(sessions.output, f"claude-code: user {ESCAPED_TEXT}")

    replay = run("replay", str(nasty_file))
    assert replay.exit_code == 0, replay.output
    _assert_escaped(replay.output, ESCAPED_NAME, "model claude\\x1b[2J\\x1b]0;pwned\\x07\\x07\\u202ex")

    hits = run("search", "--json", "zebra").output
    _assert_escaped(hits, "\\u001b", "\\u202e")  # JSON: the same strings, escaped
    assert any(NASTY in h["text"] for h in json.loads(hits))


def test_errors_echoing_a_file_name_escape_it(run, tmp_path):
    broken = tmp_path / f"broken{ESC_CLEAR}{RLO}.jsonl"
    broken.write_text("{not json\n", encoding="utf-8")
    for args in (("import", str(broken)), ("replay", str(broken)), ("replay", str(broken) + "-missing")):
        res = run(*args)
        assert res.exit_code != 0, res.output
        _assert_escaped(res.output, "broken\\x1b[2J\\u202e")


def test_safe_escapes_every_terminal_control():
    assert safe("a\x00b\x07c\x1b[2Jd\x7fe\x85f\x9bg") == "a\\x00b\\x07c\\x1b[2Jd\\x7fe\\x85f\\x9bg"
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    assert safe(bidi) == "".join(f"\\u{ord(c):04x}" for c in bidi)
    assert safe("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert safe("a\nb\tc\rd", multiline=True) == "a\nb\tc\\rd"
    assert safe("lone \ud800") == "lone \ufffd"
    assert safe(safe("\x1b\u202e")) == safe("\x1b\u202e")
    assert safe("C:\\path ünïcode 日本") == "C:\\path ünïcode 日本"
