"""The dispatcher: claim -> send -> record, until stopped.

Three threads, sharing nothing but queues of plain data. This one (the
caller's) does the database steps but the record, synchronously and in
batches: it claims, hands the jobs to the send loop, hands the outcomes that
come back to the writer (writer.py: one short transaction per flush, on a
connection of its own, so a slow flush never delays a claim), gives unsent
rows back and re-reads breakers. The send
loop (sendloop.py) is an asyncio event loop on its own thread with up to
`concurrency` sends in flight, one lane per endpoint (lanes.py). The next
batch is claimed while the loop still has work, as soon as fewer than about
half a batch of its queued jobs could start, so slots never sit idle and no
job waits long in the queue (lease.py bounds that wait). What comes back is
the Recorder's (recorder.py): this class claims and hands over, and applies
what a flush says.

Every time it reads is the injected clock's (relayproject/lib/clock.py),
monotonic readings included, so a test's FakeClock drives its timing.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
from collections import Counter as Tally
from collections.abc import Callable
from datetime import datetime, timedelta

from deliveries.dispatch import claiming, gate, single_claims, spans
from deliveries.dispatch.jobs import Job, jobs_load
from deliveries.dispatch.outage import DB_ERRORS, database_down, reconnect
from deliveries.dispatch.recorder import Flushed, Recorder, Stats
from deliveries.dispatch.sendloop import Capacity, Finished, SendLoop, Stopped
from deliveries.dispatch.transport import Sender
from deliveries.dispatch.wakeup import Waker
from deliveries.dispatch.writer import Writer, Written, writes_apart
from deliveries.ops import counters
from endpoints.health import endpoint_rate_take
from relayproject.lib.clock import Clock, SystemClock

logger = logging.getLogger(__name__)

POLL_INTERVAL_SECONDS = 0.5
PROBE_EVERY_SECONDS = 0.5  # how often breakers past their cooldown are looked for
WAKE = object()  # put on the outbox by stop() and by NOTIFY: look again now


class Dispatcher:
    def __init__(
        self,
        *,
        worker_id: str,
        sender: Sender,
        batch_size: int,
        concurrency: int,
        lease_seconds: float,
        timeout: float | None = None,
        poll_interval: float = POLL_INTERVAL_SECONDS,
        clock: Clock | None = None,
        rand: random.Random | None = None,
        waker: Waker | None = None,
        maintenance: Callable[[datetime], None] | None = None,
        liveness: queue.SimpleQueue | None = None,
        hold_after: float | None = None,
        start_margin: float | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.batch_size = max(1, batch_size)
        self.concurrency = max(1, concurrency)
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.clock = clock or SystemClock()
        self.rand = rand or random.Random()
        self.waker = waker
        self.maintenance = maintenance
        # The heartbeat's news for the send loop (sendloop.py, Liveness).
        self.liveness = liveness
        self.hold_after = hold_after
        self.start_margin = start_margin
        self.stats = Stats()
        self._stopping = threading.Event()
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._sender = sender
        self._timeout = timeout
        self._loop: SendLoop | None = None
        self._watch = gate.BreakerWatch(monotonic=self.clock.monotonic)
        self._recorder = Recorder(
            worker_id=worker_id,
            clock=self.clock,
            rand=self.rand,
            lease_seconds=lease_seconds,
            watch=self._watch,
            stats=self.stats,
        )
        self._handed = 0
        self._capacity = Capacity(ready=0, in_flight=0, received=0)
        self._claim_after = 0.0  # clock.monotonic(); a dry claim or a database outage
        self._probes_after = 0.0
        self._dry = False
        self._woken = False  # a publish (NOTIFY) since the last claim began
        self._loop_told_to_stop = False
        self._loop_stopped = False
        self._closed = False

    # -- control -----------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; in-flight sends finish and are recorded. Signal-safe."""
        self._stopping.set()
        self._outbox.put(WAKE)  # SimpleQueue.put is safe in a signal handler

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run_once(self) -> int:
        """Claim one batch, send it, record every outcome. Returns rows handled."""
        self._start_loop()
        try:
            handled = self._recorder.retry(self._claim) or 0
            self._serve(claims=False, drain=True)
        finally:
            self._finish()
        return handled

    def run(self, *, drain: bool = False) -> Stats:
        """Loop until stop(); with drain, until nothing is due right now."""
        self._start_loop()
        if self.waker is not None:
            self.waker.start(lambda: self._outbox.put(WAKE))
        try:
            self._serve(claims=True, drain=drain)
        finally:
            self._finish()
            self.close()
        return self.stats

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._loop is not None:
            self._finish()
        if self.waker is not None:
            self.waker.close()

    def _start_loop(self) -> None:
        """A fresh send loop for each run (run_once may be called again)."""
        self._loop = SendLoop(
            sender=self._sender,
            concurrency=self.concurrency,
            outbox=self._outbox,
            clock=self.clock,
            timeout=self._timeout,
            liveness=self.liveness,
            hold_after=self.hold_after,
            start_margin=self.start_margin,
        )
        self._loop_told_to_stop = self._loop_stopped = False
        self._handed = 0
        self._capacity = Capacity(ready=0, in_flight=0, received=0)
        self._recorder.writer = self._writer_start()
        self._loop.start()

    def _writer_start(self) -> Writer | None:
        """The recorder's own thread and connection, where it may have them."""
        if not writes_apart():
            return None
        return Writer(outbox=self._outbox, name=f"record-{self.worker_id}")

    def _serve(self, *, claims: bool, drain: bool) -> None:
        failures = 0
        while True:
            if self.stopping and not self._loop_told_to_stop:
                self._loop_told_to_stop = True
                self._loop.stop()
            if claims and not self._loop_told_to_stop and self._wants_claim():
                try:
                    handled = self._claim()
                    failures = 0
                    self._dry = handled == 0
                    if self._dry:
                        self._claim_after = self.clock.monotonic() + self.poll_interval
                except DB_ERRORS as exc:
                    delay = database_down(exc, failures)
                    failures += 1
                    self._claim_after = self.clock.monotonic() + delay
            self._refresh_breakers()
            # Busy or idle (each step keeps its own schedule): the stats and
            # gauges must not stop under load. The heartbeat has its own thread.
            self._maintain()
            if self._recorder.idle:
                if self._loop_told_to_stop or not claims or (drain and self._dry):
                    return
            self._receive(timeout=self._wait_seconds())

    def _finish(self) -> None:
        """Stop the loop, record and give back all it returns, wait for its end."""
        if not self._loop_told_to_stop:
            self._loop_told_to_stop = True
            self._loop.stop()
        while not self._loop_stopped and self._loop.alive:
            self._receive(timeout=0.1)
        self._flush(force=True)
        self._writes_finish()
        self._loop.join()
        self._loop = None

    def _writes_finish(self) -> None:
        """Every outcome recorded (the writer rides out an outage for a lease
        at most), then the writer's thread and connection ended."""
        writer = self._recorder.writer
        if writer is None:
            return
        while self._recorder.writing or self._recorder.record_in() is not None:
            self._receive(timeout=0.1)
            self._flush(force=True)
        self._recorder.writer = None
        writer.close()

    def _wants_claim(self) -> bool:
        if self.clock.monotonic() < self._claim_after:
            return False
        return self._ready_estimate() < self._claim_below()

    def _claim_below(self) -> int:
        """Claim while fewer jobs than this wait in the loop's queue.

        Busy, the next batch is claimed once about half a batch could start.
        Woken by a publish, at once unless a whole batch waits (the most the
        lease counts on, lease.py): the new rows are most likely another
        endpoint's, whose lane takes the next free slot in turn (lanes.py),
        so waiting for the queue to drain would only delay them by the slow
        endpoints' sends ahead.
        """
        if self._woken:
            return max(1, self.batch_size)
        return max(1, min(self.concurrency, self.batch_size // 2))

    def _ready_estimate(self) -> int:
        # The loop's last word, plus what was handed to it since.
        return self._capacity.ready + self._handed - self._capacity.received

    def _wait_seconds(self) -> float:
        record_in = self._recorder.record_in()
        if record_in is not None:
            return record_in
        if sum(self._recorder.outstanding.values()):
            return gate.REFRESH_SECONDS
        wait = self._claim_after - self.clock.monotonic()
        return max(0.0, min(self.poll_interval, wait))

    def _maintain(self) -> None:
        if self.maintenance is None:
            return
        try:
            self.maintenance(self.clock.now())
        except DB_ERRORS as exc:
            logger.warning("maintenance skipped: database unavailable (%s)", exc)
            reconnect()

    # -- what comes back from the loop -----------------------------------

    def _receive(self, *, timeout: float) -> None:
        """Wait up to `timeout` for the loop (or a wake-up), take all there is."""
        try:
            messages = [self._outbox.get(timeout=timeout)]
        except queue.Empty:
            messages = []
        while True:
            try:
                messages.append(self._outbox.get_nowait())
            except queue.Empty:
                break
        for message in messages:
            if isinstance(message, Finished):
                self._recorder.take(message)
            elif isinstance(message, Written):
                self._apply(self._recorder.settle(message))
            elif isinstance(message, Capacity):
                self._capacity = message
            elif isinstance(message, Stopped):
                self._loop_stopped = True
            elif message is WAKE:
                self._dry = False
                self._woken = True
                self._claim_after = 0.0
        self._flush(force=self.stopping)

    def _flush(self, *, force: bool) -> None:
        self._apply(self._recorder.flush(force=force, stopping=self.stopping))

    def _apply(self, flushed: Flushed) -> None:
        if flushed.recorded:
            # Rows left delivering: endpoints that were at max_in_flight have
            # room again, so look at once rather than after the poll interval.
            self._dry = False
            self._claim_after = 0.0
        if flushed.hold is not None:
            self._loop.hold(flushed.hold)
        if flushed.failures:
            self._loop.recorded(flushed.failures)

    # -- claiming ----------------------------------------------------------

    def _claim(self) -> int:
        """Claim probes and a batch and hand them to the loop; rows handled
        (0: nothing due)."""
        with spans.claim_span(worker_id=self.worker_id) as span:
            return self._claim_traced(span)

    def _claim_traced(self, span) -> int:
        # A publish committed from here on is not in this claim's snapshot:
        # its NOTIFY wakes the next one.
        self._woken = False
        now = self.clock.now()
        probes = claiming.Claim(lease_until=now)
        handled = 0
        if self.clock.monotonic() >= self._probes_after:
            # Cooldowns are minutes long: looking twice a second is plenty,
            # and spares every other claim a round trip.
            self._probes_after = self.clock.monotonic() + PROBE_EVERY_SECONDS
            probes = single_claims.claim_probes(
                worker_id=self.worker_id, now=now, lease_seconds=self.lease_seconds
            )
            # Handed over before the next claim: its failure must not strand them.
            handled += self._take(probes, now=now)
            handled += self._take(
                single_claims.claim_verifications(
                    worker_id=self.worker_id, now=now, lease_seconds=self.lease_seconds
                ),
                now=now,
            )
        room = max(1, self.batch_size - max(0, self._ready_estimate()))
        batch = claiming.claim_batch(
            worker_id=self.worker_id,
            now=now,
            lease_seconds=self.lease_seconds,
            limit=room - len(probes.delivery_ids),
        )
        handled += self._take(batch, now=now)
        spans.claim_span_end(
            span,
            claimed=len(probes.delivery_ids) + len(batch.delivery_ids),
            reclaimed=probes.reclaimed + batch.reclaimed,
            probes=len(probes.probe_ids),
        )
        # Endpoints another claim was counting were skipped, not empty: not dry.
        return handled + batch.contended

    def _take(self, claim: claiming.Claim, *, now: datetime) -> int:
        """Load a committed claim's jobs and hand them over; rows handled.

        The claim is committed: its rows are ours and delivering. Loading them
        rides out a database absence like recording does, so a connection lost
        between the two does not leave them stranded until their lease ends.
        """
        handled = self._count_reclaimed(claim)
        if not claim.delivery_ids:
            return handled
        self.stats.claimed += len(claim.delivery_ids)
        jobs = self._recorder.retry(
            lambda: jobs_load(
                delivery_ids=claim.delivery_ids,
                lease_until=claim.lease_until,
                probe_ids=claim.probe_ids,
                verification_ids=claim.verification_ids,
                now=now,
                reclaimed_ids=claim.reclaimed_ids,
                merchants=claim.merchants,
                loaded=(claim.job_rows, claim.secrets),
            )
        )
        if jobs is not None:  # None: gave up after a lease; the lease resends them
            self._watch.learn({j.endpoint_id: j.merchant_id for j in jobs})
            self._hand_over(jobs, now=now)
        return handled + len(claim.delivery_ids)

    def _hand_over(self, jobs: list[Job], *, now: datetime) -> None:
        """To the loop, but jobs of held endpoints and over their rate limit:
        those go back at once, due when the breaker or the bucket allows."""
        send: list[Job] = []
        wait: list[tuple[Job, datetime]] = []
        for job in jobs:
            if self.stopping:
                wait.append((job, now))  # claimed as the stop came: never sent
            elif job.is_probe or job.challenge:
                send.append(job)  # what lets a held endpoint out of its hold
            elif job.endpoint_id in self._watch.held:
                wait.append((job, self._watch.due_at(job.endpoint_id, now=now)))
            elif until := self._rate_limited_until(job, now=now):
                wait.append((job, until))
            else:
                send.append(job)
        self._recorder.release(wait)
        self._handed += len(send)
        self._recorder.handed(send)
        if send:
            self._loop.add(send)

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
            self._recorder.retry(
                lambda: counters.counters_add(shard=self.worker_id, tally=tally)
            )
        self.stats.reclaimed += reclaimed
        self.stats.dead += dead
        return dead

    def _rate_limited_until(self, job: Job, *, now: datetime) -> datetime | None:
        if not job.rate_limit_per_second:
            return None
        wait_seconds = self._recorder.retry(
            lambda: endpoint_rate_take(
                endpoint_id=job.endpoint_id,
                merchant_id=job.merchant_id,
                rate=job.rate_limit_per_second,
                now=now.timestamp(),
            )
        )
        return now + timedelta(seconds=wait_seconds) if wait_seconds else None

    def _refresh_breakers(self) -> None:
        endpoints = [e for e, n in self._recorder.outstanding.items() if n > 0]
        if not endpoints and not self._watch.held:
            return
        try:
            changed = self._watch.refresh(endpoints, now=self.clock.now())
        except DB_ERRORS as exc:
            logger.warning("breakers not re-read: database unavailable (%s)", exc)
            reconnect()
            return
        if changed:
            self._loop.hold(frozenset(self._watch.held))
