"""``latch.hotpaths`` chooses its backend at first use: a bad ``LATCH_IMPL`` never breaks an import,
and the first hot-path call (or ``BACKEND``) raises one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LATCH = [sys.executable, "-c", "from latch.cli import main; main()"]
BAD = "LATCH_IMPL must be auto, native or python, not 'fast'"


def _run(code: str, impl: str = "fast") -> subprocess.CompletedProcess:
    env = {**os.environ, "LATCH_IMPL": impl}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_a_bad_latch_impl_does_not_break_imports():
    code = (
        "import latch.hotpaths as h, latch.engine, latch.kernel, latch.estimators, latch.cli, latch.host.session\n"
        "print(h.IMPL); print(h.backend_error())"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["fast", BAD]


def test_every_hot_path_raises_one_clear_line_at_first_use():
    code = """
import latch.hotpaths as h
for name, call in [("estimate_tokens", lambda: h.estimate_tokens("x")),
                   ("estimate_tokens_batch", lambda: h.estimate_tokens_batch(["x"])),
                   ("suffix_start", lambda: h.suffix_start([0, 1], 1)),
                   ("score_episodes", lambda: h.score_episodes),
                   ("BACKEND", lambda: h.BACKEND),
                   ("again", lambda: h.estimate_tokens("x"))]:
    try:
        call()
    except ValueError as exc:
        assert isinstance(exc, ImportError) and isinstance(exc, h.BackendError)
        print(name, exc)
    else:
        print(name, "no error")
"""
    out = _run(code)
    assert out.returncode == 0, out.stderr
    names = ["estimate_tokens", "estimate_tokens_batch", "suffix_start", "score_episodes", "BACKEND", "again"]
    assert out.stdout.splitlines() == [f"{n} {BAD}" for n in names]


def test_a_good_latch_impl_binds_plain_functions():
    out = _run(
        "import latch.hotpaths as h; print(h.backend_error(), h.BACKEND, h.estimate_tokens('hello world'))",
        impl="python",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["None", "python"] and int(out.stdout.split()[2]) > 0


def _latch(tmp_path, *args):
    env = {**os.environ, "LATCH_IMPL": "fast", "LATCH_HOME": str(tmp_path), "COLUMNS": "200"}
    return subprocess.run([*LATCH, *args], env=env, capture_output=True, text=True, cwd=ROOT)


def test_latch_doctor_reports_a_bad_latch_impl_without_a_traceback(tmp_path):
    out = _latch(tmp_path, "doctor")
    assert out.returncode == 1
    assert f"hot-path backend  unavailable: {BAD}" in out.stdout
    assert out.stderr == ""


def test_latch_replay_stops_with_one_line_on_a_bad_latch_impl(tmp_path):
    out = _latch(tmp_path, "replay", "examples/invoice-rounding.claude.jsonl")
    assert out.returncode == 1
    assert out.stderr == f"Error: the hot-path backend cannot load: {BAD} (see `latch doctor`)\n"
    assert "Traceback" not in out.stdout and out.stdout == ""


def _kernel_run(kernel: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LATCH_IMPL": "auto", "LATCH_NATIVE_KERNEL": kernel}
    code = "import latch.hotpaths as h; print(h.backend_error()); print(h.estimate_tokens('hello world'))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_an_unknown_native_kernel_is_refused_in_one_line():
    pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")
    out = _kernel_run("Scalar")
    assert out.returncode != 0
    assert out.stdout.splitlines()[0] == "LATCH_NATIVE_KERNEL must be scalar or avx2 (or unset), not 'Scalar'"
    assert out.stderr.strip().splitlines()[-1] == (
        "latch.hotpaths.BackendError: LATCH_NATIVE_KERNEL must be scalar or avx2 (or unset), not 'Scalar'"
    )


def test_a_known_native_kernel_runs_or_is_refused_when_the_cpu_lacks_it():
    native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")
    if os.environ.get("LATCH_NATIVE_KERNEL"):
        pytest.skip("LATCH_NATIVE_KERNEL chose this process's kernel, so it does not tell what the CPU runs")
    scalar = _kernel_run("scalar")
    assert scalar.returncode == 0, scalar.stderr
    assert scalar.stdout.split()[0] == "None"
    avx2 = _kernel_run("avx2")
    if native.ESTIMATOR_KERNEL in ("avx2", "avx512"):
        assert avx2.returncode == 0, avx2.stderr
        assert avx2.stdout.split() == scalar.stdout.split()
    else:
        assert avx2.stdout.splitlines()[0] == (
            "LATCH_NATIVE_KERNEL=avx2 but this CPU cannot run it (the estimator runs scalar): unset it"
        )
