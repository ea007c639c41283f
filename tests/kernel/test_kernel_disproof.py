"""The durable disproof ledger: closed failures survive across sessions, children, FTS, and go stale."""

from __future__ import annotations

from kernel_support import session, state, turn

from latch.hotpaths import estimate_tokens
from latch.kernel import apply_kernel_tool
from latch.kernel.events import Mutation

CLAIM = "the release binary cannot be reproduced from this tree"
REASON = "build.rs embeds the build timestamp; with SOURCE_DATE_EPOCH set the hashes match"


def record(store, sid):
    return apply_kernel_tool(
        store,
        sid,
        "record_disproof",
        {
            "claim": CLAIM,
            "reason": REASON,
            "evidence": ["sha256sum target/release/app", "build.rs:12"],
            "files": ["/repo/build.rs"],
        },
    )


def test_a_disproof_is_seen_by_siblings_and_children_and_found_by_fts(store):
    a = session(store, "/repo")
    sibling = session(store, "/repo")
    child = session(store, None, parent=a)
    grandchild_elsewhere = session(store, "/tmp/scratch", parent=child)
    stranger = session(store, "/other")
    ev = record(store, a)
    for sid in (a, sibling, child, grandchild_elsewhere):
        (d,) = state(store, sid).disproofs
        assert (d["id"], d["claim"], d["files"], d["generation"], d["stale"]) == (
            f"X{ev.seq}",
            CLAIM,
            ["build.rs"],
            0,
            False,
        )
        text = state(store, sid).render(10_000, estimate_tokens)
        assert (
            f"- [X{ev.seq}] {CLAIM} — not a real problem: {REASON} (files: build.rs) "
            "(evidence: sha256sum target/release/app, build.rs:12)\n"
        ) in text + "\n"
    assert state(store, stranger).disproofs == ()
    hits = store.search("cannot be reproduced SOURCE_DATE_EPOCH")
    assert [h.seq for h in hits] == [ev.seq]
    assert state(store, a).disproofs[0]["seq"] == ev.seq


def test_a_disproof_goes_stale_when_a_cited_file_changes(store):
    a = session(store, "/repo", fmt="claude-code")
    b = session(store, "/repo", fmt="claude-code")
    record(store, a)
    turn(store, b, "Edit", {"file_path": "/repo/src/main.rs", "old_string": "a", "new_string": "b"}, "ok")
    (d,) = state(store, a).disproofs
    assert not d["stale"]  # an unrelated file changed
    edit = turn(store, b, "Edit", {"file_path": "/repo/build.rs", "old_string": "now()", "new_string": "EPOCH"}, "ok")
    (d,) = state(store, a).disproofs
    assert (d["stale"], d["stale_path"], d["stale_seq"]) == (True, "build.rs", edit)
    assert "— STALE: build.rs changed since" in state(store, b).render(10_000, estimate_tokens)
    assert not state(store, a, until_seq=edit - 1).disproofs[0]["stale"]  # replay before the edit


def test_a_change_to_unknown_files_stales_file_scoped_disproofs(store):
    a = session(store, "/repo")
    record(store, a)
    apply_kernel_tool(store, a, "record_disproof", {"claim": "flaky CI", "reason": "runner OOM, not our code"})
    store.append(a, [Mutation(paths=(), tool="cargo fmt")])
    cited, uncited = state(store, a).disproofs
    assert cited["stale"] and cited["stale_path"] is None and not uncited["stale"]
    assert "— STALE: the workspace changed since" in state(store, a).render(10_000, estimate_tokens)
