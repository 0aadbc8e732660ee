"""Periodic work a dispatcher does besides sending, on its database thread:
endpoint statistics, the row-counting gauges of /metrics, day partitions of the
history made ahead, pull endpoints' upkeep (and the endpoint check of
deliveries/notifications/step.py, wired in run_dispatcher).

Each step keeps its own schedule. Steps that are cluster-wide run, on
PostgreSQL, in one dispatcher at a time: a session advisory lock (try, never
wait) elects the dispatcher that does it; the others skip this round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import connection

from deliveries.dispatch import backend
from deliveries.history import partitions
from deliveries.ops import gauges
from deliveries.ops.latency import publish_latency_refresh
from deliveries.ops.stats import endpoint_stats_refresh
from deliveries.pull.expiry import pull_upkeep, pull_upkeep_log
from relayproject.lib.clock import Clock, SystemClock

logger = logging.getLogger(__name__)

STATS_EVERY_SECONDS = 60.0
STATS_LOCK_KEY = 0x72656C6179  # "relay": one advisory lock id for the whole cluster
PARTITIONS_EVERY_SECONDS = 3600.0
PARTITIONS_RETRY_SECONDS = 60.0  # after the tables stayed locked
PARTITIONS_LOCK_TRIES = 3  # each waits at most partitions.LOCK_TIMEOUT_MS
PARTITIONS_LOCK_KEY = STATS_LOCK_KEY + 1
GAUGES_LOCK_KEY = STATS_LOCK_KEY + 2
PULL_LOCK_KEY = STATS_LOCK_KEY + 3
# A consumer's lease that ran out is due again within about this much of its
# end, and an idle listen session ends as late.
PULL_EVERY_SECONDS = 1.0


class Maintenance:
    """Several maintenance steps run in order; each keeps its own schedule."""

    def __init__(self, *steps: Callable[[datetime], None]) -> None:
        self.steps = steps

    def __call__(self, now: datetime) -> None:
        for step in self.steps:
            step(now)


def _elected(lock_key: int, work: Callable[[], object]) -> bool:
    """Run `work` unless another dispatcher holds `lock_key`; False if one does."""
    if not backend.shared_by_dispatchers():
        work()
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock_key])
        if not cursor.fetchone()[0]:
            return False
        try:
            work()
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock_key])
    return True


class StatsRefresher:
    """Refresh endpoint stats and the stored latency from publish (read by
    pipeline health and relay_status) about once a minute, one dispatcher at
    a time."""

    def __init__(
        self, every: float = STATS_EVERY_SECONDS, *, clock: Clock | None = None
    ) -> None:
        self.every = every
        self.clock = clock or SystemClock()
        self._next = self.clock.monotonic() + every

    def __call__(self, now: datetime) -> None:
        if self.clock.monotonic() < self._next:
            return
        self._next = self.clock.monotonic() + self.every

        def refresh() -> None:
            count = endpoint_stats_refresh(now=now)
            publish_latency_refresh(now=now)
            logger.info("refreshed stats of %d endpoints", count)

        _elected(STATS_LOCK_KEY, refresh)


class GaugeRefresher:
    """Recompute the gauges /metrics serves (deliveries.ops.gauges) every few
    seconds, once for the whole cluster: whichever dispatcher holds the lock
    recomputes them only if nobody stored them within `every`, so more
    dispatchers do not mean more counting."""

    def __init__(
        self, every: timedelta = gauges.REFRESH_EVERY, *, clock: Clock | None = None
    ) -> None:
        self.every = every
        self.clock = clock or SystemClock()
        self._next = self.clock.monotonic()  # the first call counts at once

    def __call__(self, now: datetime) -> None:
        if self.clock.monotonic() < self._next:
            return
        self._next = self.clock.monotonic() + self.every.total_seconds()

        def refresh() -> None:
            if gauges.queue_gauges_due(now=now, every=self.every):
                gauges.queue_gauges_refresh(now=now)

        _elected(GAUGES_LOCK_KEY, refresh)


class PartitionKeeper:
    """Keep day partitions of the history tables ready `ahead_days` ahead.

    Runs at a dispatcher's first maintenance and then hourly, so a fresh
    install or a fleet back from a long outage closes the gap at once; rows
    made while their day had no partition wait in the default partition and
    move into the day's partition when it is made.
    """

    def __init__(
        self,
        every: float = PARTITIONS_EVERY_SECONDS,
        ahead_days: int = partitions.AHEAD_DAYS,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.every = every
        self.ahead_days = ahead_days
        self.clock = clock or SystemClock()
        self._next = self.clock.monotonic()

    def __call__(self, now: datetime) -> None:
        if self.clock.monotonic() < self._next:
            return
        self._next = self.clock.monotonic() + self.every
        if not partitions.partitioned():
            return
        today = now.date()
        try:
            _elected(
                PARTITIONS_LOCK_KEY,
                lambda: partitions.partitions_ensure(
                    first=today,
                    last=today + timedelta(days=self.ahead_days),
                    tries=PARTITIONS_LOCK_TRIES,
                ),
            )
        except partitions.LockBusy as exc:
            # Sending matters more: give up this round, look again soon.
            logger.warning("partitions not made, tables busy (%s)", exc)
            self._next = self.clock.monotonic() + PARTITIONS_RETRY_SECONDS


class PullUpkeep:
    """Pull endpoints' upkeep (deliveries/pull/expiry.py: expired leases spent,
    idle listen sessions ended, full backlogs trimmed, ended sessions deleted)
    in each dispatcher about once a second, never in two at once: every step
    would be safe (SKIP LOCKED), but the second would find nothing to do."""

    def __init__(
        self, every: float = PULL_EVERY_SECONDS, *, clock: Clock | None = None
    ) -> None:
        self.every = every
        self.clock = clock or SystemClock()
        self._next = self.clock.monotonic()

    def __call__(self, now: datetime) -> None:
        if self.clock.monotonic() < self._next:
            return
        self._next = self.clock.monotonic() + self.every
        done = []
        _elected(PULL_LOCK_KEY, lambda: done.append(pull_upkeep(now=now)))
        for upkeep in done:
            pull_upkeep_log(upkeep)  # after every step's commit
