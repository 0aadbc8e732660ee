"""The dispatcher's heartbeat: one row per process, touched every few seconds.

Pipeline health, `relay_status --check` and /metrics read these rows to tell
a dispatcher that stopped (crashed, hung, lost its host) from one that is
merely idle: an idle dispatcher still runs its maintenance step.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import datetime, timedelta

from django.db import DatabaseError

from deliveries.models import DispatcherHeartbeat

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY_SECONDS = 10.0
# Three missed beats and a margin for a long flush: then it is stale.
STALE_AFTER = timedelta(seconds=60)
# A stale row is shown for a day, then forgotten (staff may delete it sooner).
FORGET_AFTER = timedelta(hours=24)


class Heartbeat:
    """A maintenance step: upsert this dispatcher's row about every 10 s."""

    def __init__(self, *, worker_id: str, every: float = HEARTBEAT_EVERY_SECONDS):
        self.worker_id = worker_id
        self.every = every
        self._next = 0.0  # the first call beats at once
        self._started_at: datetime | None = None

    def __call__(self, now: datetime) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every
        self._started_at = self._started_at or now
        heartbeat_touch(worker_id=self.worker_id, started_at=self._started_at, now=now)

    def stop(self) -> None:
        """A clean exit: the row goes, so it is not mistaken for a dead dispatcher."""
        try:
            DispatcherHeartbeat.objects.filter(worker_id=self.worker_id).delete()
        except DatabaseError as exc:
            # The row goes stale and is reported: true enough for a stop
            # that could not reach the database.
            logger.warning("heartbeat row not removed: %s", exc)


def heartbeat_touch(*, worker_id: str, started_at: datetime, now: datetime) -> None:
    DispatcherHeartbeat.objects.update_or_create(
        worker_id=worker_id,
        defaults={"last_seen_at": now},
        create_defaults={
            "last_seen_at": now,
            "started_at": started_at,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        },
    )
    # Rows of dispatchers gone for a day have been reported long enough.
    DispatcherHeartbeat.objects.filter(last_seen_at__lt=now - FORGET_AFTER).delete()
