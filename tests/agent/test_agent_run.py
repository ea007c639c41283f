"""``latch run`` end to end: the real CLI in a subprocess, the official SDKs, and
loopback servers speaking the OpenAI and Anthropic wire formats (tests/fake_providers.py); a real SIGKILL
mid-tool and ``--resume``; the API key never in the store or the output."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_providers import Reply, ToolUse, serve_anthropic, serve_openai
from sandbox_support import end_shell_group

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

KEY = "sk-test-LATCHSECRET-0123456789abcdef"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update({"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200", **extra})
    return env


def latch(tmp_path: Path, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), *args],
        cwd=cwd,
        env=env or _env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


RUN_LIFECYCLE = (
    "run_started",
    "run_ended",
    "run_command_applied",
)  # run bookkeeping (tests/agent/test_run_lifecycle.py)


def kinds(tmp_path: Path) -> list[str]:
    """The kinds of the stored events in order, without the run lifecycle bookkeeping of latch.host.runs."""
    with sqlite3.connect(tmp_path / "latch.db") as db:
        return [k for (k,) in db.execute("SELECT kind FROM events ORDER BY seq") if k not in RUN_LIFECYCLE]


def session_id(tmp_path: Path) -> str:
    with sqlite3.connect(tmp_path / "latch.db") as db:
        (sid,) = db.execute("SELECT id FROM sessions WHERE source = 'latch run'").fetchone()
    return sid


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    (w / "AGENTS.md").write_text("Run the tests with `python -m pytest`.\n")
    return w


def _task_script(wire: str):
    return [
        Reply(
            tool_calls=(ToolUse("c1", "write_file", json.dumps({"path": "hello.txt", "content": "hi\n"})),),
            usage=_usage(wire, 900),
        ),
        Reply(
            tool_calls=(ToolUse("c2", "read_file", json.dumps({"path": "hello.txt"})),),
            usage=_usage(wire, 950, cached=900),
        ),
        Reply("Wrote hello.txt and checked it.", usage=_usage(wire, 1000, cached=950)),
    ]


def _usage(wire: str, prompt: int, cached: int = 0) -> dict:
    if wire == "openai":
        return {"prompt_tokens": prompt, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": cached}}
    return {
        "input_tokens": prompt - cached,
        "output_tokens": 12,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_latch_run_completes_a_task_against_the_real_sdks(tmp_path, ws, wire):
    serve = serve_openai if wire == "openai" else serve_anthropic
    key_env = "OPENAI_API_KEY" if wire == "openai" else "ANTHROPIC_API_KEY"
    model = "gpt-4.1" if wire == "openai" else "claude-sonnet-4-5"
    with serve(_task_script(wire)) as server:
        r = latch(
            tmp_path,
            "run",
            "write hello.txt",
            "--provider",
            wire,
            "--model",
            model,
            "--base-url",
            server.base_url,
            "--yes",
            cwd=ws,
            env=_env(tmp_path, **{key_env: KEY}),
        )
        bodies = server.bodies
        auth = [req.headers.get("authorization", "") + req.headers.get("x-api-key", "") for req in server.requests]
    assert r.returncode == 0, r.stderr + r.stdout
    assert (ws / "hello.txt").read_text() == "hi\n"
    assert "Wrote hello.txt and checked it." in r.stdout
    assert "→ write_file: hello.txt" in r.stdout and "→ read_file: hello.txt" in r.stdout
    assert r.stdout.count("request ") >= 3 and "cache read 950" in r.stdout
    assert len(bodies) == 3 and all(KEY in a for a in auth)
    # the provider saw the stable system prompt, the tools, the repository instructions, the results
    first = bodies[0]
    text = json.dumps(first)
    assert "Run the tests with" in text and "write hello.txt" in text
    assert [t.get("name") or t["function"]["name"] for t in first["tools"]][:4] == [
        "read_file",
        "write_file",
        "edit_file",
        "shell",
    ]
    assert "hi" in json.dumps(bodies[2])
    # the key is nowhere but in the Authorization / x-api-key header
    db_bytes = (tmp_path / "latch.db").read_bytes()
    assert KEY.encode() not in db_bytes and KEY not in r.stdout + r.stderr
    k = kinds(tmp_path)
    assert k.count("assistant_message") == 3 and k.count("usage") == 3 and k.count("tool_started") == 2


def test_killed_mid_tool_resumes_with_the_call_interrupted(tmp_path, ws):
    marker = ws / "started.txt"
    slow = f"echo $$ > {marker}; sleep 60"
    with serve_openai(
        [Reply(tool_calls=(ToolUse("c1", "shell", json.dumps({"command": slow, "timeout": 120})),))]
    ) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "latch",
                "--db",
                str(tmp_path / "latch.db"),
                "run",
                "slow job",
                "--provider",
                "openai-compatible",
                "--model",
                "local",
                "--base-url",
                server.base_url,
                "--yes",
            ],
            cwd=ws,
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "the shell call never started"
        assert kinds(tmp_path)[-1] == "tool_started"  # the call and its start are durable before it ran
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        end_shell_group(marker)  # a shell a SIGKILLed agent left behind, ended like a reboot would
    before = kinds(tmp_path)
    assert before.count("tool_result") == 0
    sid = session_id(tmp_path)
    with serve_openai([Reply("The slow job was interrupted; I will not assume it finished.")]) as server:
        r = latch(tmp_path, "run", "--resume", sid[:6], "--base-url", server.base_url, cwd=ws)
        bodies = server.bodies
    assert r.returncode == 0, r.stderr + r.stdout
    assert "interrupted: shell:" in r.stdout
    after = kinds(tmp_path)
    assert after[: len(before)] == before  # nothing lost, nothing rewritten
    (tool_msg,) = [m for m in bodies[0]["messages"] if m["role"] == "tool"]
    assert tool_msg["tool_call_id"] == "c1" and "[interrupted:" in tool_msg["content"]
    assert "outcome is unknown" in tool_msg["content"]
    # the resumed request is a valid, budgeted view with the same system prompt and tools
    assert bodies[0]["messages"][0]["role"] == "system"


def test_resume_refuses_forgotten_and_imported_sessions(tmp_path, ws):
    with serve_openai([Reply("done")]) as server:
        r = latch(
            tmp_path,
            "run",
            "say done",
            "--provider",
            "openai-compatible",
            "--model",
            "local",
            "--base-url",
            server.base_url,
            cwd=ws,
        )
    assert r.returncode == 0, r.stderr
    sid = session_id(tmp_path)
    assert latch(tmp_path, "forget", sid, cwd=ws).returncode == 0
    r = latch(tmp_path, "run", "--resume", sid, cwd=ws)
    assert r.returncode == 1 and "forgotten" in r.stderr and "Traceback" not in r.stderr
    example = Path(__file__).resolve().parents[2] / "examples" / "invoice-rounding.claude.jsonl"
    assert latch(tmp_path, "import", str(example), cwd=ws).returncode == 0
    with sqlite3.connect(tmp_path / "latch.db") as db:
        (imported,) = db.execute("SELECT id FROM sessions WHERE source != 'latch run'").fetchone()
    r = latch(tmp_path, "run", "--resume", imported, cwd=ws)
    assert r.returncode == 1 and "not run by latch run" in r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "x", "--model", "m"], "no provider"),
        (["run", "x", "--provider", "openai"], "no model"),
        (["run", "x", "--provider", "nosuch", "--model", "m"], "nosuch"),
        (["run", "x", "--provider", "openai", "--model", "m"], "OPENAI_API_KEY"),
        (["run", "x", "--provider", "openai-compatible", "--model", "m"], "base"),
        (
            [
                "run",
                "x",
                "--provider",
                "openai-compatible",
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--tools",
                "shell,nosuch",
            ],
            "nosuch",
        ),
        (["run", "  ", "--provider", "openai", "--model", "m"], "TASK is empty"),
    ],
)
def test_run_option_errors_are_one_line(tmp_path, ws, args, message):
    r = latch(tmp_path, *args, cwd=ws)
    assert r.returncode in (1, 2), r.stdout
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) <= 3


def test_unreachable_provider_is_one_line_and_the_task_is_kept(tmp_path, ws):
    r = latch(
        tmp_path,
        "run",
        "the task",
        "--provider",
        "openai-compatible",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        cwd=ws,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr + r.stdout
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("Error: ")]  # the CLI's one error format
    assert "127.0.0.1:9" in line and "latch: error" not in r.stdout + r.stderr
    assert kinds(tmp_path) == ["user_message"]  # the task is durable; nothing was invented


def test_provider_defaults_come_from_the_config_and_flags_win(tmp_path, ws):
    with serve_openai([Reply("from config"), Reply("from flag")]) as server:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.toml").write_text(
            f'[provider]\nname = "openai-compatible"\nmodel = "local-model"\n'
            f'base_url = "{server.base_url}"\nmax_turns = 2\n'
        )
        r = latch(tmp_path, "run", "use the config", cwd=ws)
        assert r.returncode == 0, r.stderr
        assert "from config" in r.stdout and "openai-compatible local-model" in r.stdout
        r = latch(tmp_path, "run", "use a flag", "--model", "other-model", cwd=ws)
        assert r.returncode == 0, r.stderr
        assert [b["model"] for b in server.bodies] == ["local-model", "other-model"]
        (home / "config.toml").write_text("[provider]\nmax_turns = 0\n")
        r = latch(tmp_path, "run", "bad config", cwd=ws)
        assert r.returncode != 0 and "max_turns" in r.stderr and "Traceback" not in r.stderr


def _on_a_terminal(tmp_path: Path, args: list[str], lines: list[str], cwd: Path, timeout: float = 60) -> str:
    """Run ``latch ARGS`` with a pseudo-terminal as stdin/stdout, typing each of ``lines`` at a ``latch>`` prompt."""
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), *args],
        cwd=cwd,
        env=_env(tmp_path),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    out = b""
    todo = list(lines)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if todo and out.rstrip().endswith(b"latch>"):
            os.write(master, (todo.pop(0) + "\n").encode())
            out += b"\n"
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=10)
    os.close(master)
    return out.decode("utf-8", "replace")


def test_interactive_prompt_runs_tasks_and_slash_commands(tmp_path, ws):
    with serve_openai(
        [
            Reply(tool_calls=(ToolUse("k1", "set_goal", json.dumps({"goal": "Greet the user"})),)),
            Reply("Hello there, user."),
            Reply("Second answer."),
        ]
    ) as server:
        out = _on_a_terminal(
            tmp_path,
            ["run", "--provider", "openai-compatible", "--model", "local", "--base-url", server.base_url],
            ["please greet me", "/state", "/search greet", "/compact", "/context", "another task", "/nosuch", "/quit"],
            ws,
        )
    assert "Hello there, user." in out and "Second answer." in out
    assert "Greet the user" in out  # /state shows the goal the kernel tool set
    assert "seq " in out and "please greet me" in out  # /search found the task
    assert "compacted" in out and "unknown command /nosuch" in out
    assert "Traceback" not in out


def test_status_line_shows_each_requests_cost_where_priced(tmp_path, ws):
    """The per-request status line carries the request's cost (latch.accounting.pricing)."""
    with serve_openai(_task_script("openai")) as server:
        r = latch(
            tmp_path,
            "run",
            "write hello.txt",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1",
            "--base-url",
            server.base_url,
            "--yes",
            cwd=ws,
            env=_env(tmp_path, OPENAI_API_KEY=KEY),
        )
    assert r.returncode == 0, r.stderr + r.stdout
    # gpt-4.1: input $2, cached $0.50, output $8 per million tokens (genai-prices)
    # request 1: 900 x 2 + 12 x 8 = 1,800 + 96 = 1,896 µ$
    # request 2: 50 x 2 + 900 x 0.50 + 12 x 8 = 100 + 450 + 96 = 646 µ$ (run 2,542 µ$)
    assert "cost $0.001896 (run $0.001896)" in r.stdout
    assert "cost $0.0006460 (run $0.002542)" in r.stdout
    with serve_openai(_task_script("openai")) as server:
        local = latch(
            tmp_path,
            "run",
            "write hello.txt",
            "--provider",
            "openai-compatible",
            "--model",
            "my-local-model-7b",
            "--base-url",
            server.base_url,
            "--yes",
            cwd=ws,
            env=_env(tmp_path),
        )
    assert local.returncode == 0, local.stderr + local.stdout
    assert local.stdout.count("unpriced") >= 3 and "cost $" not in local.stdout


@pytest.mark.parametrize(
    "extra", [["--window", "10"], ["--engine", "nosuch"], ["--estimator", "nosuch"], ["--child-engine", "nosuch"]]
)
def test_a_rejected_run_leaves_no_store_and_no_session(tmp_path, ws, extra):
    """Found by a new-user trial: rejected options left an empty session (and a database) behind."""
    r = latch(
        tmp_path,
        "run",
        "x",
        "--provider",
        "openai-compatible",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        *extra,
        cwd=ws,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "latch.db").exists()


def test_resume_of_a_session_without_a_task_is_refused(tmp_path, ws):
    from latch.store import EventStore

    store = EventStore(tmp_path / "latch.db")
    sid = store.create_session(
        workspace=str(ws),
        source="latch run",
        format="latch",
        meta={"agent": {"provider": "openai-compatible", "model": "m"}},
    )
    store.close()
    r = latch(tmp_path, "run", "--resume", sid, "--base-url", "http://127.0.0.1:9/v1", cwd=ws)
    assert r.returncode == 1 and "has no task" in r.stderr


def test_resume_keeps_the_budget_and_choices_of_the_run(tmp_path, ws):
    """Found by a new-user trial: `--window 3000 --reserve 100` reverted to the defaults on --resume."""
    with serve_openai([Reply("first"), Reply("second")]) as server:
        r = latch(
            tmp_path,
            "run",
            "task",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--window",
            "30000",
            "--reserve",
            "1000",
            "--recent",
            "5000",
            cwd=ws,
        )
        assert r.returncode == 0, r.stderr
        sid = session_id(tmp_path)
        r = latch(tmp_path, "run", "--resume", sid, "go on", cwd=ws)
        assert r.returncode == 0, r.stderr
        assert "window 30,000 · reserve 1,000" in r.stdout
        assert [b["max_tokens"] for b in server.bodies] == [1000, 1000]


def test_tool_processes_never_see_the_keys_and_printed_secrets_are_redacted(tmp_path, ws):
    """The model runs ``env`` and prints a key file: neither the provider key, the --api-key-env variable nor any
    secret-named variable reaches the tool's output, the store or later requests; a pass-through name is kept."""
    (ws / "leak.txt").write_text("the deploy token is tok-SECRETVALUE-42\n")
    script = [Reply(tool_calls=(ToolUse("c1", "shell", json.dumps({"command": "env; cat leak.txt"})),)), Reply("done")]
    with serve_openai(script) as server:
        r = latch(
            tmp_path,
            "run",
            "show the environment",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "MY_LLM_CRED",
            "--yes",
            cwd=ws,
            env=_env(
                tmp_path,
                OPENAI_API_KEY=KEY,
                MY_LLM_CRED="cred-LLMKEY-0123456789",
                DEPLOY_TOKEN="tok-SECRETVALUE-42",
                SERVICE_PASSWORD="pw-0123456789",
                CI_BUILD_TOKEN="kept-0123456789",
                LATCH_TOOL_ENV_PASS="CI_BUILD_TOKEN",
                PLAIN_SETTING="visible-value",
            ),
        )
        second = json.dumps(server.bodies[1])
    assert r.returncode == 0, r.stderr + r.stdout
    for secret in (KEY, "cred-LLMKEY-0123456789", "tok-SECRETVALUE-42", "pw-0123456789"):
        assert secret not in second and secret.encode() not in (tmp_path / "latch.db").read_bytes()
    assert "PLAIN_SETTING=visible-value" in second and "CI_BUILD_TOKEN=kept-0123456789" in second
    assert "OPENAI_API_KEY" not in second and "MY_LLM_CRED" not in second
    assert "the deploy token is [redacted secret]" in second  # a secret value printed another way
