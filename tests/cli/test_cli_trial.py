"""A new user's trial of main (issues 10 and 12: bad input is one clear line, the store unchanged, never a traceback).

Each test turns the failing input of the trial into a fixture and checks the whole kind, not one instance.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
import httpx
import pytest
from cli_support import invoke
from click.testing import CliRunner
from corpus_support import REPO

from latch.cli import _load_commands, cli
from latch.cli.report import _cells  # the cells as the report prints them

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

_load_commands()
HUGE = str(10**20)  # above SQLite's 64-bit INTEGER (OverflowError before the fix)


def _run(tmp_path, *args, input=None, env=None):
    return invoke(tmp_path, *args, input=input, env=env)


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


def _integer_options():
    found = []
    for path, command in _commands(cli):
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, (click.types.IntParamType,)):
                found.append((path, command, param))
    return found


INTEGER_OPTIONS = _integer_options()


def test_the_walk_finds_the_integer_options_of_the_trial():
    names = {(" ".join(path), param.opts[0]) for path, _, param in INTEGER_OPTIONS}
    assert {
        ("show", "--limit"),
        ("search", "--limit"),
        ("stress", "--seed"),
        ("view", "--request"),
        ("web", "--port"),
    } <= names


@pytest.mark.parametrize(
    "path,command,param", INTEGER_OPTIONS, ids=[f"{' '.join(p)} {o.opts[0]}" for p, _, o in INTEGER_OPTIONS]
)
def test_every_integer_option_refuses_a_huge_value_as_a_usage_error(tmp_path, path, command, param):
    """``latch show S --limit 99999999999999999999`` raised OverflowError (SQLite INTEGER); every integer
    option of every command has an upper bound now: exit 2, one usage line, no traceback, no store."""
    assert isinstance(param.type, click.IntRange) and param.type.max is not None, (
        f"{' '.join(path)} {param.opts[0]} has no upper bound"
    )
    assert param.type.max < 2**63
    args = [*path, param.opts[0], HUGE]
    args += ["x"] * sum(1 for p in command.params if isinstance(p, click.Argument) and p.required)
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), *args)
    assert res.exit_code == 2, (args, res.output)
    assert "Traceback" not in res.output and not isinstance(res.exception, OverflowError)
    assert f"Invalid value for '{param.opts[0]}'" in res.output or param.opts[0] in res.output
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("command", ["show", "search"])
def test_limit_overflow_on_a_real_store(tmp_path, command):
    db = tmp_path / "s.db"
    assert (
        _run(tmp_path, "--db", str(db), "import", str(REPO / "examples" / "invoice-rounding.claude.jsonl")).exit_code
        == 0
    )
    target = (
        "invoice"
        if command == "search"
        else _run(tmp_path, "--db", str(db), "sessions", "--json").output.split('"id": "')[1].split('"')[0]
    )
    before = db.read_bytes()
    res = _run(tmp_path, "--db", str(db), command, target, "--limit", HUGE)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.strip().splitlines()[-1].startswith("Error: Invalid value for '--limit'")
    assert db.read_bytes() == before


# ------------------------------------------------------------------ files are written before stdout
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
CORPUS = Path("/work/shared/corpus")


def _latch_piped_into_head(tmp_path, *args):
    """``latch ARGS | head -1`` with real processes: the reader closes the pipe after one line."""
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    env.pop("LATCH_DB", None)
    latch = subprocess.Popen(
        [sys.executable, "-m", "latch", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    head = subprocess.run(["head", "-1"], stdin=latch.stdout, capture_output=True, timeout=300)
    latch.stdout.close()
    err = latch.stderr.read().decode()
    latch.stderr.close()
    return latch.wait(timeout=300), head.stdout.decode(), err


def test_replay_writes_its_files_though_stdout_is_closed(tmp_path):
    """``latch replay FILE --html OUT.html -o OUT.json | head -1`` exited 0 with neither file written."""
    html, out = tmp_path / "r.html", tmp_path / "r.json"
    code, first, err = _latch_piped_into_head(tmp_path, "replay", str(EXAMPLE), "--html", str(html), "-o", str(out))
    assert code == 0 and "Traceback" not in err, err
    assert first.strip()
    assert json.loads(out.read_text(encoding="utf-8"))["summary"]["requests"] > 0
    assert html.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


def test_stress_writes_its_json_though_stdout_is_closed(tmp_path):
    out = tmp_path / "s.json"
    code, first, err = _latch_piped_into_head(
        tmp_path, "stress", "--events", "2000", "--every", "500", "--batch", "500", "--inline", "-o", str(out)
    )
    assert code == 0 and "Traceback" not in err, err
    assert first.strip() and json.loads(out.read_text(encoding="utf-8"))["events"] == 2000


# ------------------------------------------------------------------ report counts every session of a file
@pytest.mark.parametrize(
    "path,sessions", [(CORPUS / "goose" / "lantern_sessions.db", 4), (CORPUS / "opencode" / "lantern_opencode.db", 3)]
)
def test_report_counts_every_session_of_a_multi_session_file(tmp_path, path, sessions):
    """``latch report FILE`` on a Goose or OpenCode database counted one session of several."""
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), "report", str(path), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    replayed = json.loads(_run(tmp_path, "--db", str(tmp_path / "s.db"), "replay", str(path), "--json", "-").output)
    assert len(doc["sessions"]) == sessions == len(replayed)
    assert doc["sessions"] == [d["session"] for d in replayed]
    assert doc["total"]["requests"] == sum(d["summary"]["requests"] for d in replayed)


# ------------------------------------------------------------------ a failed command leaves no new file
def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.mark.parametrize(
    "args,stdin",
    [
        (["import", "GARBAGE"], None),
        (["replay", "abc"], None),
        (["report", "abc"], None),
        (["forget", "abc"], None),
        (["import", "--discover"], None),
        (["import", "-"], "this is not a transcript\n"),
        (["replay", "GARBAGE"], None),
        (["report", "GARBAGE"], None),
    ],
)
@pytest.mark.parametrize("explicit_db", [False, True])
def test_a_failed_command_leaves_no_new_file(tmp_path, args, stdin, explicit_db):
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"not": "a transcript"}\n', encoding="utf-8")
    args = [str(garbage) if a == "GARBAGE" else a for a in args]
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    before = _files(tmp_path)
    db = ["--db", str(work / "s.db")] if explicit_db else []
    env = {"LATCH_HOME": str(home), "COLUMNS": "300", "HOME": str(tmp_path / "user")}
    res = CliRunner().invoke(cli, [*db, *args], input=stdin, env=env)
    assert "Traceback" not in res.output and res.exception is None or isinstance(res.exception, SystemExit)
    assert res.exit_code != 0 or "nothing" in res.output.lower() or "no " in res.output.lower(), res.output
    assert _files(tmp_path) == before, res.output


def test_a_good_import_still_keeps_its_store_and_stdin_copy(tmp_path):
    home = tmp_path / "home"
    res = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "s.db"), "import", "-"], input=EXAMPLE.read_bytes(), env={"LATCH_HOME": str(home)}
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "s.db").is_file() and len(list((tmp_path / "stdin").iterdir())) == 1


# ------------------------------------------------------------------ tables keep numbers and ids whole
REPORTED = [CORPUS / "codex", CORPUS / "claude-code", CORPUS / "goose"]


def _corpus_files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.iterdir() if p.is_file() and p.suffix in (".jsonl", ".db"))


@pytest.mark.parametrize("columns", ["80", "100"])
def test_report_tables_keep_every_number_and_id_whole(tmp_path, columns):
    """``latch report A B C | cat`` at COLUMNS=80 and 100 split numbers and ids across lines; now each row is one
    line holding every cell whole (optional columns left out are said in a footer)."""
    files = [f for folder in REPORTED for f in _corpus_files(folder)]
    db = ["--db", str(tmp_path / "s.db")]
    doc = json.loads(_run(tmp_path, *db, "report", *files, "--json").output)
    assert len(doc["by_session"]) >= 3
    res = _run(tmp_path, *db, "report", *files, env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= int(columns)
    left_out = "cache-read share left out (too narrow)" in res.output
    for _name, rows in (("model", doc["models"]), ("session", doc["by_session"])):
        for key, row in rows.items():
            cells = _cells(row)
            if left_out:
                cells = cells[:-1]
            assert [key, *cells] in [line.split() for line in lines], (key, cells, res.output)


def test_sessions_list_keeps_every_id_and_number_whole_at_80_columns(tmp_path):
    db = ["--db", str(tmp_path / "s.db")]
    for folder in REPORTED:
        assert _run(tmp_path, *db, "import", *_corpus_files(folder)).exit_code == 0
    sessions = json.loads(_run(tmp_path, *db, "sessions", "--json").output)
    res = _run(tmp_path, *db, "sessions", env={"COLUMNS": "80"})
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    for s in sessions:
        line = next(line for line in lines if line.lstrip("└ ").startswith(s["id"][:8]))
        assert f" · {s['requests']:,} request" in line and line.endswith(f" · {s['status']}")
    assert _run(tmp_path, *db, "sessions").output == res.output  # a pipe: the same 80 columns


# ------------------------------------------------------------------ latch web cannot listen: one line
def _latch(tmp_path, *args, timeout=60):
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home")}
    env.pop("LATCH_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "s.db"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_web_on_a_taken_port_is_one_line_and_exit_1(tmp_path):
    """``latch web --port P`` with P taken printed "serving ... at http://127.0.0.1:P/" and a uvicorn ERROR, exit 3."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        res = _latch(tmp_path, "web", "--port", str(port))
    assert res.returncode == 1, res.stderr
    assert res.stderr == f"latch web: cannot listen on 127.0.0.1:{port}: address already in use\n"
    assert res.stdout == "" and not (tmp_path / "s.db").exists()


def test_web_on_a_host_that_does_not_resolve_is_one_line_and_exit_1(tmp_path):
    res = _latch(tmp_path, "web", "--host", "no-such-host.invalid", "--port", "8765", "--token", "t")
    assert res.returncode == 1, res.stderr
    assert res.stderr.startswith("latch web: cannot listen on no-such-host.invalid:8765: ")
    assert len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr


def test_web_on_port_0_says_the_port_it_listens_on_and_serves(tmp_path):
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "s.db"), "web", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stderr.readline()
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        assert port > 0
        deadline = time.monotonic() + 30
        while True:
            try:
                reply = httpx.get(f"http://127.0.0.1:{port}/api/sessions", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        assert reply.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


# ------------------------------------------------------------------ bench --plot, LATCH_MAX_TRANSCRIPT_BYTES, SIGTERM
def test_bench_plot_into_a_missing_folder_is_refused(tmp_path):
    """``latch bench --plot /nonexist/x.png`` silently created /nonexist; refused now as ``replay -o`` is."""
    target = tmp_path / "nonexist" / "x.png"
    res = _run(tmp_path, "bench", "--scenario-events", "10", "--plot", str(target), "--out", str(tmp_path / "out"))
    assert res.exit_code == 2
    assert f"cannot write {target}: folder {target.parent} does not exist" in res.output
    assert not target.parent.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1e6"])
def test_a_bad_max_transcript_bytes_is_one_line_naming_the_variable(tmp_path, value):
    """``LATCH_MAX_TRANSCRIPT_BYTES=abc`` was silently ignored (the 2 GiB default used)."""
    res = _run(
        tmp_path, "--db", str(tmp_path / "s.db"), "import", str(EXAMPLE), env={"LATCH_MAX_TRANSCRIPT_BYTES": value}
    )
    assert res.exit_code == 1
    assert res.output == (
        f"Error: LATCH_MAX_TRANSCRIPT_BYTES={value!r}: not a positive whole number of bytes "
        "(unset it for the default of 2,147,483,648)\n"
    )
    assert not (tmp_path / "s.db").exists()
    ok = _run(
        tmp_path,
        "--db",
        str(tmp_path / "s.db"),
        "import",
        str(EXAMPLE),
        env={"LATCH_MAX_TRANSCRIPT_BYTES": "100000000"},
    )
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("mode", ["--inline", "--producer"])
def test_stress_removes_its_temporary_database_on_sigterm(tmp_path, mode):
    """``latch stress`` left /tmp/latch-stress-* behind on SIGTERM (it cleaned up on SIGINT only)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "TMPDIR": str(scratch)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "latch", "stress", "--events", "2000000", mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not any((p / "stress.db").exists() for p in scratch.glob("latch-stress-*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)
    time.sleep(1.5)  # well into the run
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (proc.returncode, err[-500:])
    assert "Traceback" not in err
    assert list(scratch.glob("latch-stress-*")) == []


def test_an_empty_new_store_is_removed_only_when_no_other_connection_holds_it(tmp_path):
    """A failed command removes the empty store it created, unless another process has it open too (two
    `latch import`s into one new store, one of them failing): then the file and the other's events stay."""
    from latch.store import EventStore

    path = tmp_path / "new.db"
    mine, other = EventStore(str(path)), EventStore(str(path))
    try:
        assert mine.empty_and_unshared() is False  # the other connection keeps the store
        other.close()
        assert mine.empty_and_unshared() is True
    finally:
        mine.close()


@pytest.mark.parametrize(
    "args, line",
    [
        (["show", "--limit", "abc", "x"], "Error: Invalid value for '--limit': 'abc' is not a valid integer."),
        (["replay"], "Error: Missing argument 'FILE_OR_SESSION'."),
        (["sessions", "extra"], "Error: Got unexpected extra argument (extra)"),
        (["nosuch"], "Error: No such command 'nosuch'."),
        (["--bogus", "sessions"], "Error: No such option '--bogus'."),
    ],
)
def test_a_usage_error_is_one_line(tmp_path, args, line):
    """Found by a new user's trial: click printed the usage, a hint and then the error (three lines and more);
    the `latch` command prints the one line every other error is, with exit status 2."""
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "300"}
    out = subprocess.run([sys.executable, "-m", "latch.cli", *args], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout, out.stderr.splitlines()) == (2, "", [line])
    if args[0] != "--bogus":  # a subcommand's usage error is one line in-process too (CliRunner, the tests' path)
        r = _run(tmp_path, *args)
        assert r.exit_code == 2 and r.output.splitlines() == [line]
