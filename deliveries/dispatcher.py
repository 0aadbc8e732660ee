"""The dispatcher: claim -> send -> record, in a loop, until stopped.

Sends happen outside any transaction, `concurrency` at a time on a thread
pool; outcomes are recorded from the main thread in short transactions, a few
at a time as they complete.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import InterfaceError, OperationalError, connections

from deliveries import claiming, counters, outcomes, signing
from deliveries.jobs import Job, jobs_load
from deliveries.transport import OutgoingRequest, Sender, SendResult
from endpoints.services import endpoint_rate_take
from relayproject.clock import SystemClock

logger = logging.getLogger(__name__)

POLL_INTERVAL_SECONDS = 0.5
RECORD_EVERY_SECONDS = 0.02  # outcomes that complete together share one transaction
DB_BACKOFF_SECONDS = (0.5, 1, 2, 5)  # then 5 s between tries while the database is away


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
class _Batch:
    lease_until: datetime
    probe_ids: set[str] = field(default_factory=set)
    unsent: list[Job] = field(default_factory=list)


class Dispatcher:
    def __init__(
        self,
        *,
        worker_id: str,
        sender: Sender,
        batch_size: int,
        concurrency: int,
        lease_seconds: float,
        poll_interval: float = POLL_INTERVAL_SECONDS,
        clock: SystemClock | None = None,
        rand: random.Random | None = None,
        waker=None,
        maintenance: Callable[[datetime], None] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.sender = sender
        self.batch_size = batch_size
        self.concurrency = max(1, concurrency)
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.clock = clock or SystemClock()
        self.rand = rand or random.Random()
        self.waker = waker
        self.maintenance = maintenance
        self.stats = Stats()
        self._stopping = threading.Event()
        # Endpoints whose breaker this process saw open: not sent to again
        # before the given time, even within the batch already claimed.
        self._held: dict[str, datetime] = {}
        self._pool = ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="send"
        )

    # -- control -----------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; in-flight sends finish and are recorded. Signal-safe."""
        self._stopping.set()
        if self.waker is not None:
            self.waker.notify()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run(self, *, drain: bool = False) -> Stats:
        """Loop until stop(); with drain, until nothing is due right now."""
        failures = 0
        try:
            while not self.stopping:
                try:
                    handled = self.run_once()
                    if self.maintenance is not None:
                        self.maintenance(self.clock.now())
                    failures = 0
                except (OperationalError, InterfaceError) as exc:
                    delay = DB_BACKOFF_SECONDS[
                        min(failures, len(DB_BACKOFF_SECONDS) - 1)
                    ]
                    failures += 1
                    logger.warning(
                        "database unavailable (%s: %s); retrying in %ss",
                        type(exc).__name__,
                        str(exc).strip().splitlines()[0] if str(exc).strip() else "",
                        delay,
                    )
                    connections.close_all()
                    self._stopping.wait(delay)
                    continue
                if handled == 0:
                    if drain:
                        break
                    if self.waker is not None:
                        self.waker.wait(self.poll_interval)
                    else:
                        self._stopping.wait(self.poll_interval)
        finally:
            self.close()
        return self.stats

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self.waker is not None:
            self.waker.close()

    # -- one batch ---------------------------------------------------------

    def run_once(self) -> int:
        """Claim one batch, send it, record every outcome. Returns rows handled."""
        now = self.clock.now()
        probes = claiming.claim_probes(
            worker_id=self.worker_id, now=now, lease_seconds=self.lease_seconds
        )
        batch = claiming.claim_batch(
            worker_id=self.worker_id,
            now=now,
            lease_seconds=self.lease_seconds,
            limit=self.batch_size - len(probes.delivery_ids),
        )
        reclaimed = probes.reclaimed + batch.reclaimed
        dead_on_reclaim = probes.dead_on_reclaim + batch.dead_on_reclaim
        if reclaimed:
            tally = Tally(
                {
                    (counters.RECLAIMED, ""): reclaimed,
                    (counters.ATTEMPTS, "retry"): reclaimed - dead_on_reclaim,
                    (counters.ATTEMPTS, "dead"): dead_on_reclaim,
                    (counters.DELIVERIES, "dead"): dead_on_reclaim,
                }
            )
            self._with_db_retry(
                lambda: counters.counters_add(shard=self.worker_id, tally=tally)
            )
        self.stats.reclaimed += reclaimed
        self.stats.dead += dead_on_reclaim
        handled = dead_on_reclaim
        for claim in (probes, batch):
            if claim.delivery_ids:
                self.stats.claimed += len(claim.delivery_ids)
                handled += len(claim.delivery_ids)
                self._process(claim)
        return handled

    def _process(self, claim: claiming.Claim) -> None:
        now = self.clock.now()
        batch = _Batch(lease_until=claim.lease_until, probe_ids=claim.probe_ids)
        jobs = jobs_load(
            delivery_ids=claim.delivery_ids,
            lease_until=claim.lease_until,
            probe_ids=claim.probe_ids,
            now=now,
        )
        futures: set[Future] = set()
        for job in jobs:
            hold_until = self._hold_until(job, now=now)
            if hold_until is not None:
                self._release([job], batch=batch, due_at=hold_until)
                continue
            futures.add(self._pool.submit(self._send, job))
        while futures:
            done, futures = wait(
                futures, timeout=RECORD_EVERY_SECONDS, return_when=FIRST_COMPLETED
            )
            # Anything else that finished in the same instant is recorded with it.
            finished = [f.result() for f in done]
            self._record([f for f in finished if f[1] is not None], batch=batch)
            batch.unsent.extend(job for job, result, _ in finished if result is None)
        # Stopped or held back before sending: give them back, no attempt spent.
        by_due: dict[datetime, list[Job]] = {}
        for job in batch.unsent:
            due = self._held.get(job.endpoint_id) if not job.is_probe else None
            by_due.setdefault(due or self.clock.now(), []).append(job)
        for due, held_jobs in by_due.items():
            self._release(held_jobs, batch=batch, due_at=due)
        self._held = {e: t for e, t in self._held.items() if t > self.clock.now()}

    def _hold_until(self, job: Job, *, now: datetime) -> datetime | None:
        """When a job must wait instead of being sent: breaker open or rate limit."""
        if job.endpoint_id in self._held and not job.is_probe:
            return self._held[job.endpoint_id]
        if job.rate_limit_per_second:
            wait_seconds = endpoint_rate_take(
                endpoint_id=job.endpoint_id,
                rate=job.rate_limit_per_second,
                now=now.timestamp(),
            )
            if wait_seconds > 0:
                return now + timedelta(seconds=wait_seconds)
        return None

    def _send(self, job: Job) -> tuple[Job, SendResult | None, datetime | None]:
        """Runs on a pool thread: no database access here."""
        if self.stopping or (job.endpoint_id in self._held and not job.is_probe):
            return job, None, None
        started_at = self.clock.now()
        timestamp = int(started_at.timestamp())
        headers = {
            "Content-Type": "application/json",
            "webhook-id": job.event_id,
            "webhook-timestamp": str(timestamp),
            "X-Relay-Event-Id": job.event_id,
            "X-Relay-Delivery-Id": job.delivery_id,
            "X-Relay-Attempt": str(job.attempt_count + 1),
        }
        try:
            headers["webhook-signature"] = signing.signature_header(
                secrets=job.secrets,
                msg_id=job.event_id,
                timestamp=timestamp,
                body=job.body,
            )
        except ValueError:
            return (
                job,
                SendResult(
                    None, 0.0, "no_signing_secret", "endpoint has no live secret"
                ),
                started_at,
            )
        result = self.sender.send(
            OutgoingRequest(url=job.url, headers=headers, body=job.body)
        )
        return job, result, started_at

    def _record(
        self, finished: list[tuple[Job, SendResult, datetime]], *, batch: _Batch
    ) -> None:
        if not finished:
            return
        sent = [
            outcomes.Sent(
                delivery_id=job.delivery_id,
                endpoint_id=job.endpoint_id,
                lease_until=batch.lease_until,
                attempt_count=job.attempt_count,
                budget_start=job.budget_start,
                max_attempts=job.max_attempts,
                is_probe=job.is_probe,
                started_at=started_at,
                result=result,
            )
            for job, result, started_at in finished
        ]
        recorded = self._with_db_retry(
            lambda: outcomes.outcomes_record(
                sent=sent,
                worker_id=self.worker_id,
                now=self.clock.now(),
                rand=self.rand,
            )
        )
        if recorded is None:
            return
        self.stats.fenced += len(recorded.fenced)
        for (name, label), amount in recorded.tally.items():
            if name == "attempts_total":
                if label == "succeeded":
                    self.stats.succeeded += int(amount)
                elif label == "retry":
                    self.stats.retried += int(amount)
                else:
                    self.stats.dead += int(amount)
        self._held.update(recorded.opened)

    def _release(self, jobs: list[Job], *, batch: _Batch, due_at: datetime) -> None:
        if not jobs:
            return
        released = self._with_db_retry(
            lambda: claiming.release(
                worker_id=self.worker_id,
                lease_until=batch.lease_until,
                delivery_ids=[j.delivery_id for j in jobs],
                due_at=due_at,
            )
        )
        self.stats.released += released or 0
        for job in jobs:
            if job.is_probe:
                self._with_db_retry(
                    lambda job=job: claiming.probe_abandon(
                        endpoint_id=job.endpoint_id, now=self.clock.now()
                    )
                )

    def _with_db_retry(self, write: Callable):
        """Run a write, riding out a database restart for as long as the lease.

        Giving up is safe: the rows stay delivering until the lease runs out,
        then another claim resends them (at least once, never stuck).
        """
        deadline = time.monotonic() + self.lease_seconds
        for attempt in range(1_000_000):
            try:
                return write()
            except (OperationalError, InterfaceError) as exc:
                if time.monotonic() > deadline:
                    logger.error("giving up recording (%s); the lease will resend", exc)
                    return None
                delay = DB_BACKOFF_SECONDS[min(attempt, len(DB_BACKOFF_SECONDS) - 1)]
                logger.warning(
                    "database unavailable while recording; retrying in %ss", delay
                )
                connections.close_all()
                time.sleep(delay)
        return None
