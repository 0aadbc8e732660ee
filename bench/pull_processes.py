"""The processes of bench/pull_bench.py: gunicorn, the consumers
(bench/pull_consumer.py), and what they cost in CPU, read from /proc.

Each waits for its process to be ready (an answer, a "ready" line, a
heartbeat) rather than for a while, and each can be stopped from a
`finally`, so a failed run leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

from bench import deliveries_bench as relay_bench

HERE = Path(__file__).resolve().parent
READY_SECONDS = 30.0  # a consumer or server that has not started by then has failed


def server_env(db_url: str) -> dict[str, str]:
    env = relay_bench.dispatcher_env(db_url)
    env.update(SECURE_SSL_REDIRECT="false", LOG_LEVEL="WARNING")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebServer:
    """gunicorn with `workers` sync workers on a free loopback port."""

    def __init__(self, *, workers: int, db_url: str) -> None:
        self.workers = workers
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        relay_bench.OUT.mkdir(exist_ok=True)
        self.log = open(relay_bench.OUT / f"pull-gunicorn-{workers}.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [relay_bench.PYTHON, "-m", "gunicorn", "relayproject.wsgi"]
            + ["--bind", f"127.0.0.1:{port}", "--workers", str(workers)]
            + ["--log-level", "warning", "--no-control-socket"],
            cwd=relay_bench.ROOT,
            env=server_env(db_url),
            stdout=self.log,
            stderr=self.log,
        )
        deadline = time.monotonic() + READY_SECONDS
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"gunicorn did not serve; see {self.log.name}")
            time.sleep(0.1)  # polling a starting server

    def _answers(self) -> bool:
        try:
            return requests.get(f"{self.base}/healthz", timeout=2).ok
        except requests.RequestException:
            return False

    def worker_pids(self) -> list[int]:
        return [
            int(p)
            for p in Path(f"/proc/{self.proc.pid}/task")
            .joinpath(str(self.proc.pid), "children")
            .read_text()
            .split()
        ]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Consumer:
    """bench/pull_consumer.py, connected and waiting for its "go"."""

    def __init__(
        self, *, base: str, key: str, endpoint: str, secret: str, limit: int
    ) -> None:
        self.proc = subprocess.Popen(
            [relay_bench.PYTHON, str(HERE / "pull_consumer.py")]
            + ["--base", base, "--key", key, "--merchant", "bench"]
            + ["--endpoint", endpoint, "--secret", secret, "--limit", str(limit)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        with selectors.DefaultSelector() as waiting:
            waiting.register(self.proc.stdout, selectors.EVENT_READ)
            line = self.proc.stdout.readline() if waiting.select(READY_SECONDS) else ""
        if line.strip() != "ready":
            self.proc.kill()
            raise RuntimeError(f"a consumer did not start: {line!r}")

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float) -> dict | None:
        try:
            out, _ = self.proc.communicate(input="", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return None
        return json.loads(out) if self.proc.returncode == 0 and out else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def cpu_of(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds so far of each of these processes still alive."""
    tick = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / tick
    return seconds


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings: a process new since `before` counts
    from its start; one gone by `after` is left out (its last part unknown)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def backend_pids(db_url: str) -> list[int]:
    """The PostgreSQL backends serving the bench database (not this process's)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s"
            " AND pid <> pg_backend_pid()",
            [db_url.rsplit("/", 1)[1]],
        )
        return [row[0] for row in cursor.fetchall()]


def dispatcher_wait(proc: subprocess.Popen) -> None:
    """Until the dispatcher beats (bench-0: start_dispatchers' first id), so
    that it runs through the whole drain and stops on SIGTERM, not mid-start."""
    from deliveries.models import DispatcherHeartbeat

    deadline = time.monotonic() + READY_SECONDS
    while not DispatcherHeartbeat.objects.filter(worker_id="bench-0").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the dispatcher did not start; see bench/out")
        time.sleep(0.1)  # polling a starting process
