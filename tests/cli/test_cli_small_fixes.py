"""Small things a new user met: ``latch group NAME`` finds the group ``latch run --group NAME`` started; an MCP server
that dies at start shows the end of its stderr; a bad SKILL.md warns only where skills are used; ``latch`` alone is
the help (exit 0); ``latch import -`` names stdin, not a removed copy; ``latch doctor`` pads nothing in a pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_providers import Reply, serve_openai

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_", "COLUMNS"))}
    env["LATCH_HOME"] = str(tmp_path / "home")
    return env


def latch(tmp_path: Path, *args: str, cwd: Path | None = None, stdin: str | None = None):
    return subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), *args],
        cwd=cwd or tmp_path,
        env=_env(tmp_path),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _sid(out: str) -> str:
    return out.split("session ", 1)[1].split()[0]


def test_group_by_the_name_latch_run_gave_it(tmp_path):
    with serve_openai([Reply("Planned.")]) as server:
        r = latch(
            tmp_path,
            "run",
            "plan the work",
            "--group",
            "review",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--sandbox",
            "off",
        )
    assert r.returncode == 0, r.stderr
    root = _sid(r.stdout)
    g = latch(tmp_path, "group", "review")
    assert g.returncode == 0, g.stderr
    assert g.stdout.splitlines()[0] == f"group {root} · 0 tasks · 0 members · messages 0/0 delivered"
    bad = latch(tmp_path, "group", "nosuch")
    assert bad.returncode == 1
    assert bad.stderr == (
        "Error: no agent group 'nosuch' (no session is named so by latch run --group, and no "
        "session id starts with it)\n"
    )


def test_an_mcp_server_that_dies_at_start_shows_its_stderr(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    script = (
        "import sys; print('starting', file=sys.stderr); print('boom: MY_TOKEN is not set', file=sys.stderr); "
        "sys.exit(3)"
    )
    (home / "config.toml").write_text(f'[mcp.servers.bad]\ncommand = "{sys.executable}"\nargs = ["-c", "{script}"]\n')
    r = latch(tmp_path, "mcp", "list", "--connect")
    assert (
        "\nbad: mcp server bad: Connection closed; its stderr ended: starting | boom: MY_TOKEN is not set\n" in r.stdout
    ), r.stdout + r.stderr
    # latch run warns with the same line when it lists the session's MCP tools
    with serve_openai([Reply("Done.")]) as server:
        run = latch(
            tmp_path,
            "run",
            "task",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--sandbox",
            "off",
        )
    assert run.returncode == 0, run.stderr
    assert (
        "warning: mcp server bad: Connection closed; its stderr ended: starting | boom: MY_TOKEN is not set (its "
        "tools are not offered in this session)\n"
    ) in run.stderr


def test_a_bad_skill_warns_only_where_skills_are_used(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".latch" / "skills" / "bad").mkdir(parents=True)
    (ws / ".latch" / "skills" / "bad" / "SKILL.md").write_text("---\nname: [oops\n---\nbody\n")
    warning = "SKILL.md: skill skipped: front matter is not valid YAML"
    with serve_openai([Reply("One."), Reply("Two.")]) as server:
        first = latch(
            tmp_path,
            "run",
            "task",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--sandbox",
            "off",
            cwd=ws,
        )
        assert first.returncode == 0, first.stderr
        assert first.stderr.count(warning) == 1  # a new session discovers its skills: here the warning belongs
        again = latch(tmp_path, "run", "--resume", _sid(first.stdout), "more", cwd=ws)
    assert again.returncode == 0, again.stderr
    assert warning not in again.stderr  # the resumed session's skills were fixed at its start
    for args in (["sessions"], ["doctor"], ["search", "task"], ["show", _sid(first.stdout)]):
        r = latch(tmp_path, *args, cwd=ws)
        assert warning not in r.stderr, (args, r.stderr)
    assert latch(tmp_path, "skills", cwd=ws).stderr.count(warning) == 1


def test_latch_alone_prints_the_help_and_exits_0(tmp_path):
    r = subprocess.run([sys.executable, "-m", "latch"], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("Usage: latch [OPTIONS] COMMAND [ARGS]...\n\n  Latch: a context window")
    assert "\nCommands:\n" in r.stdout and "  run " in r.stdout


def test_import_of_bad_stdin_names_stdin(tmp_path):
    r = latch(tmp_path, "import", "-", stdin="{}\n")
    assert r.returncode == 1
    assert r.stderr.startswith("Error: stdin (-): unrecognized transcript format (known: aider, ")
    assert r.stderr.endswith("); pass --format\n")
    assert not (tmp_path / "stdin").exists()


def test_doctor_pads_nothing_in_a_pipe(tmp_path):
    r = latch(tmp_path, "doctor")
    lines = r.stdout.splitlines()
    assert lines[0] == f"latch             {__import__('latch').__version__}"
    assert "fts5              yes" in lines
    assert all(line == line.strip() for line in lines), [line for line in lines if line != line.strip()]
