"""Dollar costs: :mod:`latch.accounting.pricing` on genai-prices.

Every expected dollar figure below is computed by hand from genai-prices' published rates (USD per million
tokens, the bundled table of genai-prices 0.2.3), the arithmetic in a comment:

* claude-sonnet-4-5: input $3, cache read $0.30, cache write (5 min) $3.75, output $15; above 200,000 prompt
  tokens every token at input $6, output $22.50;
* claude-opus-4-5: input $5, cache read $0.50, cache write $6.25, output $25;
* gpt-5: input $1.25, cached input $0.125, output $10, no cache-write price;
* gpt-4.1: input $2, cached input $0.50, output $8;
* gemini-2.5-flash: input $0.30, cached input $0.03, output $2.50.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus_support import require_corpus

from latch.accounting import pricing
from latch.cli import _load_commands, cli
from latch.events import Usage

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
AT = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def _rates(model: str) -> dict[str, Decimal | None]:
    _, info = pricing._lookup(model, None)
    p = info.get_prices(AT)
    base = {k: getattr(p, k) for k in ("input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok")}
    return {k: (v.base if hasattr(v, "base") else v) for k, v in base.items()}


# ------------------------------------------------------------------------ the provider rules, on the data
def test_the_provider_rules_in_the_docstring_hold_in_genai_prices_data():
    sonnet, opus, gpt5, flash = (
        _rates(m) for m in ("claude-sonnet-4-5", "claude-opus-4-5", "gpt-5", "gemini-2.5-flash")
    )
    for a in (sonnet, opus):  # Anthropic: reads 0.1x, 5-minute writes 1.25x
        assert a["cache_read_mtok"] == a["input_mtok"] * Decimal("0.1")
        assert a["cache_write_mtok"] == a["input_mtok"] * Decimal("1.25")
    assert sonnet == {
        "input_mtok": 3,
        "cache_read_mtok": Decimal("0.3"),
        "cache_write_mtok": Decimal("3.75"),
        "output_mtok": 15,
    }
    # OpenAI automatic caching and Gemini implicit caching: a cached rate, no write premium
    assert gpt5 == {
        "input_mtok": Decimal("1.25"),
        "cache_read_mtok": Decimal("0.125"),
        "cache_write_mtok": None,
        "output_mtok": 10,
    }
    assert flash == {
        "input_mtok": Decimal("0.3"),
        "cache_read_mtok": Decimal("0.03"),
        "cache_write_mtok": None,
        "output_mtok": Decimal("2.5"),
    }
    assert (
        pricing.writes_cache("claude-sonnet-4-5"),
        pricing.writes_cache("gpt-5"),
        pricing.writes_cache("gemini-2.5-flash"),
        pricing.writes_cache("smollm2-135m"),
    ) == (True, False, False, None)


# ------------------------------------------------------------------------ one request, by hand
def test_anthropic_request_priced_by_kind():
    got = pricing.price(
        model="claude-sonnet-4-5", uncached=1_000, cache_read=10_000, cache_write=2_000, output=500, at=AT
    )
    # input 1,000 x 3 + 10,000 x 0.30 + 2,000 x 3.75 = 3,000 + 3,000 + 7,500 = 13,500 µ$; output 500 x 15 = 7,500 µ$
    assert (got.input_usd, got.output_usd, got.usd) == (Decimal("0.0135"), Decimal("0.0075"), Decimal("0.021"))
    assert (got.model_id, got.provider) == ("claude-sonnet-4-5", "anthropic")
    # a dated id and the PROVIDER/MODEL form name the same model
    assert pricing.price(model="claude-sonnet-4-5-20250929", uncached=1_000, at=AT).usd == Decimal("0.003")
    assert pricing.price(model="anthropic/claude-sonnet-4-5", uncached=1_000, at=AT).usd == Decimal("0.003")


def test_anthropic_long_context_tier():
    # 250,000 prompt tokens > 200,000: every token at the tier: 250,000 x 6 = $1.50; output 1,000 x 22.50 = $0.0225
    got = pricing.price(model="claude-sonnet-4-5", uncached=250_000, output=1_000, at=AT)
    assert got.usd == Decimal("1.5225")


def test_openai_cached_input_and_no_write_premium():
    got = pricing.price(model="gpt-5", uncached=2_000, cache_read=8_000, output=500, at=AT)
    # 2,000 x 1.25 + 8,000 x 0.125 = 2,500 + 1,000 = 3,500 µ$; 500 x 10 = 5,000 µ$
    assert (got.input_usd, got.usd) == (Decimal("0.0035"), Decimal("0.0085"))
    # tokens reported as written are billed at the plain input rate: + 1,000 x 1.25 = 1,250 µ$
    assert pricing.price(
        model="gpt-5", uncached=2_000, cache_read=8_000, cache_write=1_000, output=500, at=AT
    ).usd == Decimal("0.00975")


def test_gemini_implicit_cache():
    got = pricing.price(model="gemini-2.5-flash", uncached=10_000, cache_read=90_000, output=1_000, at=AT)
    # 10,000 x 0.30 + 90,000 x 0.03 = 3,000 + 2,700 = 5,700 µ$; 1,000 x 2.50 = 2,500 µ$
    assert got.usd == Decimal("0.0082")


def test_usage_is_latch_normalized_and_unknowns_stay_unpriced():
    u = Usage(
        input_tokens=6, output_tokens=60, cache_read_tokens=11_800, cache_write_tokens=78, model="claude-sonnet-4-5"
    )
    # 6 x 3 + 11,800 x 0.30 + 78 x 3.75 + 60 x 15 = 18 + 3,540 + 292.5 + 900 = 4,750.5 µ$
    assert pricing.price_usage(u, at=AT).usd == Decimal("0.0047505")
    assert pricing.price_usage(Usage(input_tokens=100, output_tokens=1, model="smollm2-135m-instruct")) is None
    assert pricing.price_usage(Usage(input_tokens=None, output_tokens=5, model="claude-sonnet-4-5")) is None
    assert pricing.price_usage(Usage(input_tokens=5, output_tokens=None, model="claude-sonnet-4-5")) is None
    assert pricing.price_usage(None, "claude-sonnet-4-5") is None
    assert pricing.price(model="qwen3.6-35b-a3b", uncached=1_000) is None
    assert pricing.price(model=None, uncached=1_000) is None
    assert pricing.price(model="gpt-5", uncached=1, provider="openai-compatible", at=AT).model_id == "gpt-5"
    assert pricing.format_usd(None) == "unpriced"
    with pytest.raises(ValueError, match="non-negative"):
        pricing.price(model="gpt-5", uncached=-1)
    t = pricing.total([pricing.price(model="gpt-5", uncached=1_000, at=AT), None])
    assert (t.requests, t.priced, t.unpriced, t.usd) == (2, 1, 1, Decimal("0.00125"))
    assert pricing.total([None]).as_dict()["usd"] is None


def test_view_cost_is_cache_aware():
    # Anthropic: 8,000 shared tokens read (x 0.30 = 2,400 µ$), the other 2,000 written (x 3.75 = 7,500 µ$),
    # output 500 x 15 = 7,500 µ$
    got = pricing.view_cost(10_000, 8_000, 500, "claude-sonnet-4-5", at=AT)
    assert (got.cache_read, got.cache_write, got.uncached, got.usd) == (8_000, 2_000, 0, Decimal("0.0174"))
    # OpenAI: read 8,000 x 0.125 = 1,000 µ$, the rest uncached 2,000 x 1.25 = 2,500 µ$, output 500 x 10 = 5,000 µ$
    got = pricing.view_cost(10_000, 8_000, 500, "gpt-5", at=AT)
    assert (got.cache_read, got.cache_write, got.uncached, got.usd) == (8_000, 0, 2_000, Decimal("0.0085"))
    assert pricing.view_cost(10_000, 0, None, "unknown-model-x") is None
    with pytest.raises(ValueError, match="within the prompt"):
        pricing.view_cost(10, 11, 0, "gpt-5")


def test_prices_are_the_bundled_table_offline(monkeypatch):
    """No network at pricing time, and an auto-updated (or custom) genai-prices snapshot changes nothing."""
    from genai_prices import data_snapshot

    def refuse(*a, **k):
        raise AssertionError("network access while pricing")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot(providers=[], from_auto_update=True))
    try:
        assert pricing.price(model="gpt-4.1", uncached=1_000_000, at=AT).usd == Decimal("2")  # 1M x $2
    finally:
        data_snapshot.set_custom_snapshot(None)
    assert pricing._snapshot().from_auto_update is False


# ------------------------------------------------------------------------ replay, report, bench
@pytest.fixture
def run(tmp_path):
    _load_commands()
    db = tmp_path / "latch.db"

    def invoke(*args):
        return CliRunner().invoke(
            cli, ["--db", str(db), *args], env={"LATCH_HOME": str(tmp_path / "home")}, catch_exceptions=False
        )

    return invoke


def test_replay_prices_the_transcript_and_the_views(run):
    res = run("replay", str(EXAMPLE), "--window", "16000", "--reserve", "2000", "--recent", "3000", "--json", "-")
    doc = json.loads(res.output)
    first = doc["requests"][0]["cost"]
    # request 1's usage: 6 uncached, 11,800 read, 78 written, 60 output at claude-sonnet-4-5 = $0.0047505 (above)
    assert first["original_usd"] == 0.0047505 and first["priced_model"] == "claude-sonnet-4-5"
    c = doc["summary"]["cost"]
    assert c["original_usd"] == pytest.approx(sum(r["cost"]["original_usd"] for r in doc["requests"]), abs=1e-7)
    assert c["view_usd"] == pytest.approx(sum(r["cost"]["view_usd"] for r in doc["requests"]), abs=1e-7)
    assert c["priced_model"] == "claude-sonnet-4-5" and c["original_priced_requests"] == 28
    assert 0.9 < c["original_cache_read_share"] < 1 and 0 < c["view_cache_read_share"] < 1
    # the view of request 1 shares nothing with an earlier view, but it starts with the harness's own system
    # prompt and tools, which the provider read from its cache for the transcript's request (11,800 tokens):
    # that prefix is a cache read for the view too, the rest a cache write
    r1 = doc["requests"][0]
    h = doc["harness"]
    warm = min(h["system_tokens"] + h["tools_tokens"] + h["inferred_tokens"], 11_800)
    assert r1["common_prefix_tokens"] == 0 and r1["cost"]["view_cached_prefix_tokens"] == warm > 11_000
    # (recount - warm) x 3.75 + warm x 0.30 + the transcript's 60 output tokens x 15
    assert r1["cost"]["view_usd"] == pytest.approx(
        ((r1["recounted_tokens"] - warm) * 3.75 + warm * 0.30 + 60 * 15) / 1e6, abs=1e-8
    )
    # a later request's prefix is the larger of the two
    assert all(
        r["cost"]["view_cached_prefix_tokens"]
        == min(
            r["recounted_tokens"],
            max(
                r["common_prefix_tokens"],
                min(h["system_tokens"] + h["tools_tokens"] + h["inferred_tokens"], r["provider_cache_read_tokens"]),
            ),
        )
        for r in doc["requests"]
    )
    table = run("replay", str(EXAMPLE), "--window", "16000", "--reserve", "2000", "--recent", "3000").output
    assert "$0.004751" in table and "cost $0.1909 as the transcript ran it" in table


def test_replay_of_an_unknown_model_is_unpriced(run, tmp_path):
    f = tmp_path / "t.jsonl"
    lines = [json.loads(x) for x in EXAMPLE.read_text().splitlines()[:4]]
    for d in lines:
        if isinstance(d.get("message"), dict) and "model" in d["message"]:
            d["message"]["model"] = "my-local-model-7b"
    f.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    doc = json.loads(run("replay", str(f), "--json", "-").output)
    assert doc["summary"]["cost"]["original_usd"] is None and doc["summary"]["cost"]["view_usd"] is None
    assert all(r["cost"]["original_usd"] is None for r in doc["requests"])
    out = run("replay", str(f)).output
    assert "cost: unpriced" in out and " cost " not in out.splitlines()[4]  # no cost column
    rep = json.loads(run("report", str(f), "--json").output)
    assert rep["total"]["usd"] is None and rep["total"]["unpriced"] == rep["total"]["requests"] > 0


def test_report_of_the_example(run):
    res = run("report", str(EXAMPLE), "--json")
    doc = json.loads(res.output)
    t = doc["total"]
    assert t["requests"] == t["priced"] == 28 and list(doc["models"]) == ["claude-sonnet-4-5"]
    assert t["cache_read_tokens"] == 425_343 and t["output_tokens"] == 3_480
    text = run("report", str(EXAMPLE)).output
    assert "claude-sonnet-4-5" in text and "$0.1909" in text and "99.3%" in text
    bad = run("report", "nosuchsession")
    assert bad.exit_code == 1 and "no session 'nosuchsession'" in bad.output


@pytest.mark.parametrize(
    "name",
    [
        "claude-code/claude-reliability_python-to-rust-port.jsonl",
        "codex/edgerunner_codex-session.jsonl",
        "gemini-cli/entire_session.json",
    ],
)
def test_corpus_sessions_produce_a_total(run, name):
    path = require_corpus() / name
    doc = json.loads(run("report", str(path), "--json").output)
    t = doc["total"]
    assert t["usd"] > 0 and t["priced"] > 0
    assert t["usd"] == pytest.approx(sum(m["usd"] or 0 for m in doc["models"].values()), abs=1e-6)


def test_a_corpus_request_checked_by_hand(tmp_path):
    from latch.host.ingest import import_file
    from latch.host.loop import model_requests
    from latch.store import EventStore

    store = EventStore(str(tmp_path / "c.db"))
    sid, _, _ = import_file(
        store, require_corpus() / "claude-code/claude-reliability_python-to-rust-port.jsonl", final=True
    )
    req = model_requests(store.events(sid))[0]
    u = req.usage
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens) == (3, 15_289, 3_315, 1)
    got = pricing.price_usage(u, req.model, at=pricing.parse_timestamp(req.ts))
    # claude-opus-4-5: 3 x 5 + 15,289 x 0.50 + 3,315 x 6.25 + 1 x 25 = 15 + 7,644.5 + 20,718.75 + 25 = 28,403.25 µ$
    assert (got.model_id, got.usd) == ("claude-opus-4-5", Decimal("0.02840325"))
    store.close()


def test_bench_prices_each_engine_cache_aware():
    from latch.bench.report import cost_table, markdown_table
    from latch.bench.runner import Budget, SessionSource, run_job
    from latch.bench.summary import summarize

    src = SessionSource("invoice", path=str(EXAMPLE))
    job = run_job("continuity", src, Budget("32k:4k:8k", 32_000, 4_000, 8_000))
    assert job["priced_model"] == "claude-sonnet-4-5"
    assert job["cost_usd"] == pytest.approx(sum(job["cost"]), abs=1e-6)
    assert 0.5 < job["cache_read_share"] < 1
    # request 1 shares no prefix with an earlier one: every prompt token is a cache write (x 3.75), plus the
    # transcript's 60 output tokens (x 15)
    # (the cost prices the host's recount of what is sent; the engine's reported total may exceed it by a token
    # where its kernel message is priced part by part: at most one token's write price apart)
    assert job["cost"][0] == pytest.approx((job["tokens"][0] * 3.75 + 60 * 15) / 1e6, abs=3.75e-6 + 1e-9)
    row = summarize([job])[0]
    assert row["cost_usd_total"] == row["cost_usd_per_session"] == pytest.approx(job["cost_usd"], abs=1e-6)
    assert pricing.format_usd(row["cost_usd_total"]) in markdown_table([row])
    assert pricing.format_usd(job["cost_usd"]) in "\n".join(cost_table([job]))


# ------------------------------------------------------------------------ the price cache (replay < 2 s)
CACHED_MODELS = ["claude-sonnet-4-5", "gpt-5.6-sol", "gpt-5", "deepseek-chat", "gemini-2.5-flash", "no-such-model-x"]
WHEN = [
    datetime(2026, 1, 15, 12, 0, tzinfo=UTC),
    datetime(2026, 8, 20, 23, 59, tzinfo=UTC),  # gpt-5.6-sol: the day
    datetime(2026, 8, 21, 0, 1, tzinfo=UTC),
    datetime(2026, 8, 21, 17, 0, tzinfo=UTC),  # before, then its new price
    datetime(2026, 8, 21, 9, 30),
]  # naive: UTC; deepseek's off-peak hours are 16:30-00:30 UTC
COUNTS = [
    (0, 0, 0, 0),
    (1_234, 20_000, 0, 300),
    (5, 11_800, 78, 60),
    (150_000, 140_000, 10_000, 2_000),
    (300_000, 0, 0, 1),
]  # the last two above the long-context tiers (200,000 / 272,000 prompt tokens)


def _all_prices():
    out = []
    for model in CACHED_MODELS:
        for at in WHEN:
            out.append(pricing.writes_cache(model, at=at))
            out.extend(
                pricing.price(model=model, uncached=u, cache_read=r, cache_write=w, output=o, at=at)
                for u, r, w, o in COUNTS
            )
    return out


def test_the_price_cache_gives_genai_prices_figures_without_genai_prices(tmp_path, monkeypatch):
    """A process that finds its prices in the cache file prices exactly as genai-prices (same RequestCost, Decimal
    for Decimal), across tiers, start dates and time-of-day prices, and never looks anything up in genai-prices."""
    expected = []
    for model in CACHED_MODELS:  # genai-prices itself, no cache involved
        found = pricing._lookup(model, None)
        for at in WHEN:
            expected.append(None if found is None else found[1].get_prices(at).cache_write_mtok is not None)
            for u, r, w, o in COUNTS:
                calc = pricing._calc(model, None, u, r, w, o, at) if found is not None else None
                expected.append(
                    None
                    if calc is None
                    else pricing.RequestCost(*map(Decimal, calc), found[1].id, found[0].id, u, r, w, o)
                )
    assert sum(isinstance(e, pricing.RequestCost) for e in expected) == 125 and len(set(expected)) > 30
    per = len(COUNTS) + 1  # one writes_cache and the prices, per model and time
    sol, deepseek = CACHED_MODELS.index("gpt-5.6-sol"), CACHED_MODELS.index("deepseek-chat")
    at = lambda m, w: expected[(m * len(WHEN) + w) * per + 2]  # noqa: E731 (the 1,234 + 20,000 read request)
    assert at(sol, 1) != at(sol, 2) and at(deepseek, 0) != at(deepseek, 3)  # a start date; off-peak hours
    path = tmp_path / "home" / "cache" / "genai-prices.json"
    monkeypatch.setattr(pricing, "_fresh", {"models": {}, "prices": {}})
    pricing.use_price_cache(path)
    try:
        assert _all_prices() == expected  # computed, remembered
        pricing.save_price_cache()
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert doc["genai_prices"] == pricing._prices_version() and doc["models"]["|no-such-model-x"] is None
        assert 30 < len(doc["prices"]) <= 150 - 25  # the unknown model's requests are not looked up
        pricing.use_price_cache(path)  # as a new process: only the file

        def refuse(*a, **k):
            raise AssertionError("genai-prices consulted for a cached price")

        monkeypatch.setattr(pricing, "_lookup", refuse)
        monkeypatch.setattr(pricing, "_model_price", refuse)
        assert _all_prices() == expected
        path.write_text(json.dumps({**doc, "genai_prices": "0.0.0"}), encoding="utf-8")  # another version's file
        pricing.use_price_cache(path)
        with pytest.raises(AssertionError, match="genai-prices consulted"):
            pricing.price(model="gpt-5", uncached=1, at=AT)
    finally:
        pricing.use_price_cache(None)


# ------------------------------------------------------------------------ cache rewrites
def _u(read, write, inp=5):
    return Usage(input_tokens=inp, output_tokens=10, cache_read_tokens=read, cache_write_tokens=write)


def test_a_request_that_lost_the_cached_prefix_is_a_rewrite():
    usages = [
        _u(0, 10_000),  # 1: the first write is no rewrite
        _u(10_000, 500),  # 2: read what the cache held
        None,  # 3: no usage: skipped
        _u(2_000, 9_000),  # 4: read 2,000 of the 10,500 held: a rewrite
        _u(11_000, 300),  # 5
        _u(5_650, 6_000),  # 6: exactly half of 11,300 read: not below it
        _u(100, None),  # 7: writes unreported (OpenAI): skipped
        _u(0, 0),
    ]  # 8: nothing written: no waste to count
    r = pricing.cache_rewrites(usages)
    assert r.rewrites == (4,) and r.requests == 6
    assert (r.rewrite_write_tokens, r.write_tokens) == (9_000, 10_000 + 500 + 9_000 + 300 + 6_000)
    assert r.as_dict()["share"] == round(9_000 / 25_800, 4)
    assert pricing.cache_rewrites([_u(100, None), None]).share is None


@pytest.mark.slow  # left out of the fast tier: two replays and two reports of an 89-request corpus session
def test_replay_and_report_show_the_transcripts_rewrites(run, tmp_path):
    corpus = require_corpus()
    f = corpus / "claude-code" / "entire-image_session.jsonl"
    doc = json.loads(run("replay", str(f), "--json", "-").output)
    # requests 4 and 25 read only the 16,496-token system prefix after 42,993 and 104,135 cached tokens and wrote
    # 26,793 + 87,925 tokens again: 46.7% of the session's 245,647 cache-write tokens
    assert doc["summary"]["cache_rewrites"] == {
        "requests": 89,
        "rewrites": [4, 25],
        "rewrite_write_tokens": 114_718,
        "write_tokens": 245_647,
        "share": 0.467,
    }
    table = run("replay", str(f)).output
    assert "2 of 89 request(s) wrote the cached prefix again (request 4, 25): 114,718 of 245,647" in table
    rep = json.loads(run("report", str(f), "--json").output)
    assert rep["cache_rewrites"]["total"] == {
        "requests": 89,
        "rewrites": 2,
        "rewrite_write_tokens": 114_718,
        "write_tokens": 245_647,
        "share": 0.467,
    }
    assert "cache rewrites: 2 of 89 request(s)" in run("report", str(f)).output
