"""The README documents ``latch skills`` and ``latch mcp list`` with every option they take."""

from __future__ import annotations

from latch.cli import _load_commands, cli

from corpus_support import REPO


def test_readme_documents_skills_and_mcp_list_and_their_options():
    _load_commands()
    readme = (REPO / "README.md").read_text()
    for path, cmd in ((("skills",), cli.commands["skills"]), (("mcp", "list"), cli.commands["mcp"].commands["list"])):
        line = "latch " + " ".join(path)
        assert line in readme, f"README.md does not show `{line}`"
        shown = [ln for ln in readme.splitlines() if ln.startswith(line)]
        for param in cmd.params:
            for opt in param.opts:
                assert any(f" {opt}" in ln for ln in shown), f"README.md does not document `{line} {opt}`"
