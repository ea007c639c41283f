"""Failure lineages in a session's reducer: a failure opens or extends the streak of its ``(tool, signature)``; a
success closes every open streak of its tool that holds one of its actions, at the success's seq. The reducer's
streaks (every field, in their order) equal that reading applied fact by fact over the open streaks, on generated
sequences of failures and successes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from latch.kernel.derive import ToolFailure, ToolSuccess
from latch.kernel.ledger import Workspace
from latch.kernel.state import SessionReducer

_TOOLS = ["Bash", "Read", "exec_command"]
_ACTIONS = ["pytest -q", "make", "a.py", "b.py", "validation:pytest", "git push"]

_facts = st.lists(
    st.one_of(
        st.builds(
            ToolFailure,
            st.sampled_from(_TOOLS),
            st.sampled_from(["boom", "no such file <path>", "<n> failed"]),
            st.lists(st.sampled_from(_ACTIONS), max_size=3).map(tuple),
            st.sampled_from(["", "boom!"]),
        ),
        st.builds(ToolSuccess, st.sampled_from(_TOOLS), st.lists(st.sampled_from(_ACTIONS), max_size=3).map(tuple)),
    ),
    max_size=60,
)


def _streaks_fact_by_fact(facts: list) -> tuple[list[dict], list[bool]]:
    """The streaks (in the order they started) and whether each fact changed the state, read one fact at a time
    over every open streak."""
    streaks: list[dict] = []
    changed = []
    for seq, fact in enumerate(facts, 1):
        if isinstance(fact, ToolFailure):
            lin = next(
                (s for s in streaks if s["active"] and (s["tool"], s["signature"]) == (fact.tool, fact.signature)),
                None,
            )
            if lin is None:
                lin = {"tool": fact.tool, "signature": fact.signature, "count": 0, "first_seq": seq, "actions": {}}
                lin["active"] = True
                streaks.append(lin)
            lin["count"] += 1
            lin["last_seq"], lin["excerpt"] = seq, fact.excerpt
            lin["actions"].update(dict.fromkeys(fact.actions))
            changed.append(True)
            continue
        closing = [
            s
            for s in streaks
            if s["active"] and s["tool"] == fact.tool and any(a in s["actions"] for a in fact.actions)
        ]
        for s in closing:
            s["active"], s["closed_seq"], s["actions"] = False, seq, list(s["actions"])
        changed.append(bool(closing) or fact.tool in ("Bash", "exec_command"))
    return streaks, changed


@given(_facts)
@settings(max_examples=1_000, deadline=None)
def test_streaks_open_and_close_as_read_fact_by_fact(facts):
    red = SessionReducer("s")
    ws = Workspace("session:s")
    changed = [red._apply((seq, 0), fact, ws) for seq, fact in enumerate(facts, 1)]
    want, want_changed = _streaks_fact_by_fact(facts)
    got = [dict(lin, actions=list(lin["actions"])) for lin in red.failures]
    assert got == [dict(s, actions=list(s["actions"])) for s in want]
    assert changed == want_changed
    assert list(red.active_failures) == [(s["tool"], s["signature"]) for s in want if s["active"]]
    holding: dict = {}
    for s in want:
        for a in s["actions"] if s["active"] else ():
            holding.setdefault((s["tool"], a), set()).add((s["tool"], s["signature"]))
    assert red.failing == holding
