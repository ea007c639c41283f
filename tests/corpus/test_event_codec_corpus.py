"""Every event of every corpus session encodes to the generic canonical text and decodes to the generic event
(tests/invariants/test_event_codec_parity.py holds the two paths equal on generated events)."""

from __future__ import annotations

import json

import pytest
from corpus_support import corpus_items, item_id, parse_item, store_parsed

from latch import events as latch_events
from latch.events import EVENT_KINDS, canonical_json, canonical_payload, decode_event
from latch.store import EventStore, fts
from latch.store.event_store import encode_events

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("item", corpus_items(), ids=item_id)
def test_corpus_events_encode_and_decode_as_the_generic_path(item, corpus_dir):
    parsed = parse_item(item)
    events = [p.event for p in parsed.events]
    texts = [canonical_payload(e) for e in events]
    assert texts == [canonical_json(e.to_payload()) for e in events]
    for event, text in zip(events, texts, strict=True):
        data = json.loads(text)
        reference = EVENT_KINDS[event.KIND].from_payload({k: v for k, v in data.items() if k != "kind"})
        assert decode_event(event.KIND, text) == reference
    with EventStore(":memory:") as store:
        sid = store_parsed(store, parsed)
        stored = list(store.events(sid))
        payloads = store._rows("SELECT payload FROM events WHERE session_id = ? ORDER BY seq", (sid,))
    assert [s.event for s in stored] == [decode_event(s.kind, p[0]) for s, p in zip(stored, payloads, strict=True)]
    assert {p[0] for p in payloads} <= set(texts)  # what the store keeps is the text written here


@pytest.mark.parametrize("item", corpus_items(), ids=item_id)
def test_corpus_rows_are_the_pure_python_rows(item, corpus_dir, monkeypatch):
    """The rows an append writes (payload text, FTS5 text) are the same with the native writers as with the
    pure-Python references (``LATCH_IMPL=python``'s)."""
    events = [p.event for p in parse_item(item).events]
    rows = encode_events(events).rows
    monkeypatch.setattr(latch_events, "_fields_text", latch_events._fields_text_py)
    monkeypatch.setattr(latch_events, "_readable_flat", None)
    fresh = [p.event for p in parse_item(item).events]  # not yet encoded: no parsed arguments kept
    assert encode_events(fresh, index=fts._prepare_text_py).rows == rows
