"""What ``latch run`` prints on its console: streamed text, tool lines, a status line per request, approvals.

:class:`RunPrinter` is the run's :class:`latch.agent.observer.Observer`. Every line of a child agent carries the
child's name as a prefix (``[child 1a2b3c4d] ``, its session id's first 8 hex digits); a steering message that
arrived from another front end (``latch web``, ``latch tui``) is echoed when it is delivered. The status line of
a request (request number, context use, view tokens, epoch, provider prompt, cache read, output, cost) is fitted
to the console's width (characters): the least useful parts are dropped first (:func:`fit_parts`), never wrapped.
:class:`RunTotals` adds up the run's requests, tokens by kind and dollars (genai-prices, :mod:`latch.accounting.pricing`)
for ``/cost`` and the summary at exit.

:class:`Approver` asks before a call the permission policy does not allow by itself: it shows the command (for
``shell``) or a unified diff of the change (``write_file``, ``edit_file``; at most :data:`PREVIEW_LINES` lines)
and reads ``[y]es / [n]o / [a]lways`` (default no); ``a`` allows every later call of that tool in this process.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Sequence
from dataclasses import field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..accounting.pricing import format_usd, price_usage
from ..agent.observer import Observer
from ..agent.usage import provider_prompt_tokens
from ..records import dataclass
from ..textsafe import markup, plural, safe
from .line_input import read_line

__all__ = [
    "RunPrinter",
    "RunTotals",
    "Approver",
    "fit_parts",
    "call_line",
    "result_summary",
    "child_name",
    "PREVIEW_LINES",
]

PREVIEW_LINES = 40
"""The most lines of a command or diff an approval shows (the rest is counted)."""


def result_summary(content: str, is_error: bool) -> str:
    """``ok: FIRST LINE (+N lines)`` or ``error: ...``: a tool result in one line of at most ~120 characters."""
    lines = content.splitlines() or [""]
    head = lines[0].strip()
    if len(head) > 100:
        head = head[:99] + "…"
    more = f" (+{plural(len(lines) - 1, 'line')})" if len(lines) > 1 else ""
    return f"{'error' if is_error else 'ok'}: {head}{more}"


def call_line(call: Any) -> str:
    """``NAME: MAIN ARGUMENT`` (the command, path, query, goal or decision; else the first argument), one line
    of at most ~100 characters of argument."""
    args = call.args()
    if isinstance(args, dict):
        first = next((v for k, v in args.items() if k in ("command", "path", "query", "goal", "decision")), None)
        if first is None and args:
            first = next(iter(args.values()))
    else:
        first = str(args)
    text = str(first) if first is not None else ""
    text = " ".join(text.split())
    if len(text) > 100:
        text = text[:99] + "…"
    return f"{call.name}: {text}" if text else call.name


def child_name(session_id: str) -> str:
    """The name a child agent's lines carry: ``child`` and its session id's first 8 characters."""
    return f"child {session_id[:8]}"


def fit_parts(parts: Sequence[tuple[str, int] | tuple[str, int, str]], width: int, sep: str = " · ") -> str:
    """The ``parts`` (text, keep-priority, optionally a shorter text; a higher priority is kept longer) joined by
    ``sep``: until the line is at most ``width`` characters or one part is left, the lowest priority part (the
    last of equals) is shortened when it has a shorter text, else dropped."""
    kept: list[list[Any]] = [list(p) for p in parts]
    while len(kept) > 1 and len(sep.join(p[0] for p in kept)) > width:
        lowest = min(p[1] for p in kept)
        i = max(i for i, p in enumerate(kept) if p[1] == lowest)
        if len(kept[i]) > 2 and kept[i][2] != kept[i][0]:
            kept[i][0] = kept[i][2]
        else:
            kept.pop(i)
    return sep.join(p[0] for p in kept)


@dataclass
class RunTotals:
    """A run's requests and what they used: prompt tokens (input + cache read + cache write, as the provider
    counted them), ``cache_read`` and ``output`` tokens, ``usd`` (the priced requests; ``None`` before one is
    priced) and ``unpriced`` (requests without a price: no usage or a model genai-prices does not price)."""

    requests: int = 0
    prompt: int = 0
    cache_read: int = 0
    output: int = 0
    usd: Decimal | None = None
    unpriced: int = 0

    def add(self, usage: Any, cost: Any) -> None:
        self.requests += 1
        if usage is not None:
            self.prompt += provider_prompt_tokens(usage) or 0
            self.cache_read += usage.cache_read_tokens or 0
            self.output += usage.output_tokens or 0
        if cost is None:
            self.unpriced += 1
        else:
            self.usd = cost.usd if self.usd is None else self.usd + cost.usd

    def line(self) -> str:
        """``2 requests · 1,850 prompt tokens (900 cache read) · 24 output tokens · $0.002542``; the dollars
        say ``unpriced`` when no request was priced and ``(+N unpriced)`` when some were not."""
        dollars = format_usd(self.usd)
        if self.unpriced and self.usd is not None:
            dollars += f" (+{self.unpriced} unpriced)"
        return (
            f"{plural(self.requests, 'request')} · {self.prompt:,} prompt tokens ({self.cache_read:,} cache "
            f"read) · {self.output:,} output tokens · {dollars}"
        )


class RunPrinter(Observer):
    """The terminal observer of a run: streamed text, tool lines, a status line per request (all escaped).

    ``con`` is the run's rich console; ``model`` and ``provider`` are what a request is priced as; ``exact``
    says whether the view's tokens are the model's tokenizer's (else estimated). ``prefix`` starts every line
    (a child's name); ``totals`` is shared with the children's printers (:meth:`child`)."""

    def __init__(
        self,
        con: Any,
        model: str | None = None,
        provider: str | None = None,
        exact: bool = False,
        prefix: str = "",
        totals: RunTotals | None = None,
    ):
        self.con, self.exact, self.prefix = con, exact, prefix
        self.model, self.provider = model, provider
        self.totals = totals if totals is not None else RunTotals()
        self._streaming = False

    def child(self, session_id: str) -> RunPrinter:
        return RunPrinter(self.con, self.model, self.provider, self.exact, f"[{child_name(session_id)}] ", self.totals)

    def _line(self, text: str, style: str = "") -> None:
        body = markup(self.prefix) + text
        self.con.print(f"[{style}]{body}[/{style}]" if style else body, highlight=False)

    def on_request(self, number: int, result: Any) -> None:
        self._streaming = False

    def on_text(self, delta: str) -> None:
        if not delta:
            return
        text = safe(delta, multiline=True)
        if self.prefix:
            text = text.replace("\n", "\n" + self.prefix)
            if not self._streaming:
                text = self.prefix + text
        self._streaming = True
        sys.stdout.write(text)
        sys.stdout.flush()

    def _end_text(self) -> None:
        if self._streaming:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._streaming = False

    def on_steering(self, texts: list[str]) -> None:
        self._end_text()
        for text in texts:
            self._line(f"steering delivered: {markup(' '.join(text.split()))}", "magenta")

    def on_response(self, number: int, message: Any, usage: Any, view: Any) -> None:
        if not self._streaming and message.text:  # a provider that answered whole (--no-stream)
            self.on_text(message.text)
        self._end_text()
        cost = price_usage(usage, getattr(message, "model", None) or self.model, provider=self.provider)
        self.totals.add(usage, cost)
        total = view.tokens.total_tokens
        hard = view.budget.hard_limit_tokens
        parts = [
            (f"request {number}", 9),
            (f"context {total / hard:.0%} of {hard:,}" if hard else f"{total:,}", 8),
            (f"view {total:,} tokens ({'exact' if self.exact else 'estimated'})", 2),
            (f"epoch {view.epoch}", 1),
        ]
        if usage is not None:
            prompt = provider_prompt_tokens(usage)
            if prompt is not None:
                parts.append((f"provider prompt {prompt:,}", 3))
            if usage.cache_read_tokens is not None:
                parts.append((f"cache read {usage.cache_read_tokens:,}", 5))
            if usage.output_tokens is not None:
                parts.append((f"output {usage.output_tokens:,}", 4))
        if cost is None:
            parts.append(("unpriced", 7))
        else:
            parts.append((f"cost {format_usd(cost.usd)} (run {format_usd(self.totals.usd)})", 7))
        width = max(20, self.con.width - len(self.prefix))
        self._line(markup(fit_parts(parts, width)), "dim")

    def on_tool_call(self, call: Any, decision: Any, allowed: bool) -> None:
        self._end_text()
        self._line(f"{'→' if allowed else '✗'} {markup(call_line(call))}", "cyan")

    def on_tool_result(self, call: Any, outcome: Any) -> None:
        style = "red" if outcome.is_error else "green"
        self._line(f"  {markup(result_summary(outcome.content, outcome.is_error))}", style)

    def on_correction(self, correction: Any) -> None:
        self._line(
            f"the provider counted {correction.provider_tokens:,} tokens for a view estimated at "
            f"{correction.estimated_tokens:,}; later views are budgeted smaller",
            "yellow",
        )


def _bounded(lines: list[str]) -> list[str]:
    if len(lines) <= PREVIEW_LINES:
        return lines
    return [*lines[:PREVIEW_LINES], f"… {len(lines) - PREVIEW_LINES:,} more lines"]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def preview(call: Any, workspace: Path) -> list[str]:
    """What an approval shows of ``call`` before asking: ``$ COMMAND`` for ``shell``, a unified diff (``---``,
    ``+++``, ``@@``, ``-``/``+`` lines) of the file change for ``write_file`` and ``edit_file`` (an unreadable
    file shows the old and new text), the arguments as JSON otherwise; at most :data:`PREVIEW_LINES` lines."""
    args = call.args()
    if not isinstance(args, dict):
        return _bounded(str(args).splitlines())
    path = args.get("path") if isinstance(args.get("path"), str) else None
    if call.name == "shell" and isinstance(args.get("command"), str):
        return _bounded([f"$ {line}" if i == 0 else f"  {line}" for i, line in enumerate(args["command"].splitlines())])
    if call.name in ("write_file", "edit_file") and path:
        before = _read(workspace / path)
        if call.name == "write_file" and isinstance(args.get("content"), str):
            after = args["content"]
        elif (
            call.name == "edit_file"
            and isinstance(args.get("old_string"), str)
            and isinstance(args.get("new_string"), str)
        ):
            old, new = args["old_string"], args["new_string"]
            if before is None or old not in before:
                return _bounded(
                    [
                        f"--- {path}",
                        f"+++ {path}",
                        *(f"-{x}" for x in old.splitlines()),
                        *(f"+{x}" for x in new.splitlines()),
                    ]
                )
            after = before.replace(old, new) if args.get("replace_all") else before.replace(old, new, 1)
        else:
            return _bounded(json.dumps(args, indent=2, ensure_ascii=False).splitlines())
        diff = difflib.unified_diff(
            (before or "").splitlines(),
            after.splitlines(),
            "/dev/null" if before is None else f"a/{path}",
            f"b/{path}",
            lineterm="",
        )
        return _bounded(list(diff))
    return _bounded(json.dumps(args, indent=2, ensure_ascii=False).splitlines())


class Approver:
    """The approval prompt of a run on a terminal (the loop's ``approve`` callback): shows :func:`preview`
    and asks ``[y/N/a]``; ``y``/``yes`` allows this call, ``a``/``always`` this tool for the rest of the
    process (:attr:`always`), anything else (Enter, EOF) declines."""

    def __init__(self, con: Any, workspace: Path, read: Any = read_line):
        self.con, self.workspace, self.read = con, workspace, read
        self.always: set[str] = set()

    def __call__(self, call: Any, decision: Any) -> bool:
        if call.name in self.always:
            self.con.print(
                f"[dim]allowed (always {markup(call.name)} this session): {markup(call_line(call))}[/dim]",
                highlight=False,
            )
            return True
        for line in preview(call, self.workspace):
            style = (
                "green"
                if line.startswith("+") and not line.startswith("+++")
                else "red"
                if line.startswith("-") and not line.startswith("---")
                else ""
            )
            text = markup(line)
            self.con.print(f"  [{style}]{text}[/{style}]" if style else f"  {text}", highlight=False)
        choices = markup(f"[y]es / [n]o / [a]lways {call.name} for this session [y/N/a] ")
        self.con.print(
            f"[yellow]allow {markup(call_line(call))}? ({markup(decision.reason)})[/yellow] {choices}",
            end="",
            highlight=False,
        )
        try:
            answer = self.read().strip().lower()
        except EOFError:
            return False
        if answer in ("a", "always"):
            self.always.add(call.name)
            return True
        return answer in ("y", "yes")


@dataclass
class RunInfo:
    """What ``/model``, ``/tools`` and ``/context`` use: provider and model names, engine, window and reserve
    (tokens), the permission mode, the tool names offered and the estimator forced by ``--estimator`` (if any)."""

    provider: str
    model: str
    engine: str
    window: int
    reserve: int
    mode: str
    tools: list[str] = field(default_factory=list)
    estimator: str | None = None
