"""Fixtures for the corpus tests."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from corpus_support import corpus_files, corpus_id, require_importer
from latch.importers import builtin_importers, import_file
from latch.store import EventStore


class CorpusSession(NamedTuple):
    path: Path
    store: EventStore
    sid: str


@pytest.fixture(params=corpus_files(), ids=corpus_id)
def corpus_session(request, corpus_dir):
    """Each corpus file imported by its folder's importer into an in-memory store (skips a format in
    ``corpus_support.NO_IMPORTER_YET``); the store closes after the test."""
    path = request.param
    importers = builtin_importers()
    fmt = require_importer(path)
    with EventStore(":memory:") as store:
        # corpus files are finished sessions, taken whole (a compaction agent's file is one request and its answer)
        sid, _, _ = import_file(store, path, format=fmt, importers=importers, final=True)
        yield CorpusSession(path, store, sid)
