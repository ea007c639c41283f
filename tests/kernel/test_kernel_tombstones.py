"""Tombstones: deleted history leaves selectors, never the log or the generation (spec: "Sessions & continuity")."""

from __future__ import annotations

import json

from click.testing import CliRunner
from kernel_support import session, state

from latch.cli import _load_commands, cli
from latch.events import UserMessage
from latch.kernel.events import Mutation, Tombstone
from latch.kernel.tombstones import forget_session, tombstoned_sessions


def _sessions_json(db) -> list[str]:
    out = CliRunner().invoke(cli, ["--db", str(db), "sessions", "--json"])
    assert out.exit_code == 0, out.output
    return [row["id"] for row in json.loads(out.output)]


def test_forgotten_session_leaves_latch_sessions_but_its_mutations_still_count(store, tmp_path):
    db = tmp_path / "latch.db"
    old = session(store, "/repo")
    child = session(store, "/repo", parent=old)
    keep = session(store, "/repo")
    store.append(old, [UserMessage(text="secret plan"), Mutation(paths=("a.py",), tool="Edit")])
    store.append(child, [Mutation(paths=("b.py",), tool="Edit")])
    artifact = store.put_artifact(b"\x89PNG...", "image/png")
    events_before = store.count_events(old)
    _load_commands()
    out = CliRunner().invoke(cli, ["--db", str(db), "forget", old[:8], "--reason", "user asked"])
    assert out.exit_code == 0, out.output
    assert f"session {old} tombstoned" in out.output
    assert _sessions_json(db) == [keep]
    assert tombstoned_sessions(store) == {old, child}
    # raw events, children and artifacts remain; the generation is untouched
    assert store.count_events(old) == events_before + 1 and store.count_events(child) == 1
    assert store.get_artifact(artifact.sha256)[1] == b"\x89PNG..."
    assert [e.event for e in store.events(old, kinds=[Tombstone.KIND])] == [Tombstone(reason="user asked")]
    assert state(store, keep).generation == 2
    assert state(store, old).tombstoned and state(store, old).generation == 2
    store.append(keep, [Mutation(paths=("c.py",), tool="Edit")])
    assert state(store, keep).generation == 3
    again = CliRunner().invoke(cli, ["--db", str(db), "forget", old])
    assert "already tombstoned; nothing appended" in again.output and store.count_events(old) == events_before + 1
    missing = CliRunner().invoke(cli, ["--db", str(db), "forget", "zzzz"])
    assert missing.exit_code != 0 and "no session 'zzzz'" in missing.output


def test_forget_session_api(store):
    sid = session(store)
    assert forget_session(store, sid)[1] is not None
    assert forget_session(store, sid) == (sid, None)
    assert tombstoned_sessions(store) == {sid}
