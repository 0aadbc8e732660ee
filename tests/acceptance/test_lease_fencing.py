"""A worker whose lease ran out mid-send cannot overwrite the new owner's outcome."""

from __future__ import annotations

import threading

import pytest
from django.db.models.functions import Now

from deliveries.models import Attempt, Delivery
from tests.support.fakes import Received, Reply
from tests.support.processes import publish_fan_out, wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]


def test_a_late_outcome_from_an_expired_lease_is_fenced_off(receiver, dispatchers):
    [delivery_id] = publish_fan_out(url=receiver.url, events=1, endpoints=1)
    first_arrived = threading.Event()
    new_owner_done = threading.Event()
    calls = []

    def stall_the_first_then_succeed(_request: Received) -> Reply:
        calls.append(1)
        if len(calls) > 1:
            return Reply()
        first_arrived.set()
        new_owner_done.wait(120)  # the new owner may start slowly under load
        return Reply(status=500)

    receiver.respond = stall_the_first_then_succeed
    stalled = dispatchers.start(
        "--once",
        "--lease-seconds=1",
        "--worker-id=stalled",
        # Its send must outlast the new owner's start on a loaded machine.
        env={"HTTP_TIMEOUT_SECONDS": "180"},
    )
    assert first_arrived.wait(30)
    wait_until(
        lambda: Delivery.objects.filter(
            pk=delivery_id, claimed_until__lt=Now()
        ).exists(),
        timeout=10,
        what="the stalled worker's lease to run out",
    )
    new_owner = dispatchers.start("--drain", "--worker-id=new-owner")
    assert new_owner.wait(120) == 0, new_owner.stderr[-3000:]
    new_owner_done.set()
    assert stalled.wait(30) == 0, stalled.stderr[-3000:]

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("succeeded", 2)
    assert f"fenced delivery={delivery_id}" in stalled.stderr
    assert list(
        Attempt.objects.order_by("number").values_list(
            "number", "worker_id", "error_kind", "status_code"
        )
    ) == [(1, "stalled", "lease_expired", None), (2, "new-owner", "", 200)]
