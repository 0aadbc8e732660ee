"""Periodic work a dispatcher does besides sending: heartbeat, endpoint statistics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from django.db import connection

from deliveries.stats import endpoint_stats_refresh

logger = logging.getLogger(__name__)

STATS_EVERY_SECONDS = 60.0
STATS_LOCK_KEY = 0x72656C6179  # "relay": one advisory lock id for the whole cluster


class Maintenance:
    """Several maintenance steps run in order; each keeps its own schedule."""

    def __init__(self, *steps: Callable[[datetime], None]) -> None:
        self.steps = steps

    def __call__(self, now: datetime) -> None:
        for step in self.steps:
            step(now)


class StatsRefresher:
    """Refresh endpoint stats about once a minute, one dispatcher at a time.

    On PostgreSQL a session advisory lock (try, never wait) elects the
    dispatcher that does it; the others skip this round.
    """

    def __init__(self, every: float = STATS_EVERY_SECONDS) -> None:
        self.every = every
        self._next = time.monotonic() + every

    def __call__(self, now: datetime) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every
        if connection.vendor != "postgresql":
            endpoint_stats_refresh(now=now)
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [STATS_LOCK_KEY])
            if not cursor.fetchone()[0]:
                return
            try:
                count = endpoint_stats_refresh(now=now)
                logger.info("refreshed stats of %d endpoints", count)
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [STATS_LOCK_KEY])
