"""Real `manage.py run_dispatcher` processes against the test database.

A child gets the test database's URL as DATABASE_URL and no TEST_DATABASE_URL
(settings prefer it, and it names the server's default database, not the
test one), so it works on exactly the rows the test made.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from tests.support import factories

ROOT = Path(__file__).resolve().parents[2]
POLL_SECONDS = 0.05  # how often a test looks at the database while it waits


def dispatcher_database_url(*, host: str | None = None, port: int | None = None) -> str:
    db = connection.settings_dict
    credentials = quote(db["USER"] or "")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"])
    return (
        f"postgres://{credentials}@{host or db['HOST'] or '127.0.0.1'}:"
        f"{port or db['PORT'] or 5432}/{db['NAME']}"
    )


def child_env(*, database_url: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TEST_DATABASE_URL", None)
    env.pop("TEST_DATABASE_NAME", None)
    env.update(
        DATABASE_URL=database_url or dispatcher_database_url(),
        RELAY_ALLOW_PRIVATE_DESTINATIONS="true",
        PYTHONUNBUFFERED="1",
    )
    return env


class DispatcherProcess:
    """One `run_dispatcher` child; its stdout and stderr go to files, never a pipe
    (a full pipe would block a chatty child)."""

    def __init__(
        self,
        args: list[str],
        *,
        env: dict[str, str],
        logs: Path,
        wrap: Sequence[str] = (),
    ) -> None:
        self.args = args
        self._stdout = logs.with_suffix(".out")
        self._stderr = logs.with_suffix(".err")
        with self._stdout.open("wb") as out, self._stderr.open("wb") as err:
            self.popen = subprocess.Popen(
                # wrap: a command that execs the rest (same pid, same signals).
                [*wrap, sys.executable, "manage.py", "run_dispatcher", *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=err,
            )

    @property
    def stdout(self) -> str:
        return self._stdout.read_text()

    @property
    def stderr(self) -> str:
        return self._stderr.read_text()

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            raise AssertionError(
                f"run_dispatcher {self.args} still running after {timeout}s\n"
                f"{self.stderr[-3000:]}"
            ) from None

    def signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is recorded or given back."""
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()

    @property
    def running(self) -> bool:
        return self.popen.poll() is None


class Dispatchers:
    """Starts dispatcher children for one test and kills any left at teardown."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[DispatcherProcess] = []

    def start(
        self,
        *args: str,
        database_url: str | None = None,
        env: dict[str, str] | None = None,
        wrap: Sequence[str] = (),
    ) -> DispatcherProcess:
        """A child with the test's database; env adds or overrides settings,
        wrap is a command prefix that execs the dispatcher."""
        process = DispatcherProcess(
            list(args),
            env={**child_env(database_url=database_url), **(env or {})},
            logs=self.logs / f"dispatcher-{len(self.started)}",
            wrap=wrap,
        )
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in self.started:
            if process.running:
                process.kill()


def wait_until(predicate: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll (usually the database) until predicate() holds, or fail after timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_SECONDS)


def publish_fan_out(*, url: str, events: int, endpoints: int) -> list[str]:
    """events x endpoints deliveries, published in one transaction; their ids."""
    merchant = factories.merchant()
    for _ in range(endpoints):
        factories.endpoint(merchant, url=url)
    events_publish(
        merchant=merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(events)],
    )
    return list(Delivery.objects.values_list("id", flat=True))


def received_per_delivery(receiver) -> Counter:
    return Counter(r.headers["X-Relay-Delivery-Id"] for r in receiver.received)


def unfinished() -> int:
    """Rows still pending or delivering: in the end there must be none."""
    return Delivery.objects.filter(status__in=["pending", "delivering"]).count()
