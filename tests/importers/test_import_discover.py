"""``latch import DIR`` and ``latch import --discover`` on a fake home.

The fake home holds one real corpus file of each harness in its default place (the Claude Code one
with its ``subagents/`` folder). Session counts: 3 Claude Code (parent, sub-agent, compaction agent),
1 Codex, 2 Gemini CLI (JSON and JSONL layouts), 1 Copilot CLI, 4 Goose (the db's four sessions with
messages), 3 OpenCode (the three with messages) = 14; plus (no corpus file of these harnesses) the
tests/fixtures task folders of Cline (Linux VS Code global storage under ``$XDG_CONFIG_HOME``) and Roo Code
(the macOS place, ``~/Library/Application Support``), one session each, both format ``cline`` = 16.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus_support import require_corpus

from latch.cli import _load_commands, cli

_load_commands()

FIXTURES = Path(__file__).parents[1] / "fixtures"
CLINE_TASK = FIXTURES / "cline/globalStorage/saoudrizwan.claude-dev/tasks/1777000000000"
ROO_TASK = FIXTURES / "roo-code/globalStorage/rooveterinaryinc.roo-cline/tasks/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

CC = "8463c716-a2ea-4c14-9efa-87158ebd9f20"


def _home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    corpus = require_corpus()
    home = tmp_path / "home"
    data = tmp_path / "xdg-data"
    places = {
        f"claude-code/{CC}.jsonl": home / ".claude/projects/-home-me-alpha" / f"{CC}.jsonl",
        "codex/edgerunner_codex-session.jsonl": home / ".codex/sessions/2026/11/02/rollout-2026-11-02T10-00-00-a.jsonl",
        "gemini-cli/vibecodingtracker_session.json": home / ".gemini/tmp/beta/chats/session-2026-11-02-a.json",
        "gemini-cli/vibecodingtracker_session.jsonl": home / ".gemini/tmp/beta/chats/session-2026-11-03-b.jsonl",
        "copilot-cli/lantern_events.jsonl": home / ".copilot/session-state/0b1c/events.jsonl",
        "goose/lantern_sessions.db": data / "goose/sessions/sessions.db",
        "opencode/lantern_opencode.db": data / "opencode/opencode.db",
    }
    for src, dst in places.items():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / src, dst)
    shutil.copytree(corpus / "claude-code" / CC, home / ".claude/projects/-home-me-alpha" / CC)
    storage = "Code/User/globalStorage"
    shutil.copytree(CLINE_TASK, tmp_path / "xdg-config" / storage / "saoudrizwan.claude-dev/tasks" / CLINE_TASK.name)
    shutil.copytree(
        ROO_TASK, home / "Library/Application Support" / storage / "rooveterinaryinc.roo-cline/tasks" / ROO_TASK.name
    )
    # not logs: a hidden folder's file and a Codex file not named rollout-*
    (home / ".codex/sessions/notes.jsonl").write_text("{}\n")
    env = {
        "HOME": str(home),
        "XDG_DATA_HOME": str(data),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "CLAUDE_CONFIG_DIR": "",
        "CODEX_HOME": "",
        "COPILOT_HOME": "",
    }
    return home, env


def _run(env, *args):
    return CliRunner().invoke(cli, list(args), env=env)


def _sessions(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return dict(con.execute("SELECT format, count(*) FROM sessions GROUP BY format").fetchall())


def test_dry_run_lists_every_harness_and_creates_no_store(tmp_path):
    home, env = _home(tmp_path)
    db = tmp_path / "x.db"
    res = _run(env, "--db", str(db), "import", "--discover", "--dry-run")
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines() if "\t" in line]
    formats = [fmt for _, fmt in rows]
    assert formats == ["claude-code"] * 3 + [
        "codex",
        "copilot-cli",
        "gemini-cli",
        "gemini-cli",
        "cline",
        "cline",
        "goose",
        "opencode",
    ]
    # the sub-agent files come right after their parent
    assert rows[0][0].endswith(f"{CC}.jsonl") and rows[1][0].endswith(f"{CC}/subagents/agent-a7be2f0.jsonl")
    assert "11 files would be imported" in res.stdout
    assert "notes.jsonl" not in res.stdout
    # a task folder is one file: its ui_messages.json and task_metadata.json are read with the history
    assert [r[0].rsplit("/", 1)[1] for r in rows if r[1] == "cline"] == ["api_conversation_history.json"] * 2
    assert not db.exists()


def test_discover_imports_them_all(tmp_path):
    home, env = _home(tmp_path)
    db = tmp_path / "x.db"
    res = _run(env, "--db", str(db), "import", "--discover")
    assert res.exit_code == 0, res.output
    assert _sessions(db) == {
        "claude-code": 3,
        "codex": 1,
        "gemini-cli": 2,
        "copilot-cli": 1,
        "goose": 4,
        "opencode": 3,
        "cline": 2,
    }
    with sqlite3.connect(db) as con:  # the two sub-agents are children of the parent session
        assert con.execute("SELECT count(*) FROM sessions WHERE parent_id IS NOT NULL").fetchone()[0] == 2
    again = _run(env, "--db", str(db), "import", "--discover")
    assert again.exit_code == 0 and again.stdout.count(", 0 new events") == 16


def test_project_and_since_filter(tmp_path):
    home, env = _home(tmp_path)
    res = _run(env, "--db", str(tmp_path / "x.db"), "import", "--discover", "--dry-run", "--project", "alpha")
    assert res.exit_code == 0, res.output
    assert "3 files would be imported" in res.stdout and "claude-code" in res.stdout
    old = time.time() - 10 * 86400
    for p in home.rglob("*"):
        if p.is_file() and "copilot" not in str(p):
            os.utime(p, (old, old))
    for p in [*(tmp_path / "xdg-data").rglob("*"), *(tmp_path / "xdg-config").rglob("*")]:
        if p.is_file():
            os.utime(p, (old, old))
    today = time.strftime("%Y-%m-%d")
    res = _run(env, "--db", str(tmp_path / "x.db"), "import", "--discover", "--dry-run", "--since", today)
    assert res.exit_code == 0, res.output
    assert "1 file would be imported" in res.stdout and "copilot-cli" in res.stdout
    bad = _run(env, "--db", str(tmp_path / "x.db"), "import", "--discover", "--since", "02/11/2026")
    assert bad.exit_code == 2 and not (tmp_path / "x.db").exists()


def test_import_dir_skips_unclaimed_and_lists_errors(tmp_path):
    corpus = require_corpus()
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    shutil.copyfile(corpus / "codex/edgerunner_codex-session.jsonl", folder / "sub" / "good.jsonl")
    shutil.copyfile(corpus / "codex/edgerunner_codex-session.jsonl", folder / ".hidden" / "also.jsonl")
    (folder / "readme.txt").write_text("just some notes\n")
    lines = (corpus / "codex/edgerunner_codex-session.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "broken.jsonl").write_bytes(b"".join(lines[:5]) + b"{not json\n" + b"".join(lines[5:]))
    db = tmp_path / "x.db"
    res = CliRunner().invoke(cli, ["--db", str(db), "import", str(folder)])
    assert res.exit_code == 1
    assert "good.jsonl: session" in res.stdout and "532 new events" in res.stdout
    assert f"1 file skipped (no importer recognizes them): {folder / 'readme.txt'}" in res.stdout
    err = res.stderr.splitlines()
    assert err[0].startswith(f"Error: {folder / 'broken.jsonl'}:line 6") and err[-1] == "1 of 2 files not imported"
    assert "also.jsonl" not in res.output
    assert _sessions(db) == {"codex": 1}


@pytest.mark.parametrize("args", [["--discover", "some.jsonl"], [], ["--since", "2026-01-01", "x.jsonl"]])
def test_bad_combinations_are_one_usage_error(tmp_path, args):
    res = CliRunner().invoke(cli, ["--db", str(tmp_path / "x.db"), "import", *args])
    assert res.exit_code == 2 and not (tmp_path / "x.db").exists()
