"""A real uvicorn server for latch.ui.web.app in a thread, and a small SSE reader."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import uvicorn

from latch.ui.web.app import create_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebServer:
    """``latch web``'s app on 127.0.0.1:``port`` in a daemon thread; :meth:`restart` keeps the port."""

    def __init__(self, db, *, token: str | None = None, port: int | None = None):
        self.db, self.token, self.port = db, token, port or free_port()
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> WebServer:
        app = create_app(self.db, token=self.token, poll_interval=0.05, retry_ms=200)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the web server did not start"
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        assert self.server is not None and self.thread is not None
        self.server.should_exit = True
        self.thread.join(15)
        assert not self.thread.is_alive(), "the web server did not stop"
        self.server.config.app.state.store.close() if hasattr(self.server.config.app, "state") else None

    def restart(self) -> None:
        self.stop()
        self.start()


def read_sse(
    client: httpx.Client,
    url: str,
    *,
    want: int,
    headers: dict | None = None,
    timeout: float = 10.0,
    then_status: bool = False,
) -> list[dict]:
    """The first messages of the stream at ``url`` until ``want`` of them carry an ``id`` (and, with
    ``then_status``, a ``status`` message follows), or the timeout: ``[{"event", "id", "data"}]`` with
    ``data`` decoded from JSON."""
    messages: list[dict] = []
    current: dict = {}
    deadline = time.monotonic() + timeout
    with client.stream("GET", url, headers=headers or {}, timeout=timeout) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line == "":
                if "data" in current:
                    current["data"] = json.loads(current["data"])
                    messages.append(current)
                current = {}
                done = sum(1 for m in messages if "id" in m) >= want
                if then_status:
                    done = done and bool(messages) and messages[-1].get("event") == "status"
                if done or time.monotonic() > deadline:
                    break
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field in ("event", "id", "data", "retry"):
                current[field] = value if field != "data" else current.get("data", "") + value
    return messages
