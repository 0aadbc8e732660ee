"""The dispatchers' maintenance step for notifications: once per
OPERATIONAL_CHECK_SECONDS across all dispatchers, check the endpoints and the
dead letters; then send the queued emails on a thread of their own."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Q

from deliveries.notifications.certificates import certificates_warn
from deliveries.notifications.deadletters import (
    dead_letters_announce,
    dead_letters_collect,
)
from deliveries.notifications.mail import outbox_drain
from deliveries.notifications.models import MaintenanceSlot
from deliveries.notifications.watch import WatchReport, watch_run
from relayproject.lib.clock import utcnow

logger = logging.getLogger(__name__)

CHECK_SLOT = "endpoint-check"
LOCAL_PROBE_SECONDS = 5.0  # how often one dispatcher asks whether the slot is free


@dataclass
class CheckReport:
    watch: WatchReport
    dead_letters_seen: int
    dead_announced: list[str]
    certificates_warned: list[str] = field(default_factory=list)


def slot_take(*, name: str, now: datetime, every: timedelta) -> bool:
    """True for exactly one caller per `every`, across all processes.

    One conditional UPDATE: on PostgreSQL a second caller waits on the row,
    then re-checks the condition against the winner's committed time.
    """
    MaintenanceSlot.objects.bulk_create(
        [MaintenanceSlot(name=name)], ignore_conflicts=True
    )
    due = Q(last_run_at__isnull=True) | Q(last_run_at__lte=now - every)
    return bool(MaintenanceSlot.objects.filter(due, name=name).update(last_run_at=now))


def check_run(*, now: datetime, force: bool = False) -> CheckReport | None:
    """Run the check if this process wins the slot (or force); None if it did not."""
    every = timedelta(seconds=settings.OPERATIONAL_CHECK_SECONDS)
    if not force and not slot_take(name=CHECK_SLOT, now=now, every=every):
        return None
    watch = watch_run(now=now)
    seen = dead_letters_collect(now=now)
    announced = dead_letters_announce(now=now)
    certificates = certificates_warn(now=now)
    # Once a minute across all dispatchers: the line also says which one ran it.
    logger.info(
        "endpoint check: looked at %d, said %s, auto-disabled %s, "
        "dead-letter events for %s, expiring certificates of %s",
        watch.looked_at,
        [f"{t} {e}" for t, e in watch.said],
        watch.disabled,
        announced,
        certificates,
    )
    return CheckReport(
        watch=watch,
        dead_letters_seen=seen,
        dead_announced=announced,
        certificates_warned=certificates,
    )


class Mailer:
    """Sends the outbox on a daemon thread; kick() starts it if it is not running."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def kick(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._drain, name="mailer", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _drain(self) -> None:
        try:
            outbox_drain(now=utcnow)
        except Exception:
            logger.exception("sending the email outbox failed; it is retried later")
        finally:
            connection.close()  # this thread's own connection


class OperationalCheck:
    """maintenance(now) for a dispatcher: cheap to call on every idle loop."""

    def __init__(self, mailer: Mailer | None = None) -> None:
        self.mailer = mailer or Mailer()
        self._next = 0.0

    def __call__(self, now: datetime) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + min(
            LOCAL_PROBE_SECONDS, settings.OPERATIONAL_CHECK_SECONDS
        )
        try:
            report = check_run(now=now)
        except (OperationalError, InterfaceError):
            raise  # the database is away: the dispatcher logs it and reconnects
        except Exception:
            # A bug here must not stop deliveries: log it, try next time.
            logger.exception("endpoint check failed")
            return
        if report is not None:
            self.mailer.kick()
