"""Provider usage is authoritative in a replay: a transcript whose provider counted more
prompt tokens than Latch estimated records the correction (in the replay's scratch run, never in the log), every
later view is budgeted with it, and ``latch context`` shows it.

The fixture is an OpenAI chat-completions transcript in Arabic (the class Latch's estimator undercounts most, 0.74
of cl100k's count) whose assistant messages carry ``usage``. Its ``prompt_tokens`` are 1.5x the estimate
of each request (its system prompt and the conversation so far), measured by a first replay of the same
conversation without usage; the window is the largest view of that replay, so without the correction every view
fits in Latch's tokens while the later ones are 1.5x over the window in the provider's.
"""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from click.testing import CliRunner

from latch.cli import _load_commands, cli
from latch.host.corrections import RATE_MIN_REQUESTS, SAFETY_MARGIN

MODEL = "gpt-4o"
RATIO = 1.5
RESERVE = 1_000
ARABIC = (
    "تعمل الخدمة على قراءة ملفات السجل من المجلد المشترك ثم تحسب عدد الطلبات لكل مستخدم، وبعد ذلك تكتب "
    "النتائج في قاعدة البيانات وترسل تقريراً يومياً إلى فريق التشغيل عند اكتمال المعالجة."
)


def _doc(prompt_tokens: list[int] | None) -> dict:
    messages: list[dict] = [{"role": "system", "content": "أنت مساعد برمجي دقيق."}]
    for i in range(8):
        messages.append({"role": "user", "content": f"الخطوة {i + 1}: " + ARABIC * 3})
        reply: dict = {"role": "assistant", "content": f"تم تنفيذ الخطوة {i + 1}. " + ARABIC * 2}
        if prompt_tokens is not None:
            reply["usage"] = {"prompt_tokens": prompt_tokens[i], "completion_tokens": 40}
        messages.append(reply)
    return {"model": MODEL, "messages": messages}


def _run(tmp_path, db: str, *args: str):
    _load_commands()
    return CliRunner().invoke(
        cli, ["--db", str(tmp_path / db), *args], env={"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    )


@pytest.fixture
def arabic(tmp_path):
    """``(transcript path, hard limit)``: the fixture with usage 1.5x the complete views' estimates."""
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(_doc(None), ensure_ascii=False), encoding="utf-8")
    first = _run(tmp_path, "measure.db", "replay", str(bare), "--window", "200000", "--reserve", str(RESERVE), "--json")
    assert first.exit_code == 0, first.output
    measured = json.loads(first.output)
    system = measured["harness"]["system_tokens"]
    counted = [system + r["history_tokens"] for r in measured["requests"]]  # the requests the provider counted
    assert len(counted) == 8
    path = tmp_path / "arabic.json"
    path.write_text(json.dumps(_doc([math.ceil(t * RATIO) for t in counted]), ensure_ascii=False), encoding="utf-8")
    return path, max(r["total_tokens"] for r in measured["requests"])


def test_replay_records_the_correction_and_no_later_request_is_over_the_window(tmp_path, arabic):
    path, hard = arabic
    res = _run(
        tmp_path,
        "latch.db",
        "replay",
        str(path),
        "--window",
        str(hard + RESERVE),
        "--reserve",
        str(RESERVE),
        "--recent",
        str(hard),
        "--json",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    reqs = doc["requests"]
    fixes = doc["summary"]["corrections"]
    assert fixes and fixes[0]["request"] == 1 and reqs[0]["correction"] is None
    assert all(f["ratio"] == pytest.approx(RATIO, abs=0.01) for f in fixes)
    assert [f["ratio"] for f in fixes] == sorted(set(f["ratio"] for f in fixes))  # recorded only when larger
    fix = fixes[-1]
    assert doc["summary"]["correction"] == fix
    by_request = {f["request"]: f for f in fixes}
    effect = None
    for r in reqs:  # each view is budgeted with the correction recorded before it (the provider's rate, known from
        # request 3 on, is the same 1.5x: its limit, less the safety margin, is not above the correction's)
        assert r["correction"] == effect
        assert r["budget_hard_limit_tokens"] == (
            hard if effect is None else hard * effect["estimated_tokens"] // effect["provider_tokens"]
        )
        effect = by_request.get(r["request"], effect)
    assert reqs[0]["budget_hard_limit_tokens"] == hard
    share = doc["summary"]["usable_share"]
    assert share["from_request"] == RATE_MIN_REQUESTS + 1 and share["requests"] == len(reqs) - RATE_MIN_REQUESTS
    assert 1 - SAFETY_MARGIN <= share["min"] <= share["median"] <= 1.0
    # in the provider's tokens (each estimate scaled by the largest ratio recorded) no later view is above the
    # hard limit, though every view fitted it in Latch's own tokens without the correction (the second test)
    real = [math.ceil(r["total_tokens"] * fix["ratio"]) for r in reqs[1:]]
    assert max(real) <= hard
    assert doc["summary"]["violations"] == []

    # the replay wrote its record to the scratch run, not to the conversation log
    with sqlite3.connect(tmp_path / "latch.db.replays.sqlite") as con:
        kinds = [k for (k,) in con.execute("SELECT kind FROM records WHERE kind = 'estimate_correction'")]
    assert kinds == ["estimate_correction"] * len(fixes)
    with sqlite3.connect(tmp_path / "latch.db") as con:
        assert con.execute("SELECT count(*) FROM events WHERE kind = 'estimate_correction'").fetchone() == (0,)

    ctx = _run(tmp_path, "latch.db", "context", doc["session"], "--json")
    assert ctx.exit_code == 0, ctx.output
    rep = json.loads(ctx.output)
    assert rep["correction"]["request"] == fix["request"] and rep["correction"]["ratio"] == fix["ratio"]
    assert rep["correction"]["origin"].startswith("replay run ")
    text = _run(tmp_path, "latch.db", "context", doc["session"]).output
    assert f"correction in effect: ×{fix['ratio']:.2f}" in text and f"request {fix['request']}," in text


def test_without_the_correction_the_later_views_overflow_in_real_tokens(tmp_path, arabic):
    """The fixture can fail the check above: the views of a replay that ignores the usage (--no-harness) are
    over the window once scaled by the provider's ratio."""
    path, hard = arabic
    res = _run(
        tmp_path,
        "latch.db",
        "replay",
        str(path),
        "--window",
        str(hard + RESERVE),
        "--reserve",
        str(RESERVE),
        "--recent",
        str(hard),
        "--json",
        "--no-harness",
    )
    doc = json.loads(res.output)
    assert doc["summary"]["corrections"] == []
    assert max(math.ceil(r["total_tokens"] * RATIO) for r in doc["requests"][1:]) > hard


def test_context_reads_the_correction_of_a_replay_kept_in_the_store(tmp_path, arabic):
    """`latch replay --keep` promotes the run (its correction records too) into the store; after `latch
    prune-replays` empties the scratch, `latch context` still budgets with that correction and names the stream."""
    path, hard = arabic
    res = _run(
        tmp_path,
        "latch.db",
        "replay",
        str(path),
        "--window",
        str(hard + RESERVE),
        "--reserve",
        str(RESERVE),
        "--recent",
        str(hard),
        "--json",
        "--keep",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    fix = doc["summary"]["correction"]
    assert doc["kept"] is True and fix is not None
    assert _run(tmp_path, "latch.db", "prune-replays").exit_code == 0
    with sqlite3.connect(tmp_path / "latch.db") as con:
        kept = con.execute(
            "SELECT count(*) FROM kernel_records WHERE kind = 'estimate_correction' AND stream = ?", (doc["stream"],)
        ).fetchone()[0]
    assert kept == len(doc["summary"]["corrections"]) >= 1
    rep = json.loads(_run(tmp_path, "latch.db", "context", doc["session"], "--json").output)
    assert rep["correction"]["ratio"] == fix["ratio"] and rep["correction"]["request"] == fix["request"]
    assert rep["correction"]["origin"] == f"kept replay {doc['stream']}"
    assert rep["hard_limit_tokens"] < rep["uncorrected_hard_limit_tokens"]


def test_view_of_each_request_is_budgeted_like_the_replay(tmp_path, arabic):
    """`latch view --request N` replays requests 1..N with the same corrections as `latch replay`: its view of every
    request has the replay's total tokens and hard limit (before, view ignored provider usage, so after request 1's
    correction its views were budgeted against the uncorrected limit)."""
    path, hard = arabic
    opts = ["--window", str(hard + RESERVE), "--reserve", str(RESERVE), "--recent", str(hard)]
    doc = json.loads(_run(tmp_path, "latch.db", "replay", str(path), *opts, "--json").output)
    reqs = doc["requests"]
    assert doc["summary"]["corrections"] and any(r["budget_hard_limit_tokens"] < hard for r in reqs)
    for r in reqs:
        res = _run(tmp_path, "latch.db", "view", doc["session"], "--request", str(r["request"]), *opts)
        assert res.exit_code == 0, res.output
        head = " ".join(res.output.split()[:60])
        assert f"{r['total_tokens']:,} of {r['budget_hard_limit_tokens']:,} tokens" in head, (r["request"], head)


def test_context_shows_the_usable_share_a_replay_measured(tmp_path, arabic):
    """A replay records the provider's rate it fitted; `latch context` shows the share of the real window its hard
    limit is in the provider's tokens (the correction divides the limit by 1.5: about the whole window)."""
    path, hard = arabic
    res = _run(
        tmp_path,
        "latch.db",
        "replay",
        str(path),
        "--window",
        str(hard + RESERVE),
        "--reserve",
        str(RESERVE),
        "--recent",
        str(hard),
        "--json",
    )
    doc = json.loads(res.output)
    fit = doc["summary"]["provider_rate"]
    rep = json.loads(_run(tmp_path, "latch.db", "context", doc["session"], "--json").output)
    rate = rep["provider_rate"]
    assert (rate["rate"], rate["intercept_tokens"], rate["requests"]) == (
        fit["rate"],
        fit["intercept_tokens"],
        fit["requests"],
    )
    assert rate["rate"] == pytest.approx(RATIO, abs=0.02) and rate["origin"].startswith("replay run ")
    real = rep["uncorrected_hard_limit_tokens"]  # the model's window less the reserve: context's own budget
    assert rep["usable_share"] == round((rate["intercept_tokens"] + rate["rate"] * rep["hard_limit_tokens"]) / real, 4)
    assert 0.9 <= rep["usable_share"] <= 1.05
    text = _run(tmp_path, "latch.db", "context", doc["session"]).output
    assert f"usable share of the real window: {rep['usable_share']:.0%} in the provider's tokens" in text
    bare = tmp_path / "other.json"
    bare.write_text(path.read_text(encoding="utf-8").replace('"usage"', '"no_usage"'), encoding="utf-8")
    other = json.loads(_run(tmp_path, "other.db", "replay", str(bare), "--json").output)
    rep = json.loads(_run(tmp_path, "other.db", "context", other["session"], "--json").output)
    assert rep["provider_rate"] is None and rep["usable_share"] is None


def test_the_table_says_the_limit_is_in_the_provider_tokens_once_the_rate_sets_it(tmp_path):
    """The README example at its 16k budget: from request 3 a view's estimate may be above the 14,000-token hard
    limit (the heuristic over-counts Claude); the summary says the limit is in the provider's tokens, never
    "max N of 14,000" with N above it."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"
    args = ("replay", str(example), "--window", "16000", "--reserve", "2000", "--recent", "3000")
    doc = json.loads(_run(tmp_path, "latch.db", *args, "--json").output)
    s = doc["summary"]
    assert s["usable_share"]["min"] >= 1 - SAFETY_MARGIN - 0.001
    assert all(r["provider_forecast_tokens"] <= 14_000 for r in doc["requests"] if r["budget_source"] == "rate")
    text = _run(tmp_path, "latch.db", *args).output
    assert (
        f"max {s['max_total_tokens']:,} tokens (Latch's estimate) · hard limit 14,000 provider tokens, "
        f"{s['usable_share']['median']:.0%} of it usable (range {s['usable_share']['min']:.0%}–"
        f"{s['usable_share']['max']:.0%}) on the provider's rate from request 3"
    ) in text
    assert f"max {s['max_total_tokens']:,} of 14,000" not in text
    assert "✓ budget never exceeded (window − reserve, in the provider's tokens on its rate)" in text
