"""`make run`'s supervisor, run as `make run` runs it: on a fresh SQLite file
and a free port, the banner shows once the server answers, is kept in the
file it names, and the demo receiver's polling adds no lines."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from relayproject.devrun import BANNER_FILE, keep_line, stopped_within

pytestmark = pytest.mark.acceptance

START_SECONDS = 240  # migrate a fresh SQLite file, seed, start both processes
LINE_SECONDS = 30
READY = "webhook-relay demo is ready."
KEPT = "This text is kept in "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lines:
    """The supervisor's output, a line at a time, as it arrives."""

    def __init__(self, stream) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self._queue.put(line)

    def until(self, predicate, *, timeout: float = LINE_SECONDS) -> list[str]:
        """The lines up to and including the first that predicate() holds for."""
        got = []
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                seen = "".join(self.seen)
                raise AssertionError(f"no such line; got:\n{seen}") from None
            self.seen.append(line)
            got.append(line)
            if predicate(line):
                return got


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        response.read()
        return response.status


@pytest.fixture
def devrun(tmp_path):
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "DEBUG": "true",
        "RELAY_DEMO": "true",
        "RELAY_BASE_URL": f"http://127.0.0.1:{port}",
        "RELAY_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "relayproject.devrun", "127.0.0.1", str(port)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield process, Lines(process.stdout), f"http://127.0.0.1:{port}", tmp_path
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_make_run_shows_its_banner_once_up_keeps_it_and_hides_demo_polling(devrun):
    _process, lines, base, cwd = devrun
    before = lines.until(lambda line: READY in line, timeout=START_SECONDS)
    # The banner is shown only once the server answers: asked once, now.
    assert get(f"{base}/healthz") == 200
    assert not [line for line in before if "Applying " in line]
    assert [line for line in before if line.startswith("Database ready (")]
    banner = [before[-1], *lines.until(lambda line: KEPT in line)]
    kept = cwd / BANNER_FILE
    assert banner[-1].strip() == f"{KEPT}{kept}."
    assert kept.read_text() == "".join(banner)
    assert kept.stat().st_mode & 0o077 == 0  # it holds a key
    demo_page = re.search(r"Demo receiver:\s+(\S+)", kept.read_text()).group(1)
    for _ in range(3):
        assert get(demo_page) == 200
    assert get(f"{base}/static/demo/receiver.css") == 200
    # A request whose line is kept, after the polls: those come before it.
    assert get(f"{base}/portal/login/") == 200
    after = lines.until(lambda line: '"GET /portal/login/' in line)
    assert not [line for line in after if "/demo/receiver/" in line]
    assert not [line for line in after if "/static/" in line]


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ('[07/Dec/2026 14:31:06] "GET /demo/receiver/ep_1/ HTTP/1.1" 200 812', False),
        ('[07/Dec/2026 14:31:06] "GET /static/portal/site.css HTTP/1.1" 304 0', False),
        ('[07/Dec/2026 14:31:06] "POST /demo/receiver/ep_1/ HTTP/1.1" 200 2', True),
        ('[07/Dec/2026 14:31:06] "POST /api/v1/events HTTP/1.1" 202 310', True),
        ("Traceback (most recent call last):", True),
    ],
)
def test_only_polling_and_static_request_lines_are_left_out(line, kept):
    assert keep_line(line) is kept


def test_a_child_that_does_not_stop_is_killed_and_named(capsys):
    # Ignores SIGTERM, as a process hanging on its way out would.
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            " print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stubborn.stdout.readline() == "ready\n"
    stubborn.terminate()
    started = time.monotonic()

    stopped_within({"run_dispatcher": stubborn}, 1.0)

    assert stubborn.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 10
    assert "run_dispatcher did not stop within 1 s; killed" in capsys.readouterr().err
