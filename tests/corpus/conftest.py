"""Fixtures for the corpus tests."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from corpus_support import corpus_files
from latch.importers import builtin_importers, import_file
from latch.store import EventStore


class CorpusSession(NamedTuple):
    path: Path
    store: EventStore
    sid: str


@pytest.fixture(params=corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def corpus_session(request, corpus_dir):
    """Each corpus file imported by its folder's importer into an in-memory store (skips a format with no
    importer yet); the store closes after the test."""
    path = request.param
    importers = builtin_importers()
    fmt = path.parent.name
    if fmt not in {c.PLUGIN_NAME for c in importers}:
        pytest.skip(f"no {fmt} importer yet")
    with EventStore(":memory:") as store:
        sid, _, _ = import_file(store, path, format=fmt, importers=importers)
        yield CorpusSession(path, store, sid)
