"""Three real dispatcher processes race over the same 1,000 deliveries."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from deliveries.models import Attempt, Delivery
from tests.support.fakes import Received, Reply
from tests.support.processes import publish_fan_out, received_per_delivery

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

PROCESSES = 3
CONCURRENCY = 4


class OverlapGate:
    """Holds every reply until `opens_at` requests are in flight at once.

    More requests in flight than PROCESSES - 1 dispatchers can send proves all
    of them hold claims at the same moment: the race is real, not a relay.
    """

    def __init__(self, opens_at: int) -> None:
        self.opens_at = opens_at
        self.opened = threading.Event()
        self._waiting = 0
        self._lock = threading.Lock()

    def respond(self, _request: Received) -> Reply:
        with self._lock:
            self._waiting += 1
            if self._waiting >= self.opens_at:
                self.opened.set()
        self.opened.wait(30)
        return Reply()


def test_three_dispatchers_deliver_each_of_1000_deliveries_exactly_once(
    receiver, dispatchers
):
    ids = publish_fan_out(url=receiver.url, events=250, endpoints=4)
    gate = OverlapGate(opens_at=CONCURRENCY * (PROCESSES - 1) + 1)
    receiver.respond = gate.respond

    children = [
        dispatchers.start(
            "--drain",
            f"--concurrency={CONCURRENCY}",
            "--batch-size=25",
            f"--worker-id=race-{n}",
        )
        for n in range(PROCESSES)
    ]
    for child in children:
        assert child.wait(180) == 0, child.stderr[-3000:]  # slow under load

    assert gate.opened.is_set()
    pairs = Counter(
        (r.headers["webhook-id"], r.headers["X-Relay-Delivery-Id"])
        for r in receiver.received
    )
    assert len(ids) == 1000
    assert set(pairs.values()) == {1}
    assert set(received_per_delivery(receiver)) == set(ids)
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert Attempt.objects.count() == 1000
    workers = set(Attempt.objects.values_list("worker_id", flat=True))
    assert workers == {f"race-{n}" for n in range(PROCESSES)}
