"""The store object's decoded-event cache: an identical row gives back the event decoded before, anything else
decodes afresh, and the cache holds at most its capacity, whatever the history read."""

from __future__ import annotations

from latch.events import ToolResult, UserMessage
from latch.store import EventStore
from latch.store.decoded import DecodedEvents


def test_identical_row_reuses_the_decoded_value_and_a_changed_row_decodes_again():
    calls = []

    def decode(row):
        calls.append(row)
        return object()

    cache: DecodedEvents[object] = DecodedEvents(capacity=4)
    row = (7, "s1", "user_message", '{"text":"a"}', None, None)
    first = cache.get(row, decode)
    assert cache.get(tuple(row), decode) is first
    assert cache.get(list(row), decode) is first  # any sequence of the same values
    changed = cache.get((7, "s1", "user_message", '{"text":"b"}', None, None), decode)
    assert changed is not first and len(calls) == 2
    assert cache.get((7, "s2", "user_message", '{"text":"b"}', None, None), decode) is not changed
    long = '{"text":"' + "x" * 400 + '"}'
    kept = cache.get((8, "s1", "user_message", long, None, None), decode)
    assert cache.get((8, "s1", "user_message", long[:-3] + 'y"}', None, None), decode) is not kept


def test_capacity_bounds_the_cache():
    cache: DecodedEvents[int] = DecodedEvents(capacity=3)
    for seq in range(10):
        cache.get((seq, "p"), lambda r: r[0])
    assert len(cache) == 3
    assert cache.get((9, "p"), lambda r: -1) == 9  # the newest are kept
    assert cache.get((0, "p"), lambda r: -1) == -1  # the oldest went


def test_store_reads_share_decoded_events_and_stay_exact(tmp_path):
    store = EventStore(tmp_path / "s.db")
    sid = store.create_session(workspace="/w")
    store.append(sid, [UserMessage("fix the rounding"), ToolResult("c1", "E   AssertionError: 1043.37", is_error=True)])
    a = list(store.events(sid))
    b = list(store.events(sid))
    assert a == b and all(x is y for x, y in zip(a, b, strict=True))
    assert store.get(a[1].seq) is a[1]
    assert [s.event for s in a] == [
        UserMessage("fix the rounding"),
        ToolResult("c1", "E   AssertionError: 1043.37", is_error=True),
    ]
    other = EventStore(tmp_path / "s.db")  # another object decodes its own
    assert next(other.events(sid)) is not a[0] and next(other.events(sid)) == a[0]
    other.close()
    store.close()
