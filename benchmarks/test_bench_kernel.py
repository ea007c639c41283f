"""Canonical state per request: the cached reducer extended by one new event vs a rebuild from the log,
and against the length of the history.

A 5,000-event session (tool turns with reads, edits, test runs and failures, plus kernel tool calls) is
reduced once; each timed round appends one tool turn and asks for the state and its rendering again, as
the engine does before every request. ``extra_info["ratio_to_rebuild"]`` is incremental time /
full-rebuild time. ``test_state_per_request_against_history`` does the same on sessions of 10^3 and 10^4
events (``LATCH_BENCH_FULL=1`` adds 10^5) where every turn also runs a new failing test file, so the
evidence grows with the history; the goal is ``extra_info["ratio_to_1e3"]`` <= 1.5 (the per-request
cost does not grow with history: only new facts are reduced and only the lines that fit are rendered).

``test_ledger_derivation_per_event`` times the ledger's derivation alone (every fact of every event, no database)
and the session reducer over those facts, on the stress scenario's events (20,000; ``LATCH_BENCH_FULL=1``: 10^5; 2,000
under ``--benchmark-disable``), each event decoded fresh and its calls' arguments parsed first (as the stress
viewer's episode index has parsed them before the ledger reads them): ``extra_info["us_per_event_derive"]`` and
``["us_per_event_reduce"]`` (CPU, the best of 3 rounds).

``test_ledger_refresh_per_view_against_history`` times the kernel ledger's work per view (derive the events
appended since the last view, through the view's seq, and reduce them) on the stress scenario's events after
2x10^3 and 2x10^4 events (``LATCH_BENCH_FULL=1`` adds 2x10^5): ``extra_info["ratio_to_first"]`` (goal: about 1)
and ``facts_held`` (bounded, not growing with the history). ``test_shell_reading_plain_vs_lexer`` reports the
plain-script shell reader against :mod:`shlex` on the same commands (``ratio_to_lexer``).

Run: ``python -m pytest benchmarks/test_bench_kernel.py --benchmark-only``.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import time

import pytest

from latch.events import AssistantMessage, ToolCall, ToolResult, UserMessage
from latch.hotpaths import estimate_tokens
from latch.kernel import apply_kernel_tool, canonical_state
from latch.kernel.ledger import clear_cache
from latch.store import EventStore

_ids = itertools.count()


def _turn(i: int):
    cid = f"c{next(_ids)}"
    kind = i % 4
    if kind == 0:
        call, result = (
            ToolCall(cid, "Read", json.dumps({"file_path": f"/ws/src/m{i % 97}.py"})),
            ToolResult(cid, "x = 1"),
        )
    elif kind == 1:
        call = ToolCall(
            cid, "Edit", json.dumps({"file_path": f"/ws/src/m{i % 97}.py", "old_string": "1", "new_string": "2"})
        )
        result = ToolResult(cid, "The file has been updated.")
    elif kind == 2:
        call, result = (
            ToolCall(cid, "Bash", json.dumps({"command": "pytest -q"})),
            ToolResult(cid, f"{i % 3} failed", is_error=i % 3 > 0),
        )
    else:
        return [UserMessage(text=f"next step {i}"), AssistantMessage(text="ok")]
    return [AssistantMessage(tool_calls=(call,)), result]


def _session(tmp_path):
    store = EventStore(tmp_path / "bench.db")
    sid = store.create_session(workspace="/ws", format="claude-code")
    apply_kernel_tool(store, sid, "set_goal", {"goal": "keep the tests green"})
    apply_kernel_tool(store, sid, "add_constraint", {"constraint": "no network"})
    batch = [ev for i in range(2_500) for ev in _turn(i)]
    store.append(sid, batch)
    return store, sid


def test_state_per_request(benchmark, tmp_path):
    store, sid = _session(tmp_path)
    canonical_state(store, sid)
    step = itertools.count(10_000)

    def request():
        store.append(sid, _turn(next(step)))
        return canonical_state(store, sid).render(4_000, estimate_tokens)

    times = []
    for _ in range(5):
        t = time.perf_counter()
        request()
        times.append(time.perf_counter() - t)
    incremental = sorted(times)[2]
    times = []
    for _ in range(3):
        clear_cache()
        t = time.perf_counter()
        canonical_state(store, sid).render(4_000, estimate_tokens)
        times.append(time.perf_counter() - t)
    rebuild = sorted(times)[1]
    benchmark.extra_info.update(events=store.count_events(sid), ratio_to_rebuild=round(incremental / rebuild, 4))
    text = benchmark(request)
    assert text.startswith("Canonical state") and incremental < rebuild
    store.close()


FULL = os.environ.get("LATCH_BENCH_FULL", "") not in ("", "0")
SIZES = [1_000, 10_000] + ([100_000] if FULL else [])
_P50: dict[int, float] = {}


def _growing_turn(i: int):
    cid = f"g{next(_ids)}"
    call = ToolCall(cid, "Bash", json.dumps({"command": f"pytest tests/test_{i % 5_000}.py"}))
    return [
        UserMessage(text=f"step {i}"),
        AssistantMessage(tool_calls=(call,)),
        ToolResult(cid, f"FAILED tests/test_{i % 5_000}.py::test_case - assert 0\n1 failed", is_error=True),
    ]


@pytest.mark.parametrize("n", SIZES)
def test_state_per_request_against_history(benchmark, tmp_path, n):
    store = EventStore(tmp_path / "history.db")
    sid = store.create_session(workspace="/ws", format="claude-code")
    apply_kernel_tool(store, sid, "set_goal", {"goal": "keep the tests green"})
    step = itertools.count()
    batch = []
    while len(batch) < n:
        batch.extend(_growing_turn(next(step)))
    store.append(sid, batch)
    canonical_state(store, sid).render(8_000, estimate_tokens)

    def setup():
        store.append(sid, _growing_turn(next(step)))
        return (), {}

    def request():
        return canonical_state(store, sid).render(8_000, estimate_tokens)

    text = benchmark.pedantic(request, setup=setup, rounds=40, iterations=1)
    assert text.startswith("Canonical state") and estimate_tokens(text) <= 8_000
    benchmark.extra_info.update(events=store.count_events(sid))
    if benchmark.stats is not None:
        _P50[n] = statistics.median(benchmark.stats.stats.data)
        if n != SIZES[0] and SIZES[0] in _P50:
            benchmark.extra_info["ratio_to_1e3"] = round(_P50[n] / _P50[SIZES[0]], 3)
    store.close()


# ------------------------------------------------------------------------------------ ledger per view
LEDGER_SIZES = [2_000, 20_000] + ([200_000] if FULL else [])
VIEW_EVENTS = 50
_LEDGER_P50: dict[int, float] = {}


@pytest.mark.parametrize("n", LEDGER_SIZES)
def test_ledger_refresh_per_view_against_history(benchmark, tmp_path, n):
    """The kernel ledger's cost per view (derive the ``VIEW_EVENTS`` scenario events appended since the last
    view, through the view's seq) after ``n`` events of the stress scenario: ``extra_info["ratio_to_first"]``
    is the p50 at ``n`` over the p50 at the smallest size (flat: about 1), ``facts_held`` what the ledger
    keeps."""
    from latch.bench.scenario import ScenarioModel
    from latch.kernel.ledger import KernelCache

    store = EventStore(tmp_path / "ledger.db")
    sid = store.create_session(workspace="/work/shop", format="claude-code")
    history = ScenarioModel(3, workspace="/work/shop").events()
    for _ in range(0, n, 5_000):
        store.append(sid, list(itertools.islice(history, min(5_000, n))))
    cache = KernelCache()
    canonical_state(store, sid, cache=cache)
    views = ScenarioModel(11, workspace="/work/shop").events()  # the same view events at every size

    def setup():
        store.append(sid, list(itertools.islice(views, VIEW_EVENTS)))
        return (store.max_seq(),), {}

    def view(until):
        return canonical_state(store, sid, until, cache=cache)

    benchmark.pedantic(view, setup=setup, rounds=40, iterations=1, warmup_rounds=3)
    ledger = cache.ledger(store, 0)
    benchmark.extra_info.update(events=store.count_events(sid), facts_held=sum(map(len, ledger.facts.values())))
    if benchmark.stats is not None:
        _LEDGER_P50[n] = statistics.median(benchmark.stats.stats.data)
        if n != LEDGER_SIZES[0] and LEDGER_SIZES[0] in _LEDGER_P50:
            benchmark.extra_info["ratio_to_first"] = round(_LEDGER_P50[n] / _LEDGER_P50[LEDGER_SIZES[0]], 3)
    store.close()


def test_shell_reading_plain_vs_lexer(benchmark):
    """Reading the stress scenario's shell commands (and the kernel's own examples): the plain-script reader
    against :mod:`shlex`, both returning the same tokens; ``extra_info["ratio_to_lexer"]`` = plain / lexer."""
    from latch.kernel import shell

    scripts = [
        "python -m pytest -q tests/test_billing_rounding.py",
        "git status --short",
        "git log --oneline -8",
        "python -m pip list --format=freeze",
        "env | sort",
        "python3 - << EOF",
        "cargo test --workspace && cargo clippy -- -D warnings",
        "cd src && ls -la | head -20",
    ] * 50
    assert [shell._tokens(s) for s in scripts] == [shell._shlex_tokens(s) for s in scripts]

    def lexer_time():
        t = time.perf_counter()
        for s in scripts:
            shell._shlex_tokens(s)
        return time.perf_counter() - t

    def plain():
        return [shell._tokens(s) for s in scripts]

    lexer = statistics.median(lexer_time() for _ in range(5))
    benchmark(plain)
    if benchmark.stats is not None:
        benchmark.extra_info["ratio_to_lexer"] = round(statistics.median(benchmark.stats.stats.data) / lexer, 4)


def test_error_line_against_the_plain_patterns(benchmark):
    """The error line of the stress scenario's tool outputs (the first 20,000 events: code, logs, test runs),
    found by the literal-led failure search and the lower-cased error-ish search, against each pattern tried
    line by line as written; both return the same lines. ``extra_info["ratio_to_plain"]`` = new / plain (CPU time,
    steadier under load); ``failure_search_ratio_to_plain`` the same for the failure search over whole outputs
    (a validation's status reads it)."""
    import re

    from latch.bench.scenario import ScenarioModel
    from latch.kernel.derive import common

    outputs = [e.content for e in itertools.islice(ScenarioModel(0).events(), 20_000) if isinstance(e, ToolResult)]
    split = [common._meaningful_lines(o) for o in outputs]
    plain_fail = re.compile(common._FAIL_RE.pattern, re.M)
    plain_errorish = re.compile(common._ERRORISH, re.I)
    picks = (common._LEADING_ERROR_RE.match, plain_fail.search, plain_errorish.search)

    def plain_line(lines: list[str]) -> str:
        found = (line for pick in picks for line in lines if pick(line))
        return next(found, lines[0] if lines else "")

    assert [common._error_line(lines) for lines in split] == [plain_line(lines) for lines in split]

    def cpu(fn) -> float:
        times = []
        for _ in range(3):
            t = time.process_time()
            fn()
            times.append(time.process_time() - t)
        return min(times)

    plain = cpu(lambda: [plain_line(lines) for lines in split])
    new = cpu(lambda: [common._error_line(lines) for lines in split])
    plain_search = cpu(lambda: [plain_fail.search(o) for o in outputs])
    new_search = cpu(lambda: [common._fail_search(o) for o in outputs])
    benchmark.extra_info.update(
        outputs=len(outputs),
        ratio_to_plain=round(new / plain, 3),
        failure_search_ratio_to_plain=round(new_search / plain_search, 3),
    )
    benchmark.pedantic(lambda: [common._error_line(lines) for lines in split], rounds=3, iterations=1)


DERIVE_EVENTS = 100_000 if FULL else 20_000


def test_ledger_derivation_per_event(benchmark):
    from latch.bench.scenario import ScenarioModel
    from latch.events import decode_event
    from latch.kernel.ledger import Ledger
    from latch.kernel.state import SessionReducer

    n = 2_000 if benchmark.disabled else DERIVE_EVENTS
    encoded = [(e.KIND, e.encode()) for e in itertools.islice(ScenarioModel(0, workspace="/work/shop").events(), n)]

    class Info:
        workspace, parent_id, format, meta = "/work/shop", None, "claude-code", None

    class Log:  # what the ledger asks of a store while it derives
        def session(self, sid):
            return Info()

    class Stored:
        __slots__ = ("seq", "session_id", "event")

        def __init__(self, seq, event):
            self.seq, self.session_id, self.event = seq, "s", event

    def events():
        out = [Stored(i, decode_event(kind, payload)) for i, (kind, payload) in enumerate(encoded, 1)]
        for ev in out:
            for call in getattr(ev.event, "tool_calls", ()):
                call.args()
        return out

    def cpu(fn, *args):
        t = time.process_time()
        result = fn(*args)
        return time.process_time() - t, result

    def derive(stored):
        ledger = Ledger()
        for ev in stored:
            ledger._derive(Log(), ev)
        return ledger

    def reduce(ledger):
        red = SessionReducer("s")
        ws = ledger.workspace(Log(), "s")
        for until in range(5_000, n + 5_000, 5_000):
            red.advance(ledger.facts["s"], ws, until)
        return red

    derive_s, reduce_s = [], []
    for _ in range(3):
        took, ledger = cpu(derive, events())
        derive_s.append(took)
        reduce_s.append(cpu(reduce, ledger)[0])
    assert ledger.facts["s"] and ledger.workspace(Log(), "s").mutations and reduce(ledger).files
    benchmark.extra_info.update(
        events=n,
        facts=len(ledger.facts["s"]),
        us_per_event_derive=round(1e6 * min(derive_s) / n, 2),
        us_per_event_reduce=round(1e6 * min(reduce_s) / n, 2),
    )
    stored = events()
    benchmark.pedantic(derive, args=(stored[: min(n, 2_000)],), rounds=1, iterations=1)
