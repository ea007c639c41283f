"""Shared fixtures: the real corpus (../shared/corpus), a temporary store, and the llama.cpp server
(``llama_server``, ``llama_server_factory``: tests/llama_support.py)."""

from __future__ import annotations

import pytest

from corpus_support import CORPUS, REPO, corpus_available, corpus_files, require_corpus  # noqa: F401
from llama_support import llama_server, llama_server_factory  # noqa: F401 (session fixtures)


@pytest.fixture
def corpus_dir():
    return require_corpus()


@pytest.fixture
def store(tmp_path):
    from latch.store import EventStore

    s = EventStore(tmp_path / "latch.db")
    yield s
    s.close()


def pytest_report_header(config):
    try:
        from latch import hotpaths
    except Exception as exc:  # pragma: no cover
        return [f"latch hot-path backend: unavailable ({exc})"]
    return [f"latch hot-path backend: {hotpaths.BACKEND} (LATCH_IMPL={hotpaths.IMPL})"]
