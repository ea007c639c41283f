"""The store object's decoded-event cache: an identical row gives back the event decoded before, anything else
decodes afresh, and the cache holds at most its capacity, whatever the history read."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

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
    cache.get((8, "p"), lambda r: -1)  # read again: now the newest read
    cache.get((10, "p"), lambda r: r[0])
    assert cache.get((8, "p"), lambda r: -1) == 8 and cache.get((9, "p"), lambda r: -1) == -1


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


def test_reads_served_from_the_decoded_stretch_equal_the_database_reads(tmp_path):
    """A stretch of seqs all kept decoded is the log there: every read of it (any session, kinds, limit, open or
    closed end) gives what a store object that read nothing before reads from the database."""
    path = tmp_path / "s.db"
    store = EventStore(path)
    a = store.create_session(workspace="/a")
    b = store.create_session(workspace="/b")
    for i in range(12):  # two sessions interleaved, runs of different lengths and kinds
        store.append(a, [UserMessage(f"a{i}"), ToolResult(f"c{i}", f"out {i}", is_error=i % 3 == 0)])
        store.append(b, [UserMessage(f"b{i}")] * (i % 3))
    top = store.max_seq()
    list(store.events(a, after_seq=5, until_seq=30))  # part of session a: a stretch with b's events missing
    list(store.events(after_seq=12, until_seq=25))  # a stretch of the whole log
    fresh = EventStore(path)
    fresh._decoded = DecodedEvents(capacity=0)  # reads everything from the database
    served = 0
    for sid in (None, a, b):
        for after in (0, 4, 12, 13, 20, 24, top):
            for until in (None, 14, 25, 26, top, top + 5):
                for kinds in (None, ("tool_result",), ("user_message", "tool_result")):
                    for limit in (None, 0, 1, 3):
                        kept = store._decoded.run(after, until)
                        served += bool(kept)
                        got = list(store.events(sid, after_seq=after, until_seq=until, kinds=kinds, limit=limit))
                        want = list(fresh.events(sid, after_seq=after, until_seq=until, kinds=kinds, limit=limit))
                        assert got == want, (sid, after, until, kinds, limit)
    assert served > 100  # the stretch was really served from memory
    assert all(store.get(s) == fresh.get(s) for s in range(1, top + 1))
    fresh.close()
    store.close()


def test_a_kept_stretch_is_read_once_and_a_stretch_read_again_stays_kept():
    """Reading a stretch again keeps it (least recently read go first): the reads after the first one of each view
    never reach the database, even when the next view's new events fill the cache."""
    store = EventStore(":memory:")
    sid = store.create_session(workspace="/w")
    store._decoded = DecodedEvents(capacity=8)
    store.append(sid, [UserMessage(f"m{i}") for i in range(20)])
    reads: list[str] = []
    rows = store._rows

    def counted(sql, args=()):
        reads.append(sql)
        return rows(sql, args)

    store._rows = counted  # type: ignore[method-assign]
    assert [s.seq for s in store.events(sid, until_seq=6)] == list(range(1, 7))
    assert [s.seq for s in store.events(sid, after_seq=14, until_seq=16)] == [15, 16]  # read after 1..6
    assert len(reads) == 2
    assert [s.seq for s in store.events(sid, after_seq=2, until_seq=6)] == [3, 4, 5, 6]
    assert [s.seq for s in store.events(after_seq=4, until_seq=6, limit=1)] == [5]
    assert store.get(6).seq == 6
    assert len(reads) == 2  # the stretch 1..6 was kept: no read
    assert [s.seq for s in store.events(sid, after_seq=4, until_seq=12)] == list(range(5, 13))
    assert len(reads) == 3  # 5 and 6 from memory, then 7..12 read: the six read least recently went, not 5 and 6
    assert [s.seq for s in store.events(sid, after_seq=4, until_seq=12)] == list(range(5, 13))
    assert len(reads) == 3
    store.close()


def test_rows_of_a_rolled_back_append_are_never_served(tmp_path, monkeypatch):
    # The append's transaction decodes its own new rows (a projection folds them) and then fails: those rows
    # never existed, and AUTOINCREMENT hands their seqs to the next append.
    import dataclasses

    from latch.events import GroupTaskCreated
    from latch.store import projections

    store = EventStore(tmp_path / "s.db")
    sid = store.create_session(workspace="/w")
    (first,) = store.append(sid, [UserMessage("start")])
    assert [s.seq for s in store.events(sid)] == [first]
    group = projections.PROJECTIONS["group"]

    def failing(db, stored):
        group.apply(db, stored)
        raise RuntimeError("projection failed")

    monkeypatch.setitem(projections.PROJECTIONS, "group", dataclasses.replace(group, apply=failing))
    try:
        store.append(sid, [GroupTaskCreated("t1", "never stored")])
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failing projection did not fail the append")
    monkeypatch.setitem(projections.PROJECTIONS, "group", group)
    assert [s.event for s in store.events(sid)] == [UserMessage("start")]  # no phantom event
    (second,) = store.append(sid, [UserMessage("stored instead")])
    assert second == first + 1  # the rolled-back seq, handed out again
    assert [s.event for s in store.events(sid, after_seq=first)] == [UserMessage("stored instead")]
    assert store.get(second).event == UserMessage("stored instead")
    store.close()


_SEQS = st.integers(min_value=1, max_value=7)
_PAYLOADS = st.sampled_from(
    ['{"text":"a"}', '{"text":"b"}', '{"text":"' + "x" * 300 + '"}', '{"text":"' + "x" * 301 + '"}']
)
_ROWS = st.tuples(_SEQS, st.sampled_from(["s1", "s2"]), st.just("user_message"), _PAYLOADS, st.none(), st.none())


@settings(max_examples=300, deadline=None)
@given(batches=st.lists(st.lists(_ROWS, max_size=8), max_size=8), capacity=st.integers(min_value=0, max_value=5))
def test_a_list_read_at_once_equals_its_rows_read_one_by_one(batches, capacity):
    """``get_all`` of each list gives what ``get`` of its rows one by one gives, and leaves the same rows kept in
    the same order (the least recently read go first), whatever was kept before and whatever the capacity."""
    at_once: DecodedEvents[tuple] = DecodedEvents(capacity=capacity)
    one_by_one: DecodedEvents[tuple] = DecodedEvents(capacity=capacity)
    model: OrderedDict[int, tuple] = OrderedDict()  # seq -> (row, value): a plain LRU (these rows differ as wholes)

    def decode(row):
        return ("decoded", *row)

    def model_get(row):
        kept = model.get(row[0])
        value = kept[1] if kept is not None and kept[0] == row else decode(row)
        model[row[0]] = (row, value)
        model.move_to_end(row[0])
        while len(model) > capacity:
            model.popitem(last=False)
        return value

    for rows in batches:
        got = at_once.get_all(rows, decode)
        assert got == [one_by_one.get(r, decode) for r in rows] == [model_get(r) for r in rows]
        assert list(at_once._by_seq.items()) == list(one_by_one._by_seq.items())
        assert list(at_once._by_seq) == list(model) and [v for _, v in at_once._by_seq.values()] == [
            v for _, v in model.values()
        ]
        assert len(at_once) <= capacity


def test_a_kept_row_read_in_a_list_is_the_same_object_and_a_changed_one_decodes_again():
    cache: DecodedEvents[object] = DecodedEvents(capacity=4)
    rows = [(1, "s", "k", '{"a":1}', None, None), (2, "s", "k", '{"a":2}', None, None)]
    first = cache.get_all(rows, lambda r: object())
    again = cache.get_all([rows[1], rows[0], (3, "s", "k", "{}", None, None)], lambda r: object())
    assert again[0] is first[1] and again[1] is first[0] and len(cache) == 3
    changed = cache.get_all([(2, "s", "k", '{"a":3}', None, None)], lambda r: object())
    assert changed[0] is not first[1] and cache.kept(2) is changed[0]


def test_a_reader_that_stops_early_decodes_one_page(tmp_path):
    store = EventStore(tmp_path / "s.db")
    sid = store.create_session(workspace="/w")
    store.append(sid, [UserMessage(f"m{i}") for i in range(3000)])
    first = next(store.events(sid))
    assert first.event == UserMessage("m0")
    assert len(store._decoded) == 32  # the first page only, not the 3,000 rows read
    everything = list(store.events(sid))
    assert [s.event for s in everything] == [UserMessage(f"m{i}") for i in range(3000)]
    assert everything[0] is first
    store.close()
