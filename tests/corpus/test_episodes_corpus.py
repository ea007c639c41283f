"""Incremental episode building equals a full rebuild at every prefix of every corpus file (spec: "Episodes")."""

from __future__ import annotations

import hashlib

import pytest
from corpus_support import corpus_items, item_id, parse_item, store_parsed

from latch.engine.episodes import EpisodeIndex
from latch.events import canonical_bytes
from latch.store import EventStore

pytestmark = pytest.mark.corpus


def corpus_events(item):
    """The corpus session (a file, or one session of a container file) parsed by its folder's importer into an
    in-memory store; skips formats without an importer yet."""
    parsed = parse_item(item)
    store = EventStore(":memory:")
    sid = store_parsed(store, parsed)
    events = list(store.events(sid))
    store.close()
    return events


def episodes_digest(index: EpisodeIndex) -> str:
    rows = [
        [
            e.number,
            e.part,
            e.first_seq,
            e.last_seq,
            e.events,
            e.topic,
            list(e.files),
            list(e.tools),
            e.markers,
            list(e.term_ids),
            e.closed,
        ]
        for e in index.episodes
    ]
    return hashlib.sha256(canonical_bytes([index.watermark, rows])).hexdigest()


@pytest.mark.parametrize("item", corpus_items(), ids=item_id)
def test_incremental_equals_rebuild_at_every_prefix(item, corpus_dir):
    path = item.path
    events = corpus_events(item)
    assert events, "the importer produced no events"
    incremental = EpisodeIndex()
    for i in range(1, len(events) + 1):
        assert incremental.extend(events[i - 1 : i]) == 1
        full = EpisodeIndex()
        full.rebuild(events[:i])
        assert episodes_digest(incremental) == episodes_digest(full), f"{path.name}: prefix of {i} events"
    episodes = incremental.episodes
    # episodes tile the session: contiguous, in order, every event in exactly one
    assert episodes[0].first_seq == events[0].seq and episodes[-1].last_seq == events[-1].seq
    assert all(a.last_seq < b.first_seq for a, b in zip(episodes, episodes[1:], strict=False))
    assert sum(e.events for e in episodes) == len(events)
    assert [e.number for e in episodes] == list(range(1, len(episodes) + 1))


@pytest.mark.parametrize("item", corpus_items(), ids=item_id)
def test_native_text_scans_build_the_reference_episodes(item, corpus_dir):
    """The index over a corpus session is the same with the native text scans (path runs, command words, term
    counts) and with their pure-Python references (the plain patterns)."""
    from latch import hotpaths
    from latch.engine import episodes as E
    from latch.hotpaths import _py

    events = corpus_events(item)
    E._RUN_PATHS.clear()
    native = EpisodeIndex()
    native.extend(events)
    with pytest.MonkeyPatch.context() as m:
        for name in ("ascii_path_runs", "ascii_command_classes", "TermCounts"):
            m.setattr(hotpaths, name, getattr(_py, name))
        E._RUN_PATHS.clear()
        reference = EpisodeIndex()
        reference.extend(events)
    assert episodes_digest(native) == episodes_digest(reference)
    assert native._files == reference._files
