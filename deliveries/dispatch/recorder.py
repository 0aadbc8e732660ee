"""The record half of the dispatcher: what comes back from the send loop, on
the dispatcher's database thread.

Outcomes are recorded in batches (a flush), unsent rows are given back unspent,
and the database's absences are ridden out (outage.py). A flush is recorded in
one statement (outcomes.outcomes_record); if the database refuses it for any
reason but being away, it is recorded one by one, so one bad outcome cannot
sink the flush. An outcome that still fails is recorded without what the
receiver sent (its body, message and Retry-After), then as a bare error
attempt; if even that fails its row is released without spending an attempt,
due after a back-off. The dispatcher never crashes on it, and no row is left
delivering to poison the next dispatcher.

The Recorder owns this state; the dispatcher hands it what the loop returns
and acts on what a flush says (Flushed): breakers to hold, lanes that failed.
Given a Writer (writer.py), a flush's write runs on the writer's thread and
connection, one at a time, and its Flushed comes when the dispatcher hands
back the Written message (settle); without one it is written inline.
"""

from __future__ import annotations

import logging
import math
import random
from collections import Counter as Tally
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings

from deliveries.dispatch import claiming, gate, outcomes, spans
from deliveries.dispatch.jobs import Job
from deliveries.dispatch.outage import DB_ERRORS, with_db_retry
from deliveries.dispatch.sendloop import Finished
from deliveries.dispatch.transport import SendResult
from deliveries.dispatch.writer import Writer, Written
from deliveries.models import ErrorKind
from deliveries.ops import counters
from deliveries.retry import is_delivered
from endpoints import probes
from relayproject.lib.clock import Clock

logger = logging.getLogger(__name__)

RECORD_EVERY_SECONDS = 0.02  # outcomes arriving within this share one transaction
RECORD_MOST = 500  # outcomes in one flush at most

T = TypeVar("T")


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


@dataclass
class Flushed:
    """What a flush tells the dispatcher and its send loop."""

    recorded: bool = False  # rows left delivering: endpoints have room again
    hold: frozenset[str] | None = None  # the breakers now held, if they changed
    failures: dict[str, int] = field(default_factory=dict)  # per endpoint


class Recorder:
    """Outcomes to record, rows to give back, and the rows handed out and not
    yet back (per endpoint), for one dispatcher."""

    def __init__(
        self,
        *,
        worker_id: str,
        clock: Clock,
        rand: random.Random,
        lease_seconds: float,
        watch: gate.BreakerWatch,
        stats: Stats,
        writer: Writer | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.clock = clock
        self.rand = rand
        self.lease_seconds = lease_seconds
        self.watch = watch
        self.stats = stats
        self.outstanding: Tally[str] = Tally()  # per endpoint, handed and not back
        self._to_record: list[Finished] = []
        self._record_by = 0.0  # on clock.monotonic()
        self._unsent: list[Finished] = []
        self.writer = writer
        self._writing: list[Finished] | None = None  # the batch the writer has

    # -- what the dispatcher asks ------------------------------------------

    def handed(self, jobs: Iterable[Job]) -> None:
        self.outstanding.update(job.endpoint_id for job in jobs)

    def take(self, finished: Finished) -> None:
        """One job back from the loop: sent (to record) or not (to give back)."""
        if finished.result is None:
            self._unsent.append(finished)
            return
        if not self._to_record:
            self._record_by = self.clock.monotonic() + RECORD_EVERY_SECONDS
        self._to_record.append(finished)

    @property
    def idle(self) -> bool:
        return (
            not sum(self.outstanding.values())
            and not self._to_record
            and not self.writing
        )

    @property
    def writing(self) -> bool:
        """A batch is with the writer and not yet settled."""
        return self._writing is not None

    def record_in(self) -> float | None:
        """Seconds until the waiting outcomes are due a flush; None: none wait
        (or the writer has a batch: its Written message is what to wait for)."""
        if not self._to_record or self.writing:
            return None
        return max(0.0, self._record_by - self.clock.monotonic())

    def flush(self, *, force: bool, stopping: bool) -> Flushed:
        """Give back what came back unsent; record the outcomes once due."""
        flushed = Flushed()
        if self._unsent:
            self._give_back(stopping=stopping)
        due = (
            self.clock.monotonic() >= self._record_by
            or len(self._to_record) >= RECORD_MOST
        )
        if self._to_record and (force or due) and not self.writing:
            flushed = self._record()
        return flushed

    def retry(self, write: Callable[[], T]) -> T | None:
        """A write riding out the database's absence for as long as the lease."""
        return with_db_retry(write, clock=self.clock, give_up_after=self.lease_seconds)

    def release(self, jobs: list[tuple[Job, datetime]]) -> None:
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
                self.retry(
                    lambda job=job: probes.probe_abandon(
                        endpoint_id=job.endpoint_id,
                        merchant_id=job.merchant_id,
                        now=self.clock.now(),
                    )
                )

    # -- inside ------------------------------------------------------------

    def _record(self) -> Flushed:
        finished, self._to_record = self._to_record, []
        write = self._write(finished)
        if self.writer is None:
            return self._settled(finished, write())
        self._writing = finished
        self.writer.submit(finished, write)
        return Flushed()

    def _write(
        self, finished: list[Finished]
    ) -> Callable[[], outcomes.Recorded | None]:
        """The flush's database work, touching nothing of this object's
        state: it may run on the writer's thread."""
        sent = [sent_of(f) for f in finished]

        def write() -> outcomes.Recorded | None:
            with spans.record_span(worker_id=self.worker_id, outcomes=len(sent)):
                return self.retry(
                    lambda: flush_record(
                        sent=sent,
                        worker_id=self.worker_id,
                        now=self.clock.now(),
                        rand=self.rand,
                    )
                )

        return write

    def settle(self, written: Written) -> Flushed:
        """The writer's batch is written: what it means, on this thread."""
        self._writing = None
        return self._settled(written.batch, written.recorded)

    def _settled(
        self, finished: list[Finished], recorded: outcomes.Recorded | None
    ) -> Flushed:
        self._back(finished)
        flushed = Flushed(
            failures=dict(
                Tally(
                    f.job.endpoint_id
                    for f in finished
                    if not is_delivered(
                        f.result.status_code, acknowledged=f.result.acknowledged
                    )
                )
            )
        )
        if recorded is None:
            return flushed
        flushed.recorded = True
        # Held before the failures count as recorded: a failing lane must
        # not send its next request to a breaker this flush opened.
        if self.watch.opened(recorded.opened) | self.watch.closed(recorded.closed):
            flushed.hold = frozenset(self.watch.held)
        self.stats.fenced += len(recorded.fenced)
        attempts = {
            label: int(n)
            for (name, label), n in recorded.tally.items()
            if name == counters.ATTEMPTS
        }
        self.stats.succeeded += attempts.pop("succeeded", 0)
        self.stats.retried += attempts.pop("retry", 0)
        self.stats.dead += sum(attempts.values())
        return flushed

    def _give_back(self, *, stopping: bool) -> None:
        """Jobs the loop never sent (stopping, or held): pending again, unspent."""
        unsent, self._unsent = self._unsent, []
        now = self.clock.now()
        self.release(
            [
                (
                    f.job,
                    self.watch.due_at(f.job.endpoint_id, now=now)
                    if f.job.endpoint_id in self.watch.held and not stopping
                    else now,
                )
                for f in unsent
            ]
        )
        self._back(unsent)

    def _back(self, finished: list[Finished]) -> None:
        self.outstanding.subtract(f.job.endpoint_id for f in finished)
        self.outstanding = +self.outstanding  # drop the zeros

    def _release_rows(
        self, group: list[Job], *, lease_until: datetime, due_at: datetime
    ) -> int:
        released = self.retry(
            lambda: claiming.release(
                worker_id=self.worker_id,
                lease_until=lease_until,
                delivery_ids=[j.delivery_id for j in group],
                due_at=due_at,
                merchants={j.delivery_id: j.merchant_id for j in group},
            )
        )
        self.stats.released += released or 0
        return released or 0


def sent_of(f: Finished) -> outcomes.Sent:
    """What a job back from the loop is recorded as."""
    return outcomes.Sent(
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
        challenge=f.job.challenge,
        ordering_key=f.job.ordering_key,
        retry_schedule=f.job.retry_schedule,
    )


# -- one flush: in one statement, else one by one ------------------------------


def flush_record(
    *, sent: list[outcomes.Sent], worker_id: str, now: datetime, rand: random.Random
) -> outcomes.Recorded:
    """Record the flush in one statement; if the database refuses it (not by
    being away: DB_ERRORS go up, to be ridden out), record one by one so one
    bad outcome cannot sink the flush."""

    def record(items: list[outcomes.Sent]) -> outcomes.Recorded:
        return outcomes.outcomes_record(
            sent=items, worker_id=worker_id, now=now, rand=rand
        )

    try:
        return record(sent)
    except DB_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever it is, the others go on
        if len(sent) > 1:
            logger.warning(
                "recording a flush of %d failed (%s); recording one by one",
                len(sent),
                type(exc).__name__,
            )
        failure = exc
    if len(sent) == 1:
        return _record_anyhow(
            sent[0], failure, record=record, worker_id=worker_id, now=now
        )
    recorded = outcomes.Recorded()
    for item in sent:
        try:
            part = record([item])
        except DB_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001
            part = _record_anyhow(
                item, exc, record=record, worker_id=worker_id, now=now
            )
        _merge(recorded, part)
    return recorded


def _record_anyhow(
    item: outcomes.Sent,
    failure: Exception,
    *,
    record: Callable[[list[outcomes.Sent]], outcomes.Recorded],
    worker_id: str,
    now: datetime,
) -> outcomes.Recorded:
    """Plainer and plainer results; in the end, the row back unspent."""
    for result in _plainer(item.result, failure):
        try:
            recorded = record([replace(item, result=result)])
        except DB_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001
            failure = exc
            continue
        logger.error(
            "delivery=%s: its outcome could not be stored as it was (%s); "
            "recorded as %s",
            item.delivery_id,
            type(failure).__name__,
            result.error_kind or result.status_code,
        )
        return recorded
    due_at = now + timedelta(seconds=settings.RETRY_BASE_SECONDS)
    claiming.release(
        worker_id=worker_id,
        lease_until=item.lease_until,
        delivery_ids=[item.delivery_id],
        due_at=due_at,
        merchants={item.delivery_id: item.merchant_id},
    )
    if item.is_probe:
        probes.probe_abandon(
            endpoint_id=item.endpoint_id, merchant_id=item.merchant_id, now=now
        )
    logger.error(
        "delivery=%s: no outcome could be stored (%s); released until %s "
        "without spending an attempt",
        item.delivery_id,
        type(failure).__name__,
        due_at.isoformat(),
    )
    return outcomes.Recorded()


def _plainer(result: SendResult, failure: Exception) -> list[SendResult]:
    """The result without what the receiver shaped, then a bare error of our own."""
    duration = result.duration_ms if math.isfinite(result.duration_ms) else 0.0
    status = result.status_code
    if status is not None and not 100 <= status <= 999:
        status = None
    kind = result.error_kind if result.error_kind in ErrorKind.ALL else ""
    stripped = SendResult(
        status_code=status,
        duration_ms=duration,
        error_kind=kind or ("" if status is not None else ErrorKind.INVALID_RESPONSE),
        error_message=f"the response could not be stored ({type(failure).__name__})",
        # Ours, not the receiver's: what was sent still shows.
        request_url=result.request_url,
        request_headers=result.request_headers,
    )
    bare = replace(stripped, status_code=None, error_kind=ErrorKind.INVALID_RESPONSE)
    return [stripped, bare]


def _merge(into: outcomes.Recorded, part: outcomes.Recorded) -> None:
    into.fenced += part.fenced
    into.tally.update(part.tally)
    into.opened.update(part.opened)
    into.closed |= part.closed
