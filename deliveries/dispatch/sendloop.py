"""The send loop: one asyncio event loop on its own thread, up to `concurrency`
sends in flight, and no database.

It talks to the dispatcher's database thread through two one-way channels of
plain data: the dispatcher calls add(), recorded(), hold() and stop(), which
run on the loop's thread (call_soon_threadsafe); the loop puts Finished and
Capacity messages on the dispatcher's outbox (a thread-safe queue). No ORM
object crosses between them.

A third channel comes from the heartbeat thread (heartbeat.py): Liveness
messages on their own queue, read by the loop every LIVENESS_TICK_SECONDS.
Another dispatcher may declare this one dead once its heartbeat is
DISPATCHER_DEAD_AFTER_SECONDS old and resend what it holds; so the loop
starts no send while its last confirmed beat is older than `hold_after`
(half that: a freeze, a lost database link), and gives every queued job back
when a beat reports the leases revoked. Sends already on the wire finish;
their outcomes are fenced off by the lease (outcomes.py).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from opentelemetry import trace

from deliveries.dispatch import spans
from deliveries.dispatch.jobs import Job
from deliveries.dispatch.lanes import Lanes
from deliveries.dispatch.outgoing import recorded_headers, signed_request
from deliveries.dispatch.transport import OutgoingRequest, Sender, SendResult
from deliveries.models import ErrorKind
from deliveries.retry import is_delivered
from relayproject.lib.clock import Clock
from relayproject.lib.tracing import spans_made

# A sender that keeps no deadline of its own (no `keeps_deadline`; AsyncSender
# keeps one) has each attempt ended by the loop this much after the timeout,
# so a stuck send can never keep a dispatcher from stopping
# (HTTP_TIMEOUT_SECONDS + this bounds every attempt).
DEADLINE_GRACE_SECONDS = 2.0
LIVENESS_TICK_SECONDS = 0.1  # how often the loop reads its heartbeat's news

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    """A job back from the loop: sent (result) or not sent (result None)."""

    job: Job
    result: SendResult | None
    started_at: datetime | None


@dataclass(frozen=True)
class Capacity:
    """The loop's state when it last changed: what the next claim should fill."""

    ready: int  # queued jobs that could start as soon as a slot frees
    in_flight: int
    received: int  # jobs the loop has been given so far


@dataclass(frozen=True)
class Stopped:
    """The loop has given every job back and will send nothing more."""


@dataclass(frozen=True)
class Liveness:
    """From the heartbeat thread: a beat that reached the database.

    `at` is the clock's monotonic() when the beat was sent (never later than the
    database stamped it); `revoked`: another dispatcher had declared this one
    dead and released its rows, so what it queued may no longer be its own.
    """

    at: float
    revoked: bool = False


class SendLoop:
    def __init__(
        self,
        *,
        sender: Sender,
        concurrency: int,
        outbox: queue.SimpleQueue,
        clock: Clock,
        timeout: float | None = None,
        liveness: queue.SimpleQueue | None = None,
        hold_after: float | None = None,
        start_margin: float | None = None,
    ) -> None:
        self.sender = sender
        self.concurrency = max(1, concurrency)
        self.outbox = outbox
        self.clock = clock
        self.timeout = timeout
        self.send_traceparent = settings.RELAY_SEND_TRACEPARENT
        self.lanes = Lanes()
        self.liveness = liveness
        self.hold_after = hold_after
        # A job whose lease ends within this many seconds is not started.
        self.start_margin = start_margin
        self._confirmed = clock.monotonic()  # the newest beat known to have landed
        self._received = 0
        self._stopping = False
        self._capacity_due = False
        self._tasks: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._traced = False
        self._done: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sendloop", daemon=True)
        self._is_async = inspect.iscoroutinefunction(getattr(sender, "send", None))
        self._deadline_kept = getattr(sender, "keeps_deadline", False)
        # A blocking sender (tests' scripted one) runs on threads of its own.
        self._pool = (
            None
            if self._is_async
            else ThreadPoolExecutor(self.concurrency, thread_name_prefix="send")
        )

    # -- the dispatcher's side (any thread) ---------------------------------

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def add(self, jobs: list[Job]) -> None:
        self._call(self._add, jobs)

    def recorded(self, failures: dict[str, int]) -> None:
        self._call(self._recorded, failures)

    def hold(self, endpoint_ids: frozenset[str]) -> None:
        self._call(self._hold, endpoint_ids)

    def stop(self) -> None:
        """Give queued jobs back, let sends in flight end, then post Stopped."""
        self._call(self._stop)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> None:
        self._thread.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            close = getattr(self.sender, "close", None)
            if close is not None:
                close()  # a blocking sender's own threads and connections

    def _call(self, fn, *args) -> None:
        assert self._loop is not None, "start() first"
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            # The loop has stopped (Stopped was posted): nothing it could
            # still act on, and nothing queued there to give back.
            pass

    # -- the loop's side ----------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        # Asked once per loop, not per send (with no provider the question
        # reads the environment each time): a process installs its tracer
        # provider, if any, before it starts a dispatcher (apps.py).
        self._traced = spans_made()
        if self.liveness is not None:
            # A plain timer callback, not a task: after a freeze it runs in the
            # loop's first turn, before any send's continuation can start more.
            self._loop.call_soon(self._tick)
        self._ready.set()
        await self._done.wait()
        close = getattr(self.sender, "close", None)
        if close is not None and inspect.iscoroutinefunction(close):
            await close()

    def _add(self, jobs: list[Job]) -> None:
        self._received += len(jobs)
        if self._stopping:
            self._give_back(jobs)
        else:
            if any(job.credentials.stale for job in jobs):
                # Its endpoint changed (or went) between claim and load: sent
                # with neither its old nor its new credentials, but given
                # back, unspent, for the next claim to read as it is now.
                self._give_back([job for job in jobs if job.credentials.stale])
                jobs = [job for job in jobs if not job.credentials.stale]
            self._give_back(self.lanes.add(jobs))
        self._pump()

    def _recorded(self, failures: dict[str, int]) -> None:
        self.lanes.recorded(failures)
        self._pump()

    def _hold(self, endpoint_ids: frozenset[str]) -> None:
        self._give_back(self.lanes.hold(endpoint_ids))
        self._pump()

    def _stop(self) -> None:
        self._stopping = True
        self._give_back(self.lanes.drain())
        self._finish_if_idle()

    def _give_back(self, jobs: list[Job]) -> None:
        for job in jobs:
            self.outbox.put(Finished(job, None, None))

    def _tick(self) -> None:
        """Read the heartbeat's news; hold, drop or resume accordingly."""
        was_held = self._unconfirmed()
        revoked = False
        while True:
            try:
                news = self.liveness.get_nowait()
            except queue.Empty:
                break
            self._confirmed = max(self._confirmed, news.at)
            revoked = revoked or news.revoked
        if revoked and not self._stopping:
            # Rows still ours go back pending, unspent; the others' release
            # is fenced out and changes nothing.
            dropped = self.lanes.drain()
            logger.warning(
                "declared dead by another dispatcher: %d queued sends dropped",
                len(dropped),
            )
            self._give_back(dropped)
        if not self._unconfirmed() and (was_held or revoked):
            self._pump()
        if not self._done.is_set():
            self._loop.call_later(LIVENESS_TICK_SECONDS, self._tick)

    def _unconfirmed(self) -> bool:
        """True while this dispatcher cannot tell it is still thought alive."""
        return (
            self.liveness is not None  # no heartbeat told of: nothing to wait for
            and self.hold_after is not None
            and self.clock.monotonic() - self._confirmed > self.hold_after
        )

    def _late(self, job: Job) -> bool:
        """Too little lease left for a whole send: give it back, do not send."""
        if self.start_margin is None:
            return False
        left = (job.lease_until - self.clock.now()).total_seconds()
        return left < self.start_margin

    def _pump(self) -> None:
        """Start what may start now, then tell the dispatcher where we stand."""
        if not self._stopping and not self._unconfirmed():
            free = self.concurrency - self.lanes.in_flight
            taken, late = self.lanes.take(free, late=self._late)
            self._give_back(late)
            for job in taken:
                task = asyncio.ensure_future(self._send(job))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        if not self._capacity_due:
            # Once per turn of the loop, however many sends ended in it.
            self._capacity_due = True
            self._loop.call_soon(self._post_capacity)

    def _post_capacity(self) -> None:
        self._capacity_due = False
        self.outbox.put(
            Capacity(
                ready=self.lanes.ready,
                in_flight=self.lanes.in_flight,
                received=self._received,
            )
        )

    def _finish_if_idle(self) -> None:
        if self._stopping and not self.lanes.in_flight and not self._done.is_set():
            self.outbox.put(Stopped())
            self._done.set()

    async def _send(self, job: Job) -> None:
        started_at = self.clock.now()
        # With no tracer provider the span would be a no-op whose attributes
        # (the URL parsed again, ids) are built and dropped on every send, and
        # its traceparent would be empty anyway.
        span = spans.send_span_start(job) if self._traced else None
        try:
            if span is None:
                result = await self._attempt(job, started_at)
            else:
                with trace.use_span(span, end_on_exit=False):
                    result = await self._attempt(
                        job,
                        started_at,
                        traceparent=spans.traceparent_header(span)
                        if self.send_traceparent
                        else "",
                    )
        except Exception as exc:  # noqa: BLE001 - a send must never kill the loop
            result = SendResult(
                None, 0.0, ErrorKind.CONNECTION, f"{type(exc).__name__}: {exc}"[:500]
            )
        if span is not None:
            spans.send_span_end(span, job, result)
        self.lanes.finished(job, failed=_failed(result))
        self.outbox.put(Finished(job, result, started_at))
        self._pump()
        self._finish_if_idle()

    async def _attempt(
        self, job: Job, started_at: datetime, *, traceparent: str = ""
    ) -> SendResult:
        if not job.secrets:
            return SendResult(None, 0.0, ErrorKind.NO_SIGNING_SECRET, "no live secret")
        request = signed_request(
            job, timestamp=int(started_at.timestamp()), traceparent=traceparent
        )
        result = await self._send_request(request)
        return replace(
            result,
            request_url=request.url,
            request_headers=recorded_headers(request, secret_names=job.headers),
        )

    async def _send_request(self, request: OutgoingRequest) -> SendResult:
        if not self._is_async:
            return await self._loop.run_in_executor(
                self._pool, self.sender.send, request
            )
        if self.timeout is None or self._deadline_kept:
            # AsyncSender ends every attempt within its own timeout (one
            # asyncio.timeout around every await): a second timer per send
            # would only cost (two timers were 7 % of the loop's Python).
            return await self.sender.send(request)
        # The endpoint's own timeout when it has one, longer or shorter.
        timeout = request.timeout or self.timeout
        began = self.clock.monotonic()
        try:
            async with asyncio.timeout(timeout + DEADLINE_GRACE_SECONDS):
                return await self.sender.send(request)
        except TimeoutError:
            return SendResult(
                None,
                (self.clock.monotonic() - began) * 1000,
                ErrorKind.TIMEOUT,
                f"the attempt overran its {timeout:g} s deadline",
            )


def _failed(result: SendResult) -> bool:
    return not is_delivered(result.status_code, acknowledged=result.acknowledged)
