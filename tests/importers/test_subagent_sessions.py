"""Claude Code sub-agent files import as child sessions of their parent.

The corpus session spotter (``8463c716….jsonl``) has ``subagents/agent-a7be2f0.jsonl`` (an Explore
sub-agent spawned by the Task call whose result names ``agentId: a7be2f0``) and
``subagents/agent-acompact-f46190.jsonl`` (the auto-compaction agent's thread). ``latch import`` of the
session file brings both; each is its own session (its own L0-L3) with ``parent_id`` = the parent's id,
whichever file is imported first; ``latch forget`` of the parent hides the children too.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.cli import _load_commands, cli
from latch.host.ingest import companion_files, import_file, subagent_call
from latch.store import EventStore

SESSION = "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CHILDREN = ("agent-a7be2f0.jsonl", "agent-acompact-f46190.jsonl")


def _paths():
    require_corpus()
    parent = CORPUS / SESSION
    return parent, [parent.with_suffix("") / "subagents" / c for c in CHILDREN]


def test_import_brings_the_subagent_files_as_children(tmp_path):
    parent, children = _paths()
    assert companion_files(parent) == children
    _load_commands()
    db = str(tmp_path / "l.db")
    r = CliRunner().invoke(cli, ["--db", db, "import", str(parent)])
    assert r.exit_code == 0, r.output
    assert r.output.count(": session ") == 3
    rows = json.loads(CliRunner().invoke(cli, ["--db", db, "sessions", "--json"]).output)
    by_source = {row["source"].rsplit("/", 1)[-1]: row for row in rows}
    top = by_source[parent.name]
    assert top["parent"] is None
    assert [by_source[c]["parent"] for c in CHILDREN] == [top["id"], top["id"]]
    with EventStore(db) as store:
        explore = store.session(by_source[CHILDREN[0]]["id"])
        compact = store.session(by_source[CHILDREN[1]]["id"])
        assert (explore.meta["agent_kind"], compact.meta["agent_kind"]) == ("subagent", "compaction")
        # checked by hand: the Task call on line 947 of the parent file (subagent_type Explore), whose
        # result on line 988 carries toolUseResult.agentId "a7be2f0"
        call = subagent_call(store, explore.id)
        assert call == "toolu_017SvvKc8KLbhGMG3tXkf21Z"
        markers = [e.event for e in store.events(top["id"], kinds=["subagent_marker"])]
        assert [m.call_id for m in markers if m.agent_id == "a7be2f0"] == [call]
        assert subagent_call(store, compact.id) is None  # no Task call spawned the compaction agent


@pytest.mark.parametrize("order", ["children first", "parent first"])
def test_link_holds_whichever_file_comes_first(tmp_path, order):
    parent, children = _paths()
    files = [*children, parent] if order == "children first" else [parent, *children]
    with EventStore(tmp_path / "l.db") as store:
        ids = {p: import_file(store, p, final=True)[0] for p in files}
        assert sorted(s.id for s in store.children(ids[parent])) == sorted(ids[c] for c in children)
        again = [import_file(store, p, final=True)[2] for p in files]
        assert again == [[], [], []]  # idempotent, links kept
        assert {s.parent_id for s in store.sessions() if s.id != ids[parent]} == {ids[parent]}


def test_forgetting_the_parent_hides_its_children(tmp_path):
    parent, _ = _paths()
    _load_commands()
    db = str(tmp_path / "l.db")
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "import", str(parent)]).exit_code == 0
    top = next(
        r for r in json.loads(runner.invoke(cli, ["--db", db, "sessions", "--json"]).output) if r["parent"] is None
    )
    assert runner.invoke(cli, ["--db", db, "forget", top["id"]]).exit_code == 0
    assert json.loads(runner.invoke(cli, ["--db", db, "sessions", "--json"]).output) == []


def test_a_bad_subagent_file_imports_nothing_of_its_session(tmp_path):
    """All or nothing: a corrupted sub-agent file leaves the store unchanged, one line naming it."""
    parent, children = _paths()
    copy = tmp_path / "src" / parent.name
    (copy.with_suffix("") / "subagents").mkdir(parents=True)
    shutil.copy(parent, copy)
    for c in children:
        shutil.copy(c, copy.with_suffix("") / "subagents" / c.name)
    bad = copy.with_suffix("") / "subagents" / CHILDREN[0]
    lines = bad.read_text().splitlines(keepends=True)
    bad.write_text(
        "".join(lines[:3]) + '{"type": "user", "message": {"role": "user", "content": [\n' + "".join(lines[3:])
    )
    _load_commands()
    db = tmp_path / "l.db"
    CliRunner().invoke(cli, ["--db", str(db), "sessions"])
    r = CliRunner().invoke(cli, ["--db", str(db), "import", str(copy)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    problems = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert len(problems) == 1 and f"{bad}:" in " ".join(r.output.split())
    assert "3 of 3 files not imported" in r.output
    if db.exists():
        with sqlite3.connect(db) as con:
            assert con.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
            assert con.execute("SELECT count(*) FROM events").fetchone() == (0,)

    bad.write_text("".join(lines))  # repaired: the whole session imports
    again = CliRunner().invoke(cli, ["--db", str(db), "import", str(copy)])
    assert again.exit_code == 0, again.output
    assert again.output.count(": session ") == 3


def test_an_imported_subagent_is_a_child_linked_to_its_task_call_with_its_final_message_as_report(tmp_path):
    from latch.agent.children import child_link, child_result

    parent, children = _paths()
    _load_commands()
    db = str(tmp_path / "l.db")
    assert CliRunner().invoke(cli, ["--db", db, "import", str(parent)]).exit_code == 0
    rows = json.loads(CliRunner().invoke(cli, ["--db", db, "sessions", "--json"]).output)
    by_source = {row["source"].rsplit("/", 1)[-1]: row for row in rows}
    explore, compact = by_source[CHILDREN[0]], by_source[CHILDREN[1]]
    assert "child" not in by_source[parent.name]  # a root has no link
    assert compact["child"] is None  # the compaction agent: a child, but no Task call spawned it
    with EventStore(db) as store:
        link = child_link(store, explore["id"])
        firsts = [s.event.text for s in store.events(explore["id"], kinds=["user_message"])]
        finals = [s.event for s in store.events(explore["id"], kinds=["assistant_message"])]
        report = child_result(store, explore["id"])
        assert (link.parent_session_id, link.call_id) == (
            by_source[parent.name]["id"],
            "toolu_017SvvKc8KLbhGMG3tXkf21Z",
        )
        assert link.brief == firsts[0] and link.config == {"agent_type": "Explore"} and link.engine is None
        assert link.model == next(m.model for m in finals if m.model)
        assert not finals[-1].tool_calls
        assert (report.status, report.summary) == (
            "completed",
            finals[-1].text.strip()[:4_000]
            + ("" if len(finals[-1].text.strip()) <= 4_000 else "\n[summary cut to 4,000 characters]"),
        )
        assert report.turns == len(finals)
        assert child_link(store, compact["id"]) is None and child_result(store, compact["id"]) is None
        assert store.count_events(explore["id"]) == explore["events"]  # derived, nothing stored
    assert explore["child"]["call_id"] == "toolu_017SvvKc8KLbhGMG3tXkf21Z"
    assert explore["child"]["report"]["status"] == "completed"
    assert (
        explore["child"]["report"]["summary"] == " ".join(report.summary.split())[:99] + "…"
        if len(" ".join(report.summary.split())) > 100
        else " ".join(report.summary.split())
    )
    listed = CliRunner().invoke(cli, ["--db", db, "sessions"], env={"COLUMNS": "400"}).output.splitlines()
    assert listed[1].startswith(by_source[parent.name]["id"][:8] + "  ")  # the parent, then its children under it
    assert listed[3].startswith("└ " + explore["id"][:8] + "  ") or listed[5].startswith("└ " + explore["id"][:8])
