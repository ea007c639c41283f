"""A view-driven scripted "model" for ``latch run``: it decides only from the request it receives.

Served by :func:`fake_providers.serve_openai` (``ViewDrivenAgent`` is a script entry: a callable of the
request body), it works through a task over a workspace of files, each holding one planted fact line
(``FACT-3 = amber-7731``) in its middle:

1. **Read phase.** Each file in order, page by page: the latest ``read_file`` call naming it in the request and
   its result say where it stands (a ``continue with offset=N`` footer: the next page is at N; none: read to
   the end); without one, the canonical state's working set line (``- NAME: read ×k``, with ``, bytes 0..E of
   S so far`` for a partial read) says it; with neither, the file is unread. It calls ``read_file`` for the
   next page it needs (a *re-read* when it had read that page before).
2. **Fact phase.** Each planted fact: when ``FACT-i = value`` is in the request but not yet in a note, it calls
   ``add_note`` with that line; when it is nowhere in the request, it calls ``search_history("FACT-i")`` (once
   per fact; a fact still missing after that is *lost*).
3. **Answer.** Every fact its request shows, one ``FACT-i = value`` line each.

What it counts (:attr:`re_reads`, :attr:`searches`, :attr:`answered`, :attr:`lost`) measures what a view
keeps under rotation without a real model; the same requests always give the same calls (deterministic).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from fake_providers import Reply, ToolUse

__all__ = ["ViewDrivenAgent", "plant_workspace", "request_text"]


def plant_workspace(root: Path, files: int = 12, lines: int = 120) -> dict[str, str]:
    """Write ``files`` text files of ``lines`` lines each into ``root`` (``notes_00.txt``...), each with one fact
    line in its middle; returns ``{fact key: value}``."""
    facts: dict[str, str] = {}
    for i in range(files):
        key, value = f"FACT-{i}", f"{['amber', 'cobalt', 'jade', 'ochre'][i % 4]}-{7000 + 37 * i}"
        facts[key] = value
        body = [f"notes_{i:02d}.txt: field notes, part {i}"]
        for n in range(1, lines):
            body.append(
                f"{key} = {value}"
                if n == lines // 2
                else f"line {n} of part {i}: the survey crew logged reading {n * 13 % 997} at station {n % 41}"
            )
        (root / f"notes_{i:02d}.txt").write_text("\n".join(body) + "\n", encoding="utf-8")
    return facts


def request_text(body: dict[str, Any]) -> str:
    """Every string of an OpenAI Chat Completions request's messages: contents and tool-call arguments."""
    parts: list[str] = []
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
        for call in m.get("tool_calls") or ():
            parts.append(call.get("function", {}).get("arguments", ""))
    return "\n".join(parts)


class ViewDrivenAgent:
    """See the module docstring. ``files``: workspace-relative names in task order; ``facts``: key → value."""

    def __init__(self, files: list[str], facts: dict[str, str]):
        self.files = files
        self.facts = facts
        self.reads: Counter[str] = Counter()  # first pages read, per file
        self.pages: Counter[tuple[str, int]] = Counter()  # reads per (file, offset)
        self.re_reads = 0
        self.searches: Counter[str] = Counter()
        self.answered: dict[str, str] = {}
        self.lost: list[str] = []
        self.requests = 0
        self._ids = 0

    def _call(self, name: str, **args: Any) -> Reply:
        self._ids += 1
        return Reply(
            tool_calls=(ToolUse(f"call_{self._ids}", name, json.dumps(args)),),
            usage={"prompt_tokens": 1000, "completion_tokens": 20},
        )

    @staticmethod
    def _next_page(body: dict[str, Any], text: str, name: str) -> int | None:
        """The offset of the next page of ``name`` to read, or ``None`` when the request shows it read to the end."""
        calls: dict[str, int] = {}
        latest: tuple[int, str] | None = None  # (offset, result) of the newest read of name in the request
        for m in body.get("messages", []):
            for call in m.get("tool_calls") or ():
                fn = call.get("function", {})
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    continue
                if fn.get("name") == "read_file" and args.get("path") == name:
                    calls[call.get("id", "")] = int(args.get("offset", 0))
            if m.get("role") == "tool" and m.get("tool_call_id") in calls:
                latest = (calls[m["tool_call_id"]], m.get("content") or "")
        if latest is not None:
            more = re.search(r"continue with offset=(\d+)\]$", latest[1].rstrip())
            return int(more.group(1)) if more else None
        line = re.search(rf"^- {re.escape(name)}: read ×\d+(?:, bytes 0\.\.([\d,]+) of [\d,]+ so far)?", text, re.M)
        if line is not None:
            return int(line.group(1).replace(",", "")) if line.group(1) else None
        return 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.requests += 1
        text = request_text(body)
        for name in self.files:
            offset = self._next_page(body, text, name)
            if offset is not None:
                if self.pages[(name, offset)]:
                    self.re_reads += 1
                self.pages[(name, offset)] += 1
                self.reads[name] += offset == 0
                return self._call("read_file", path=name, **({"offset": offset} if offset else {}))
        for key, value in self.facts.items():
            line = f"{key} = {value}"
            if line in text:
                if f"note: {line}" not in text:
                    return self._call("add_note", note=f"note: {line}")
                continue
            if not self.searches[key]:
                self.searches[key] += 1
                return self._call("search_history", query=key)
        self.answered = {k: v for k, v in self.facts.items() if f"{k} = {v}" in text}
        self.lost = [k for k in self.facts if k not in self.answered]
        return Reply(
            "\n".join(f"{k} = {v}" for k, v in self.answered.items()),
            usage={"prompt_tokens": 1000, "completion_tokens": 20},
        )


def run_latch(
    tmp_path: Path,
    *,
    files: int = 24,
    lines: int = 40,
    window: int = 10_000,
    reserve: int = 1_024,
    recent: int | None = 2_000,
    max_turns: int = 150,
    tools: str | None = "read_file,search_history,add_note",
    timeout: float = 900,
) -> tuple[ViewDrivenAgent, Any, int]:
    """``latch run`` (the real CLI in a subprocess) on a planted workspace under ``tmp_path / "ws"``, driven by a
    :class:`ViewDrivenAgent` over a loopback OpenAI-compatible server. Returns ``(agent, completed process, the
    number of cache epochs the run's views went through)``."""
    import os
    import sqlite3
    import subprocess
    import sys

    from fake_providers import serve_openai

    ws = tmp_path / "ws"
    ws.mkdir()
    facts = plant_workspace(ws, files=files, lines=lines)
    agent = ViewDrivenAgent(sorted(p.name for p in ws.iterdir()), facts)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    if "LATCH_IMPL" in os.environ:
        env["LATCH_IMPL"] = os.environ["LATCH_IMPL"]
    db = tmp_path / "latch.db"
    with serve_openai([agent] * (max_turns + 1)) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "latch",
                "--db",
                str(db),
                "run",
                "Read every notes file, then report each FACT line",
                "--provider",
                "openai-compatible",
                "--base-url",
                server.base_url,
                "--model",
                "view-driven",
                "--window",
                str(window),
                "--reserve",
                str(reserve),
                *(["--recent", str(recent)] if recent is not None else []),
                *(["--tools", tools] if tools else []),
                "--max-turns",
                str(max_turns),
                "--yes",
            ],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    with sqlite3.connect(db) as con:
        (epochs,) = con.execute("SELECT count(*) FROM kernel_records WHERE kind = 'epoch'").fetchone()
    return agent, proc, epochs
