"""``latch stress``: push a long, realistic session through the continuity engine and verify the
spec's stress guarantees (spec: "Stress guarantees").

The run, in one fresh store:

1. **Plant** (the first events): a user request, the goal, a constraint, a decision, a hypothesis
   that is then rejected (all through :func:`latch.kernel.tools.apply_kernel_tool`, as an agent
   would), and a test run whose result holds an exact diagnostic line (:data:`DIAGNOSTIC`).
2. **Push** ``events`` events of :class:`~latch.bench.scenario.ScenarioModel` (the corpus-measured
   mix: tool turns, errors, edits, test runs, user turns, CJK text, screenshots stored as
   artifacts) in batches of ``batch`` events, one transaction each. Above ``PARALLEL_MIN_EVENTS``
   a producer process generates and appends while this process materializes (SQLite WAL: one
   writer, concurrent readers), the way an agent writes while a host reads. Events are the same
   either way (seeded), and every view is materialized ``as of`` a fixed seq, so results do not
   depend on timing.
3. **Materialize** like a host before a model request: every ``every`` events, a burst of ``burst``
   consecutive requests (``until_seq`` = the event before each of the next ``burst`` assistant
   messages), so both rotations and append-only epoch growth are exercised.
4. **Finish** with a last user turn and answer, one more view, and the end-of-run checks.

Checks (each reported with its evidence; the run fails when one fails):

* ``canonical_survival``: every view's current canonical-state section holds the planted
  constraint and decision, and the final canonical state has both active;
* ``rejection_preserved``: in every state section the hypothesis appears only as ``REJECTED``;
* ``exact_raw_recall``: the engine's ``recall`` returns the diagnostic event with the exact line,
  FTS finds it, and the stored event is byte-identical;
* ``recent_verbatim``: at each burst start the newest complete unit ends the view's conversation
  byte for byte, and the final view ends with the last user turn and answer verbatim;
* ``bounded_tokens``: every view's total and recount stay within ``window - reserve``;
* ``component_sums``: each component recounted from the view (conversation messages) and from the
  durable KernelContext ``parts`` (state, recall, episode index, extension) equals the engine's
  figure, ``episode_tokens`` lies inside ``recall_tokens`` and every kernel message is exactly the
  concatenation of its parts (nothing counted twice, nothing hidden);
* ``append_only_epochs``: within an epoch each request's canonical bytes start with the previous;
* ``bounded_episode_index``: no view holds more than 16 index entries;
* ``no_automatic_compact``: no ``manual_compact`` record, no compaction event, no rotation reason
  ``manual_compact``;
* ``raw_retention``: every appended event is stored, seqs are gapless, planted events are
  byte-identical at the end.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import os
import re
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, cast

from ..records import dataclass

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from ..engine.units import TokenCounter, UnitBuilder, message_line
from ..events import AssistantMessage, Event, MediaRef, ToolCall, ToolResult, UserMessage
from ..host.kernel import kernel_cache
from ..host.loop import RequestLoop, RequestResult, build_engine
from ..host.session import StoreKernelWriter
from ..kernel import canonical_state
from ..kernel.tools import KERNEL_TOOLS, apply_kernel_tool
from ..port import ContextBudget, ContextOverflow, ContextView, SessionContext
from ..store import EventStore
from .scenario import ScenarioModel, png_bytes

__all__ = [
    "StressConfig",
    "StressReport",
    "Check",
    "CHECKS",
    "run_stress",
    "DIAGNOSTIC",
    "PARALLEL_MIN_EVENTS",
    "SYSTEM_PROMPT",
    "TOOLS",
    "SCRATCH_PREFIX",
    "sweep_orphaned_scratch",
]

MODEL = "claude-sonnet-4-5"
WORKSPACE = "/work/shop"
STREAM = "continuity:stress"
PARALLEL_MIN_EVENTS = 50_000
"""Runs of at least this many events append from a producer process (two cores: write || read)."""
INDEX_ENTRIES_MAX = 16
CHECKS = (
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
)
"""The names of the guarantees a run checks, in report order (see the module docstring)."""

GOAL = "Fix the invoice rounding bug so totals match the accountant's ledger to the cent."
CONSTRAINT = "Never change the public signature of billing.export.render_invoice (partners call it)."
DECISION = "Round every currency amount with ROUND_HALF_EVEN on Decimal values, once, at line-item level."
DECISION_RATIONALE = "the ledger uses banker's rounding per line item"
HYPOTHESIS = "The rounding error comes from float conversion in billing/tax.py."
REJECTION = "amounts are Decimal end to end; tax.py never converts to float"
DIAGNOSTIC = (
    "E   AssertionError: invoice INV-2024-0917 total 1043.365 rounded to 1043.37, expected 1043.36 "
    "(ROUND_HALF_EVEN) [ledger shard 7f3a9c1e]"
)
DIAGNOSTIC_QUERY = "INV-2024-0917 7f3a9c1e"
FINAL_USER = "Before you wrap up: 請確認 INV-2024-0917 的總額 and tell me which files you changed."
FINAL_ANSWER = "Totals now match the ledger; I changed src/billing/rounding.py and src/billing/tax.py only."

SYSTEM_PROMPT = (
    "You are a careful coding agent working in a git repository. Use the tools to read, edit and test "
    "code. Keep the canonical task state current with the kernel tools: record decisions, "
    "constraints and rejected hypotheses as soon as they are made. Never claim completion without "
    "a passing validation at the current workspace generation."
)


def _tool(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "input_schema": {"type": "object", "properties": props, "required": required},
    }


def _tools() -> tuple[dict[str, Any], ...]:
    s = {"type": "string"}
    agent = [
        _tool("Read", "Read a file (numbered lines).", {"file_path": s, "offset": {"type": "integer"}}, ["file_path"]),
        _tool(
            "Edit",
            "Replace old_string with new_string in a file.",
            {"file_path": s, "old_string": s, "new_string": s},
            ["file_path", "old_string", "new_string"],
        ),
        _tool("Bash", "Run a shell command in the workspace.", {"command": s, "description": s}, ["command"]),
    ]
    return tuple(agent + list(KERNEL_TOOLS))


TOOLS = _tools()


# ------------------------------------------------------------------------------------------ results
@dataclass
class Check:
    """One guarantee: ``ok`` and a short ``detail`` (evidence or the first failure)."""

    name: str
    ok: bool = True
    detail: str = ""
    failures: int = 0

    def fail(self, detail: str) -> None:
        if self.ok:
            self.detail = detail
        self.ok = False
        self.failures += 1


@dataclass
class StressConfig:
    """Parameters of one run (events, seconds and tokens as named)."""

    events: int = 1_000_000
    seed: int = 0
    every: int = 5_000
    """Events between materialization bursts."""
    burst: int = 4
    """Consecutive requests materialized per burst."""
    batch: int = 5_000
    """Events per append transaction."""
    budget: ContextBudget | None = None
    """Default: the model's budget (:func:`latch.config.budget_for_model`: Claude's 200k window, 32k reserve, 64k recent)."""
    parallel: bool | None = None
    """Producer process; default: ``events >= PARALLEL_MIN_EVENTS``."""
    db: str | None = None
    """Database path (kept); default: a temporary folder removed after the run."""


@dataclass
class StressReport:
    """What a run measured and verified (JSON-ready through :meth:`to_json`)."""

    config: dict[str, Any]
    events: int = 0
    stored_events: int = 0
    seconds: float = 0.0
    append_seconds: float = 0.0
    materialize_seconds: float = 0.0
    materializations: int = 0
    rotations: int = 0
    max_total_tokens: int = 0
    hard_limit_tokens: int = 0
    peak_rss_mb: float = 0.0
    producer_peak_rss_mb: float | None = None
    db_mb: float = 0.0
    timings: list[tuple[int, float, bool]] = field(default_factory=list)
    """``(history events, seconds, rotated)`` per materialization."""
    checks: dict[str, Check] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks.values())

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def materializations_per_second(self) -> float:
        return self.materializations / self.materialize_seconds if self.materialize_seconds else 0.0

    def buckets(self) -> list[dict[str, Any]]:
        """Materialize latency (ms) by history size (events in the session): p50, p99, count."""
        out = []
        edges = [0, 1_000, 10_000, 100_000, 1_000_000, 10_000_000]
        for lo, hi in zip(edges, edges[1:], strict=False):
            for rotated in (True, False):
                xs = sorted(s for h, s, r in self.timings if lo <= h < hi and r == rotated)
                if xs:
                    out.append(
                        {
                            "history_events": f"{lo:,}–{hi:,}",
                            "kind": "rotation" if rotated else "append",
                            "count": len(xs),
                            "p50_ms": round(1000 * _pct(xs, 0.50), 1),
                            "p99_ms": round(1000 * _pct(xs, 0.99), 1),
                        }
                    )
        return out

    def to_json(self) -> dict[str, Any]:
        allt = sorted(s for _, s, _ in self.timings)
        return {
            "ok": self.ok,
            "config": self.config,
            "events": self.events,
            "stored_events": self.stored_events,
            "seconds": round(self.seconds, 2),
            "events_per_second": round(self.events_per_second),
            "append_seconds": round(self.append_seconds, 2),
            "materialize_seconds": round(self.materialize_seconds, 2),
            "materializations": self.materializations,
            "materializations_per_second": round(self.materializations_per_second, 2),
            "materialize_p50_ms": round(1000 * _pct(allt, 0.5), 1) if allt else None,
            "materialize_p99_ms": round(1000 * _pct(allt, 0.99), 1) if allt else None,
            "rotations": self.rotations,
            "max_total_tokens": self.max_total_tokens,
            "hard_limit_tokens": self.hard_limit_tokens,
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "producer_peak_rss_mb": (
                round(self.producer_peak_rss_mb, 1) if self.producer_peak_rss_mb is not None else None
            ),
            "db_mb": round(self.db_mb, 1),
            "by_history": self.buckets(),
            "checks": {k: {"ok": c.ok, "detail": c.detail, "failures": c.failures} for k, c in self.checks.items()},
        }


def _pct(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    return sorted_values[min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values) + 0.5)) - 1))]


def _rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


# ------------------------------------------------------------------------------------------ producing
def _screenshots(store: EventStore) -> tuple[MediaRef, ...]:
    return tuple(
        store.put_artifact(png_bytes(w, h, rgb), "image/png", width=w, height=h)
        for w, h, rgb in ((1280, 800, (30, 30, 30)), (1920, 1080, (240, 240, 240)), (390, 844, (20, 90, 200)))
    )


def _batches(seed: int, images: tuple[MediaRef, ...], total: int, batch: int) -> Iterator[list[Event]]:
    gen = ScenarioModel(seed, workspace=WORKSPACE, images=images).events()
    done = 0
    while done < total:
        chunk = list(itertools.islice(gen, min(batch, total - done)))
        done += len(chunk)
        yield chunk


def _produce(
    db: str,
    sid: str,
    seed: int,
    images: tuple[MediaRef, ...],
    total: int,
    batch: int,
    appended: Any,
    wanted: Any,
    seconds: Any,
) -> None:
    """Producer process: generate and append ``total`` events, never more than ``wanted`` ahead of
    need (so its transactions do not starve the engine's record writes); publish progress in ``appended``."""
    store = EventStore(db)
    try:
        for chunk in _batches(seed, images, total, batch):
            while appended.value >= wanted.value:
                time.sleep(0.002)
            t = time.perf_counter()
            store.append(sid, chunk)
            seconds.value += time.perf_counter() - t
            appended.value += len(chunk)
    finally:
        store.close()


class _Appender:
    """Appends the scenario's events, inline or through a producer process, and waits for them."""

    def __init__(self, store: EventStore, sid: str, cfg: StressConfig, images: tuple[MediaRef, ...], parallel: bool):
        self.store, self.sid, self.cfg = store, sid, cfg
        self.seconds = 0.0
        self._proc = None
        if parallel:
            ctx = mp.get_context("spawn")
            self._appended = ctx.Value("q", 0, lock=False)
            self._wanted = ctx.Value("q", 0, lock=False)
            self._secs = ctx.Value("d", 0.0, lock=False)
            self._proc = ctx.Process(
                target=_produce,
                name="latch-stress-producer",
                daemon=True,
                args=(
                    str(store.path),
                    sid,
                    cfg.seed,
                    images,
                    cfg.events,
                    min(cfg.batch, cfg.every),
                    self._appended,
                    self._wanted,
                    self._secs,
                ),
            )
            self._proc.start()
        else:
            self._gen = _batches(cfg.seed, images, cfg.events, cfg.batch)
            self._count = 0

    @property
    def appended(self) -> int:
        return self._appended.value if self._proc is not None else self._count

    def ensure(self, n: int, ahead: int = 0, idle: Callable[[int], bool] | None = None) -> int:
        """Block until at least ``min(n, events)`` scenario events are stored (a producer may then
        go on to ``n + ahead`` while the caller works); return how many are stored. While it waits for a
        producer, ``idle(events stored so far)`` may do the caller's work on them (it returns whether it did
        any: else the wait sleeps a moment before asking again)."""
        n = min(n, self.cfg.events)
        if self._proc is None:
            while self._count < n:
                chunk = next(self._gen)
                t = time.perf_counter()
                self.store.append(self.sid, chunk)
                self.seconds += time.perf_counter() - t
                self._count += len(chunk)
            return self._count
        self._wanted.value = max(self._wanted.value, n + ahead)
        while self._appended.value < n:
            if not self._proc.is_alive() and self._appended.value < n:
                raise RuntimeError(
                    f"stress producer exited with code {self._proc.exitcode} after "
                    f"{self._appended.value:,} of {self.cfg.events:,} events"
                )
            if idle is None or not idle(self._appended.value):
                time.sleep(0.002)
        appended: int = self._appended.value
        return appended

    def abort(self) -> None:
        """Stop the producer (after an error in this process)."""
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join()

    def finish(self) -> float | None:
        """Wait for every event; return the producer's peak RSS in MB (``None`` inline)."""
        self.ensure(self.cfg.events)
        if self._proc is None:
            return None
        self._proc.join()
        self.seconds = self._secs.value
        return _rss_mb(resource.RUSAGE_CHILDREN)


# ------------------------------------------------------------------------------------------ checking
_STATE_RE = re.compile(r"<canonical-state[^>]*>\n(.*?)\n</canonical-state>", re.S)
_ENTRY_RE = re.compile(r"^episode #\d+ seq ", re.M)


class _Verifier:
    """Per-view checks against the durable records (see the module docstring)."""

    def __init__(self, report: StressReport, counter: TokenCounter, writer: StoreKernelWriter, hard: int):
        self.counter, self.writer, self.hard = counter, writer, hard
        c = report.checks
        for name in CHECKS:
            c[name] = Check(name)
        self.c = c
        self._records_after = 0
        self._parts: dict[str, list[tuple[str, str]]] = {}
        self.max_index_entries = 0
        self.max_total = 0

    def _kernel_parts(self, content: str) -> list[tuple[str, str]] | None:
        if content not in self._parts:
            for rid, kind, _, p in self.writer.records(kinds=("epoch", "kernel_context"), after_id=self._records_after):
                self._records_after = rid
                if kind == "epoch":
                    self._parts.clear()
                else:
                    self._parts["".join(t for _, t in p["parts"])] = [(c, t) for c, t in p["parts"]]
        return self._parts.get(content)

    def view(self, res: RequestResult, where: str) -> None:
        """Check one result of the host's request loop: its budget and append-only verdicts, then every
        component recounted from the view's messages and the durable kernel records."""
        v = cast(ContextView, res.view)  # a view: the caller has handled a refusal
        c, counter, t = self.c, self.counter, v.tokens
        total = t.total_tokens
        self.max_total = max(self.max_total, total)
        for line in res.budget_violations:
            c["bounded_tokens"].fail(line)
        for line in res.epoch_violations:
            c["append_only_epochs"].fail(line)
        for line in res.protocol_violations:
            c["component_sums"].fail(line)
        sums, states = self._recount(v, res.line_tokens, where)
        expect = {
            "instructions": t.instructions_tokens,
            "conversation": t.recent_tokens,
            "state": t.state_tokens,
            "recall": t.recall_tokens - t.episode_tokens,
            "episode": t.episode_tokens,
            "extension": t.extension_tokens,
        }
        wrong = {k: (sums[k], expect[k]) for k in expect if sums[k] != expect[k]}
        if wrong or t.tools_tokens != counter.tools(v.tools) or t.episode_tokens > t.recall_tokens:
            c["component_sums"].fail(f"{where}: recount != reported {wrong}")
        self._states(states, where)
        if v.metrics.get("rotation_reason") == "manual_compact":
            c["no_automatic_compact"].fail(f"{where}: rotation reason manual_compact")

    def _recount(self, v: ContextView, line_tokens: Sequence[int], where: str) -> tuple[dict[str, int], list[str]]:
        """Each component's tokens recounted from the view's messages (``line_tokens``: the request loop's
        per-line recount) and the durable kernel records, and the canonical-state texts the view holds."""
        sums = dict.fromkeys(("instructions", "conversation", "state", "recall", "episode", "extension"), 0)
        sums["instructions"] = line_tokens[0]
        states: list[str] = []
        for m, tok in zip(v.messages, line_tokens[2:], strict=False):
            if m.kind == "session_context":
                sums["instructions"] += tok
            elif m.kind == "conversation":
                sums["conversation"] += tok
            elif m.kind == "kernel_context":
                self._kernel_message(m.content, sums, states, where)
            else:
                self.c["component_sums"].fail(f"{where}: message of unknown kind {m.kind!r}")
        return sums, states

    def _kernel_message(self, content: str, sums: dict[str, int], states: list[str], where: str) -> None:
        """Add a kernel message's parts (from its durable record) to ``sums``; its canonical states to
        ``states``; check the episode index's size."""
        c, counter = self.c, self.counter
        parts = self._kernel_parts(content)
        if parts is None or "".join(x for _, x in parts) != content:
            c["component_sums"].fail(f"{where}: a kernel message is not the concatenation of a durable record")
            return
        sums["state"] += counter.overhead
        for comp, text in parts:
            sums[comp] += counter.text(text)
            if comp == "state" and text.startswith("<canonical-state"):
                states.append(text)
            elif comp == "episode":
                entries = len(_ENTRY_RE.findall(text))
                self.max_index_entries = max(self.max_index_entries, entries)
                if entries > INDEX_ENTRIES_MAX:
                    c["bounded_episode_index"].fail(f"{where}: {entries} episode index entries")

    def _states(self, states: Sequence[str], where: str) -> None:
        """The current canonical state keeps the constraint and the decision; no rejected hypothesis is
        rendered as active."""
        c = self.c
        if states:
            current = _STATE_RE.search(states[-1])
            body = current.group(1) if current else ""
            if CONSTRAINT not in body or DECISION not in body:
                c["canonical_survival"].fail(f"{where}: the current state lost the constraint or the decision")
        for s in states:
            for line in s.splitlines():
                if HYPOTHESIS in line and "REJECTED" not in line:
                    c["rejection_preserved"].fail(f"{where}: rendered as active: {line[:120]}")


def _last_unit_lines(store: EventStore, sid: str, until: int) -> list[bytes] | None:
    """The provider-visible lines of the newest unit complete as of ``until``, segmented independently
    from the raw log's last 400 events (when the log is longer, units starting in its first 20 may lack their
    opening event)."""
    lo = max(0, until - 400)
    units = UnitBuilder().feed_all(store.events(sid, after_seq=lo, until_seq=until))
    if lo > 0:
        units = [u for u in units if u.first_seq > lo + 20]
    return [message_line(m) for m in units[-1].messages] if units else None


# ------------------------------------------------------------------------------------------ running
def _plant(store: EventStore, sid: str) -> tuple[list[int], int]:
    """The early facts (see the module docstring); returns ``(planted seqs, diagnostic seq)``."""
    seqs = store.append(
        sid,
        [
            UserMessage(
                "The invoice totals are off by a cent against the ledger; please fix "
                "the rounding in the billing package."
            )
        ],
    )
    for name, args in (
        ("set_goal", {"goal": GOAL}),
        ("add_constraint", {"constraint": CONSTRAINT}),
        ("record_decision", {"decision": DECISION, "rationale": DECISION_RATIONALE}),
        ("propose_hypothesis", {"hypothesis": HYPOTHESIS}),
    ):
        seqs.append(apply_kernel_tool(store, sid, name, args, cache=kernel_cache()).seq)
    call = ToolCall("toolu_plant_1", "Bash", '{"command": "python -m pytest -q tests/test_billing_rounding.py"}')
    run = store.append(
        sid,
        [
            AssistantMessage(text="Running the rounding tests first.", tool_calls=(call,), model=MODEL),
            ToolResult(
                call.id,
                "F.\n=================================== FAILURES ===================================\n"
                f"{DIAGNOSTIC}\n1 failed, 1 passed in 0.08s",
                is_error=True,
                name="Bash",
                exit_code=1,
            ),
        ],
    )
    seqs += run
    seqs.append(
        apply_kernel_tool(
            store, sid, "reject_hypothesis", {"hypothesis": "H1", "reason": REJECTION}, cache=kernel_cache()
        ).seq
    )
    return seqs, run[1]


def run_stress(cfg: StressConfig, progress: Callable[[int, int], None] | None = None) -> StressReport:
    """Run the stress scenario of ``cfg``; ``progress(events stored, events total)`` after each burst.

    Returns the :class:`StressReport` (``report.ok`` tells whether every check passed). Raises
    ``ValueError`` for a non-positive ``events``/``every``/``burst``/``batch``.
    """
    for name in ("events", "every", "burst", "batch"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"stress: {name} must be a positive integer, got {getattr(cfg, name)}")
    parallel = cfg.parallel if cfg.parallel is not None else cfg.events >= PARALLEL_MIN_EVENTS
    tmp = None
    owner = None
    if cfg.db is None:
        sweep_orphaned_scratch()
        tmp, owner = _scratch_folder()
        db = os.path.join(tmp, "stress.db")
    else:
        db = cfg.db
        if Path(db).exists():
            raise ValueError(f"stress: database {db} already exists; pass a new path")
    report = StressReport(
        config={
            "events": cfg.events,
            "seed": cfg.seed,
            "every": cfg.every,
            "burst": cfg.burst,
            "batch": cfg.batch,
            "parallel": parallel,
        }
    )
    start = time.perf_counter()
    store = EventStore(db)
    try:
        _run(store, cfg, parallel, report, progress)
        report.seconds = time.perf_counter() - start
        report.db_mb = sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p)) / 1e6
    finally:
        store.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if owner is not None:
            os.close(owner)
    return report


SCRATCH_PREFIX = "latch-stress-"
_OWNER = ".owner"


def _scratch_folder() -> tuple[str, int | None]:
    """``(folder, fd)``: a new ``latch-stress-*`` folder in the temporary directory and an open descriptor of its
    ``.owner`` file, exclusively ``flock``-ed for the run's life (``None`` where ``fcntl`` does not exist).

    The lock file is locked before it gets its name, so :func:`sweep_orphaned_scratch` never sees it unlocked while
    its run lives. The kernel drops the lock when the process ends however it ends (a SIGKILL, a lost Dask worker),
    which is what lets a later run tell an orphan from a live run, across processes and PID namespaces."""
    tmp = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    if fcntl is None:  # pragma: no cover - not POSIX: no sweep, the run still removes its folder itself
        return tmp, None
    staged = os.path.join(tmp, ".owner-new")
    fd = os.open(staged, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(staged, os.path.join(tmp, _OWNER))
    return tmp, fd


def sweep_orphaned_scratch(parent: str | None = None) -> list[str]:
    """Remove the ``latch-stress-*`` folders under ``parent`` (default: the temporary directory) whose run is gone.

    A folder is an orphan when its ``.owner`` file can be ``flock``-ed: its run was killed before it could remove
    it (SIGKILL, the OOM killer, a Dask worker lost mid-shard). Folders without an ``.owner`` (being created, or
    from an older Latch) and folders whose run still holds the lock are left alone. Returns the removed paths;
    never raises for a folder it cannot read or remove."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return []
    removed = []
    for folder in sorted(Path(parent or tempfile.gettempdir()).glob(SCRATCH_PREFIX + "*")):
        try:
            fd = os.open(folder / _OWNER, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its run is alive
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
            removed.append(str(folder))
        os.close(fd)
    return removed


def _read_ahead(loop: RequestLoop, upto: int, base: int) -> Callable[[int], bool]:
    """The wait's work before a burst whose views are all as of ``upto`` or later: the loop reads and segments
    the events stored through ``upto`` (``base`` + the scenario events stored) while the producer appends the
    rest, so the views find them read (and come out the same)."""

    def read(stored: int) -> bool:
        seq = min(base + stored, upto)
        if seq <= loop.fed_seq:
            return False
        loop.advance(seq)
        return True

    return read


def _run(
    store: EventStore,
    cfg: StressConfig,
    parallel: bool,
    report: StressReport,
    progress: Callable[[int, int], None] | None,
) -> None:
    sid = store.create_session(
        workspace=WORKSPACE, format="claude-code", source="latch stress", meta={"seed": cfg.seed}
    )
    images = _screenshots(store)
    planted, diag_seq = _plant(store, sid)
    planted_bytes = [store.get(s).event.encode() for s in planted]
    base = store.max_seq(sid)
    first = planted[0]

    setup = build_engine(store, sid, stream=STREAM, engine="continuity", model=MODEL)
    engine, writer = setup.engine, setup.writer
    budget = cfg.budget or engine.default_budget()
    report.hard_limit_tokens = budget.hard_limit_tokens
    verify = _Verifier(report, setup.counter, writer, budget.hard_limit_tokens)
    ctx = SessionContext(workspace=WORKSPACE, repository_instructions="Run `python -m pytest -q` before committing.")
    loop = RequestLoop(store, sid, setup, budget, session_context=ctx, system_prompt=SYSTEM_PROMPT, tools=TOOLS)

    def materialize(until: int | None, where: str) -> ContextView:
        res = loop.run(until, where=where)
        if res.view is None:
            raise ContextOverflow(res.overflow or "refused", {"hard_limit_tokens": budget.hard_limit_tokens})
        v = res.view
        rotated = bool(v.metrics.get("rotated"))
        report.materialize_seconds += res.seconds
        report.materializations += 1
        report.rotations += rotated
        report.timings.append((v.metrics["until_seq"] - first + 1, res.seconds, rotated))
        verify.view(res, where)
        return v

    appender = _Appender(store, sid, cfg, images, parallel)
    try:
        last_until = 0
        for target in range(cfg.every, cfg.events + 1, cfg.every):
            appender.ensure(target + 200, ahead=cfg.every, idle=_read_ahead(loop, base + target, base))
            nexts = list(store.events(sid, after_seq=base + target, kinds=("assistant_message",), limit=cfg.burst))
            for k, a in enumerate(nexts):
                until = a.seq - 1
                if until <= last_until:
                    continue
                v = materialize(until, f"view at seq {until}")
                last_until = until
                if k == 0:
                    want = _last_unit_lines(store, sid, until)
                    got = [message_line(m) for m in v.messages if m.kind == "conversation"]
                    if want is None or got[-len(want) :] != want:
                        report.checks["recent_verbatim"].fail(
                            f"view at seq {until}: the newest unit is not the verbatim end of the conversation"
                        )
            if progress:
                progress(appender.appended, cfg.events)
        producer_rss = appender.finish()
    except BaseException:
        appender.abort()
        raise
    report.append_seconds = appender.seconds
    report.producer_peak_rss_mb = producer_rss
    if progress:
        progress(cfg.events, cfg.events)

    final = store.append(sid, [UserMessage(FINAL_USER), AssistantMessage(text=FINAL_ANSWER, model=MODEL)])
    v = materialize(None, "final view")
    tail = [m for m in v.messages if m.kind == "conversation"][-2:]
    if [(m.role, m.content, m.seq) for m in tail] != [
        ("user", FINAL_USER, final[0]),
        ("assistant", FINAL_ANSWER, final[1]),
    ]:
        report.checks["recent_verbatim"].fail("final view: the last user turn and answer are not its verbatim end")
    _final_checks(
        store,
        sid,
        engine,
        writer,
        report,
        planted,
        planted_bytes,
        diag_seq,
        cfg.events + len(planted) + 2,
        final_view=v,
    )
    report.events = cfg.events
    report.max_total_tokens = verify.max_total
    report.peak_rss_mb = _rss_mb()
    details = {
        "bounded_tokens": f"max {verify.max_total:,} of {budget.hard_limit_tokens:,} tokens over "
        f"{report.materializations:,} views",
        "bounded_episode_index": f"at most {verify.max_index_entries} entries per view (cap {INDEX_ENTRIES_MAX})",
        "append_only_epochs": f"{report.rotations:,} rotations; every other view extended its epoch byte for byte",
        "component_sums": "every component recounted exactly from the view and the durable parts",
        "recent_verbatim": "newest unit verbatim at every burst; final turn verbatim",
    }
    for name, detail in details.items():
        if report.checks[name].ok:
            report.checks[name].detail = detail


def _final_checks(
    store: EventStore,
    sid: str,
    engine: Any,
    writer: StoreKernelWriter,
    report: StressReport,
    planted: list[int],
    planted_bytes: list[bytes],
    diag_seq: int,
    expected: int,
    *,
    final_view: ContextView | None = None,
) -> None:
    c = report.checks
    state = canonical_state(store, sid, cache=kernel_cache())
    cons = [x for x in state.constraints if x["text"] == CONSTRAINT and x["active"]]
    decs = [x for x in state.decisions if x["text"] == DECISION and x["active"]]
    hyps = [x for x in state.hypotheses if x["text"] == HYPOTHESIS]
    if not cons or not decs:
        c["canonical_survival"].fail("final canonical state lost the constraint or the decision")
    elif c["canonical_survival"].ok:
        c[
            "canonical_survival"
        ].detail = f"{cons[0]['id']} and {decs[0]['id']} active in every view and at revision {state.revision}"
    if not hyps or hyps[0]["status"] != "rejected":
        c["rejection_preserved"].fail(f"final canonical state: hypothesis is {hyps[0]['status'] if hyps else 'gone'}")
    elif c["rejection_preserved"].ok:
        c["rejection_preserved"].detail = f"{hyps[0]['id']} rendered only as REJECTED"

    recalled = [r for r in engine.recall(DIAGNOSTIC_QUERY) if r.seq == diag_seq]
    fts = [s.seq for s in store.search("7f3a9c1e", session_id=sid)]
    stored = store.get(diag_seq).event
    # a short run never moves the diagnostic out of the window: then the final view holds it verbatim instead
    in_window = final_view is not None and any(
        m.seq == diag_seq and DIAGNOSTIC in str(m.content) for m in final_view.messages if m.kind == "conversation"
    )
    if (not recalled or DIAGNOSTIC not in recalled[0].text) and not in_window:
        c["exact_raw_recall"].fail(
            f"engine.recall({DIAGNOSTIC_QUERY!r}) did not return seq {diag_seq} verbatim, "
            "and the final view does not hold it"
        )
    elif diag_seq not in fts or DIAGNOSTIC not in getattr(stored, "content", ""):
        c["exact_raw_recall"].fail(f"FTS or the raw store lost seq {diag_seq}")
    elif recalled:
        c["exact_raw_recall"].detail = f"seq {diag_seq} recalled verbatim after {report.config['events']:,} events"
    else:
        c["exact_raw_recall"].detail = (
            f"seq {diag_seq} verbatim in the final view's window after "
            f"{report.config['events']:,} events (not archival yet)"
        )

    n = store.count_events(sid)
    lo = min(planted)
    hi = store.max_seq(sid)
    now = [store.get(s).event.encode() for s in planted]
    if n != expected or hi - lo + 1 != n or now != planted_bytes:
        c["raw_retention"].fail(
            f"{n:,} events stored, {expected:,} appended, seqs {lo}..{hi}, planted "
            f"{'identical' if now == planted_bytes else 'changed'}"
        )
    else:
        c["raw_retention"].detail = f"{n:,} events, seqs {lo}..{hi} gapless, planted events byte-identical"
    report.stored_events = n

    compacts = writer.records(kinds=("manual_compact",))  # not every record of the run: those are history-sized
    foreign = list(store.events(sid, kinds=("compaction_marker",), limit=1))
    if compacts or foreign:
        c["no_automatic_compact"].fail(f"{len(compacts)} manual_compact record(s), {len(foreign)} compaction event(s)")
    elif c["no_automatic_compact"].ok:
        c["no_automatic_compact"].detail = "no compact record, event or rotation reason"
