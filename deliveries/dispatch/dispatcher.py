"""The dispatcher: claim -> send -> record, in a loop, until stopped.

Sends happen outside any transaction, `concurrency` at a time on a thread
pool; outcomes are recorded from the main thread in short transactions, the
ones that complete together in one. Claimed jobs wait in a queue and go to
the pool as threads free up, each past the SendGate (breakers) and the rate
limit first; the next batch is claimed before the queue runs dry, so slow
receivers never leave threads idle.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import InterfaceError, OperationalError, connections

from deliveries import signing
from deliveries.dispatch import claiming, counters, errors, gate, outcomes, recording
from deliveries.dispatch.jobs import Job, jobs_load
from deliveries.dispatch.transport import OutgoingRequest, Sender, SendResult
from endpoints.services import endpoint_rate_take
from relayproject.clock import SystemClock

logger = logging.getLogger(__name__)

POLL_INTERVAL_SECONDS = 0.5
RECORD_EVERY_SECONDS = 0.02  # outcomes finishing within this share one transaction
MAINTAIN_EVERY_SECONDS = 1.0  # longest wait on sends before maintenance runs again
DB_BACKOFF_SECONDS = (0.5, 1, 2, 5)  # then 5 s between tries while the database is away
DB_ERRORS = (OperationalError, InterfaceError)


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


Finished = tuple[Job, SendResult | None, datetime | None]


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
        self._queue: deque[Job] = deque()
        self._inflight: set[Future] = set()
        self._gate = gate.SendGate()
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

    def run_once(self) -> int:
        """Claim one batch, send it, record every outcome. Returns rows handled."""
        handled = self._with_db_retry(self._claim) or 0
        try:
            while self._inflight or (self._queue and not self.stopping):
                self._submit_ready()
                if self._inflight:
                    self._settle_some()
        finally:
            self._give_back_queue()
        return handled

    def run(self, *, drain: bool = False) -> Stats:
        """Loop until stop(); with drain, until nothing is due right now."""
        failures = 0
        dry = False  # the last claim found nothing: do not ask again until idle
        try:
            while not self.stopping:
                if not dry and len(self._queue) < self.concurrency:
                    try:
                        dry = self._claim() == 0
                        failures = 0
                    except DB_ERRORS as exc:
                        self._database_down(exc, failures)
                        failures += 1
                        if not (self._inflight or self._queue):
                            continue
                        # Fall through: send and record what we hold, then retry.
                self._submit_ready()
                # Busy or idle, maintenance runs (each step keeps its own
                # schedule): the heartbeat must not stop under load.
                self._maintain()
                if self._inflight:
                    self._settle_some()
                    continue
                if dry:
                    if drain:
                        break
                    self._idle()
                    dry = False
        finally:
            self._settle_all()
            self._give_back_queue()
            self.close()
        return self.stats

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        close_sender = getattr(self.sender, "close", None)
        if close_sender is not None:
            close_sender()  # its event loop and connections
        if self.waker is not None:
            self.waker.close()

    def _idle(self) -> None:
        if self.waker is not None:
            self.waker.wait(self.poll_interval)
        else:
            self._stopping.wait(self.poll_interval)

    def _maintain(self) -> None:
        if self.maintenance is None:
            return
        try:
            self.maintenance(self.clock.now())
        except DB_ERRORS as exc:
            logger.warning("maintenance skipped: database unavailable (%s)", exc)
            connections.close_all()

    def _database_down(self, exc: Exception, failures: int) -> None:
        delay = DB_BACKOFF_SECONDS[min(failures, len(DB_BACKOFF_SECONDS) - 1)]
        first_line = (str(exc).strip().splitlines() or [""])[0]
        logger.warning(
            "database unavailable (%s: %s); retrying in %ss",
            type(exc).__name__,
            first_line,
            delay,
        )
        connections.close_all()
        if not self._inflight:
            self._stopping.wait(delay)

    # -- claiming ----------------------------------------------------------

    def _claim(self) -> int:
        """Claim probes and a batch into the queue; rows handled (0: nothing due)."""
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
        handled = self._count_reclaimed(probes, batch)
        # Endpoints another claim was counting were skipped, not empty: not dry.
        handled += batch.contended
        for claim in (probes, batch):
            if not claim.delivery_ids:
                continue
            self.stats.claimed += len(claim.delivery_ids)
            handled += len(claim.delivery_ids)
            jobs = jobs_load(
                delivery_ids=claim.delivery_ids,
                lease_until=claim.lease_until,
                probe_ids=claim.probe_ids,
                now=now,
            )
            if claim is probes:
                self._queue.extendleft(reversed(jobs))  # probes go first
            else:
                self._queue.extend(jobs)
        return handled

    def _submit_ready(self) -> None:
        """Hand queued jobs to free threads, unless the gate or the rate limit says wait.

        The gate and the rate limit read the database: if it is away, the jobs
        stay queued (their lease keeps them ours) and we try again shortly.
        """
        deferred: list[Job] = []
        try:
            self._submit_ready_into(deferred)
        except DB_ERRORS as exc:
            logger.warning(
                "database unavailable before sending (%s); retrying", type(exc).__name__
            )
            connections.close_all()
            if not self._inflight:
                self._stopping.wait(DB_BACKOFF_SECONDS[1])
        finally:
            self._queue.extendleft(reversed(deferred))

    def _submit_ready_into(self, deferred: list[Job]) -> None:
        now = self.clock.now()
        self._gate.refresh((j.endpoint_id for j in self._queue), now=now)
        if self.stopping:
            return
        # About a batch ahead of the threads: the pool's own queue keeps them
        # busy while this thread records; each job asks the gate again just
        # before it is sent (must_wait), so a breaker that opens meanwhile
        # still holds it.
        ahead = max(2 * self.concurrency, self.batch_size)
        while self._queue and len(self._inflight) < ahead:
            job = self._queue.popleft()
            deferred.append(job)  # until it is sent or released
            decision = self._gate.decide(
                job.endpoint_id, is_probe=job.is_probe, now=now
            )
            if decision == gate.DEFER:
                continue
            hold_until = decision if isinstance(decision, datetime) else None
            hold_until = hold_until or self._rate_limited_until(job, now=now)
            deferred.pop()
            if hold_until is not None:
                self._release([job], due_at=hold_until)
                continue
            self._gate.sending(job.endpoint_id)
            ticket = self._gate.ticket(job.endpoint_id)
            self._inflight.add(self._pool.submit(self._send, job, ticket))

    def _give_back_queue(self) -> None:
        """Claimed but never sent (stopping): pending again, no attempt spent."""
        jobs, self._queue = list(self._queue), deque()
        self._release(jobs, due_at=self.clock.now())

    def _count_reclaimed(self, *claims: claiming.Claim) -> int:
        reclaimed = sum(c.reclaimed for c in claims)
        dead = sum(c.dead_on_reclaim for c in claims)
        if reclaimed:
            tally = Tally(
                {
                    (counters.RECLAIMED, ""): reclaimed,
                    (counters.ATTEMPTS, "retry"): reclaimed - dead,
                    (counters.ATTEMPTS, "dead"): dead,
                    (counters.DELIVERIES, "dead"): dead,
                }
            )
            self._with_db_retry(
                lambda: counters.counters_add(shard=self.worker_id, tally=tally)
            )
        self.stats.reclaimed += reclaimed
        self.stats.dead += dead
        return dead

    def _rate_limited_until(self, job: Job, *, now: datetime) -> datetime | None:
        if not job.rate_limit_per_second:
            return None
        wait_seconds = endpoint_rate_take(
            endpoint_id=job.endpoint_id,
            rate=job.rate_limit_per_second,
            now=now.timestamp(),
        )
        return now + timedelta(seconds=wait_seconds) if wait_seconds > 0 else None

    # -- sending (pool threads: no database access here) --------------------

    def _send(self, job: Job, ticket: int) -> Finished:
        if self.stopping or (
            not job.is_probe
            and self._gate.must_wait(
                job.endpoint_id, ticket=ticket, now=self.clock.now()
            )
        ):
            return job, None, None
        started_at = self.clock.now()
        timestamp = int(started_at.timestamp())
        headers = {
            **job.headers,  # reserved names are refused on save; ours win anyway
            "Content-Type": "application/json",
            "webhook-id": job.event_id,
            "webhook-timestamp": str(timestamp),
            "X-Relay-Event-Id": job.event_id,
            "X-Relay-Delivery-Id": job.delivery_id,
            "X-Relay-Attempt": str(job.attempt_count + 1),
        }
        if not job.secrets:
            no_secret = SendResult(
                None, 0.0, errors.NO_SIGNING_SECRET, "no live secret"
            )
            return job, no_secret, started_at
        headers["webhook-signature"] = signing.signature_header(
            secrets=job.secrets, msg_id=job.event_id, timestamp=timestamp, body=job.body
        )
        request = OutgoingRequest(url=job.url, headers=headers, body=job.body)
        result = self.sender.send(request)
        self._gate.answered(job.endpoint_id, failed=bool(_failed(result)))
        return job, result, started_at

    # -- recording ---------------------------------------------------------

    def _settle_all(self) -> None:
        while self._inflight:
            self._settle_some()

    def _settle_some(self) -> None:
        """Wait for a send; refill the pool; record all that finish meanwhile."""
        # Bounded, so the maintenance step (the heartbeat) still runs while
        # every send is waiting on a slow receiver.
        done, _ = wait(
            self._inflight, timeout=MAINTAIN_EVERY_SECONDS, return_when=FIRST_COMPLETED
        )
        finished = self._collect(done)
        self._submit_ready()  # healthy endpoints need not wait for the record
        more, _ = wait(set(self._inflight), timeout=RECORD_EVERY_SECONDS)
        finished += self._collect(more)
        self._record([f for f in finished if f[1] is not None])
        now = self.clock.now()
        for job, result, _ in finished:
            if result is not None:
                continue
            # Not sent: stopping, or the endpoint turned out held or failing.
            if self.stopping:
                self._release([job], due_at=now)
            elif self._gate.is_held(job.endpoint_id, now=now):
                self._release([job], due_at=self._gate.held[job.endpoint_id])
            else:
                self._queue.appendleft(job)  # the gate decides again
        self._submit_ready()

    def _collect(self, done: set[Future]) -> list[Finished]:
        self._inflight -= done
        finished: list[Finished] = [f.result() for f in done]
        for job, result, _ in finished:
            self._gate.finished(job.endpoint_id, failed=_failed(result))
        return finished

    def _record(self, finished: list[Finished]) -> None:
        if not finished:
            return
        sent = [
            outcomes.Sent(
                delivery_id=job.delivery_id,
                endpoint_id=job.endpoint_id,
                lease_until=job.lease_until,
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
            lambda: recording.flush_record(
                sent=sent,
                worker_id=self.worker_id,
                now=self.clock.now(),
                rand=self.rand,
            )
        )
        for job, result, _ in finished:
            self._gate.recorded(job.endpoint_id, failed=bool(_failed(result)))
        if recorded is None:
            return
        self.stats.fenced += len(recorded.fenced)
        attempts = {
            label: int(n)
            for (name, label), n in recorded.tally.items()
            if name == counters.ATTEMPTS
        }
        self.stats.succeeded += attempts.pop("succeeded", 0)
        self.stats.retried += attempts.pop("retry", 0)
        self.stats.dead += sum(attempts.values())
        self._gate.opened(recorded.opened)

    def _release(self, jobs: list[Job], *, due_at: datetime) -> None:
        for job in jobs:
            released = self._with_db_retry(
                lambda job=job: claiming.release(
                    worker_id=self.worker_id,
                    lease_until=job.lease_until,
                    delivery_ids=[job.delivery_id],
                    due_at=due_at,
                )
            )
            self.stats.released += released or 0
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


def _failed(result: SendResult | None) -> bool | None:
    if result is None:
        return None
    return not (result.status_code is not None and 200 <= result.status_code < 300)
