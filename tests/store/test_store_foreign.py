"""``--db`` pointed at a file that is not a Latch store (found by a new-user trial): another program's SQLite
database is refused with one line and left byte for byte as it was, by read-only and writing commands alike;
an empty (0-byte) file is not written to (nor removed) by a read-only command."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from latch.store import EventStore, StoreError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT)")
    db.execute("CREATE TABLE message (id TEXT, data TEXT)")
    db.execute("INSERT INTO sessions VALUES ('s1', 'hello')")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("args", [["sessions"], ["search", "hello"], ["doctor"], ["import", str(EXAMPLE)]])
def test_another_programs_database_is_refused_and_unchanged(tmp_path, args):
    db = _foreign(tmp_path / "other.db")
    before = _digest(db)
    r = subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(db), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert _digest(db) == before
    assert not (tmp_path / "other.db-wal").exists() or (tmp_path / "other.db-wal").stat().st_size == 0
    if args != ["doctor"]:
        assert r.returncode == 1, r.stdout
    assert "SQLite database of another program (tables: message, sessions)" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_the_store_refuses_a_foreign_database_directly(tmp_path):
    db = _foreign(tmp_path / "other.db")
    before = _digest(db)
    with pytest.raises(StoreError, match="another program"):
        EventStore(db)
    assert _digest(db) == before
    assert EventStore(tmp_path / "new.db").sessions() == []  # a new file is still a new store


@pytest.mark.slow  # left out of the fast tier: three latch processes
def test_read_only_commands_leave_an_empty_file_empty(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for args in (["sessions"], ["search", "x"]):
        r = subprocess.run(
            [sys.executable, "-m", "latch", "--db", str(empty), *args], capture_output=True, text=True, cwd=tmp_path
        )
        assert r.returncode == 0, r.stderr
        assert empty.exists() and empty.stat().st_size == 0
    r = subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(empty), "import", str(EXAMPLE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr  # a writing command makes the empty file a store
    assert EventStore(empty).sessions()
