"""Reads stay bounded whatever the file's size: ``read_file`` reads only the requested page, and format detection
reads a bounded prefix, so a 2 GiB (sparse) file pages, or says "unrecognized transcript format", in bounded
memory. Measured in a fresh subprocess as its own peak RSS, ``VmHWM`` of ``/proc/self/status`` (``getrusage``'s
``ru_maxrss`` keeps, across ``execve``, the peak of the forked parent: a long pytest run's size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from latch.kernel.files import PAGE_LIMIT_BYTES, read_file
from latch.store import EventStore

GIB = 1 << 30
PEAK = "next(int(line.split()[1]) * 1024 for line in open('/proc/self/status') if line.startswith('VmHWM:'))"
"""Python expression: this process's peak resident set, bytes (its own address space only)."""
BOUND = 96 << 20  # what one page (24 KiB) or one prefix may cost above the interpreter's own footprint, bytes


def _peak_rss(code: str) -> tuple[int, dict]:
    """Peak RSS in bytes of a fresh Python running ``code`` (which prints one JSON line), and what it printed."""
    script = "import json\n" + textwrap.dedent(code) + f"\nprint(json.dumps({{'rss': {PEAK}, 'out': out}}))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return got["rss"], got["out"]


@pytest.fixture
def sparse(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    big = ws / "big.bin"
    with open(big, "wb") as f:
        f.write(b"head line\n")
        f.truncate(2 * GIB)  # a hole: 2 GiB on paper, nothing on disk
    return big


def test_read_file_pages_a_2_gib_file_in_bounded_memory(tmp_path, sparse):
    imports = """
        from latch.store import EventStore
        from latch.kernel.files import read_file
    """
    base, _ = _peak_rss(
        imports
        + f"""
        store = EventStore({str(tmp_path / "base.db")!r})
        sid = store.create_session(workspace={str(sparse.parent)!r}, format="latch")
        out = None
    """
    )
    rss, out = _peak_rss(
        imports
        + f"""
        store = EventStore({str(tmp_path / "l.db")!r})
        sid = store.create_session(workspace={str(sparse.parent)!r}, format="latch")
        first = read_file(store, sid, "big.bin")
        middle = read_file(store, sid, "big.bin", offset={GIB})
        out = [first.total_bytes, first.next_offset, first.content[:9], middle.offset, middle.next_offset]
    """
    )
    assert out[0] == 2 * GIB and out[2] == "head line" and out[3] == GIB
    assert 0 < out[1] <= PAGE_LIMIT_BYTES and GIB < out[4] <= GIB + PAGE_LIMIT_BYTES
    assert rss - base < BOUND, f"paging a 2 GiB file took {(rss - base) >> 20} MiB above the baseline"


def test_a_page_of_a_large_file_is_the_same_as_slicing_it(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    text = "".join(f"line {i}: é ü 漢字 {'x' * (i % 50)}\n" for i in range(20_000)).encode()
    (ws / "a.txt").write_bytes(text)
    with EventStore(tmp_path / "l.db") as store:
        sid = store.create_session(workspace=str(ws), format="latch")
        offset, pages = 0, []
        while offset is not None:
            page = read_file(store, sid, "a.txt", offset=offset)
            assert page.total_bytes == len(text) and page.sha256 is None
            end = page.next_offset if page.next_offset is not None else len(text)
            assert page.content.startswith(text[offset:end].decode("utf-8"))  # never a split UTF-8 sequence
            pages.append(text[offset:end])
            offset = page.next_offset
        assert b"".join(pages) == text and len(pages) > 1
        obs = [s.event for s in store.events(sid, kinds=["file_observation"])]
        assert [(o.offset, o.size) for o in obs][:2] == [(0, len(text)), (len(pages[0]), len(text))]
        with pytest.raises(ValueError, match="outside the file"):
            read_file(store, sid, "a.txt", offset=len(text) + 1)


def test_format_detection_of_a_2_gib_file_reads_a_bounded_prefix(tmp_path, sparse):
    (tmp_path / "base.txt").write_text("x")
    imports = """
        from latch.importers import TranscriptError, parse_file
    """
    probe = """
        try:
            parse_file({path!r})
            out = "parsed"
        except TranscriptError as exc:
            out = str(exc)
    """
    base, _ = _peak_rss(imports + probe.format(path=str(tmp_path / "base.txt")))
    rss, out = _peak_rss(imports + probe.format(path=str(sparse)))
    assert "unrecognized transcript format" in out, out
    assert rss - base < BOUND, f"detecting a 2 GiB file's format took {(rss - base) >> 20} MiB above the baseline"


def test_latch_import_of_a_2_gib_file_says_unrecognized_in_bounded_memory(tmp_path, sparse):
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "LATCH_DB": str(tmp_path / "l.db")}
    code = f"""
        import sys
        from latch.cli import main
        sys.argv = ["latch", "import", {str(sparse)!r}]
        try:
            main()
        except SystemExit as exc:
            out = exc.code
    """
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json\n" + textwrap.dedent(code) + (f"\nprint(json.dumps({{'rss': {PEAK}, 'out': out}}))\n"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["out"] == 1 and "unrecognized transcript format" in done.stderr, done.stderr[-1000:]
    assert "Traceback" not in done.stderr
    assert got["rss"] < 400 << 20, f"latch import of a 2 GiB file peaked at {got['rss'] >> 20} MiB"
