"""``latch run`` on a real local model: llama-cpp-python's server on SmolLM2-135M-Instruct
with ``n_ctx 2048``, 30 requests with the model forced to call ``read_file`` (``--tool-choice``), whose results
are large when the sampled path is in the workspace (a 1.6 KB module, or for a missing path the 160-name
workspace listing; cut to a quarter of the window; a run whose every path was refused is made again, at most
three), under ``--window 2048 --reserve 256``. The server's own tokenizer is the judge: it never refuses a
request for length, and with the ``llamacpp`` estimator (picked for the GGUF path as model id) every view Latch
reports equals the server's ``prompt_tokens``. The 135M model's text is nonsense; this is a protocol and budget
test."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys

import pytest
from llama_support import require_llama

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

N_CTX, RESERVE, TURNS = 2048, 256, 30
STATUS = re.compile(
    r"request (\d+) · context \d+% of ([\d,]+) · view ([\d,]+) tokens \((exact|estimated)\) · "
    r"epoch (\d+) · provider prompt ([\d,]+)"
)


def _n(text: str) -> int:
    return int(text.replace(",", ""))


ATTEMPTS = 3
"""Runs of the 30 turns at most: the model samples its paths, and a run whose paths were all refused (absolute
paths outside the workspace, bad offsets: short errors) never met a large result; another run is made then."""


def _thirty_turns(tmp_path, llama_server, gguf, ws, attempt: int) -> tuple[list[tuple[str, ...]], list[str]]:
    """One ``latch run`` of :data:`TURNS` forced ``read_file`` requests in its own store; every budget property is
    asserted on it. Returns the status rows and the stored ``tool_result`` payloads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update(LATCH_HOME=str(tmp_path / "home"), COLUMNS="240")
    db_path = tmp_path / f"latch-{attempt}.db"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "latch",
            "--db",
            str(db_path),
            "run",
            "Read module_0_request_handlers_and_helpers.py, then the next module, one file per turn.",
            "--provider",
            "openai-compatible",
            "--base-url",
            llama_server,
            "--model",
            str(gguf),
            "--window",
            str(N_CTX),
            "--reserve",
            str(RESERVE),
            "--recent",
            "1200",
            "--max-turns",
            str(TURNS),
            "--yes",
            "--tool-choice",
            "read_file",
            "--tools",
            "read_file",
            "--no-stream",
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]  # 3: stopped by --max-turns, nothing refused
    # Latch's own failures; the model's text (echoed in call lines) may hold any words, "Traceback" included
    assert "Traceback" not in r.stderr and not any(
        line.startswith(("error:", "Error:")) for line in r.stdout.splitlines()
    )
    rows = [m.groups() for m in STATUS.finditer(r.stdout)]
    assert [int(n) for n, *_ in rows] == list(range(1, TURNS + 1))
    hard = N_CTX - RESERVE
    views = [_n(v) for _, _, v, *_ in rows]
    server = [_n(p) for *_, p in rows]
    assert {h for _, h, *_ in rows} == {f"{hard:,}"} and {e for *_, e, _, _ in rows} == {"exact"}
    assert views == server  # the server's tokenizer agrees with every view, request by request
    assert max(server) <= hard  # never above window - reserve, so never refused for length
    epochs = [int(e) for *_, e, _ in rows]
    rotations = sum(1 for a, b in zip(epochs, epochs[1:], strict=False) if b != a)
    with sqlite3.connect(db_path) as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM events ORDER BY seq")]
        results = [p for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'tool_result'")]
    assert kinds.count("assistant_message") == TURNS and kinds.count("tool_result") == TURNS
    assert "estimate_correction" not in kinds  # exact counts: nothing for the provider to correct
    assert rotations >= 2  # the window forced the engine to rotate epochs, not to overflow
    return rows, results


def test_thirty_turns_of_latch_run_never_overflow_a_real_local_model(tmp_path, llama_server, capsys):
    gguf = require_llama()
    ws = tmp_path / "ws"
    ws.mkdir()
    # Every result is large whatever workspace path the model picks: a module is ~1.6 KB, a missing path lists
    # the 160-name workspace. (With 40-byte modules, a run whose sampled paths all existed had no large result.)
    doc = "".join(f"    # step {k}: validate the request, look up the handler, log the outcome\n" for k in range(20))
    for i in range(160):
        (ws / f"module_{i}_request_handlers_and_helpers.py").write_text(
            f"def handler_{i}(request):\n{doc}    return {i}\n"
        )
    largest: list[int] = []
    for attempt in range(ATTEMPTS):
        rows, results = _thirty_turns(tmp_path, llama_server, gguf, ws, attempt)
        largest.append(max(len(p) for p in results))
        if largest[-1] > 1_000:
            break
    assert largest[-1] > 1_000, largest  # the tools really returned large outputs in one of the runs
    server = [_n(p) for *_, p in rows]
    with capsys.disabled():
        print(
            f"\nlatch run, {TURNS} requests on SmolLM2 (n_ctx {N_CTX}, hard limit {N_CTX - RESERVE}), run "
            f"{len(largest)} of {ATTEMPTS}: largest result {largest[-1]:,} bytes, largest request {max(server)} "
            "server tokens, views == server counts on every request"
        )


def test_latch_run_completes_a_task_on_the_local_model(tmp_path, llama_server):
    """The plain case: a task, tools offered but not forced, and the model answers in text: the run ends "done"
    (exit 0) after one request whose view equals the server's count."""
    gguf = require_llama()
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update(LATCH_HOME=str(tmp_path / "home"), COLUMNS="240")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "latch",
            "--db",
            str(tmp_path / "latch.db"),
            "run",
            "Say hello in one word.",
            "--provider",
            "openai-compatible",
            "--base-url",
            llama_server,
            "--model",
            str(gguf),
            "--window",
            str(N_CTX),
            "--reserve",
            "128",
            "--no-stream",
            "--max-turns",
            "3",
            "--tools",
            "read_file",
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (row,) = [m.groups() for m in STATUS.finditer(r.stdout)]
    assert row[0] == "1" and row[3] == "exact" and _n(row[2]) == _n(row[5])
    with sqlite3.connect(tmp_path / "latch.db") as db:
        kinds = [
            k
            for (k,) in db.execute(
                "SELECT kind FROM events WHERE kind NOT IN ('run_started', 'run_ended') ORDER BY seq"
            )
        ]
    assert kinds == ["user_message", "assistant_message", "usage", "harness_prompt"]


def test_the_readme_small_window_reads_large_files_on_a_real_local_model(tmp_path, llama_server_factory, capsys):
    """The README's local-model budget (``--window 8192 --reserve 1024``) on a server of that context, with every
    default tool (the core set offered, the rest on demand) and ten 17 KB files: the model is forced to call
    ``read_file`` on every request, each page is sized to the room the next request has, and no request is refused
    for length: the run stops at ``--max-turns`` (exit 3), never on an overflow. Which paths the 135M model
    asks for is its own (often none that exists): tests/agent/test_agent_view_driven.py reads the ten files with a
    scripted model at this budget."""
    gguf = require_llama()
    base = llama_server_factory(8_192)
    ws = tmp_path / "ws"
    ws.mkdir()
    line = "The invoice total is rounded half-even to the cent before tax; see the ledger for exceptions.\n"
    for i in range(10):
        (ws / f"notes_{i}.txt").write_text(f"notes {i}\n" + line * 182)  # 17 KB each
    assert all(17_000 <= (ws / f"notes_{i}.txt").stat().st_size <= 17_500 for i in range(10))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update(LATCH_HOME=str(tmp_path / "home"), COLUMNS="240")
    turns = 12
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "latch",
            "--db",
            str(tmp_path / "latch.db"),
            "run",
            "Read notes_0.txt, then notes_1.txt, and so on to notes_9.txt, one file per turn.",
            "--provider",
            "openai-compatible",
            "--base-url",
            base,
            "--model",
            str(gguf),
            "--window",
            "8192",
            "--reserve",
            "1024",
            "--max-turns",
            str(turns),
            "--yes",
            "--tool-choice",
            "read_file",
            "--no-stream",
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]  # 3: stopped by --max-turns, nothing refused
    assert "Traceback" not in r.stderr and "cannot hold" not in r.stdout + r.stderr
    rows = [m.groups() for m in STATUS.finditer(r.stdout)]
    assert [int(n) for n, *_ in rows] == list(range(1, turns + 1))
    views = [_n(v) for _, _, v, *_ in rows]
    server = [_n(p) for *_, p in rows]
    assert views == server and max(server) <= 8_192 - 1_024
    with sqlite3.connect(tmp_path / "latch.db") as db:
        results = [p for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'tool_result'")]
    assert len(results) == turns
    with capsys.disabled():
        print(
            f"\nlatch run at the README's 8k budget, {turns} forced reads on SmolLM2: largest request "
            f"{max(server)} server tokens of 7,168"
        )
