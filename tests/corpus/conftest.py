"""Fixtures for the corpus tests."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
from corpus_support import corpus_items, import_item, item_id

from latch.importers import builtin_importers
from latch.store import EventStore


class CorpusSession(NamedTuple):
    path: Path
    store: EventStore
    sid: str


@pytest.fixture(params=corpus_items(), ids=item_id)
def corpus_session(request, corpus_dir):
    """Each corpus session (each file, each session of a container file: ``corpus_support.corpus_items``)
    imported by its folder's importer into an in-memory store (skips a format in
    ``corpus_support.NO_IMPORTER_YET``); the store closes after the test. ``path`` is the file."""
    item = request.param
    importers = builtin_importers()
    with EventStore(":memory:") as store:
        # corpus files are finished sessions, taken whole (a compaction agent's file is one request and its answer)
        sid = import_item(store, item, importers)
        yield CorpusSession(item.path, store, sid)
