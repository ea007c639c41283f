"""Per-event encode and decode cost of the store, the fast path against the generic one, in one run.

The events are ``latch stress``'s scenario (5,000 events, screenshots attached to some user turns).

* ``test_encode_payload``: the store's payload text, :func:`~latch.events.canonical_payload` against
  ``canonical_json(event.to_payload())`` (the same text, checked); ``ratio_to_generic`` and microseconds per event.
* ``test_encode_row``: the whole per-event Python work of an append (:func:`~latch.store.event_store.encode_events`:
  payload, searchable text, FTS5 preparation) against the same row built the generic way.
* ``test_encode_payload_native`` and ``test_prepare_text_native``: the native module's writer of the payload text
  (``CanonicalFields``) and FTS5 preparation (``fts_prepare_text``) against their pure-Python references (what
  ``LATCH_IMPL=python`` runs; the same texts, checked); skipped without the native module.
* ``test_decode_payload``: :func:`~latch.events.decode_event` of the stored text against ``json.loads`` and the
  generic field-by-field ``cls(**kwargs)`` (equal events, checked).
* ``test_read_cold``: a store object's first read of the events (SQLite, decoding, the decoded-event cache) against
  the same rows decoded and cached the generic way.

Each pair runs in turn, 7 rounds, and the ratio is of the best CPU times (``ratio_to_generic``: below 1 is faster).
Measured on the loaded 2-core box: the payload 1.68 us per event natively against 6.5 for the reference writer
(0.26), the FTS5 preparation 3.0 against 58.4 (0.05); the whole row 7.5 us per event (14.9 with the reference payload
writer and the json module's parse of a call's arguments, the run before, same box).
Run: ``python -m pytest benchmarks/test_bench_event_codec.py --benchmark-only``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from latch import events
from latch.bench.scenario import ScenarioModel
from latch.events import EVENT_KINDS, MediaRef, canonical_json, canonical_payload, decode_event
from latch.events import _fields as fields_of
from latch.store import EventStore, fts
from latch.store.decoded import DecodedEvents
from latch.store.event_store import StoredEvent, encode_events
from latch.store.fts import prepare_text

N = 5000
IMAGES = tuple(MediaRef(f"{i:064x}", "image/png", 1000 + i, 640, 480) for i in range(3))
EVENTS = list(itertools.islice(ScenarioModel(3, workspace="/work/shop", images=IMAGES).events(), N))


def generic_payload(event: Any) -> str:
    return canonical_json(event.to_payload())


def generic_from_plain(cls: type, data: Any) -> Any:
    kwargs = {}
    for name, sub in fields_of(cls) or ():
        if name not in data:
            continue
        value = data[name]
        if sub is not None and value is not None:
            value = (
                tuple(generic_from_plain(sub, v) for v in value)
                if isinstance(value, list)
                else generic_from_plain(sub, value)
            )
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def generic_decode(kind: str, text: str) -> Any:
    data = json.loads(text)
    return generic_from_plain(EVENT_KINDS[kind], {k: v for k, v in data.items() if k != "kind"})


def generic_rows(events: list[Any]) -> list[tuple[Any, ...]]:
    rows = []
    for ev in events:
        text = ev.searchable_text()
        rows.append((ev.KIND, generic_payload(ev), None, None, prepare_text(text) if text else None))
    return rows


class GenericDecodedEvents(DecodedEvents[Any]):
    """The decoded-event cache with its generic row key (every value of the row looked at in a generator)."""

    def get(self, row: Any, decode: Callable[[Any], Any]) -> Any:
        key = tuple(x if not isinstance(x, str) or len(x) <= 256 else (len(x), hash(x)) for x in row)
        hit = self._by_seq.get(key[0])
        if hit is not None and hit[0] == key:
            return hit[1]
        value = decode(row)
        with self._lock:
            self._by_seq[key[0]] = (key, value)
            while len(self._by_seq) > self.capacity:
                self._by_seq.popitem(last=False)
        return value


def generic_stored(r: Any) -> StoredEvent:
    return StoredEvent(seq=r[0], session_id=r[1], kind=r[2], event=generic_decode(r[2], r[3]), source_ref=r[4], ts=r[5])


def _in_turn(benchmark: Any, generic: Callable[[], Any], fast: Callable[[], Any], per: int) -> None:
    cpu: dict[str, list[float]] = {"generic": [], "fast": []}
    for _ in range(1 if benchmark.disabled else 7):  # in turn, so both see the same machine state
        for name, fn in (("generic", generic), ("fast", fast)):
            c = time.process_time()
            fn()
            cpu[name].append(time.process_time() - c)
    g, f = min(cpu["generic"]), min(cpu["fast"])
    benchmark.extra_info.update(
        events=per,
        generic_us_per_event=round(1e6 * g / per, 2),
        us_per_event=round(1e6 * f / per, 2),
        ratio_to_generic=round(f / g, 3) if g else None,
    )
    benchmark.pedantic(fast, rounds=1, iterations=1)


def test_encode_payload(benchmark):
    assert [canonical_payload(e) for e in EVENTS] == [generic_payload(e) for e in EVENTS]
    _in_turn(
        benchmark,
        lambda: [generic_payload(e) for e in EVENTS],
        lambda: [canonical_payload(e) for e in EVENTS],
        N,
    )


def test_encode_payload_native(benchmark):
    native = events._fields_backend()
    if native is events._fields_text_py:
        pytest.skip("the native module is not built, or LATCH_IMPL=python")
    pairs = [(e, events._writer(type(e))) for e in EVENTS]
    assert [native(e, w) for e, w in pairs] == [events._fields_text_py(e, w) for e, w in pairs]
    _in_turn(
        benchmark,
        lambda: [events._fields_text_py(e, w) for e, w in pairs],
        lambda: [native(e, w) for e, w in pairs],
        N,
    )


def test_prepare_text_native(benchmark):
    native = fts._backend()
    if native is fts._prepare_text_py:
        pytest.skip("the native module is not built, or LATCH_IMPL=python")
    texts = [t for t in (e.searchable_text() for e in EVENTS) if t]
    assert [native(t) for t in texts] == [fts._prepare_text_py(t) for t in texts]
    _in_turn(
        benchmark,
        lambda: [fts._prepare_text_py(t) for t in texts],
        lambda: [native(t) for t in texts],
        N,
    )
    benchmark.extra_info["texts"] = len(texts)


def test_encode_row(benchmark):
    assert encode_events(EVENTS).rows == generic_rows(EVENTS)
    _in_turn(benchmark, lambda: generic_rows(EVENTS), lambda: encode_events(EVENTS), N)


def test_decode_payload(benchmark):
    texts = [(e.KIND, generic_payload(e)) for e in EVENTS]
    decoded = [decode_event(k, t) for k, t in texts]
    assert decoded == [generic_decode(k, t) for k, t in texts] == EVENTS
    _in_turn(
        benchmark,
        lambda: [generic_decode(k, t) for k, t in texts],
        lambda: [decode_event(k, t) for k, t in texts],
        N,
    )


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("codec") / "s.db"
    with EventStore(path) as store:
        sid = store.create_session(external_key="bench")
        store.append(sid, EVENTS)
    return path, sid


def test_read_cold(benchmark, stored):
    path, sid = stored

    def fast() -> list[StoredEvent]:
        with EventStore(path) as store:
            return list(store.events(sid))

    def generic() -> list[StoredEvent]:
        with EventStore(path) as store:
            cache = GenericDecodedEvents()
            rows = store._rows(
                "SELECT seq, session_id, kind, payload, source_ref, ts FROM events WHERE seq > ? AND session_id = ? "
                "ORDER BY seq",
                (0, sid),
            )
            return [cache.get(r, generic_stored) for r in rows]

    assert fast() == generic() and [s.event for s in fast()] == EVENTS
    _in_turn(benchmark, generic, fast, N)
