"""latch replay FILE --html OUT.html: the self-contained report, checked in a real headless Chromium."""

from __future__ import annotations

import json
from io import BytesIO
from pathlib import Path

import pytest
from browser_support import launch
from click.testing import CliRunner

from latch.cli import _load_commands, cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"
EVIL = '<script>document.title="pwned";window.PWNED=1</script><img src=x onerror="window.PWNED=2"> '
BROKEN_AT = 10  # the provider request whose cache read the test drops to 0: a provider cache break


@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b


def _evil_transcript(path: Path) -> Path:
    """The example with ``<script>`` in its first user message and request ``BROKEN_AT`` reading no cache."""
    out, injected, requests = [], False, []
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        msg = d.get("message") or {}
        if not injected and d.get("type") == "user" and isinstance(msg.get("content"), str):
            msg["content"] = EVIL + msg["content"]
            injected = True
        if d.get("type") == "assistant" and "usage" in msg:
            if d["requestId"] not in requests:  # one model request may span several lines
                requests.append(d["requestId"])
            if len(requests) == BROKEN_AT:
                u = msg["usage"]
                u["cache_creation_input_tokens"] += u["cache_read_input_tokens"]
                u["cache_read_input_tokens"] = 0
        out.append(json.dumps(d))
    assert injected
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    src = _evil_transcript(tmp / "evil.claude.jsonl")
    out = tmp / "report.html"
    _load_commands()
    res = CliRunner().invoke(
        cli,
        ["--db", str(tmp / "latch.db"), "replay", str(src), "--html", str(out)],
        env={"LATCH_HOME": str(tmp / "home")},
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    return out


def test_report_is_self_contained_and_escaped(report):
    text = report.read_text(encoding="utf-8")
    assert "<script" not in text and 'onerror="' not in text
    assert "&lt;script&gt;document.title=&quot;pwned&quot;" in text
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    assert "Content-Security-Policy" in text and "default-src 'none'" in text


@pytest.mark.slow  # left out of the fast tier: a browser
def test_report_in_chromium(browser, report, tmp_path):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    assert requested == [report.as_uri()]  # nothing fetched: no image, no script, no style from anywhere
    # the transcript's <script> and onerror did not run; they are text
    assert page.title().startswith("latch replay · ") and "pwned" not in page.title()
    assert page.evaluate("typeof window.PWNED") == "undefined"
    assert page.evaluate("document.scripts.length") == 0 and page.locator("#transcript img").count() == 0
    first = page.locator("#transcript .item.user pre").first.text_content()
    assert first.startswith(EVIL)
    # the expected elements: summary, costs, chart with one bar per request and the cache break, table, epochs
    rows = page.locator("#requests tbody tr")
    assert rows.count() == 28
    assert page.locator("#chart rect.bar").count() == 28
    assert page.locator("#chart polyline.provider").count() == 1
    breaks = page.locator("#chart line.break.provider")
    assert breaks.count() == 1
    assert (
        breaks.first.locator("title").text_content() == f"request {BROKEN_AT}: provider cache broken (prefix changed)"
    )
    assert page.locator("#cost-original").text_content().startswith("$")
    assert page.locator("#cost-view").text_content().startswith("$")
    assert page.locator("#epochs tbody tr").count() == 2
    assert page.locator("#breaks li").first.text_content().startswith(f"request {BROKEN_AT} (seq ")
    assert rows.nth(0).locator("td").nth(0).text_content() == "1"
    # a screenshot of the chart: epoch-coloured bars and the red break marker are drawn
    import matplotlib.image as mpimg  # test extra

    png = page.locator("#chart").screenshot(path=str(tmp_path / "chart.png"))
    pixels = (mpimg.imread(BytesIO(png), format="png")[:, :, :3] * 255).round().astype(int)
    colours = {tuple(p) for p in pixels.reshape(-1, 3)}
    assert (0x4E, 0x79, 0xA7) in colours  # epoch 1 bars
    assert any(abs(r - 0xE1) < 12 and abs(g - 0x57) < 12 and abs(b - 0x59) < 12 for r, g, b in colours)  # the break
    full = page.screenshot(full_page=True, path=str(tmp_path / "report.png"))
    assert full[:8] == b"\x89PNG\r\n\x1a\n" and len(full) > 10_000
    context.close()
