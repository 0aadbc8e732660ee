"""What comes back from the send loop, on the dispatcher's database thread:
outcomes recorded in batches, unsent rows given back, and the database's
absences ridden out. A part of Dispatcher (dispatcher.py), apart for size.
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import InterfaceError, InternalError, OperationalError, connections

from deliveries.dispatch import claiming, outcomes, recording, spans
from deliveries.dispatch.jobs import Job
from deliveries.dispatch.sendloop import Finished
from deliveries.ops import counters
from deliveries.retry import is_success
from endpoints import health

logger = logging.getLogger(__name__)

DB_BACKOFF_SECONDS = (0.5, 1, 2, 5)  # then 5 s between tries while the database is away
# InternalError: the server ended this session (idle_in_transaction_session_
# timeout after a freeze, SQLSTATE 25P03); reconnecting is all it takes.
DB_ERRORS = (OperationalError, InterfaceError, InternalError)


@dataclass
class Stats:
    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    reclaimed: int = 0
    released: int = 0
    fenced: int = 0

    def line(self) -> str:
        return (
            f"claimed={self.claimed} succeeded={self.succeeded} retried={self.retried} "
            f"dead={self.dead} reclaimed={self.reclaimed}"
        )


class Returns:
    """Dispatcher's recording half; it uses the dispatcher's own state."""

    def _record(self) -> None:
        finished, self._to_record = self._to_record, []
        sent = [
            outcomes.Sent(
                delivery_id=f.job.delivery_id,
                endpoint_id=f.job.endpoint_id,
                lease_until=f.job.lease_until,
                attempt_count=f.job.attempt_count,
                budget_start=f.job.budget_start,
                max_attempts=f.job.max_attempts,
                is_probe=f.job.is_probe,
                started_at=f.started_at,
                result=f.result,
                event_id=f.job.event_id,
                merchant_id=f.job.merchant_id,
                published_at=f.job.published_at,
                permanent_statuses=f.job.permanent_statuses,
            )
            for f in finished
        ]
        with spans.record_span(worker_id=self.worker_id, outcomes=len(sent)):
            recorded = self._with_db_retry(
                lambda: recording.flush_record(
                    sent=sent,
                    worker_id=self.worker_id,
                    now=self.clock.now(),
                    rand=self.rand,
                )
            )
        self._back(finished)
        if recorded is not None:
            # Rows left delivering: endpoints that were at max_in_flight have
            # room again, so look at once rather than after the poll interval.
            self._dry = False
            self._claim_after = 0.0
            # Held before the failures count as recorded: a failing lane must
            # not send its next request to a breaker this flush opened.
            if self._watch.opened(recorded.opened) | self._watch.closed(
                recorded.closed
            ):
                self._loop.hold(frozenset(self._watch.held))
            self.stats.fenced += len(recorded.fenced)
            attempts = {
                label: int(n)
                for (name, label), n in recorded.tally.items()
                if name == counters.ATTEMPTS
            }
            self.stats.succeeded += attempts.pop("succeeded", 0)
            self.stats.retried += attempts.pop("retry", 0)
            self.stats.dead += sum(attempts.values())
        failures = Tally(
            f.job.endpoint_id for f in finished if not is_success(f.result.status_code)
        )
        if failures:
            self._loop.recorded(dict(failures))

    def _give_back(self) -> None:
        """Jobs the loop never sent (stopping, or held): pending again, unspent."""
        unsent, self._unsent = self._unsent, []
        now = self.clock.now()
        self._release(
            [
                (
                    f.job,
                    self._watch.due_at(f.job.endpoint_id, now=now)
                    if f.job.endpoint_id in self._watch.held and not self.stopping
                    else now,
                )
                for f in unsent
            ]
        )
        self._back(unsent)

    def _back(self, finished: list[Finished]) -> None:
        self._outstanding.subtract(f.job.endpoint_id for f in finished)
        self._outstanding = +self._outstanding  # drop the zeros

    def _release(self, jobs: list[tuple[Job, datetime]]) -> None:
        """Give rows back due at the time beside each, one UPDATE per claim and time."""
        groups: dict[tuple[datetime, datetime], list[Job]] = defaultdict(list)
        probes: list[tuple[Job, datetime]] = []
        for job, due_at in jobs:
            if job.is_probe:
                probes.append((job, due_at))
            else:
                groups[(job.lease_until, due_at)].append(job)
        for (lease_until, due_at), group in groups.items():
            self._release_rows(group, lease_until=lease_until, due_at=due_at)
        for job, due_at in probes:
            # One at a time: its breaker reopens only if the row was still ours
            # to give back, not released from us (declared dead) and taken as
            # another dispatcher's probe.
            if self._release_rows([job], lease_until=job.lease_until, due_at=due_at):
                self._with_db_retry(
                    lambda job=job: health.probe_abandon(
                        endpoint_id=job.endpoint_id, now=self.clock.now()
                    )
                )

    def _release_rows(
        self, group: list[Job], *, lease_until: datetime, due_at: datetime
    ) -> int:
        released = self._with_db_retry(
            lambda: claiming.release(
                worker_id=self.worker_id,
                lease_until=lease_until,
                delivery_ids=[j.delivery_id for j in group],
                due_at=due_at,
            )
        )
        self.stats.released += released or 0
        return released or 0

    def _with_db_retry(self, write: Callable):
        """Run a write, riding out a database restart for as long as the lease.

        Giving up is safe: the rows stay delivering until the lease runs out,
        then another claim resends them (at least once, never stuck). A lock
        timeout (another dispatcher frozen on a row we need) is retried too.
        """
        deadline = time.monotonic() + self.lease_seconds
        for attempt in range(1_000_000):
            try:
                return write()
            except DB_ERRORS as exc:
                if time.monotonic() > deadline:
                    logger.error("giving up recording (%s); the lease will resend", exc)
                    return None
                delay = DB_BACKOFF_SECONDS[min(attempt, len(DB_BACKOFF_SECONDS) - 1)]
                logger.warning(
                    "database unavailable while recording (%s); retrying in %ss",
                    type(exc).__name__,
                    delay,
                )
                connections.close_all()
                time.sleep(delay)
        return None
