"""A re-import of the same bytes is not parsed again (the Codex replay under 2 s), and nothing else changes:
:func:`latch.host.ingest.imported_session_ids` returns what :func:`import_all` returns, with the identity rules of
session identity (``tests/importers/test_import_identity.py``) and forgotten sessions intact.

Real corpus files copied into ``tmp_path``; a parse is detected by wrapping the host's real ``parse_all_file``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus_support import edit_first_prompt

from latch.cli import _load_commands, cli
from latch.host import ingest
from latch.host.ingest import SessionForgotten, import_all, imported_session_ids
from latch.importers import TranscriptError
from latch.kernel.tombstones import forget_session
from latch.store import EventStore

pytestmark = pytest.mark.corpus

BASTION = "claude-code/bastion_claude-session.jsonl"


@pytest.fixture
def parses(monkeypatch):
    """The paths the host parsed, in order (the real parser runs)."""
    seen: list[Path] = []
    real = ingest.parse_all_file

    def counting(path, *args, **kwargs):
        seen.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(ingest, "parse_all_file", counting)
    return seen


@pytest.fixture
def copy(corpus_dir, tmp_path):
    dest = tmp_path / "bastion.jsonl"
    dest.write_bytes((corpus_dir / BASTION).read_bytes())
    return dest


def test_the_same_bytes_again_are_not_parsed(copy, tmp_path, parses):
    store = EventStore(tmp_path / "s.db")
    first = imported_session_ids(store, copy, final=True)
    events = store.max_seq()
    assert parses == [copy] and len(first) == 1
    assert imported_session_ids(store, copy, final=True) == first  # from the fingerprint
    assert parses == [copy] and store.max_seq() == events
    # what import_all (which always parses) says about the same file: the same session, nothing new
    again = import_all(store, copy, final=True)
    assert [sid for sid, _, _ in again] == first and again[0][2] == []


def test_other_options_or_a_grown_file_parse_again(copy, tmp_path, parses):
    store = EventStore(tmp_path / "s.db")
    sid = imported_session_ids(store, copy, final=True)[0]
    assert imported_session_ids(store, copy, final=False) == [sid] and len(parses) == 2  # live: another option
    assert imported_session_ids(store, copy, "claude-code", final=True) == [sid] and len(parses) == 3
    before = store.session(sid).events
    lines = copy.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    grown = {
        **last,
        "uuid": "0f0f0f0f-0000-4000-8000-000000000001",
        "parentUuid": last.get("uuid"),
        "type": "user",
        "message": {"role": "user", "content": "one more instruction"},
    }
    copy.write_text("\n".join([*lines, json.dumps(grown)]) + "\n", encoding="utf-8")
    assert imported_session_ids(store, copy, final=True) == [sid] and len(parses) == 4
    assert store.session(sid).events == before + 1  # the new line's event, appended


def test_an_edit_in_place_is_still_refused(copy, tmp_path):
    store = EventStore(tmp_path / "s.db")
    imported_session_ids(store, copy, final=True)
    k = edit_first_prompt(copy)
    with pytest.raises(TranscriptError, match=rf":line {k + 1}: reads differently from when it was imported"):
        imported_session_ids(store, copy, final=True)


def test_a_copy_elsewhere_parses_and_is_the_same_session(copy, tmp_path, parses):
    store = EventStore(tmp_path / "s.db")
    sid = imported_session_ids(store, copy, final=True)[0]
    moved = tmp_path / "elsewhere" / "bastion.jsonl"
    moved.parent.mkdir()
    moved.write_bytes(copy.read_bytes().replace(b"\n", b"\r\n"))  # re-encoded: the same session
    assert imported_session_ids(store, moved, final=True) == [sid] and parses == [copy, moved]
    assert imported_session_ids(store, moved, final=True) == [sid] and parses == [copy, moved]


def test_a_forgotten_session_is_still_refused_or_listed(copy, tmp_path):
    store = EventStore(tmp_path / "s.db")
    sid = imported_session_ids(store, copy, final=True)[0]
    forget_session(store, sid)
    with pytest.raises(SessionForgotten) as exc:
        imported_session_ids(store, copy, final=True)
    assert exc.value.session_id == sid
    forgotten: list[str] = []
    assert imported_session_ids(store, copy, final=True, forgotten=forgotten) == [] and forgotten == [sid]


def test_a_file_reading_beside_itself_or_a_database_is_never_fingerprinted(corpus_dir, tmp_path, parses):
    store = EventStore(tmp_path / "s.db")
    goose = tmp_path / "sessions.db"
    goose.write_bytes((corpus_dir / "goose" / "lantern_sessions.db").read_bytes())
    first = imported_session_ids(store, goose, final=True)
    assert imported_session_ids(store, goose, final=True) == first and parses == [goose, goose]
    assert store.import_fingerprint(str(goose.resolve()), ingest._fingerprint_options(None, True)) is None


def test_replay_twice_parses_once_and_prints_the_same(copy, tmp_path, parses):
    _load_commands()
    db = tmp_path / "cli.db"
    env = {"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": None}

    def replay(*extra: str) -> str:
        res = CliRunner().invoke(
            cli,
            ["--db", str(db), "replay", str(copy), "--engine", "keep-last-units", *extra],
            env=env,
            catch_exceptions=False,
        )
        assert res.exit_code == 0, res.output
        return res.output

    first, second = replay(), replay()
    assert parses == [copy] and first == second
    docs = [json.loads(replay("--json")) for _ in range(2)]
    for doc in docs:
        doc.pop("stream")
    assert docs[0] == docs[1] and parses == [copy]
    os.utime(copy)  # touched, same bytes: still no parse
    assert replay() == first and parses == [copy]
