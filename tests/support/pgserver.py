"""A PostgreSQL server of a test's own, to crash: the shared one (127.0.0.1:5432)
serves every other test run on the machine, so a test that kills the server
mid-commit gets its own cluster, made by initdb in a temporary folder.

Its WAL writer wakes only every 10 s and is never kicked early by the amount
of WAL waiting (wal_writer_flush_after is huge): a commit made with
synchronous_commit off stays in shared memory, unwritten, until the next
durable commit of any session or that wake-up. An immediate stop (SIGQUIT to
every backend, no shutdown checkpoint: what a crash of the server leaves)
then loses it, which the shared server's defaults (200 ms) would make a
matter of luck. A durable commit is written before it is acknowledged, so it
survives the stop.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

from tests.support.processes import wait_until

_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "wal_writer_delay": "10s",
    "wal_writer_flush_after": "1GB",
    "autovacuum": "off",  # no background commit between the test's steps
    "max_connections": "40",
    "shared_buffers": "32MB",
}


def _bin(name: str) -> str:
    (version,) = [p.name for p in Path("/usr/lib/postgresql").iterdir()]
    return f"/usr/lib/postgresql/{version}/bin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateServer:
    """initdb, start, crash (an immediate stop), start again, remove."""

    def __init__(self) -> None:
        # Not under pytest's tmp_path: the server runs as postgres when the
        # test runs as root, and root's pytest folders are closed to others.
        self.root = Path(tempfile.mkdtemp(prefix="relay-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as_owner: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            shutil.chown(self.root, "postgres", "postgres")
            self._as_owner = ["runuser", "-u", "postgres", "--"]
        self._run(
            _bin("initdb"),
            "--auth=trust",
            "--username=postgres",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
            "-D",
            str(self.data),
        )
        self.start()
        self._run(_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "relay")

    def url(self, database: str = "relay") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = " ".join(f"-c {k}={v}" for k, v in _SETTINGS.items())
        options += f" -c port={self.port} -c unix_socket_directories={self.root}"
        self._run(
            _bin("pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )
        wait_until(self._accepts, timeout=30, what="the private server to accept")

    def crash(self) -> None:
        """Stop as a crash does: no checkpoint, no WAL written on the way out."""
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")

    def copy_database(self, url: str) -> None:
        """Schema and rows of the database at `url` (the test's), into ours."""
        dump = subprocess.run(
            ["pg_dump", "--no-owner", "--no-privileges", url],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", self.url()],
            input=dump.stdout,
            check=True,
            capture_output=True,
            timeout=120,
        )

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """On a fresh session (the last one may have died with the server)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.crash()
        shutil.rmtree(self.root, ignore_errors=True)

    def _accepts(self) -> bool:
        try:
            psycopg.connect(self.url("postgres"), connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self._as_owner, *args], check=True, capture_output=True, timeout=120
        )
