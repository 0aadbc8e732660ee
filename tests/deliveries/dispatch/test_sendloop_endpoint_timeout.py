"""The send loop's own deadline follows the endpoint's timeout_seconds: a
longer one is not cut short at the relay's timeout, a shorter one is kept."""

from __future__ import annotations

import asyncio
import queue
import time

from deliveries.dispatch import sendloop
from deliveries.dispatch.sendloop import Finished, SendLoop, Stopped
from deliveries.dispatch.transport import SendResult
from relayproject.lib.clock import SystemClock
from tests.support.jobs import a_job


class AnswersAfter:
    """An async sender that keeps no deadline and answers 200 after `delay`."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def send(self, request):
        await asyncio.sleep(self.delay)
        return SendResult(200, self.delay * 1000)


def next_of(kind: type, outbox: queue.SimpleQueue, *, within: float):
    deadline = time.monotonic() + within
    while True:
        message = outbox.get(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(message, kind):
            return message


def send_one(job, *, sender, timeout: float) -> SendResult:
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    loop = SendLoop(
        sender=sender,
        concurrency=1,
        outbox=outbox,
        clock=SystemClock(),
        timeout=timeout,
    )
    loop.start()
    try:
        loop.add([job])
        return next_of(Finished, outbox, within=5).result
    finally:
        loop.stop()
        next_of(Stopped, outbox, within=5)
        loop.join()


def test_an_endpoint_timeout_longer_than_the_relays_is_not_cut_short(monkeypatch):
    monkeypatch.setattr(sendloop, "DEADLINE_GRACE_SECONDS", 0.1)
    job = a_job(url="http://127.0.0.1:9/hook", timeout_seconds=2.0)

    result = send_one(job, sender=AnswersAfter(0.5), timeout=0.1)

    assert (result.status_code, result.error_kind) == (200, "")


def test_an_endpoint_timeout_shorter_than_the_relays_ends_the_attempt(monkeypatch):
    monkeypatch.setattr(sendloop, "DEADLINE_GRACE_SECONDS", 0.1)
    job = a_job(url="http://127.0.0.1:9/hook", timeout_seconds=0.1)

    result = send_one(job, sender=AnswersAfter(3), timeout=10)

    assert result.error_kind == "timeout"
    assert "overran its 0.1 s deadline" in result.error_message
