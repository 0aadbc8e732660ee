"""The client library's `listen` as a real process, and a local receiver that
checks every webhook it forwards with the standardwebhooks package.

The process is `python -m webhook_relay_client listen` with the client from
client/src, as a developer runs it; its stdout is read line by line by a
thread (never left to fill a pipe), so a test waits for a line the way a
person watches the terminal.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from standardwebhooks import Webhook, WebhookVerificationError

from tests.support.fakes import Received, Reply

ROOT = Path(__file__).resolve().parents[2]
CLIENT_SRC = ROOT / "client" / "src"
SECRET_LINE = re.compile(r"^Signing secret: (whsec_\S+)")
SESSION_LINE = re.compile(r"^Listen session (\S+) started")


@dataclass
class Checked:
    """One webhook as the receiver saw it."""

    webhook_id: str
    attempt: int
    verified: bool
    status: int


class VerifyingResponder:
    """A fakes.Receiver `respond`: verifies each webhook with the secret
    `listen` printed (400 when it does not verify) and answers `failing` for
    the first attempt of a webhook, 204 otherwise. `hold`, when given, keeps
    each answer back until it is set (a handler still working)."""

    def __init__(self, *, failing: int | None = None) -> None:
        self.secret = ""
        self.failing = failing
        self.hold: threading.Event | None = None
        self.arrived = threading.Event()  # set as each request comes in
        self.checked: list[Checked] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, request: Received) -> Reply:
        self.arrived.set()
        try:
            Webhook(self.secret).verify(request.body, request.headers)
            verified = True
        except WebhookVerificationError:
            verified = False
        headers = {name.lower(): value for name, value in request.headers.items()}
        webhook_id = headers.get("webhook-id", "")
        with self._lock:
            first = webhook_id not in self._seen
            self._seen.add(webhook_id)
        status = 400 if not verified else 204
        if verified and first and self.failing:
            status = self.failing
        if self.hold is not None:
            self.hold.wait(timeout=30)
        with self._lock:
            self.checked.append(
                Checked(
                    webhook_id,
                    int(headers.get("x-relay-attempt", "0")),
                    verified,
                    status,
                )
            )
        return Reply(status=status, body=b"")


class ListenProcess:
    """`webhook-relay-client listen` running against a relay; killed at close()."""

    def __init__(
        self,
        *,
        relay_url: str,
        api_key: str,
        merchant: str,
        forward_to: str,
        args: tuple[str, ...] = (),
        stderr: Path,
    ) -> None:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("TEST_DATABASE", "DATABASE_URL", "WEBHOOK_RELAY_"))
        }
        # The key from the environment, as the README advises: not in argv.
        env.update(
            PYTHONPATH=str(CLIENT_SRC),
            PYTHONUNBUFFERED="1",
            WEBHOOK_RELAY_API_KEY=api_key,
        )
        self.stderr_path = stderr
        self.lines: list[str] = []
        self._changed = threading.Condition()
        with stderr.open("wb") as err:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "webhook_relay_client",
                    "listen",
                    "--url",
                    relay_url,
                    "--merchant",
                    merchant,
                    "--forward-to",
                    forward_to,
                    *args,
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_for_line(self, pattern: str, *, timeout: float = 15.0) -> re.Match:
        """The first line matching `pattern` (re.search), waiting for it."""
        compiled = re.compile(pattern)
        found: list[re.Match] = []

        def seen() -> bool:
            found[:] = [m for m in map(compiled.search, self.lines) if m][:1]
            return bool(found) or self.popen.poll() is not None

        with self._changed:
            self._changed.wait_for(seen, timeout=timeout)
        if not found:
            raise AssertionError(
                f"listen printed no line matching {pattern!r} "
                f"(exit {self.popen.poll()}):\n"
                + "\n".join(self.lines)
                + f"\nstderr:\n{self.stderr}"
            )
        return found[0]

    def started(self) -> tuple[str, str]:
        """Wait for the session: its id and the signing secret printed once."""
        session_id = self.wait_for_line(SESSION_LINE.pattern).group(1)
        secret = self.wait_for_line(SECRET_LINE.pattern).group(1)
        self.wait_for_line("^Forwarding to ")
        return session_id, secret

    def signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait(self, timeout: float = 15.0) -> int:
        code = self.popen.wait(timeout)
        self._reader.join(timeout)
        return code

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()
        self._reader.join(5)
