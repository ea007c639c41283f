"""The ``latch`` process ends like other CLI tools (found again by a new-user trial): Ctrl-C
exits 130 with "Aborted!" (it exited 1), a reader that closes the pipe early (``latch show S | head -1``) is not
an error (exit 0, nothing on stderr), and ordinary errors keep their codes (usage 2, a failed command 1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from corpus_support import REPO

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

EXAMPLE = str(REPO / "examples" / "invoice-rounding.claude.jsonl")
LATCH = [sys.executable, "-c", "from latch.cli import main; main()"]


def _env(tmp_path):
    return {**os.environ, "LATCH_HOME": str(tmp_path / "home"), "LATCH_DB": str(tmp_path / "l.db")}


def test_ctrl_c_exits_130(tmp_path):
    env = _env(tmp_path)
    # a replay long enough to interrupt: the generated stress run of 60,000 events takes several seconds
    proc = subprocess.Popen(
        [*LATCH, "stress", "--events", "60000", "--inline"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err[-500:])
    assert "Aborted!" in err and "Traceback" not in err


def test_closed_pipe_is_not_an_error(tmp_path):
    env = _env(tmp_path)
    done = subprocess.run([*LATCH, "import", EXAMPLE], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    sid = done.stdout.split("session ")[1].split()[0]
    proc = subprocess.Popen(
        [*LATCH, "show", sid], env={**env, "COLUMNS": "80"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err


def test_error_codes_are_kept(tmp_path):
    env = _env(tmp_path)
    assert subprocess.run([*LATCH, "replay", EXAMPLE, "--window", "x"], env=env, capture_output=True).returncode == 2
    assert subprocess.run([*LATCH, "show", "nope"], env=env, capture_output=True).returncode == 1
    assert subprocess.run([*LATCH, "sessions"], env=env, capture_output=True).returncode == 0
