"""A new user's second CLI trial: output options never replace an input, undecodable arguments are one line,
a read-only store is read (or said to be read-only in one line), and ``latch report`` says which sessions it added.

Each test turns a failing input of the trial into a fixture and checks the whole kind.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_support import invoke
from corpus_support import CORPUS, REPO

from latch.cli import _load_commands, cli
from latch.cli.outputs import output_file, overwrite_problem
from latch.textsafe import atomic_path, write_text

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

_load_commands()
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"


def _run(tmp_path, *args):
    return invoke(tmp_path, *args)


def _last_line(res) -> str:
    return res.output.strip().splitlines()[-1]


# ------------------------------------------------------------------ 1. outputs never replace an input
def _output_options():
    found = []
    for name, command in sorted(cli.commands.items()):
        for param in command.params:
            if isinstance(param, click.Option) and param.callback is output_file:
                found.append((name, param))
    return found


OUTPUT_OPTIONS = _output_options()


def test_the_walk_finds_every_file_output_of_the_trial():
    assert {(name, p.opts[0]) for name, p in OUTPUT_OPTIONS} >= {
        ("replay", "--json"),
        ("replay", "-o"),
        ("replay", "--html"),
        ("stress", "--json"),
        ("stress", "-o"),
        ("bench", "--plot"),
    }


@pytest.mark.parametrize("name,param", OUTPUT_OPTIONS, ids=[f"{n} {p.opts[0]}" for n, p in OUTPUT_OPTIONS])
def test_every_file_output_refuses_an_existing_transcript(tmp_path, name, param):
    """``latch replay --json A.jsonl B.jsonl`` replaced transcript A with B's report (exit 0): every output option
    of every command refuses an existing transcript, exit 2, one line naming the option and the file, before any
    work (no store is created)."""
    victim = tmp_path / "A.jsonl"
    shutil.copy(EXAMPLE, victim)
    before = victim.read_bytes()
    args = {
        "replay": [str(EXAMPLE)],
        "stress": ["--events", "50"],
        "bench": ["--scenario-events", "0"],
        "export": ["c481a68c21d2"],
    }[name]
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), name, param.opts[0], str(victim), *args)
    assert res.exit_code == 2, res.output
    line = _last_line(res)
    assert len(res.output.strip().splitlines()) == 1 and param.opts[0] in line and str(victim) in line, res.output
    assert "claude-code transcript" in line
    assert victim.read_bytes() == before
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "--json", "{A}", "{B}"],
        ["replay", "{A}", "-o", "{A}"],
        ["replay", "{A}", "--html", "{A}"],
        ["replay", "{A}", "--json-out={A}"],
    ],
)
def test_the_trials_own_inputs_are_refused_and_left_whole(tmp_path, args):
    a, b = tmp_path / "A.jsonl", tmp_path / "B.jsonl"
    shutil.copy(EXAMPLE, a)
    shutil.copy(EXAMPLE, b)
    before = a.read_bytes()
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), *(x.format(A=a, B=b) for x in args))
    assert res.exit_code == 2 and f"refusing to overwrite {a}: it is a claude-code transcript" in res.output
    assert a.read_bytes() == before and b.read_bytes() == before
    assert not (tmp_path / "s.db").exists()


def test_an_output_that_is_an_input_undetected_as_a_transcript_is_refused_too(tmp_path):
    """The same file as any input (here --config, and the store itself, by another spelling) or as another
    output: exit 2 naming both, nothing written."""
    cfg = tmp_path / "c.toml"
    cfg.write_text("\n", encoding="utf-8")
    res = _run(
        tmp_path,
        "--db",
        str(tmp_path / "s.db"),
        "replay",
        str(EXAMPLE),
        "--config",
        str(cfg),
        "-o",
        str(tmp_path / "." / "c.toml"),
    )
    assert res.exit_code == 2 and "is the same file as '--config'" in res.output, res.output
    assert cfg.read_text(encoding="utf-8") == "\n"
    store = tmp_path / "empty.db"
    store.write_bytes(b"")
    res = _run(tmp_path, "--db", str(store), "replay", str(EXAMPLE), "-o", str(store))
    assert res.exit_code == 2 and "it is the same file as the Latch store" in res.output, res.output
    assert store.read_bytes() == b""
    out = tmp_path / "r.json"
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), "replay", str(EXAMPLE), "-o", str(out), "--html", str(out))
    assert res.exit_code == 2 and "is the same file as '-o' / '--json-out'" in res.output
    assert not out.exists()


def test_a_latch_store_is_never_an_output(tmp_path):
    other = tmp_path / "other.db"
    assert _run(tmp_path, "--db", str(other), "import", str(EXAMPLE)).exit_code == 0
    before = other.read_bytes()
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), "replay", str(EXAMPLE), "-o", str(other))
    assert res.exit_code == 2 and "it is an SQLite database" in res.output
    assert other.read_bytes() == before


def test_an_earlier_report_is_overwritten_atomically(tmp_path):
    """Overwriting an earlier Latch report stays allowed (JSON and HTML are not transcripts), keeps the file's
    permissions and leaves no temporary file."""
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    db = str(tmp_path / "s.db")
    assert _run(tmp_path, "--db", db, "replay", str(EXAMPLE), "-o", str(out), "--html", str(html)).exit_code == 0
    assert overwrite_problem(out) is None and overwrite_problem(html) is None
    os.chmod(out, 0o640)
    out.write_text("{}", encoding="utf-8")
    res = _run(tmp_path, "--db", db, "replay", str(EXAMPLE), "-o", str(out), "--html", str(html))
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text(encoding="utf-8"))["summary"]["requests"] > 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_atomic_path_leaves_the_old_file_when_the_write_fails(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half", encoding="utf-8")
            raise RuntimeError("render failed")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    write_text(target, "new \ud800")
    assert target.read_text(encoding="utf-8") == "new \ufffd"


def test_bench_out_refuses_a_folder_whose_report_json_is_a_transcript(tmp_path):
    out = tmp_path / "bench-out"
    out.mkdir()
    shutil.copy(EXAMPLE, out / "report.json")
    res = _run(tmp_path, "--db", str(tmp_path / "s.db"), "bench", "--out", str(out), "--scenario-events", "0")
    assert res.exit_code == 2 and "refusing to overwrite" in res.output and "report.json" in res.output
    assert (out / "report.json").read_bytes() == EXAMPLE.read_bytes()


# ------------------------------------------------------------------ 2. undecodable bytes in an argument
SURROGATE_COMMANDS = [
    ["replay", "a\udcff.jsonl"],
    ["view", "\udcff", "--request", "1"],
    ["view", "a\udcff.jsonl", "--request", "1"],
    ["context", "\udcff"],
    ["report", "\udcff"],
    ["show", "\udcff"],
    ["state", "\udcff"],
    ["evidence", "\udcff"],
    ["search", "invoice", "--session", "\udcff"],
    ["forget", "\udcff"],
    ["group", "\udcff"],
    ["import", "a\udcff.jsonl"],
]


@pytest.mark.parametrize(
    "args", SURROGATE_COMMANDS, ids=[" ".join(a).encode("ascii", "replace").decode() for a in SURROGATE_COMMANDS]
)
def test_an_undecodable_session_or_file_argument_is_one_line(tmp_path, args):
    """``latch show $'\\xff'`` raised UnicodeEncodeError (surrogates not allowed): one line, nonzero exit."""
    db = str(tmp_path / "s.db")
    assert _run(tmp_path, "--db", db, "import", str(EXAMPLE)).exit_code == 0
    res = _run(tmp_path, "--db", db, *args)
    assert res.exit_code not in (0, None) and isinstance(res.exception, SystemExit), res.output
    assert len(res.output.strip().splitlines()) == 1 and _last_line(res).startswith("Error: "), res.output
    assert "\udcff" not in res.output


def test_an_existing_file_with_an_undecodable_name_is_one_line_in_a_real_process(tmp_path):
    """The argv bytes themselves, through a real ``latch`` process: the file exists, its name is not UTF-8."""
    name = os.fsencode(str(tmp_path)) + b"/a\xff.jsonl"
    shutil.copy(EXAMPLE, name)
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home")}
    for command in (b"replay", b"import", b"report"):
        done = subprocess.run(
            [sys.executable.encode(), b"-m", b"latch", b"--db", os.fsencode(tmp_path / "s.db"), command, name],
            capture_output=True,
            env=env,
            timeout=300,
        )
        err = done.stderr.decode("utf-8")
        assert done.returncode == 1 and "Traceback" not in err, err
        assert err.count("\n") == 1 and "undecodable bytes" in err and "a\\udcff.jsonl" in err
    assert not (tmp_path / "s.db").exists()


# ------------------------------------------------------------------ 3. a read-only store
def _unprivileged() -> list[str]:
    """A prefix that runs a process without the power to write a file its mode refuses: as root, without
    CAP_DAC_OVERRIDE (setpriv); as anyone else, nothing."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no real read-only case")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def _latch_ro(tmp_path, db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "300"}
    env.pop("LATCH_DB", None)
    return subprocess.run(
        [*_unprivileged(), sys.executable, "-m", "latch", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture
def stores(tmp_path):
    """A real store (WAL mode, closed cleanly) copied into folders whose modes the test sets; restored after."""
    source = tmp_path / "source.db"
    assert _run(tmp_path, "--db", str(source), "import", str(EXAMPLE)).exit_code == 0
    con = sqlite3.connect(source)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the whole store in the one file, as a closed store leaves it
    con.close()
    made: list[Path] = []

    def make(name: str, file_mode: int, folder_mode: int, *, drop_migration: bool = False) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        db = folder / "latch.db"
        shutil.copy(source, db)
        if drop_migration:
            con = sqlite3.connect(db)
            con.execute("DELETE FROM _latch_migrations WHERE rowid = (SELECT max(rowid) FROM _latch_migrations)")
            con.commit()
            con.close()
        os.chmod(db, file_mode)
        os.chmod(folder, folder_mode)
        made.append(folder)
        return db

    yield make
    for folder in made:
        os.chmod(folder, 0o755)
        for p in folder.iterdir():
            os.chmod(p, 0o644)


def test_reading_commands_read_a_store_they_cannot_write(tmp_path, stores):
    db = stores("ro-file", 0o444, 0o755)
    before = db.read_bytes()
    listed = _latch_ro(tmp_path, db, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["events"] for s in json.loads(listed.stdout)] == [81]
    found = _latch_ro(tmp_path, db, "search", "invoice")
    assert found.returncode == 0 and "invoice" in found.stdout.lower(), found.stderr
    wrote = _latch_ro(tmp_path, db, "import", str(EXAMPLE))
    assert wrote.returncode == 1 and wrote.stderr.strip() == (
        f"Error: the store at {db} is read-only ({db} is not writable); this needs write access to it"
    )
    assert db.read_bytes() == before


def test_a_store_in_a_read_only_folder_is_said_to_be_read_only_in_one_line(tmp_path, stores):
    """``chmod 444 latch.db`` in a 555 folder: SQLite cannot read a WAL store there (without immutable), and the
    trial saw only "unable to open database file"."""
    db = stores("ro-folder", 0o444, 0o555)
    for command in (["sessions"], ["search", "invoice"], ["show", "c481"]):
        res = _latch_ro(tmp_path, db, *command)
        assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith(
            f"Error: the store at {db} is read-only ({db} is not writable, nor is its folder {db.parent})"
        ), res.stderr
    res = _latch_ro(tmp_path, db, "import", str(EXAMPLE))
    assert res.returncode == 1 and "is read-only" in res.stderr and "this command writes to it" in res.stderr


def test_a_read_only_store_that_needs_a_migration_says_so_once(tmp_path, stores):
    db = stores("ro-old", 0o444, 0o755, drop_migration=True)
    res = _latch_ro(tmp_path, db, "sessions")
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"the store at {db} is read-only and needs a migration (1 pending" in res.stderr
    assert "run `latch` once with write access" in res.stderr


# ------------------------------------------------------------------ 4. report counts the sessions it was given
def test_report_says_which_sessions_it_added(tmp_path):
    """``latch report`` with 6 ids said "8 session(s)": it adds the child sessions, and now says so."""
    parent = CORPUS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    if not parent.is_file():
        pytest.skip("the corpus's Claude Code session with sub-agents is not here")
    db = str(tmp_path / "s.db")
    assert _run(tmp_path, "--db", db, "import", str(parent), str(EXAMPLE)).exit_code == 0
    sessions = json.loads(_run(tmp_path, "--db", db, "sessions", "--json").output)
    roots = [s["id"] for s in sessions if not s.get("parent")]
    children = sorted(s["id"] for s in sessions if s.get("parent"))
    assert len(roots) == 2 and len(children) == 2
    text = _run(tmp_path, "--db", db, "report", *roots)
    assert text.exit_code == 0
    assert text.output.splitlines()[0].startswith("2 sessions (+2 child sessions) · ")
    assert text.output.splitlines()[0].endswith(f"{', '.join(roots)} · child sessions: {', '.join(children)}")
    doc = json.loads(_run(tmp_path, "--db", db, "report", "--json", *roots).output)
    assert doc["named_sessions"] == roots and sorted(doc["child_sessions"]) == children
    assert doc["sessions"] == [*roots, *doc["child_sessions"]]
    lonely = next(r for r in roots if not any(s.get("parent") == r for s in sessions))
    one = _run(tmp_path, "--db", db, "report", lonely)
    assert one.output.splitlines()[0].startswith("1 session · ")
    assert json.loads(_run(tmp_path, "--db", db, "report", "--json", lonely).output)["child_sessions"] == []
