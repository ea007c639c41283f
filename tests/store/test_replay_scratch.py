"""Replay records stay out of the conversation log ("Replay records").

Every replay used to append its engine's kernel records (~770 KB for the Codex corpus file) to the store,
forever, and a killed replay left a partial stream there. Now a replay writes them to a scratch database
beside the store (``<store>.replays.sqlite``): ``latch replay --keep`` promotes a finished run into the
store in one transaction, ``latch prune-replays`` drops the scratch's runs and reports the bytes freed,
and a replay killed with SIGKILL leaves nothing that a later command shows or keeps.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corpus_support import REPO

from latch.cli.replay import run_replay
from latch.host.ingest import import_file
from latch.store import EventStore, StoreError, replay_scratch_path

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

LATCH = [sys.executable, "-c", "from latch.cli import main; main()"]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
CODEX = "codex/edgerunner_codex-session.jsonl"


def _size(path: Path) -> int:
    return sum(os.path.getsize(str(path) + s) for s in ("", "-wal") if os.path.exists(str(path) + s))


def _kernel_rows(db: Path) -> list[tuple[str, int]]:
    con = sqlite3.connect(str(db))
    try:
        return con.execute("SELECT stream, count(*) FROM kernel_records GROUP BY stream ORDER BY stream").fetchall()
    finally:
        con.close()


def _scratch_runs(db: Path) -> list[tuple[str, bool, int]]:
    """``(stream, finished, records)`` of every run in the scratch beside ``db``, read with plain SQLite."""
    con = sqlite3.connect(str(replay_scratch_path(db)))
    try:
        return [
            (s, f is not None, n)
            for s, f, n in con.execute(
                "SELECT stream, finished_at, (SELECT count(*) FROM records r WHERE r.run_id = runs.id) FROM runs "
                "ORDER BY id"
            )
        ]
    finally:
        con.close()


def _codex_prefix(corpus_dir: Path, tmp_path: Path, lines: int = 300) -> Path:
    """The first ``lines`` lines of the Codex corpus file (a shorter session, the same shape)."""
    dest = tmp_path / "codex-prefix.jsonl"
    dest.write_bytes(b"".join((corpus_dir / CODEX).read_bytes().splitlines(keepends=True)[:lines]))
    return dest


@pytest.mark.corpus
def test_three_replays_leave_the_store_as_it_was(corpus_dir, tmp_path):
    db = tmp_path / "s.db"
    store = EventStore(db)
    sid, _, _ = import_file(store, _codex_prefix(corpus_dir, tmp_path), final=True)
    store.close()
    imported = _size(db)
    streams = []
    for _ in range(3):
        with EventStore(db) as store:
            # the heuristic: an exact estimator's counts go to the store's durable cache, counted once
            # (tests/estimators/test_exact_counts.py); the kernel records are what a replay keeps out of the store
            doc, _ = run_replay(store, sid, estimator="heuristic-o200k")
        assert doc["kept"] is False and doc["summary"]["requests"] > 40
        streams.append(doc["stream"])
    assert _size(db) == imported  # before: every replay added its records to the store
    assert _kernel_rows(db) == []
    runs = _scratch_runs(db)
    assert [s for s, _, _ in runs] == streams and all(done and n > 50 for _, done, n in runs)
    scratch = _size(replay_scratch_path(db))
    assert scratch > 3 * 50_000
    done = subprocess.run(
        [*LATCH, "--db", str(db), "prune-replays"],
        capture_output=True,
        text=True,
        env={**os.environ, "LATCH_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    freed = int(done.stdout.split("freed ")[1].split(" bytes")[0].replace(",", ""))
    assert f"dropped 3 replay run(s) ({sum(n for _, _, n in runs):,} kernel records)" in done.stdout
    assert freed == scratch - _size(replay_scratch_path(db)) and freed > 0.8 * scratch
    assert _scratch_runs(db) == [] and _size(db) == imported


def test_keep_promotes_the_run_into_the_store(tmp_path):
    db = tmp_path / "s.db"
    with EventStore(db) as store:
        sid, _, _ = import_file(store, EXAMPLE, final=True)
        plain, _ = run_replay(store, sid)
        scratch_records = store.replay_scratch().records(store.replay_scratch().runs()[0].id)
        kept, _ = run_replay(store, sid, keep=True)
        assert kept["kept"] is True and plain["stream"] != kept["stream"]
        stored = store.kernel_records(sid, kept["stream"])
        # the same records a scratch run holds (same engine, same session), now in the store's own stream
        assert [(k, at, p) for _, k, at, p in stored] == [(k, at, p) for _, k, at, p in scratch_records]
        assert len(stored) > 10
        assert store.kernel_records(sid, plain["stream"]) == []
    assert _kernel_rows(db) == [(kept["stream"], len(stored))]
    assert _scratch_runs(db) == [(plain["stream"], True, len(scratch_records))]  # the kept run left the scratch


def test_the_cli_keep_flag_and_prune(tmp_path):
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "LATCH_DB": str(tmp_path / "l.db")}
    db = tmp_path / "l.db"
    none = subprocess.run([*LATCH, "prune-replays"], capture_output=True, text=True, env=env)
    assert none.returncode == 0 and "no replay records to prune" in none.stdout
    assert not db.exists() and not replay_scratch_path(db).exists()  # nothing created
    assert subprocess.run([*LATCH, "replay", str(EXAMPLE)], capture_output=True, env=env).returncode == 0
    assert _kernel_rows(db) == []
    doctor = json.loads(subprocess.run([*LATCH, "doctor", "--json"], capture_output=True, text=True, env=env).stdout)
    assert doctor["replay_scratch"] == str(replay_scratch_path(db))
    assert doctor["replay_scratch_bytes"] == _size(replay_scratch_path(db)) > 0
    assert subprocess.run([*LATCH, "replay", str(EXAMPLE), "--keep"], capture_output=True, env=env).returncode == 0
    [(stream, n)] = _kernel_rows(db)
    assert stream.startswith("continuity:replay-") and n > 10
    done = subprocess.run([*LATCH, "prune-replays"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "dropped 1 replay run(s)" in done.stdout, done.stdout
    assert _kernel_rows(db) == [(stream, n)]  # kept records are the store's: prune leaves them


def test_an_unfinished_run_is_never_kept_and_a_live_one_is_not_pruned(tmp_path):
    with EventStore(tmp_path / "s.db") as store:
        sid, _, _ = import_file(store, EXAMPLE, final=True)
        scratch = store.replay_scratch()
        run = scratch.start(sid, "continuity:replay-unfinished")
        scratch.append(run, [("epoch", 1, {"n": 1})])
        with pytest.raises(StoreError, match=r"^replay run \d+ \(continuity:replay-unfinished\) did not finish"):
            store.keep_replay(run)
        assert store.kernel_records(sid, "continuity:replay-unfinished") == []
        dropped, kept = scratch.prune()  # this process is alive: its run may still be written
        assert dropped == [] and [r.id for r in kept] == [run]
        scratch.finish(run)
        dropped, kept = scratch.prune()
        assert [r.id for r in dropped] == [run] and kept == []
        with pytest.raises(StoreError, match="not in"):
            scratch.append(run, [("epoch", 2, {})])


@pytest.mark.corpus
def test_a_killed_replay_leaves_nothing_half_written(corpus_dir, tmp_path):
    """SIGKILL in the middle of ``latch replay --keep`` of the Codex corpus file (174 requests): the store
    holds no record of it (before: a partial ``continuity:replay-*`` stream), the scratch holds an
    unfinished run that nothing keeps, ``prune-replays`` drops it, and the next replay is whole."""
    env = {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "LATCH_DB": str(tmp_path / "l.db")}
    db = tmp_path / "l.db"
    codex = str(corpus_dir / CODEX)
    assert subprocess.run([*LATCH, "import", codex], capture_output=True, env=env).returncode == 0
    imported = _size(db)
    proc = subprocess.Popen(
        [*LATCH, "replay", codex, "--keep"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    scratch = replay_scratch_path(db)
    deadline = time.monotonic() + 120
    written = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if scratch.exists():
            try:
                written = sum(n for _, _, n in _scratch_runs(db))
            except sqlite3.OperationalError:  # the schema is being created
                written = 0
            if written > 50:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "the replay finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert _kernel_rows(db) == []  # --keep never got to promote: nothing in the store
    [(stream, finished, n)] = _scratch_runs(db)
    assert not finished and n >= written
    with EventStore(db) as store:
        assert store.quick_check() == []
        run = store.replay_scratch().runs()[0]
        with pytest.raises(StoreError, match="did not finish"):
            store.keep_replay(run.id)
    done = subprocess.run([*LATCH, "prune-replays"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "dropped 1 replay run(s)" in done.stdout and "1 unfinished: killed" in done.stdout
    assert _scratch_runs(db) == []
    again = subprocess.run([*LATCH, "replay", codex, "--keep", "--json"], capture_output=True, text=True, env=env)
    assert again.returncode in (0, 1), again.stderr  # 1: a check failed; the run is whole either way
    [(kept, records)] = _kernel_rows(db)
    assert kept != stream and records > n
    assert _size(db) > imported
