"""``latch doctor``: the facts it reports are the ones this process actually runs on."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

import latch
from latch import hotpaths
from latch.cli import cli, doctor
from latch.estimators import cabi
from latch.store import data_dir, default_db_path

doctor.register(cli)


def _doctor(*args, env=None):
    return CliRunner().invoke(cli, ["doctor", *args], env=env, catch_exceptions=False)


def test_doctor_json_reports_this_installation(tmp_path):
    res = _doctor("--json", env={"LATCH_HOME": str(tmp_path)})
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["latch"] == latch.__version__
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    assert info["sqlite"] == sqlite3.sqlite_version
    assert info["fts5"] is True
    assert (info["backend"], info["impl"], info["backend_error"]) == (hotpaths.BACKEND, hotpaths.IMPL, None)
    assert info["data_dir"] == str(tmp_path)
    assert data_dir() != tmp_path  # the env override was local to the invocation
    assert data_dir().is_relative_to(os.environ["XDG_DATA_HOME"])  # conftest: never the user's own folder
    assert info["db"].startswith(str(tmp_path / "workspaces"))
    lib = cabi.default_library_path()
    assert info["native_library"] == (str(lib) if lib else None)
    if hotpaths.BACKEND == "native":
        from latch import _native

        assert info["native_module"] == _native.__file__
        assert info["abi_version"] == 1
        assert info["estimator_kernel"] == _native.ESTIMATOR_KERNEL in ("avx512", "avx2", "scalar")


def test_doctor_db_option_and_table(tmp_path):
    db = tmp_path / "x.db"
    res = CliRunner().invoke(cli, ["--db", str(db), "doctor"], env={"LATCH_HOME": str(tmp_path), "COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert "hot-path backend" in res.output and f"{hotpaths.BACKEND} (LATCH_IMPL={hotpaths.IMPL})" in res.output
    assert f"database          {db}" in res.output
    assert default_db_path() != db


def test_doctor_reports_a_backend_that_cannot_load():
    # In a fresh process: LATCH_IMPL is read once, when latch.hotpaths is first imported.
    env = {**os.environ, "LATCH_IMPL": "turbo"}
    code = "import json; from latch.cli.doctor import diagnose; print(json.dumps(diagnose()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["backend"] is None and info["native_library"] is None
    assert "LATCH_IMPL must be auto, native or python, not 'turbo'" in info["backend_error"]
    assert info["fts5"] is True


LATCH = [sys.executable, "-c", "from latch.cli import main; main()"]
BAD_IMPL = "LATCH_IMPL must be auto, native or python, not 'turbo'"


def _latch_with_bad_impl(tmp_path, *args):
    env = {**os.environ, "LATCH_IMPL": "turbo", "LATCH_HOME": str(tmp_path), "COLUMNS": "200"}
    return subprocess.run([*LATCH, *args], env=env, capture_output=True, text=True, cwd=tmp_path)


@pytest.mark.slow  # left out of the fast tier: latch processes
def test_doctor_exits_1_when_the_backend_cannot_load(tmp_path):
    out = _latch_with_bad_impl(tmp_path, "doctor")
    assert out.returncode == 1
    assert f"hot-path backend  unavailable: {BAD_IMPL}" in out.stdout
    assert "fts5              yes" in out.stdout
    assert out.stderr == ""  # no traceback, no plugin warning: the report says it all
    out = _latch_with_bad_impl(tmp_path, "doctor", "--json")
    assert out.returncode == 1 and json.loads(out.stdout)["backend_error"] == BAD_IMPL


@pytest.mark.slow  # left out of the fast tier: latch processes
def test_every_other_command_stops_with_one_line_when_the_backend_cannot_load(tmp_path):
    transcript = tmp_path / "chat.json"
    transcript.write_text('{"messages": [{"role": "user", "content": "hi"}]}', encoding="utf-8")
    for args in (["replay", str(transcript)], ["context", "abc"], ["sessions"], ["plugins"]):
        out = _latch_with_bad_impl(tmp_path, *args)
        assert out.returncode == 1, args
        assert out.stderr == f"Error: the hot-path backend cannot load: {BAD_IMPL} (see `latch doctor`)\n", args
        assert out.stdout == ""
