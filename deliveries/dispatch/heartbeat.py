"""The dispatcher's heartbeat: a thread of its own, one row per process.

The beat runs on its own thread and database connection, so it never waits
behind the send loop, a slow flush or the database thread's retries: a
dispatcher busy with slow receivers, or riding out a database outage, keeps
beating as soon as the database answers. last_seen_at is written with the
database's clock, so hosts whose clocks differ still agree on its age.

After each beat the thread tells the send loop (a Liveness message), and if
it has beaten without a break for DISPATCHER_DEAD_AFTER_SECONDS it judges the
other dispatchers (rescue.py): only then can it have seen every live one
beat since the database last came back, so a restart kills nobody.

Pipeline health, `relay_status` and /metrics read these rows.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, connection, transaction
from django.db.models.functions import Now

from deliveries.dispatch import rescue
from deliveries.dispatch.sendloop import Liveness
from deliveries.models import DispatcherHeartbeat
from relayproject.lib.clock import Clock, SystemClock

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY_SECONDS = 5.0  # at most; beat_interval() below
RETRY_SECONDS = 1.0  # after a failed beat: back within a second of the database
# A row stale this long is shown for a day, then forgotten (staff may delete
# it sooner).
FORGET_AFTER = timedelta(hours=24)


def beat_interval(dead_after: float) -> float:
    """Four beats fit in the dead threshold: one late or lost beat is no death."""
    return min(HEARTBEAT_EVERY_SECONDS, dead_after / 4)


@dataclass(frozen=True)
class Beat:
    """What one beat read back: the database's time and the revocation marks."""

    at: datetime
    deaths: int
    released: int


class Heartbeat:
    """Beat about every beat_interval(dead_after); judge the others; tell the loop."""

    def __init__(
        self,
        *,
        worker_id: str,
        dead_after: float,
        lease_seconds: float | None = None,
        liveness: queue.SimpleQueue | None = None,
        judge: bool = True,
        clock: Clock | None = None,
    ) -> None:
        # The dispatcher's clock: the send loop compares a beat's `at` with it.
        self.clock = clock or SystemClock()
        self.worker_id = worker_id
        self.dead_after = dead_after
        self.every = beat_interval(dead_after)
        self.lease_seconds = lease_seconds
        self.liveness = liveness
        self.judge = judge
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._started_at = self.clock.now()  # this process, on the clock leases use
        self._marks: tuple[int, int] | None = None  # (deaths, released) last read
        self._steady_since: datetime | None = None  # database time
        self._last: datetime | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """A clean exit: the row goes, so it is not mistaken for a dead dispatcher."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()  # the thread removes the row on its way out
        else:
            self._forget()

    def _forget(self) -> None:
        try:
            DispatcherHeartbeat.objects.filter(worker_id=self.worker_id).delete()
        except DatabaseError as exc:
            # The row goes stale and is reported: true enough for a stop
            # that could not reach the database.
            logger.warning("heartbeat row not removed: %s", exc)

    # -- the thread --------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                wait = self.every if self.beat_once() else RETRY_SECONDS
                self._stop.wait(wait)
        finally:
            # On the connection that wrote the row: the caller's may be inside
            # a transaction (a test's, a command run from code) that never
            # commits, and the row would outlive this dispatcher.
            if self._stop.is_set():
                self._forget()
            connection.close()  # this thread's own connection

    def beat_once(self) -> bool:
        """One beat, and a judgement when due; False if the database failed."""
        sent_at = self.clock.monotonic()
        try:
            first = self._marks is None
            if first:
                shared = heartbeat_in_use(
                    worker_id=self.worker_id, within=self.dead_after
                )
            beat = heartbeat_touch(worker_id=self.worker_id, first=first)
            if first:
                self._first(beat, shared=shared)
        except Exception as exc:  # noqa: BLE001 - the thread must outlive anything
            self._steady_since = None
            logger.warning("heartbeat failed (%s: %s)", type(exc).__name__, exc)
            connection.close()
            return False
        marks = (beat.deaths, beat.released)
        revoked = self._marks is not None and marks != self._marks
        self._marks = marks
        if revoked:
            logger.warning(
                "this dispatcher was declared dead and its deliveries released;"
                " what it still queues is dropped"
            )
        if self.liveness is not None:
            self.liveness.put(Liveness(at=sent_at, revoked=revoked))
        self._steady(beat.at)
        if self.judge and self._judge_due(beat.at):
            try:
                rescue.rescue_log(
                    rescue.dispatchers_rescue(
                        judge=self.worker_id, dead_after=self.dead_after
                    )
                )
            except Exception as exc:  # noqa: BLE001 - as above
                self._steady_since = None
                logger.warning("dead dispatchers not looked for (%s)", exc)
                connection.close()
        return True

    def _first(self, beat: Beat, *, shared: str | None) -> None:
        """Leases under this worker id older than this process are a
        predecessor's (a restart that kept the id): released at once, unless
        another live process beats under the same id (a misconfiguration)."""
        if shared:
            logger.error(
                "worker id %s is in use by another live dispatcher (%s):"
                " give each dispatcher its own WORKER_ID",
                self.worker_id,
                shared,
            )
        elif self.lease_seconds is not None:
            before = self._started_at + timedelta(seconds=self.lease_seconds)
            rescue.rescue_log(
                rescue.predecessor_rescue(
                    worker_id=self.worker_id, claimed_before=before
                )
            )
        self._marks = (beat.deaths, beat.released)

    def _steady(self, at: datetime) -> None:
        # A gap of half the threshold (a freeze, an outage that raised no
        # error) breaks the run: the others may not have beaten meanwhile.
        gap = self._last is not None and (at - self._last).total_seconds() > (
            self.dead_after / 2
        )
        if self._steady_since is None or gap:
            self._steady_since = at
        self._last = at

    def _judge_due(self, at: datetime) -> bool:
        return (at - self._steady_since).total_seconds() >= self.dead_after


def heartbeat_in_use(*, worker_id: str, within: float) -> str | None:
    """Another process (host, pid) that beat under this worker id within
    `within` seconds, if any."""
    row = (
        DispatcherHeartbeat.objects.filter(
            worker_id=worker_id, last_seen_at__gte=Now() - timedelta(seconds=within)
        )
        .exclude(hostname=socket.gethostname(), pid=os.getpid())
        .values_list("hostname", "pid")
        .first()
    )
    return None if row is None else f"{row[0]}, pid {row[1]}"


def heartbeat_touch(
    *,
    worker_id: str,
    now: datetime | None = None,
    started_at: datetime | None = None,
    first: bool = False,
) -> Beat:
    """Upsert this dispatcher's row at the database's time (or `now` and
    `started_at`, for seeding), and read back what the judges wrote on it.
    A process's first beat also says which process it is."""
    stamp = Now() if now is None else now
    this = (
        {"hostname": socket.gethostname(), "pid": os.getpid(), "started_at": stamp}
        if first
        else {}
    )
    with transaction.atomic():
        touched = DispatcherHeartbeat.objects.filter(worker_id=worker_id).update(
            last_seen_at=stamp, **this
        )
        if not touched:
            DispatcherHeartbeat.objects.create(
                worker_id=worker_id,
                last_seen_at=stamp,
                started_at=stamp if started_at is None else started_at,
                hostname=socket.gethostname(),
                pid=os.getpid(),
            )
        at, deaths, released = DispatcherHeartbeat.objects.values_list(
            "last_seen_at", "deaths", "released"
        ).get(worker_id=worker_id)
        # Rows of dispatchers gone for a day have been reported long enough.
        DispatcherHeartbeat.objects.filter(last_seen_at__lt=at - FORGET_AFTER).delete()
    return Beat(at=at, deaths=deaths, released=released)
