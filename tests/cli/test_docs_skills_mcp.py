"""The agent guide (docs/run.md) documents ``latch skills`` and ``latch mcp list`` with every option they take."""

from __future__ import annotations

from corpus_support import REPO

from latch.cli import _load_commands, cli


def test_the_run_guide_documents_skills_and_mcp_list_and_their_options():
    _load_commands()
    readme = (REPO / "docs" / "run.md").read_text()
    for path, cmd in ((("skills",), cli.commands["skills"]), (("mcp", "list"), cli.commands["mcp"].commands["list"])):
        line = "latch " + " ".join(path)
        assert line in readme, f"docs/run.md does not show `{line}`"
        shown = [ln for ln in readme.splitlines() if ln.startswith(line)]
        for param in cmd.params:
            for opt in param.opts:
                assert any(f" {opt}" in ln for ln in shown), f"docs/run.md does not document `{line} {opt}`"
