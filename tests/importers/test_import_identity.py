"""Session identity: a session is its format's own id, its source path and its first records.

The failing inputs, generated in ``tmp_path`` from corpus files: another Claude Code transcript that reuses a
stored ``sessionId`` (it was merged into the stored session, appended after its last line, or refused with a
confusing "comes after" message), and the same transcript saved with a UTF-8 BOM, CRLF line endings, UTF-16
with a BOM, trailing whitespace (added or trimmed) or re-indented JSON (OpenHands and SWE-agent each became a new session of the
same events; SWE-agent in UTF-16 was "unrecognized"; Aider with trailing whitespace "read differently").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_support import edit_first_prompt

from latch.host.ingest import import_file
from latch.importers import TranscriptError, parse_file
from latch.store import EventStore

pytestmark = pytest.mark.corpus

LATCH = [sys.executable, "-c", "from latch.cli import main; main()"]
BASTION = "claude-code/bastion_claude-session.jsonl"
RELIABILITY = "claude-code/claude-reliability_python-to-rust-port.jsonl"


def _session_id(path: Path) -> str:
    return next(
        json.loads(ln)["sessionId"] for ln in path.read_text(encoding="utf-8").splitlines() if '"sessionId"' in ln
    )


def _reusing_id(corpus_dir: Path, dest: Path, *, shift: int = 0) -> Path:
    """RELIABILITY with BASTION's ``sessionId``; ``shift`` blank lines first move its line refs past BASTION's."""
    sid = _session_id(corpus_dir / BASTION)
    out = []
    for ln in (corpus_dir / RELIABILITY).read_text(encoding="utf-8").splitlines():
        obj = json.loads(ln)
        if "sessionId" in obj:
            obj["sessionId"] = sid
        out.append(json.dumps(obj, ensure_ascii=False))
    dest.write_text("\n" * shift + "\n".join(out) + "\n", encoding="utf-8")
    return dest


def _snapshot(store: EventStore):
    return [(s.id, s.external_key, s.events) for s in store.sessions()], store.max_seq()


@pytest.mark.parametrize("shift", [0, 60], ids=["refs-collide", "refs-after-the-stored-ones"])
def test_a_different_file_reusing_an_id_is_refused(corpus_dir, tmp_path, shift):
    """``shift=60``: every line ref of the other file comes after the stored session's 47 lines, so the old
    import appended it to that session; ``shift=0``: its refs collide, and the old import said "line 5:
    already imported, but it now comes after line 2"."""
    store = EventStore(tmp_path / "s.db")
    sid, _, _ = import_file(store, corpus_dir / BASTION)
    other = _reusing_id(corpus_dir, tmp_path / "other.jsonl", shift=shift)
    before = _snapshot(store)
    with pytest.raises(TranscriptError) as info:
        import_file(store, other)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{other}: a different transcript with the id of session {sid} ")
    assert f"imported from {(corpus_dir / BASTION).resolve()}: its first records differ" in message
    assert "--as-new" in message
    assert _snapshot(store) == before  # never appended


def test_as_new_imports_it_as_its_own_session(corpus_dir, tmp_path):
    store = EventStore(tmp_path / "s.db")
    sid, _, _ = import_file(store, corpus_dir / BASTION)
    stored = store.count_events(sid)
    other = _reusing_id(corpus_dir, tmp_path / "other.jsonl", shift=60)
    new_sid, parsed, seqs = import_file(store, other, as_new=True)
    alone = EventStore(tmp_path / "alone.db")
    _, _, alone_seqs = import_file(alone, other)
    assert new_sid != sid and store.count_events(sid) == stored
    assert len(seqs) == len(alone_seqs) == store.count_events(new_sid) > 0
    assert parsed.external_key.startswith(f"claude-code:{_session_id(corpus_dir / BASTION)}#")
    # the file is now known by its own identity: importing it again, with or without --as-new, adds nothing
    assert import_file(store, other)[0] == new_sid and import_file(store, other)[2] == []
    assert import_file(store, other, as_new=True)[2] == []
    # and --as-new on the original transcript changes nothing
    assert import_file(store, corpus_dir / BASTION, as_new=True)[:3:2] == (sid, [])
    assert len(store.sessions()) == 2


def test_the_cli_refuses_in_one_line_and_takes_as_new(corpus_dir, tmp_path):
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "LATCH_DB": str(tmp_path / "l.db"), "COLUMNS": "300"}
    other = _reusing_id(corpus_dir, tmp_path / "other.jsonl", shift=60)
    assert subprocess.run([*LATCH, "import", str(corpus_dir / BASTION)], env=env, capture_output=True).returncode == 0
    refused = subprocess.run([*LATCH, "import", str(other)], env=env, capture_output=True, text=True)
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"Error: {other}: a different transcript") and str(corpus_dir / BASTION) in line
    done = subprocess.run([*LATCH, "import", "--as-new", str(other)], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "new events" in done.stdout and ", 0 new events" not in done.stdout, done.stdout
    listed = json.loads(subprocess.run([*LATCH, "sessions", "--json"], env=env, capture_output=True, text=True).stdout)
    assert sorted(s["source"] for s in listed) == sorted([str((corpus_dir / BASTION).resolve()), str(other.resolve())])


def _variants(data: bytes, whole_json: bool, markdown: bool) -> dict[str, bytes]:
    text = data.decode("utf-8")
    out = {
        "bom": b"\xef\xbb\xbf" + data,
        "crlf": text.replace("\n", "\r\n").encode("utf-8"),
        "utf16": text.encode("utf-16"),  # with its BOM
        "utf16-crlf": text.replace("\n", "\r\n").encode("utf-16"),
        "trailing-spaces": "\n".join(line + "  " for line in text.split("\n")).encode("utf-8"),
    }
    if not markdown:  # Aider's markdown marks its prompt and output lines with two trailing spaces: part of the format
        out["trailing-tabs"] = "\n".join(line + " \t" for line in text.split("\n")).encode("utf-8")
        out["trimmed"] = "\n".join(line.rstrip() for line in text.split("\n")).encode("utf-8")
    if whole_json:
        out["reindented"] = json.dumps(json.loads(text), indent=3, ensure_ascii=False).encode("utf-8")
    return out


# (file, whole JSON document). OpenHands and SWE-agent have no id of their own (a content hash): before, every
# re-encoding was a new session of the same events.
ENCODED = [
    ("openhands/basic_gui_mode.json", True),
    ("swe-agent/ctf_i_got_id_demo.traj", True),
    ("gemini-cli/entire_session.json", True),
    (BASTION, False),
    ("codex/edgerunner_codex-session.jsonl", False),
    ("aider/mozgoslav.aider.chat.history.md", False),
    ("copilot-cli/lantern_events.jsonl", False),
]


@pytest.mark.parametrize("name,whole_json", ENCODED, ids=[n.split("/")[0] for n, _ in ENCODED])
def test_a_re_encoded_copy_is_the_same_session(corpus_dir, tmp_path, name, whole_json):
    src = corpus_dir / name
    store = EventStore(tmp_path / "s.db")
    sid, _, first = import_file(store, src, final=True)
    assert first
    before = _snapshot(store)
    for label, data in _variants(src.read_bytes(), whole_json, name.endswith(".md")).items():
        copy = tmp_path / f"{label}-{src.name}"
        copy.write_bytes(data)
        got, _, seqs = import_file(store, copy, final=True)
        assert (label, got, seqs) == (label, sid, [])
        assert _snapshot(store) == before


def test_swe_agent_in_utf16_is_recognized(corpus_dir, tmp_path):
    src = corpus_dir / "swe-agent/ctf_i_got_id_demo.traj"
    copy = tmp_path / "utf16.traj"
    copy.write_bytes(src.read_text(encoding="utf-8").encode("utf-16"))
    assert [pe.event for pe in parse_file(copy).events] == [pe.event for pe in parse_file(src).events]


def test_an_edit_in_place_is_still_refused_as_an_edit(corpus_dir, tmp_path):
    """The same path: a changed first record is the file edited ("reads differently"), not another transcript."""
    live = tmp_path / "bastion.jsonl"
    live.write_bytes((corpus_dir / BASTION).read_bytes())
    store = EventStore(tmp_path / "s.db")
    import_file(store, live)
    k = edit_first_prompt(live)
    with pytest.raises(TranscriptError, match=rf":line {k + 1}: reads differently from when it was imported"):
        import_file(store, live)
