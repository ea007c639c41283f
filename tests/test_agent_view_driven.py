"""``latch run`` under rotation, driven by a model that decides only from its requests
(tests/view_driven_agent.py): at a 10k window, through a dozen and more cache epochs, the view always shows
which files the agent has read (the canonical state's working set), so it never reads one twice, and every
planted fact reaches its final answer (``search_history`` shows the passage that matched, the notes keep it)."""

from __future__ import annotations

from view_driven_agent import run_latch


def test_no_re_reads_and_every_fact_answered_through_many_rotations(tmp_path):
    agent, proc, epochs = run_latch(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    assert epochs >= 10  # the views rotated through at least ten cache epochs
    assert agent.re_reads == 0 and set(agent.reads.values()) == {1} and len(agent.reads) == 24
    assert agent.lost == [] and agent.answered == agent.facts
    # each fact was searched at most once, and every answer line is in the run's output
    assert max(agent.searches.values()) <= 1
    assert all(f"{k} = {v}" in proc.stdout for k, v in agent.facts.items())


def test_a_small_window_reads_large_files_in_pages_sized_to_the_room_left(tmp_path):
    """The README's local-model budget (8,192 window, 1,024 reserve) with every default tool: the 16 KB files
    are read in pages that fit what the tool schemas leave, so no request overflows; each page is read once
    while the state's small budget still lists the file (re-reads start when the working set outgrows it)."""
    agent, proc, epochs = run_latch(tmp_path, files=10, lines=240, window=8_192, reserve=1_024, recent=None,
                                    tools=None, max_turns=60)
    assert proc.returncode == 3, proc.stderr[-2000:]  # --max-turns, not an overflow (exit 1)
    assert "cannot hold" not in proc.stderr + proc.stdout
    assert agent.requests == 60 and epochs >= 30
    assert len(agent.reads) >= 4 and all(n == 1 for n in agent.pages.values())  # every page read once so far
    assert max(offset for _, offset in agent.pages) > 10_000  # deep into the files, page by page
