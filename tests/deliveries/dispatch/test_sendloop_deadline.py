"""The send loop's own deadline: for a sender that keeps none of its own
(AsyncSender keeps one, tests/deliveries/dispatch/test_transport.py)."""

from __future__ import annotations

import asyncio
import queue
import time

from deliveries.dispatch import sendloop
from deliveries.dispatch.sendloop import Finished, SendLoop, Stopped
from deliveries.models import ErrorKind
from relayproject.lib.clock import SystemClock
from tests.support.jobs import a_job


class NeverAnswers:
    """An async sender that waits forever and keeps no deadline (no
    `keeps_deadline`): only the loop can end its attempt."""

    async def send(self, request):
        await asyncio.Event().wait()


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
        loop.add([a_job(url="http://127.0.0.1:9/hook")])
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
