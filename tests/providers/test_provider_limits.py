"""A model response has a deadline and a streaming idle timeout, enforced in the SDK providers' HTTP transport: a
loopback server whose stream goes idle, or trickles forever, makes ``complete`` raise one clear ProviderError in
bounded time, through the official SDKs; and ``latch run --idle-timeout`` / ``--response-timeout`` end such a run
with one line and a recorded ``run_ended`` error."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from fake_providers import Reply, serve_anthropic, serve_openai, serve_responses
from test_agent_run import _env, session_id

from latch.events import RunEnded
from latch.providers import AnthropicProvider, OpenAICompatibleProvider, OpenAIResponsesProvider, ProviderError
from latch.store import EventStore

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

WIRES = {
    "openai-compatible": (
        serve_openai,
        lambda url: OpenAICompatibleProvider("m", base_url=url),
        {"messages": [{"role": "user", "content": "hi"}]},
    ),
    "anthropic": (
        serve_anthropic,
        lambda url: AnthropicProvider("claude-x", base_url=url),
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64},
    ),
    "openai-responses": (
        serve_responses,
        lambda url: OpenAIResponsesProvider("m", base_url=url),
        {"input": [{"role": "user", "content": "hi"}]},
    ),
}


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_stream_gone_idle_fails_after_the_idle_timeout(wire):
    serve, make, body = WIRES[wire]
    with serve([Reply("a long answer that stops half way", stall=60)]) as server:
        provider = make(server.base_url)
        provider.limits.idle_seconds = 1.0
        start = time.monotonic()
        with pytest.raises(ProviderError, match=r"sent nothing for 1 s \(stream idle timeout") as err:
            provider.complete(body)
        took = time.monotonic() - start
    assert 0.9 < took < 10, took
    assert len(server.requests) == 1, "an idle stream is not retried"
    assert str(err.value).startswith(f"{provider.name}: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_stream_that_trickles_forever_fails_at_the_deadline(wire):
    serve, make, body = WIRES[wire]
    with serve([Reply("never done", trickle=0.2)]) as server:
        provider = make(server.base_url)
        provider.limits.deadline_seconds, provider.limits.idle_seconds = 2.0, 1.0
        start = time.monotonic()
        with pytest.raises(ProviderError, match=r"longer than its deadline of 2 s"):
            provider.complete(body)
        took = time.monotonic() - start
    assert 1.9 < took < 10, took


def test_the_limits_leave_a_normal_stream_alone_and_are_read_per_response():
    with serve_openai([Reply("fine", delay=0.5), Reply("fine again")]) as server:
        provider = OpenAICompatibleProvider("m", base_url=server.base_url)
        provider.limits.deadline_seconds, provider.limits.idle_seconds = 5.0, 2.0
        body = {"messages": [{"role": "user", "content": "hi"}]}
        assert provider.complete(body)["choices"][0]["message"]["content"] == "fine"
        assert provider.limits.remaining() is None  # outside a response nothing is pending
        provider.limits.idle_seconds = 0
        with pytest.raises(ProviderError, match="idle timeout must be a positive number of seconds"):
            provider.complete(body)


@pytest.mark.parametrize(
    "flags, reply, message",
    [
        (["--idle-timeout", "1"], Reply("stops", stall=60), "sent nothing for 1 s"),
        (
            ["--response-timeout", "2", "--idle-timeout", "1"],
            Reply("never ends", trickle=0.2),
            "longer than its deadline of 2 s",
        ),
    ],
    ids=["idle", "deadline"],
)
def test_latch_run_ends_on_a_response_that_never_ends(tmp_path, flags, reply, message):
    ws = tmp_path / "ws"
    ws.mkdir()
    with serve_openai([reply]) as server:
        start = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "latch",
                "--db",
                str(tmp_path / "latch.db"),
                "run",
                "say hi",
                "--provider",
                "openai-compatible",
                "--model",
                "m",
                "--base-url",
                server.base_url,
                *flags,
            ],
            cwd=ws,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - start
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr, done.stderr[-800:]
    assert took < 60
    with EventStore(tmp_path / "latch.db") as store:
        (ended,) = [s.event for s in store.events(session_id(tmp_path)) if isinstance(s.event, RunEnded)]
    assert ended.outcome == "error" and message in ended.detail


def test_a_bad_limit_in_the_config_is_one_line(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('[provider]\nidle_timeout = "soon"\n')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "latch",
            "--db",
            str(tmp_path / "latch.db"),
            "run",
            "say hi",
            "--provider",
            "openai-compatible",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        cwd=ws,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "idle_timeout must be a positive number of seconds" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_oversized_tool_call_argument_becomes_an_error_result_not_a_dead_session(tmp_path):
    import json

    from fake_providers import ToolUse

    from latch.events import AssistantMessage, ToolResult

    ws = tmp_path / "ws"
    ws.mkdir()
    big = json.dumps({"path": "big.txt", "content": "x" * (2 << 20)})  # a 2 MiB argument
    db = tmp_path / "latch.db"
    args = ["--provider", "openai-compatible", "--model", "m", "--yes", "--sandbox", "off"]
    with serve_openai(
        [
            Reply(tool_calls=(ToolUse("c1", "write_file", big),), chunk=65536),
            Reply("I will write it in parts."),
            Reply("Resumed fine."),
        ]
    ) as server:
        first = subprocess.run(
            [
                sys.executable,
                "-m",
                "latch",
                "--db",
                str(db),
                "run",
                "write a big file",
                *args,
                "--base-url",
                server.base_url,
            ],
            cwd=ws,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert first.returncode == 0, first.stderr[-800:] + first.stdout[-800:]
        sid = session_id(tmp_path)
        again = subprocess.run(
            [
                sys.executable,
                "-m",
                "latch",
                "--db",
                str(db),
                "run",
                "--resume",
                sid,
                "go on",
                "--base-url",
                server.base_url,
            ],
            cwd=ws,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 0, again.stderr[-800:] + again.stdout[-800:]
        second = json.dumps(server.requests[1].body)
    assert not (ws / "big.txt").exists(), "a call with oversized arguments is never run"
    assert len(second) < 100_000 and "oversized_arguments" in second and "not run: the arguments" in second
    with EventStore(db) as store:
        events = [s.event for s in store.events(sid)]
        (call,) = [c for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls]
        (result,) = [e for e in events if isinstance(e, ToolResult)]
        stored = json.loads(call.arguments)["oversized_arguments"]
        assert store.get_artifact(stored["sha256"])[1] == big.encode()  # nothing is lost
    assert stored["bytes"] == len(big) and result.is_error and result.call_id == "c1"
