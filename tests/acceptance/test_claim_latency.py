"""A delivery published while the dispatcher is busy is claimed at once: a real
dispatcher process, its send slots and queue full of a slow endpoint's backlog."""

from __future__ import annotations

import threading
import time

import pytest

from deliveries.models import Delivery
from deliveries.services import EventInput, event_publish, events_publish
from tests.support import factories
from tests.support.fakes import Received, Reply
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

LEASE = 60
CONCURRENCY = 4
BACKLOG = 30  # the slow endpoint's rows: its max_in_flight's worth claimed, most queued
# What the test allows between a publish's commit and its claim. Woken by
# NOTIFY and claimed at once it is milliseconds; waiting for the slow
# endpoint's queue to drain (or a poll interval), it is seconds.
CLAIMED_WITHIN = 1.0


def test_a_delivery_published_while_busy_is_claimed_at_once(receiver, dispatchers):
    released = threading.Event()

    def respond(request: Received) -> Reply:
        if "slow" in request.path:
            released.wait(30)
        return Reply()

    receiver.respond = respond
    slow = factories.endpoint(url=receiver.url + "/slow")
    quick = factories.endpoint(url=receiver.url + "/quick")
    events_publish(
        merchant=slow.merchant,
        events=[EventInput("a", {"n": n}) for n in range(BACKLOG)],
    )
    process = dispatchers.start(
        f"--concurrency={CONCURRENCY}",
        "--batch-size=10",
        f"--lease-seconds={LEASE}",
        "--worker-id=busy",
        # The slow sends last until the test releases them, never cut short.
        env={"HTTP_TIMEOUT_SECONDS": "60"},
    )
    try:
        wait_until(
            lambda: (
                Delivery.objects.filter(
                    endpoint=slow, status=Delivery.Status.DELIVERING
                ).count()
                > CONCURRENCY
            ),
            timeout=30,
            what="the slow backlog claimed beyond the send slots",
        )
        time.sleep(1)  # the dispatcher settles into waiting on its slow sends

        event = event_publish(merchant=quick.merchant, type="b", data={})
        delivery = Delivery.objects.get(event=event)
        # Every send slot is held by the slow endpoint: claimed, the new row
        # stays delivering, its lease end telling when it was claimed.
        wait_until(
            lambda: Delivery.objects.filter(
                pk=delivery.pk, claimed_until__isnull=False
            ).exists(),
            timeout=10,
            what="the new delivery's claim while the slow endpoint's queue waited",
        )
        delivery.refresh_from_db()
        claimed_at = delivery.claimed_until.timestamp() - LEASE
        waited = claimed_at - event.created_at.timestamp()
        assert waited < CLAIMED_WITHIN, f"claimed {waited:.2f}s after its publish"
    finally:
        released.set()
        process.kill()
