"""``latch replay`` and ``latch context`` through the click CLI on a small OpenAI-chat transcript."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import invoke

from latch.cli import _load_commands

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"

TRANSCRIPT = {
    "messages": [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "list the files in the repository"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
        {"role": "assistant", "content": "Two files: a.py and b.py."},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "You're welcome."},
    ]
}


@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def run_latch(*args, columns=200):
        return invoke(
            tmp_path, *args, db=db, columns=columns, env={"LATCH_HOME": str(tmp_path)}, catch_exceptions=False
        )

    return run_latch


@pytest.fixture
def transcript(tmp_path):
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(TRANSCRIPT), encoding="utf-8")
    return p


def test_replay_json_report(run, transcript, tmp_path):
    out = tmp_path / "replay.json"
    res = run(
        "replay", str(transcript), "--json", str(out), "--window", "32000", "--reserve", "4000", "--recent", "4000"
    )
    assert res.exit_code == 0, res.output
    assert "3 requests" in res.output and "✓ budget never exceeded" in res.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["engine"] == "continuity" and doc["stream"].startswith("continuity:replay-")
    assert doc["budget"] == {
        "context_window_tokens": 32_000,
        "reserve_tokens": 4_000,
        "recent_tokens": 4_000,
        "requested_recent_tokens": 4_000,
        "window_source": "--window",
    }
    reqs = doc["requests"]
    assert [r["seq"] - r["until_seq"] for r in reqs] == [1, 1, 1]
    assert [r["events"] for r in reqs] == [2, 4, 6]  # system note + user; + call and result; + answer + user
    assert all(r["epoch"] == 1 for r in reqs) and reqs[0]["first_retained_seq"] == reqs[0]["until_seq"]
    for r in reqs:
        parts = sum(
            r[k]
            for k in (
                "instructions_tokens",
                "state_tokens",
                "recent_tokens",
                "recall_tokens",
                "tools_tokens",
                "extension_tokens",
            )
        )
        assert r["total_tokens"] == parts <= 28_000
    assert reqs[1]["common_prefix_tokens"] == reqs[0]["recounted_tokens"]
    s = doc["summary"]
    assert (
        s["requests"],
        s["violations"],
        s["rotations"],
        s["prefix_breaks_within_epoch"],
        s["automatic_compactions"],
    ) == (3, [], 0, 0, 0)


def test_replay_twice_imports_once_and_uses_fresh_streams(run, transcript):
    a = json.loads(run("replay", str(transcript), "--json", "-").output)
    b = json.loads(run("replay", str(transcript), "--json", "-").output)
    assert a["session"] == b["session"] and a["stream"] != b["stream"]
    assert a["requests"] == b["requests"]
    sessions = json.loads(run("sessions", "--json").output)
    assert [s["events"] for s in sessions] == [7]


def test_replay_rejects_bad_options(run, transcript):
    res = run("replay", str(transcript), "--engine", "nope")
    assert res.exit_code == 2 and "unknown engine 'nope'" in res.output
    assert json.loads(run("sessions", "--json").output) == []  # refused before anything was imported
    res = run("replay", str(transcript), "--window", "1000", "--reserve", "1000")
    assert res.exit_code == 2 and "--reserve (1000) must be below --window (1000)" in res.output


def test_context_report(run, transcript):
    sid = json.loads(run("replay", str(transcript), "--json", "-").output)["session"]
    res = run("context", sid[:6], "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["approximate"] is True and rep["events"] == 7 and rep["epoch"] == 1
    assert rep["total_tokens"] == sum(v for k, v in rep["components"].items() if k != "episode_tokens")
    assert rep["headroom_tokens"] == 224_000 - rep["total_tokens"]
    assert rep["left_tokens"] == 0 and rep["status"] == "new_epoch"
    table = run("context", sid)
    assert "recent conversation" in table.output and "≈" in table.output
    assert run("context", "zzzz").exit_code == 1  # unknown session: one line, status 1 (like show)


def _table(output: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-request table of ``latch replay`` output."""
    lines = output.splitlines()
    h = next(i for i, line in enumerate(lines) if line.split()[:2] == ["req", "events"])
    rows = []
    for line in lines[h + 2 :]:
        if not line.strip() or not line.split()[0].isdigit():
            break
        rows.append(line.split())
    return lines[h].replace("first seq", "first-seq").split(), rows


def test_replay_table_shows_the_canonical_state_per_request(run, transcript):
    res = run("replay", str(transcript), "--json", "-")
    doc = json.loads(res.output)
    table = run("replay", str(transcript))
    assert table.exit_code == 0, table.output
    header, rows = _table(table.output)
    assert header == [
        "req",
        "events",
        "instr",
        "state",
        "recent",
        "recall",
        "view",
        "raw",
        "first-seq",
        "prefix",
        "epoch",
    ]  # no tools, extension or provider usage here: those columns are left out
    assert [r[header.index("state")] for r in rows] == [f"{q['state_tokens']:,}" for q in doc["requests"]]
    assert [r[header.index("view")] for r in rows] == [f"{q['total_tokens']:,}" for q in doc["requests"]]
    # the unknown model gets the most conservative heuristic; its snapshot, holding the goal derived from the
    # user's one instruction (176 tokens when the state was empty), is 184 tokens (measured;
    # 187 before the estimator's per-script refit)
    assert doc["estimator"] == "heuristic-anthropic"
    assert [q["state_tokens"] for q in doc["requests"]] == [184, 184, 184]
    assert "state: canonical state" in table.output


def test_readme_first_command_fits_100_columns(run):
    res = run(
        "replay",
        str(EXAMPLE),
        "--window",
        "16000",
        "--reserve",
        "2000",
        "--recent",
        "3000",
        "--no-harness",
        columns=100,
    )
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.output.splitlines()) <= 100
    header, rows = _table(res.output)
    assert header[-1] == "provider" and len(rows) == 28
    assert "…" not in res.output  # nothing truncated
    assert "engine continuity · estimator heuristic-anthropic" in res.output
    assert "✓ rotations within the hysteresis bound (11.21)" in res.output and "✗" not in res.output


def test_estimator_option_forces_a_plugin_by_name(run, transcript):
    res = run("replay", str(transcript), "--estimator", "heuristic-cj")
    assert res.exit_code == 2 and "unknown estimator 'heuristic-cj' (did you mean 'heuristic-cjk'?)" in res.output
    assert json.loads(run("sessions", "--json").output) == []  # refused before anything was imported
    default = json.loads(run("replay", str(transcript), "--json", "-").output)
    forced = json.loads(run("replay", str(transcript), "--estimator", "heuristic-openai", "--json", "-").output)
    assert (default["estimator"], forced["estimator"]) == ("heuristic-anthropic", "heuristic-openai")
    # the anthropic profile prices text at about 4/3 of the openai one (plus 4 tokens per message in both)
    assert [r["recent_tokens"] for r in forced["requests"]] == [14, 62, 85]
    assert [r["recent_tokens"] for r in default["requests"]] == [18, 74, 102]
    assert forced["summary"]["violations"] == []
    sid = default["session"]
    ctx = json.loads(run("context", sid, "--estimator", "heuristic-openai", "--json").output)
    assert ctx["estimator"] == "heuristic-openai"
    assert json.loads(run("context", sid, "--json").output)["estimator"] == "heuristic-anthropic"


def test_config_is_read_once_and_reaches_the_engine(run, transcript, tmp_path, monkeypatch):
    from latch import plugins

    (tmp_path / "config.toml").write_text("[context]\nrecent_tokens = 5000\n", encoding="utf-8")
    seen = []
    monkeypatch.setattr(plugins, "configure", lambda config: seen.append(config))
    doc = json.loads(run("replay", str(transcript), "--json", "-").output)
    assert seen == [{"context": {"recent_tokens": 5000}}]  # latch_configure, once per invocation
    assert doc["budget"]["recent_tokens"] == 5000  # the engine's default budget came from EngineProfile.config
    bad = tmp_path / "bad.toml"
    bad.write_text("[context]\nrecent_tokens = -1\n", encoding="utf-8")
    res = run("replay", str(transcript), "--config", str(bad))
    assert res.exit_code == 2 and "bad.toml: context.recent_tokens must be a positive integer" in res.output


def test_the_builtin_command_table_matches_what_each_module_registers():
    """BUILTIN_COMMANDS (what `latch --help` shows without importing a module) cannot drift from the modules."""
    import importlib

    import click

    from latch.cli.main import BUILTIN_COMMANDS, COMMAND_MODULES

    for module in COMMAND_MODULES:
        group = click.Group("latch")
        importlib.import_module(f"latch.cli.{module}").register(group)
        assert sorted(group.commands) == sorted(name for name, (m, _) in BUILTIN_COMMANDS.items() if m == module)
        for name, command in group.commands.items():
            stand_in = click.Command(name, help=BUILTIN_COMMANDS[name][1])
            assert not command.hidden
            for limit in (10**6, 80, 60, 45, 30, 12):  # the help formatter's limit depends on the terminal width
                assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), (name, limit)


def test_latch_cli_and_the_command_list_import_no_command_module_and_no_engine():
    """Commands load lazily: importing latch.cli imports no command module, no engine, no hot path and no plugin
    host; `latch --help` (which loads the plugins to list their commands too) lists every command and imports no
    command module; `latch sessions --help` imports only its own."""
    prefixes = ("latch.cli.", "latch.engine", "latch.hotpaths", "latch.plugins")
    code = f"import sys, latch.cli; print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "['latch.cli.main']\n"  # the group itself, no command module

    def run_main(*args: str) -> subprocess.CompletedProcess:
        code = (
            "import sys, latch.cli\ntry:\n    latch.cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('latch.cli.') and m != 'latch.cli.main'), "
            "file=sys.stderr)"
        )
        env = {**os.environ, "LATCH_LOAD_PLUGINS": ""}  # the built-in plugins only: their commands are `web` and `tui`
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env)

    helped = run_main("--help")
    assert helped.stderr == "[]\n"
    from latch.cli import BUILTIN_COMMANDS

    listed = [line.split()[0] for line in helped.stdout.split("Commands:\n")[1].splitlines()]
    assert listed == sorted([*BUILTIN_COMMANDS, "web", "tui"])
    assert run_main("sessions", "--help").stderr == "['latch.cli.listing']\n"
