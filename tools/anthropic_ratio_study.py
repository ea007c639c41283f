"""The Anthropic estimator study (issues 11 item 4 and 12): how Latch's ``anthropic`` heuristic profile compares with
the prompt tokens Anthropic really counted, measured on the corpus's Claude Code sessions.

Claude Code's transcript records the provider usage of every request: input + cache read + cache write is the real
prompt (tokens). Its fixed harness (system prompt, tool schemas) is not in the JSONL, so whole-request ratios mix it
in; the difference between two consecutive requests cancels it. For each pair of consecutive requests whose views
are an append-only extension (the view of request i opens with the whole view of request i-1: no eviction, no
kernel change; replayed with the ``sliding-window`` baseline and a window far above the session, so nothing is ever
dropped), the real delta is ``prompt(i) - prompt(i-1)`` and the estimated delta is the sum of Latch's per-message
estimates (the view's recount, message framing included) of the messages appended between them. The script prints,
per corpus file, the distribution (min, p5, median, p95, max) of estimate / real over those deltas, how many are
under (ratio < 1), and the multiplier ``m`` on the ``anthropic`` profile that would put the lowest delta exactly on
the real count (``m = 1 / min ratio``: any multiplier below it under-counts that delta).

Deltas where the real count did not grow (``<= 0``: the provider prompt shrank, a compaction or a request the
transcript splits) or where the appended content is tiny (real delta below ``--min-real`` tokens, default 50:
framing and the harness's per-turn reminders dominate there) are counted and reported, not used.

Measured on the corpus of December 2026 (267 deltas of 3 files; ``bastion_claude-session.jsonl`` is a GLM model
behind Claude Code whose usage is all zeros: no data). estimate / real, median (p5) by profile:

* ``anthropic`` (openai x 4/3): 1.50-1.63 (0.57-1.32); 33 of 267 deltas under (12.4%), lowest 0.014; aggregate
  1.39. ``openai``: 1.16-1.25, 58 under (21.7%), aggregate 1.05. Exact cl100k (``tiktoken``): 0.81-0.82, 266 under:
  Claude counts this content at about 1.22x cl100k (the profile's 4/3 sits above that median).
* The deltas under are mostly what Claude Code sends and its JSONL lacks: thinking blocks (only the signature is
  kept; 19 of 40 such deltas under, down to 0.014 on an EnterPlanMode turn of 29,709 real tokens) and system
  reminders attached to user turns and tool results. Deltas of plain assistant text, tool calls and tool results
  still have 13 of 221 under (lowest 0.165) for the same reason.

So no multiplier below 4/3 keeps 0 deltas under (today's 4/3 does not either), and no single multiplier brings a
file's views into 0.9-1.3x of the provider figure: one file's view / provider ratios span 0.48-1.90 under ``latch
replay`` (the engine keeps less than Claude Code sent). The profile is unchanged.

Usage: ``python tools/anthropic_ratio_study.py [--corpus DIR] [--profile anthropic|openai|tiktoken] [--min-real 50]
[--json]``
(the corpus defaults to ``../shared/corpus`` beside the repository).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from latch.cli.replay import plan_replay
from latch.host.ingest import import_all
from latch.store import EventStore

REPO = Path(__file__).resolve().parents[1]
WINDOW = 50_000_000  # far above any corpus session: the baseline keeps every message
HEADER_LINES = 2  # RequestResult.line_tokens: [system, tools, *messages]


def _shape(appended: list[Any]) -> str:
    """What the harness may add to a delta beyond the transcript: ``"thinking"`` (an appended assistant turn
    that had a thinking block: Claude Code keeps only its signature, the API counts the block inside a tool
    loop), ``"user"`` (an appended user message: Claude Code attaches system reminders the JSONL lacks),
    ``"plain"`` (assistant text and tool calls and tool results only)."""
    kinds = {e.KIND for e in appended}
    if any(e.KIND == "assistant_message" and getattr(e, "reasoning_reported", False) for e in appended):
        return "thinking"
    return "user" if "user_message" in kinds else "plain"


SHAPES = ("plain", "thinking", "user")


def _pct(xs: np.ndarray, q: float) -> float | None:
    return float(np.percentile(xs, q)) if len(xs) else None


def file_deltas(path: Path, profile: str, min_real: int) -> dict[str, Any]:
    """``{"file", "sessions", "requests", "deltas": [(request, real, estimate)], "skipped_nonpositive",
    "skipped_small", "not_append_only", "view_ratios": [view total / provider prompt, requests 2..]}``."""
    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(Path(tmp) / "latch.db")
        try:
            sids = [sid for sid, _, _ in import_all(store, path, "claude-code", final=True)]
            out: dict[str, Any] = {"file": str(path), "sessions": len(sids), "requests": 0, "deltas": [],
                                   "skipped_nonpositive": 0, "skipped_small": 0, "not_append_only": 0,
                                   "view_ratios": []}
            for sid in sids:
                plan = plan_replay(store, sid, engine="sliding-window", estimator=profile if "-" in profile or profile == "tiktoken" else f"heuristic-{profile}",
                                   window=WINDOW, reserve=1_000, recent=WINDOW - 1_000, harness=True)
                events = list(store.events(sid))
                prev = None
                for res in plan.loop.replay(plan.requests):
                    out["requests"] += 1
                    usage = res.request.usage if res.request is not None else None
                    real = usage.prompt_tokens if usage is not None else None
                    if res.view is None or not real:
                        prev = None
                        continue
                    if res.request.number > 1:
                        out["view_ratios"].append(res.view.tokens.total_tokens / real)
                    if prev is not None:
                        p_res, p_real = prev
                        d_real = real - p_real
                        n_prev = len(p_res.lines)
                        if res.common_prefix_lines < n_prev or res.rotated or res.prefix_break:
                            out["not_append_only"] += 1
                        elif d_real <= 0:
                            out["skipped_nonpositive"] += 1
                        elif d_real < min_real:
                            out["skipped_small"] += 1
                        else:
                            est = sum(res.line_tokens[n_prev:])
                            lo, hi = p_res.request.until_seq, res.request.until_seq
                            out["deltas"].append((res.request.number, d_real, est,
                                                  _shape([s.event for s in events if lo < s.seq <= hi])))
                    prev = (res, real)
                finish = getattr(plan.setup.writer, "finish", None)
                if finish is not None:
                    finish(keep=False)
        finally:
            store.close()
    return out


def summarize(d: dict[str, Any]) -> dict[str, Any]:
    ratios = np.array([e / r for _, r, e, _ in d["deltas"]], dtype=float)
    by_shape = {}
    for shape in SHAPES:
        xs = np.array([e / r for _, r, e, s in d["deltas"] if s == shape], dtype=float)
        by_shape[shape] = {"deltas": len(xs), "under": int((xs < 1).sum()),
                           "min": float(xs.min()) if len(xs) else None, "p5": _pct(xs, 5), "median": _pct(xs, 50)}
    views = np.array(d["view_ratios"], dtype=float)
    under = int((ratios < 1).sum())
    return {"file": d["file"], "sessions": d["sessions"], "requests": d["requests"], "deltas": len(ratios),
            "under": under, "skipped_nonpositive": d["skipped_nonpositive"], "skipped_small": d["skipped_small"],
            "not_append_only": d["not_append_only"],
            "ratio": {"min": float(ratios.min()) if len(ratios) else None, "p5": _pct(ratios, 5),
                      "median": _pct(ratios, 50), "p95": _pct(ratios, 95),
                      "max": float(ratios.max()) if len(ratios) else None},
            "by_shape": by_shape,
            "real_tokens": int(sum(r for _, r, _, _ in d["deltas"])),
            "estimate_tokens": int(sum(e for _, _, e, _ in d["deltas"])),
            "view_ratio": {"min": float(views.min()) if len(views) else None, "median": _pct(views, 50),
                           "max": float(views.max()) if len(views) else None}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--profile", default="anthropic",
                    help="a heuristic profile (anthropic, openai, o200k, cjk) or an estimator plugin name (tiktoken: "
                         "exact cl100k, to compare Claude's counts with cl100k itself)")
    ap.add_argument("--min-real", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    files = sorted((args.corpus / "claude-code").glob("*.jsonl"))  # sub-agent files come with their parent
    if not files:
        print(f"no Claude Code file under {args.corpus / 'claude-code'}", file=sys.stderr)
        return 1
    rows = [summarize(file_deltas(f, args.profile, args.min_real)) for f in files]
    deltas = sum(r["deltas"] for r in rows)
    under = sum(r["under"] for r in rows)
    mins = [r["ratio"]["min"] for r in rows if r["ratio"]["min"] is not None]
    overall = {"deltas": deltas, "under": under, "under_share": under / deltas if deltas else None,
               "min_ratio": min(mins) if mins else None,
               "aggregate_ratio": (sum(r["estimate_tokens"] for r in rows) / sum(r["real_tokens"] for r in rows))
               if deltas else None}
    if args.json:
        print(json.dumps({"profile": args.profile, "min_real": args.min_real, "files": rows, "overall": overall},
                         indent=2))
        return 0
    print(f"profile {args.profile}: estimate / real prompt-token delta of appended content (real delta >= "
          f"{args.min_real} tokens)")
    print(f"{'file':52} {'deltas':>6} {'under':>5} {'min':>6} {'p5':>6} {'med':>6} {'p95':>6} {'max':>6} "
          f"{'agg':>6} | keep-all view / provider, requests 2.., min med max")
    for r in rows:
        q = r["ratio"]
        v = r["view_ratio"]
        fmt = lambda x: "  –   " if x is None else f"{x:6.3f}"  # noqa: E731
        agg = r["estimate_tokens"] / r["real_tokens"] if r["real_tokens"] else None
        print(f"{Path(r['file']).name[:52]:52} {r['deltas']:6d} {r['under']:5d} {fmt(q['min'])} {fmt(q['p5'])} "
              f"{fmt(q['median'])} {fmt(q['p95'])} {fmt(q['max'])} {fmt(agg)} | {fmt(v['min'])} {fmt(v['median'])} "
              f"{fmt(v['max'])}")
        print(f"{'':52} " + "; ".join(
            f"{k} {v['deltas']} ({v['under']} under, min {fmt(v['min']).strip()}, p5 {fmt(v['p5']).strip()}, "
            f"median {fmt(v['median']).strip()})" for k, v in r["by_shape"].items()))
        print(f"{'':52} skipped: {r['skipped_nonpositive']} real delta <= 0, {r['skipped_small']} below "
              f"{args.min_real}, {r['not_append_only']} not append-only; {r['requests']} requests")
    share = overall["under_share"]
    print(f"overall: {deltas} deltas, {under} under ({share:.1%})" if deltas else "overall: no delta")
    if overall["min_ratio"]:
        print(f"lowest ratio {overall['min_ratio']:.3f}: a multiplier below {1 / overall['min_ratio']:.3f} x this "
              f"profile under-counts that delta; aggregate estimate / real {overall['aggregate_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
