"""``latch stress`` and its scenario model (spec: "Stress guarantees").

The unmarked tests run in CI in seconds: the scenario constants against a fresh corpus measurement,
the generator against the constants, a 3,000-event smoke run with every check, a check that really
fails when recall breaks, and the CLI. ``-m stress`` runs the full 10^6-event run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import struct

import pytest
from click.testing import CliRunner
from corpus_support import importable_corpus_files, require_corpus

from latch.bench import stress as stress_mod
from latch.bench.scenario import (
    CORPUS_SHAPE,
    CORPUS_SHAPE_FILES,
    KINDS,
    ScenarioModel,
    measure_files,
    measure_shape,
    png_bytes,
)
from latch.bench.stress import StressConfig, run_stress
from latch.cli import _load_commands, cli

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

CHECKS = {
    "canonical_survival",
    "rejection_preserved",
    "exact_raw_recall",
    "recent_verbatim",
    "bounded_tokens",
    "component_sums",
    "append_only_epochs",
    "bounded_episode_index",
    "no_automatic_compact",
    "raw_retention",
}


def test_corpus_shape_constants_match_a_fresh_measurement():
    """The constants equal a measurement of the files they name; files added to the corpus later do not move them."""
    corpus = require_corpus()
    files = [corpus / name for name in CORPUS_SHAPE_FILES]
    changed = [
        n
        for n, f in zip(CORPUS_SHAPE_FILES, files, strict=False)
        if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest()[:16] != CORPUS_SHAPE_FILES[n]
    ]
    assert not changed, f"corpus files changed or gone (remeasure with python -m latch.bench.scenario): {changed}"
    measured = measure_files(files)
    assert measured == CORPUS_SHAPE, f"update CORPUS_SHAPE (python -m latch.bench.scenario): {measured}"


def test_every_importable_corpus_file_can_be_measured():
    require_corpus()
    measured = measure_files(importable_corpus_files())
    assert measured.sessions >= CORPUS_SHAPE.sessions and measured.requests >= CORPUS_SHAPE.requests


def test_corpus_shape_values_checked_by_hand():
    # 592 assistant messages over the 20 importable sessions: the first 8 files' 314 (339 tool calls with results,
    # edgerunner alone: 171), plus distinct message.ids of the new Claude Code files (jq -r 'select(.type ==
    # "assistant") | .message.id' | sort -u | wc -l): spotter 143, its sub-agent 13, its compaction agent 1,
    # entire-image 89; Gemini CLI gemini messages (upserted by id): entire 11, vibecodingtracker .json 3 and
    # .jsonl 6; Copilot CLI assistant.message model calls: 2 (see test_import_gemini_cli / _copilot_cli); the Goose
    # database's 4 sessions, assistant rows per session (SQL over messages, test_import_goose): 2, 2, 4, 2; the
    # OpenCode database's 3 sessions, step-finish parts (one per request) per session (SQL over part.data,
    # test_import_opencode): 1, 1, 2.
    # Sessions: 23 before Aider files were split per run (one session per `# aider chat started at` header):
    # 21 non-Aider sessions + mozgoslav's 3 runs + monochromatic's 19 runs = 43; the split moves no request.
    assert (CORPUS_SHAPE.sessions, CORPUS_SHAPE.requests) == (43, 596)
    assert set(CORPUS_SHAPE.kinds) == set(KINDS)
    assert sum(k.share for k in CORPUS_SHAPE.kinds.values()) == pytest.approx(1.0, abs=0.002)
    assert CORPUS_SHAPE.kinds["read"].result_chars.median > CORPUS_SHAPE.kinds["edit"].result_chars.median


def test_generated_sessions_have_the_measured_shape():
    model = ScenarioModel(3)
    events = list(itertools.islice(model.events(), 30_000))
    got = measure_shape([("claude-code", model.workspace, events)])
    want = CORPUS_SHAPE
    for name in (
        "text_only_share",
        "tool_turn_text_share",
        "user_turns_per_request",
        "usage_per_request",
        "notes_per_request",
        "non_latin_user_share",
    ):
        assert getattr(got, name) == pytest.approx(getattr(want, name), abs=0.03), name
    assert got.calls_per_tool_turn == pytest.approx(want.calls_per_tool_turn, abs=0.02)
    for kind in KINDS:
        g, w = got.kinds[kind], want.kinds[kind]
        assert g.share == pytest.approx(w.share, abs=0.02), kind
        assert g.error_rate == pytest.approx(w.error_rate, abs=0.04), kind
        assert g.result_chars.median == pytest.approx(w.result_chars.median, rel=0.25), kind
    assert got.kinds["edit"].args_chars.median == pytest.approx(want.kinds["edit"].args_chars.median, rel=0.25)
    # The same seed gives the same events.
    again = list(itertools.islice(ScenarioModel(3).events(), 300))
    assert [e.encode() for e in again] == [e.encode() for e in events[:300]]


def test_png_bytes_is_a_png_with_the_requested_dimensions():
    data = png_bytes(1280, 800)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == (1280, 800)
    assert len(data) < 8_000


def test_smoke_run_passes_every_check():
    report = run_stress(StressConfig(events=3_000, every=500, burst=3, parallel=False))
    doc = report.to_json()
    assert report.ok, {k: v for k, v in doc["checks"].items() if not v["ok"]}
    assert set(doc["checks"]) == CHECKS
    assert doc["stored_events"] == 3_000 + 8 + 2  # planted facts, scenario, final turn and answer
    assert doc["materializations"] == 5 * 3 + 1  # bursts at 500..2,500 (none after the last event), final view
    assert doc["rotations"] >= 2
    # the stress model (claude-sonnet-4-5) has Claude's 200k window (model table) - 32k (was 224,000)
    assert doc["max_total_tokens"] <= doc["hard_limit_tokens"] == 168_000
    assert doc["checks"]["raw_retention"]["detail"].startswith("3,010 events, seqs 1..3010 gapless")
    assert sum(b["count"] for b in doc["by_history"]) == doc["materializations"]


def test_a_broken_recall_fails_the_run(monkeypatch):
    from latch.engine.continuity import ContinuityEngine

    monkeypatch.setattr(ContinuityEngine, "recall", lambda self, query, **kw: [])
    report = run_stress(StressConfig(events=1_000, every=500, burst=2, parallel=False))
    assert not report.ok
    assert [k for k, c in report.checks.items() if not c.ok] == ["exact_raw_recall"]
    assert "did not return seq 7 verbatim" in report.checks["exact_raw_recall"].detail


def test_a_short_run_passes_every_check_with_the_diagnostic_still_in_the_window():
    """At 100 events nothing is archival yet (recall is empty): the final view holds the diagnostic verbatim."""
    report = run_stress(StressConfig(events=100, parallel=False))
    doc = report.to_json()
    assert report.ok, {k: v for k, v in doc["checks"].items() if not v["ok"]}
    assert doc["checks"]["exact_raw_recall"]["detail"] == (
        "seq 7 verbatim in the final view's window after 100 events (not archival yet)"
    )


@pytest.mark.parametrize(("events", "every"), [(17, 7), (60, 1)])
def test_bursts_from_the_start_of_the_log_pass_every_check(events, every):
    """Views in the log's first events check the newest unit like any other (none lacks its opening event)."""
    report = run_stress(StressConfig(events=events, every=every, burst=2, parallel=False))
    doc = report.to_json()
    assert report.ok, {k: v for k, v in doc["checks"].items() if not v["ok"]}
    assert report.materializations >= 3
    assert min(events for events, _, _ in report.timings) < 20  # a view before the log's 20th event


def test_a_short_run_fails_when_the_window_loses_the_diagnostic(monkeypatch):
    checks = stress_mod._final_checks
    monkeypatch.setattr(stress_mod, "_final_checks", lambda *a, **kw: checks(*a, **{**kw, "final_view": None}))
    report = run_stress(StressConfig(events=100, parallel=False))
    assert [k for k, c in report.checks.items() if not c.ok] == ["exact_raw_recall"]


def test_bad_parameters_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="every must be a positive integer"):
        run_stress(StressConfig(events=10, every=0))
    db = tmp_path / "kept.db"
    db.write_bytes(b"")
    with pytest.raises(ValueError, match="already exists"):
        run_stress(StressConfig(events=10, db=str(db)))


def test_cli_writes_the_report_and_exits_0(tmp_path):
    _load_commands()
    out = tmp_path / "stress.json"
    res = CliRunner().invoke(
        cli, ["stress", "--events", "2000", "--every", "1000", "--burst", "2", "--inline", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["ok"] and doc["events"] == 2_000 and doc["config"]["parallel"] is False
    assert "exact raw recall" in res.output and "events/s" in res.output


def test_cli_exits_1_when_a_check_fails(tmp_path, monkeypatch):
    from latch.engine.continuity import ContinuityEngine

    _load_commands()
    monkeypatch.setattr(ContinuityEngine, "recall", lambda self, query, **kw: [])
    res = CliRunner().invoke(cli, ["stress", "--events", "1000", "--every", "500", "--inline"])
    assert res.exit_code == 1
    assert "✗" in res.output


@pytest.mark.stress
def test_a_million_events():
    """The full run (``pytest -m stress``); ``LATCH_STRESS_EVENTS`` overrides the size."""
    events = int(os.environ.get("LATCH_STRESS_EVENTS", "1000000"))
    report = run_stress(StressConfig(events=events))
    doc = report.to_json()
    print(json.dumps({k: v for k, v in doc.items() if k != "checks"}, indent=1))
    assert report.ok, {k: v for k, v in doc["checks"].items() if not v["ok"]}
    assert doc["stored_events"] == events + 10


def test_parallel_producer_matches_inline_appends(tmp_path):
    a = run_stress(StressConfig(events=1_500, every=500, burst=2, parallel=False, db=str(tmp_path / "a.db")))
    b = run_stress(StressConfig(events=1_500, every=500, burst=2, parallel=True, db=str(tmp_path / "b.db")))
    assert a.ok and b.ok
    assert b.producer_peak_rss_mb is not None and a.producer_peak_rss_mb is None
    # the producer run reads events while it waits: its views are the same views (same seqs, rotations, totals)
    assert [(h, r) for h, _, r in a.timings] == [(h, r) for h, _, r in b.timings] and len(a.timings) == 5
    assert (a.max_total_tokens, a.rotations) == (b.max_total_tokens, b.rotations)
    from latch.store import EventStore

    rows = []
    for name in ("a.db", "b.db"):
        with EventStore(tmp_path / name) as s:
            rows.append([(e.seq, e.event.encode()) for e in s.events()])
    assert rows[0] == rows[1]
    assert stress_mod.PARALLEL_MIN_EVENTS == 50_000


def test_a_budget_the_engine_refuses_raises_context_overflow_with_its_reason():
    from latch.port import ContextBudget, ContextOverflow

    budget = ContextBudget(context_window_tokens=3_000, reserve_tokens=500, recent_tokens=200)
    with pytest.raises(ContextOverflow) as refused:
        run_stress(StressConfig(events=100, every=50, batch=50, budget=budget))
    assert refused.value.breakdown == {"hard_limit_tokens": budget.hard_limit_tokens} == {"hard_limit_tokens": 2_500}
    assert refused.value.message and refused.value.message != "refused"


def test_reading_ahead_stops_at_the_first_view_of_the_burst(tmp_path):
    # what the run does while it waits for its producer: read the stored events, never past the burst's first view
    import itertools

    from latch.bench.scenario import ScenarioModel
    from latch.host.loop import RequestLoop, build_engine
    from latch.store import EventStore

    with EventStore(tmp_path / "s.db") as store:
        sid = store.create_session(workspace="/w", source="test", format="latch")
        store.append(sid, list(itertools.islice(ScenarioModel(0, workspace="/w").events(), 900)))
        setup = build_engine(store, sid, stream="continuity:t", engine="continuity", model="claude-sonnet-4-5")
        loop = RequestLoop(store, sid, setup, setup.engine.default_budget())
        read = stress_mod._read_ahead(loop, 10 + 500, 10)  # 10 events before the scenario's, a burst at 500
        assert read(0) is True and loop.fed_seq == 10  # the events stored before the scenario's
        assert read(0) is False and loop.fed_seq == 10
        assert read(300) is True and loop.fed_seq == 310
        assert read(300) is False and loop.fed_seq == 310
        assert read(890) is True and loop.fed_seq == 510  # stored past the burst: read up to its first view only
        assert read(890) is False and loop.fed_seq == 510
