"""``latch bench``: budgets, session discovery, needles, one real run end to end, clear errors."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, REPO, require_corpus

from latch.bench.needles import corpus_needles
from latch.bench.report import markdown_table
from latch.bench.runner import Budget, SessionSource, discover_sessions, parse_budgets, run_job
from latch.bench.summary import summarize
from latch.cli import _load_commands, cli
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage

EXAMPLES = REPO / "examples"


def test_budgets_parse_with_suffixes_and_reject_nonsense():
    assert parse_budgets("256k:32k:64k, 32000:4000:8k") == [
        Budget("256k:32k:64k", 256_000, 32_000, 64_000),
        Budget("32000:4000:8k", 32_000, 4_000, 8_000),
    ]
    for bad, message in (
        ("256k:32k", "expected WINDOW:RESERVE:RECENT"),
        ("32k:40k:8k", "reserve < window"),
        ("32k:4k:30k", "recent <= window - reserve"),
        ("3x:1:1", "not a token count"),
        ("", "no budget"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_budgets(bad)


def test_sessions_are_discovered_in_a_fixed_order(tmp_path):
    (tmp_path / "b").mkdir()
    for name in ("b/two.jsonl", "one.traj", "README.md", "FORMATS.md", ".hidden"):
        (tmp_path / name).write_text("x")
    found = discover_sessions(tmp_path, EXAMPLES, scenario_events=500, scenario_seed=4)
    assert [s.name for s in found] == ["b/two.jsonl", "one.traj", "invoice-rounding.claude.jsonl", "scenario-4-500"]
    assert found[-1] == SessionSource(name="scenario-4-500", seed=4, events=500)
    with pytest.raises(ValueError, match="no such folder"):
        discover_sessions(tmp_path / "missing")


def test_corpus_needles_come_from_the_first_quarter(store):
    sid = store.create_session()
    store.append(
        sid,
        [
            UserMessage("Please fix the flaky export job.\nIt fails on Mondays."),
            AssistantMessage(tool_calls=(ToolCall("c1", "Bash", json.dumps({"command": "make export"})),)),
            ToolResult("c1", "building...\nError: export.csv: permission denied (errno 13)\ndone", is_error=True),
            AssistantMessage(tool_calls=(ToolCall("c2", "Read", json.dumps({"file_path": "/srv/app/export.py"})),)),
            ToolResult("c2", "def export(): ..."),
            *[UserMessage(f"filler {i}") for i in range(16)],
        ],
    )
    needles = corpus_needles(list(store.events(sid)))
    assert [(n.label, n.text, n.seq) for n in needles] == [
        ("error line", "Error: export.csv: permission denied (errno 13)", 3),
        ("file path", "/srv/app/export.py", 4),
        ("user request", "Please fix the flaky export job.", 1),
    ]


def test_every_session_of_a_container_file_is_its_own_source(tmp_path):
    """Bench over the corpus took one session per file (an Aider history's last run, a Goose database's first of
    four): each session of such a file is now its own source, ``FILE#N`` in the file's order."""
    require_corpus()
    shutil.copy(CORPUS / "aider" / "mozgoslav.aider.chat.history.md", tmp_path / "moz.md")
    shutil.copy(CORPUS / "goose" / "lantern_sessions.db", tmp_path / "goose.db")
    shutil.copy(EXAMPLES / "invoice-rounding.claude.jsonl", tmp_path / "one.jsonl")
    found = discover_sessions(tmp_path, scenario_events=0)
    assert [s.name for s in found] == [
        *(f"goose.db#{i}" for i in range(1, 5)),
        "moz.md#1",
        "moz.md#2",
        "moz.md#3",
        "one.jsonl",
    ]
    assert len({s.session for s in found[:7]}) == 7 and found[7].session is None
    budget = Budget("32k:4k:8k", 32_000, 4_000, 8_000)
    # mozgoslav's runs answer 0, 9 and 7 times (tests/corpus/test_aider_runs_corpus.py)
    assert [run_job("continuity", s, budget)["requests"] for s in found[4:7]] == [0, 9, 7]


def test_one_job_on_the_example_session():
    source = SessionSource(name="invoice", path=str(EXAMPLES / "invoice-rounding.claude.jsonl"))
    r = run_job("continuity", source, Budget("32k:4k:8k", 32_000, 4_000, 8_000))
    assert r["requests"] == 28 and len(r["tokens"]) == 28  # 28 assistant messages in the example
    assert r["protocol_invalid"] == [] and r["budget_violations"] == [] and r["refused"] == 0
    assert r["cacheability"][0] is None and all(0 <= c <= 1 for c in r["cacheability"][1:])
    assert all(t <= r["hard_limit_tokens"] for t in r["tokens"])
    row = summarize([r])[0]
    assert row["engine"] == "continuity" and row["requests"] == 28 and row["tokens_total"] == sum(r["tokens"])
    assert markdown_table([row]).splitlines()[2].startswith("| continuity | 32k:4k:8k | yes | 1 | 28 |")


@pytest.mark.slow  # left out of the fast tier: the bench's task processes (--jobs 2) and its plots
def test_latch_bench_writes_table_json_and_plots(tmp_path):
    _load_commands()
    out = tmp_path / "out"
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            "--engines",
            "continuity",
            "--examples",
            str(EXAMPLES),
            "--scenario-events",
            "400",
            "--budgets",
            "32k:4k:8k",
            "--out",
            str(out),
            "--jobs",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "report.json").read_text())
    assert [s["name"] for s in doc["sessions"]] == ["invoice-rounding.claude.jsonl", "scenario-0-400"]
    assert len(doc["jobs"]) == 2 and not any("error" in j for j in doc["jobs"])
    (row,) = doc["summary"]
    assert row["protocol_invalid"] == 0 and row["budget_violations"] == 0
    scenario = next(j for j in doc["jobs"] if j["session"] == "scenario-0-400")
    assert {n["label"] for n in scenario["needles"]} == {"constraint", "decision", "diagnostic"}
    assert scenario["survival"]["constraint"][0] == scenario["survival"]["constraint"][1] > 0
    md = (out / "report.md").read_text()
    assert "| continuity | 32k:4k:8k | yes | 2 |" in md
    for png in ("tokens_32k-4k-8k.png", "cacheability_32k-4k-8k.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    _load_commands()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    res = CliRunner().invoke(cli, ["bench", "--examples", str(EXAMPLES), "--out", str(tmp_path)])
    assert res.exit_code == 1
    assert "pip install '.[bench]' in the Latch checkout" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--engines", "no-such-engine"], "unknown engine 'no-such-engine'"),
        (["--budgets", "32k:64k:8k"], "reserve < window"),
        (["--corpus", "/no/such/folder"], "no such folder"),
    ],
)
def test_user_mistakes_exit_2_without_a_traceback(tmp_path, args, message):
    _load_commands()
    res = CliRunner().invoke(cli, ["bench", "--scenario-events", "50", "--out", str(tmp_path), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_bench_uses_the_hosts_estimator_choice(tmp_path, monkeypatch):
    """``latch bench`` resolves the estimator like ``latch replay``: ``--estimator NAME`` for every
    job, else the ``latch_select_estimator`` hook's choice for each session's model (on main it called
    ``resolve_estimator(model)`` and never asked the hook, so an installed latch-tiktoken was ignored)."""
    pytest.importorskip("latch_tiktoken")
    from latch import plugins

    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "tiktoken")
    plugins.reset_plugin_manager()
    try:
        example = SessionSource(name="invoice", path=str(EXAMPLES / "invoice-rounding.claude.jsonl"))
        budget = Budget("32k:4k:8k", 32_000, 4_000, 8_000)
        forced = run_job("continuity", example, budget, "tiktoken")
        hooked = run_job("continuity", example, budget)
        assert forced["estimator"] == "tiktoken"
        assert hooked["estimator"] == plugins.select_estimator(hooked["model"]).name  # the hook's choice
        gpt = tmp_path / "gpt.json"
        gpt.write_text(
            json.dumps(
                {
                    "model": "gpt-4",
                    "messages": [
                        {"role": "user", "content": "Round 2.675 to cents."},
                        {"role": "assistant", "content": "2.68"},
                    ],
                }
            )
        )
        on_gpt = run_job("continuity", SessionSource(name="gpt", path=str(gpt)), budget)
        assert on_gpt["estimator"] == "tiktoken"  # latch-tiktoken answers the hook for cl100k models (gpt-4)
        assert summarize([forced])[0]["estimators"] == "tiktoken"
        assert "| tiktoken |" in markdown_table(summarize([forced]))
    finally:
        plugins.reset_plugin_manager()
