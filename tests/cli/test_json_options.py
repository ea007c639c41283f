"""``--json`` means "print JSON to stdout" in every command; ``-o/--json-out FILE`` writes a file; ``latch
replay --json FILE`` and ``latch stress --json FILE`` keep working as aliases of ``--json-out FILE``
(item 6). On main, ``--json`` was a stdout flag in six commands and an output path in two."""

from __future__ import annotations

import json

from cli_support import invoke
from click.testing import CliRunner
from corpus_support import REPO

from latch.cli import _load_commands, cli

EXAMPLE = str(REPO / "examples" / "invoice-rounding.claude.jsonl")
BUDGET = ["--window", "16000", "--reserve", "2000", "--recent", "3000"]


def _run(tmp_path, *args):
    return invoke(tmp_path, *args, db=tmp_path / "l.db")


def test_replay_json_prints_to_stdout(tmp_path):
    r = _run(tmp_path, "replay", EXAMPLE, *BUDGET, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)  # nothing but the JSON document
    assert doc["summary"]["requests"] == len(doc["requests"]) == 28


def test_replay_json_out_writes_the_file_and_prints_the_table(tmp_path):
    out = tmp_path / "r.json"
    r = _run(tmp_path, "replay", EXAMPLE, *BUDGET, "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "budget never exceeded" in r.output
    assert json.loads(out.read_text())["summary"]["requests"] == 28
    both = tmp_path / "both.json"
    r = _run(tmp_path, "replay", EXAMPLE, *BUDGET, "--json", "--json-out", str(both))
    assert json.loads(r.output) == json.loads(both.read_text())


def test_replay_json_file_is_still_an_alias(tmp_path):
    out = tmp_path / "alias.json"
    r = _run(tmp_path, "replay", EXAMPLE, *BUDGET, "--json", str(out))
    assert r.exit_code == 0, r.output
    assert "budget never exceeded" in r.output  # the table, as before
    assert json.loads(out.read_text())["summary"]["violations"] == []


def test_json_out_folder_must_exist(tmp_path):
    r = _run(tmp_path, "replay", EXAMPLE, "-o", str(tmp_path / "nope" / "r.json"))
    assert r.exit_code == 2 and "does not exist" in r.output
    assert not (tmp_path / "l.db").exists() or json.loads(_run(tmp_path, "sessions", "--json").output) == []


def test_stress_json_prints_to_stdout(tmp_path):
    _load_commands()
    r = CliRunner().invoke(cli, ["stress", "--events", "400", "--every", "200", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["events"] == 400
