"""``latch run`` under rotation, driven by a model that decides only from its requests
(tests/view_driven_agent.py): at a 10k window, through a dozen and more cache epochs, the view always shows
which files the agent has read (the canonical state's working set), so it never reads one twice, and every
planted fact reaches its final answer (``search_history`` shows the passage that matched, the notes keep it)."""

from __future__ import annotations

import pytest
from view_driven_agent import run_latch

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


def test_no_re_reads_and_every_fact_answered_through_many_rotations(tmp_path):
    agent, proc, epochs = run_latch(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    assert epochs >= 10  # the views rotated through at least ten cache epochs
    assert agent.re_reads == 0 and set(agent.reads.values()) == {1} and len(agent.reads) == 24
    assert agent.lost == [] and agent.answered == agent.facts
    # each fact was searched at most once, and every answer line is in the run's output
    assert max(agent.searches.values()) <= 1
    assert all(f"{k} = {v}" in proc.stdout for k, v in agent.facts.items())


def test_the_readme_local_model_budget_reads_ten_large_files_and_answers(tmp_path):
    """The README's local-model budget (8,192 window, 1,024 reserve) with every default tool: the tool schemas
    would take most of the window, so the core set is offered and the rest on demand (``load_tools``); the 17 KB
    files are read in pages sized to the room left; the run ends by itself with every fact answered."""
    agent, proc, epochs = run_latch(
        tmp_path, files=10, lines=260, window=8_192, reserve=1_024, recent=None, tools=None, max_turns=200
    )
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    assert "cannot hold" not in proc.stderr + proc.stdout
    assert min((tmp_path / "ws" / n).stat().st_size for n in agent.files) > 17_000
    assert agent.re_reads == 0 and all(n == 1 for n in agent.pages.values()) and len(agent.reads) == 10
    assert max(offset for _, offset in agent.pages) > 15_000  # every file read to its end, page by page
    assert agent.lost == [] and agent.answered == agent.facts and epochs >= 10
