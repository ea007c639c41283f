"""Stores written by the previous release keep working.

The store is built by the code of commit ``5b5308c`` (before ``events.canonical_arguments``: OpenHands,
SWE-agent and Aider tool-call arguments were stored as unsorted ``json.dumps(..., ensure_ascii=False)``),
checked out with ``git archive`` into a temporary folder and run in a subprocess with ``PYTHONPATH`` on its
``src`` and ``LATCH_IMPL=python`` (the archive has no built extension). Every importable corpus file is
imported there (``final=True``), then imported again into the same store by the current code: nothing is
added and no event "reads differently" (:func:`latch.events.same_event` reads arguments by value).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
from corpus_support import REPO, corpus_name, importable_corpus_files, require_corpus

from latch.events import AssistantMessage, same_event
from latch.host.ingest import import_file, parse_file
from latch.store import EventStore

OLD_COMMIT = "5b5308c"

_BUILD = r"""
import json, sys
# an editable install of the current tree puts a finder on sys.meta_path that wins over PYTHONPATH
sys.meta_path = [f for f in sys.meta_path if not type(f).__module__.lstrip("_").startswith("editable")]
import latch
from latch.host.ingest import import_file
from latch.store import EventStore
assert latch.__file__.startswith(sys.argv[1]), latch.__file__
store = EventStore(sys.argv[2])
counts = {}
from latch.importers.base import TranscriptError
for path in sys.argv[3:]:
    try:
        sid, parsed, seqs = import_file(store, path, final=True)
    except TranscriptError:  # a format the old release had no importer for: not part of its stores
        continue
    counts[path] = len(seqs)
store.close()
print(json.dumps(counts))
"""


def _old_source(tmp_path) -> str:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    probe = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{OLD_COMMIT}^{{commit}}"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"commit {OLD_COMMIT} is not in this repository's history")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", OLD_COMMIT, "src"], capture_output=True, check=True)
    root = tmp_path / "old"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(root, filter="data")
    return str(root / "src")


@pytest.fixture(scope="module")
def old_store(tmp_path_factory):
    require_corpus()
    tmp = tmp_path_factory.mktemp("compat")
    src = _old_source(tmp)
    files = [str(p) for p in importable_corpus_files()]
    db = str(tmp / "old.db")
    # built-ins only: the installed plugins belong to the current release
    env = {**os.environ, "PYTHONPATH": src, "LATCH_IMPL": "python", "LATCH_LOAD_PLUGINS": ""}
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, src, db, *files], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert sum(counts.values()) > 0
    return db, files, counts


def test_reimport_into_an_old_store_adds_nothing(old_store):
    """Except for Aider: the old release stored a whole ``.aider.chat.history.md`` as one session; one aider
    run is one session now, so ``import_file`` (the file's last run) adds that run as a new session, all its
    events (``final``), and the old whole-file session is left as it was."""
    db, files, counts = old_store
    store = EventStore(db)
    try:
        added, expected, kept = {}, {}, {}
        for path in counts:  # the files the old release could import
            name = corpus_name_of(path)
            old_sessions = {s.id: s.events for s in store.sessions()}
            _, parsed, seqs = import_file(store, path, final=True)  # a TranscriptError here fails the test
            added[name] = len(seqs)
            expected[name] = len(parsed.events) if parsed.format == "aider" else 0
            kept[name] = {s.id: s.events for s in store.sessions() if s.id in old_sessions} == old_sessions
    finally:
        store.close()
    assert added == expected
    assert sum(n > 0 for n in expected.values()) == sum(name.startswith("aider/") for name in expected) > 0
    assert kept == dict.fromkeys(kept, True)
    assert len(added) == len(counts)


def test_the_old_store_holds_arguments_in_another_encoding(old_store):
    """The check above is not vacuous: some stored tool calls read equal only by value."""
    db, files, counts = old_store
    store = EventStore(db)
    by_value = {}
    try:
        for path in counts:
            parsed = parse_file(path, live=False)
            stored = {e.source_ref: e.event for e in store.events(store.session_id_for(parsed.external_key))}
            n = sum(
                1
                for pe in parsed.events
                if isinstance(pe.event, AssistantMessage)
                and (old := stored.get(pe.source_ref)) is not None
                and old != pe.event
                and same_event(old, pe.event)
            )
            if n:
                by_value[corpus_name_of(path)] = n
    finally:
        store.close()
    assert by_value, "no stored event differs from its re-parse only in its argument bytes"
    assert {name.split("/")[0] for name in by_value} <= {"openhands", "swe-agent", "aider"}


def corpus_name_of(path: str) -> str:
    from pathlib import Path

    return corpus_name(Path(path))
