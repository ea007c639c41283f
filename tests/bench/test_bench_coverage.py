"""Needed-context coverage: the identifier rule, and the probe on a real bench job."""

from __future__ import annotations

import json
import re

from corpus_support import REPO
from hypothesis import given
from hypothesis import strategies as st

from latch.bench.coverage import CoverageProbe, WorkingSetProbe, _tail, identifiers, view_text
from latch.bench.report import markdown_table, verdicts
from latch.bench.runner import Budget, SessionSource, run_job
from latch.bench.summary import summarize
from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.port import ViewMessage


def test_the_identifier_rule():
    text = (
        "Fixed src/app/export.py: export_rows() now calls pandas.read_csv; see commit 3f9a2c71d "
        "and call_8Hq2x9 (error E42, 2024 rows, 12345). The word version and README stay out."
    )
    assert identifiers(text) == ["src/app/export.py", "export_rows", "pandas.read_csv", "3f9a2c71d", "call_8Hq2x9"]


def _identifiers_by_the_rule(text):
    out = {}
    for m in re.finditer(r"[A-Za-z0-9_./\-]{4,}", text):
        tok = m.group(0).strip("./-")
        if len(tok) < 4 or tok in out:
            continue
        digits = len(re.findall("[0-9]", tok))
        if "/" in tok or "_" in tok or re.search(r"\.[A-Za-z]", tok) or (re.search("[A-Za-z]", tok) and digits >= 4):
            out[tok] = None
    return list(out)


_PIECES = ["a", "Zk", "word", "0", "42", "2024", "_", ".", "./", "/", "-", " ", "\n", "é", "字", "v1", "x.Y"]


@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join))
def test_the_identifiers_are_the_rules_on_any_text(text):
    assert identifiers(text) == _identifiers_by_the_rule(text)


class _Stored:
    def __init__(self, seq, event):
        self.seq, self.event = seq, event


def test_the_probe_counts_what_was_seen_before_and_what_the_view_holds():
    events = [
        _Stored(1, UserMessage("fix the bug in src/app/export.py")),
        _Stored(2, AssistantMessage("", (ToolCall("c1", "Read", json.dumps({"path": "src/app/export.py"})),))),
        _Stored(3, ToolResult("c1", "def export_rows(): raise KeyError('user_id')")),
        _Stored(4, AssistantMessage("export_rows in src/app/export.py reads user_id; new file src/app/fix.py")),
    ]
    probe = CoverageProbe(events)
    full = type(
        "V",
        (),
        {
            "messages": (
                ViewMessage("user", "fix the bug in src/app/export.py"),
                ViewMessage("tool", "def export_rows(): raise KeyError('user_id')"),
            )
        },
    )
    # response 4 names export_rows, src/app/export.py, user_id (seen) and src/app/fix.py (new: not needed)
    assert probe.score(events[3].event, full, until_seq=3) == (3, 3)
    probe = CoverageProbe(events)
    masked = type(
        "V",
        (),
        {
            "messages": (
                ViewMessage("user", "fix the bug in src/app/export.py"),
                ViewMessage("tool", "[tool output omitted: 1 lines]"),
            )
        },
    )
    assert probe.score(events[3].event, masked, until_seq=3) == (3, 1)


def test_a_tool_calls_parameter_names_are_not_needed_context():
    """``old_string`` and ``file_path`` come from the Edit tool's schema, which every request carries; the
    values are what the response took from the context."""
    edit = ToolCall(
        "c2",
        "Edit",
        json.dumps(
            {
                "file_path": "src/app/export.py",
                "old_string": "user_id",
                "new_string": "account_id",
                "replace_all": False,
            }
        ),
    )
    events = [
        _Stored(
            1,
            AssistantMessage(
                "",
                (
                    ToolCall(
                        "c1", "Edit", json.dumps({"file_path": "src/app/a.py", "old_string": "x", "new_string": "y"})
                    ),
                ),
            ),
        ),
        _Stored(2, ToolResult("c1", "ok: src/app/export.py reads user_id")),
        _Stored(3, AssistantMessage("", (edit,))),
    ]
    probe = CoverageProbe(events)
    view = type("V", (), {"messages": (ViewMessage("tool", "ok: src/app/export.py reads user_id"),)})
    # needed: src/app/export.py and user_id (account_id is new); not file_path, old_string, new_string
    assert probe.score(events[2].event, view, until_seq=2) == (2, 2)


def test_bench_reports_coverage_per_request_and_per_engine():
    source = SessionSource(name="invoice", path=str(REPO / "examples" / "invoice-rounding.claude.jsonl"))
    wide = run_job("continuity", source, Budget("256k:32k:64k", 256_000, 32_000, 64_000))
    assert len(wide["coverage"]) == wide["requests"] == 28
    assert wide["coverage_needed"] > 20
    assert wide["coverage_present"] == wide["coverage_needed"]  # nothing is evicted at 256k: all of it is there
    assert all(c in (None, 1.0) for c in wide["coverage"])
    row = summarize([wide])[0]
    assert row["coverage"] == 1.0 and row["coverage_needed"] == wide["coverage_needed"]
    assert "needed-context coverage" in markdown_table([row]).splitlines()[0]
    assert "| 100.0% |" in markdown_table([row]).splitlines()[2]


def test_working_set_coverage_counts_the_files_touched_so_far_that_the_view_names():
    read = AssistantMessage("", (ToolCall("c1", "Read", json.dumps({"file_path": "/home/me/repo/src/app.py"})),))
    edit = AssistantMessage(
        "",
        (
            ToolCall(
                "c2",
                "Edit",
                json.dumps({"file_path": "/home/me/repo/lib/util.py", "old_string": "a", "new_string": "b"}),
            ),
        ),
    )
    events = [
        _Stored(1, read),
        _Stored(2, ToolResult("c1", "x = 1")),
        _Stored(3, edit),
        _Stored(4, ToolResult("c2", "ok")),
    ]
    probe = WorkingSetProbe(events)
    state = type("V", (), {"messages": (ViewMessage("user", "Working set: files\n- src/app.py: read ×1"),)})
    assert probe.score(state, until_seq=2) == (1, 1)  # a workspace-relative path names the file
    assert probe.score(state, until_seq=4) == (2, 1)  # util.py is not named


def test_the_verdict_compares_with_the_best_baseline_that_refused_no_more():
    rows = [
        {"engine": "continuity", "budget": "32k", "coverage": 0.8, "cost_usd_total": 10.0, "frontier": "yes"},
        {"engine": "sliding-window", "budget": "32k", "coverage": 0.85, "cost_usd_total": 30.0, "frontier": "yes"},
        {"engine": "raw-history", "budget": "32k", "coverage": 0.99, "cost_usd_total": 2.0, "frontier": "refuses"},
    ]
    assert verdicts(rows) == [
        "- **32k**: continuity covers 80.0% of the needed context < sliding-window's 85.0% "
        "(the best baseline) at 33% of its dollars; on the cost/coverage frontier."
    ]


class _WholeText:
    """The working-set rule read literally: every path touched so far searched in the view's whole text."""

    def __init__(self, events):
        self._events, self._paths = list(events), {}

    def score(self, view, until_seq, *, text=None):
        for stored in self._events:
            if stored.seq <= until_seq:
                for call in getattr(stored.event, "tool_calls", ()) or ():
                    self._paths.update((p, None) for p in call.paths() if 0 < len(p) < 300)
        if not self._paths:
            return 0, 0
        text = view_text(view) if text is None else text
        return len(self._paths), sum(1 for p in self._paths if p in text or _tail(p) in text)


def _read(seq, path):
    return _Stored(seq, AssistantMessage("", (ToolCall(f"c{seq}", "Read", json.dumps({"file_path": path})),)))


def test_the_working_set_is_the_whole_texts_when_a_path_spans_two_strings_or_a_string_comes_back():
    events = [_read(1, "/r/src/app.py"), _read(2, "/r/odd\nname.py"), _read(3, "/r/lib/util.py")]
    both = "src/app.py, then lib/util.py"
    views = [  # (until_seq, the view's messages)
        (1, (ViewMessage("user", both), ViewMessage("user", "nothing"))),
        (2, (ViewMessage("user", both), ViewMessage("user", "/r/odd"), ViewMessage("user", "name.py"))),
        (3, (ViewMessage("user", both),)),  # util.py is touched now: the kept string is searched for it
        (3, (ViewMessage("user", "nothing"),)),  # every string of the view before gone
        (3, (ViewMessage("user", "src/app.py"), ViewMessage("user", "src/app.py"))),
    ]
    probe, literal = WorkingSetProbe(events), _WholeText(events)
    scores = []
    for until, messages in views:
        view = type("V", (), {"messages": messages})
        scores.append(probe.score(view, until))
        assert scores[-1] == literal.score(view, until), until
    assert scores == [(1, 1), (2, 2), (3, 2), (3, 0), (3, 1)]  # (2, 2): the line break between two strings


def test_a_jobs_working_set_counts_are_the_whole_texts_at_every_request(monkeypatch):
    from latch.bench import runner

    checked = []

    class Both(WorkingSetProbe):
        def __init__(self, events):
            events = list(events)
            super().__init__(events)
            self.literal = _WholeText(events)

        def score(self, view, until_seq, *, text=None):
            got = super().score(view, until_seq, text=text)
            checked.append(got)
            assert got == self.literal.score(view, until_seq, text=text)
            return got

    monkeypatch.setattr(runner, "WorkingSetProbe", Both)
    rows = []
    source = SessionSource(name="invoice", path=str(REPO / "examples" / "invoice-rounding.claude.jsonl"))
    scenario = SessionSource(name="scenario", seed=0, events=400)
    for engine, src, budget in (
        ("continuity", source, Budget("32k:4k:8k", 32_000, 4_000, 8_000)),
        ("sliding-window", scenario, Budget("32k:4k:8k", 32_000, 4_000, 8_000)),
        ("continuity", scenario, Budget("16k:2k:4k", 16_000, 2_000, 4_000)),
    ):
        rows.append(run_job(engine, src, budget))
    assert not any("error" in row for row in rows)
    assert any(row["working_set_named"] < row["working_set_touched"] for row in rows)  # some paths left the views
    assert len(checked) > 100 and len({named for _, named in checked}) > 10
