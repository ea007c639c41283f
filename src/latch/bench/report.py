"""``latch bench``'s report: the Markdown tables, the verdict lines, ``report.md`` and ``report.json``.

The rows come from :func:`latch.bench.summary.summarize`; the plots beside ``report.md`` from
:mod:`latch.bench.plots`.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..accounting import pricing
from ..textsafe import dumps, write_text
from .plots import Plotter, budget_plot_files
from .runner import Budget, SessionSource
from .summary import summarize

__all__ = ["JobsJson", "markdown_table", "verdicts", "budget_verdicts", "cost_table", "write_report", "NARROW_COLUMNS"]


_COLUMNS = (
    ("engine", "engine"),
    ("budget", "budget (window:reserve:recent)"),
    ("frontier", "cost/coverage frontier"),
    ("sessions", "sessions"),
    ("requests", "requests"),
    ("tokens_per_request", "tokens/request (mean)"),
    ("tokens_total", "tokens total"),
    ("cacheability_median", "cacheability median"),
    ("cacheability_p10", "cacheability p10"),
    ("needle_survival", "needle survival"),
    ("coverage", "needed-context coverage"),
    ("working_set_coverage", "working-set coverage"),
    ("rewrite_waste", "cache-write rewrite waste"),
    ("tokens_per_session", "tokens/session"),
    ("protocol_invalid", "protocol-invalid requests"),
    ("budget_violations", "budget violations"),
    ("refused", "refused (overflow)"),
    ("same_requests", "requests every engine answered"),
    ("coverage_same_requests", "coverage on those"),
    ("cost_usd_same_requests", "cost $ on those"),
    ("materialize_p50_ms", "materialize p50 ms"),
    ("materialize_p99_ms", "materialize p99 ms"),
    ("peak_mb", "peak MB"),
    ("cost_usd_total", "cost $ total"),
    ("cost_usd_per_session", "cost $/session (priced)"),
    ("cache_read_share", "cache-read share"),
    ("estimators", "estimator(s)"),
)


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "–"
    if key in (
        "cacheability_median",
        "cacheability_p10",
        "needle_survival",
        "cache_read_share",
        "coverage",
        "working_set_coverage",
        "rewrite_waste",
        "coverage_same_requests",
    ):
        return f"{100 * v:.1f}%"
    if key in ("cost_usd_total", "cost_usd_per_session", "cost_usd_same_requests"):
        return pricing.format_usd(v)
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def verdicts(rows: Sequence[Mapping[str, Any]], engine: str = "continuity") -> list[str]:
    """One line per budget: how ``engine`` compares with the baseline of the best needed-context coverage among
    the engines that refused no more than the fewest did (coverage, dollars, the frontier)."""
    out = []
    for budget in dict.fromkeys(r["budget"] for r in rows):
        at = [r for r in rows if r["budget"] == budget]
        mine = next((r for r in at if r["engine"] == engine), None)
        fair = [r for r in at if r["engine"] != engine and r["frontier"] != "refuses" and r["coverage"] is not None]
        if mine is None or mine["coverage"] is None or not fair:
            continue
        best = max(fair, key=lambda r: (r["coverage"], -(r["cost_usd_total"] or 0)))
        dollars = (
            f"{mine['cost_usd_total'] / best['cost_usd_total']:.0%} of its dollars"
            if mine["cost_usd_total"] is not None and best["cost_usd_total"]
            else "dollars not comparable"
        )
        better = mine["coverage"] >= best["coverage"]
        same = ""
        if mine.get("coverage_same_requests") is not None and best.get("coverage_same_requests") is not None:
            ratio = (
                f", at {mine['cost_usd_same_requests'] / best['cost_usd_same_requests']:.0%} of its dollars"
                if mine.get("cost_usd_same_requests") is not None and best.get("cost_usd_same_requests")
                else ""
            )
            same = (
                f" Like for like, on the {mine['same_requests']:,} requests every engine answered: "
                f"{_cell('coverage', mine['coverage_same_requests'])} vs "
                f"{_cell('coverage', best['coverage_same_requests'])}{ratio}."
            )
        out.append(
            f"- **{budget}**: {engine} covers {_cell('coverage', mine['coverage'])} of the needed context "
            f"{'≥' if better else '<'} {best['engine']}'s {_cell('coverage', best['coverage'])} (the best "
            f"baseline) at {dollars}; {'on' if mine['frontier'] == 'yes' else 'not on'} the cost/coverage "
            f"frontier.{same}"
        )
    return out


NARROW_COLUMNS = (
    ("engine", "engine"),
    ("budget", "budget"),
    ("frontier", "frontier"),
    ("requests", "requests"),
    ("tokens_per_request", "tokens/request"),
    ("coverage", "coverage"),
    ("refused", "refused"),
    ("cost_usd_total", "cost $"),
)
"""The columns of the table ``latch bench`` prints (report.md has every column of :data:`_COLUMNS`; the
like-for-like figures are in report.md and in each verdict line)."""


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]] = _COLUMNS) -> str:
    """The Markdown table of :func:`summarize` ``rows``: one row each, ``columns`` as (key, title) pairs (default:
    every figure)."""
    head = "| " + " | ".join(t for _, t in columns) + " |"
    sep = "|" + "|".join("---" if k in ("engine", "budget", "frontier") else "---:" for k, _ in columns) + "|"
    body = ["| " + " | ".join(_cell(k, r[k]) for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def budget_verdicts(rows: Sequence[Mapping[str, Any]], engine: str = "continuity") -> list[str]:
    """One plain line per budget of ``rows`` (:func:`summarize`): ``BUDGET: VERDICT`` as :func:`verdicts` words
    it, or why there is none (the engine was not run, or no other engine has a coverage to compare)."""
    said = {}
    for line in verdicts(rows, engine):
        budget, _, rest = line.removeprefix("- **").partition("**: ")
        said[budget] = rest
    out = []
    for budget in dict.fromkeys(r["budget"] for r in rows):
        if budget not in said:
            ran = any(r["engine"] == engine and r["budget"] == budget for r in rows)
            said[budget] = (
                f"no comparison: no other engine has a needed-context coverage to compare {engine} with"
                if ran
                else f"no comparison: {engine} was not run"
            )
        out.append(f"{budget}: {said[budget]}")
    return out


def cost_table(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown lines: what each engine's views of each session would cost (USD, cache-aware; one column per
    engine and budget, "unpriced" where the session's model has no price), with the rule in one sentence."""
    ok = [r for r in results if "error" not in r]
    keys = sorted({(r["engine"], r["budget"]) for r in ok})
    sessions = sorted({r["session"] for r in ok})
    if not keys:
        return []
    got = {(r["session"], r["engine"], r["budget"]): r.get("cost_usd") for r in ok}
    lines = [
        "Cost per session (USD): each view's prompt at the cache-read rate for its common prefix with the "
        "engine's previous request and the cache-write (Anthropic) or uncached (OpenAI, Gemini) rate for the "
        "rest, plus the transcript's output tokens; genai-prices' bundled table.",
        "",
        "| session | " + " | ".join(f"{e} ({b})" for e, b in keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for name in sessions:
        cells = [pricing.format_usd(got[(name, e, b)]) if (name, e, b) in got else "–" for e, b in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


_NESTED = "\n  "
"""What starts each line of a job's JSON inside ``report.json`` (its ``"jobs"`` list is two levels deep, one space
a level)."""


class JobsJson:
    """Each job's entry of ``report.json`` written as its row comes in: called with each row (a
    ``run_bench(on_row=...)`` callback, while the other jobs run), so :func:`write_report` given it only joins the
    entries after the jobs: the same bytes as writing every row then. A row must not change after it was given
    (one given again, or a row never given, is written by :meth:`entry`)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Mapping[str, Any], str]] = {}

    def __call__(self, row: Mapping[str, Any]) -> None:
        try:
            self._entries[id(row)] = (row, _entry(row))
        except Exception:  # noqa: BLE001, S110 - an entry written early only saves time; write_report writes it anyway
            pass

    def entry(self, row: Mapping[str, Any]) -> str:
        """``row``'s entry in the ``"jobs"`` list of ``report.json``: the one written when it came in, else now."""
        known = self._entries.get(id(row))
        return known[1] if known is not None and known[0] is row else _entry(row)


def _entry(row: Mapping[str, Any]) -> str:
    return dumps(row, indent=1).replace("\n", _NESTED)  # JSON escapes a string's newlines: each is a line's end


def _report_json(doc: Mapping[str, Any], results: Sequence[Mapping[str, Any]], jobs: JobsJson) -> str:
    """``dumps({**doc, "jobs": list(results)}, indent=1)``, each job's entry from ``jobs``."""
    head = dumps({**doc, "jobs": []}, indent=1)
    if not results:
        return head
    assert head.endswith("[]\n}"), head[-20:]
    return head[: -len("[]\n}")] + "[" + _NESTED + ("," + _NESTED).join(jobs.entry(r) for r in results) + "\n ]\n}"


def write_report(
    out: str | os.PathLike[str],
    results: Sequence[Mapping[str, Any]],
    *,
    engines: Sequence[str],
    sessions: Sequence[SessionSource],
    budgets: Sequence[Budget],
    seconds: float,
    plotter: Plotter | None = None,
    jobs: JobsJson | None = None,
) -> dict[str, Path]:
    """Write ``report.md``, ``report.json`` and the PNG plots (:func:`latch.bench.plots.budget_plots`) into ``out``;
    return their paths. The plots draw in ``plotter``'s worker processes while the report is written (without
    one, in a :class:`~latch.bench.plots.Plotter` of two workers for this call); ``jobs``: the jobs' entries of
    ``report.json`` written as their rows came in (:class:`JobsJson`; without it, written here). Returns once every
    file is written. ``ImportError`` (nothing written) without matplotlib, the bench extra."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ImportError("No module named 'matplotlib'", name="matplotlib")
    if plotter is None:
        with Plotter(2) as own:
            return write_report(
                out,
                results,
                engines=engines,
                sessions=sessions,
                budgets=budgets,
                seconds=seconds,
                plotter=own,
                jobs=jobs,
            )

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    drawing = plotter.budget_plots(folder, results, engines)
    rows = summarize(results)
    doc = {
        "engines": list(engines),
        "budgets": [asdict(b) for b in budgets],
        "sessions": [asdict(s) for s in sessions],
        "seconds": round(seconds, 1),
        "summary": rows,
    }
    paths = {"json": folder / "report.json", "markdown": folder / "report.md"}
    write_text(paths["json"], _report_json(doc, results, jobs or JobsJson()) + "\n")

    errors = [r for r in results if "error" in r]
    notes = [f"- {r['engine']} on {r['session']} ({r['budget']}): {r['error']}" for r in errors]
    md = [
        "# latch bench",
        "",
        f"{len(engines)} engines × {len(sessions)} sessions × {len(budgets)} budgets in {seconds:,.0f} s. "
        "Tokens are Latch's estimate of each request as sent; cacheability is the common prefix with the previous "
        "request over the request, on the canonical serialization; needle survival counts checkpoints where an "
        "early fact was in the view or returned by the engine's recall. Rows are sorted per budget by the "
        "cost/coverage frontier: engines no other beats on both dollars and needed-context coverage first, "
        "cheapest first; an engine that refused more requests than the fewest any engine refused at that budget "
        "is never on it (its dollars and coverage are over fewer requests). Working-set coverage: of the files the "
        "session had read or changed so far, the share each view names; cache-write rewrite waste: the share of "
        "the views' cache-write tokens spent on requests that did not reuse the previous request's prefix.",
        "",
        markdown_table(rows),
        "",
        *verdicts(rows),
        "",
    ]
    md += [*cost_table(results), ""]
    if notes:
        md += ["Failed jobs:", *notes, ""]
    pngs = [path.name for _, _, path, _ in budget_plot_files(folder, results).values()]
    md += ["Plots: " + ", ".join(f"[{name}]({name})" for name in pngs), ""]
    write_text(paths["markdown"], "\n".join(md))
    paths.update({key: figure.result() for key, figure in drawing.items()})
    return paths
