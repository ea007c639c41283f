"""``latch run`` as an interactive agent: the prompt on a real pseudo-terminal (the stdlib's ``pty``) against a
loopback OpenAI-compatible server (tests/fake_providers.py); approvals with a preview and ``[y/N/a]``; ``/context``
as ``latch context`` prints it; the slash commands; the totals at exit; request numbers across resume; children's
lines prefixed; steering echoed; Ctrl-C's resume hint; a status line fitted to 80 columns."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_providers import Reply, ToolUse, serve_openai

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

KEY = "sk-test-LATCHSECRET-0123456789abcdef"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "LATCH_"))}
    env.update(
        {"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "200", "OPENAI_API_KEY": KEY, "NO_COLOR": "1", **extra}
    )
    return env


class Terminal:
    """``latch ARGS`` on a pseudo-terminal: :meth:`expect` reads until a text appears, :meth:`send` types a line."""

    def __init__(
        self,
        tmp_path: Path,
        args: list[str],
        cwd: Path,
        env: dict[str, str] | None = None,
        python: tuple[str, ...] = ("-m", "latch"),
    ):
        import pty

        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, *python, "--db", str(tmp_path / "latch.db"), *args],
            cwd=cwd,
            env=env or _env(tmp_path),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            start_new_session=True,
        )
        os.close(slave)
        self.out = ""
        self.seen = 0  # what expect() consumed

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:
            return False
        if not chunk:
            return False
        self.out += ANSI.sub("", chunk.decode("utf-8", "replace")).replace("\r\n", "\n")
        return True

    def expect(self, text: str, timeout: float = 60) -> str:
        """The output since the last expect, up to and including ``text``; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while text not in self.out[self.seen :]:
            if time.monotonic() > deadline or not self._read(0.2):
                raise AssertionError(f"{text!r} never came; output:\n{self.out[self.seen :]}")
        end = self.out.index(text, self.seen) + len(text)
        got, self.seen = self.out[self.seen : end], end
        return got

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def finish(self, timeout: float = 90) -> tuple[int, str]:
        """Read to the end; the exit code and the output since the last expect."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.2):
            if self.proc.poll() is not None and not select.select([self.master], [], [], 0.1)[0]:
                break
        code = self.proc.wait(timeout=30)
        os.close(self.master)
        return code, self.out[self.seen :]


def _usage(prompt: int, cached: int = 0) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": cached}}


RUN = ["run", "--provider", "openai", "--model", "gpt-4.1", "--base-url"]


def _sid(tmp_path: Path) -> str:
    with sqlite3.connect(tmp_path / "latch.db") as db:
        (sid,) = db.execute("SELECT id FROM sessions WHERE source = 'latch run'").fetchone()
    return sid


def _events(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "latch.db") as db:
        return db.execute("SELECT count(*) FROM events").fetchone()[0]


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


def test_the_prompt_stays_open_after_a_task_and_sums_up_at_exit(tmp_path, ws):
    with serve_openai(
        [Reply("Hello there.", usage=_usage(900)), Reply("Again.", usage=_usage(950, cached=900))]
    ) as server:
        t = Terminal(tmp_path, [*RUN, server.base_url, "greet me"], ws)
        assert "Hello there." in t.expect("latch> ")
        t.send("/cost")
        # gpt-4.1: 900 x $2 + 12 x $8 per million tokens
        assert "this run: 1 request · 900 prompt tokens (0 cache read) · 12 output tokens · $0.001896\n" in t.expect(
            "latch> "
        )
        t.send("and again")
        got = t.expect("latch> ")
        assert "Again." in got and "request 2 · " in got
        t.send("/quit")
        code, rest = t.finish()
        requests = len(server.bodies)
    sid = _sid(tmp_path)
    assert code == 0, rest
    assert (
        f"this run: 2 requests · 1,850 prompt tokens (900 cache read) · 24 output tokens · $0.002542 · "
        f"continue with latch run --resume {sid}\n"
    ) in rest
    assert requests == 2


def test_ctrl_d_at_the_prompt_ends_the_run(tmp_path, ws):
    with serve_openai([Reply("Hi.", usage=_usage(900))]) as server:
        t = Terminal(tmp_path, [*RUN, server.base_url, "hello"], ws)
        t.expect("latch> ")
        os.write(t.master, b"\x04")  # end of input on a terminal
        code, rest = t.finish()
    assert code == 0, rest
    assert (
        f"this run: 1 request · 900 prompt tokens (0 cache read) · 12 output tokens · $0.001896 · continue with latch run --resume {_sid(tmp_path)}\n"
        in rest
    )


def test_once_ends_after_the_task_on_a_terminal(tmp_path, ws):
    with serve_openai([Reply("Only this.", usage=_usage(900))]) as server:
        t = Terminal(tmp_path, [*RUN, server.base_url, "greet me", "--once"], ws)
        code, out = t.finish()
    assert code == 0 and "Only this." in out and "latch>" not in out


def test_resume_without_a_task_opens_the_prompt_and_sends_nothing(tmp_path, ws):
    with serve_openai([Reply("First.", usage=_usage(900)), Reply("Second.", usage=_usage(950))]) as server:
        r = subprocess.run(
            [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), *RUN, server.base_url, "first task"],
            cwd=ws,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert "request 1 · " in r.stdout
        sid = _sid(tmp_path)
        t = Terminal(tmp_path, ["run", "--resume", sid], ws)
        assert "resumed after 1 request; nothing is sent until you type a task" in t.expect("latch> ")
        assert len(server.bodies) == 1  # the prompt is open and nothing was sent
        t.send("second task")
        got = t.expect("latch> ")
        assert "Second." in got and "request 2 · " in got and "request 1 · " not in got
        t.send("/quit")
        code, _ = t.finish()
        assert code == 0 and len(server.bodies) == 2


def test_resume_without_a_task_in_a_pipe_refuses_a_finished_session(tmp_path, ws):
    with serve_openai([Reply("Done.", usage=_usage(900))]) as server:
        base = [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db")]
        r = subprocess.run(
            [*base, *RUN, server.base_url, "task"],
            cwd=ws,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        sid, before = _sid(tmp_path), _events(tmp_path)
        r = subprocess.run(
            [*base, "run", "--resume", sid], cwd=ws, env=_env(tmp_path), capture_output=True, text=True, timeout=120
        )
        assert len(server.bodies) == 1
    assert r.returncode == 2
    assert r.stderr.endswith(
        f"Error: session {sid} waits for the user (the agent's last answer is complete): give "
        "a TASK, or resume on a terminal for the prompt\n"
    )
    assert _events(tmp_path) == before


def test_approvals_show_the_diff_or_command_and_always_allows_the_tool(tmp_path, ws):
    (ws / "notes.txt").write_text("old line\nkept\n")
    script = [
        Reply(
            tool_calls=(ToolUse("c1", "write_file", json.dumps({"path": "notes.txt", "content": "new line\nkept\n"})),)
        ),
        Reply(tool_calls=(ToolUse("c2", "shell", json.dumps({"command": "echo one"})),)),
        Reply(tool_calls=(ToolUse("c3", "shell", json.dumps({"command": "echo two"})),)),
        Reply("All done."),
    ]
    with serve_openai(script) as server:
        t = Terminal(tmp_path, [*RUN, server.base_url, "edit and run", "--sandbox", "off", "--once"], ws)
        got = t.expect("[y/N/a] ")
        assert "--- a/notes.txt\n  +++ b/notes.txt\n  @@ -1,2 +1,2 @@\n  -old line\n  +new line\n   kept\n" in got
        assert "[y]es / [n]o / [a]lways write_file for this session [y/N/a] " in got
        t.send("")  # Enter: the default is no
        got = t.expect("[y/N/a] ")
        assert "✗ write_file: notes.txt" in got and "  $ echo one\n" in got
        t.send("a")
        code, rest = t.finish()
    assert code == 0, rest
    assert "→ shell: echo one" in rest and "allowed (always shell this session): shell: echo two" in rest
    assert "[y/N/a]" not in rest and "All done." in rest
    assert (ws / "notes.txt").read_text() == "old line\nkept\n"


def test_slash_commands_context_help_model_tools(tmp_path, ws):
    with serve_openai([Reply("Hi.", usage=_usage(900))]) as server:
        t = Terminal(
            tmp_path,
            [*RUN, server.base_url, "hello", "--window", "30000", "--reserve", "1000", "--tools", "read_file,shell"],
            ws,
        )
        t.expect("latch> ")
        sid = _sid(tmp_path)
        t.send("/context")
        got = t.expect("latch> ")
        assert f"/context · session {sid} · engine continuity" in got
        assert re.search(r"┃ component\s+┃ tokens ┃ note\s+┃", got) and re.search(r"│ canonical state\s+│\s+\d+ │", got)
        assert re.search(
            r"│ total\s+│\s+[\d,]+ │ of [\d,]+ \(corrected hard limit; window 30,000 − reserve 1,000 = "
            r"29,000\) │",
            got,
        )
        t.send("/help")
        got = t.expect("latch> ")
        assert "  /context       the next request's context by component (as latch context prints it)\n" in got
        assert "  /cost          requests, tokens and dollars of this run so far\n" in got
        t.send("/model")
        assert (
            f"provider openai · model gpt-4.1 · engine continuity · window 30,000 · reserve 1,000 tokens "
            f"(another model: latch run --resume {sid} --model NAME)"
        ) in t.expect("latch> ")
        t.send("/tools")
        got = t.expect("latch> ")
        assert "  read_file · allowed\n  shell · asks first\n" in got
        t.send("/nosuch")
        assert "unknown command /nosuch; /help lists them" in t.expect("latch> ")
        t.send("/quit")
        code, _ = t.finish()
    assert code == 0


def test_ctrl_c_prints_the_resume_command(tmp_path, ws):
    with serve_openai([Reply("Hi.", usage=_usage(900))]) as server:
        t = Terminal(tmp_path, [*RUN, server.base_url, "hello"], ws)
        t.expect("latch> ")
        sid = _sid(tmp_path)
        os.killpg(t.proc.pid, signal.SIGINT)  # what Ctrl-C does to the terminal's foreground process group
        code, rest = t.finish()
    assert code == 130
    assert "Aborted!" not in rest
    assert (
        f"warning: interrupted (Ctrl-C): the run ended; its processes were stopped (continue with latch run "
        f"--resume {sid})"
    ) in rest
    assert "this run: 1 request · 900 prompt tokens" in rest


# ``latch`` with SIGINT and SIGTERM blocked in its main thread (so in every thread it starts) but for one bystander
# thread started first: a signal is handled while the main thread's read of the terminal goes on, uninterrupted,
# as when it arrives between the prompt's write and its read
BYSTANDER = (
    "-c",
    "import signal, threading\n"
    "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})\n"
    "from latch.cli import main\n"
    "main()\n",
)


def _ends(t: Terminal, sig: signal.Signals) -> tuple[int, str]:
    """Send ``sig`` to the terminal's process group; the exit code and the output (the group killed on a hang)."""
    os.killpg(t.proc.pid, sig)
    try:
        return t.finish(timeout=20)
    finally:
        if t.proc.poll() is None:
            os.killpg(t.proc.pid, signal.SIGKILL)
            t.proc.wait(10)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_handled_outside_the_prompts_read_ends_the_run(tmp_path, ws, sig):
    with serve_openai([Reply("Hi.", usage=_usage(900))]) as server:
        t = Terminal(tmp_path, [*RUN, server.base_url, "hello"], ws, python=BYSTANDER)
        t.expect("latch> ")
        sid = _sid(tmp_path)
        code, rest = _ends(t, sig)
    assert code == 128 + sig, rest
    what = "interrupted (Ctrl-C)" if sig == signal.SIGINT else "SIGTERM"
    assert (
        f"warning: {what}: the run ended; its processes were stopped (continue with latch run --resume {sid})" in rest
    )


def test_ctrl_c_handled_outside_the_approvals_read_ends_the_run(tmp_path, ws):
    script = [Reply(tool_calls=(ToolUse("c1", "shell", json.dumps({"command": "echo one"})),))]
    with serve_openai(script) as server:
        t = Terminal(tmp_path, [*RUN, server.base_url, "run it", "--sandbox", "off"], ws, python=BYSTANDER)
        t.expect("[y/N/a] ")
        sid = _sid(tmp_path)
        code, rest = _ends(t, signal.SIGINT)
    assert code == 130, rest
    assert "Aborted!" not in rest and "Traceback" not in rest
    assert f"(Ctrl-C): the run ended; its processes were stopped (continue with latch run --resume {sid})" in rest


def _run(tmp_path: Path, ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "latch", "--db", str(tmp_path / "latch.db"), *args],
        cwd=ws,
        env=_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_steering_from_another_front_end_is_echoed(tmp_path, ws):
    from latch.agent.steering import SteeringInbox
    from latch.store import EventStore

    with serve_openai([Reply("First."), Reply("Steered.")]) as server:
        r = _run(tmp_path, ws, *RUN, server.base_url, "task")
        assert r.returncode == 0, r.stderr
        sid = _sid(tmp_path)
        store = EventStore(tmp_path / "latch.db")
        SteeringInbox(store, sid).submit("also check\nthe README")  # what latch web's steer does
        store.close()
        r = _run(tmp_path, ws, "run", "--resume", sid)  # a steering message is pending: there is something to send
    assert r.returncode == 0, r.stderr
    assert "steering delivered: also check the README\nSteered.\n" in r.stdout


def test_a_childs_lines_carry_its_name(tmp_path, ws):
    spawn = json.dumps({"brief": "Say hello.", "model": "gpt-4.1"})
    with serve_openai(
        [
            Reply(tool_calls=(ToolUse("p1", "spawn_agent", spawn),)),
            Reply("child says\nhello", usage=_usage(300)),
            Reply("Parent done.", usage=_usage(900)),
        ]
    ) as server:
        r = _run(tmp_path, ws, *RUN, server.base_url, "delegate", "--yes")
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(tmp_path / "latch.db") as db:
        (child,) = db.execute("SELECT id FROM sessions WHERE parent_id IS NOT NULL").fetchone()
    name = f"[child {child[:8]}]"
    assert f"{name} child says\n{name} hello\n{name} request 1 · " in r.stdout
    assert "\nParent done.\nrequest 2 · " in r.stdout


def test_the_status_line_fits_the_terminal_width(tmp_path, ws):
    with serve_openai([Reply("Hi.", usage=_usage(900)), Reply("Hi.", usage=_usage(900))]) as server:
        wide = _run(tmp_path, ws, *RUN, server.base_url, "hello")
        narrow = _run(tmp_path, ws, *RUN, server.base_url, "hello", COLUMNS="80")
    assert wide.returncode == 0 and narrow.returncode == 0, narrow.stderr
    full = next(line for line in wide.stdout.splitlines() if line.startswith("request 1 · "))
    assert re.fullmatch(
        r"request 1 · context \d+% of [\d,]+ · view [\d,]+ tokens \((exact|estimated)\) · epoch \d+ · provider "
        r"prompt 900 · cache read 0 · output 12 · cost \$0\.001896 \(run \$0\.001896\)",
        full,
    )
    short = next(line for line in narrow.stdout.splitlines() if line.startswith("request 1 · "))
    assert short == "request 1 · context 0% of 1,015,576 · cost $0.001896 (run $0.001896)"
    header = narrow.stdout.splitlines()[0]
    assert re.fullmatch(r"session [0-9a-f]{12} · openai gpt-4\.1 · sandbox (off|workspace-write)", header), header
