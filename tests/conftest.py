"""Shared fixtures: the real corpus (../shared/corpus), a temporary store, and the llama.cpp server
(``llama_server``, ``llama_server_factory``: tests/llama_support.py)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from corpus_support import CORPUS, REPO, corpus_available, corpus_files, require_corpus  # noqa: F401
from llama_support import llama_server, llama_server_factory  # noqa: F401 (session fixtures)
from pg_support import pg_cluster, pg_url  # noqa: F401 (session fixtures: a temporary PostgreSQL cluster)
from store_backends import backend_store  # noqa: F401 (a store on SQLite, and on PostgreSQL marked slow)

_HERMETIC_HOME = Path(tempfile.mkdtemp(prefix="latch-tests-"))
_USER_SETTINGS = (
    "LATCH_HOME",
    "LATCH_DB",
    "LATCH_DISABLE_PLUGINS",
    "LATCH_LOAD_PLUGINS",
    "LATCH_TRACE_PLUGINS",
    "LATCH_MAX_TRANSCRIPT_BYTES",
    "LATCH_WEB_TOKEN",
    "LATCH_TOOL_ENV_PASS",
)


def pytest_configure(config):
    """The suite never reads or writes the user's own Latch folders: without this, a CLI test that sets no
    LATCH_HOME kept its price cache in ~/.local/share/latch, and a user's config.toml changed what tests saw.
    platformdirs' data and config folders point into one temporary folder for the run (subprocesses inherit it);
    the user's own Latch settings from the caller's shell (store, home, plugin selection, limits, web token, tool
    environment) are dropped (tests that need one set their own); LATCH_IMPL (the hot-path backend) is kept."""
    for name in _USER_SETTINGS:
        os.environ.pop(name, None)
    os.environ["XDG_DATA_HOME"] = str(_HERMETIC_HOME / "data")
    os.environ["XDG_CONFIG_HOME"] = str(_HERMETIC_HOME / "config")
    # a suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and so would
    # every `latch` process the tests start: the Ctrl-C tests need it delivered as a real terminal delivers it
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """The fast tier (``-m "not slow and not stress"``) is the unit, parity and invariant tests: besides the modules
    marked ``slow`` (real processes, servers, browsers), every corpus test and every benchmark is slow too."""
    for item in items:
        path = Path(str(item.fspath))
        if "corpus" in item.keywords or "benchmarks" in path.parts or path.parent.name == "corpus":
            item.add_marker(pytest.mark.slow)


def pytest_unconfigure(config):
    """The CLI's cache that a process writes at exit (prices) is not written into the folder removed here."""
    pricing = sys.modules.get("latch.accounting.pricing")
    if pricing is not None:
        pricing.use_price_cache(None)
    shutil.rmtree(_HERMETIC_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_kept_token_counts():
    """A CLI command run in this process keeps exact token counts, what is installed and the parsed model table in
    its LATCH_HOME (``latch.count_cache``, ``latch.installed``, ``latch.config``): the next test starts without them."""
    yield
    from latch import config, count_cache, installed

    count_cache.use_count_cache(None)
    count_cache._fresh.clear()
    installed.use_installed_cache(None)
    config.use_model_table_cache(None)


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
