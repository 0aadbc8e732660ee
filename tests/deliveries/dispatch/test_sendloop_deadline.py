"""The send loop's own deadline: for a sender that keeps none of its own
(AsyncSender keeps one, tests/deliveries/dispatch/test_transport.py)."""

from __future__ import annotations

import asyncio
import queue
import time
from datetime import timedelta

from deliveries.dispatch import sendloop
from deliveries.dispatch.jobs import Job
from deliveries.dispatch.sendloop import Finished, SendLoop, Stopped
from deliveries.models import ErrorKind
from relayproject.lib.clock import SystemClock, utcnow


class NeverAnswers:
    """An async sender that waits forever and keeps no deadline (no
    `keeps_deadline`): only the loop can end its attempt."""

    async def send(self, request):
        await asyncio.Event().wait()


def job() -> Job:
    return Job(
        delivery_id="dlv_1",
        event_id="evt_1",
        endpoint_id="ep_1",
        url="http://127.0.0.1:9/hook",
        body=b"{}",
        secrets=["whsec_c2VjcmV0"],
        attempt_count=0,
        budget_start=0,
        max_attempts=3,
        rate_limit_per_second=None,
        max_in_flight=4,
        is_probe=False,
        lease_until=utcnow() + timedelta(seconds=60),
    )


def next_of(kind: type, outbox: queue.SimpleQueue, *, within: float):
    deadline = time.monotonic() + within
    while True:
        message = outbox.get(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(message, kind):
            return message


def test_a_sender_keeping_no_deadline_is_ended_by_the_loop(monkeypatch):
    monkeypatch.setattr(sendloop, "DEADLINE_GRACE_SECONDS", 0.2)
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    loop = SendLoop(
        sender=NeverAnswers(),
        concurrency=2,
        outbox=outbox,
        clock=SystemClock(),
        timeout=0.1,
    )
    loop.start()
    try:
        began = time.monotonic()
        loop.add([job()])
        done = next_of(Finished, outbox, within=5)
        took = time.monotonic() - began
    finally:
        loop.stop()
        # A send still stuck would keep the loop from stopping: then leave
        # its (daemon) thread rather than hang the run.
        next_of(Stopped, outbox, within=5)
        loop.join()
    assert done.result.error_kind == ErrorKind.TIMEOUT
    assert "overran its 0.1 s deadline" in done.result.error_message
    assert 0.3 <= took < 2
