"""A damaged store (one page overwritten) is a one-line error naming the file, never a traceback, and
``latch doctor`` finds it with ``PRAGMA quick_check`` and the FTS5 index check and exits 1. Measured on main before the fix: ``sqlite3.DatabaseError: database disk image is malformed``
tracebacks from ``sessions``, ``show``, ``state`` and ``search``, while ``doctor`` printed "store opens"
and exited 0. The failing commands leave the file byte for byte as it was."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner
from corpus_support import REPO

from latch.cli import _load_commands, cli
from latch.store import EventStore

EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
SID = "c481a68c21d2"


def _damaged_store(tmp_path, page: int):
    db = tmp_path / "latch.db"
    _load_commands()
    assert CliRunner().invoke(cli, ["--db", str(db), "import", str(EXAMPLE)]).exit_code == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    assert con.execute("PRAGMA page_count").fetchone()[0] > page
    con.close()
    data = bytearray(db.read_bytes())
    data[page_size * (page - 1) : page_size * page] = b"\xde\xad\xbe\xef" * (page_size // 4)
    db.write_bytes(bytes(data))
    return db


# page 8: an events index (events_session_seq: page 10 until m012_events_source_ref_partial_index rebuilt the events
# table and its indexes); page 37: the first page of event rows (it was page 20 until migration
# m005_token_counts added its table's root page and the schema grew onto a second page, then page 22 until
# m008_group_projection added its tables' and indexes' root pages, then page 33 until m009_import_fingerprints
# added its table's and primary key's, then page 35 until m010_run_leases added its table's and primary key's)
@pytest.mark.parametrize("page", [8, 37])
def test_damaged_pages_are_a_one_line_error(tmp_path, page):
    db = _damaged_store(tmp_path, page)
    before = db.read_bytes()
    runner = CliRunner()
    failed = 0
    for args in (["sessions"], ["show", SID], ["state", SID], ["search", "rounding"], ["import", str(EXAMPLE)]):
        r = runner.invoke(cli, ["--db", str(db), *args])
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, repr(r.exception))
        if r.exit_code:
            failed += 1
            assert r.exit_code == 1, (args, r.output)
            # one error line, last (``show`` has printed the session header read before the damaged page)
            assert r.output.strip().splitlines()[-1] == (
                f"Error: the Latch store at {db} is damaged (database disk image is malformed); run `latch doctor`"
            )
            assert "Traceback" not in r.output and r.output.count("Error") == 1, (args, r.output)
    assert failed >= 3  # the damaged page holds events every reader needs
    assert db.read_bytes() == before
    doctor = runner.invoke(cli, ["--db", str(db), "doctor", "--json"])
    assert doctor.exit_code == 1
    import json

    info = json.loads(doctor.output)
    assert info["store_error"] is None and info["store_problems"]


def test_damaged_fts_index_is_found_by_doctor(tmp_path):
    db = _damaged_store(
        tmp_path, 43
    )  # the last pages of this store hold the FTS5 index (28 before m008, 41 before m010)
    r = CliRunner().invoke(cli, ["--db", str(db), "search", "rounding"])
    assert r.exit_code == 1 and "is damaged (" in r.output and "Traceback" not in r.output
    with EventStore(db) as s:
        assert s.quick_check() != []


def test_intact_store_passes_doctor(tmp_path):
    db = tmp_path / "latch.db"
    _load_commands()
    assert CliRunner().invoke(cli, ["--db", str(db), "import", str(EXAMPLE)]).exit_code == 0
    r = CliRunner().invoke(cli, ["--db", str(db), "doctor", "--json"])
    assert r.exit_code == 0, r.output
    import json

    assert json.loads(r.output)["store_problems"] == []
