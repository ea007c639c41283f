"""A real PostgreSQL server for tests: Debian's ``postgresql``, a temporary cluster per test session.

* :func:`pg_bin` finds ``initdb``/``pg_ctl`` (``PATH``, else the newest ``/usr/lib/postgresql/*/bin``).
* :func:`require_postgres` skips with the reason when the server programs or psycopg are missing, and fails
  instead when ``CI`` is set (``.ci/run`` installs both).
* :class:`PostgresCluster` runs ``initdb`` (as the ``postgres`` user through ``runuser`` when this process is
  root: initdb refuses root) into a temporary folder, starts it with ``pg_ctl`` on a free loopback port and its
  own socket folder (``fsync=off``: a test cluster), and stops it and removes the folder at the end.
* fixtures: ``pg_cluster`` (session-scoped: one server) and ``pg_url`` (a new empty store per test: a schema
  of the ``latch`` database, ``postgresql://postgres@127.0.0.1:PORT/latch?options=-csearch_path%3DtN``).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def pg_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or ``None``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent if Path(found).resolve().name == "initdb" else Path(found).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda f: int(f.split("/")[-2]), reverse=True):
        if os.access(os.path.join(folder, "initdb"), os.X_OK):
            return Path(folder)
    return None


def missing_reason() -> str | None:
    """Why no test cluster can start here, or ``None``."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'latch-context[postgres]')"
    if pg_bin() is None:
        return "PostgreSQL's initdb/pg_ctl are not installed (apt-get install postgresql)"
    if os.geteuid() == 0 and (shutil.which("runuser") is None or _uid("postgres") is None):
        return "running as root needs the postgres user and runuser (initdb refuses root)"
    return None


def _uid(name: str) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def require_postgres() -> None:
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL tests cannot run on CI: {reason}")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """A temporary PostgreSQL cluster (see the module); :meth:`url` of a database, :meth:`new_database`."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        assert self.bin is not None
        self.root = Path(tempfile.mkdtemp(prefix="latch-pg-"))
        self.data, self.sockets = self.root / "data", self.root / "sockets"
        self.sockets.mkdir()
        self.port = _free_port()
        self._names = itertools.count(1)
        uid = _uid("postgres") if os.geteuid() == 0 else None
        if uid is not None:
            for p in (self.root, self.sockets):
                os.chown(p, uid, -1)
        self._as = ["runuser", "-u", "postgres", "--"] if uid is not None else []
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )
        self.start()
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE latch TEMPLATE template0")

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run([*self._as, *cmd], capture_output=True, text=True, cwd=self.root, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(cmd[0]).name} failed ({done.returncode}): {done.stderr.strip()[-800:]}")

    def start(self) -> None:
        self._run(
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                "start",
            ]
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``mode``: pg_ctl's ``fast`` disconnects clients and checkpoints; ``immediate`` does not)."""
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new empty store namespace: a new schema of the cluster's ``latch`` database, named in the
        URL's ``search_path`` (creating a database per test costs about a second here, and removing them all
        tens of seconds)."""
        import psycopg

        name = f"t{next(self._names)}"
        with psycopg.connect(self.url("latch"), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return self.url("latch") + f"?options=-csearch_path%3D{name}"

    def close(self) -> None:
        try:
            self.stop("immediate")  # its data is thrown away: no shutdown checkpoint to wait for
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    require_postgres()
    cluster = PostgresCluster()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def pg_url(pg_cluster: PostgresCluster) -> str:
    return pg_cluster.new_database()


def wait_for(predicate, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
