"""Deterministic text rendering of the canonical core under a token budget (spec: "Bounded materialization").

Sections, top to bottom: title, goal and the latest user instruction, constraints (never dropped), success
criteria and required validations, validation evidence, certification, active
failure lineages, files changed outside the agent, background processes still running, disproofs,
decisions, the working set (files read or changed, newest first: what was done, last known size and
hash, the byte range of a partial read; shell commands run, newest first, with their outcome), plan,
questions, hypotheses, notes. The text names no revision or generation number: evidence says
``current`` or ``STALE``, and the verdict names a managed process only when it is what blocks
certification, so the text changes only when what the model must know does.

What the conversation already shows (a read, an edit, a command and its output, a plan tool's list,
the user's latest message) changes the text but not :func:`update_key`: the engine appends a state
update only when the key changes (a goal, constraint, requirement, decision or note; a file changed outside
the agent; a background process that ended; a disproof) or when a pass the last update showed current is no
longer current (:func:`current_passes`: the evidence went stale, so the verdict did too), so the provider's prompt cache is not
broken by bookkeeping; a snapshot always carries the whole text.

When the text exceeds the budget, lines drop lowest priority first: the working set first (commands,
then files: what the conversation and the log can show again), then the canonical core's memory
(notes, hypotheses, questions, plan, decisions, disproofs, running processes, externally changed
files, failures, evidence, certification, then criteria and requirements), oldest line first within a
section; a section header says how many lines it lost, and a section that lost every line is named on
a final ``Omitted`` line.

Cost: lines are taken highest priority, newest first, and formatted only as
they are taken. How many fit is guessed from their characters (at the tokens
per character of the first few), then settled by a galloping and binary search
on the exact estimate of the composed text (a few estimates), so rendering
costs O(lines that fit the budget) whatever the history holds.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..port import ContextOverflow

if TYPE_CHECKING:  # pragma: no cover
    from .state import _Core

__all__ = ["render_state", "update_key", "current_passes", "goal_line", "GOAL_STATED"]

GOAL_STATED = "Goal: unchanged, as stated in this epoch's snapshot"
"""The goal line of a state update whose goal its epoch's snapshot already states word for word."""


class StateOverflow(ContextOverflow):
    """Goal and constraints alone exceed the state budget; ``breakdown`` has their tokens."""


def _text(value: str) -> str:
    return value.strip().replace("\n", "\n  ")


class _Section:
    """One section: ``count`` lines, formatted lazily newest first as they are taken; shown oldest first,
    or newest first when ``newest_first``."""

    def __init__(
        self, tier: float, title: str, noun: str, count: int, newest: Iterator[str], *, newest_first: bool = False
    ):
        self.tier, self.title, self.noun, self.count = tier, title, noun, count
        self.newest_first = newest_first
        self._newest = newest
        self._taken: list[str] = []

    def take(self) -> str:
        """The next newest line not taken yet."""
        line = next(self._newest)
        self._taken.append(line)
        return line

    def newest(self, n: int) -> list[str]:
        """The newest ``n`` lines (already taken) in display order."""
        if self.newest_first:
            return self._taken[:n]
        return self._taken[n - 1 :: -1] if n else []


class _Keep:
    """Every section line in keep order (highest priority first, newest first), taken lazily,
    with the prefix sums of their lengths in characters."""

    def __init__(self, sections: list[_Section], order: list[int]):
        self._lines = (sections[i].take() for i in order for _ in range(sections[i].count))
        self.lines: list[str] = []
        self.chars = [0]

    def most_within(self, limit: int) -> int:
        """The most lines whose characters (plus one newline each) sum to at most ``limit``."""
        while self.chars[-1] <= limit and self._pull():
            pass
        return bisect_right(self.chars, limit) - 1

    def ensure(self, k: int) -> None:
        """Take the first ``k`` lines (``k`` at most the number of lines)."""
        while len(self.chars) <= k:
            self._pull()

    def _pull(self) -> bool:
        line = next(self._lines, None)
        if line is not None:
            self.lines.append(line)
            self.chars.append(self.chars[-1] + len(line) + 1)
        return line is not None


def _lines(core: _Core, name: str, fmt: Callable[[dict[str, Any]], str]) -> tuple[int, Iterator[str]]:
    count, items = core.section(name)
    return count, (fmt(x) for x in items)


_STALE_MARK = " (STALE: the workspace changed since)"


def _evidence_line(g: int) -> Callable[[dict[str, Any]], str]:
    return lambda o: (
        f"- {o['status']}: {o['requirement']}"
        + (" (current)" if o["generation"] == g else _STALE_MARK)
        + (f" — {o['summary']}" if o["status"] != "passed" and o["summary"] else "")
    )


def _requirement_line(r: dict[str, Any]) -> str:
    command = r["command"]
    return f"- [{r['id']}] {r['requirement']}" + (
        f" (command: {command})" if command and command != r["requirement"] else ""
    )


def _failure_line(f: dict[str, Any]) -> str:
    return f"- {f['tool']} ×{f['count']}: {f['signature']}" + (
        f" — last: {f['excerpt']}" if f.get("excerpt") and f["excerpt"] != f["signature"] else ""
    )


def _disproof_line(d: dict[str, Any]) -> str:
    return (
        f"- [{d['id']}] {_text(d['claim'])} — not a real problem: {_text(d['reason'])}"
        + (f" (files: {', '.join(d['files'])})" if d["files"] else "")
        + (f" (evidence: {', '.join(d['evidence'])})" if d["evidence"] else "")
        + (f" — STALE: {d['stale_path'] or 'the workspace'} changed since" if d["stale"] else "")
    )


def _hypothesis_line(h: dict[str, Any]) -> str:
    if h["status"] == "active":
        return f"- [{h['id']}] {_text(h['text'])}"
    return f"- [{h['id']}] REJECTED: {_text(h['text'])}" + (f" ({_text(h['reason'])})" if h.get("reason") else "")


def _file_line(f: dict[str, Any]) -> str:
    done = []
    rng = f.get("read_range") if f["reads"] else None
    if f["reads"]:
        of = f" of {f['size']:,}" if f.get("size") is not None else ""
        done.append(
            f"read ×{f['reads']}"
            + (f", bytes {rng[0]:,}..{'end' if rng[1] is None else f'{rng[1]:,}'}{of} so far" if rng else "")
        )
    if f["writes"]:
        done.append(f"changed ×{f['writes']}" + (f" by {f['write_tool']}" if f.get("write_tool") else ""))
    known = (
        []
        if rng
        else ([f"{f['size']:,} bytes"] if f.get("size") is not None else [])
        + ([f"sha256 {f['sha256'][:8]}"] if f.get("sha256") else [])
    )
    return f"- {_one_line(f['path'], 200)}: {', '.join(done) or 'named'}" + (f" ({', '.join(known)})" if known else "")


def _command_line(c: dict[str, Any]) -> str:
    runs = f" ×{c['runs']}" if c["runs"] > 1 else ""
    outcome = "ok" if c["status"] == "ok" else "failed" + (f": {_one_line(c['excerpt'], 160)}" if c["excerpt"] else "")
    return f"- `{_one_line(c['command'], 200)}`{runs} → {outcome}"


def _process_line(p: dict[str, Any]) -> str:
    started = p["started"][0] if "started" in p else p["started_seq"]
    return f"- [{p['process_id']}] `{_one_line(p['command'], 200)}` (started at seq {started})"


def _one_line(text: str, limit: int) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _sections(core: _Core) -> list[_Section]:
    cert = core.certification
    cert_lines: tuple[int, Iterator[str]] = (0, iter(()))
    if core.show_certification:
        cert_lines = (
            1,
            iter(["- certified" if cert["certified"] else "- not certified: " + "; ".join(core.shown_reasons)]),
        )
    sections = [
        _Section(
            10,
            "Success criteria",
            "criteria",
            *_lines(core, "criteria", lambda k: f"- [{k['id']}] [{'met' if k['met'] else ' '}] {_text(k['text'])}"),
        ),
        _Section(10, "Required validations", "requirements", *_lines(core, "requirements", _requirement_line)),
        _Section(
            8, "Validation evidence", "evidence lines", *_lines(core, "evidence", _evidence_line(core.generation))
        ),
        _Section(9, "Certification", "certification lines", *cert_lines),
        _Section(7, "Active failure lineages", "failure lineages", *_lines(core, "failures", _failure_line)),
        _Section(
            6,
            "Files changed outside the agent (re-read before editing)",
            "files",
            *_lines(core, "external", lambda path: f"- {path}"),
        ),
        _Section(5.5, "Background processes running", "processes", *_lines(core, "running", _process_line)),
        _Section(5, "Disproofs", "disproofs", *_lines(core, "disproofs", _disproof_line)),
        _Section(
            4,
            "Decisions",
            "decisions",
            *_lines(
                core,
                "decisions",
                lambda d: (
                    f"- [{d['id']}] {_text(d['text'])}"
                    + (f" (because {_text(d['rationale'])})" if d.get("rationale") else "")
                ),
            ),
        ),
        _Section(
            -1,
            "Working set: files (newest first)",
            "files",
            *_lines(core, "working_files", _file_line),
            newest_first=True,
        ),
        _Section(
            -2,
            "Working set: commands run (newest first)",
            "commands",
            *_lines(core, "commands", _command_line),
            newest_first=True,
        ),
        _Section(3, "Plan", "plan items", *_lines(core, "actions", lambda a: f"- [{a['status']}] {_text(a['text'])}")),
        _Section(
            2,
            "Questions",
            "questions",
            *_lines(
                core,
                "questions",
                lambda q: (
                    f"- [{q['id']}] {_text(q['text'])}" + (f" → answered: {_text(q['answer'])}" if q["answer"] else "")
                ),
            ),
        ),
        _Section(1, "Hypotheses", "hypotheses", *_lines(core, "hypotheses", _hypothesis_line)),
        _Section(0, "Notes", "notes", *_lines(core, "notes", lambda n: f"- [{n['id']}] {_text(n['text'])}")),
    ]
    return [sec for sec in sections if sec.count]


def _compose(fixed: list[str], sections: list[_Section], kept: list[int], with_omitted: bool) -> str:
    out = list(fixed)
    gone = []
    for sec, n in zip(sections, kept, strict=False):
        if not n:
            gone.append(f"{sec.count} {sec.noun}")
            continue
        dropped = sec.count - n
        out.append(f"{sec.title} ({dropped} older omitted):" if dropped else f"{sec.title}:")
        out.extend(sec.newest(n))
    if gone and with_omitted:
        out.append("Omitted for budget: " + ", ".join(gone))
    return "\n".join(out)


def _allot(sections: list[_Section], keep_order: list[int], k: int) -> list[int]:
    """Lines kept per section when the ``k`` highest-priority lines are kept."""
    kept = [0] * len(sections)
    for i in keep_order:
        kept[i] = min(sections[i].count, k)
        k -= kept[i]
        if not k:
            break
    return kept


_SAMPLE_LINES = 32
"""Lines whose estimate sets the characters-per-token of the first guess."""


def _search(fits: Callable[[int], bool], total: int, guess: int) -> int:
    """The largest ``k`` in ``[0, total]`` with ``fits(k)`` (``fits(0)`` holds; ``fits`` is monotone),
    galloping from ``guess`` then bisecting: O(log |answer - guess|) calls."""
    k = min(max(guess, 0), total)
    step = 1
    if k == 0 or fits(k):
        lo, hi = k, total + 1
        while lo < total:
            k = min(lo + step, total)
            if not fits(k):
                hi = k
                break
            lo, step = k, step * 2
        else:
            return lo
    else:
        lo, hi = 0, k
        while hi - step > 0:
            k = hi - step
            if fits(k):
                lo = k
                break
            hi, step = k, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


_SHOWN_IN_CONVERSATION = ("Validation evidence", "Active failure lineages", "Plan")
"""Sections whose changes the conversation itself shows: tool results (a run's evidence), plan tool calls; the
working set too. A pass made stale is the exception the engine checks apart (:func:`current_passes`): a state
that showed it current must not stay the newest word."""


def update_key(core: _Core) -> str:
    """A digest of what the state says that the conversation does not show (call under the ledger lock).

    Goal, constraints and every section but the working set, the evidence, the certification, the failure
    lineages and the plan, each line in full. Two states with equal keys
    differ only by what the conversation since the earlier one already carries. O(those lines).
    """
    h = hashlib.sha256()
    count, newest = core.section("constraints")
    for line in [f"goal: {core.goal}", *(f"- [{c['id']}] {c['text']}" for c in newest)]:
        h.update(line.encode("utf-8", "surrogatepass") + b"\n")
    for sec in _sections(core):
        if sec.title.startswith("Working set") or sec.title in (*_SHOWN_IN_CONVERSATION, "Certification"):
            continue
        h.update(f"[{sec.title}]\n".encode())
        for _ in range(sec.count):
            h.update(sec.take().encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


def goal_line(goal: str | None) -> str:
    """The ``Goal:`` line of a rendered state (continuation lines indented)."""
    return f"Goal: {_text(goal) if goal else '(not set)'}"


def current_passes(core: _Core) -> frozenset[str]:
    """The requirements whose latest evidence passed at the current workspace generation (call under the
    ledger lock): what the rendered state shows as ``passed: … (current)``."""
    return frozenset(
        o["requirement"]
        for o in core.section("evidence")[1]
        if o["status"] == "passed" and o["generation"] == core.generation
    )


def render_state(core: _Core, budget_tokens: int, estimate: Callable[[str], int], *, goal_stated: bool = False) -> str:
    """See :meth:`latch.kernel.state.CanonicalState.render` (call under the ledger lock)."""
    if core.is_empty:
        return ""
    count, newest = core.section("constraints")
    constraints = [f"- [{c['id']}] {_text(c['text'])}" for c in reversed(list(newest))]
    head = ["Canonical state", GOAL_STATED if goal_stated and core.goal else goal_line(core.goal)]
    latest = core.latest_instruction
    if latest is not None and latest["text"] != core.goal:
        head.append(f"Latest user instruction: {_text(latest['text'])}")
    fixed = head + (["Constraints:", *constraints] if count else [])
    if estimate("\n".join(fixed)) > budget_tokens:
        raise StateOverflow(
            "goal and constraints alone exceed the state budget",
            {
                "goal_tokens": estimate("\n".join(head[1:])),
                "constraints_tokens": estimate("\n".join(fixed[len(head) :])),
                "budget_tokens": budget_tokens,
            },
        )
    sections = _sections(core)
    total = sum(sec.count for sec in sections)
    # the keep order: highest tier first (later sections first among equals), newest line first
    keep_order = sorted(reversed(range(len(sections))), key=lambda i: -sections[i].tier)
    keep = _Keep(sections, keep_order)
    tokens: dict[int, int] = {}

    def text_for(k: int, with_omitted: bool = True) -> str:
        keep.ensure(k)
        return _compose(fixed, sections, _allot(sections, keep_order, k), with_omitted)

    def cost(k: int) -> int:
        if k not in tokens:
            tokens[k] = estimate(text_for(k))
        return tokens[k]

    room = budget_tokens - cost(0)
    if room < 0:
        return text_for(0, with_omitted=False)  # goal and constraints, which fit
    # guess how many lines fit from their characters, at the tokens per character of the first few
    keep.ensure(min(total, _SAMPLE_LINES))
    sample = estimate("\n".join(keep.lines)) if keep.lines else 0
    guess = keep.most_within(room * keep.chars[-1] // sample) if sample else 0
    return text_for(_search(lambda k: cost(k) <= budget_tokens, total, guess))
