"""Checks shared by the importer tests: idempotent re-import and clean rejection of malformed files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from latch.importers import TranscriptError, import_file


def snapshot(store) -> tuple[int, list[tuple[str, int]]]:
    """(event count, [(session id, events)]): what a failed import must leave unchanged."""
    return store.count_events(), [(s.id, s.events) for s in store.sessions()]


def assert_reimport_adds_nothing(store, path: Path) -> tuple[str, object]:
    """Import ``path`` twice: same session id, no new seqs, one session, same event count."""
    sid, parsed, seqs = import_file(store, path)
    assert len(seqs) == len(parsed.settled_events) > 0  # the open tail waits for the file to grow
    before = snapshot(store)
    sid2, _, seqs2 = import_file(store, path)
    assert (sid2, seqs2) == (sid, [])
    assert snapshot(store) == before
    assert [s.id for s in store.sessions()] == [sid]
    return sid, parsed


def assert_rejected(store, path: Path, fmt: str, reason: str, location: str | None) -> TranscriptError:
    """Importing ``path`` as ``fmt`` raises a TranscriptError naming the file, ``location`` and ``reason``.

    ``location`` and ``reason`` are regular expressions (``location=None``: the
    error has no line/record, e.g. an empty file). The store is unchanged.
    """
    before = snapshot(store)
    with pytest.raises(TranscriptError) as info:
        import_file(store, path, fmt)
    err = info.value
    assert err.path == str(path)
    assert str(err).startswith(str(path))
    if location is None:
        assert err.location is None
    else:
        assert err.location and re.fullmatch(location, err.location), err.location
    assert re.search(reason, err.reason), err.reason
    assert snapshot(store) == before
    return err


BINARY_JUNK = bytes(range(256)) * 4  # NUL bytes and invalid UTF-8
