"""Comparisons like for like: when the budget refuses requests, Latch's views are compared with the transcript's
cost of the same requests, the refusals are counted (text report, JSON, HTML report) and medians come with ranges."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from corpus_support import CORPUS, require_corpus

from latch.cli import _load_commands, cli

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

_load_commands()


def test_a_refusing_budget_compares_the_same_requests_on_both_sides(tmp_path):
    require_corpus()
    codex = CORPUS / "codex" / "edgerunner_codex-session.jsonl"
    db, out, page = str(tmp_path / "s.db"), tmp_path / "r.json", tmp_path / "r.html"
    res = CliRunner().invoke(
        cli,
        [
            "--db",
            db,
            "replay",
            str(codex),
            "--window",
            "32000",
            "--reserve",
            "4000",
            "--json",
            str(out),
            "--html",
            str(page),
        ],
    )
    assert res.exit_code == 0, res.output
    cost = json.loads(out.read_text())["summary"]["cost"]
    assert (cost["compared_requests"], cost["refused_requests"]) == (41, 133)
    assert (round(cost["original_usd"], 2), round(cost["original_compared_usd"], 2), round(cost["view_usd"], 2)) == (
        32.08,
        4.26,
        1.37,
    )
    line = next(x for x in res.output.splitlines() if x.startswith("cost "))
    assert line.startswith(
        "cost $32.08 as the transcript ran it (173 priced request(s); cache reads 95% of input) · "
        "on the 41 request(s) with a view (133 refused, left out of both sides): $4.26 as the "
        "transcript ran them vs Latch's views would cost $1.37 at Latch's conservative token "
        "estimate (cache reads 94%)"
    )
    assert (
        "Latch's estimate median 1.02× (range 1.01–1.02×, 4/4 within 0.9–1.3×), its forecast in provider tokens "
        "median 1.01× (range 1.01–1.01×, 1/1 within)"
    ) in res.output  # a stable fit from request 4
    assert "forecast ÷ the provider's prompt median 0.15× (range 0.13–0.92×)" in res.output
    html = page.read_text()
    assert (
        '<dd id="refused">133 of 174 (no view: left out of the cost comparison); first: request 7: conversation '
        "unit seq 22..24 does not fit the hard budget even alone"
    ) in html
    assert (
        '<dd id="cost-compared">on the 41 requests with a view: $4.26 as the transcript ran them vs $1.37 '
        "Latch's views</dd>"
    ) in html
    # the report's transcript names what each call ran (a Codex exec's input), then its result in one line
    assert "<div>→ exec(const r = await tools.exec_command({&quot;cmd&quot;:&quot;pwd &amp;&amp; printf " in html
