"""Canonical state: kernel tools, reduction, revisions, rendering under a budget (spec: "Sessions & continuity")."""

from __future__ import annotations

import json
import re

import pytest
from kernel_support import chatter, session, state, turn

from latch.engine import continuity_context_engine_factory
from latch.engine.port import ContextOverflow, ContextRequest, EngineProfile
from latch.events import AssistantMessage, UserMessage
from latch.host.session import StoreKernelWriter, StoreSessionReader
from latch.hotpaths import estimate_tokens
from latch.kernel import KERNEL_TOOLS, KernelToolError, StateOverflow, apply_kernel_tool, canonical_state
from latch.kernel.events import StateUpdate, ValidationEvidence
from latch.kernel.ledger import clear_cache
from latch.kernel.tools import openai_tools

TOOL_NAMES = [
    "set_goal",
    "add_constraint",
    "record_decision",
    "propose_hypothesis",
    "reject_hypothesis",
    "add_note",
    "ask_question",
    "plan_action",
    "set_criterion",
    "require_validation",
    "record_disproof",
]


def test_kernel_tool_schemas_are_provider_ready():
    assert [t["name"] for t in KERNEL_TOOLS] == TOOL_NAMES
    for tool in KERNEL_TOOLS:
        schema = tool["input_schema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"]) and tool["description"]
    first = openai_tools()[0]
    assert first == {
        "type": "function",
        "function": {
            "name": "set_goal",
            "description": KERNEL_TOOLS[0]["description"],
            "parameters": KERNEL_TOOLS[0]["input_schema"],
        },
    }
    json.dumps(KERNEL_TOOLS)  # JSON-ready


@pytest.mark.parametrize(
    "name, args, message",
    [
        ("set_goal", {}, "set_goal: field 'goal' is required"),
        ("set_goal", {"goal": 3}, "set_goal: field 'goal' must be a string, got int"),
        ("set_goal", {"goal": "  "}, "set_goal: field 'goal' must not be empty"),
        ("set_goal", {"goal": "x", "owner": "me"}, "set_goal: unknown field 'owner'"),
        ("set_goal", '{"goal": ', "set_goal: arguments are not valid JSON"),
        ("set_goal", ["x"], "set_goal: arguments must be a JSON object, got list"),
        ("plan_action", {"action": "x", "status": "later"}, "plan_action: field 'status' must be one of pending"),
        ("plan_action", {}, "plan_action: field 'action' is required (or 'id'"),
        ("plan_action", {"id": "A9", "status": "done"}, "plan_action: field 'id': no such id 'A9'"),
        (
            "record_disproof",
            {"claim": "c", "reason": "r", "files": ["a", 2]},
            "record_disproof: field 'files[1]' must be a string, got int",
        ),
        (
            "reject_hypothesis",
            {"hypothesis": "H1", "reason": "no"},
            "reject_hypothesis: field 'hypothesis': no hypothesis",
        ),
        (
            "record_decision",
            {"decision": "d", "supersedes": "D4"},
            "record_decision: field 'supersedes': no such id 'D4'",
        ),
        ("make_coffee", {}, "unknown kernel tool 'make_coffee'"),
    ],
)
def test_kernel_tool_errors_name_the_field_and_leave_the_store_unchanged(store, name, args, message):
    sid = session(store)
    before = store.count_events()
    with pytest.raises(KernelToolError, match=message.replace("(", r"\(").replace("[", r"\[")):
        apply_kernel_tool(store, sid, name, args)
    assert store.count_events() == before


def test_kernel_tools_build_the_state(store):
    sid = session(store)
    apply_kernel_tool(store, sid, "set_goal", {"goal": "Port the parser to Rust"})
    apply_kernel_tool(store, sid, "add_constraint", {"constraint": "Never change the public API"})
    apply_kernel_tool(
        store, sid, "add_constraint", {"constraint": "Keep the API; additive changes only", "replaces": "C1"}
    )
    apply_kernel_tool(store, sid, "record_decision", {"decision": "Use nom", "rationale": "zero-copy"})
    apply_kernel_tool(store, sid, "record_decision", {"decision": "Use winnow", "supersedes": "D1"})
    apply_kernel_tool(store, sid, "propose_hypothesis", {"hypothesis": "The lexer leaks"})
    ev = apply_kernel_tool(store, sid, "reject_hypothesis", '{"hypothesis": "H1", "reason": "valgrind is clean"}')
    apply_kernel_tool(store, sid, "ask_question", {"question": "Which MSRV?"})
    apply_kernel_tool(store, sid, "ask_question", {"id": "Q1", "answer": "1.75"})
    apply_kernel_tool(store, sid, "plan_action", {"action": "Write the lexer"})
    apply_kernel_tool(store, sid, "plan_action", {"id": "A1", "status": "done"})
    apply_kernel_tool(store, sid, "set_criterion", {"criterion": "All fixtures parse"})
    apply_kernel_tool(store, sid, "set_criterion", {"id": "K1", "met": True})
    apply_kernel_tool(store, sid, "require_validation", {"requirement": "unit tests pass", "command": "cargo test"})
    apply_kernel_tool(store, sid, "add_note", {"note": "fixtures live in tests/data"})
    assert isinstance(ev.event, StateUpdate) and ev.event.arguments["reason"] == "valgrind is clean"
    with pytest.raises(KernelToolError, match="H1 is already rejected"):
        apply_kernel_tool(store, sid, "reject_hypothesis", {"hypothesis": "The lexer leaks", "reason": "again"})
    s = state(store, sid)
    assert s.goal == "Port the parser to Rust"
    assert [(c["id"], c["active"]) for c in s.constraints] == [("C1", False), ("C2", True)]
    assert [(d["id"], d["active"]) for d in s.decisions] == [("D1", False), ("D2", True)]
    assert [(h["id"], h["status"], h["reason"]) for h in s.hypotheses] == [("H1", "rejected", "valgrind is clean")]
    assert [(q["text"], q["answer"]) for q in s.questions] == [("Which MSRV?", "1.75")]
    assert [(a["text"], a["status"]) for a in s.actions] == [("Write the lexer", "done")]
    assert [(k["text"], k["met"]) for k in s.criteria] == [("All fixtures parse", True)]
    assert [(r["id"], r["requirement"], r["command"]) for r in s.requirements] == [
        ("V1", "unit tests pass", "cargo test")
    ]
    text = s.render(10_000, estimate_tokens)
    assert "- [C2] Keep the API; additive changes only" in text and "Never change" not in text
    assert "- [D2] Use winnow" in text and "Use nom" not in text
    assert "- [H1] REJECTED: The lexer leaks (valgrind is clean)" in text
    assert "- [Q1] Which MSRV? → answered: 1.75" in text
    assert "- [V1] unit tests pass (command: cargo test)" in text
    assert "not certified: V1 cargo test: never validated" in text
    assert store.search("valgrind clean")[0].seq == ev.seq  # kernel records are found by exact recall


def test_early_constraint_decision_and_rejection_survive_5000_events(store):
    sid = session(store)
    apply_kernel_tool(store, sid, "set_goal", {"goal": "Make the importer streaming"})
    apply_kernel_tool(store, sid, "add_constraint", {"constraint": "Never load a whole transcript into memory"})
    apply_kernel_tool(store, sid, "record_decision", {"decision": "Parse with ijson", "rationale": "it streams"})
    apply_kernel_tool(store, sid, "propose_hypothesis", {"hypothesis": "The leak is in the FTS writer"})
    apply_kernel_tool(store, sid, "reject_hypothesis", {"hypothesis": "H1", "reason": "heap profile is flat"})
    diag = turn(store, sid, "Bash", {"command": "python -X importtime x.py"}, "diagnostic ZX-4471: import took 9s")
    chatter(store, sid, 5000)
    assert store.count_events(sid) == 5 + 2 + 5000
    s = state(store, sid)
    assert s.constraints[0]["text"] == "Never load a whole transcript into memory" and s.constraints[0]["active"]
    assert s.decisions[0]["text"] == "Parse with ijson" and s.decisions[0]["active"]
    assert s.hypotheses[0]["status"] == "rejected"
    text = s.render(200, estimate_tokens)
    assert "Never load a whole transcript into memory" in text and "Parse with ijson" in text
    assert "REJECTED: The leak is in the FTS writer" in text and "- [H1] The leak" not in text
    assert store.search("ZX-4471")[0].seq == diag  # exact raw recall of the early diagnostic


def test_incremental_reduction_equals_a_rebuild_at_every_prefix(store):
    sid = session(store, fmt="claude-code")
    apply_kernel_tool(store, sid, "set_goal", {"goal": "g"})
    turn(store, sid, "Read", {"file_path": "/ws/a.py"}, "1 a")
    turn(store, sid, "Bash", {"command": "pytest"}, "1 failed", is_error=True)
    turn(store, sid, "Edit", {"file_path": "/ws/a.py", "old_string": "a", "new_string": "b"}, "ok")
    turn(store, sid, "Bash", {"command": "pytest"}, "3 passed")
    apply_kernel_tool(store, sid, "record_decision", {"decision": "d"})
    top = store.max_seq()
    forward = [canonical_state(store, sid, seq).to_json() for seq in range(1, top + 1)]
    revisions = [f["revision"] for f in forward]
    assert revisions == sorted(revisions) and revisions[-1] > revisions[0]
    for seq in range(top, 0, -1):  # backwards: every call rebuilds from the log
        clear_cache()
        assert canonical_state(store, sid, seq).to_json() == forward[seq - 1]


def test_revision_moves_only_when_the_state_changes(store):
    sid = session(store)
    apply_kernel_tool(store, sid, "set_goal", {"goal": "g"})
    r1 = state(store, sid).revision
    store.append(sid, [UserMessage(text="hello"), AssistantMessage(text="hi")])
    assert state(store, sid).revision == r1
    apply_kernel_tool(store, sid, "add_note", {"note": "n"})
    assert state(store, sid).revision == r1 + 1
    assert canonical_state(store, sid, 1).revision == r1  # an earlier seq is the earlier truth


def test_empty_state(store):
    sid = session(store)
    store.append(sid, [UserMessage(text="hi")])
    s = state(store, sid)
    assert s.is_empty and s.render(100, estimate_tokens) == ""
    assert {
        "revision",
        "generation",
        "files",
        "evidence",
        "failures",
        "constraints",
        "decisions",
        "hypotheses",
        "goal",
        "actions",
        "questions",
        "criteria",
        "notes",
        "disproofs",
    } <= set(s.to_json())


def _full(store):
    sid = session(store)
    apply_kernel_tool(store, sid, "set_goal", {"goal": "Ship v2"})
    apply_kernel_tool(store, sid, "add_constraint", {"constraint": "No network in tests"})
    for i in range(3):
        apply_kernel_tool(store, sid, "record_decision", {"decision": f"decision number {i}"})
        apply_kernel_tool(store, sid, "propose_hypothesis", {"hypothesis": f"hypothesis number {i}"})
        apply_kernel_tool(store, sid, "add_note", {"note": f"note number {i}"})
    return state(store, sid)


def test_render_drops_notes_then_hypotheses_then_decisions(store):
    s = _full(store)
    full = s.render(10_000, estimate_tokens)
    assert full.endswith("Notes:\n- [N1] note number 0\n- [N2] note number 1\n- [N3] note number 2")
    tight = s.render(estimate_tokens(full) - 1, estimate_tokens)
    assert "Notes (1 older omitted):" in tight and "note number 0" not in tight and "note number 2" in tight
    head = full.splitlines()[:4]
    seen = []
    for budget in range(estimate_tokens(full), estimate_tokens("\n".join(head)) - 1, -1):
        text = s.render(budget, estimate_tokens)
        assert estimate_tokens(text) <= budget and text.splitlines()[:4] == head
        kept = {
            kind: sum(f"{kind} number" in line for line in text.splitlines())
            for kind in ("note", "hypothesis", "decision")
        }
        if kept["hypothesis"] < 3:
            assert kept["note"] == 0, (budget, text)
        if kept["decision"] < 3:
            assert kept["hypothesis"] == 0, (budget, text)
        seen.append(tuple(kept.values()))
    assert seen[0] == (3, 3, 3) and seen[-1] == (0, 0, 0)
    assert {(0, 3, 3), (0, 0, 3), (0, 0, 1)} <= set(seen)  # each tier empties before the next is touched
    partial = (
        "Canonical state\nGoal: Ship v2\nConstraints:\n- [C1] No network in tests\n"
        "Decisions (1 older omitted):\n- [D2] decision number 1\n- [D3] decision number 2\n"
        "Omitted for budget: 3 hypotheses, 3 notes"
    )
    assert s.render(estimate_tokens(partial), estimate_tokens) == partial


def test_goal_and_constraints_never_drop_and_overflow_is_a_clear_error(store):
    s = _full(store)
    head = "\n".join(s.render(10_000, estimate_tokens).splitlines()[:4])
    assert head.endswith("Goal: Ship v2\nConstraints:\n- [C1] No network in tests")
    with pytest.raises(StateOverflow) as err:
        s.render(estimate_tokens(head) - 1, estimate_tokens)
    assert isinstance(err.value, ContextOverflow)
    assert err.value.breakdown == {
        "goal_tokens": estimate_tokens("Goal: Ship v2"),
        "constraints_tokens": estimate_tokens("Constraints:\n- [C1] No network in tests"),
        "budget_tokens": estimate_tokens(head) - 1,
    }
    assert "goal and constraints alone exceed the state budget" in str(err.value)


def test_a_state_taken_earlier_is_unchanged_by_later_facts(store):
    sid = session(store, fmt="claude-code")
    apply_kernel_tool(store, sid, "set_goal", {"goal": "g"})
    turn(store, sid, "Bash", {"command": "pytest"}, "1 failed", is_error=True)
    early = state(store, sid)  # nothing read from it yet: it still reads the reducer
    apply_kernel_tool(store, sid, "add_note", {"note": "a later note"})
    turn(store, sid, "Bash", {"command": "pytest"}, "3 passed")
    late = state(store, sid)
    assert late.revision > early.revision
    text = early.render(1_000, estimate_tokens)
    assert "- failed: pytest (current) — 1 failed" in text and "later" not in text
    assert "- passed: pytest (current)" in late.render(1_000, estimate_tokens)
    data = early.to_json()
    clear_cache()
    rebuilt = canonical_state(store, sid, early.until_seq)
    assert rebuilt.to_json() == data and rebuilt.render(1_000, estimate_tokens) == text


def test_states_of_one_revision_share_their_rendering(store):
    sid = session(store)
    apply_kernel_tool(store, sid, "set_goal", {"goal": "g"})
    first = state(store, sid)
    text = first.render(500, estimate_tokens)
    store.append(sid, [UserMessage(text="hello")])  # no state change: the same revision at a later seq
    again = state(store, sid)
    assert (again.revision, again.until_seq) == (first.revision, first.until_seq + 1)
    assert again.render(500, estimate_tokens) is text  # rendered once per (revision, budget, estimator)


def test_render_formats_only_the_newest_lines_that_fit(store):
    sid = session(store)
    apply_kernel_tool(store, sid, "set_goal", {"goal": "keep the suite green"})
    store.append(
        sid,
        [ValidationEvidence(command=f"pytest tests/test_{i}.py", status="passed", exit_code=0) for i in range(5_000)],
    )
    estimated: list[str] = []

    def estimate(text: str) -> int:
        estimated.append(text)
        return estimate_tokens(text)

    lines = state(store, sid).render(300, estimate).splitlines()
    kept = lines[3:-2]
    assert lines[:2] == ["Canonical state", "Goal: keep the suite green"]
    assert lines[2] == f"Validation evidence ({5_000 - len(kept)} older omitted):" and len(kept) > 10
    assert kept == [f"- passed: pytest tests/test_{i}.py (current)" for i in range(5_000 - len(kept), 5_000)]
    assert lines[-2:] == ["Certification:", "- certified"]
    # a few estimates of texts about the budget's size, never the 5,000 lines
    assert len(estimated) <= 8 and max(map(len, estimated)) < 5 * 4 * 300


def test_the_working_set_lists_reads_edits_and_commands_newest_first(store):
    sid = session(store, fmt="claude-code")
    apply_kernel_tool(store, sid, "set_goal", {"goal": "fix the parser"})
    turn(store, sid, "Bash", {"command": "pytest -q"}, "5 passed")
    text = state(store, sid).render(2_000, estimate_tokens)
    assert text == (
        "Canonical state\nGoal: fix the parser\nValidation evidence:\n- passed: pytest -q (current)\n"
        "Certification:\n- certified\nWorking set: commands run (newest first):\n- `pytest -q` → ok"
    )
    turn(store, sid, "Read", {"file_path": "/ws/parser.py"}, "1 def parse(): ...")
    turn(store, sid, "Edit", {"file_path": "/ws/parser.py", "old_string": "...", "new_string": "pass"}, "ok")
    turn(store, sid, "Read", {"file_path": "/ws/lexer.py"}, "1 b")
    turn(store, sid, "Bash", {"command": "pytest -q tests/test_lexer.py"}, "1 failed\nError: boom", is_error=True)
    text = state(store, sid).render(2_000, estimate_tokens)
    assert text.split("Working set: files (newest first):\n", 1)[1] == (
        "- lexer.py: read ×1\n"
        "- parser.py: read ×1, changed ×1 by Edit\n"
        "Working set: commands run (newest first):\n"
        "- `pytest -q tests/test_lexer.py` → failed: Error: boom\n"
        "- `pytest -q` → ok"
    )


def test_the_update_key_ignores_what_the_conversation_shows(store):
    sid = session(store, fmt="claude-code")
    apply_kernel_tool(store, sid, "set_goal", {"goal": "fix the parser"})
    turn(store, sid, "Bash", {"command": "pytest -q"}, "5 passed")
    passed = state(store, sid)
    keys = [passed.update_key]
    # a read, an edit (the evidence goes stale), another command: the conversation shows each of them
    for name, args, out in [
        ("Read", {"file_path": "/ws/parser.py"}, "1 def parse(): ..."),
        ("Edit", {"file_path": "/ws/parser.py", "old_string": "...", "new_string": "pass"}, "ok"),
        ("Bash", {"command": "ls"}, "parser.py"),
    ]:
        turn(store, sid, name, args, out)
        now = state(store, sid)
        assert now.revision > passed.revision and now.render(2_000, estimate_tokens) != passed.render(
            2_000, estimate_tokens
        )
        keys.append(now.update_key)
    assert len(set(keys)) == 1
    # what it does not show: a decision, a new goal, a constraint
    for tool, args in [
        ("record_decision", {"decision": "round per line"}),
        ("set_goal", {"goal": "fix the lexer"}),
        ("add_constraint", {"constraint": "integer cents"}),
    ]:
        apply_kernel_tool(store, sid, tool, args)
        keys.append(state(store, sid).update_key)
    assert len(set(keys)) == 4 and len(keys[-1]) == 64


def test_the_engine_appends_a_state_delta_only_when_the_update_key_changes(store):
    sid = session(store, fmt="claude-code")
    engine = continuity_context_engine_factory(
        EngineProfile(
            session_id=sid,
            model=None,
            reader=StoreSessionReader(store, sid),
            writer=StoreKernelWriter(store, sid, "continuity:test"),
        )
    )

    def state_sections() -> list[str]:
        store.append(sid, [UserMessage(text="go on")])
        view = engine.materialize(ContextRequest(session_id=sid))
        return [m.content for m in view.messages if m.kind == "kernel_context" and "<canonical-state" in m.content]

    apply_kernel_tool(store, sid, "set_goal", {"goal": "fix the parser " * 40})
    turn(store, sid, "Bash", {"command": "pytest -q"}, "5 passed")
    counts = [len(state_sections())]
    turn(store, sid, "Read", {"file_path": "/ws/parser.py"}, "1 def parse(): ...")
    counts.append(len(state_sections()))  # a new revision the conversation shows: no delta
    turn(store, sid, "Edit", {"file_path": "/ws/parser.py", "old_string": "...", "new_string": "pass"}, "ok")
    counts.append(len(state_sections()))  # a pass the snapshot showed current went stale: one delta says so
    turn(store, sid, "Bash", {"command": "pytest -q"}, "5 passed")
    turn(store, sid, "Edit", {"file_path": "/ws/parser.py", "old_string": "pass", "new_string": "..."}, "ok")
    counts.append(len(state_sections()))  # a pass and its staleness the conversation shows: no delta
    apply_kernel_tool(store, sid, "record_decision", {"decision": "keep the lexer"})
    sections = state_sections()  # a decision: one delta, the complete state with the goal stated once
    counts.append(len(sections))
    assert counts == [1, 1, 2, 2, 3]
    assert "- passed: pytest -q (STALE: the workspace changed since)" in sections[1]
    assert "not certified" in sections[1]
    body = re.search(r'<canonical-state revision="\d+">\n(.*?)\n</canonical-state>', sections[-1], re.S).group(1)
    assert body.startswith(
        "Canonical state\nGoal: unchanged, as stated in this epoch's snapshot\nValidation evidence:\n"
        "- passed: pytest -q (STALE: the workspace changed since)\n"
    )
    assert "Decisions:\n- [D1] keep the lexer" in body and "parser.py: read ×1, changed ×2 by Edit" in body
    first = re.search(r'<canonical-state revision="\d+">\n(.*?)\n</canonical-state>', sections[0], re.S).group(1)
    assert first.count("fix the parser") == 40 and "fix the parser" not in sections[1]


def test_a_closed_failure_lineage_is_not_rendered_live_or_frozen(store):
    """Canonical materialization renders only the lineages still active (spec: "Episodes": failure
    supervision); a lineage a success closed stays in ``failures`` (inactive) but leaves the text, whether
    the state is read from the live reducer or from a revision frozen before the reducer moved on."""
    sid = session(store, fmt="claude-code")
    turn(store, sid, "Bash", {"command": "cargo build"}, "error: linker `cc` not found", is_error=True)
    turn(store, sid, "Bash", {"command": "cargo build"}, "error: linker `cc` not found", is_error=True)
    turn(store, sid, "Bash", {"command": "pytest -q"}, "E   ImportError: no module named zlib", is_error=True)
    turn(store, sid, "Bash", {"command": "cargo build"}, "Finished dev profile")  # closes the linker lineage
    live = state(store, sid)
    assert [(f["signature"], f["count"], f["active"]) for f in live.failures] == [
        ("error: linker <q> not found", 2, False),
        ("E ImportError: no module named zlib", 1, True),
    ]

    def lineage_lines(text: str) -> list[str]:
        lines = text.splitlines()
        start = lines.index("Active failure lineages:") + 1
        end = next((i for i in range(start, len(lines)) if not lines[i].startswith("- ")), len(lines))
        return lines[start:end]

    expected = ["- Bash ×1: E ImportError: no module named zlib — last: E   ImportError: no module named zlib"]
    assert lineage_lines(live.render(4000, estimate_tokens)) == expected
    turn(store, sid, "Read", {"file_path": "/ws/setup.py"}, "import zlib")  # the reducer moves on: live is frozen
    assert state(store, sid).revision > live.revision
    assert lineage_lines(live.render(4001, estimate_tokens)) == expected  # a fresh render of the frozen revision
