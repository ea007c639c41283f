"""File state: bounded reads with observations, guarded writes (spec: "File state and compaction")."""

from __future__ import annotations

import hashlib
import os

import pytest
from kernel_support import by, session, state

from latch.hotpaths import estimate_tokens
from latch.kernel.events import ExternalChange, FileObservation, Mutation
from latch.kernel.files import (
    PAGE_LIMIT_BYTES,
    PAGE_LIMIT_TOKENS,
    StaleFileError,
    guarded_write,
    read_artifact,
    read_file,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def ws(store, tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    return root, session(store, str(root))


def test_guarded_edit_is_rejected_after_an_out_of_band_change(store, ws):
    root, sid = ws
    (root / "app.py").write_bytes(b"x = 1\n")
    page = read_file(store, sid, "app.py")
    assert page.sha256 == sha(b"x = 1\n")
    (root / "app.py").write_bytes(b"x = 1  # edited by a human\n")  # between read and write
    with pytest.raises(StaleFileError, match="app.py: changed outside the agent"):
        guarded_write(store, sid, "app.py", b"x = 2\n", page.sha256)
    assert (root / "app.py").read_bytes() == b"x = 1  # edited by a human\n"  # untouched
    (change,) = [e.event for e in store.events(sid, kinds=[ExternalChange.KIND])]
    assert change == ExternalChange(
        path="app.py", expected_sha256=page.sha256, actual_sha256=sha(b"x = 1  # edited by a human\n")
    )
    s = state(store, sid)
    assert s.generation == 0 and by(s.files, "path")["app.py"]["external_change"]
    assert s.render(10_000, estimate_tokens) == (
        "Canonical state\nGoal: (not set)\n"
        "Files changed outside the agent (re-read before editing):\n- app.py\n"
        "Working set: files (newest first):\n"
        f"- app.py: read ×1 (6 bytes, sha256 {page.sha256[:8]})"
    )
    # the model re-reads, then the write goes through
    again = read_file(store, sid, root / "app.py")
    result = guarded_write(store, sid, "app.py", b"x = 2\n", again.sha256)
    assert result.changed and (root / "app.py").read_bytes() == b"x = 2\n"
    s = state(store, sid)
    assert s.generation == 1 and not by(s.files, "path")["app.py"]["external_change"]
    # no external change left; the working set says what the agent did to the file (the hash of the bytes it
    # wrote; their size is not recorded by the write)
    assert not s.is_empty and s.render(10_000, estimate_tokens) == (
        "Canonical state\nGoal: (not set)\nWorking set: files (newest first):\n"
        f"- app.py: read ×2, changed ×1 by guarded_write (sha256 {sha(b'x = 2' + bytes([10]))[:8]})"
    )


def test_touch_with_identical_bytes_is_not_a_change(store, ws):
    root, sid = ws
    path = root / "lib.py"
    path.write_bytes(b"def f():\n    return 1\n")
    page = read_file(store, sid, "lib.py")
    os.utime(path, (1, 1))  # touched: new mtime, same bytes
    path.write_bytes(b"def f():\n    return 1\n")  # rewritten with identical bytes
    assert guarded_write(store, sid, "lib.py", b"def f():\n    return 2\n", page.sha256).changed
    s = state(store, sid)
    assert s.generation == 1
    same = guarded_write(store, sid, "lib.py", b"def f():\n    return 2\n", sha(b"def f():\n    return 2\n"))
    assert not same.changed and same.seq is None
    assert state(store, sid).generation == 1 and store.count_events(sid) == 2  # observation + one mutation
    (mutation,) = [e.event for e in store.events(sid, kinds=[Mutation.KIND])]
    assert mutation == Mutation(
        paths=("lib.py",),
        tool="guarded_write",
        sha256_before=page.sha256,
        sha256_after=sha(b"def f():\n    return 2\n"),
    )


def test_guarded_create_requires_absence(store, ws):
    root, sid = ws
    guarded_write(store, sid, "new/dir/a.txt", b"hi", None)
    assert (root / "new/dir/a.txt").read_bytes() == b"hi"
    with pytest.raises(StaleFileError, match="expected absent"):
        guarded_write(store, sid, "new/dir/a.txt", b"again", None)


def test_a_180_kib_one_line_file_read_stays_within_both_bounds(store, ws):
    root, sid = ws
    minified = ("var a=function(b){return b&&b.c?{d:b.c}:[]};" * 4200)[: 180 * 1024].encode()
    assert len(minified) == 184_320 and b"\n" not in minified
    (root / "bundle.min.js").write_bytes(minified)
    pages, offset = [], 0
    while offset is not None:
        page = read_file(store, sid, "bundle.min.js", offset=offset)
        assert len(page.content.encode()) <= PAGE_LIMIT_BYTES
        assert estimate_tokens(page.content) <= PAGE_LIMIT_TOKENS and page.tokens == estimate_tokens(page.content)
        pages.append(page)
        offset = page.next_offset
    first = pages[0]
    # punctuation-heavy text: the token bound binds before the byte bound
    assert estimate_tokens(first.content) > PAGE_LIMIT_TOKENS - 50 and len(first.content.encode()) < PAGE_LIMIT_BYTES
    assert first.sha256 is None and first.total_bytes == 184_320  # larger than 64 KiB: no whole-file hash
    assert f"continue with offset={first.next_offset}]" in first.content
    body = b"".join(p.content.split("\n[… ")[0].encode() for p in pages)
    assert body == minified  # the rest is reachable page by page
    observations = [e.event for e in store.events(sid, kinds=[FileObservation.KIND])]
    assert len(observations) == len(pages) and {o.sha256 for o in observations} == {None}
    assert sum(o.length for o in observations) == 184_320


def test_small_file_observation_carries_sha_and_size_and_utf8_is_never_split(store, ws):
    root, sid = ws
    text = ("é" * 20_000).encode()  # 40,000 bytes, two bytes per character
    (root / "accents.txt").write_bytes(text)
    page = read_file(store, sid, "accents.txt")
    assert page.sha256 == sha(text) and page.total_bytes == 40_000
    (obs,) = [e.event for e in store.events(sid, kinds=[FileObservation.KIND])]
    assert (obs.path, obs.sha256, obs.size, obs.offset) == ("accents.txt", sha(text), 40_000, 0)
    second = read_file(store, sid, "accents.txt", offset=page.next_offset)
    assert page.next_offset % 2 == 0 and "\ufffd" not in page.content + second.content
    with pytest.raises(ValueError, match="outside the file"):
        read_file(store, sid, "accents.txt", offset=40_001)


def test_read_artifact_is_bounded(store):
    ref = store.put_artifact(b"log line\n" * 10_000, "text/plain")
    page = read_artifact(store, ref.sha256)
    assert len(page.content.encode()) <= PAGE_LIMIT_BYTES and page.next_offset is not None
    assert page.content.endswith(f"more bytes of this artifact; continue with offset={page.next_offset}]")
    assert read_artifact(store, ref.sha256, offset=90_000 - 9).content == "log line\n"


def test_a_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    """Found by a new-user trial: write_file created files with mode 0600."""
    import os
    import stat

    from latch.kernel.files import guarded_write
    from latch.store import EventStore

    store = EventStore(tmp_path / "s.db")
    sid = store.create_session(workspace=str(tmp_path))
    old = os.umask(0o022)
    try:
        guarded_write(store, sid, tmp_path / "new.txt", b"hello\n", expected_sha256=None)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644


def test_pages_sized_to_a_token_limit_and_the_working_set_tracks_how_far_a_file_was_read(store, ws):
    root, sid = ws
    data = "".join(f"line {i}: the survey crew logged reading {i * 13 % 997}\n" for i in range(400)).encode()
    (root / "log.txt").write_bytes(data)
    offset, pages = 0, []
    while offset is not None:
        page = read_file(store, sid, "log.txt", offset=offset, estimate=estimate_tokens, limit_tokens=300)
        assert estimate_tokens(page.content) <= 300 and page.tokens <= 300
        pages.append(page)
        lines = state(store, sid).render(10_000, estimate_tokens).splitlines()
        (line,) = [x for x in lines if x.startswith("- log.txt: ")]
        if page.next_offset is not None:
            assert line == f"- log.txt: read ×{len(pages)}, bytes 0..{page.next_offset:,} of {len(data):,} so far"
        offset = page.next_offset
    assert len(pages) > 5 and b"".join(p.content.split("\n[…")[0].encode() for p in pages) == data
    # read to the end: the whole file, its size and hash
    assert line == f"- log.txt: read ×{len(pages)} ({len(data):,} bytes, sha256 {sha(data)[:8]})"
