"""A dispatcher stops in bounded time whatever its receivers do, and a frozen
one (SIGSTOP) never stalls the others: real processes, receivers and database."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter

import pytest

from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from tests.support import factories
from tests.support.fakes import Received, Reply
from tests.support.hostile import HostileReceiver
from tests.support.processes import (
    publish_fan_out,
    received_per_delivery,
    unfinished,
    wait_until,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

TIMEOUT = 3.0  # HTTP_TIMEOUT_SECONDS of the children
MARGIN = 4.0  # "a few seconds": process exit, the last flush, release


def test_sigterm_while_every_send_trickles_exits_0_within_the_timeout(dispatchers):
    with HostileReceiver() as hostile:
        endpoint = factories.endpoint(url=hostile.url("trickled-headers"))
        events_publish(
            merchant=endpoint.merchant,
            events=[EventInput("a", {"n": n}) for n in range(20)],
        )
        child = dispatchers.start(
            "--concurrency=4",
            "--worker-id=stuck",
            env={"HTTP_TIMEOUT_SECONDS": str(TIMEOUT)},
        )
        wait_until(
            lambda: len(hostile.received) >= 4, timeout=30, what="four stuck sends"
        )
        child.signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        assert child.wait(TIMEOUT + 30) == 0, child.stderr[-3000:]
        took = time.monotonic() - stopped_at
    assert took < TIMEOUT + MARGIN, f"exit took {took:.1f}s"

    sent = set(
        Attempt.objects.values_list("delivery_id", flat=True).filter(
            error_kind="timeout"
        )
    )
    assert len(sent) == 4
    assert not Delivery.objects.filter(status="delivering").exists()
    unsent = Delivery.objects.exclude(pk__in=sent)
    assert set(unsent.values_list("status", "attempt_count", "claimed_by")) == {
        ("pending", 0, "")
    }
    assert not Attempt.objects.filter(delivery__in=unsent).exists()


class Timeline:
    """When each request arrived at the receiver (monotonic)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self._lock = threading.Lock()

    def respond(self, _request: Received) -> Reply:
        with self._lock:
            self.arrivals.append(time.monotonic())
        return Reply(delay=0.25)

    def longest_gap(self, start: float, end: float) -> float:
        with self._lock:
            inside = [t for t in self.arrivals if start <= t <= end]
        points = [start, *inside, end]
        return max(b - a for a, b in zip(points, points[1:], strict=False))


def test_a_frozen_dispatcher_never_stalls_the_other_two(receiver, dispatchers):
    timeline = Timeline()
    receiver.respond = timeline.respond
    ids = publish_fan_out(url=receiver.url, events=400, endpoints=4)
    lease = ["--lease-seconds=4", "--batch-size=10", "--concurrency=4"]
    # The sends a thawed dispatcher could not read in time are retried: at a
    # 1 s base, not the default 30 s, which only made the test wait 20-40 s
    # for its last few rows after the freezes it is about.
    quick_retries = {"RETRY_BASE_SECONDS": "1"}
    victim, *others = [
        dispatchers.start(*lease, f"--worker-id=frozen-{n}", env=quick_retries)
        for n in range(3)
    ]
    receiver.wait_for(20, timeout=60)
    rand = random.Random()
    frozen = []
    for _ in range(3):
        time.sleep(rand.uniform(0.2, 1.5))  # a random moment of its work
        victim.signal(signal.SIGSTOP)
        start = time.monotonic()
        time.sleep(10)  # frozen for 10 s: the others must carry on
        victim.signal(signal.SIGCONT)
        frozen.append((start, time.monotonic()))
        if not unfinished():
            break
    wait_until(lambda: not unfinished(), timeout=120, what="every delivery")
    for child in (victim, *others):
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0, child.stderr[-3000:]

    gaps = [timeline.longest_gap(a, b) for a, b in frozen]
    assert max(gaps) < 7, f"the others stalled for {max(gaps):.1f}s"
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    counts = received_per_delivery(receiver)
    assert set(counts) == set(ids)
    twice = {d for d, c in counts.items() if c > 1}
    lost = set(
        Attempt.objects.filter(error_kind="lease_expired").values_list(
            "delivery_id", flat=True
        )
    )
    # A send the frozen dispatcher could not finish reading in time is a
    # failed attempt, retried: at least once, as the contract says.
    retried = set(
        Attempt.objects.filter(worker_id="frozen-0", outcome="retry").values_list(
            "delivery_id", flat=True
        )
    )
    assert twice <= lost | retried
    assert Counter(Attempt.objects.values_list("worker_id", flat=True))["frozen-0"] > 0
